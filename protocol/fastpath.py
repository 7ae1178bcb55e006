"""Hand-written decoders for the requests a busy coordinator sees most (Heartbeat), several
times faster than the generic schema-driven classes. Each returns an object with the same
attribute names as the kafka-python request class, so handlers cannot tell the difference;
the generic decoder stays the reference and a test checks both agree on every version.
"""
from __future__ import annotations

import struct
from functools import lru_cache
from typing import Any

from kafka.protocol.consumer import HeartbeatResponse

from protocol.headers import read_uvarint

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")


class FastDecodeError(ValueError):
    pass


class _Reader:
    __slots__ = ("buf", "pos", "compact")

    def __init__(self, buf: bytes, pos: int, compact: bool) -> None:
        self.buf = buf
        self.pos = pos
        self.compact = compact

    def uvarint(self) -> int:
        pos = self.pos
        if pos < len(self.buf):
            b = self.buf[pos]
            if b < 0x80:  # nearly every length and tag count fits in one byte
                self.pos = pos + 1
                return b
        value, self.pos = read_uvarint(self.buf, pos)
        return value

    def int32(self) -> int:
        if self.pos + 4 > len(self.buf):
            raise FastDecodeError("truncated int32")
        (v,) = _I32.unpack_from(self.buf, self.pos)
        self.pos += 4
        return v

    def int64(self) -> int:
        if self.pos + 8 > len(self.buf):
            raise FastDecodeError("truncated int64")
        (v,) = _I64.unpack_from(self.buf, self.pos)
        self.pos += 8
        return v

    def array_length(self) -> int:
        """Element count of a non-nullable array."""
        n = self.uvarint() - 1 if self.compact else self.int32()
        if n < 0:
            raise FastDecodeError("non-nullable array was serialized as null")
        return n

    def string(self, nullable: bool = False) -> str | None:
        if self.compact:
            n = self.uvarint() - 1
        else:
            if self.pos + 2 > len(self.buf):
                raise FastDecodeError("truncated string length")
            (n,) = _I16.unpack_from(self.buf, self.pos)
            self.pos += 2
        if n < 0:
            if not nullable:
                raise FastDecodeError("null where a string is required")
            return None
        end = self.pos + n
        if end > len(self.buf):
            raise FastDecodeError("truncated string")
        s = self.buf[self.pos : end].decode("utf-8")
        self.pos = end
        return s

    def skip_tagged_fields(self) -> None:
        for _ in range(self.uvarint()):
            self.uvarint()
            self.pos += self.uvarint()
        if self.pos > len(self.buf):
            raise FastDecodeError("truncated tagged fields")


class HeartbeatRequestData:
    __slots__ = ("group_id", "generation_id", "member_id", "group_instance_id")

    def __init__(self, group_id: str, generation_id: int, member_id: str, group_instance_id: str | None) -> None:
        self.group_id = group_id
        self.generation_id = generation_id
        self.member_id = member_id
        self.group_instance_id = group_instance_id

    def __repr__(self) -> str:
        return (f"HeartbeatRequestData(group_id={self.group_id!r}, generation_id={self.generation_id}, "
                f"member_id={self.member_id!r}, group_instance_id={self.group_instance_id!r})")


class OffsetCommitPartitionData:
    __slots__ = ("partition_index", "committed_offset", "committed_leader_epoch", "commit_timestamp",
                 "committed_metadata")

    def __init__(self, partition_index: int, committed_offset: int, committed_leader_epoch: int,
                 commit_timestamp: int, committed_metadata: str | None) -> None:
        self.partition_index = partition_index
        self.committed_offset = committed_offset
        self.committed_leader_epoch = committed_leader_epoch
        self.commit_timestamp = commit_timestamp
        self.committed_metadata = committed_metadata


class OffsetCommitTopicData:
    __slots__ = ("name", "partitions")

    def __init__(self, name: str, partitions: list[OffsetCommitPartitionData]) -> None:
        self.name = name
        self.partitions = partitions


class OffsetCommitRequestData:
    __slots__ = ("group_id", "generation_id_or_member_epoch", "member_id", "group_instance_id",
                 "retention_time_ms", "topics")

    def __init__(self, group_id: str, generation: int, member_id: str, instance: str | None,
                 retention_time_ms: int, topics: list[OffsetCommitTopicData]) -> None:
        self.group_id = group_id
        self.generation_id_or_member_epoch = generation
        self.member_id = member_id
        self.group_instance_id = instance
        self.retention_time_ms = retention_time_ms
        self.topics = topics


