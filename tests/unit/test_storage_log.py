"""kcoord.storage.log / kcoord.storage.segment on real files: append, read, roll, reopen, index rebuild,
recovery of torn and corrupt tails, timestamps, retention, flush."""
from __future__ import annotations

import logging
import os
import struct
import zlib

import pytest

from kcoord.storage.batch import CorruptBatchError, build_batch, split_batches
from kcoord.storage.log import OffsetOutOfRangeError, PartitionLog
from kcoord.storage.segment import UnsupportedLogFormatError, segment_name


def records(n: int, start: int = 0) -> list[tuple[bytes, bytes | None]]:
    """Equal-sized records, so batches are equal-sized too."""
    return [(b"key-%06d" % i, b"value-%06d" % i) for i in range(start, start + n)]


def fill(log: PartitionLog, batches: int, per_batch: int = 5, ts0: int = 1000) -> None:
    for b in range(batches):
        log.append_records(records(per_batch, b * per_batch), ts0 + b)


def all_records(log: PartitionLog, start: int = 0) -> list:
    return list(log.iter_records(start))


def batches_of(data: bytes) -> list[tuple[int, int]]:
    return [(h.base_offset, h.last_offset) for h in split_batches(data)] if data else []


@pytest.fixture
def path(tmp_path):
    return str(tmp_path / "topic-0")


def test_new_log_is_empty(path):
    log = PartitionLog(path)
    assert (log.log_start_offset, log.log_end_offset, log.durable_offset) == (0, 0, 0)
    assert log.read(0, 1000) == b""
    assert all_records(log) == []
    assert log.max_timestamp() == (-1, -1)
    assert log.offset_for_timestamp(0) is None
    assert sorted(os.listdir(path)) == [f"{segment_name(0)}.{e}" for e in ("index", "log", "timeindex")]
    log.close()


def test_append_read_and_roll(path):
    log = PartitionLog(path, segment_bytes=2000, index_interval_bytes=300)
    fill(log, 60)
    assert log.log_end_offset == 300
    assert len(log.segments) > 3
    assert all(s.size <= 2000 for s in log.segments)
    bases = [s.base_offset for s in log.segments]
    assert bases == sorted(bases) and bases[0] == 0
    # Segment files carry Kafka's names.
    assert f"{segment_name(bases[1])}.log" in os.listdir(path)
    for offset in range(0, 300, 7):
        data = log.read(offset, 10**6)
        first, _ = batches_of(data)[0]
        assert first <= offset < first + 5
    # Whole batches only, up to max_bytes.
    one = len(log.read(0, 10**6)[: split_batches(log.read(0, 10**6))[0].size])
    assert batches_of(log.read(0, one * 2 + 1)) == [(0, 4), (5, 9)]
    # KIP-74: the first batch comes back even if it is larger than max_bytes...
    assert batches_of(log.read(12, 1)) == [(10, 14)]
    # ...unless the caller says otherwise.
    assert log.read(12, 1, min_one_batch=False) == b""
    assert log.read(300, 100) == b""
    with pytest.raises(OffsetOutOfRangeError):
        log.read(301, 100)
    recs = all_records(log)
    assert [o for o, _, _ in recs] == list(range(300))
    assert recs[4] == (4, b"key-000004", b"value-000004")
    log.append_records([(b"t", None), (b"", b"x")], 5)
    assert all_records(log, 300) == [(300, b"t", None), (301, b"", b"x")]
    log.close()


