"""The ShareGroup* records of __consumer_offsets (protocol/share_records.py) and the memory they
stand for, both ways: replay() puts a record into memory (a step applies each record as it makes
it; loading replays the log), current_record() reads memory back as the record of a key
(replaying it puts memory back: what undoes a failed append)."""
from __future__ import annotations

import logging
from typing import Any

from kcoord.protocol.coordinator_records import CoordinatorRecord
from kcoord.protocol.share_records import (
    ShareGroupCurrentMemberAssignmentKey,
    ShareGroupMemberMetadataKey,
    ShareGroupMetadataKey,
    ShareGroupMetadataValue,
    ShareGroupStatePartitionMetadataKey,
    ShareGroupStatePartitionMetadataValue,
    ShareGroupTargetAssignmentMemberKey,
    ShareGroupTargetAssignmentMemberValue,
    ShareGroupTargetAssignmentMetadataKey,
    ShareGroupTargetAssignmentMetadataValue,
    TopicPartitionsInfo,
)
from kcoord.server.group.share.group import ShareGroup
from kcoord.server.group.share.member import LEAVE_GROUP_MEMBER_EPOCH, ShareGroupMember

log = logging.getLogger("kcoord.group")

KEY_TYPES = (ShareGroupMemberMetadataKey, ShareGroupMetadataKey, ShareGroupTargetAssignmentMetadataKey,
             ShareGroupTargetAssignmentMemberKey, ShareGroupCurrentMemberAssignmentKey,
             ShareGroupStatePartitionMetadataKey)


def removal_records(gid: str, member_id: str) -> list[CoordinatorRecord]:
    """A member leaving (Kafka's shareGroupFenceMember), in its order."""
    return [CoordinatorRecord(ShareGroupCurrentMemberAssignmentKey(gid, member_id), None),
            CoordinatorRecord(ShareGroupTargetAssignmentMemberKey(gid, member_id), None),
            CoordinatorRecord(ShareGroupMemberMetadataKey(gid, member_id), None)]


def state_metadata_value(group: ShareGroup) -> ShareGroupStatePartitionMetadataValue:
    return ShareGroupStatePartitionMetadataValue(
        tuple(TopicPartitionsInfo(t, name, tuple(sorted(ps))) for t, (name, ps) in group.initialized.items()),
        group.deleting)


class ShareGroupRecords:
    """Replays share group records into the table of groups (`groups`: group id -> group of
    any type; `put_group` / `remove_group` change it), and reads them back."""

    def __init__(self, groups: dict[str, Any], put_group: Any, remove_group: Any) -> None:
        self._groups = groups
        self._put = put_group
        self._remove = remove_group

    def current_record(self, key: Any) -> CoordinatorRecord:
        group = self._groups.get(key.group)
        if not isinstance(group, ShareGroup):
            return CoordinatorRecord(key, None)
        t = type(key)
        value: Any = None
        if t is ShareGroupMetadataKey:
            value = ShareGroupMetadataValue(group.group_epoch)
        elif t is ShareGroupMemberMetadataKey:
            m = group.members.get(key.member_id)
            value = None if m is None else m.metadata_value()
        elif t is ShareGroupTargetAssignmentMetadataKey:
            value = None if group.assignment_epoch == -1 else \
                ShareGroupTargetAssignmentMetadataValue(group.assignment_epoch)
        elif t is ShareGroupTargetAssignmentMemberKey:
            a = group.target_assignment.get(key.member_id)
            value = None if a is None else ShareGroupTargetAssignmentMemberValue(dict(a))
        elif t is ShareGroupCurrentMemberAssignmentKey:
            m = group.members.get(key.member_id)
            value = None if m is None else m.assignment_value()
        elif t is ShareGroupStatePartitionMetadataKey:
            value = state_metadata_value(group) if group.has_state_metadata else None
        return CoordinatorRecord(key, value)

    def replay(self, key: Any, value: Any) -> None:
        t = type(key)
        gid = key.group
        group = self._groups.get(gid)
        if not isinstance(group, ShareGroup):
            if value is None:
                return  # a tombstone for what is not there
            if group is not None and not group.is_dead() and group.num_members():
                log.warning("Skipping %s of %s, a non-empty %s group", t.__name__, gid, group.TYPE)
                return
            group = ShareGroup(gid)
            self._put(group)
        if t is ShareGroupMetadataKey:
            if value is None:
                if group.members:
                    log.warning("Tombstone of share group %s while it has %d members", gid, len(group.members))
                    return
                if group.dead:
                    return  # the request that deleted it removes it once the deletion is durable
                self._remove(gid)
                group.dead = True
                return
            group.group_epoch = value.epoch
        elif t is ShareGroupMemberMetadataKey:
            if value is None:
                group.members.pop(key.member_id, None)
            else:
                old = group.members.get(key.member_id) or ShareGroupMember(key.member_id)
                group.members[key.member_id] = old.with_metadata(value)
        elif t is ShareGroupTargetAssignmentMetadataKey:
            group.assignment_epoch = -1 if value is None else value.assignment_epoch
        elif t is ShareGroupTargetAssignmentMemberKey:
            if value is None:
                group.target_assignment.pop(key.member_id, None)
            else:
                group.target_assignment[key.member_id] = dict(value.partitions)
        elif t is ShareGroupCurrentMemberAssignmentKey:
            old = group.members.get(key.member_id)
            if value is None:
                if old is not None:
                    group.members[key.member_id] = ShareGroupMember(
                        old.member_id, old.rack_id, old.client_id, old.client_host, old.subscribed_topic_names,
                        LEAVE_GROUP_MEMBER_EPOCH, LEAVE_GROUP_MEMBER_EPOCH)
            else:
                group.members[key.member_id] = (old or ShareGroupMember(key.member_id)).with_assignment(value)
        elif t is ShareGroupStatePartitionMetadataKey:
            if value is None:
                group.initialized, group.deleting, group.has_state_metadata = {}, (), False
            else:
                group.initialized = {i.topic_id: (i.topic_name, frozenset(i.partitions)) for i in value.initialized}
                group.deleting = tuple(value.deleting)
                group.has_state_metadata = True
