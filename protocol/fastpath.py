"""Hand-written codecs for the requests a busy coordinator sees most (Heartbeat and
OffsetCommit), several times faster than the generic schema-driven classes. Each decoder
returns an object with the same attribute names as the kafka-python request class, so handlers
cannot tell the difference; the generic classes stay the reference and tests check both agree
on every version.
"""
from __future__ import annotations

import struct
from functools import lru_cache
from typing import Any

from kcoord.protocol.headers import read_uvarint
from kcoord.protocol.varint import uvarint

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
    if version >= 8:
        return decode_offset_commit_flexible(buf, pos, version)
    return _offset_commit_general(buf, pos, version)


def _offset_commit_general(buf: bytes, pos: int, version: int) -> Any:
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


_PARTITION_FIXED = struct.Struct(">iqi")  # partition_index, committed_offset, committed_leader_epoch


class _NotShort(ValueError):
    """The request is not in the shape the straight readers take: use the general one."""


def _member_prefix(buf: bytes, start: int) -> tuple[str, int, str, str | None, int]:
    """(group_id, generation, member_id, group_instance_id, position after them): the fields
    every flexible member request starts with, read straight (see below); raises _NotShort
    (or IndexError / UnicodeDecodeError) for anything else."""
    b = buf[start]
    if not 0 < b < 128:
        raise _NotShort
    end = start + b
    group_id = buf[start + 1 : end].decode()
    (generation,) = _I32.unpack_from(buf, end)
    pos = end + 4
    b = buf[pos]
    if not 0 < b < 128:
        raise _NotShort
    end = pos + b
    member_id = buf[pos + 1 : end].decode()
    b = buf[end]  # group_instance_id, nullable
    if b == 0:
        return group_id, generation, member_id, None, end + 1
    if b < 128:
        return group_id, generation, member_id, buf[end + 1 : end + b].decode(), end + b
    raise _NotShort


def decode_offset_commit_flexible(buf: bytes, start: int, version: int) -> Any:
    """OffsetCommit v8+. Read straight when every length fits one varint byte and no tagged
    field is set (what clients send), else by the general reader (which also raises for what
    is malformed). Strings are read inline: this runs for every commit.

    A length byte b in 1..127 means b - 1 bytes follow (0 is null; 128 and up would be a
    longer varint). A slice past the end comes back short, which the final length check
    catches."""
    try:
        group_id, generation, member_id, instance, pos = _member_prefix(buf, start)
        b = buf[pos]
        if not 0 < b < 128:
            raise _NotShort
        pos += 1
        topics = []
        for _ in range(b - 1):
            b = buf[pos]
            if not 0 < b < 128:
                raise _NotShort
            end = pos + b
            name = buf[pos + 1 : end].decode()
            b = buf[end]
            if not 0 < b < 128:
                raise _NotShort
            pos = end + 1
            partitions = []
            for _ in range(b - 1):
                index, offset, epoch = _PARTITION_FIXED.unpack_from(buf, pos)
                b = buf[pos + 16]  # committed_metadata, nullable
                if b == 0:
                    metadata, end = None, pos + 17
                elif b < 128:
                    end = pos + 16 + b
                    metadata = buf[pos + 17 : end].decode()
                else:
                    raise _NotShort
                if buf[end] != 0:  # a tagged field is set
                    raise _NotShort
                pos = end + 1
                partitions.append(OffsetCommitPartitionData(index, offset, epoch, -1, metadata))
            if buf[pos] != 0:
                raise _NotShort
            pos += 1
            topics.append(OffsetCommitTopicData(name, partitions))  # type: ignore[arg-type]
        if pos != len(buf) - 1 or buf[pos] != 0:  # exactly the empty tagged-field section
            raise _NotShort
        return OffsetCommitRequestData(group_id, generation, member_id, instance, -1, topics)  # type: ignore[arg-type]
    except (IndexError, ValueError, struct.error):  # _NotShort and UnicodeDecodeError are ValueErrors
        return _offset_commit_general(buf, start, version)


