"""The compactor's pure parts, without Spark: compaction semantics, the writer, the replay
check, the in-place lock / in-use detection and the directory swap."""
from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest
from aiokafka.record.default_records import DefaultRecordBatchBuilder

from protocol.coordinator_codec import encode_key, encode_value
from protocol.coordinator_records import OffsetKey, OffsetValue
from sidecar import inplace
from sidecar.compaction import (
    Segment,
    compact_partition,
    group_segments,
    iter_records,
    iter_segment_batches,
    read_partition_segments,
)
from sidecar.partition_io import input_records, output_records, process_partition
from sidecar.testdata import DAY_MS, write_partition
from sidecar.verify import diff_states, replay_state
from storage.batch import CorruptBatchError, build_batch, parse_header
from storage.log import PartitionLog

NOW = 1_700_000_000_000


def records_of(segments):
    out = []
    for seg in segments:
        for h, body in iter_segment_batches(seg.data):
            for off, ts, key, value, _ in iter_records(body, h):
                out.append((off, ts, key, value))
    return out


def key(n: int) -> bytes:
    return encode_key(OffsetKey("g", "t", n))


def val(off: int) -> bytes:
    return encode_value(OffsetValue(off, "", NOW, 0))


@pytest.fixture
def generated(tmp_path):
    return write_partition(str(tmp_path / "in"), 5, now_ms=NOW)


def test_latest_value_per_key_offsets_tombstones_and_active_segment(generated):
    segs = read_partition_segments(generated.path)
    assert len(segs) > 3
    result = compact_partition(segs, now_ms=NOW)
    out = result.segments
    # The active segment is byte-for-byte the input's last segment.
    assert out[-1].base_offset == segs[-1].base_offset and out[-1].data == segs[-1].data
    assert out[0].base_offset == segs[0].base_offset  # log start offset kept
    before = records_of(segs[:-1])
    cleaned = records_of(out[:-1])
    by_offset = {r[0]: r for r in before}
    latest = {}
    for off, _ts, k, _v in before:
        latest[k] = off
    # Only the latest record of each key survives, with its original offset, timestamp, bytes.
    seen = set()
    for rec in cleaned:
        assert by_offset[rec[0]] == rec
        assert latest[rec[2]] == rec[0]
        assert rec[2] not in seen
        seen.add(rec[2])
    offsets = [r[0] for r in cleaned]
    assert offsets == sorted(offsets)
    # Old tombstones are gone, recent ones kept, every other latest value kept.
    assert not (seen & generated.old_tombstones)
    assert generated.new_tombstones <= seen
    assert {r[2] for r in cleaned if r[3] is None} == generated.new_tombstones
    assert seen == set(latest) - generated.old_tombstones
    st = result.stats
    assert st.tombstones_dropped == len(generated.old_tombstones)
    assert st.records_in == generated.records
    assert st.records_out == len(cleaned) + len(records_of(out[-1:]))
    assert st.bytes_out < st.bytes_in
    assert st.log_end_offset == generated.log_end_offset


def test_delete_retention_keeps_young_tombstones(generated):
    segs = read_partition_segments(generated.path)
    keep_all = compact_partition(segs, now_ms=NOW, delete_retention_ms=7 * DAY_MS)
    kept = {r[2] for r in records_of(keep_all.segments[:-1]) if r[3] is None}
    assert kept == generated.old_tombstones | generated.new_tombstones
    assert keep_all.stats.tombstones_dropped == 0
    # Measured against the newest record instead of the clock: a week later changes nothing.
    later = compact_partition(segs, now_ms=NOW + 7 * DAY_MS, tombstone_reference="last-record")
    kept = {r[2] for r in records_of(later.segments[:-1]) if r[3] is None}
    assert kept == generated.new_tombstones


