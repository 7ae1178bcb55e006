"""Bytes of the share-group (KIP-932) durable records, as Kafka 4.x writes them:

- __consumer_offsets, key versions 10-15 (the group coordinator's share-group records):
  ShareGroupMemberMetadata (10), ShareGroupMetadata (11), ShareGroupTargetAssignmentMetadata
  (12), ShareGroupTargetAssignmentMember (13), ShareGroupCurrentMemberAssignment (14),
  ShareGroupStatePartitionMetadata (15). Key version 9 (ShareGroupPartitionMetadata) was
  dropped by Kafka 4.1 and is not decoded here.
- __share_group_state (the share coordinator's records): ShareSnapshot (key version 0) and
  ShareUpdate (key version 1), keyed by group, topic id and partition.

Keys are a version and non-flexible fields (int16-length strings, 16-byte uuids, int32); values
a version (0) and a flexible body, built by kafka-python's schema machinery over
protocol/schemas/Share*Value.json. DeliveryCompleteCount is tagged field 0 of ShareSnapshot /
ShareUpdate values (default -1, written only when known).

server/share/state.py writes and replays the __share_group_state records; `kcoord dump` decodes all
of them (docs/share-groups.md).
"""
from __future__ import annotations

import struct
import uuid
from dataclasses import dataclass
from typing import Any

from kafka.protocol.api_data import ApiData

from kcoord.protocol import schemas

_h = struct.Struct(">h")
_i = struct.Struct(">i")

UNKNOWN_DELIVERY_COMPLETE_COUNT = -1


class ShareRecordError(ValueError):
    """Bytes that are not a valid share-group record key or value."""


def _data_class(name: str) -> Any:
    return type(name, (ApiData,), {}, load_json=schemas)


_MetadataV = _data_class("ShareGroupMetadataValue")
_MemberMetadataV = _data_class("ShareGroupMemberMetadataValue")
_TargetMetadataV = _data_class("ShareGroupTargetAssignmentMetadataValue")
_TargetMemberV = _data_class("ShareGroupTargetAssignmentMemberValue")
_CurrentAssignmentV = _data_class("ShareGroupCurrentMemberAssignmentValue")
_StatePartitionMetadataV = _data_class("ShareGroupStatePartitionMetadataValue")
_SnapshotV = _data_class("ShareSnapshotValue")
_UpdateV = _data_class("ShareUpdateValue")

Assignment = dict[uuid.UUID, frozenset[int]]


# ---------------------------------------------------------------------------- the records

@dataclass(frozen=True, slots=True)
class ShareGroupMemberMetadataKey:
    group: str
    member_id: str


@dataclass(frozen=True, slots=True)
class ShareGroupMemberMetadataValue:
    rack_id: str | None
    client_id: str
    client_host: str
    subscribed_topic_names: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class ShareGroupMetadataKey:
    group: str


@dataclass(frozen=True, slots=True)
class ShareGroupMetadataValue:
    epoch: int


@dataclass(frozen=True, slots=True)
class ShareGroupTargetAssignmentMetadataKey:
    group: str


@dataclass(frozen=True, slots=True)
class ShareGroupTargetAssignmentMetadataValue:
    assignment_epoch: int


@dataclass(frozen=True, slots=True)
class ShareGroupTargetAssignmentMemberKey:
    group: str
    member_id: str


@dataclass(frozen=True, slots=True)
class ShareGroupTargetAssignmentMemberValue:
    partitions: Assignment


@dataclass(frozen=True, slots=True)
class ShareGroupCurrentMemberAssignmentKey:
    group: str
    member_id: str


@dataclass(frozen=True, slots=True)
class ShareGroupCurrentMemberAssignmentValue:
    member_epoch: int
    previous_member_epoch: int
    state: int
    assigned: Assignment


@dataclass(frozen=True, slots=True)
class ShareGroupStatePartitionMetadataKey:
    group: str


@dataclass(frozen=True, slots=True)
class TopicPartitionsInfo:
    topic_id: uuid.UUID
    topic_name: str
    partitions: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class ShareGroupStatePartitionMetadataValue:
    initialized: tuple[TopicPartitionsInfo, ...]
    deleting: tuple[tuple[uuid.UUID, str], ...]  # (topic id, topic name)


@dataclass(frozen=True, slots=True)
class ShareStateKey:
    """ShareSnapshotKey (snapshot=True, key version 0) or ShareUpdateKey (key version 1)."""

    snapshot: bool
    group: str
    topic_id: uuid.UUID
    partition: int


@dataclass(frozen=True, slots=True)
class StateBatch:
    first_offset: int
    last_offset: int
    delivery_state: int  # 0 Available, 2 Acknowledged, 4 Archived
    delivery_count: int


@dataclass(frozen=True, slots=True)
class ShareSnapshotValue:
    snapshot_epoch: int
    state_epoch: int
    leader_epoch: int
    start_offset: int
    create_timestamp: int
    write_timestamp: int
    state_batches: tuple[StateBatch, ...]
    delivery_complete_count: int = UNKNOWN_DELIVERY_COMPLETE_COUNT


