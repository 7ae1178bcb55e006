"""The Spark compaction job on __transaction_state (kcoord-compact --topics __transaction_state;
the sidecar cleans it as every cleanup.policy=compact topic of the registry): the latest record
of each transactional id survives, tombstones of expired ids follow Kafka's delete.retention.ms
rule, and --verify replays input and output through the transaction coordinator's own replay."""
from __future__ import annotations

import io
import json

import pyspark  # noqa: F401  (make test installs it)
import pytest

from kcoord.protocol.txn_log import TxnKey, TxnValue, decode_txn_record, encode_txn_key, encode_txn_value
from kcoord.sidecar.compact import get_spark, parse_args, run
from kcoord.sidecar.compaction import iter_records, iter_segment_batches, read_partition_segments
from kcoord.storage.log import PartitionLog

NOW = 1_700_000_000_000


@pytest.fixture(scope="module")
def spark():
    s = get_spark("local[2]", "kcoord-compact-txn-tests")
    s.sparkContext.setLogLevel("ERROR")
    yield s
    s.stop()


def write(path: str) -> dict[str, TxnValue | None]:
    """Many transactions of a few ids in small segments; returns the latest value of each id."""
    plog = PartitionLog(path, segment_bytes=4096)
    latest: dict[str, TxnValue | None] = {}
    for round_ in range(60):
        for i in range(5):
            tid = f"tx-{i}"
            state = (0, 1, 2, 4)[round_ % 4]
            v = TxnValue(100 + i, round_ // 4, 60000, state, {"t": [i]} if state else {}, NOW + round_, NOW)
            plog.append_records([(encode_txn_key(TxnKey(tid)), encode_txn_value(v))], NOW + round_)
            latest[tid] = v
    plog.append_records([(encode_txn_key(TxnKey("tx-4")), None)], NOW + 100)  # expired
    latest["tx-4"] = None
    plog.close()
    return latest


def records(path: str) -> list:
    return [(k, v) for s in read_partition_segments(path) for h, b in iter_segment_batches(s.data)
            for _o, _t, k, v, _h in iter_records(b, h)]


def registry(data) -> None:
    """kcoord's topic registry naming __transaction_state as the server creates it."""
    (data / "kcoord-topics.json").write_text(json.dumps({"version": 1, "topics": [
        {"name": "__transaction_state", "topic_id": "8a2f3c4e-0000-4000-8000-000000000001", "partitions": 3,
         "internal": True, "configs": {"cleanup.policy": "compact", "segment.bytes": "4096"}}]}))


def test_transaction_state_compacts_to_the_latest_value_per_id(spark, tmp_path):
    data = tmp_path / "data"
    latest = write(str(data / "__transaction_state-2"))
    registry(data)
    before = records(str(data / "__transaction_state-2"))
    out = io.StringIO()
    rc = run(parse_args([str(data), "--topics", "__transaction_state", "--output", str(tmp_path / "out"),
                         "--verify", "--now-ms", str(NOW + 1000), "--json"]), spark=spark, out=out)
    assert rc == 0, out.getvalue()
    stats = [json.loads(x) for x in out.getvalue().splitlines() if x.startswith("{")]
    assert len(stats) == 1 and stats[0]["verified"].startswith("ok (transactions, "), out.getvalue()
    out_dir = str(tmp_path / "out" / "__transaction_state-2")
    after = records(out_dir)
    assert len(after) < len(before)
    got = {}
    for k, v in after:
        rec = decode_txn_record(k, v)
        got[rec.key.transactional_id] = rec.value
    for tid, value in latest.items():
        assert got.get(tid) == value
    # the active (last) segment is never cleaned; the cleaned ones hold one record per id (the
    # tombstone kept at its first cleaning, as Kafka does)
    cleaned = read_partition_segments(out_dir)[:-1]
    keys = [k for s in cleaned for h, b in iter_segment_batches(s.data) for _o, _t, k, _v, _h in iter_records(b, h)]
    assert keys and len(keys) == len(set(keys))


def test_nothing_to_compact_is_reported(spark, tmp_path):
    (tmp_path / "data").mkdir()
    out = io.StringIO()
    rc = run(parse_args([str(tmp_path / "data"), "--topics", "__transaction_state", "--output",
                         str(tmp_path / "out")]), spark=spark, out=out)
    assert rc == 2
