"""kcoord.protocol.coordinator_codec: every key/value version, against bytes built here from the
schema JSONs (an independent encoder, so a shared misunderstanding cannot hide)."""
from __future__ import annotations

import logging
import struct

import pytest

from kcoord.protocol.coordinator_codec import (
    CodecError,
    decode_key,
    decode_record,
    decode_value,
    encode_key,
    encode_value,
)
from kcoord.protocol.coordinator_records import (
    CoordinatorRecord,
    GroupKey,
    GroupValue,
    MemberValue,
    OffsetKey,
    OffsetValue,
)

# ------------------------------------------------------------------ an independent encoder


def i16(v: int) -> bytes:
    return struct.pack(">h", v)


def i32(v: int) -> bytes:
    return struct.pack(">i", v)


def i64(v: int) -> bytes:
    return struct.pack(">q", v)


def uvarint(v: int) -> bytes:
    out = bytearray()
    while v >= 0x80:
        out.append(v & 0x7F | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


def string(s: str | None, flexible: bool) -> bytes:
    if s is None:
        return uvarint(0) if flexible else i16(-1)
    b = s.encode()
    return (uvarint(len(b) + 1) if flexible else i16(len(b))) + b


def blob(b: bytes, flexible: bool) -> bytes:
    return (uvarint(len(b) + 1) if flexible else i32(len(b))) + b


# An unknown tagged field (tag 7, 3 bytes): readers must skip it.
TAGS = uvarint(1) + uvarint(7) + uvarint(3) + b"xyz"


def offset_value_bytes(version: int, v: OffsetValue, expire: int = -1) -> bytes:
    flex = version >= 4
    out = i16(version) + i64(v.offset)
    if version >= 3:
        out += i32(v.leader_epoch)
    out += string(v.metadata, flex) + i64(v.commit_timestamp)
    if version == 1:
        out += i64(expire)
    if flex:
        out += TAGS
    return out


def group_value_bytes(version: int, g: GroupValue) -> bytes:
    flex = version >= 4
    out = i16(version) + string(g.protocol_type, flex) + i32(g.generation)
    out += string(g.protocol, flex) + string(g.leader, flex)
    if version >= 2:
        out += i64(g.current_state_timestamp)
    out += uvarint(len(g.members) + 1) if flex else i32(len(g.members))
    for m in g.members:
        out += string(m.member_id, flex)
        if version >= 3:
            out += string(m.group_instance_id, flex)
        out += string(m.client_id, flex) + string(m.client_host, flex)
        if version >= 1:
            out += i32(m.rebalance_timeout)
        out += i32(m.session_timeout) + blob(m.subscription, flex) + blob(m.assignment, flex)
        if flex:
            out += TAGS
    if flex:
        out += uvarint(0)
    return out


KEY = OffsetKey("group-é", "orders", 7)
GKEY = GroupKey("group-é")
MEMBERS = [
    MemberValue("m-1", "static-1", "client-a", "/10.0.0.1", 300000, 45000, b"\x00\x01sub", b"\x00\x01asg"),
    MemberValue("m-2", None, "client-b", "/10.0.0.2", 60000, 10000, b"", b"\x00"),
]


# ------------------------------------------------------------------ keys


def test_offset_key_v1_layout_and_round_trip():
    b = encode_key(KEY)
    assert b == i16(1) + string("group-é", False) + string("orders", False) + i32(7)
    assert decode_key(b) == KEY


def test_offset_key_v0_reads_like_v1():
    b = i16(0) + string("g", False) + string("t", False) + i32(3)
    assert decode_key(b) == OffsetKey("g", "t", 3)


def test_group_key_v2_layout_and_round_trip():
    b = encode_key(GKEY)
    assert b == i16(2) + string("group-é", False)
    assert decode_key(b) == GKEY


@pytest.mark.parametrize("version", [9, 17, 100])
def test_newer_key_versions_are_skipped(version, caplog):
    """Kafka 4.0's ShareGroupPartitionMetadata (9) and streams-group keys (17+) are not ours;
    consumer-group keys (3-8, 16) and share-group keys (10-15) are
    (tests/unit/test_consumer_group_records.py, test_share_group_coordinator.py)."""
    caplog.set_level(logging.DEBUG, logger="kcoord.protocol.coordinator_codec")
    b = i16(version) + string("g", False) + b"whatever follows"
    assert decode_key(b) is None
    assert decode_record(b, b"\x00\x00junk") is None
    assert any(str(version) in r.getMessage() for r in caplog.records)


# ------------------------------------------------------------------ offset values


@pytest.mark.parametrize("version", [0, 1, 2, 3, 4])
def test_offset_value_every_version(version):
    full = OffsetValue(offset=123456789012, metadata="meta ✓", commit_timestamp=1700000000123,
                       leader_epoch=9 if version >= 3 else -1,
                       expire_timestamp=1700000999000 if version == 1 else None)
    b = offset_value_bytes(version, full, expire=full.expire_timestamp or -1)
    assert decode_value(KEY, b) == full


def test_offset_value_v1_minus_one_expiry_is_no_expiry():
    b = offset_value_bytes(1, OffsetValue(5, "", 10), expire=-1)
    assert decode_value(KEY, b).expire_timestamp is None


def test_offset_value_writes_v3():
    v = OffsetValue(42, "m", 1000, 4)
    b = encode_value(v)
    assert b == offset_value_bytes(3, v)
    assert decode_value(KEY, b) == v


def test_offset_value_writes_v1_with_explicit_expiry():
    v = OffsetValue(42, "m", 1000, -1, expire_timestamp=2000)
    b = encode_value(v)
    assert b[:2] == i16(1)
    assert b == offset_value_bytes(1, v, expire=2000)
    assert decode_value(KEY, b) == v


def test_empty_metadata_fast_path_matches_general_path():
    v = OffsetValue(7, "", 99, 3)
    assert len(encode_value(v)) == 24
    assert decode_value(KEY, encode_value(v)) == v


# ------------------------------------------------------------------ group values


def expected_group(version: int) -> GroupValue:
    members = []
    for m in MEMBERS:
        members.append(MemberValue(
            m.member_id,
            m.group_instance_id if version >= 3 else None,
            m.client_id,
            m.client_host,
            # v0 had one timeout, used for both (as Kafka does on load)
            m.rebalance_timeout if version >= 1 else m.session_timeout,
            m.session_timeout,
            m.subscription,
            m.assignment,
        ))
    return GroupValue("consumer", 12, "cooperative-sticky", "m-1",
                      1700000000000 if version >= 2 else -1, members)


@pytest.mark.parametrize("version", [0, 1, 2, 3, 4])
def test_group_value_every_version(version):
    g = GroupValue("consumer", 12, "cooperative-sticky", "m-1", 1700000000000, MEMBERS)
    assert decode_value(GKEY, group_value_bytes(version, g)) == expected_group(version)


@pytest.mark.parametrize("version", [0, 3, 4])
def test_empty_group_with_null_protocol_and_leader(version):
    g = GroupValue("consumer", 0, None, None, 5, [])
    got = decode_value(GKEY, group_value_bytes(version, g))
    assert got.protocol is None and got.leader is None and got.members == []


def test_group_value_writes_v3():
    g = GroupValue("consumer", 3, "range", "m-1", 77, MEMBERS)
    b = encode_value(g)
    assert b == group_value_bytes(3, g)
    assert decode_value(GKEY, b) == g


# ------------------------------------------------------------------ records and errors


def test_tombstones():
    assert encode_value(None) is None
    assert decode_value(KEY, None) is None
    assert decode_record(encode_key(KEY), None) == CoordinatorRecord(KEY, None)
    assert decode_record(encode_key(GKEY), None) == CoordinatorRecord(GKEY, None)


def test_decode_record_both_kinds():
    v = OffsetValue(1, "", 2, 3)
    assert decode_record(encode_key(KEY), encode_value(v)) == CoordinatorRecord(KEY, v)
    g = GroupValue("consumer", 1, "range", "m-1", 5, MEMBERS[:1])
    assert decode_record(encode_key(GKEY), encode_value(g)) == CoordinatorRecord(GKEY, g)


GOOD_OFFSET_VALUE = encode_value(OffsetValue(1, "abc", 2, 3))
GOOD_GROUP_VALUE = encode_value(GroupValue("consumer", 1, "range", "m-1", 5, MEMBERS))


@pytest.mark.parametrize("key_bytes", [
    b"",
    b"\x00",
    b"\x00\x01\x00\x05ab",  # string runs past the end
    encode_key(KEY)[:-1],  # partition cut short
    encode_key(KEY) + b"\x00",  # trailing garbage
    b"\xff\xff\x00\x01g",  # negative version
    b"\x00\x02\x00\x05g",  # group key overrun
    b"\x00\x01\x00\x02\xff\xfe\x00\x01t\x00\x00\x00\x00",  # bad UTF-8
])
def test_garbage_keys_raise_codec_error(key_bytes):
    with pytest.raises(CodecError):
        decode_key(key_bytes)


@pytest.mark.parametrize("value_bytes", [
    b"",
    b"\x00\x03",
    GOOD_OFFSET_VALUE[:-1],
    GOOD_OFFSET_VALUE + b"\x00",
    b"\x00\x09" + GOOD_OFFSET_VALUE[2:],  # unknown version
    b"\x00\x04" + bytes(12) + b"\x05ab",  # v4 compact string overrun
])
def test_garbage_offset_values_raise_codec_error(value_bytes):
    with pytest.raises(CodecError):
        decode_value(KEY, value_bytes)


@pytest.mark.parametrize("cut", [1, 2, 5, 10, 20, 40])
def test_truncated_group_values_raise_codec_error(cut):
    with pytest.raises(CodecError):
        decode_value(GKEY, GOOD_GROUP_VALUE[:-cut])


def test_garbage_group_values_raise_codec_error():
    for b in (b"", b"\x00\x07", GOOD_GROUP_VALUE + b"\x01", b"\x00\x03" + b"\xff" * 40):
        with pytest.raises(CodecError):
            decode_value(GKEY, b)


def test_codec_error_is_a_value_error():
    assert issubclass(CodecError, ValueError)


def test_record_without_key_raises():
    with pytest.raises(CodecError):
        decode_record(None, b"\x00")


def test_keys_from_memoryviews_and_bytearrays():
    b = encode_key(KEY)
    assert decode_key(memoryview(b)) == KEY
    assert decode_record(bytearray(b), None) == CoordinatorRecord(KEY, None)