def test_output_reloads_and_replays_identically(generated, tmp_path):
    segs = read_partition_segments(generated.path)
    target = str(tmp_path / "out" / "__consumer_offsets-5")
    r = process_partition(5, segs, source_dir=generated.path, target_dir=target, now_ms=NOW,
                          verify=True, verify_mode="last-value")
    assert "error" not in r["extra"], r
    assert r["verified"].startswith("ok (last-value")
    plog = PartitionLog(target)
    try:
        assert plog.log_end_offset == generated.log_end_offset
        assert plog.log_start_offset == 0
        assert [s.size for s in plog.segments] == [len(s.data) for s in compact_partition(segs, now_ms=NOW).segments]
        # The indexes storage rebuilt are the ones on disk (opening again rewrites nothing).
        assert not any(s.sync_index_files() for s in plog.segments)
        # Every retained offset is readable through the server's read path.
        for off, *_ in records_of(read_partition_segments(target)):
            assert plog.read(off, 1 << 20)
    finally:
        plog.close()
    for mode in ("last-value", "coordinator"):
        _, a = replay_state(input_records(segs), 5, 50, mode)
        _, b = replay_state(output_records(target), 5, 50, mode)
        assert a == b and a


def test_verify_detects_a_difference():
    _, a = replay_state([(key(1), val(1)), (key(2), val(2))], 0, 50, "last-value")
    _, b = replay_state([(key(1), val(1))], 0, 50, "last-value")
    assert diff_states(a, b)
    assert not diff_states(a, dict(a))


def _seg(base: int, batches: list[list[tuple]], ts: int = NOW) -> Segment:
    parts, off = [], base
    for recs in batches:
        parts.append(build_batch([(k, v, ts) for k, v in recs], off))
        off += len(recs)
    return Segment(base, b"".join(parts))


def test_partial_batch_keeps_base_offset_and_gaps_and_last_batch_retained_empty():
    old = NOW - 3 * DAY_MS
    s0 = _seg(0, [[(key(1), val(1)), (key(2), val(2)), (key(1), val(3))]])
    s1 = Segment(3, bytes(build_batch([(key(2), None, old)], 3)))  # old tombstone: the round's last batch
    active = _seg(4, [[(key(3), val(4))]])
    out = compact_partition([s1, active, s0], now_ms=NOW).segments
    assert [s.base_offset for s in out] == [0, 4]
    batches = list(iter_segment_batches(out[0].data))
    h0, body0 = batches[0]
    assert h0.base_offset == 0 and h0.last_offset_delta == 2 and h0.record_count == 1
    assert [r[0] for r in iter_records(body0, h0)] == [2]
    # key 2's tombstone expired; its batch stays as an empty batch covering offset 3.
    h1, _ = batches[1]
    assert (h1.base_offset, h1.last_offset, h1.record_count) == (3, 3, 0)
    assert out[1].data == active.data


def test_batch_that_loses_everything_disappears_and_compression_is_kept():
    b = DefaultRecordBatchBuilder(magic=2, compression_type=1, is_transactional=0, producer_id=-1,
                                  producer_epoch=-1, base_sequence=-1, batch_size=2**31 - 1)
    for i in range(20):
        b.append(i, NOW, key(i % 2), val(i) * 5, [])
    gz = b.build()
    s0 = Segment(0, bytes(_seg(0, [[(key(0), val(0))]]).data) + bytes(_rebase(gz, 1)))
    active = _seg(21, [[(key(9), val(9))]])
    out = compact_partition([s0, active], now_ms=NOW).segments
    batches = list(iter_segment_batches(out[0].data))
    assert len(batches) == 1  # the first batch (key 0 superseded) is gone
    h, body = batches[0]
    assert h.compression == 1 and h.base_offset == 1
    assert [r[0] for r in iter_records(body, h)] == [19, 20]


def _rebase(buf, base):
    buf = bytearray(buf)
    buf[0:8] = base.to_bytes(8, "big")
    return buf


def test_corrupt_input_is_refused():
    s0 = _seg(0, [[(key(1), val(1))]])
    bad = bytearray(s0.data)
    bad[-1] ^= 0xFF
    with pytest.raises(CorruptBatchError):
        compact_partition([Segment(0, bytes(bad)), _seg(1, [[(key(1), val(2))]])], now_ms=NOW)


def test_single_segment_is_untouched_and_grouping_respects_segment_bytes():
    s = _seg(0, [[(key(1), val(1))], [(key(1), val(2))]])
    out = compact_partition([s], now_ms=NOW).segments
    assert out == [s]
    segs = [Segment(i * 10, b"x" * 100) for i in range(5)]
    assert [[g.base_offset for g in grp] for grp in group_segments(segs, 250, 50)] == [[0, 10], [20, 30], [40]]


