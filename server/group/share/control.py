"""What the control API (server/control/) asks of a share group on a test's behalf, through the
paths the share group coordinator takes itself: a rebalance now (a new group epoch: every
member gets the new target assignment at its next heartbeat), and a member expired now (fenced
as when its session lapses)."""
from __future__ import annotations

from kcoord.protocol.coordinator_records import CoordinatorRecord
from kcoord.protocol.errors import ErrorCode
from kcoord.protocol.share_records import ShareGroupMetadataKey, ShareGroupMetadataValue
from kcoord.server.group.share.coordinator import ShareGroupCoordinator
from kcoord.server.group.share.group import ShareGroup


def force_rebalance(share: ShareGroupCoordinator, group: ShareGroup, reason: str) -> ErrorCode | None:
    if not group.members:
        return ErrorCode.GROUP_ID_NOT_FOUND
    share.write_in_background(group.group_id, [CoordinatorRecord(ShareGroupMetadataKey(group.group_id),
                                                                 ShareGroupMetadataValue(group.group_epoch + 1))])
    return None


def expire_member(share: ShareGroupCoordinator, group: ShareGroup, member: str,
                  reason: str) -> tuple[ErrorCode | None, str | None]:
    if member not in group.members:
        return ErrorCode.UNKNOWN_MEMBER_ID, None
    share.expire(group.group_id, member, "the control API expired its session.")
    return None, member
