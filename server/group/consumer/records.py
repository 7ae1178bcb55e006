"""The ConsumerGroup* records of __consumer_offsets and the memory they stand for, both ways:
replay() puts a record into memory (writes.py applies each record as it is made; loading replays
the log), current_record() reads memory back as the record of a key (replaying it puts memory
back: what the runtime reverts a failed write with), and the records the protocol's steps write
more than once."""
from __future__ import annotations

import logging
from typing import Any

from kcoord.protocol.coordinator_records import (
    ConsumerGroupCurrentMemberAssignmentKey,
    ConsumerGroupMemberMetadataKey,
    ConsumerGroupMetadataKey,
    ConsumerGroupMetadataValue,
    ConsumerGroupPartitionMetadataKey,
    ConsumerGroupPartitionMetadataValue,
    ConsumerGroupRegularExpressionKey,
    ConsumerGroupTargetAssignmentMemberKey,
    ConsumerGroupTargetAssignmentMemberValue,
    ConsumerGroupTargetAssignmentMetadataKey,
    ConsumerGroupTargetAssignmentMetadataValue,
    CoordinatorRecord,
)
from kcoord.server.group.consumer.group import ConsumerGroup
from kcoord.server.group.consumer.member import LEAVE_GROUP_MEMBER_EPOCH, ConsumerGroupMember
from kcoord.server.group.group_manager import GroupMetadataManager

log = logging.getLogger("kcoord.group")


def removal_records(gid: str, member_id: str) -> list[CoordinatorRecord]:
    """Kafka's removeMember: the order matters."""
    return [CoordinatorRecord(ConsumerGroupCurrentMemberAssignmentKey(gid, member_id), None),
            CoordinatorRecord(ConsumerGroupTargetAssignmentMemberKey(gid, member_id), None),
            CoordinatorRecord(ConsumerGroupMemberMetadataKey(gid, member_id), None)]


def epoch_bump(group: ConsumerGroup) -> CoordinatorRecord:
    """The record of the group's next group epoch."""
    return CoordinatorRecord(ConsumerGroupMetadataKey(group.group_id),
                             ConsumerGroupMetadataValue(group.group_epoch + 1))


class ConsumerGroupRecords:
    """Replays the consumer group records into the manager's groups, and reads them back."""

    def __init__(self, manager: GroupMetadataManager) -> None:
        self.manager = manager
        self._groups = manager.groups_by_id

    def current_record(self, key: Any) -> CoordinatorRecord:
        """The record that says what memory holds now for `key` (a tombstone when nothing)."""
        group = self._groups.get(key.group)
        if not isinstance(group, ConsumerGroup):
            return CoordinatorRecord(key, None)
        t = type(key)
        value: Any = None
        if t is ConsumerGroupMetadataKey:
            value = ConsumerGroupMetadataValue(group.group_epoch)
        elif t is ConsumerGroupPartitionMetadataKey:
            value = ConsumerGroupPartitionMetadataValue(dict(group.subscription_metadata))
        elif t is ConsumerGroupMemberMetadataKey:
            m = group.members.get(key.member_id)
            value = None if m is None else m.metadata_value()
        elif t is ConsumerGroupTargetAssignmentMetadataKey:
            value = None if group.assignment_epoch == -1 else \
                ConsumerGroupTargetAssignmentMetadataValue(group.assignment_epoch)
        elif t is ConsumerGroupTargetAssignmentMemberKey:
            a = group.target_assignment.get(key.member_id)
            value = None if a is None else ConsumerGroupTargetAssignmentMemberValue(a)
        elif t is ConsumerGroupCurrentMemberAssignmentKey:
            m = group.members.get(key.member_id)
            value = None if m is None else m.assignment_value()
        elif t is ConsumerGroupRegularExpressionKey:
            value = group.regexes.get(key.regex)
        return CoordinatorRecord(key, value)

    def replay(self, key: Any, value: Any) -> None:
        t = type(key)
        gid = key.group
        group = self._groups.get(gid)
        if not isinstance(group, ConsumerGroup):
            if value is None:
                return  # a tombstone for what is not there
            if group is not None and not group.is_dead() and group.num_members():
                log.warning("Skipping %s of %s, a non-empty %s group", t.__name__, gid, group.TYPE)
                return
            # offsets-only (Empty) classic groups give way, as Kafka's simple groups do
            group = ConsumerGroup(gid)
            self.manager.put_group(group)
        if t is ConsumerGroupMetadataKey:
            if value is None:
                if group.members:
                    log.warning("Tombstone of consumer group %s while it has %d members", gid, len(group.members))
                    return
                if group.dead and not self.manager.is_group_loading(gid):
                    return  # the request that deleted it removes it once the deletion is durable
                self.manager.remove_group(gid)
                group.dead = True
                return
            group.group_epoch = value.epoch
        elif t is ConsumerGroupPartitionMetadataKey:
            group.subscription_metadata = {} if value is None else dict(value.topics)
        elif t is ConsumerGroupMemberMetadataKey:
            if value is None:
                group.remove_member(key.member_id)
            else:
                old = group.members.get(key.member_id) or ConsumerGroupMember(key.member_id)
                group.update_member(old.with_metadata(value))
        elif t is ConsumerGroupTargetAssignmentMetadataKey:
            group.assignment_epoch = -1 if value is None else value.assignment_epoch
        elif t is ConsumerGroupTargetAssignmentMemberKey:
            if value is None:
                group.target_assignment.pop(key.member_id, None)
            else:
                group.target_assignment[key.member_id] = value.partitions
        elif t is ConsumerGroupCurrentMemberAssignmentKey:
            old = group.members.get(key.member_id)
            if value is None:
                if old is not None:
                    group.update_member(old.with_epoch(LEAVE_GROUP_MEMBER_EPOCH, old.state, {}, {}))
            else:
                group.update_member((old or ConsumerGroupMember(key.member_id)).with_assignment(value))
        elif t is ConsumerGroupRegularExpressionKey:
            if value is None:
                group.regexes.pop(key.regex, None)
            else:
                group.regexes[key.regex] = value
        group.refresh_state()
