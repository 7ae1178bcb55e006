"""One consumer group (Kafka's ConsumerGroup): the group epoch, the target assignment and its
epoch, the members, the subscribed topics' metadata, the resolved subscription regexes, and
what is derived from them and kept incrementally: static members, subscriber counts per
topic, the preferred server assignor, and which member epoch holds each partition (what the
reconciliation asks before handing a partition out).

The state (Empty, Assigning, Reconciling, Stable) is not stored: it follows from the rest
after every change, as Kafka's maybeUpdateGroupState.
"""
from __future__ import annotations

import logging
from enum import Enum
from uuid import UUID

from kcoord.protocol.coordinator_records import (
    Assignment,
    ConsumerGroupCurrentMemberAssignmentKey,
    ConsumerGroupMemberMetadataKey,
    ConsumerGroupMetadataKey,
    ConsumerGroupPartitionMetadataKey,
    ConsumerGroupRegularExpressionKey,
    ConsumerGroupRegularExpressionValue,
    ConsumerGroupTargetAssignmentMemberKey,
    ConsumerGroupTargetAssignmentMetadataKey,
    CoordinatorRecord,
    TopicMetadata,
)
from kcoord.protocol.errors import ErrorCode
from kcoord.server.group.consumer.member import ConsumerGroupMember, MemberState
from kcoord.server.group.types import GroupType, OffsetExpiration

log = logging.getLogger("kcoord.group")


class ConsumerGroupState(Enum):
    EMPTY = "Empty"
    ASSIGNING = "Assigning"
    RECONCILING = "Reconciling"
    STABLE = "Stable"
    DEAD = "Dead"

    def __str__(self) -> str:
        return self.value


