"""Bytes of __consumer_offsets record keys and values, every schema version.

Owns the wire layout of OffsetCommitKey/Value and GroupMetadataKey/Value (Kafka's
group-coordinator message JSONs) and routes the consumer-group keys (versions 3-8, 16) to
protocol/consumer_group_codec.py and the share-group keys (10-15) to protocol/share_records.py:
what we write (key v1 / v2, OffsetCommitValue v3 or v1,
GroupMetadataValue v3) and reading every value version 0-4 (v4 is flexible: compact
strings, unsigned-varint lengths, tagged fields). The shapes are kcoord.protocol.coordinator_records.

Start-up loading decodes millions of records, so the offset-commit path is hand-unrolled
`struct.unpack_from` and decoded keys are memoised (the same group/topic/partition key is
committed over and over).
"""
from __future__ import annotations

import logging
import struct

from kcoord.protocol import consumer_group_codec, share_records
from kcoord.protocol.coordinator_records import (
    CoordinatorRecord,
    GroupKey,
    GroupValue,
    Key,
    MemberValue,
    OffsetKey,
    OffsetValue,
    Value,
)

log = logging.getLogger(__name__)

__all__ = [
    "CodecError",
    "decode_key",
    "decode_record",
    "decode_value",
    "encode_key",
    "encode_value",
    "offset_key",
]


class CodecError(ValueError):
    """The bytes are not a valid __consumer_offsets key or value."""


_h = struct.Struct(">h")
_hh = struct.Struct(">hh")
_i = struct.Struct(">i")
_q = struct.Struct(">q")
_qq = struct.Struct(">qq")
_hqh = struct.Struct(">hqh")
_hq = struct.Struct(">hq")
_hqih = struct.Struct(">hqih")
_hqi = struct.Struct(">hqi")
_V3_EMPTY = struct.Struct(">hqihq")
_ii = struct.Struct(">ii")

OFFSET_KEY_VERSION = 1  # Kafka writes OffsetCommitKey v1 (v0 is the same layout)
GROUP_KEY_VERSION = 2
OFFSET_VALUE_VERSION = 3
OFFSET_VALUE_VERSION_WITH_EXPIRE = 1
GROUP_VALUE_VERSION = 3


# ---------------------------------------------------------------------------- encoding

_SHARE_VALUE_TYPES = frozenset((
    share_records.ShareGroupMemberMetadataValue, share_records.ShareGroupMetadataValue,
    share_records.ShareGroupTargetAssignmentMetadataValue, share_records.ShareGroupTargetAssignmentMemberValue,
    share_records.ShareGroupCurrentMemberAssignmentValue, share_records.ShareGroupStatePartitionMetadataValue,
))


def _str(s: str) -> bytes:
    b = s.encode()
    if len(b) > 0x7FFF:
        raise CodecError(f"string of {len(b)} bytes does not fit an int16 length")
    return _h.pack(len(b)) + b


def _nstr(s: str | None) -> bytes:
    return b"\xff\xff" if s is None else _str(s)


def _bytes(b: bytes) -> bytes:
    return _i.pack(len(b)) + b


# OffsetKeys and their bytes by (group, topic, partition): consumers commit the same partitions
# over and over, and building a frozen key and its bytes costs more than the rest of the
# record. Bounded like _KEY_CACHE; clearing it only costs rebuilding.
_OFFSET_KEYS: dict[tuple[str, str, int], tuple[OffsetKey, bytes]] = {}
_OFFSET_KEYS_MAX = 65536
_OFFSET_KEY_CACHED_CHARS = 512  # longer group + topic names are built each time (bounds memory)


def _remember_offset_key(group: str, topic: str, partition: int) -> tuple[OffsetKey, bytes]:
    encoded = b"".join((_h.pack(OFFSET_KEY_VERSION), _str(group), _str(topic), _i.pack(partition)))
    entry = (OffsetKey(group, topic, partition), encoded)
    if len(group) + len(topic) <= _OFFSET_KEY_CACHED_CHARS:
        if len(_OFFSET_KEYS) >= _OFFSET_KEYS_MAX:
            _OFFSET_KEYS.clear()
        _OFFSET_KEYS[(group, topic, partition)] = entry
    return entry


