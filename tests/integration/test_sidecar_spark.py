"""The Spark compaction job end to end: real segment files, real Spark (local[2], one session
for the module), output mode and --in-place, with --verify."""
from __future__ import annotations

import io
import os
import subprocess
import sys

import pyspark  # noqa: F401, E402  (make test installs it: failing here means setup is incomplete)
import pytest

from sidecar.compact import get_spark, parse_args, run  # noqa: E402
from sidecar.compaction import iter_records, iter_segment_batches, read_partition_segments  # noqa: E402
from sidecar.partition_io import input_records, output_records  # noqa: E402
from sidecar.testdata import write_partition  # noqa: E402
from sidecar.verify import replay_state  # noqa: E402
from storage.log_manager import LogManager  # noqa: E402

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
        tomb = {k for _o, k, v in cleaned if v is None}
        assert tomb == g.new_tombstones and not (set(keys) & g.old_tombstones)
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


def test_in_place_swaps_and_reloads(spark, tmp_path):
    data = tmp_path / "data"
    gens = make_log_dir(data)
    (data / "__consumer_offsets-0" / "partition.metadata").write_text("version: 0\ntopic_id: AAAAAAAAAAAAAAAAAAAAAA\n")
    states = {p: replay_state(input_records(read_partition_segments(g.path)), p, PARTS) for p, g in gens.items()}
    sizes = {p: sum(len(s.data) for s in read_partition_segments(g.path)) for p, g in gens.items()}
    rc, text = compact(spark, str(data), "--in-place", "--verify", "--now-ms", str(NOW))
    assert rc == 0, text
    assert "swapped 3 partition(s) in place" in text
    names = sorted(n for n in os.listdir(data) if not n.startswith("."))
    assert names == [f"__consumer_offsets-{p}" for p in range(PARTS)]  # no staging / -delete left
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


def test_in_place_refused_while_a_process_has_the_log_open(spark, tmp_path):
    data = tmp_path / "data"
    gens = make_log_dir(data)
    seg = os.path.join(gens[1].path, "00000000000000000000.log")
    holder = subprocess.Popen([sys.executable, "-c", f"f = open({seg!r}, 'rb'); import sys; print('ready', flush=True); sys.stdin.read()"],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "ready"
        before = {p: [s.data for s in read_partition_segments(g.path)] for p, g in gens.items()}
        rc, _ = compact(spark, str(data), "--in-place", "--now-ms", str(NOW))
        assert rc == 2
        assert {p: [s.data for s in read_partition_segments(g.path)] for p, g in gens.items()} == before
    finally:
        holder.communicate("")
