"""The records the group coordinator keeps in __consumer_offsets, as plain data.

Byte encoding and decoding of every schema version lives in protocol/coordinator_codec.py;
this module is only the shapes the coordinator builds and replays.
"""
from __future__ import annotations

from dataclasses import dataclass, field


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


Key = OffsetKey | GroupKey
Value = OffsetValue | GroupValue


@dataclass(slots=True)
class CoordinatorRecord:
    """One __consumer_offsets record; value None is a tombstone."""

    key: Key
    value: Value | None