class ConsumerGroup:
    TYPE = GroupType.CONSUMER

    def __init__(self, group_id: str) -> None:
        self.group_id = group_id
        self.group_epoch = 0
        self.assignment_epoch = -1
        self.members: dict[str, ConsumerGroupMember] = {}
        self.static_members: dict[str, str] = {}  # instance id -> member id
        self.target_assignment: dict[str, Assignment] = {}
        self.subscription_metadata: dict[str, TopicMetadata] = {}
        self.regexes: dict[str, ConsumerGroupRegularExpressionValue] = {}
        self.subscriber_counts: dict[str, int] = {}  # subscribed topic name -> members
        self.regex_counts: dict[str, int] = {}  # regex -> members subscribed with it
        self.assignor_counts: dict[str, int] = {}
        # members speaking the classic protocol, and how many of them support each protocol
        self.num_classic_members = 0
        self.classic_protocol_counts: dict[str, int] = {}
        self.partition_epochs: dict[UUID, dict[int, int]] = {}
        self.dead = False
        self.state = ConsumerGroupState.EMPTY
        # members not reconciled to the target assignment epoch: the state in O(1) per change
        self._unreconciled: set[str] = set()
        self._reconciled_to = -1
        # members whose assignment changed since a heartbeat of theirs last said they own exactly
        # it: their answers repeat it (protocol.py, Assignment answers)
        self.unconfirmed: set[str] = set()
        # the topic registry's change count when the subscription metadata was last computed
        self.metadata_version = -1
        # members whose heartbeat waits for the next target assignment (see assignment.py)
        self.awaiting_assignment: list = []
        self.assignment_scheduled = False
        self.regex_resolution_scheduled = False

    # ---- members ---------------------------------------------------------------------------

    def update_member(self, new: ConsumerGroupMember) -> None:
        old = self.members.get(new.member_id)
        self.members[new.member_id] = new
        self._count_subscription(old, -1)
        self._count_subscription(new, +1)
        if old is not None:
            self._remove_epochs(old)
        self._add_epochs(new)
        if new.instance_id is not None:
            self.static_members[new.instance_id] = new.member_id
        if new.is_reconciled_to(self._reconciled_to):
            self._unreconciled.discard(new.member_id)
        else:
            self._unreconciled.add(new.member_id)
        self.refresh_state()

    def remove_member(self, member_id: str) -> None:
        old = self.members.pop(member_id, None)
        if old is None:
            return
        self._count_subscription(old, -1)
        self._remove_epochs(old)
        if old.instance_id is not None and self.static_members.get(old.instance_id) == member_id:
            del self.static_members[old.instance_id]
        self._unreconciled.discard(member_id)
        self.unconfirmed.discard(member_id)
        self.refresh_state()

    def static_member(self, instance_id: str | None) -> ConsumerGroupMember | None:
        if instance_id is None:
            return None
        mid = self.static_members.get(instance_id)
        return None if mid is None else self.members.get(mid)

    def _count_subscription(self, m: ConsumerGroupMember | None, delta: int) -> None:
        if m is None:
            return
        for name in m.subscribed_topic_names:
            _bump(self.subscriber_counts, name, delta)
        if m.subscribed_topic_regex is not None:
            _bump(self.regex_counts, m.subscribed_topic_regex, delta)
        if m.server_assignor is not None:
            _bump(self.assignor_counts, m.server_assignor, delta)
        if m.classic is not None:
            self.num_classic_members += delta
            for name in m.classic_protocol_names():
                _bump(self.classic_protocol_counts, name, delta)

    def _add_epochs(self, m: ConsumerGroupMember) -> None:
        for assignment in (m.assigned, m.pending_revocation):
            for t, ps in assignment.items():
                epochs = self.partition_epochs.setdefault(t, {})
                for p in ps:
                    if p in epochs:
                        raise AssertionError(f"partition {t}-{p} is owned at epoch {epochs[p]} and at "
                                             f"{m.member_epoch} by {m.member_id} of {self.group_id}")
                    epochs[p] = m.member_epoch

    def _remove_epochs(self, m: ConsumerGroupMember) -> None:
        for assignment in (m.assigned, m.pending_revocation):
            for t, ps in assignment.items():
                epochs = self.partition_epochs.get(t)
                if epochs is None:
                    continue
                for p in ps:
                    epochs.pop(p, None)
                if not epochs:
                    del self.partition_epochs[t]

    def partition_epoch(self, topic_id: UUID, partition: int) -> int:
        epochs = self.partition_epochs.get(topic_id)
        return -1 if epochs is None else epochs.get(partition, -1)

    # ---- derived -----------------------------------------------------------------------------

    def subscribed_topic_names(self) -> set[str]:
        """Topics named by a member, and topics a member's regex resolved to."""
        names = set(self.subscriber_counts)
        for regex in self.regex_counts:
            resolved = self.regexes.get(regex)
            if resolved is not None:
                names.update(resolved.topics)
        return names

    def member_topics(self, m: ConsumerGroupMember) -> set[str]:
        names = set(m.subscribed_topic_names)
        if m.subscribed_topic_regex is not None:
            resolved = self.regexes.get(m.subscribed_topic_regex)
            if resolved is not None:
                names.update(resolved.topics)
        return names

    def supports_classic_protocols(self, protocol_type: str, names: set[str]) -> bool:
        """Kafka's supportsClassicProtocols: a classic member may join with protocol type
        "consumer" and a protocol every classic member already in the group supports."""
        if protocol_type != "consumer":
            return False
        if self.state is ConsumerGroupState.EMPTY:
            return bool(names)
        n = self.num_classic_members
        return any(self.classic_protocol_counts.get(name, 0) == n for name in names)

    def all_members_use_classic_protocol_except(self, member_id: str) -> bool:
        member = self.members.get(member_id)
        return (member is not None and not member.uses_classic_protocol()
                and self.num_classic_members == len(self.members) - 1)

    def waiting_on_unreleased_partition(self, member: ConsumerGroupMember) -> bool:
        """Whether a partition of the member's target is still owned by another member."""
        if member.state is not MemberState.UNRELEASED_PARTITIONS:
            return False
        for topic_id, partitions in self.target_assignment.get(member.member_id, {}).items():
            have = member.assigned.get(topic_id, frozenset())
            for p in partitions:
                if p not in have and self.partition_epoch(topic_id, p) != -1:
                    return True
        return False

    def preferred_assignor(self) -> str | None:
        if not self.assignor_counts:
            return None
        return max(self.assignor_counts.items(), key=lambda kv: kv[1])[0]

    def refresh_state(self) -> None:
        if self.dead:
            self.state = ConsumerGroupState.DEAD
        elif not self.members:
            self.state = ConsumerGroupState.EMPTY
        elif self.group_epoch > self.assignment_epoch:
            self.state = ConsumerGroupState.ASSIGNING
        else:
            epoch = self.assignment_epoch
            if epoch != self._reconciled_to:  # a new target: everyone is measured against it
                self._reconciled_to = epoch
                self._unreconciled = {mid for mid, m in self.members.items() if not m.is_reconciled_to(epoch)}
            self.state = ConsumerGroupState.RECONCILING if self._unreconciled else ConsumerGroupState.STABLE

    # ---- the Group interface (server/group/types.py) -----------------------------------------

    def state_name(self) -> str:
        return self.state.value

    def listed_protocol_type(self) -> str:
        return "consumer"

    def is_empty(self) -> bool:
        return self.state is ConsumerGroupState.EMPTY

    def is_dead(self) -> bool:
        return self.dead

    def num_members(self) -> int:
        return len(self.members)

    def has_member(self, member_id: str) -> bool:
        return member_id in self.members

    def validate_offset_commit(self, member_id: str, instance_id: str | None, epoch: int,
                               transactional: bool = False, version: int = 9) -> ErrorCode | None:
        if self.dead:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if epoch < 0 and not self.members:
            return None  # admin tools commit into an empty group
        member = self.members.get(member_id)
        if member is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if not transactional and not member.uses_classic_protocol() and version < 9:
            return ErrorCode.UNSUPPORTED_VERSION
        return self._validate_epoch(epoch, member)

    def validate_offset_fetch(self, member_id: str | None = None, member_epoch: int = -1) -> ErrorCode | None:
        if member_id is None and member_epoch < 0:
            return None
        member = self.members.get(member_id) if member_id is not None else None
        if member is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        return self._validate_epoch(member_epoch, member)

    @staticmethod
    def _validate_epoch(epoch: int, member: ConsumerGroupMember) -> ErrorCode | None:
        if epoch != member.member_epoch:
            return ErrorCode.ILLEGAL_GENERATION if member.uses_classic_protocol() else ErrorCode.STALE_MEMBER_EPOCH
        return None

    def validate_offset_delete(self) -> ErrorCode | None:
        return ErrorCode.GROUP_ID_NOT_FOUND if self.dead else None

    def validate_delete_group(self) -> ErrorCode | None:
        if self.dead:
            return ErrorCode.GROUP_ID_NOT_FOUND
        return None if self.state is ConsumerGroupState.EMPTY else ErrorCode.NON_EMPTY_GROUP

    def is_subscribed_to_topic(self, topic: str) -> bool:
        return topic in self.subscription_metadata or topic in self.subscribed_topic_names()

    def offset_expiration(self) -> OffsetExpiration | None:
        return OffsetExpiration(None, self.subscribed_topic_names())

    def tombstones(self) -> list[CoordinatorRecord]:
        """Kafka's createGroupTombstoneRecords, in its order."""
        g = self.group_id
        out = [CoordinatorRecord(ConsumerGroupCurrentMemberAssignmentKey(g, m), None) for m in self.members]
        out += [CoordinatorRecord(ConsumerGroupTargetAssignmentMemberKey(g, m), None) for m in self.members]
        out.append(CoordinatorRecord(ConsumerGroupTargetAssignmentMetadataKey(g), None))
        out += [CoordinatorRecord(ConsumerGroupMemberMetadataKey(g, m), None) for m in self.members]
        out += [CoordinatorRecord(ConsumerGroupRegularExpressionKey(g, r), None) for r in self.regexes]
        out.append(CoordinatorRecord(ConsumerGroupPartitionMetadataKey(g), None))
        out.append(CoordinatorRecord(ConsumerGroupMetadataKey(g), None))
        return out

    def mark_dead(self, now_ms: int, error: ErrorCode) -> None:
        self.dead = True
        self.refresh_state()
        waiting, self.awaiting_assignment = self.awaiting_assignment, []
        for w in waiting:
            w.fail(error)

    def revive(self) -> None:
        self.dead = False
        self.refresh_state()

    def __repr__(self) -> str:
        return (f"ConsumerGroup(groupId={self.group_id}, epoch={self.group_epoch}, "
                f"assignmentEpoch={self.assignment_epoch}, state={self.state}, members={list(self.members)})")


def _bump(counts: dict[str, int], key: str, delta: int) -> None:
    n = counts.get(key, 0) + delta
    if n > 0:
        counts[key] = n
    else:
        counts.pop(key, None)
