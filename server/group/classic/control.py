"""What the control API (server/control/) asks of a classic group on a test's behalf: a
rebalance now, a member expired now, each through the path a member's rejoin or a lapsed
session takes in ClassicMembership."""
from __future__ import annotations

from kcoord.protocol.errors import ErrorCode
from kcoord.server.group.classic.group import ClassicGroup
from kcoord.server.group.classic.membership import ClassicMembership
from kcoord.server.group.classic.state import GroupState
from kcoord.server.group.group_manager import log


def force_rebalance(classic: ClassicMembership, group: ClassicGroup, reason: str) -> ErrorCode | None:
    """A Stable or CompletingRebalance group goes to PreparingRebalance, as when a member
    changes its subscription: members learn it from their next heartbeat
    (REBALANCE_IN_PROGRESS) and rejoin."""
    if group.state is GroupState.PREPARING_REBALANCE:
        return None
    if not group.can_rebalance():
        return ErrorCode.GROUP_ID_NOT_FOUND if group.state in (GroupState.EMPTY, GroupState.DEAD) \
            else ErrorCode.REBALANCE_IN_PROGRESS
    classic._prepare_rebalance(group, reason)
    return None


def expire_member(classic: ClassicMembership, group: ClassicGroup, member: str,
                  reason: str) -> tuple[ErrorCode | None, str | None]:
    """Remove a member (by member id or group.instance.id) as its session timeout would: the
    group rebalances without it, and it learns of it from its next request
    (UNKNOWN_MEMBER_ID). Returns (error, the member id removed)."""
    m = group.members.get(member)
    if m is None:
        mid = group.current_static_member_id(member)
        m = group.members.get(mid) if mid is not None else None
    if m is None:
        return ErrorCode.UNKNOWN_MEMBER_ID, None
    log.info("Member %s in group %s has failed (expired by the control API), removing it from the group",
             m.member_id, group.group_id)
    classic._remove_member_and_update_group(group, m, reason)
    classic._remove_heartbeat_for_leaving_member(group, m.member_id)
    return None, m.member_id
