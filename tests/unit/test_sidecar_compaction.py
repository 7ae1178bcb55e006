"""The compactor's pure parts, without Spark: compaction semantics (KIP-534 tombstones
included), the writer and the replay check. The hand-off to a live directory is in
test_compaction_handoff.py."""
from __future__ import annotations

import time

import pytest
from aiokafka.record.default_records import DefaultRecordBatchBuilder

from kcoord.protocol.coordinator_codec import encode_key, encode_value
from kcoord.protocol.coordinator_records import OffsetKey, OffsetValue
from kcoord.sidecar.compaction import (
    Segment,
    compact_partition,
    group_segments,
    iter_records,
    iter_segment_batches,
    read_partition_segments,
)
from kcoord.sidecar.partition_io import DirectoryOutput, input_records, output_records, process_partition
from kcoord.sidecar.testdata import DAY_MS, write_partition
from kcoord.sidecar.verify import diff_states, replay_state
from kcoord.storage.batch import CorruptBatchError, build_batch, parse_header
from kcoord.storage.log import PartitionLog

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
    # A first cleaning keeps every latest record, tombstones included (KIP-534).
    tombstones = generated.old_tombstones | generated.new_tombstones
    assert {r[2] for r in cleaned if r[3] is None} == tombstones
    assert seen == set(latest)
    st = result.stats
    assert st.tombstones_dropped == 0
    assert st.records_in == generated.records
    assert st.records_out == len(cleaned) + len(records_of(out[-1:]))
    assert st.bytes_out < st.bytes_in
    assert st.log_end_offset == generated.log_end_offset


def horizons(segments):
    """key -> the delete horizon stamped on its tombstone's batch (None if not stamped)."""
    out = {}
    for seg in segments:
        for h, body in iter_segment_batches(seg.data):
            for _off, _ts, k, v, _ in iter_records(body, h):
                if v is None:
                    out[k] = h.base_timestamp if h.attributes & 0x40 else None
    return out


def test_tombstones_live_delete_retention_after_their_first_cleaning(generated):
    segs = read_partition_segments(generated.path)
    tombstones = generated.old_tombstones | generated.new_tombstones
    first = compact_partition(segs, now_ms=NOW, delete_retention_ms=DAY_MS)
    # Stamped with now + delete.retention.ms, whatever the tombstone's own timestamp.
    assert horizons(first.segments[:-1]) == dict.fromkeys(tombstones, NOW + DAY_MS)
    # Record timestamps survive the re-based batch (the horizon is the base timestamp).
    before = {r[0]: r[1] for r in records_of(segs)}
    assert all(before[off] == ts for off, ts, *_ in records_of(first.segments))
    # A second cleaning before the horizon keeps them (copied as stamped) ...
    again = compact_partition(first.segments, now_ms=NOW + DAY_MS - 1, delete_retention_ms=DAY_MS)
    assert horizons(again.segments[:-1]) == dict.fromkeys(tombstones, NOW + DAY_MS)
    assert again.stats.tombstones_dropped == 0
    # ... one at the horizon drops them, and nothing else.
    last = compact_partition(first.segments, now_ms=NOW + DAY_MS, delete_retention_ms=DAY_MS)
    assert horizons(last.segments[:-1]) == {}
    assert last.stats.tombstones_dropped == len(tombstones)
    kept = {r[2] for r in records_of(last.segments[:-1])}
    assert kept == {r[2] for r in records_of(first.segments[:-1])} - tombstones


def test_output_reloads_and_replays_identically(generated, tmp_path):
    segs = read_partition_segments(generated.path)
    target = str(tmp_path / "out" / "__consumer_offsets-5")
    r = process_partition(5, segs, source_dir=generated.path, output=DirectoryOutput(target), now_ms=NOW,
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
    s0 = _seg(0, [[(key(1), val(1)), (key(2), val(2)), (key(1), val(3))]])
    s1 = _seg(3, [[(key(2), None)]])  # a tombstone: the group's last batch
    active = _seg(4, [[(key(3), val(4))]])
    first = compact_partition([s1, active, s0], now_ms=NOW, delete_retention_ms=DAY_MS)
    out = compact_partition(first.segments, now_ms=NOW + DAY_MS, delete_retention_ms=DAY_MS)
    assert [g.replaces for g in out.groups] == [[0]]  # s0 and s1 merged into one group earlier
    out = out.segments
    assert [s.base_offset for s in out] == [0, 4]
    batches = list(iter_segment_batches(out[0].data))
    h0, body0 = batches[0]
    assert h0.base_offset == 0 and h0.last_offset_delta == 2 and h0.record_count == 1
    assert [r[0] for r in iter_records(body0, h0)] == [2]
    # key 2's tombstone passed its horizon; its batch stays as an empty batch covering offset 3,
    # so the cleaned segment still spans [0, 4).
    h1, _ = batches[1]
    assert (h1.base_offset, h1.last_offset, h1.record_count) == (3, 3, 0)
    assert out[1].data == active.data


def test_every_group_keeps_its_last_batch_so_it_spans_the_segments_it_replaces():
    # Three segments, each fully superseded by the next, cleaned one group per segment.
    segs = [_seg(0, [[(key(1), val(1))]]), _seg(1, [[(key(1), val(2))]]), _seg(2, [[(key(1), val(3))]]),
            _seg(3, [[(key(9), val(9))]])]
    out = compact_partition(segs, now_ms=NOW, segment_bytes=1)
    assert [g.replaces for g in out.groups] == [[0], [1], [2]]
    for g in out.groups:
        (h, _), = list(iter_segment_batches(g.segment.data))
        assert (h.base_offset, h.next_offset) == (g.replaces[0], g.replaces[0] + 1)
    assert [h.record_count for g in out.groups for h, _ in iter_segment_batches(g.segment.data)] == [0, 0, 1]


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
    from kcoord.sidecar.compaction import empty_batch
    h = parse_header(build_batch([(key(1), val(1), NOW), (key(2), val(2), NOW)], 7))
    e = empty_batch(h)
    (h2, _), = list(iter_segment_batches(e))
    assert (h2.base_offset, h2.last_offset, h2.record_count) == (7, 8, 0)


def test_process_partition_reports_errors_instead_of_raising(tmp_path):
    bad = Segment(0, b"\x00" * 70)
    r = process_partition(0, [bad, _seg(1, [[(key(1), val(1))]])], source_dir=None,
                          output=DirectoryOutput(str(tmp_path / "x")), now_ms=int(time.time() * 1000))
    assert "CorruptBatchError" in r["extra"]["error"]