def decode_heartbeat(buf: bytes, pos: int, version: int) -> Any:
    """Heartbeat v0-v4 (v3+: group_instance_id; v4: flexible)."""
    if version == 4:
        return decode_heartbeat_v4(buf, pos, version)
    return _heartbeat_general(buf, pos, version)


def _heartbeat_general(buf: bytes, pos: int, version: int) -> Any:
    r = _Reader(buf, pos, version >= 4)
    group_id = r.string()
    generation_id = r.int32()
    member_id = r.string()
    instance = r.string(nullable=True) if version >= 3 else None
    if version >= 4:
        r.skip_tagged_fields()
    return HeartbeatRequestData(group_id, generation_id, member_id, instance)  # type: ignore[arg-type]


def decode_heartbeat_v4(buf: bytes, start: int, version: int = 4) -> Any:
    """Heartbeat v4, read straight when every length fits in one varint byte and no tagged
    field is set (what clients send), else by the general reader. Read like
    decode_offset_commit_flexible."""
    try:
        group_id, generation_id, member_id, instance, pos = _member_prefix(buf, start)
        if pos != len(buf) - 1 or buf[pos] != 0:  # exactly the empty tagged-field section
            raise _NotShort
        return HeartbeatRequestData(group_id, generation_id, member_id, instance)
    except (IndexError, ValueError, struct.error):  # _NotShort and UnicodeDecodeError are ValueErrors
        return _heartbeat_general(buf, start, 4)


class FastPath:
    """An API's hand-written codec: `decode` reads any served version, `by_version` holds the
    straight readers of the versions clients actually send (called without the version
    dispatch), `encode` writes response objects. The server's route table
    (server/handlers/routes.py) names the APIs that have one."""

    __slots__ = ("decode", "by_version", "encode")

    def __init__(self, decode: Any, by_version: dict[int, Any] | None = None, encode: Any = None) -> None:
        self.decode = decode
        self.by_version = by_version or {}
        self.encode = encode

    def decoder(self, version: int) -> Any:
        """(frame, body offset, version) -> request, for this version."""
        return self.by_version.get(version, self.decode)


@lru_cache(maxsize=64)
def heartbeat_response_body(version: int, error_code: int) -> bytes:
    """A Heartbeat response depends only on (version, error): encode each once."""
    from kafka.protocol.consumer.group import HeartbeatResponse

    return bytes(HeartbeatResponse(version=version, throttle_time_ms=0, error_code=error_code).encode())


_PARTITION_ERR = struct.Struct(">ih")

# (topic, partition, error code): one row of an OffsetCommit answer
CommitRow = tuple[str, int, int]


def encode_offset_commit_response(resp: Any, version: int) -> bytes:
    """OffsetCommitResponse v0-v9 from the response object (v3+: throttle; v8+: flexible)."""
    if type(resp) is OffsetCommitResponseData:
        return encode_commit_rows(version, resp.rows)
    topics = [(t.name, [(p.partition_index, p.error_code) for p in t.partitions]) for t in resp.topics]
    return _encode_commit_topics(version, resp.throttle_time_ms or 0, topics)


def encode_commit_rows(version: int, rows: list[CommitRow]) -> bytes:
    """OffsetCommitResponse v0-v9 (throttle 0) of (topic, partition, error) rows in request
    order; a topic's rows are gathered under its first appearance, as kafka-python would."""
    if len(rows) == 1 and len(rows[0][0]) <= _CACHED_TOPIC_CHARS:
        return _one_row_body(version, *rows[0])
    by_topic: dict[str, list[tuple[int, int]]] = {}
    for topic, partition, error in rows:
        parts = by_topic.get(topic)
        if parts is None:
            parts = by_topic[topic] = []
        parts.append((partition, error))
    return _encode_commit_topics(version, 0, list(by_topic.items()))


_CACHED_TOPIC_CHARS = 255  # Kafka's topic names are at most 249: the cache stays small


