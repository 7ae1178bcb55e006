"""What the control API (server/control/) asks of a consumer group (KIP-848) on a test's
behalf, through the paths ConsumerGroupProtocol takes itself: a rebalance now (a new group
epoch, the target assignment computed again, every member reconciling to it), and a member
expired now (fenced as when its session lapses)."""
from __future__ import annotations

from kcoord.protocol.coordinator_records import CoordinatorRecord
from kcoord.protocol.errors import ErrorCode
from kcoord.server.group.consumer.group import ConsumerGroup
from kcoord.server.group.consumer.protocol import ConsumerGroupProtocol
from kcoord.server.group.consumer.records import epoch_bump


def force_rebalance(consumer: ConsumerGroupProtocol, group: ConsumerGroup, reason: str) -> ErrorCode | None:
    if not group.members:
        return ErrorCode.GROUP_ID_NOT_FOUND
    records: list[CoordinatorRecord] = []
    undo: list[CoordinatorRecord] = []
    consumer.writes.apply(records, undo, [epoch_bump(group)])
    consumer.assignment.schedule(group)
    consumer.writes.emit(records, undo)
    return None


def expire_member(consumer: ConsumerGroupProtocol, group: ConsumerGroup, member: str,
                  reason: str) -> tuple[ErrorCode | None, str | None]:
    member_id = member if member in group.members else group.static_members.get(member)
    if member_id is None or member_id not in group.members:
        return ErrorCode.UNKNOWN_MEMBER_ID, None
    consumer.leaving.expire(group.group_id, member_id, "the control API expired its session.")
    return None, member_id
