"""What the control API (server/control/) asks of a consumer group (KIP-848) on a test's
behalf, through the paths ConsumerGroupProtocol takes itself: a rebalance now (a new group
epoch, the target assignment computed again, every member reconciling to it), and a member
expired now (fenced as when its session lapses)."""
from __future__ import annotations

from protocol.coordinator_records import (
    ConsumerGroupMetadataKey,
    ConsumerGroupMetadataValue,
    CoordinatorRecord,
)
from protocol.errors import ErrorCode
from server.group.consumer.group import ConsumerGroup
from server.group.consumer.protocol import ConsumerGroupProtocol


def force_rebalance(consumer: ConsumerGroupProtocol, group: ConsumerGroup, reason: str) -> ErrorCode | None:
    if not group.members:
        return ErrorCode.GROUP_ID_NOT_FOUND
    records: list[CoordinatorRecord] = []
    undo: list[CoordinatorRecord] = []
    consumer._apply(records, undo, [CoordinatorRecord(ConsumerGroupMetadataKey(group.group_id),
                                                      ConsumerGroupMetadataValue(group.group_epoch + 1))])
    if not group.assignment_scheduled:
        group.assignment_scheduled = True
        consumer.manager.at_end_of_turn(lambda: consumer._assign(group))
    consumer._emit(records, undo)
    return None


def expire_member(consumer: ConsumerGroupProtocol, group: ConsumerGroup, member: str,
                  reason: str) -> tuple[ErrorCode | None, str | None]:
    member_id = member if member in group.members else group.static_members.get(member)
    if member_id is None or member_id not in group.members:
        return ErrorCode.UNKNOWN_MEMBER_ID, None
    consumer._fence_expired(group.group_id, member_id, "the control API expired its session.")
    return None, member_id