def test_reads_never_cross_into_a_partial_batch(path):
    log = PartitionLog(path)
    fill(log, 20)
    size = split_batches(log.read(0, 10**6))[0].size
    for max_bytes in range(size, 5 * size):
        data = log.read(0, max_bytes)
        assert len(data) == (max_bytes // size) * size


def test_reopen_restores_everything(path):
    log = PartitionLog(path, segment_bytes=1500, index_interval_bytes=200)
    fill(log, 50)
    before_recs = all_records(log)
    before_reads = {o: log.read(o, 5000) for o in range(0, 250, 3)}
    before_index = {n: open(os.path.join(path, n), "rb").read() for n in os.listdir(path)}
    nsegs = len(log.segments)
    log.close()

    log = PartitionLog(path, segment_bytes=1500, index_interval_bytes=200)
    assert len(log.segments) == nsegs
    assert log.log_end_offset == log.durable_offset == 250
    assert all_records(log) == before_recs
    assert {o: log.read(o, 5000) for o in before_reads} == before_reads
    # Our own index files match what a rebuild produces, so nothing is rewritten.
    assert {n: open(os.path.join(path, n), "rb").read() for n in os.listdir(path)} == before_index
    # Appending continues where it left off.
    assert log.append_records(records(2), 5000) == (250, 251)
    log.close()


def test_deleted_index_files_are_rebuilt(path):
    log = PartitionLog(path, segment_bytes=3000, index_interval_bytes=200)
    fill(log, 60)
    reads = {o: log.read(o, 700) for o in range(0, 300, 11)}
    log.close()
    saved = {}
    for n in os.listdir(path):
        if n.endswith((".index", ".timeindex")):
            saved[n] = open(os.path.join(path, n), "rb").read()
            os.unlink(os.path.join(path, n))
    assert any(len(b) > 0 for b in saved.values())

    log = PartitionLog(path, segment_bytes=3000, index_interval_bytes=200)
    for n, content in saved.items():
        assert open(os.path.join(path, n), "rb").read() == content
    assert {o: log.read(o, 700) for o in reads} == reads
    assert log.offset_for_timestamp(1030) == (150, 1030)
    log.close()


def test_inconsistent_or_preallocated_index_files(path):
    log = PartitionLog(path, index_interval_bytes=200)
    fill(log, 40)
    log.close()
    idx = os.path.join(path, f"{segment_name(0)}.index")
    tidx = os.path.join(path, f"{segment_name(0)}.timeindex")
    good_idx, good_tidx = open(idx, "rb").read(), open(tidx, "rb").read()
    assert good_idx and good_tidx

    # Kafka preallocates index files and leaves zeros after the last entry on a crash.
    with open(idx, "ab") as f:
        f.write(bytes(8 * 1000))
    with open(tidx, "ab") as f:
        f.write(bytes(12 * 1000))
    log = PartitionLog(path, index_interval_bytes=200)
    assert open(idx, "rb").read() == good_idx
    assert open(tidx, "rb").read() == good_tidx
    assert batches_of(log.read(97, 1))[0] == (95, 99)
    log.close()

    # Garbage entries (an offset beyond the segment, a misaligned size): rebuilt.
    with open(idx, "wb") as f:
        f.write(struct.pack(">ii", 9999, 5) + b"\x01\x02\x03")
    log = PartitionLog(path, index_interval_bytes=200)
    assert open(idx, "rb").read() == good_idx
    assert batches_of(log.read(97, 1))[0] == (95, 99)
    log.close()


def test_kafka_side_files_are_ignored(path):
    log = PartitionLog(path)
    fill(log, 3)
    log.close()
    extras = {
        "leader-epoch-checkpoint": b"0\n1\n0 0\n",
        "partition.metadata": b"version: 0\ntopic_id: AAAAAAAAAAAAAAAAAAAAAQ",
        f"{segment_name(0)}.snapshot": b"\x00" * 20,
        f"{segment_name(0)}.txnindex": b"",
        f"{segment_name(15)}.index": bytes(80),  # an orphan index without its .log
    }
    for n, b in extras.items():
        with open(os.path.join(path, n), "wb") as f:
            f.write(b)
    log = PartitionLog(path)
    assert log.log_end_offset == 15 and len(log.segments) == 1
    for n, b in extras.items():
        assert open(os.path.join(path, n), "rb").read() == b
    log.close()


# ------------------------------------------------------------------ recovery


def last_segment_file(path: str) -> str:
    return os.path.join(path, sorted(n for n in os.listdir(path) if n.endswith(".log"))[-1])


def test_torn_tail_is_cut_at_last_valid_batch(path, caplog):
    log = PartitionLog(path)
    fill(log, 10)
    last_batch = split_batches(log.read(45, 10**6))[0]
    log.close()
    f = last_segment_file(path)
    size = os.path.getsize(f)
    os.truncate(f, size - last_batch.size // 2)

    with caplog.at_level(logging.WARNING, logger="kcoord.storage.log"):
        log = PartitionLog(path)
    assert log.log_end_offset == 45
    assert os.path.getsize(f) == size - last_batch.size
    assert [r.getMessage() for r in caplog.records if "dropped" in r.getMessage()] == [
        f"{path}: recovery dropped {last_batch.size - last_batch.size // 2} bytes of torn or "
        "corrupt data after offset 45"]
    assert [o for o, _, _ in all_records(log)] == list(range(45))
    assert log.append_records(records(1), 9) == (45, 45)
    log.close()


def test_garbage_after_last_batch_is_cut(path):
    log = PartitionLog(path)
    fill(log, 4)
    log.close()
    f = last_segment_file(path)
    size = os.path.getsize(f)
    for garbage in (b"\x00" * 7, b"\x00" * 100, os.urandom(300), b"\xff" * 61):
        with open(f, "ab") as fh:
            fh.write(garbage)
        log = PartitionLog(path)
        assert os.path.getsize(f) == size and log.log_end_offset == 20
        log.close()


def test_flipped_byte_in_last_batch_is_cut(path):
    log = PartitionLog(path)
    fill(log, 4)
    log.close()
    f = last_segment_file(path)
    size = os.path.getsize(f)
    with open(f, "r+b") as fh:
        fh.seek(size - 5)
        b = fh.read(1)
        fh.seek(size - 5)
        fh.write(bytes([b[0] ^ 0x01]))
    log = PartitionLog(path)
    assert log.log_end_offset == 15
    assert [o for o, _, _ in all_records(log)] == list(range(15))
    log.close()


def test_corrupt_middle_segment_drops_later_segments(path):
    log = PartitionLog(path, segment_bytes=1000)
    fill(log, 40)
    bases = [s.base_offset for s in log.segments]
    assert len(bases) >= 4
    log.close()
    victim = os.path.join(path, f"{segment_name(bases[1])}.log")
    with open(victim, "r+b") as fh:
        fh.seek(70)  # inside the first batch's records: its CRC now fails
        fh.write(b"\xee")
    log = PartitionLog(path, segment_bytes=1000)
    assert [s.base_offset for s in log.segments] == bases[:2]
    assert log.log_end_offset == bases[1]
    for b in bases[2:]:
        assert not os.path.exists(os.path.join(path, f"{segment_name(b)}.log"))
        assert not os.path.exists(os.path.join(path, f"{segment_name(b)}.index"))
    assert log.append_records(records(1), 1) == (bases[1], bases[1])
    log.close()


def test_legacy_message_format_is_refused_not_truncated(path):
    log = PartitionLog(path)
    fill(log, 2)
    log.close()
    # A magic-1 message (offset, size, crc32, magic, attributes, timestamp, null key, "abc").
    body = struct.pack(">bbqii", 1, 0, 5, -1, 3) + b"abc"
    msg = struct.pack(">I", zlib.crc32(body)) + body
    f = last_segment_file(path)
    with open(f, "ab") as fh:
        fh.write(struct.pack(">qi", 10, len(msg)) + msg)
    size = os.path.getsize(f)
    with pytest.raises(UnsupportedLogFormatError):
        PartitionLog(path)
    assert os.path.getsize(f) == size


# ------------------------------------------------------------------ producer batches


def test_append_batches_assigns_offsets_per_batch(path):
    log = PartitionLog(path)
    log.append_records(records(3), 10)
    blob = build_batch([(b"a", b"1", 100), (b"b", b"2", 101)]) + build_batch([(b"c", b"3", 102)])
    assert log.append_batches(bytes(blob)) == (3, 5, -1)
    data = log.read(3, 10**6)
    hs = split_batches(data)
    assert [(h.base_offset, h.record_count, h.partition_leader_epoch) for h in hs] == [(3, 2, 0), (5, 1, 0)]
    assert all_records(log, 3) == [(3, b"a", b"1"), (4, b"b", b"2"), (5, b"c", b"3")]
    log.close()


def test_append_batches_log_append_time(path):
    log = PartitionLog(path)
    blob = build_batch([(b"a", b"1", 100), (b"b", b"2", 101)])
    assert log.append_batches(bytes(blob), log_append_time_ms=777, leader_epoch=3) == (0, 1, 777)
    h = split_batches(log.read(0, 10**6))[0]
    assert h.is_log_append_time and h.max_timestamp == 777 and h.partition_leader_epoch == 3
    assert log.offset_for_timestamp(500) == (0, 777)
    assert log.max_timestamp() == (777, 0)
    log.close()
    log = PartitionLog(path)  # the recomputed CRC survives recovery
    assert log.log_end_offset == 2
    log.close()


def test_append_batches_refuses_corrupt_bytes_and_leaves_log_alone(path):
    log = PartitionLog(path)
    log.append_records(records(2), 1)
    bad = build_batch([(b"a", b"1", 100)])
    bad[-2] ^= 0xFF
    for blob in (bytes(bad), b"\x00" * 80, bytes(build_batch([(b"a", b"1", 1)]))[:-1]):
        with pytest.raises(CorruptBatchError):
            log.append_batches(blob)
    assert log.log_end_offset == 2 and log.active.size == len(log.read(0, 10**6))
    log.close()


def test_iter_records_from_the_middle_of_a_batch(path):
    log = PartitionLog(path, segment_bytes=800, index_interval_bytes=100)
    fill(log, 30)
    assert [o for o, _, _ in all_records(log, 37)] == list(range(37, 150))
    assert all_records(log, 150) == []
    assert [o for o, _, _ in all_records(log, 149)] == [149]
    log.close()


# ------------------------------------------------------------------ timestamps


def test_offset_for_timestamp_and_max_timestamp(path):
    log = PartitionLog(path, segment_bytes=1200, index_interval_bytes=150)
    # Batch b holds 5 records at timestamps 1000 + 10*b (+0..4 within the batch).
    for b in range(40):
        log.append_batches(bytes(build_batch([(b"k", b"v", 1000 + 10 * b + i) for i in range(5)])))
    assert len(log.segments) > 2
    assert log.offset_for_timestamp(0) == (0, 1000)
    assert log.offset_for_timestamp(1000) == (0, 1000)
    assert log.offset_for_timestamp(1003) == (3, 1003)
    assert log.offset_for_timestamp(1005) == (5, 1010)
    assert log.offset_for_timestamp(1212) == (107, 1212)
    assert log.offset_for_timestamp(1394) == (199, 1394)
    assert log.offset_for_timestamp(1395) is None
    for ts in range(995, 1400, 7):
        got = log.offset_for_timestamp(ts)
        want = next(((o, 1000 + 10 * (o // 5) + o % 5) for o in range(200)
                     if 1000 + 10 * (o // 5) + o % 5 >= ts), None)
        assert got == want, ts
    assert log.max_timestamp() == (1394, 199)
    log.close()


def test_max_timestamp_points_at_the_record_not_the_batch(path):
    log = PartitionLog(path)
    log.append_batches(bytes(build_batch([(b"a", b"", 50), (b"b", b"", 90), (b"c", b"", 60)])))
    log.append_batches(bytes(build_batch([(b"d", b"", 80)])))
    assert log.max_timestamp() == (90, 1)
    log.close()


# ------------------------------------------------------------------ retention


def test_retention_by_time(path):
    log = PartitionLog(path, segment_bytes=600)
    for b in range(30):
        log.append_records(records(3), 1000 * b)
    segs = [(s.base_offset, s.max_timestamp) for s in log.segments]
    assert len(segs) > 4
    now = 40_000
    # Keep segments whose newest record is at most 20s old.
    deleted = log.apply_retention(now, 20_000, -1)
    expect = [b for b, ts in segs[:-1] if now - ts > 20_000]
    assert deleted == len(expect) > 0
    assert log.log_start_offset == segs[deleted][0]
    for b in expect:
        assert not os.path.exists(os.path.join(path, f"{segment_name(b)}.log"))
    with pytest.raises(OffsetOutOfRangeError):
        log.read(0, 100)
    assert all_records(log)[0][0] == log.log_start_offset
    # Reopening starts at the first remaining segment.
    log.close()
    log = PartitionLog(path, segment_bytes=600)
    assert log.log_start_offset == segs[deleted][0]
    # Never the active segment, however old.
    old = len(log.segments) - 1
    assert log.apply_retention(10**12, 0, -1) == old
    assert len(log.segments) == 1 and log.log_end_offset == 90
    log.close()


def test_retention_by_bytes(path):
    log = PartitionLog(path, segment_bytes=600)
    for b in range(30):
        log.append_records(records(3), 1000 * b)
    total = log.size_in_bytes
    limit = total // 2
    deleted = log.apply_retention(0, -1, limit)
    assert deleted > 0
    assert log.size_in_bytes >= limit
    # One more deletion would have gone below the limit.
    assert log.size_in_bytes - log.segments[0].size < limit
    assert log.apply_retention(0, -1, -1) == 0
    log.close()


# ------------------------------------------------------------------ durability


def test_flush_tracks_durable_offset(path):
    log = PartitionLog(path, segment_bytes=500)
    fill(log, 2)
    assert log.durable_offset == 0
    log.flush()
    assert log.durable_offset == 10
    n = log.sync_count
    log.flush()  # nothing new: no fdatasync
    assert log.sync_count == n
    fill(log, 10)  # several rolls
    log.flush()
    assert log.durable_offset == log.log_end_offset == 60
    log.close()


# ---- segment.ms: Kafka's time-based roll (LogSegment.shouldRoll / timeWaitedForRoll)

def bases_of(log: PartitionLog) -> list[int]:
    return [s.base_offset for s in log.segments]


def test_segment_ms_rolls_at_the_first_append_after_it_by_record_timestamps(path):
    log = PartitionLog(path, clock_ms=lambda: 0)  # the wall clock plays no part while records carry timestamps
    log.segment_ms = 10_000
    log.append_records(records(2), 1_000_000)
    log.append_records(records(2, 2), 1_010_000)        # exactly segment.ms later: not past it
    assert bases_of(log) == [0]
    log.append_batches(bytes(build_batch([(b"k", b"v", 1_010_001)])))  # past it: this append rolls
    assert bases_of(log) == [0, 4]
    assert log.segments[0].sealed and not log.segments[1].sealed
    log.append_records(records(1, 5), 1_015_000)        # measured from the new segment's first batch
    assert bases_of(log) == [0, 4]
    log.append_records(records(1, 6), 1_020_002)
    assert bases_of(log) == [0, 4, 6]
    # a late record (older timestamp) never rolls
    log.append_records(records(1, 7), 900_000)
    assert bases_of(log) == [0, 4, 6]
    log.close()


def test_segment_ms_after_a_restart_counts_from_the_first_batch_on_disk(path):
    log = PartitionLog(path)
    log.append_records(records(1), 5_000)
    log.append_records(records(1, 1), 9_000)            # the segment's first batch stays at 5,000
    log.close()
    log = PartitionLog(path)
    log.segment_ms = 10_000
    log.append_records(records(1, 2), 15_000)
    assert bases_of(log) == [0]
    log.append_records(records(1, 3), 15_001)
    assert bases_of(log) == [0, 3]
    log.close()


def test_segment_ms_uses_the_wall_clock_when_the_first_batch_has_no_timestamp(path):
    now = [50_000]
    log = PartitionLog(path, clock_ms=lambda: now[0])  # its first segment is made at 50,000
    log.segment_ms = 1_000
    log.append_records(records(1), -1)
    now[0] = 51_000
    log.append_records(records(1, 1), -1)
    assert bases_of(log) == [0]
    now[0] = 51_001
    log.append_records(records(1, 2), -1)
    assert bases_of(log) == [0, 2]
    log.close()


def test_segment_jitter_ms_rolls_earlier_by_the_segments_own_share(path):
    log = PartitionLog(path, clock_ms=lambda: 0)
    log.segment_ms, log.segment_jitter_ms = 10_000, 4_000
    log.append_records(records(1), 0)
    jitter = log.active.roll_jitter_seed % 4_000
    log.append_records(records(1, 1), 10_000 - jitter)
    assert bases_of(log) == [0]
    log.append_records(records(1, 2), 10_001 - jitter)
    assert bases_of(log) == [0, 2]
    log.close()


def test_segment_ms_never_rolls_an_empty_segment(path):
    log = PartitionLog(path, clock_ms=lambda: 10**12)
    log.segment_ms = 1
    log.append_records(records(1), 0)                  # the empty first segment takes it
    assert bases_of(log) == [0]
    log.close()
