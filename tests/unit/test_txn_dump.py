"""`kcoord dump` on __transaction_state segments and on the transactions in __consumer_offsets."""
from __future__ import annotations

import json

from kcoord.protocol.coordinator_codec import encode_key, encode_value
from kcoord.protocol.coordinator_records import OffsetKey, OffsetValue
from kcoord.protocol.txn_log import TxnKey, TxnValue, encode_txn_key, encode_txn_value
from kcoord.storage.dump import main
from kcoord.storage.log import PartitionLog
from kcoord.storage.txn_batches import build_marker, build_transactional_batch


def _logs(tmp_path):
    txn = PartitionLog(str(tmp_path / "__transaction_state-3"))
    ongoing = TxnValue(7, 2, 60000, 1, {"t": [0, 1]}, 1000, 900, last_producer_epoch=1)
    txn.append_records([(encode_txn_key(TxnKey("tx")), encode_txn_value(ongoing)),
                        (encode_txn_key(TxnKey("gone")), None),
                        (b"\x00\x09\x00\x01x", b"")], 1000)
    txn.close()
    offsets = PartitionLog(str(tmp_path / "__consumer_offsets-1"))
    kv = [(encode_key(OffsetKey("g", "t", 0)), encode_value(OffsetValue(5, "", 1000)))]
    offsets.append_batches(build_transactional_batch(kv, 7, 2, 1000))
    offsets.append_batches(build_marker(7, 2, True, 0, 1001))
    offsets.close()


def test_dump_text(tmp_path, capsys):
    _logs(tmp_path)
    assert main([str(tmp_path)]) == 0
    out = capsys.readouterr().out.splitlines()
    records = [line for line in out if not line.startswith("#")]
    assert records[0] == ("offset=0 timestamp=1000 transactional producer_id=7 key=OffsetKey(group=g, topic=t, "
                          "partition=0) value=OffsetValue(offset=5, metadata=, commit_timestamp=1000, leader_epoch=-1, "
                          "expire_timestamp=null)")
    assert records[1] == "offset=1 timestamp=1001 marker=COMMIT producer_id=7 producer_epoch=2"
    assert records[2].startswith("offset=0 timestamp=1000 key=TxnKey(transactional_id=tx) value=TxnValue(producer_id=7, "
                                 "producer_epoch=2, timeout_ms=60000, state=1, partitions={'t': [0, 1]}")
    assert records[2].endswith("(Ongoing)") and "last_producer_epoch" not in records[2]
    assert records[3] == "offset=1 timestamp=1000 key=TxnKey(transactional_id=gone) value=null"
    assert records[4] == "offset=2 key_version=9: unknown key version, skipped"
    assert out.index(f"# {tmp_path}/__consumer_offsets-1/00000000000000000000.log") < \
        out.index(f"# {tmp_path}/__transaction_state-3/00000000000000000000.log")


def test_dump_json(tmp_path, capsys):
    _logs(tmp_path)
    assert main([str(tmp_path / "__transaction_state-3"), "--json"]) == 0
    lines = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert lines[0]["key"] == {"type": "TxnKey", "version": 0, "data": {"transactional_id": "tx"}}
    v = lines[0]["value"]
    assert (v["type"], v["version"], v["state"]) == ("TxnValue", 1, "Ongoing")
    assert v["data"]["partitions"] == {"t": [0, 1]} and "last_producer_epoch" not in v["data"]
    assert lines[1]["value"] is None


def test_dump_undecodable_value_is_reported(tmp_path, capsys):
    txn = PartitionLog(str(tmp_path / "__transaction_state-0"))
    txn.append_records([(encode_txn_key(TxnKey("tx")), b"\x00\x01\x00")], 1)
    txn.close()
    assert main([str(tmp_path)]) == 1
    assert "undecodable record" in capsys.readouterr().out
