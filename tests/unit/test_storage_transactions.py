"""Transactions in __consumer_offsets (a real Kafka's TxnOffsetCommit): loading and compaction
agree that committed transactional records count, aborted and open ones do not."""
from __future__ import annotations

from kcoord.protocol.coordinator_codec import encode_key, encode_value
from kcoord.protocol.coordinator_records import OffsetKey, OffsetValue
from kcoord.sidecar.compaction import (
    compact_partition,
    iter_records,
    iter_segment_batches,
    read_partition_segments,
)
from kcoord.sidecar.partition_io import input_records
from kcoord.sidecar.testdata import control_batch, transactional_batch
from kcoord.storage.batch import build_batch
from kcoord.storage.log import PartitionLog
from kcoord.storage.transactions import ABORT, COMMIT, control_type, transaction_outcomes

NOW = 1_700_000_000_000


def k(n: int) -> bytes:
    return encode_key(OffsetKey("g", "t", n))


def v(n: int) -> bytes:
    return encode_value(OffsetValue(n, "", NOW, 0))


def write(path: str) -> None:
    plog = PartitionLog(path)
    plog.append_batches(build_batch([(k(1), v(1), NOW)]))                # 0: plain commit
    plog.append_batches(transactional_batch([(k(1), v(2)), (k(2), v(2))], 7, NOW))  # 1-2: committed below
    plog.append_batches(control_batch(7, True, NOW))                      # 3: COMMIT pid 7
    plog.append_batches(transactional_batch([(k(1), v(9)), (k(4), v(9))], 9, NOW))  # 4-5: aborted
    plog.append_batches(control_batch(9, False, NOW))                     # 6: ABORT pid 9
    plog.append_batches(build_batch([(k(5), v(5), NOW)]))                 # 7
    plog.roll()
    plog.append_batches(transactional_batch([(k(3), v(3))], 8, NOW))      # 8: never ends (open)
    plog.append_batches(build_batch([(k(5), v(7), NOW)]))                 # 9: past the first unstable offset
    plog.roll()
    plog.append_batches(build_batch([(k(6), v(6), NOW)]))                 # 10: the active segment
    plog.close()


def loaded(path: str) -> dict[bytes, bytes | None]:
    plog = PartitionLog(path)
    try:
        state: dict[bytes, bytes | None] = {}
        for _o, key, value in plog.iter_records():
            state[key] = value
        return state
    finally:
        plog.close()


def test_markers_and_outcomes(tmp_path):
    write(str(tmp_path))
    segs = read_partition_segments(str(tmp_path))
    batches = [hb for seg in segs[:2] for hb in iter_segment_batches(seg.data)]
    types = [control_type(body) for h, body in batches if h.is_control]
    assert types == [COMMIT, ABORT]
    aborted, still_open = transaction_outcomes(batches)
    assert (aborted, still_open) == ({4}, {8})


def test_loading_counts_committed_transactions_only(tmp_path):
    write(str(tmp_path))
    assert loaded(str(tmp_path)) == {k(1): v(2), k(2): v(2), k(5): v(7), k(6): v(6)}


def test_compaction_drops_aborted_and_stops_at_the_first_unstable_offset(tmp_path):
    write(str(tmp_path))
    segs = read_partition_segments(str(tmp_path))
    out = compact_partition(segs, now_ms=NOW)
    cleaned = out.segments[0]
    kept = [(h, [r[0] for r in iter_records(body, h)]) for h, body in iter_segment_batches(cleaned.data)]
    offsets = [o for h, recs in kept if not h.is_control for o in recs]
    # k1=v1 superseded by the committed k1=v2; the aborted batch is gone; k5=v5 stays: the
    # k5=v7 that supersedes it lies past the open transaction (Kafka's first unstable offset).
    assert offsets == [1, 2, 7]
    assert [h.base_offset for h, _ in kept if h.is_control] == [3, 6]
    assert next(h for h, _ in kept if h.base_offset == 1).is_transactional
    assert out.stats.aborted_dropped == 2
    # The segment holding the open transaction is left as it was, and not swapped.
    assert [g.replaces for g in out.groups] == [[0]]
    assert [s.base_offset for s in out.untouched] == [8] and out.untouched[0].data == segs[1].data
    assert dict(input_records(out.segments)) == dict(input_records(segs)) == loaded(str(tmp_path))
