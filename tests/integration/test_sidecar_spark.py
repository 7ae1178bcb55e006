"""The Spark compaction job end to end: real segment files, real Spark (local[2], one session
for the module), output mode and --in-place, with --verify; KIP-534 tombstones over two
cleanings; the progress thread sees the pass's stages."""
from __future__ import annotations

import io
import os
import re
import time

import pyspark  # noqa: F401  (make test installs it: failing here means setup is incomplete)
import pytest

from kcoord.sidecar.compact import _Progress, find_partitions, get_spark, parse_args, plan_pass, run
from kcoord.sidecar.compaction import (
    ATTR_DELETE_HORIZON,
    DEFAULT_DELETE_RETENTION_MS,
    iter_records,
    iter_segment_batches,
    read_partition_segments,
)
from kcoord.sidecar.handoff import CleanerLock
from kcoord.sidecar.partition_io import input_records, output_records
from kcoord.sidecar.pipeline import run_spark
from kcoord.sidecar.testdata import write_partition
from kcoord.sidecar.verify import replay_state
from kcoord.storage.log_manager import LogManager
from kcoord.storage.swap import pending_swaps

NOW = 1_700_000_000_000
PARTS = 3


@pytest.fixture(scope="module")
def spark():
    s = get_spark("local[2]", "kcoord-compact-tests")
    s.sparkContext.setLogLevel("ERROR")
    yield s
    s.stop()


def make_log_dir(path) -> dict:
    gens = {p: write_partition(str(path), p, num_partitions=PARTS, seed=p, rounds=5 + p) for p in range(PARTS)}
    return gens


def records(segs):
    return [(off, k, v) for s in segs for h, b in iter_segment_batches(s.data) for off, _t, k, v, _ in iter_records(b, h)]


def tombstone_horizons(segs) -> set:
    """The delete horizons of the batches holding tombstones (None: not stamped)."""
    out = set()
    for s in segs:
        for h, b in iter_segment_batches(s.data):
            if any(v is None for _o, _t, _k, v, _h in iter_records(b, h)):
                out.add(h.base_timestamp if h.attributes & ATTR_DELETE_HORIZON else None)
    return out


def compact(spark, *argv) -> tuple[int, str]:
    out = io.StringIO()
    rc = run(parse_args(list(argv)), spark=spark, out=out)
    return rc, out.getvalue()


def test_output_mode_compacts_and_verifies(spark, tmp_path):
    gens = make_log_dir(tmp_path / "data")
    originals = {p: read_partition_segments(g.path) for p, g in gens.items()}
    rc, text = compact(spark, str(tmp_path / "data"), "--output", str(tmp_path / "out"),
                       "--verify", "--now-ms", str(NOW))
    assert rc == 0, text
    assert "total" in text and text.count("ok (") == PARTS
    for p, g in gens.items():
        segs_in = originals[p]
        out_dir = tmp_path / "out" / f"__consumer_offsets-{p}"
        segs_out = read_partition_segments(str(out_dir))
        # input untouched, active segment copied verbatim
        assert [s.data for s in read_partition_segments(g.path)] == [s.data for s in segs_in]
        assert segs_out[-1].base_offset == segs_in[-1].base_offset and segs_out[-1].data == segs_in[-1].data
        cleaned = records(segs_out[:-1])
        before = {off: (k, v) for off, k, v in records(segs_in[:-1])}
        latest = {}
        for off, (k, _v) in sorted(before.items()):
            latest[k] = off
        keys = [k for _o, k, _v in cleaned]
        assert len(keys) == len(set(keys))  # one record per key
        for off, k, v in cleaned:
            assert before[off] == (k, v) and latest[k] == off  # latest value, original offset
        # KIP-534: the first cleaning keeps every latest tombstone, old or recent, and stamps
        # its batch with the delete horizon (now + delete.retention.ms)
        tomb = {k for _o, k, v in cleaned if v is None}
        assert tomb == g.new_tombstones | g.old_tombstones
        assert tombstone_horizons(segs_out[:-1]) == {NOW + DEFAULT_DELETE_RETENTION_MS}
        # the server's storage opens it without cutting anything
        with_logs = LogManager(str(tmp_path / "out"))
        try:
            plog = with_logs.get("__consumer_offsets", p)
            assert plog.log_end_offset == g.log_end_offset
            assert plog.size_in_bytes == sum(len(s.data) for s in segs_out)
        finally:
            with_logs.close()
        mode, a = replay_state(input_records(segs_in), p, PARTS)
        _, b = replay_state(output_records(str(out_dir)), p, PARTS, mode)
        assert a == b

    # A second cleaning before the horizon changes nothing; one at the horizon drops the
    # tombstones (and the replayed state stays the same).
    rc, text = compact(spark, str(tmp_path / "out"), "--output", str(tmp_path / "out2"),
                       "--verify", "--now-ms", str(NOW + 1000))
    assert rc == 0, text
    for p in gens:
        name = f"__consumer_offsets-{p}"
        assert ([s.data for s in read_partition_segments(str(tmp_path / "out2" / name))]
                == [s.data for s in read_partition_segments(str(tmp_path / "out" / name))])
    later = NOW + DEFAULT_DELETE_RETENTION_MS
    rc, text = compact(spark, str(tmp_path / "out"), "--output", str(tmp_path / "out3"),
                       "--verify", "--now-ms", str(later))
    assert rc == 0, text
    for p, g in gens.items():
        segs = read_partition_segments(str(tmp_path / "out3" / f"__consumer_offsets-{p}"))
        cleaned = records(segs[:-1])
        assert not [k for _o, k, v in cleaned if v is None]
        assert not ({k for _o, k, _v in cleaned} & (g.new_tombstones | g.old_tombstones))