def decode_offset_commit(buf: bytes, pos: int, version: int) -> Any:
    """OffsetCommit v0-v9 (v1+: generation/member; v1 only: commit timestamp; v2-v4:
    retention; v6+: leader epoch; v7+: instance id; v8+: flexible)."""
    flexible = version >= 8
    r = _Reader(buf, pos, flexible)
    group_id = r.string()
    generation, member_id, instance, retention = -1, "", None, -1
    if version >= 1:
        generation = r.int32()
        member_id = r.string()
    if version >= 7:
        instance = r.string(nullable=True)
    if 2 <= version <= 4:
        retention = r.int64()
    topics = []
    for _ in range(r.array_length()):
        name = r.string()
        partitions = []
        for _ in range(r.array_length()):
            index = r.int32()
            offset = r.int64()
            epoch = r.int32() if version >= 6 else -1
            ts = r.int64() if version == 1 else -1
            metadata = r.string(nullable=True)
            if flexible:
                r.skip_tagged_fields()
            partitions.append(OffsetCommitPartitionData(index, offset, epoch, ts, metadata))
        if flexible:
            r.skip_tagged_fields()
        topics.append(OffsetCommitTopicData(name, partitions))  # type: ignore[arg-type]
    if flexible:
        r.skip_tagged_fields()
    return OffsetCommitRequestData(group_id, generation, member_id, instance, retention, topics)  # type: ignore[arg-type]


def decode_heartbeat(buf: bytes, pos: int, version: int) -> Any:
    """Heartbeat v0-v4 (v3+: group_instance_id; v4: flexible)."""
    if version == 4:
        fast = _heartbeat_v4_short(buf, pos)
        if fast is not None:
            return fast
    r = _Reader(buf, pos, version >= 4)
    group_id = r.string()
    generation_id = r.int32()
    member_id = r.string()
    instance = r.string(nullable=True) if version >= 3 else None
    if version >= 4:
        r.skip_tagged_fields()
    return HeartbeatRequestData(group_id, generation_id, member_id, instance)  # type: ignore[arg-type]


def _heartbeat_v4_short(buf: bytes, pos: int) -> Any:
    """Heartbeat v4 when every length fits in one varint byte and no tagged field is set:
    what clients send. None for anything else (the general reader then handles it)."""
    try:
        n = buf[pos] - 1
        if not 0 <= n < 127:
            return None
        pos += 1
        group_id = buf[pos : pos + n].decode()
        pos += n
        (generation_id,) = _I32.unpack_from(buf, pos)
        pos += 4
        n = buf[pos] - 1
        if not 0 <= n < 127:
            return None
        pos += 1
        member_id = buf[pos : pos + n].decode()
        pos += n
        n = buf[pos] - 1
        if not -1 <= n < 127:
            return None
        pos += 1
        instance = None if n < 0 else buf[pos : pos + n].decode()
        pos += max(n, 0)
        if pos != len(buf) - 1 or buf[pos] != 0:  # exactly the empty tagged-field section
            return None
    except (IndexError, struct.error, UnicodeDecodeError):
        return None
    return HeartbeatRequestData(group_id, generation_id, member_id, instance)


@lru_cache(maxsize=64)
def heartbeat_response_body(version: int, error_code: int) -> bytes:
    """A Heartbeat response depends only on (version, error): encode each once."""
    return bytes(HeartbeatResponse(version=version, throttle_time_ms=0, error_code=error_code).encode())


def _uvarint(n: int) -> bytes:
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


_PARTITION_ERR = struct.Struct(">ih")


def encode_offset_commit_response(resp: Any, version: int) -> bytes:
    """OffsetCommitResponse v0-v9 from the response object (v3+: throttle; v8+: flexible)."""
    flexible = version >= 8
    parts: list[bytes] = []
    if version >= 3:
        parts.append(_I32.pack(resp.throttle_time_ms or 0))
    topics = resp.topics
    parts.append(_uvarint(len(topics) + 1) if flexible else _I32.pack(len(topics)))
    for t in topics:
        name = t.name.encode()
        parts.append(_uvarint(len(name) + 1) if flexible else _I16.pack(len(name)))
        parts.append(name)
        ps = t.partitions
        parts.append(_uvarint(len(ps) + 1) if flexible else _I32.pack(len(ps)))
        for p in ps:
            parts.append(_PARTITION_ERR.pack(p.partition_index, p.error_code))
            if flexible:
                parts.append(b"\x00")
        if flexible:
            parts.append(b"\x00")
    if flexible:
        parts.append(b"\x00")
    return b"".join(parts)