@dataclass(frozen=True, slots=True)
class ShareUpdateValue:
    snapshot_epoch: int
    leader_epoch: int
    start_offset: int
    state_batches: tuple[StateBatch, ...]
    delivery_complete_count: int = UNKNOWN_DELIVERY_COMPLETE_COUNT


# __consumer_offsets key version of each key class; the number of strings after the group
GROUP_KEY_VERSIONS: dict[type, int] = {
    ShareGroupMemberMetadataKey: 10,
    ShareGroupMetadataKey: 11,
    ShareGroupTargetAssignmentMetadataKey: 12,
    ShareGroupTargetAssignmentMemberKey: 13,
    ShareGroupCurrentMemberAssignmentKey: 14,
    ShareGroupStatePartitionMetadataKey: 15,
}
_GROUP_KEY_CLASSES = {v: k for k, v in GROUP_KEY_VERSIONS.items()}
SHARE_GROUP_KEY_VERSIONS = frozenset(_GROUP_KEY_CLASSES)
_WITH_MEMBER = frozenset({10, 13, 14})

SNAPSHOT_KEY_VERSION = 0
UPDATE_KEY_VERSION = 1


# ---------------------------------------------------------------------------- keys

def _s(s: str) -> bytes:
    b = s.encode()
    if len(b) > 0x7FFF:
        raise ShareRecordError(f"string of {len(b)} bytes does not fit an int16 length")
    return _h.pack(len(b)) + b


def _read_str(b: bytes, pos: int) -> tuple[str, int]:
    if pos + 2 > len(b):
        raise ShareRecordError("truncated key")
    (n,) = _h.unpack_from(b, pos)
    if n < 0 or pos + 2 + n > len(b):
        raise ShareRecordError("malformed key string")
    try:
        return b[pos + 2:pos + 2 + n].decode(), pos + 2 + n
    except UnicodeDecodeError as e:
        raise ShareRecordError(f"key string is not UTF-8: {e}") from None


def encode_group_key(key: Any) -> bytes:
    version = GROUP_KEY_VERSIONS[type(key)]
    parts = [_h.pack(version), _s(key.group)]
    if version in _WITH_MEMBER:
        parts.append(_s(key.member_id))
    return b"".join(parts)


def decode_group_key(b: bytes) -> Any:
    """A __consumer_offsets key of version 10-15."""
    if len(b) < 2:
        raise ShareRecordError("truncated key")
    (version,) = _h.unpack_from(b, 0)
    cls = _GROUP_KEY_CLASSES.get(version)
    if cls is None:
        raise ShareRecordError(f"not a share-group key version: {version}")
    group, pos = _read_str(b, 2)
    fields = [group]
    if version in _WITH_MEMBER:
        member, pos = _read_str(b, pos)
        fields.append(member)
    if pos != len(b):
        raise ShareRecordError(f"key version {version} has {len(b) - pos} trailing bytes")
    return cls(*fields)


def encode_state_key(key: ShareStateKey) -> bytes:
    return b"".join((_h.pack(SNAPSHOT_KEY_VERSION if key.snapshot else UPDATE_KEY_VERSION), _s(key.group),
                     key.topic_id.bytes, _i.pack(key.partition)))


def decode_state_key(b: bytes) -> ShareStateKey:
    """A __share_group_state key."""
    if len(b) < 2:
        raise ShareRecordError("truncated key")
    (version,) = _h.unpack_from(b, 0)
    if version not in (SNAPSHOT_KEY_VERSION, UPDATE_KEY_VERSION):
        raise ShareRecordError(f"unknown __share_group_state key version {version}")
    group, pos = _read_str(b, 2)
    if pos + 20 != len(b):
        raise ShareRecordError("malformed __share_group_state key")
    topic_id = uuid.UUID(bytes=b[pos:pos + 16])
    (partition,) = _i.unpack_from(b, pos + 16)
    return ShareStateKey(version == SNAPSHOT_KEY_VERSION, group, topic_id, partition)


# ---------------------------------------------------------------------------- values

def _tps(assignment: Assignment, cls: Any) -> list[Any]:
    return [cls(topic_id=t, partitions=sorted(ps)) for t, ps in assignment.items()]


def _from_tps(items: Any) -> Assignment:
    return {tp.topic_id: frozenset(tp.partitions or ()) for tp in items or ()}


def _batches(batches: tuple[StateBatch, ...], cls: Any) -> list[Any]:
    return [cls(first_offset=b.first_offset, last_offset=b.last_offset, delivery_state=b.delivery_state,
                delivery_count=b.delivery_count) for b in batches]


def _from_batches(items: Any) -> tuple[StateBatch, ...]:
    return tuple(StateBatch(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count) for b in items or ())


def _dcc(value: Any) -> dict[str, int]:
    """The tagged DeliveryCompleteCount: only written when known."""
    n = value.delivery_complete_count
    return {} if n == UNKNOWN_DELIVERY_COMPLETE_COUNT else {"delivery_complete_count": n}


