"""The share-group durable records (protocol/share_records.py): __consumer_offsets key versions
10-15 and __share_group_state's ShareSnapshot / ShareUpdate. Each record's expected bytes are
assembled here field by field with struct from Kafka's record schemas (int16 version, then
the fields in schema order; flexible values: unsigned-varint lengths + 1, a tagged-field
section after every struct), independently of the kafka-python machinery the codec uses; then
decoding gives back the record, and bad bytes are refused with ShareRecordError."""
from __future__ import annotations

import struct
import uuid

import pytest

from kcoord.protocol import share_records as sr

T1 = uuid.UUID("11111111-2222-3333-4444-555555555555")
T2 = uuid.UUID("00000000-0000-0000-0000-0000000000ff")


def h(n):
    return struct.pack(">h", n)


def i(n):
    return struct.pack(">i", n)


def q(n):
    return struct.pack(">q", n)


def s(x):  # non-flexible string (keys)
    return h(len(x)) + x.encode()


def cs(x):  # compact string, length + 1 (values here are short)
    return bytes([len(x) + 1]) + x.encode()


def arr(items):  # compact array of byte strings
    return bytes([len(items) + 1]) + b"".join(items)


NO_TAGS = b"\x00"

KEYS = [
    (sr.ShareGroupMemberMetadataKey("g", "m1"), h(10) + s("g") + s("m1")),
    (sr.ShareGroupMetadataKey("g"), h(11) + s("g")),
    (sr.ShareGroupTargetAssignmentMetadataKey("g"), h(12) + s("g")),
    (sr.ShareGroupTargetAssignmentMemberKey("g", "m1"), h(13) + s("g") + s("m1")),
    (sr.ShareGroupCurrentMemberAssignmentKey("g", "m1"), h(14) + s("g") + s("m1")),
    (sr.ShareGroupStatePartitionMetadataKey("g"), h(15) + s("g")),
]

RECORDS = [
    (sr.ShareGroupMetadataKey("g"), sr.ShareGroupMetadataValue(7), h(0) + i(7) + NO_TAGS),
    (sr.ShareGroupMemberMetadataKey("g", "m1"),
     sr.ShareGroupMemberMetadataValue(None, "client", "/127.0.0.1", ("t1", "t2")),
     h(0) + b"\x00" + cs("client") + cs("/127.0.0.1") + arr([cs("t1"), cs("t2")]) + NO_TAGS),
    (sr.ShareGroupMemberMetadataKey("g", "m1"),
     sr.ShareGroupMemberMetadataValue("rack", "c", "h", ()),
     h(0) + cs("rack") + cs("c") + cs("h") + arr([]) + NO_TAGS),
    (sr.ShareGroupTargetAssignmentMetadataKey("g"), sr.ShareGroupTargetAssignmentMetadataValue(3),
     h(0) + i(3) + NO_TAGS),
    (sr.ShareGroupTargetAssignmentMemberKey("g", "m1"),
     sr.ShareGroupTargetAssignmentMemberValue({T1: frozenset({0, 2})}),
     h(0) + arr([T1.bytes + arr([i(0), i(2)]) + NO_TAGS]) + NO_TAGS),
    (sr.ShareGroupCurrentMemberAssignmentKey("g", "m1"),
     sr.ShareGroupCurrentMemberAssignmentValue(5, 4, 0, {T2: frozenset({1})}),
     h(0) + i(5) + i(4) + b"\x00" + arr([T2.bytes + arr([i(1)]) + NO_TAGS]) + NO_TAGS),
    (sr.ShareGroupStatePartitionMetadataKey("g"),
     sr.ShareGroupStatePartitionMetadataValue((sr.TopicPartitionsInfo(T1, "t", (0, 1)),), ((T2, "u"),)),
     h(0) + arr([T1.bytes + cs("t") + arr([i(0), i(1)]) + NO_TAGS]) + arr([T2.bytes + cs("u") + NO_TAGS])
     + NO_TAGS),
    (sr.ShareStateKey(True, "g", T1, 3),
     sr.ShareSnapshotValue(0, 1, 0, -1, 1000, 1000, ()),  # delivery complete count unknown: no tag
     h(0) + i(0) + i(1) + i(0) + q(-1) + q(1000) + q(1000) + arr([]) + NO_TAGS),
    (sr.ShareStateKey(True, "g", T1, 3),
     sr.ShareSnapshotValue(3, 2, 4, 10, 1000, 2000,
                           (sr.StateBatch(10, 19, 0, 1), sr.StateBatch(20, 29, 2, 3)), delivery_complete_count=5),
     h(0) + i(3) + i(2) + i(4) + q(10) + q(1000) + q(2000)
     + arr([q(10) + q(19) + b"\x00" + h(1) + NO_TAGS, q(20) + q(29) + b"\x02" + h(3) + NO_TAGS])
     + b"\x01" + b"\x00" + b"\x04" + i(5)),  # one tagged field: tag 0, 4 bytes, int32 5
    (sr.ShareStateKey(False, "g", T1, 3),
     sr.ShareUpdateValue(3, 4, 12, (sr.StateBatch(12, 15, 4, 5),)),
     h(0) + i(3) + i(4) + q(12) + arr([q(12) + q(15) + b"\x04" + h(5) + NO_TAGS]) + NO_TAGS),
]


@pytest.mark.parametrize("key,expected", KEYS, ids=lambda x: type(x).__name__ if not isinstance(x, bytes) else "")
def test_consumer_offsets_keys(key, expected):
    assert sr.encode_group_key(key) == expected
    assert sr.decode_group_key(expected) == key


def test_share_state_keys():
    for snapshot, version in ((True, 0), (False, 1)):
        key = sr.ShareStateKey(snapshot, "group-1", T1, 7)
        expected = h(version) + s("group-1") + T1.bytes + i(7)
        assert sr.encode_state_key(key) == expected
        assert sr.decode_state_key(expected) == key


@pytest.mark.parametrize("key,value,expected", RECORDS, ids=lambda x: type(x).__name__ if not isinstance(x, bytes) else "")
def test_values(key, value, expected):
    assert sr.encode_value(value) == expected
    assert sr.decode_value(key, expected) == value


def test_tombstone():
    assert sr.decode_value(sr.ShareGroupMetadataKey("g"), None) is None


def test_unknown_tagged_fields_are_skipped():
    """A newer writer's extra tagged field does not stop the decoding."""
    body = h(0) + i(7) + b"\x01" + b"\x05" + b"\x02" + b"\xab\xcd"
    assert sr.decode_value(sr.ShareGroupMetadataKey("g"), body) == sr.ShareGroupMetadataValue(7)


@pytest.mark.parametrize("b", [b"", b"\x00", h(9) + s("g"), h(11) + h(5) + b"ab", h(11) + s("g") + b"x",
                               h(10) + s("g"), h(11) + h(2) + b"\xff\xfe"])
def test_bad_group_keys(b):
    with pytest.raises(sr.ShareRecordError):
        sr.decode_group_key(b)


@pytest.mark.parametrize("b", [h(2) + s("g") + T1.bytes + i(0), h(0) + s("g") + T1.bytes, h(1) + s("g")])
def test_bad_state_keys(b):
    with pytest.raises(sr.ShareRecordError):
        sr.decode_state_key(b)


@pytest.mark.parametrize("key,value,expected", RECORDS[:1] + RECORDS[-2:],
                         ids=["metadata", "snapshot", "update"])
def test_bad_values(key, value, expected):
    for bad in (expected[:-3], h(1) + expected[2:], b""):
        with pytest.raises(sr.ShareRecordError):
            sr.decode_value(key, bad)
