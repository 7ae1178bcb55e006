"""Compaction never changes what loads: for random histories of commits, tombstones, group
records (classic, and the consumer-group records of key versions 3-8 and 16), transactions
(committed, aborted, open) and segment rolls, with compaction passes in
place (the hand-off included) at random times, the log loads to the same last value per key
as the same history never compacted; offsets strictly increase within each segment; every
CRC is valid; no protocol file is left behind."""
from __future__ import annotations

import os
import tempfile

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from kcoord.protocol.coordinator_codec import encode_key, encode_value
from kcoord.protocol.coordinator_records import GroupKey, OffsetKey, OffsetValue
from kcoord.sidecar.compaction import (
    Segment,
    compact_partition,
    iter_records,
    iter_segment_batches,
    read_partition_segments,
)
from kcoord.sidecar.handoff import closed_segments, fingerprints, publish
from kcoord.sidecar.testdata import _group_value, control_batch, transactional_batch
from kcoord.storage.batch import build_batch
from kcoord.storage.log import PartitionLog
from kcoord.storage.transactions import transaction_outcomes

T0 = 1_700_000_000_000
RETENTION = 1000

keys = st.integers(0, 6)
values = st.one_of(st.none(), st.integers(0, 99))
ops = st.one_of(
    st.tuples(st.just("commit"), st.lists(st.tuples(keys, values), min_size=1, max_size=4)),
    st.tuples(st.just("group"), st.integers(0, 2), st.booleans()),
    st.tuples(st.just("consumer"), st.integers(0, 6), st.integers(0, 2), st.booleans()),
    st.tuples(st.just("txn"), st.integers(1, 3), st.lists(st.tuples(keys, values), min_size=1, max_size=3)),
    st.tuples(st.just("end"), st.integers(1, 3), st.booleans()),
    st.tuples(st.just("roll")),
    st.tuples(st.just("compact"), st.sampled_from([0, RETENTION // 2, RETENTION + 1]), st.sampled_from([1, 300, 1 << 20])),
)


def _consumer_record(kind: int, member: str, now: int) -> tuple:
    import uuid

    from kcoord.protocol import coordinator_records as r

    t = uuid.UUID(int=7)
    g = "cg"
    return [
        (r.ConsumerGroupMetadataKey(g), r.ConsumerGroupMetadataValue(now % 1000)),
        (r.ConsumerGroupPartitionMetadataKey(g), r.ConsumerGroupPartitionMetadataValue({"t": r.TopicMetadata(t, "t", 3)})),
        (r.ConsumerGroupMemberMetadataKey(g, member), r.ConsumerGroupMemberMetadataValue(
            None, None, "c", "/h", ("t",), None, 1000, None)),
        (r.ConsumerGroupTargetAssignmentMetadataKey(g), r.ConsumerGroupTargetAssignmentMetadataValue(now % 1000)),
        (r.ConsumerGroupTargetAssignmentMemberKey(g, member), r.ConsumerGroupTargetAssignmentMemberValue(
            {t: frozenset({now % 3})})),
        (r.ConsumerGroupCurrentMemberAssignmentKey(g, member), r.ConsumerGroupCurrentMemberAssignmentValue(
            now % 1000, 0, 0, {t: frozenset({1})}, {})),
        (r.ConsumerGroupRegularExpressionKey(g, f"{member}.*"), r.ConsumerGroupRegularExpressionValue(
            ("t",), now, now)),
    ][kind]


def key(n: int) -> bytes:
    return encode_key(OffsetKey(f"g{n % 3}", "t", n))


def value(n: int | None, ts: int) -> bytes | None:
    return None if n is None else encode_value(OffsetValue(n, "", ts, 0))


def loaded(path: str) -> dict:
    plog = PartitionLog(path)
    try:
        state: dict = {}
        for _o, k, v in plog.iter_records():
            state[k] = v
        return {k: v for k, v in state.items() if v is not None}
    finally:
        plog.close()


def check_segments(path: str) -> None:
    assert not [n for n in os.listdir(path) if n.endswith((".cleaned", ".swap"))]
    for seg in read_partition_segments(path):
        last = seg.base_offset - 1
        for h, body in iter_segment_batches(seg.data):  # raises on a bad CRC or framing
            assert h.base_offset > last
            for off, *_ in iter_records(body, h):
                assert off > last
                last = off


def check_cleaned(path: str, active: int) -> None:
    """Below the pass's first uncleanable offset each key appears once (Kafka's cleaned
    section). That offset is the active segment's base, or the base of the segment holding the
    first offset of a transaction still open (the first unstable offset), if lower."""
    segs = [seg for seg in read_partition_segments(path) if seg.base_offset < active]
    batches = [hb for seg in segs for hb in iter_segment_batches(seg.data)]
    _, still_open = transaction_outcomes(batches)
    first_unstable = min(still_open, default=active)
    bounds = [seg.base_offset for seg in segs[1:]] + [active]
    cleaned = [seg for seg, end in zip(segs, bounds, strict=True) if end <= first_unstable]
    seen = [k for seg in cleaned for h, body in iter_segment_batches(seg.data) if not h.is_control
            for _o, _t, k, _v, _h in iter_records(body, h)]
    assert len(seen) == len(set(seen))


def compact_in_place(path: str, now: int, segment_bytes: int) -> None:
    closed, active = closed_segments(path)
    if not closed:
        return
    segs = [s for s in read_partition_segments(path) if s.base_offset in closed]
    result = compact_partition(segs + [Segment(active, b"")], now_ms=now, delete_retention_ms=RETENTION,
                               segment_bytes=segment_bytes)
    publish(path, result.groups, segs, fingerprints(path, closed))
    PartitionLog(path).close()  # a server's start-up completes the swaps
    check_cleaned(path, active)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(ops, min_size=1, max_size=40))
# A tombstone after an open transaction's record, the COMMIT in the next segment: cleaning
# past the first unstable offset dropped the tombstone and the record came back.
@example([("txn", 1, [(1, 0)]), ("commit", [(1, None)]), ("roll",), ("end", 1, True),
          ("compact", 0, 1), ("compact", RETENTION + 1, 1)])
def test_compacted_log_loads_like_the_original(history):
    with tempfile.TemporaryDirectory() as tmp:
        compacted, original = os.path.join(tmp, "c"), os.path.join(tmp, "o")
        logs = {p: PartitionLog(p) for p in (compacted, original)}
        now = T0

        def append(buf: bytes | bytearray) -> None:
            for plog in logs.values():
                plog.append_batches(buf)

        try:
            for op in history:
                now += 10
                if op[0] == "commit":
                    append(build_batch([(key(n), value(v, now), now) for n, v in op[1]]))
                elif op[0] == "group":
                    g = f"g{op[1]}"
                    append(build_batch([(encode_key(GroupKey(g)),
                                         encode_value(_group_value(g, 1, now)) if op[2] else None, now)]))
                elif op[0] == "consumer":  # KIP-848 records: the cleaner only looks at key bytes
                    k, v = _consumer_record(op[1], f"m{op[2]}", now)
                    append(build_batch([(encode_key(k), encode_value(v) if op[3] else None, now)]))
                elif op[0] == "txn":
                    append(transactional_batch([(key(n), value(v, now)) for n, v in op[2]], op[1], now))
                elif op[0] == "end":
                    append(control_batch(op[1], op[2], now))
                elif op[0] == "roll":
                    for plog in logs.values():
                        plog.roll()
                else:
                    now += op[1]
                    logs[compacted].close()
                    compact_in_place(compacted, now, op[2])
                    logs[compacted] = PartitionLog(compacted)
                    check_segments(compacted)
                    assert loaded(compacted) == loaded(original)
        finally:
            for plog in logs.values():
                plog.close()
        # A last pass far in the future (every tombstone horizon passed) changes nothing either.
        logs_roll = PartitionLog(compacted)
        logs_roll.roll()
        logs_roll.close()
        compact_in_place(compacted, now + 10 * RETENTION, 1 << 20)
        check_segments(compacted)
        assert loaded(compacted) == loaded(original)