@lru_cache(maxsize=4096)
def _one_row_body(version: int, topic: str, partition: int, error: int) -> bytes:
    """The answer to a one-partition commit, the usual kind: consumers commit the same
    partitions over and over, so each answer is encoded once."""
    return _encode_commit_topics(version, 0, [(topic, [(partition, error)])])


def _encode_commit_topics(version: int, throttle_ms: int, topics: list[tuple[str, list[tuple[int, int]]]]) -> bytes:
    flexible = version >= 8
    parts: list[bytes] = []
    if version >= 3:
        parts.append(_I32.pack(throttle_ms))
    parts.append(uvarint(len(topics) + 1) if flexible else _I32.pack(len(topics)))
    for name, ps in topics:
        raw = name.encode()
        parts.append(uvarint(len(raw) + 1) if flexible else _I16.pack(len(raw)))
        parts.append(raw)
        parts.append(uvarint(len(ps) + 1) if flexible else _I32.pack(len(ps)))
        for index, error in ps:
            parts.append(_PARTITION_ERR.pack(index, error))
            if flexible:
                parts.append(b"\x00")
        if flexible:
            parts.append(b"\x00")
    if flexible:
        parts.append(b"\x00")
    return b"".join(parts)


class OffsetCommitResponseData:
    """An OffsetCommit answer kept as its (topic, partition, error) rows: encoding them
    directly costs a fraction of building kafka-python's response objects, which matters on
    the commit path. Reads like kafka-python's OffsetCommitResponse (topics, encode, decode)
    for tests and tools; the encoded bytes are the same (a test checks)."""

    __slots__ = ("version", "rows")
    API_KEY = 8
    throttle_time_ms = 0

    def __init__(self, version: int, rows: list[CommitRow]) -> None:
        self.version = version
        self.rows = rows

    @property
    def API_VERSION(self) -> int:  # noqa: N802 - kafka-python's name
        return self.version

    @property
    def topics(self) -> list[Any]:
        """kafka-python's topic objects, built on demand (not on the serving path)."""
        from kafka.protocol.consumer.group import OffsetCommitResponse

        return OffsetCommitResponse.decode(self.encode(), version=self.version).topics

    def encode(self, version: int | None = None) -> bytes:
        return encode_commit_rows(self.version if version is None else version, self.rows)

    @classmethod
    def decode(cls, data: bytes, version: int) -> Any:
        from kafka.protocol.consumer.group import OffsetCommitResponse

        return OffsetCommitResponse.decode(data, version=version)

    def __repr__(self) -> str:
        return f"OffsetCommitResponseData(version={self.version}, rows={self.rows!r})"


def encode_heartbeat_answer(resp: Any, version: int) -> bytes:
    """A Heartbeat answer: the cached body the coordinator's answer is (heartbeat_response_body),
    or a response object (a refusal)."""
    if type(resp) is bytes:
        return resp
    return heartbeat_response_body(version, resp.error_code)


HEARTBEAT = FastPath(decode_heartbeat, {4: decode_heartbeat_v4}, encode_heartbeat_answer)
OFFSET_COMMIT = FastPath(decode_offset_commit, {8: decode_offset_commit_flexible, 9: decode_offset_commit_flexible},
                         encode_offset_commit_response)


# ---- ConsumerGroupHeartbeat (KIP-848): the hot API of a consumer-protocol group ----------------

_UUID16 = struct.Struct(">16s")


class ConsumerGroupHeartbeatTopicPartitions:
    __slots__ = ("topic_id", "partitions")

    def __init__(self, topic_id: Any, partitions: list[int]) -> None:
        self.topic_id = topic_id
        self.partitions = partitions


