"""Property: whatever sequence of batches is appended, a closed and reopened log is identical
(same offsets, same batches byte for byte, same records, same timestamps lookups)."""
from __future__ import annotations

import tempfile

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kcoord.storage.batch import build_batch
from kcoord.storage.log import PartitionLog

blobs = st.binary(max_size=40)
record = st.tuples(st.one_of(st.none(), blobs), st.one_of(st.none(), blobs), st.integers(0, 10**13))
batch = st.lists(record, min_size=1, max_size=12)
# Each append: either the coordinator path (one batch) or a produce blob of 1-3 batches.
append = st.one_of(
    st.tuples(st.just("records"), batch),
    st.tuples(st.just("batches"), st.lists(batch, min_size=1, max_size=3), st.booleans()),
)


def snapshot(log: PartitionLog) -> tuple:
    reads = {}
    o = log.log_start_offset
    while o < log.log_end_offset:
        data = log.read(o, 1)  # exactly one batch (KIP-74)
        reads[o] = data
        o = int.from_bytes(data[:8], "big") + int.from_bytes(data[23:27], "big") + 1
    return (log.log_start_offset, log.log_end_offset, [s.base_offset for s in log.segments],
            reads, list(log.iter_records()), log.max_timestamp(),
            [log.offset_for_timestamp(t) for t in (0, 10**6, 10**12, 10**13)])


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(appends=st.lists(append, max_size=25), segment_bytes=st.integers(100, 3000),
       interval=st.integers(50, 600))
def test_reopen_is_identical(appends, segment_bytes, interval):
    with tempfile.TemporaryDirectory() as d:
        path = d + "/t-0"
        log = PartitionLog(path, segment_bytes=segment_bytes, index_interval_bytes=interval)
        expected: list[tuple[int, bytes | None, bytes | None]] = []
        for a in appends:
            if a[0] == "records":
                recs = a[1]
                ts = recs[0][2]
                first, last = log.append_records([(k, v) for k, v, _ in recs], ts)
                assert last - first + 1 == len(recs)
                expected.extend((first + i, k, v) for i, (k, v, _) in enumerate(recs))
            else:
                blob = b"".join(bytes(build_batch(b)) for b in a[1])
                first, last, lat = log.append_batches(blob, log_append_time_ms=123 if a[2] else None)
                assert last - first + 1 == sum(len(b) for b in a[1])
                flat = [(k, v) for b in a[1] for k, v, _ in b]
                expected.extend((first + i, k, v) for i, (k, v) in enumerate(flat))
        assert list(log.iter_records()) == expected
        before = snapshot(log)
        log.close()

        log = PartitionLog(path, segment_bytes=segment_bytes, index_interval_bytes=interval)
        try:
            assert snapshot(log) == before
        finally:
            log.close()


@settings(max_examples=60, deadline=None)
@given(batches=st.lists(batch, min_size=1, max_size=10), cut=st.floats(0, 1),
       garbage=st.binary(max_size=80))
def test_any_torn_tail_recovers_to_a_prefix(batches, cut, garbage):
    with tempfile.TemporaryDirectory() as d:
        path = d + "/t-0"
        log = PartitionLog(path)
        log.segment_ms = 2**63 - 1  # one segment however far apart the timestamps: its tail is torn
        ends = []
        for b in batches:
            log.append_records([(k, v) for k, v, _ in b], b[0][2])
            ends.append((log.active.size, log.log_end_offset))
        full = list(log.iter_records())
        seg_path = log.active.log_path
        log.close()
        size = int(ends[-1][0] * cut)
        with open(seg_path, "r+b") as f:
            f.truncate(size)
            f.seek(size)
            f.write(garbage)
        kept_bytes, kept_end = max(((e, o) for e, o in ends if e <= size), default=(0, 0))
        log = PartitionLog(path)
        try:
            assert log.log_end_offset == kept_end
            assert log.active.size == kept_bytes
            assert list(log.iter_records()) == full[:kept_end]
        finally:
            log.close()
