"""The records the group coordinator keeps in __consumer_offsets, as plain data.

Byte encoding and decoding of every schema version lives in protocol/coordinator_codec.py;
this module is only the shapes the coordinator builds and replays.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from uuid import UUID


@dataclass(frozen=True, slots=True)
class OffsetKey:
    """OffsetCommitKey (key versions 0 and 1)."""

    group: str
    topic: str
    partition: int


@dataclass(slots=True)
class OffsetValue:
    """OffsetCommitValue; expire_timestamp is only set by v1 (explicit retention)."""

    offset: int
    metadata: str = ""
    commit_timestamp: int = -1
    leader_epoch: int = -1
    expire_timestamp: int | None = None


@dataclass(frozen=True, slots=True)
class GroupKey:
    """GroupMetadataKey (key version 2)."""

    group: str


@dataclass(slots=True)
class MemberValue:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout: int
    session_timeout: int
    subscription: bytes
    assignment: bytes


@dataclass(slots=True)
class GroupValue:
    """GroupMetadataValue: what a group looks like once a rebalance completed (or it emptied)."""

    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    current_state_timestamp: int = -1
    members: list[MemberValue] = field(default_factory=list)


# ---- consumer groups (KIP-848): key versions 3-8 and 16 --------------------------------------

# topic id -> partitions: how assignments are kept in the records and in memory
Assignment = dict[UUID, frozenset[int]]


@dataclass(frozen=True, slots=True)
class ConsumerGroupMetadataKey:
    """key version 3; value: the group epoch."""

    group: str


@dataclass(slots=True)
class ConsumerGroupMetadataValue:
    epoch: int


@dataclass(frozen=True, slots=True)
class ConsumerGroupPartitionMetadataKey:
    """key version 4; value: the subscribed topics' metadata (what bumps the group epoch)."""

    group: str


@dataclass(frozen=True, slots=True)
class TopicMetadata:
    topic_id: UUID
    name: str
    num_partitions: int


@dataclass(slots=True)
class ConsumerGroupPartitionMetadataValue:
    topics: dict[str, TopicMetadata]


@dataclass(frozen=True, slots=True)
class ConsumerGroupMemberMetadataKey:
    """key version 5; value: a member's subscription and identity."""

    group: str
    member_id: str


@dataclass(slots=True)
class ClassicMemberMetadata:
    """A member that speaks the classic protocol inside a consumer group."""

    session_timeout_ms: int
    protocols: list[tuple[str, bytes]]


@dataclass(slots=True)
class ConsumerGroupMemberMetadataValue:
    instance_id: str | None
    rack_id: str | None
    client_id: str
    client_host: str
    subscribed_topic_names: tuple[str, ...]
    subscribed_topic_regex: str | None
    rebalance_timeout_ms: int
    server_assignor: str | None
    classic: ClassicMemberMetadata | None = None


@dataclass(frozen=True, slots=True)
class ConsumerGroupTargetAssignmentMetadataKey:
    """key version 6; value: the epoch of the target assignment."""

    group: str


@dataclass(slots=True)
class ConsumerGroupTargetAssignmentMetadataValue:
    assignment_epoch: int


@dataclass(frozen=True, slots=True)
class ConsumerGroupTargetAssignmentMemberKey:
    """key version 7; value: one member's target assignment."""

    group: str
    member_id: str


@dataclass(slots=True)
class ConsumerGroupTargetAssignmentMemberValue:
    partitions: Assignment


@dataclass(frozen=True, slots=True)
class ConsumerGroupCurrentMemberAssignmentKey:
    """key version 8; value: where a member stands in its reconciliation."""

    group: str
    member_id: str


@dataclass(slots=True)
class ConsumerGroupCurrentMemberAssignmentValue:
    member_epoch: int
    previous_member_epoch: int
    state: int
    assigned: Assignment
    pending_revocation: Assignment


@dataclass(frozen=True, slots=True)
class ConsumerGroupRegularExpressionKey:
    """key version 16; value: the topics a subscription regex resolved to."""

    group: str
    regex: str


@dataclass(slots=True)
class ConsumerGroupRegularExpressionValue:
    topics: tuple[str, ...]
    version: int
    timestamp: int


ConsumerGroupKey = (
    ConsumerGroupMetadataKey
    | ConsumerGroupPartitionMetadataKey
    | ConsumerGroupMemberMetadataKey
    | ConsumerGroupTargetAssignmentMetadataKey
    | ConsumerGroupTargetAssignmentMemberKey
    | ConsumerGroupCurrentMemberAssignmentKey
    | ConsumerGroupRegularExpressionKey
)
ConsumerGroupValue = (
    ConsumerGroupMetadataValue
    | ConsumerGroupPartitionMetadataValue
    | ConsumerGroupMemberMetadataValue
    | ConsumerGroupTargetAssignmentMetadataValue
    | ConsumerGroupTargetAssignmentMemberValue
    | ConsumerGroupCurrentMemberAssignmentValue
    | ConsumerGroupRegularExpressionValue
)

Key = OffsetKey | GroupKey | ConsumerGroupKey
Value = OffsetValue | GroupValue | ConsumerGroupValue


@dataclass(slots=True)
class CoordinatorRecord:
    """One __consumer_offsets record; value None is a tombstone."""

    key: Key
    value: Value | None