class ConsumerGroupHeartbeatRequestData:
    __slots__ = ("group_id", "member_id", "member_epoch", "instance_id", "rack_id", "rebalance_timeout_ms",
                 "subscribed_topic_names", "subscribed_topic_regex", "server_assignor", "topic_partitions")

    def __init__(self, group_id: str, member_id: str, member_epoch: int, instance_id: str | None,
                 rack_id: str | None, rebalance_timeout_ms: int, subscribed_topic_names: list[str] | None,
                 subscribed_topic_regex: str | None, server_assignor: str | None,
                 topic_partitions: list[ConsumerGroupHeartbeatTopicPartitions] | None) -> None:
        self.group_id = group_id
        self.member_id = member_id
        self.member_epoch = member_epoch
        self.instance_id = instance_id
        self.rack_id = rack_id
        self.rebalance_timeout_ms = rebalance_timeout_ms
        self.subscribed_topic_names = subscribed_topic_names
        self.subscribed_topic_regex = subscribed_topic_regex
        self.server_assignor = server_assignor
        self.topic_partitions = topic_partitions


def _uuid(r: _Reader) -> Any:
    import uuid

    end = r.pos + 16
    if end > len(r.buf):
        raise FastDecodeError("truncated uuid")
    u = uuid.UUID(bytes=bytes(r.buf[r.pos:end]))
    r.pos = end
    return u


def decode_consumer_group_heartbeat(buf: bytes, pos: int, version: int) -> Any:
    """ConsumerGroupHeartbeat v0-v1 (flexible; v1: SubscribedTopicRegex)."""
    r = _Reader(buf, pos, True)
    group_id = r.string()
    member_id = r.string()
    epoch = r.int32()
    instance_id = r.string(nullable=True)
    rack_id = r.string(nullable=True)
    rebalance = r.int32()
    n = r.uvarint() - 1
    names = None if n < 0 else [r.string() for _ in range(n)]
    regex = r.string(nullable=True) if version >= 1 else None
    assignor = r.string(nullable=True)
    n = r.uvarint() - 1
    tps = None
    if n >= 0:
        tps = []
        for _ in range(n):
            topic_id = _uuid(r)
            parts = [r.int32() for _ in range(r.array_length())]
            r.skip_tagged_fields()
            tps.append(ConsumerGroupHeartbeatTopicPartitions(topic_id, parts))
    r.skip_tagged_fields()
    if r.pos != len(buf):
        raise FastDecodeError(f"{len(buf) - r.pos} bytes after the request")
    return ConsumerGroupHeartbeatRequestData(group_id, member_id, epoch, instance_id, rack_id,  # type: ignore[arg-type]
                                             rebalance, names, regex, assignor, tps)


class _CGHAssignment:
    __slots__ = ("topic_partitions",)

    def __init__(self, topic_partitions: list[ConsumerGroupHeartbeatTopicPartitions]) -> None:
        self.topic_partitions = topic_partitions


class ConsumerGroupHeartbeatResponseData:
    """A ConsumerGroupHeartbeat answer encoded by hand (reads like kafka-python's response:
    the same attributes, encode(), decode())."""

    __slots__ = ("version", "error_code", "error_message", "member_id", "member_epoch", "heartbeat_interval_ms",
                 "assignment")
    API_KEY = 68
    throttle_time_ms = 0

    def __init__(self, version: int, error_code: int, error_message: str | None, member_id: str | None,
                 member_epoch: int, heartbeat_interval_ms: int,
                 assignment: list[tuple[Any, list[int]]] | None) -> None:
        self.version = version
        self.error_code = error_code
        self.error_message = error_message
        self.member_id = member_id
        self.member_epoch = member_epoch
        self.heartbeat_interval_ms = heartbeat_interval_ms
        self.assignment = None if assignment is None else _CGHAssignment(
            [ConsumerGroupHeartbeatTopicPartitions(t, ps) for t, ps in assignment])

    @property
    def API_VERSION(self) -> int:  # noqa: N802 - kafka-python's name
        return self.version

    def encode(self, version: int | None = None) -> bytes:
        return encode_consumer_group_heartbeat_response(self, self.version if version is None else version)

    @classmethod
    def decode(cls, data: bytes, version: int) -> Any:
        from kcoord.protocol.messages import ConsumerGroupHeartbeatResponse

        return ConsumerGroupHeartbeatResponse.decode(data, version=version)

    def __repr__(self) -> str:
        return (f"ConsumerGroupHeartbeatResponseData(error_code={self.error_code}, member_id={self.member_id!r}, "
                f"member_epoch={self.member_epoch}, assignment={self.assignment is not None})")


