"""The consumer-group records of __consumer_offsets (key versions 3-8 and 16) in Kafka's
format: each key and value round-trips through the codec; the bytes are Kafka's layout (keys:
int16 version + int16-length strings; values: int16 version + a flexible body, compact strings
and arrays, tagged fields); a value with tagged fields we do not know still decodes; `kcoord
dump` prints them."""
from __future__ import annotations

import json
import uuid

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

T = uuid.UUID("0123456789abcdef0123456789abcdef")
RECORDS = [
    (3, ConsumerGroupMetadataKey("g"), ConsumerGroupMetadataValue(5)),
    (4, ConsumerGroupPartitionMetadataKey("g"), ConsumerGroupPartitionMetadataValue({"t": TopicMetadata(T, "t", 6)})),
    (5, ConsumerGroupMemberMetadataKey("g", "m"),
     ConsumerGroupMemberMetadataValue(None, "rack", "c", "/h", ("a", "b"), None, 300000, "uniform")),
    (5, ConsumerGroupMemberMetadataKey("g", "m"),
     ConsumerGroupMemberMetadataValue("i", None, "c", "/h", (), "t.*", 300000, None,
                                      ClassicMemberMetadata(45000, [("range", b"\x00\x01")]))),
    (6, ConsumerGroupTargetAssignmentMetadataKey("g"), ConsumerGroupTargetAssignmentMetadataValue(5)),
    (7, ConsumerGroupTargetAssignmentMemberKey("g", "m"),
     ConsumerGroupTargetAssignmentMemberValue({T: frozenset({0, 2})})),
    (8, ConsumerGroupCurrentMemberAssignmentKey("g", "m"),
     ConsumerGroupCurrentMemberAssignmentValue(5, 4, 1, {T: frozenset({1})}, {T: frozenset({3})})),
    (16, ConsumerGroupRegularExpressionKey("g", "t.*"), ConsumerGroupRegularExpressionValue(("t", "t2"), 7, 123)),
]


@pytest.mark.parametrize("version, key, value", RECORDS)
def test_round_trip(version, key, value):
    kb, vb = encode_key(key), encode_value(value)
    assert int.from_bytes(kb[:2], "big") == version and vb[:2] == b"\x00\x00"
    assert decode_key(kb) == key and decode_value(key, vb) == value
    assert decode_record(kb, None).value is None  # tombstones
    assert decode_record(kb, vb).value == value


def test_kafkas_layout():
    assert encode_key(ConsumerGroupMemberMetadataKey("g", "m")) == b"\x00\x05\x00\x01g\x00\x01m"
    # version 0, epoch 5, no tagged fields
    assert encode_value(ConsumerGroupMetadataValue(5)) == b"\x00\x00\x00\x00\x00\x05\x00"
    # version, member epoch, previous epoch, state, [topic id, [partitions]], [], tagged fields
    assert encode_value(ConsumerGroupCurrentMemberAssignmentValue(5, 4, 0, {T: frozenset({1})}, {})) == (
        b"\x00\x00" + b"\x00\x00\x00\x05" + b"\x00\x00\x00\x04" + b"\x00" + b"\x02" + T.bytes + b"\x02\x00\x00\x00\x01"
        + b"\x00" + b"\x01" + b"\x00")


def test_unknown_tagged_fields_are_skipped():
    vb = encode_value(ConsumerGroupTargetAssignmentMetadataValue(9))
    with_tag = vb[:-1] + b"\x01\x05\x02ab"  # one tagged field (tag 5, two bytes) of a newer Kafka
    assert decode_value(ConsumerGroupTargetAssignmentMetadataKey("g"), with_tag).assignment_epoch == 9


def test_malformed_values_and_keys_are_codec_errors():
    with pytest.raises(CodecError):
        decode_value(ConsumerGroupMetadataKey("g"), b"\x00\x00\x00")
    with pytest.raises(CodecError):
        decode_key(b"\x00\x05\x00\x01g")  # a member key without its member id


def test_dump_prints_them(tmp_path, capsys):
    from kcoord.storage.dump import main
    from kcoord.storage.log import PartitionLog

    log = PartitionLog(str(tmp_path / "__consumer_offsets-0"))
    log.append_records([(encode_key(k), encode_value(v)) for _, k, v in RECORDS], 1000)
    log.close()
    assert main([str(tmp_path), "--json"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [r["key"]["version"] for r in rows] == [v for v, _, _ in RECORDS]
    assert rows[5]["value"]["data"] == {"partitions": {str(T): [0, 2]}}
