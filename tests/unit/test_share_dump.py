"""`kcoord dump` decodes the share-group records: __consumer_offsets key versions 10-15 and
__share_group_state's ShareSnapshot / ShareUpdate, in text and JSON, from real segments; key
version 9 (dropped by Kafka 4.1) is still listed as skipped; malformed share records are
reported, not fatal."""
from __future__ import annotations

import json
import uuid

from kcoord.protocol import share_records as sr
from kcoord.storage.dump import main
from kcoord.storage.log import PartitionLog

T1 = uuid.UUID("11111111-2222-3333-4444-555555555555")


def _write(log_dir):
    offsets = PartitionLog(str(log_dir / "__consumer_offsets-0"))
    offsets.append_records([
        (sr.encode_group_key(sr.ShareGroupMetadataKey("sg")), sr.encode_value(sr.ShareGroupMetadataValue(4))),
        (sr.encode_group_key(sr.ShareGroupCurrentMemberAssignmentKey("sg", "m1")),
         sr.encode_value(sr.ShareGroupCurrentMemberAssignmentValue(4, 3, 0, {T1: frozenset({0, 1})}))),
        (sr.encode_group_key(sr.ShareGroupMemberMetadataKey("sg", "m1")), None),
        (b"\x00\x09\x00\x02sg", b"\x00\x00"),  # ShareGroupPartitionMetadata: not decoded
        (b"\x00\x0b\x00\x09sg", b"\x00\x00"),  # a malformed ShareGroupMetadataKey
    ], 1000)
    offsets.close()
    state = PartitionLog(str(log_dir / "__share_group_state-2"))
    state.append_records([
        (sr.encode_state_key(sr.ShareStateKey(True, "sg", T1, 0)),
         sr.encode_value(sr.ShareSnapshotValue(0, 1, 0, 10, 900, 950, (sr.StateBatch(10, 14, 2, 1),), 5))),
        (sr.encode_state_key(sr.ShareStateKey(False, "sg", T1, 0)),
         sr.encode_value(sr.ShareUpdateValue(0, 0, 15, (sr.StateBatch(15, 15, 4, 5),)))),
    ], 2000)
    state.close()


def test_text(tmp_path, capsys):
    _write(tmp_path)
    assert main([str(tmp_path)]) == 1  # one undecodable record
    lines = [line for line in capsys.readouterr().out.splitlines() if not line.startswith("#")]
    assert lines[0] == "offset=0 timestamp=1000 key=ShareGroupMetadataKey(group=sg) value=ShareGroupMetadataValue(epoch=4)"
    assert lines[1] == ("offset=1 timestamp=1000 key=ShareGroupCurrentMemberAssignmentKey(group=sg, member_id=m1) "
                        "value=ShareGroupCurrentMemberAssignmentValue(member_epoch=4, previous_member_epoch=3, "
                        f"state=0, assigned={{{T1}: [0, 1]}})")
    assert lines[2].endswith("key=ShareGroupMemberMetadataKey(group=sg, member_id=m1) value=null")
    assert lines[3] == "offset=3 key_version=9: unknown key version, skipped"
    assert lines[4].startswith("offset=4 undecodable record:")
    # __share_group_state comes after __consumer_offsets
    assert lines[5] == (f"offset=0 timestamp=2000 key=ShareStateKey(snapshot=True, group=sg, topic_id={T1}, partition=0) "
                        "value=ShareSnapshotValue(snapshot_epoch=0, state_epoch=1, leader_epoch=0, start_offset=10, "
                        "create_timestamp=900, write_timestamp=950, state_batches=[StateBatch(first_offset=10, "
                        "last_offset=14, delivery_state=2, delivery_count=1)], delivery_complete_count=5)")
    assert "value=ShareUpdateValue(snapshot_epoch=0, leader_epoch=0, start_offset=15" in lines[6]
    assert len(lines) == 7


def test_json_of_one_share_state_partition(tmp_path, capsys):
    _write(tmp_path)
    assert main([str(tmp_path / "__share_group_state-2"), "--json"]) == 0
    out = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert out[0]["key"] == {"type": "ShareStateKey", "version": 0,
                             "data": {"snapshot": True, "group": "sg", "topic_id": str(T1), "partition": 0}}
    assert out[0]["value"]["type"] == "ShareSnapshotValue" and out[0]["value"]["version"] == 0
    assert out[0]["value"]["data"]["state_batches"] == [
        {"first_offset": 10, "last_offset": 14, "delivery_state": 2, "delivery_count": 1}]
    assert out[1]["key"]["version"] == 1 and out[1]["value"]["data"]["delivery_complete_count"] == -1
