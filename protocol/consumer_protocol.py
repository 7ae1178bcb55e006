"""The consumer protocol embedded in the classic group APIs: ConsumerProtocolSubscription (the
metadata of a JoinGroup protocol whose type is "consumer") and ConsumerProtocolAssignment (what
SyncGroup hands each member), versions 0-3, as Kafka's ConsumerProtocol reads and writes them.

Both are version-prefixed (int16) and not flexible. As Kafka does, a version above the highest
known one is read with the highest known layout (new versions only append fields), and a
negative version or truncated bytes are a schema error (ConsumerProtocolError).

    Subscription v0: topics [string], user_data nullable bytes
                 v1: + owned_partitions [topic string, partitions [int32]]
                 v2: + generation_id int32
                 v3: + rack_id nullable string
    Assignment  v0+: assigned_partitions [topic string, partitions [int32]], user_data nullable bytes
"""
from __future__ import annotations

import struct
from dataclasses import dataclass, field

HIGHEST_VERSION = 3

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")

TopicPartitions = list[tuple[str, list[int]]]


class ConsumerProtocolError(ValueError):
    """Bytes that are not a ConsumerProtocolSubscription / ConsumerProtocolAssignment."""


@dataclass(slots=True)
class Subscription:
    version: int
    topics: list[str]
    user_data: bytes | None = None
    owned_partitions: TopicPartitions = field(default_factory=list)
    generation_id: int = -1
    rack_id: str | None = None


class _Reader:
    __slots__ = ("data", "pos")

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def _take(self, n: int) -> bytes:
        end = self.pos + n
        if n < 0 or end > len(self.data):
            raise ConsumerProtocolError("truncated consumer protocol bytes")
        out = self.data[self.pos:end]
        self.pos = end
        return out

    def i16(self) -> int:
        return _I16.unpack(self._take(2))[0]

    def i32(self) -> int:
        return _I32.unpack(self._take(4))[0]

    def string(self, nullable: bool = False) -> str | None:
        n = self.i16()
        if n < 0:
            if nullable:
                return None
            raise ConsumerProtocolError("null string in a non-nullable field")
        try:
            return bytes(self._take(n)).decode("utf-8")
        except UnicodeDecodeError as e:
            raise ConsumerProtocolError(f"invalid UTF-8: {e}") from None

    def nullable_bytes(self) -> bytes | None:
        n = self.i32()
        return None if n < 0 else bytes(self._take(n))

    def array_len(self) -> int:
        n = self.i32()
        if n < 0:
            raise ConsumerProtocolError("null array in a non-nullable field")
        return n

    def topic_partitions(self) -> TopicPartitions:
        out: TopicPartitions = []
        for _ in range(self.array_len()):
            topic = self.string()
            assert topic is not None
            out.append((topic, [self.i32() for _ in range(self.array_len())]))
        return out


def read_version(data: bytes) -> int:
    """The version prefix (Kafka's ConsumerProtocol.deserializeVersion), clamped as Kafka reads it."""
    r = _Reader(data)
    version = r.i16()
    if version < 0:
        raise ConsumerProtocolError(f"unsupported consumer protocol version {version}")
    return min(version, HIGHEST_VERSION)


def decode_subscription(data: bytes) -> Subscription:
    r = _Reader(bytes(data))
    version = r.i16()
    if version < 0:
        raise ConsumerProtocolError(f"unsupported subscription version {version}")
    layout = min(version, HIGHEST_VERSION)
    topics = [r.string() for _ in range(r.array_len())]
    sub = Subscription(version, topics, r.nullable_bytes())  # type: ignore[arg-type]
    if layout >= 1:
        sub.owned_partitions = r.topic_partitions()
    if layout >= 2:
        sub.generation_id = r.i32()
    if layout >= 3:
        sub.rack_id = r.string(nullable=True)
    return sub


def decode_assignment(data: bytes) -> TopicPartitions:
    r = _Reader(bytes(data))
    if r.i16() < 0:
        raise ConsumerProtocolError("unsupported assignment version")
    out = r.topic_partitions()
    r.nullable_bytes()
    return out


def _string(s: str) -> bytes:
    b = s.encode("utf-8")
    return _I16.pack(len(b)) + b


def encode_topic_partitions(items: TopicPartitions) -> bytes:
    out = [_I32.pack(len(items))]
    for topic, partitions in items:
        out.append(_string(topic))
        out.append(_I32.pack(len(partitions)))
        out.extend(_I32.pack(p) for p in partitions)
    return b"".join(out)


def encode_assignment(items: TopicPartitions, version: int = HIGHEST_VERSION, user_data: bytes | None = None) -> bytes:
    """Kafka's ConsumerProtocol.serializeAssignment: every version has the same layout."""
    version = min(max(version, 0), HIGHEST_VERSION)
    tail = _I32.pack(-1) if user_data is None else _I32.pack(len(user_data)) + user_data
    return _I16.pack(version) + encode_topic_partitions(items) + tail


def encode_subscription(topics: list[str], version: int = HIGHEST_VERSION, *, user_data: bytes | None = None,
                        owned: TopicPartitions | None = None, generation_id: int = -1,
                        rack_id: str | None = None) -> bytes:
    """Kafka's ConsumerProtocol.serializeSubscription (tests and tools build members with it)."""
    version = min(max(version, 0), HIGHEST_VERSION)
    out = [_I16.pack(version), _I32.pack(len(topics))]
    out.extend(_string(t) for t in topics)
    out.append(_I32.pack(-1) if user_data is None else _I32.pack(len(user_data)) + user_data)
    if version >= 1:
        out.append(encode_topic_partitions(owned or []))
    if version >= 2:
        out.append(_I32.pack(generation_id))
    if version >= 3:
        out.append(_I16.pack(-1) if rack_id is None else _string(rack_id))
    return b"".join(out)