def offset_key(group: str, topic: str, partition: int) -> OffsetKey:
    """OffsetKey(group, topic, partition), shared between the commits of that partition."""
    entry = _OFFSET_KEYS.get((group, topic, partition))
    if entry is not None:
        return entry[0]
    try:
        return _remember_offset_key(group, topic, partition)[0]
    except CodecError:  # not encodable: encode_key says so when the record is written
        return OffsetKey(group, topic, partition)


def encode_key(key: Key) -> bytes:
    """OffsetKey -> OffsetCommitKey v1; GroupKey -> GroupMetadataKey v2."""
    if type(key) is OffsetKey or isinstance(key, OffsetKey):
        entry = _OFFSET_KEYS.get((key.group, key.topic, key.partition))
        if entry is None:
            entry = _remember_offset_key(key.group, key.topic, key.partition)
        return entry[1]
    if isinstance(key, GroupKey):
        return _h.pack(GROUP_KEY_VERSION) + _str(key.group)
    if type(key) in consumer_group_codec.KEY_VERSIONS:
        return consumer_group_codec.encode_key(key)
    if type(key) in share_records.GROUP_KEY_VERSIONS:
        return share_records.encode_group_key(key)
    raise TypeError(f"not a coordinator key: {key!r}")


def encode_value(value: Value | None) -> bytes | None:
    """OffsetValue -> v3 (v1 when expire_timestamp is set); GroupValue -> v3; None stays None."""
    if value is None:
        return None
    if type(value) is OffsetValue or isinstance(value, OffsetValue):
        if value.expire_timestamp is None:
            if not value.metadata:  # what nearly every consumer commits: one pack
                return _V3_EMPTY.pack(OFFSET_VALUE_VERSION, value.offset, value.leader_epoch, 0,
                                      value.commit_timestamp)
            return b"".join((_hqi.pack(OFFSET_VALUE_VERSION, value.offset, value.leader_epoch),
                             _str(value.metadata), _q.pack(value.commit_timestamp)))
        # v1 has no leader epoch: Kafka drops it too when an explicit retention was asked for.
        return b"".join((_hq.pack(OFFSET_VALUE_VERSION_WITH_EXPIRE, value.offset),
                         _str(value.metadata),
                         _qq.pack(value.commit_timestamp, value.expire_timestamp)))
    if isinstance(value, GroupValue):
        parts = [
            _h.pack(GROUP_VALUE_VERSION),
            _str(value.protocol_type),
            _i.pack(value.generation),
            _nstr(value.protocol),
            _nstr(value.leader),
            _q.pack(value.current_state_timestamp),
            _i.pack(len(value.members)),
        ]
        for m in value.members:
            parts += (
                _str(m.member_id),
                _nstr(m.group_instance_id),
                _str(m.client_id),
                _str(m.client_host),
                _ii.pack(m.rebalance_timeout, m.session_timeout),
                _bytes(m.subscription),
                _bytes(m.assignment),
            )
        return b"".join(parts)
    if type(value) in _SHARE_VALUE_TYPES:
        return share_records.encode_value(value)
    return consumer_group_codec.encode_value(value)


# ---------------------------------------------------------------------------- decoding


class _Reader:
    """Cursor over one value's bytes for the rarer, nested group records (speed matters less)."""

    __slots__ = ("buf", "pos")

    def __init__(self, buf: bytes, pos: int) -> None:
        self.buf = buf
        self.pos = pos

    def _take(self, n: int) -> bytes:
        p = self.pos
        if n < 0 or p + n > len(self.buf):
            raise CodecError(f"field of {n} bytes overruns the value at {p}")
        self.pos = p + n
        return self.buf[p:p + n]

    def int16(self) -> int:
        return _h.unpack(self._take(2))[0]

    def int32(self) -> int:
        return _i.unpack(self._take(4))[0]

    def int64(self) -> int:
        return _q.unpack(self._take(8))[0]

    def uvarint(self) -> int:
        buf, p, shift, out = self.buf, self.pos, 0, 0
        while True:
            if p >= len(buf):
                raise CodecError("truncated varint")
            b = buf[p]
            p += 1
            out |= (b & 0x7F) << shift
            if not b & 0x80:
                self.pos = p
                return out
            shift += 7
            if shift > 28:
                raise CodecError("varint longer than 5 bytes")

    def string(self, flexible: bool) -> str:
        s = self.nstring(flexible)
        if s is None:
            raise CodecError("null in a non-nullable string")
        return s

    def nstring(self, flexible: bool) -> str | None:
        n = self.uvarint() - 1 if flexible else self.int16()
        if n < 0:
            if n == -1:
                return None
            raise CodecError(f"bad string length {n}")
        try:
            return self._take(n).decode()
        except UnicodeDecodeError as e:
            raise CodecError(str(e)) from None

    def bytes_(self, flexible: bool) -> bytes:
        n = self.uvarint() - 1 if flexible else self.int32()
        if n < 0:
            raise CodecError("null in a non-nullable bytes field")
        return bytes(self._take(n))

    def array_len(self, flexible: bool) -> int:
        n = self.uvarint() - 1 if flexible else self.int32()
        if n < 0:
            raise CodecError("null in a non-nullable array")
        return n

    def skip_tagged_fields(self) -> None:
        # We know no tagged fields in these schemas: skip each one whole.
        for _ in range(self.uvarint()):
            self.uvarint()
            self._take(self.uvarint())

    def end(self) -> None:
        if self.pos != len(self.buf):
            raise CodecError(f"{len(self.buf) - self.pos} trailing bytes after the value")