def encode_value(value: Any) -> bytes:
    t = type(value)
    if t is ShareGroupMetadataValue:
        msg = _MetadataV(version=0, epoch=value.epoch)
    elif t is ShareGroupMemberMetadataValue:
        msg = _MemberMetadataV(version=0, rack_id=value.rack_id, client_id=value.client_id,
                               client_host=value.client_host,
                               subscribed_topic_names=list(value.subscribed_topic_names))
    elif t is ShareGroupTargetAssignmentMetadataValue:
        msg = _TargetMetadataV(version=0, assignment_epoch=value.assignment_epoch)
    elif t is ShareGroupTargetAssignmentMemberValue:
        msg = _TargetMemberV(version=0, topic_partitions=_tps(value.partitions, _TargetMemberV.TopicPartition))
    elif t is ShareGroupCurrentMemberAssignmentValue:
        msg = _CurrentAssignmentV(version=0, member_epoch=value.member_epoch,
                                  previous_member_epoch=value.previous_member_epoch, state=value.state,
                                  assigned_partitions=_tps(value.assigned, _CurrentAssignmentV.TopicPartitions))
    elif t is ShareGroupStatePartitionMetadataValue:
        V = _StatePartitionMetadataV
        msg = V(version=0,
                initialized_topics=[V.TopicPartitionsInfo(topic_id=i.topic_id, topic_name=i.topic_name,
                                                          partitions=list(i.partitions)) for i in value.initialized],
                deleting_topics=[V.TopicInfo(topic_id=tid, topic_name=name) for tid, name in value.deleting])
    elif t is ShareSnapshotValue:
        msg = _SnapshotV(version=0, snapshot_epoch=value.snapshot_epoch, state_epoch=value.state_epoch,
                         leader_epoch=value.leader_epoch, start_offset=value.start_offset,
                         create_timestamp=value.create_timestamp, write_timestamp=value.write_timestamp,
                         state_batches=_batches(value.state_batches, _SnapshotV.StateBatch), **_dcc(value))
    elif t is ShareUpdateValue:
        msg = _UpdateV(version=0, snapshot_epoch=value.snapshot_epoch, leader_epoch=value.leader_epoch,
                       start_offset=value.start_offset,
                       state_batches=_batches(value.state_batches, _UpdateV.StateBatch), **_dcc(value))
    else:
        raise TypeError(f"not a share-group record value: {value!r}")
    return bytes(msg.encode())


def decode_value(key: Any, b: bytes | None) -> Any:
    """The value for `key` (None stays None: a tombstone)."""
    if b is None:
        return None
    t = type(key)
    if len(b) < 2 or _h.unpack_from(b, 0)[0] != 0:
        raise ShareRecordError(f"{t.__name__}: unknown value version")
    try:
        if t is ShareGroupMetadataKey:
            return ShareGroupMetadataValue(_MetadataV.decode(b).epoch)
        if t is ShareGroupMemberMetadataKey:
            v = _MemberMetadataV.decode(b)
            return ShareGroupMemberMetadataValue(v.rack_id, v.client_id, v.client_host,
                                                 tuple(v.subscribed_topic_names or ()))
        if t is ShareGroupTargetAssignmentMetadataKey:
            return ShareGroupTargetAssignmentMetadataValue(_TargetMetadataV.decode(b).assignment_epoch)
        if t is ShareGroupTargetAssignmentMemberKey:
            return ShareGroupTargetAssignmentMemberValue(_from_tps(_TargetMemberV.decode(b).topic_partitions))
        if t is ShareGroupCurrentMemberAssignmentKey:
            v = _CurrentAssignmentV.decode(b)
            return ShareGroupCurrentMemberAssignmentValue(v.member_epoch, v.previous_member_epoch, v.state,
                                                          _from_tps(v.assigned_partitions))
        if t is ShareGroupStatePartitionMetadataKey:
            v = _StatePartitionMetadataV.decode(b)
            return ShareGroupStatePartitionMetadataValue(
                tuple(TopicPartitionsInfo(i.topic_id, i.topic_name, tuple(i.partitions or ()))
                      for i in v.initialized_topics or ()),
                tuple((d.topic_id, d.topic_name) for d in v.deleting_topics or ()))
        if t is ShareStateKey and key.snapshot:
            v = _SnapshotV.decode(b)
            return ShareSnapshotValue(v.snapshot_epoch, v.state_epoch, v.leader_epoch, v.start_offset,
                                      v.create_timestamp, v.write_timestamp, _from_batches(v.state_batches),
                                      v.delivery_complete_count)
        if t is ShareStateKey:
            v = _UpdateV.decode(b)
            return ShareUpdateValue(v.snapshot_epoch, v.leader_epoch, v.start_offset,
                                    _from_batches(v.state_batches), v.delivery_complete_count)
    except (ValueError, struct.error, EOFError, UnicodeDecodeError, TypeError, IndexError) as e:
        raise ShareRecordError(f"malformed {t.__name__} value: {e!r}") from None
    raise TypeError(f"not a share-group record key: {key!r}")
