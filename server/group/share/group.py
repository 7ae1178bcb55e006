"""One share group (Kafka's ShareGroup): the group epoch, the target assignment and its epoch,
the members, the share partitions whose state was initialized (ShareGroupStatePartitionMetadata)
and, in memory only, the subscribed topics' metadata the last epoch was computed for.

Empty without members, else Stable (a share member takes its target at once). The group
stays, Empty, when its last member leaves; DeleteGroups removes it. It has no committed offsets:
OffsetCommit and OffsetDelete answer GROUP_ID_NOT_FOUND and OffsetFetch finds no offsets,
as Kafka answers.
"""
from __future__ import annotations

from uuid import UUID

from kcoord.protocol.coordinator_records import CoordinatorRecord
from kcoord.protocol.errors import ErrorCode
from kcoord.protocol.share_records import (
    Assignment,
    ShareGroupCurrentMemberAssignmentKey,
    ShareGroupMemberMetadataKey,
    ShareGroupMetadataKey,
    ShareGroupStatePartitionMetadataKey,
    ShareGroupTargetAssignmentMemberKey,
    ShareGroupTargetAssignmentMetadataKey,
)
from kcoord.server.group.share.member import ShareGroupMember
from kcoord.server.group.types import GroupType, OffsetExpiration

PROTOCOL_TYPE = "share"


class ShareGroup:
    TYPE = GroupType.SHARE

    def __init__(self, group_id: str) -> None:
        self.group_id = group_id
        self.group_epoch = 0
        self.assignment_epoch = -1  # -1: no ShareGroupTargetAssignmentMetadata record
        self.members: dict[str, ShareGroupMember] = {}
        self.target_assignment: dict[str, Assignment] = {}
        # ShareGroupStatePartitionMetadata: topic id -> (name, partitions), and the deleting topics
        self.initialized: dict[UUID, tuple[str, frozenset[int]]] = {}
        self.deleting: tuple[tuple[UUID, str], ...] = ()
        self.has_state_metadata = False
        # the subscribed topics' metadata the group epoch stands for (not persisted)
        self.subscription_metadata: dict[str, tuple[UUID, int]] = {}
        self.metadata_version = -1  # the topic source's `changes` it was computed at
        self.dead = False

    # ---- Group ---------------------------------------------------------------------------

    def state_name(self) -> str:
        if self.dead:
            return "Dead"
        return "Stable" if self.members else "Empty"

    def listed_protocol_type(self) -> str:
        return PROTOCOL_TYPE

    def is_empty(self) -> bool:
        return not self.members

    def is_dead(self) -> bool:
        return self.dead

    def num_members(self) -> int:
        return len(self.members)

    def has_member(self, member_id: str) -> bool:
        return member_id in self.members

    def validate_offset_commit(self, member_id: str, instance_id: str | None, generation_or_epoch: int,
                               transactional: bool = False, version: int = 9) -> ErrorCode | None:
        return ErrorCode.GROUP_ID_NOT_FOUND

    def validate_offset_fetch(self, member_id: str | None = None, member_epoch: int = -1) -> ErrorCode | None:
        # Kafka's answer for a group that is not a consumer group: every partition without an
        # offset (-1), no error; a share group has none to fetch
        return None

    def validate_offset_delete(self) -> ErrorCode | None:
        return ErrorCode.GROUP_ID_NOT_FOUND

    def validate_delete_group(self) -> ErrorCode | None:
        if self.dead:
            return ErrorCode.GROUP_ID_NOT_FOUND
        return ErrorCode.NON_EMPTY_GROUP if self.members else None

    def is_subscribed_to_topic(self, topic: str) -> bool:
        return any(topic in m.subscribed_topic_names for m in self.members.values())

    def offset_expiration(self) -> OffsetExpiration | None:
        return None  # a share group commits no offsets

    def tombstones(self) -> list[CoordinatorRecord]:
        """Kafka's createGroupTombstoneRecords for a share group, in its order."""
        g = self.group_id
        out = [CoordinatorRecord(ShareGroupCurrentMemberAssignmentKey(g, m), None) for m in self.members]
        out += [CoordinatorRecord(ShareGroupTargetAssignmentMemberKey(g, m), None) for m in self.members]
        out.append(CoordinatorRecord(ShareGroupTargetAssignmentMetadataKey(g), None))
        out += [CoordinatorRecord(ShareGroupMemberMetadataKey(g, m), None) for m in self.members]
        out.append(CoordinatorRecord(ShareGroupStatePartitionMetadataKey(g), None))
        out.append(CoordinatorRecord(ShareGroupMetadataKey(g), None))
        return out

    def mark_dead(self, now_ms: int, error: ErrorCode) -> None:
        self.dead = True

    def revive(self) -> None:
        self.dead = False

    # ---- membership ----------------------------------------------------------------------

    def subscribed_topic_names(self) -> set[str]:
        return {t for m in self.members.values() for t in m.subscribed_topic_names}

    def __repr__(self) -> str:
        return (f"ShareGroup(groupId={self.group_id}, epoch={self.group_epoch}, "
                f"assignmentEpoch={self.assignment_epoch}, state={self.state_name()}, members={list(self.members)})")