# Decoded OffsetKeys memoised by their bytes: loading replays the same few keys many times.
# Bounded so a pathological log cannot grow it without limit; clearing just costs re-decoding.
_KEY_CACHE: dict[bytes, OffsetKey] = {}
_KEY_CACHE_MAX = 200_000
_SKIPPED_VERSIONS: set[int] = set()


def decode_key(b: bytes) -> Key | None:
    """Key bytes -> OffsetKey (v0/v1) or GroupKey (v2); None (logged) for newer versions."""
    if type(b) is not bytes:
        b = bytes(b)  # the cache needs a hashable key; callers may hand us a memoryview
    k = _KEY_CACHE.get(b)
    if k is not None:
        return k
    try:
        version, n = _hh.unpack_from(b, 0)
        if version <= 1:
            if version < 0:
                raise CodecError(f"negative key version {version}")
            e = 4 + n
            group = b[4:e].decode()
            (m,) = _h.unpack_from(b, e)
            e2 = e + 2 + m
            topic = b[e + 2:e2].decode()
            (partition,) = _i.unpack_from(b, e2)
            if n < 0 or m < 0 or e2 + 4 != len(b):
                raise CodecError("malformed OffsetCommitKey")
            k = OffsetKey(group, topic, partition)
            if len(_KEY_CACHE) >= _KEY_CACHE_MAX:
                _KEY_CACHE.clear()
            _KEY_CACHE[b] = k
            return k
        if version == 2:
            if n < 0 or 4 + n != len(b):
                raise CodecError("malformed GroupMetadataKey")
            return GroupKey(b[4:].decode())
        if version in consumer_group_codec.CONSUMER_KEY_VERSIONS:
            return consumer_group_codec.decode_key(version, b)
        if version in share_records.SHARE_GROUP_KEY_VERSIONS:
            return share_records.decode_group_key(b)
    except (struct.error, UnicodeDecodeError, consumer_group_codec.ConsumerCodecError,
            share_records.ShareRecordError) as e:
        raise CodecError(f"malformed key: {e}") from None
    # Other versions (9: a share group record Kafka 4.1 dropped; 17+: streams groups) are not ours.
    # Log each unknown version once: a log written by a newer Kafka may hold millions of them.
    level = logging.DEBUG if version in _SKIPPED_VERSIONS else logging.INFO
    _SKIPPED_VERSIONS.add(version)
    log.log(level, "skipping __consumer_offsets record with key version %d (newer group type)", version)
    return None


