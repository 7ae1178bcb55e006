"""kcoord.storage.dump: `kcoord dump` over real segments, text and JSON, next to a live writer."""
from __future__ import annotations

import base64
import json
import os

from kcoord.protocol.coordinator_codec import encode_key, encode_value
from kcoord.protocol.coordinator_records import GroupKey, GroupValue, MemberValue, OffsetKey, OffsetValue
from kcoord.storage.dump import main
from kcoord.storage.log import PartitionLog

MEMBER = MemberValue("m-1", None, "client", "/127.0.0.1", 300000, 45000, b"sub", b"asg")


def write_offsets_dir(log_dir) -> PartitionLog:
    log = PartitionLog(str(log_dir / "__consumer_offsets-12"))
    log.append_records([
        (encode_key(OffsetKey("g", "t", 0)), encode_value(OffsetValue(42, "", 1000))),
        (encode_key(GroupKey("g")), encode_value(GroupValue("consumer", 2, "range", "m-1", 9, [MEMBER]))),
        (encode_key(OffsetKey("g", "t", 0)), None),
        (b"\x00\x09\x00\x01x", b"\x00\x00new-style record"),  # a share-group key (not ours)
    ], 1000)
    other = PartitionLog(str(log_dir / "__consumer_offsets-3"))
    other.append_records([(encode_key(OffsetKey("h", "u", 1)), encode_value(OffsetValue(7, "m", 5, 2)))], 5)
    other.close()
    # Unrelated topics in the log dir are not dumped when a log dir is given.
    orders = PartitionLog(str(log_dir / "orders-0"))
    orders.append_records([(b"x", b"y")], 1)
    orders.close()
    return log


def test_text_output(tmp_path, capsys):
    log = write_offsets_dir(tmp_path)
    log.flush()
    assert main([str(tmp_path)]) == 0
    out = capsys.readouterr().out.splitlines()
    lines = [line for line in out if not line.startswith("#")]
    assert lines[0].startswith("offset=0 timestamp=5 key=OffsetKey(group=h, topic=u, partition=1) "
                               "value=OffsetValue(offset=7, metadata=m,")  # partition 3 comes first
    assert lines[1] == ("offset=0 timestamp=1000 key=OffsetKey(group=g, topic=t, partition=0) "
                        "value=OffsetValue(offset=42, metadata=, commit_timestamp=1000, leader_epoch=-1, "
                        "expire_timestamp=null)")
    assert lines[2].startswith("offset=1 timestamp=1000 key=GroupKey(group=g) value=GroupValue("
                               "protocol_type=consumer, generation=2, protocol=range, leader=m-1")
    assert "subscription=<3 bytes>" in lines[2]
    assert lines[3].endswith("value=null")
    assert lines[4] == "offset=3 key_version=9: unknown key version, skipped"
    assert len(lines) == 5
    log.close()


def test_json_output_of_one_segment_while_being_written(tmp_path, capsys):
    log = write_offsets_dir(tmp_path)
    seg = log.active.log_path
    # A writer mid-batch: half a batch at the end must not stop or break the dump.
    with open(seg, "ab") as f:
        f.write(b"\x00" * 30)
    assert main([seg, "--json"]) == 0
    captured = capsys.readouterr()
    rows = [json.loads(line) for line in captured.out.splitlines()]
    assert rows[0] == {
        "offset": 0, "timestamp": 1000,
        "key": {"type": "OffsetKey", "version": 1, "data": {"group": "g", "topic": "t", "partition": 0}},
        "value": {"type": "OffsetValue", "version": 3, "data": {
            "offset": 42, "metadata": "", "commit_timestamp": 1000, "leader_epoch": -1,
            "expire_timestamp": None}},
    }
    member = rows[1]["value"]["data"]["members"][0]
    assert base64.b64decode(member["subscription"]) == b"sub"
    assert rows[2]["value"] is None
    assert rows[3]["skipped"] == "unknown key version"
    assert "still being written" in captured.err
    # The dump did not touch the file.
    assert os.path.getsize(seg) == log.active.size + 30
    log.close()


def test_missing_path_and_undecodable_records(tmp_path, capsys):
    log = PartitionLog(str(tmp_path / "__consumer_offsets-0"))
    log.append_records([(b"\x00\x01garbage", b"\x00\x03")], 1)
    log.close()
    assert main([str(tmp_path / "__consumer_offsets-0"), str(tmp_path / "nope")]) == 1
    captured = capsys.readouterr()
    assert "undecodable record" in captured.out
    assert "no such file" in captured.err


def test_summary_on_stderr_keeps_stdout_the_records(tmp_path, capsys):
    log = write_offsets_dir(tmp_path)
    log.flush()
    assert main([str(tmp_path), "--json"]) == 0
    captured = capsys.readouterr()
    assert all(json.loads(line) for line in captured.out.splitlines())  # stdout: records only
    assert "dump: 5 records from 2 segment(s)" in captured.err
    log.close()