def test_parse_header_of_empty_batch_roundtrips():
    from sidecar.compaction import empty_batch
    h = parse_header(build_batch([(key(1), val(1), NOW), (key(2), val(2), NOW)], 7))
    e = empty_batch(h)
    (h2, _), = list(iter_segment_batches(e))
    assert (h2.base_offset, h2.last_offset, h2.record_count) == (7, 8, 0)


# ---------------------------------------------------------------------------- in place


def _holder(code: str):
    p = subprocess.Popen([sys.executable, "-c", code + "\nimport sys; print('ready', flush=True); sys.stdin.read()"],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == "ready"
    return p


def test_lock_refuses_when_held_elsewhere(tmp_path):
    lockfile = tmp_path / ".lock"
    lockfile.touch()
    p = _holder(f"import fcntl; f = open({str(lockfile)!r}, 'r+'); fcntl.lockf(f, fcntl.LOCK_EX)")
    try:
        with pytest.raises(inplace.DirectoryInUseError):
            inplace.LogDirLock(str(tmp_path)).acquire()
    finally:
        p.communicate("")
    with inplace.LogDirLock(str(tmp_path)):
        with pytest.raises(inplace.DirectoryInUseError):  # a second compactor
            _holder_check(tmp_path)


def _holder_check(tmp_path):
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    code = (f"import sys\nsys.path.insert(0, {root!r})\nfrom sidecar.inplace import LogDirLock, DirectoryInUseError\n"
            f"try:\n    LogDirLock({str(tmp_path)!r}).acquire()\nexcept DirectoryInUseError:\n    sys.exit(3)\n")
    if subprocess.run([sys.executable, "-c", code]).returncode == 3:
        raise inplace.DirectoryInUseError("held")


def test_open_segment_file_means_in_use(tmp_path):
    d = tmp_path / "__consumer_offsets-0"
    PartitionLog(str(d)).close()
    inplace.check_not_in_use(str(tmp_path), [str(d)], [])
    p = _holder(f"f = open({str(d / '00000000000000000000.log')!r}, 'rb')")
    try:
        with pytest.raises(inplace.DirectoryInUseError, match="has .* open"):
            inplace.check_not_in_use(str(tmp_path), [str(d)], [])
    finally:
        p.communicate("")
    inplace.check_not_in_use(str(tmp_path), [str(d)], [])


def test_listening_server_address_means_in_use(tmp_path):
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        addr = f"127.0.0.1:{s.getsockname()[1]}"
        with pytest.raises(inplace.DirectoryInUseError, match="listening"):
            inplace.check_not_in_use(str(tmp_path), [], [addr])
    inplace.check_not_in_use(str(tmp_path), [], [addr])


@pytest.mark.parametrize("exchange", [True, False])
def test_swap_in(tmp_path, exchange):
    live = tmp_path / "__consumer_offsets-1"
    live.mkdir()
    (live / "old").write_text("old")
    staged = inplace.staging_name(str(live))
    os.mkdir(staged)
    with open(os.path.join(staged, "new"), "w") as f:
        f.write("new")
    method = inplace.swap_in(str(live), staged, allow_exchange=exchange)
    assert os.listdir(live) == ["new"]
    assert sorted(os.listdir(tmp_path)) == ["__consumer_offsets-1"]
    if not exchange:
        assert method == "rename"


def test_interrupted_fallback_swap_rolls_forward(tmp_path):
    live = str(tmp_path / "__consumer_offsets-2")
    new = inplace.staging_name(live)
    old = inplace.staging_name(live)
    os.mkdir(new)
    os.mkdir(old)
    inplace._write_journal(str(tmp_path), {"live": live, "new": new, "old": old})
    # Crash after `rename(live, old)`, before `rename(new, live)`.
    assert "moved" in inplace.recover_interrupted_swaps(str(tmp_path))
    assert sorted(os.listdir(tmp_path)) == ["__consumer_offsets-2"]
    assert inplace.recover_interrupted_swaps(str(tmp_path)) is None


def test_process_partition_reports_errors_instead_of_raising(tmp_path):
    bad = Segment(0, b"\x00" * 70)
    r = process_partition(0, [bad, _seg(1, [[(key(1), val(1))]])], source_dir=None,
                          target_dir=str(tmp_path / "x"), now_ms=int(time.time() * 1000))
    assert "CorruptBatchError" in r["extra"]["error"]
