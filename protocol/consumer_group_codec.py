"""Bytes of the consumer-group (KIP-848) records of __consumer_offsets: key versions 3-8
(ConsumerGroupMetadata, ConsumerGroupPartitionMetadata, ConsumerGroupMemberMetadata,
ConsumerGroupTargetAssignmentMetadata, ConsumerGroupTargetAssignmentMember,
ConsumerGroupCurrentMemberAssignment) and 16 (ConsumerGroupRegularExpression), as Kafka 4.x
writes them: keys are a version and plain strings; values a version and a flexible body
(kafka-python's schema machinery over protocol/schemas/ConsumerGroup*Value.json).

protocol/coordinator_codec.py hands every key version it does not own to this module.
"""
from __future__ import annotations

import struct
from typing import Any

from kafka.protocol.api_data import ApiData

from kcoord.protocol import schemas
from kcoord.protocol.coordinator_records import (
    Assignment,
    ClassicMemberMetadata,
    ConsumerGroupCurrentMemberAssignmentKey,
    ConsumerGroupCurrentMemberAssignmentValue,
    ConsumerGroupMemberMetadataKey,
    ConsumerGroupMemberMetadataValue,
    ConsumerGroupMetadataKey,
    ConsumerGroupMetadataValue,
    ConsumerGroupPartitionMetadataKey,
    ConsumerGroupPartitionMetadataValue,
    ConsumerGroupRegularExpressionKey,
    ConsumerGroupRegularExpressionValue,
    ConsumerGroupTargetAssignmentMemberKey,
    ConsumerGroupTargetAssignmentMemberValue,
    ConsumerGroupTargetAssignmentMetadataKey,
    ConsumerGroupTargetAssignmentMetadataValue,
    TopicMetadata,
)


def _data_class(name: str) -> Any:
    """kafka-python finds a data class's schema by the class name."""
    return type(name, (ApiData,), {}, load_json=schemas)


_MetadataV = _data_class("ConsumerGroupMetadataValue")
_PartitionMetadataV = _data_class("ConsumerGroupPartitionMetadataValue")
_MemberMetadataV = _data_class("ConsumerGroupMemberMetadataValue")
_TargetMetadataV = _data_class("ConsumerGroupTargetAssignmentMetadataValue")
_TargetMemberV = _data_class("ConsumerGroupTargetAssignmentMemberValue")
_CurrentAssignmentV = _data_class("ConsumerGroupCurrentMemberAssignmentValue")
# its field Version is called ResolvedVersion in our schema: `version` is the record's own
_RegexV = _data_class("ConsumerGroupRegularExpressionValue")


_h = struct.Struct(">h")

# key class -> (key version, number of string fields after the group)
KEY_VERSIONS: dict[type, int] = {
    ConsumerGroupMetadataKey: 3,
    ConsumerGroupPartitionMetadataKey: 4,
    ConsumerGroupMemberMetadataKey: 5,
    ConsumerGroupTargetAssignmentMetadataKey: 6,
    ConsumerGroupTargetAssignmentMemberKey: 7,
    ConsumerGroupCurrentMemberAssignmentKey: 8,
    ConsumerGroupRegularExpressionKey: 16,
}
_KEY_CLASSES = {v: k for k, v in KEY_VERSIONS.items()}
CONSUMER_KEY_VERSIONS = frozenset(_KEY_CLASSES)


class ConsumerCodecError(ValueError):
    pass


def _s(s: str) -> bytes:
    b = s.encode()
    if len(b) > 0x7FFF:
        raise ConsumerCodecError(f"string of {len(b)} bytes does not fit an int16 length")
    return _h.pack(len(b)) + b


def encode_key(key: Any) -> bytes:
    version = KEY_VERSIONS[type(key)]
    second = getattr(key, "member_id", None) if version != 16 else key.regex
    parts = [_h.pack(version), _s(key.group)]
    if second is not None:
        parts.append(_s(second))
    return b"".join(parts)


def decode_key(version: int, b: bytes) -> Any:
    cls = _KEY_CLASSES[version]
    pos = 2
    fields = []
    while pos < len(b):
        (n,) = _h.unpack_from(b, pos)
        if n < 0 or pos + 2 + n > len(b):
            raise ConsumerCodecError(f"malformed key version {version}")
        fields.append(b[pos + 2:pos + 2 + n].decode())
        pos += 2 + n
    expected = 1 if version in (3, 4, 6) else 2
    if len(fields) != expected:
        raise ConsumerCodecError(f"key version {version} has {len(fields)} fields, expected {expected}")
    return cls(*fields)


def _tps(assignment: Assignment, cls: Any) -> list[Any]:
    return [cls(topic_id=t, partitions=sorted(ps)) for t, ps in assignment.items()]


