"""What the control API (server/control/) asks of the classic coordinator on a test's
behalf: start a rebalance now, and expire a member now, each through the same paths a
member's rejoin or a lapsed session takes."""
from __future__ import annotations

from protocol.errors import ErrorCode
from server.group.base import CoordinatorBase, log
from server.group.member import MemberMetadata
from server.group.state import GroupState


class ControlMixin(CoordinatorBase):
    def force_rebalance(self, group_id: str, reason: str) -> tuple[ErrorCode, str]:
        """A Stable or CompletingRebalance group goes to PreparingRebalance, as when a member
        changes its subscription: members learn it from their next heartbeat
        (REBALANCE_IN_PROGRESS) and rejoin. Returns (error, the group's state)."""
        group = self._groups.get(group_id)
        if group is None or group.state is GroupState.DEAD:
            return ErrorCode.GROUP_ID_NOT_FOUND, "Dead"
        if group.state is GroupState.PREPARING_REBALANCE:
            return ErrorCode.NONE, str(group.state)
        if not group.can_rebalance():
            return ErrorCode.NON_EMPTY_GROUP if group.members else ErrorCode.GROUP_ID_NOT_FOUND, str(group.state)
        self._prepare_rebalance(group, reason)  # type: ignore[attr-defined]
        return ErrorCode.NONE, str(group.state)

    def expire_member(self, group_id: str, member: str, reason: str) -> tuple[ErrorCode, str | None]:
        """Remove a member (by member id or group.instance.id) as its session timeout would:
        the group rebalances without it, and it learns of it from its next request
        (UNKNOWN_MEMBER_ID). Returns (error, the member id removed)."""
        group = self._groups.get(group_id)
        if group is None or group.state is GroupState.DEAD:
            return ErrorCode.GROUP_ID_NOT_FOUND, None
        m: MemberMetadata | None = group.members.get(member)
        if m is None:
            mid = group.current_static_member_id(member)
            m = group.members.get(mid) if mid is not None else None
        if m is None:
            return ErrorCode.UNKNOWN_MEMBER_ID, None
        log.info("Member %s in group %s has failed (expired by the control API), removing it from the group",
                 m.member_id, group_id)
        self._remove_member_and_update_group(group, m, reason)  # type: ignore[attr-defined]
        self._remove_heartbeat_for_leaving_member(group, m.member_id)  # type: ignore[attr-defined]
        return ErrorCode.NONE, m.member_id