def _cstr(s: str | None) -> bytes:
    if s is None:
        return b"\x00"
    b = s.encode()
    return uvarint(len(b) + 1) + b


_I16_I32 = struct.Struct(">ih")


def encode_consumer_group_heartbeat_response(resp: Any, version: int) -> bytes:
    """ConsumerGroupHeartbeatResponse v0-v1 from a response object (ours or kafka-python's)."""
    parts = [_I16_I32.pack(resp.throttle_time_ms or 0, resp.error_code), _cstr(resp.error_message),
             _cstr(resp.member_id), _I32.pack(resp.member_epoch), _I32.pack(resp.heartbeat_interval_ms)]
    a = resp.assignment
    if a is None:
        parts.append(b"\xff")
    else:
        parts.append(b"\x01")
        tps = a.topic_partitions
        parts.append(uvarint(len(tps) + 1))
        for tp in tps:
            parts.append(tp.topic_id.bytes)
            parts.append(uvarint(len(tp.partitions) + 1))
            parts.extend(_I32.pack(p) for p in tp.partitions)
            parts.append(b"\x00")
        parts.append(b"\x00")
    parts.append(b"\x00")
    return b"".join(parts)


def decode_consumer_group_keepalive(buf: bytes, start: int, version: int) -> Any:
    """ConsumerGroupHeartbeat v0-v1 read straight when it is a keep-alive (group and member ids
    of one varint byte each, then nothing but the epoch: every optional field null or -1, no
    tagged field), what a stable member sends every interval; else the general reader."""
    try:
        b = buf[start]
        if not 0 < b < 128:
            raise _NotShort
        end = start + b
        group_id = buf[start + 1:end].decode()
        b = buf[end]
        if not 0 < b < 128:
            raise _NotShort
        pos = end + b
        member_id = buf[end + 1:pos].decode()
        (epoch,) = _I32.unpack_from(buf, pos)
        # instance, rack: null; rebalance timeout -1; names null; [v1: regex null]; assignor null;
        # partitions null; no tagged fields
        tail = _KEEPALIVE_TAIL[version]
        if buf[pos + 4:] != tail:
            raise _NotShort
        return ConsumerGroupHeartbeatRequestData(group_id, member_id, epoch, None, None, -1, None, None, None, None)
    except (IndexError, ValueError, struct.error):
        return decode_consumer_group_heartbeat(buf, start, version)


_KEEPALIVE_TAIL = {0: b"\x00\x00\xff\xff\xff\xff\x00\x00\x00\x00", 1: b"\x00\x00\xff\xff\xff\xff\x00\x00\x00\x00\x00"}


@lru_cache(maxsize=4096)
def consumer_group_keepalive_body(keepalive: tuple[str, int, int], version: int) -> bytes:
    """The answer to a keep-alive, (member id, member epoch, heartbeat interval): the same bytes
    for a member until its epoch changes."""
    member_id, epoch, interval_ms = keepalive
    return encode_consumer_group_heartbeat_response(
        ConsumerGroupHeartbeatResponseData(version, 0, None, member_id, epoch, interval_ms, None), version)


def encode_consumer_group_heartbeat_answer(resp: Any, version: int) -> bytes:
    """A ConsumerGroupHeartbeat answer: a keep-alive, the tuple (member id, member epoch,
    heartbeat interval) whose body is cached, or a response object."""
    if isinstance(resp, tuple):
        return consumer_group_keepalive_body(resp, version)
    return encode_consumer_group_heartbeat_response(resp, version)


CONSUMER_GROUP_HEARTBEAT = FastPath(decode_consumer_group_heartbeat,
                                    {0: decode_consumer_group_keepalive, 1: decode_consumer_group_keepalive},
                                    encode_consumer_group_heartbeat_answer)