def _from_tps(items: Any) -> Assignment:
    out: Assignment = {}
    for tp in items or ():
        if tp.partitions:
            out[tp.topic_id] = frozenset(tp.partitions)
    return out


def encode_value(value: Any) -> bytes:
    t = type(value)
    if t is ConsumerGroupMetadataValue:
        msg = _MetadataV(version=0, epoch=value.epoch)
    elif t is ConsumerGroupPartitionMetadataValue:
        T = _PartitionMetadataV.TopicMetadata
        msg = _PartitionMetadataV(version=0, topics=[
            T(topic_id=m.topic_id, topic_name=m.name, num_partitions=m.num_partitions, partition_metadata=[])
            for m in value.topics.values()])
    elif t is ConsumerGroupMemberMetadataValue:
        classic = None
        if value.classic is not None:
            C = _MemberMetadataV.ClassicMemberMetadata
            classic = C(session_timeout_ms=value.classic.session_timeout_ms, supported_protocols=[
                C.ClassicProtocol(name=n, metadata=m) for n, m in value.classic.protocols])
        msg = _MemberMetadataV(
            version=0, instance_id=value.instance_id, rack_id=value.rack_id, client_id=value.client_id,
            client_host=value.client_host, subscribed_topic_names=list(value.subscribed_topic_names),
            subscribed_topic_regex=value.subscribed_topic_regex, rebalance_timeout_ms=value.rebalance_timeout_ms,
            server_assignor=value.server_assignor, classic_member_metadata=classic)
    elif t is ConsumerGroupTargetAssignmentMetadataValue:
        msg = _TargetMetadataV(version=0, assignment_epoch=value.assignment_epoch)
    elif t is ConsumerGroupTargetAssignmentMemberValue:
        msg = _TargetMemberV(version=0, topic_partitions=_tps(value.partitions, _TargetMemberV.TopicPartition))
    elif t is ConsumerGroupCurrentMemberAssignmentValue:
        T = _CurrentAssignmentV.TopicPartitions
        msg = _CurrentAssignmentV(
            version=0, member_epoch=value.member_epoch, previous_member_epoch=value.previous_member_epoch,
            state=value.state, assigned_partitions=_tps(value.assigned, T),
            partitions_pending_revocation=_tps(value.pending_revocation, T))
    elif t is ConsumerGroupRegularExpressionValue:
        msg = _RegexV(version=0, topics=list(value.topics), resolved_version=value.version,
                      timestamp=value.timestamp)
    else:
        raise TypeError(f"not a consumer-group value: {value!r}")
    return bytes(msg.encode())


def decode_value(key: Any, b: bytes) -> Any:
    t = type(key)
    try:
        if t is ConsumerGroupMetadataKey:
            return ConsumerGroupMetadataValue(_MetadataV.decode(b).epoch)
        if t is ConsumerGroupPartitionMetadataKey:
            v = _PartitionMetadataV.decode(b)
            return ConsumerGroupPartitionMetadataValue(
                {m.topic_name: TopicMetadata(m.topic_id, m.topic_name, m.num_partitions) for m in v.topics})
        if t is ConsumerGroupMemberMetadataKey:
            v = _MemberMetadataV.decode(b)
            c = v.classic_member_metadata
            classic = None if c is None else ClassicMemberMetadata(
                c.session_timeout_ms, [(p.name, bytes(p.metadata)) for p in c.supported_protocols])
            return ConsumerGroupMemberMetadataValue(
                v.instance_id, v.rack_id, v.client_id, v.client_host, tuple(v.subscribed_topic_names or ()),
                v.subscribed_topic_regex, v.rebalance_timeout_ms, v.server_assignor, classic)
        if t is ConsumerGroupTargetAssignmentMetadataKey:
            return ConsumerGroupTargetAssignmentMetadataValue(_TargetMetadataV.decode(b).assignment_epoch)
        if t is ConsumerGroupTargetAssignmentMemberKey:
            return ConsumerGroupTargetAssignmentMemberValue(_from_tps(_TargetMemberV.decode(b).topic_partitions))
        if t is ConsumerGroupCurrentMemberAssignmentKey:
            v = _CurrentAssignmentV.decode(b)
            return ConsumerGroupCurrentMemberAssignmentValue(
                v.member_epoch, v.previous_member_epoch, v.state, _from_tps(v.assigned_partitions),
                _from_tps(v.partitions_pending_revocation))
        if t is ConsumerGroupRegularExpressionKey:
            v = _RegexV.decode(b)
            return ConsumerGroupRegularExpressionValue(tuple(v.topics or ()), v.resolved_version, v.timestamp)
    except (ValueError, struct.error, EOFError, UnicodeDecodeError, TypeError) as e:
        raise ConsumerCodecError(f"malformed {t.__name__} value: {e!r}") from None
    raise TypeError(f"not a consumer-group key: {key!r}")