def _decode_offset_value(b: bytes) -> OffsetValue:
    if len(b) == 24 and b[1] == 3 and b[0] == 0:
        # v3 with empty metadata, what nearly every consumer commits: one unpack.
        _, offset, epoch, n, ts = _V3_EMPTY.unpack(b)
        if n == 0:
            return OffsetValue(offset, "", ts, epoch, None)
    try:
        version, offset, n = _hqh.unpack_from(b, 0)
        if version == 3:
            # Layout: version, offset, leaderEpoch, metadata, commitTimestamp: the hot path.
            version, offset, epoch, n = _hqih.unpack_from(b, 0)
            e = 16 + n
            if n < 0 or e + 8 != len(b):
                raise CodecError("malformed OffsetCommitValue v3")
            (ts,) = _q.unpack_from(b, e)
            return OffsetValue(offset, b[16:e].decode() if n else "", ts, epoch, None)
        if version in (0, 2):
            e = 12 + n
            if n < 0 or e + 8 != len(b):
                raise CodecError(f"malformed OffsetCommitValue v{version}")
            (ts,) = _q.unpack_from(b, e)
            return OffsetValue(offset, b[12:e].decode(), ts, -1, None)
        if version == 1:
            e = 12 + n
            if n < 0 or e + 16 != len(b):
                raise CodecError("malformed OffsetCommitValue v1")
            ts, expire = _qq.unpack_from(b, e)
            # Kafka reads an expireTimestamp of -1 as "no explicit expiry" (a sentinel).
            return OffsetValue(offset, b[12:e].decode(), ts, -1, None if expire == -1 else expire)
        if version == 4:
            r = _Reader(b, 10)
            (epoch,) = _i.unpack_from(b, 10)
            r.pos = 14
            metadata = r.string(True)
            ts = r.int64()
            r.skip_tagged_fields()
            r.end()
            return OffsetValue(offset, metadata, ts, epoch, None)
    except (struct.error, UnicodeDecodeError) as e:
        raise CodecError(f"malformed OffsetCommitValue: {e}") from None
    raise CodecError(f"unknown OffsetCommitValue version {version}")


def _decode_group_value(b: bytes) -> GroupValue:
    r = _Reader(b, 0)
    try:
        version = r.int16()
        if not 0 <= version <= 4:
            raise CodecError(f"unknown GroupMetadataValue version {version}")
        flex = version >= 4
        protocol_type = r.string(flex)
        generation = r.int32()
        protocol = r.nstring(flex)
        leader = r.nstring(flex)
        state_ts = r.int64() if version >= 2 else -1
        members = []
        for _ in range(r.array_len(flex)):
            member_id = r.string(flex)
            instance_id = r.nstring(flex) if version >= 3 else None
            client_id = r.string(flex)
            client_host = r.string(flex)
            rebalance_timeout = r.int32() if version >= 1 else None
            session_timeout = r.int32()
            if rebalance_timeout is None:
                # v0 had a single timeout; Kafka uses the session timeout for both.
                rebalance_timeout = session_timeout
            subscription = r.bytes_(flex)
            assignment = r.bytes_(flex)
            if flex:
                r.skip_tagged_fields()
            members.append(MemberValue(member_id, instance_id, client_id, client_host,
                                       rebalance_timeout, session_timeout, subscription, assignment))
        if flex:
            r.skip_tagged_fields()
        r.end()
    except struct.error as e:
        raise CodecError(f"malformed GroupMetadataValue: {e}") from None
    return GroupValue(protocol_type, generation, protocol, leader, state_ts, members)


def decode_value(key: Key, b: bytes | None) -> Value | None:
    """Value bytes for `key` (any version 0-4) -> OffsetValue / GroupValue; None is a tombstone."""
    if b is None:
        return None
    if type(key) is OffsetKey:
        return _decode_offset_value(b)
    if type(key) is GroupKey:
        return _decode_group_value(b)
    return _decode_consumer_value(key, b)


def _decode_consumer_value(key: Key, b: bytes) -> Value:
    if type(key) in share_records.GROUP_KEY_VERSIONS:
        try:
            return share_records.decode_value(key, b)
        except share_records.ShareRecordError as e:
            raise CodecError(str(e)) from None
    try:
        return consumer_group_codec.decode_value(key, b)
    except consumer_group_codec.ConsumerCodecError as e:
        raise CodecError(str(e)) from None


def decode_record(key_bytes: bytes | None, value_bytes: bytes | None) -> CoordinatorRecord | None:
    """One __consumer_offsets record -> CoordinatorRecord; None for key versions we skip."""
    # Inlined decode_key fast path (loading is hot); only bytes are hashable cache keys.
    key = _KEY_CACHE.get(key_bytes) if type(key_bytes) is bytes else None
    if key is None:
        if key_bytes is None:
            raise CodecError("__consumer_offsets record without a key")
        key = decode_key(key_bytes)
        if key is None:
            return None
    if value_bytes is None:
        return CoordinatorRecord(key, None)
    if type(key) is OffsetKey:
        return CoordinatorRecord(key, _decode_offset_value(value_bytes))
    if type(key) is GroupKey:
        return CoordinatorRecord(key, _decode_group_value(value_bytes))
    return CoordinatorRecord(key, _decode_consumer_value(key, value_bytes))