def test_in_place_swaps_and_reloads(spark, tmp_path):
    data = tmp_path / "data"
    gens = make_log_dir(data)
    (data / "__consumer_offsets-0" / "partition.metadata").write_text("version: 0\ntopic_id: AAAAAAAAAAAAAAAAAAAAAA\n")
    states = {p: replay_state(input_records(read_partition_segments(g.path)), p, PARTS) for p, g in gens.items()}
    sizes = {p: sum(len(s.data) for s in read_partition_segments(g.path)) for p, g in gens.items()}
    rc, text = compact(spark, str(data), "--in-place", "--verify", "--now-ms", str(NOW))
    assert rc == 0, text
    assert text.count("ok (") == PARTS
    names = sorted(n for n in os.listdir(data) if n.startswith("__"))
    assert names == [f"__consumer_offsets-{p}" for p in range(PARTS)]
    for g in gens.values():  # swapped in (no server: the compactor completes the swaps)
        assert not pending_swaps(g.path)
        assert not [n for n in os.listdir(g.path) if n.endswith((".cleaned", ".swap", ".deleted"))]
    assert (data / "__consumer_offsets-0" / "partition.metadata").exists()
    logs = LogManager(str(data))
    try:
        for p, g in gens.items():
            plog = logs.get("__consumer_offsets", p)
            assert plog.log_end_offset == g.log_end_offset
            assert plog.size_in_bytes < sizes[p]
    finally:
        logs.close()
    for p, g in gens.items():
        mode, before = states[p]
        assert replay_state(output_records(g.path), p, PARTS, mode)[1] == before
    # Compacting again changes nothing more (and still verifies).
    rc, text = compact(spark, str(data), "--in-place", "--verify", "--now-ms", str(NOW))
    assert rc == 0, text


def test_in_place_refused_while_another_compactor_works(spark, tmp_path):
    data = tmp_path / "data"
    gens = make_log_dir(data)
    before = {p: [s.data for s in read_partition_segments(g.path)] for p, g in gens.items()}
    with CleanerLock(str(data)):
        rc, _ = compact(spark, str(data), "--in-place", "--now-ms", str(NOW))
    assert rc == 2
    assert {p: [s.data for s in read_partition_segments(g.path)] for p, g in gens.items()} == before


def test_progress_reports_the_pass_stages(spark, tmp_path):
    data = tmp_path / "data"
    make_log_dir(data)
    plans, _ = plan_pass(str(data), find_partitions(str(data), None), output_dir=str(tmp_path / "out"))
    out = io.StringIO()
    progress = _Progress(spark, out, every_s=0.05)
    progress.start()
    try:
        started = time.monotonic()
        results = run_spark(spark, plans, dict(now_ms=NOW))
    finally:
        progress.done.set()
        progress.join()
    assert len(results) == PARTS and not any(r["extra"].get("error") for r in results)
    lines = re.findall(r"stage (\d+) (\d+)/(\d+) tasks done", out.getvalue())
    if time.monotonic() - started > 1.0:  # a pass this short may end between two looks
        assert lines, out.getvalue()
    # the stages are phase 1 (one task per cleanable segment, plus the planned-partition rows)
    # and phase 2 (one task per partition)
    assert {int(total) for _s, _d, total in lines} <= {PARTS, sum(len(p.bases) - 1 for p in plans) + 2,
                                                       sum(len(p.bases) - 1 for p in plans) + 1}
