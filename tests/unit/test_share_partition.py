"""The share-partition state machine (server/group/share/partition.py) on a fake clock: every
acknowledgement type in every record state, lock expiry, the delivery-count limit, the window
advancing, Kafka's error codes for bad acknowledgements, the record-lock limit, and rebuilding
from a snapshot."""
from __future__ import annotations

import pytest

from kcoord.protocol.errors import ErrorCode
from kcoord.server.group.share.partition import (
    DELIVERY_COUNT_LIMIT_DEFAULT,
    PARTITION_MAX_RECORD_LOCKS_DEFAULT,
    RECORD_LOCK_DURATION_MS_DEFAULT,
    TRANSITIONS,
    AckBatch,
    AckError,
    AckType,
    Acquired,
    RecordState,
    SharePartition,
    Snapshot,
    StateBatch,
)

LOCK = 1000
A, B = "member-a", "member-b"


def part(**kw) -> SharePartition:
    kw.setdefault("lock_duration_ms", LOCK)
    return SharePartition(0, **kw)


def ack(first, last, *types) -> AckBatch:
    return AckBatch(first, last, tuple(int(t) for t in types))


def states(p: SharePartition) -> list[tuple[int, int, str, int, str | None]]:
    return [(r.first, r.last, r.state.name, r.delivery_count, r.member) for r in p.runs]


def test_kafka_defaults():
    assert RECORD_LOCK_DURATION_MS_DEFAULT == 30_000
    assert DELIVERY_COUNT_LIMIT_DEFAULT == 5
    assert PARTITION_MAX_RECORD_LOCKS_DEFAULT == 2000
    assert [int(t) for t in AckType] == [0, 1, 2, 3, 4]
    assert [int(s) for s in RecordState] == [0, 1, 2, 4]


# --- every acknowledgement type in every record state ---------------------------------------

def _record_5_in(state: str) -> SharePartition:
    """Records 0-9 in flight; record 5 in `state`; record 0 stays acquired by B so the window
    does not move past record 5."""
    p = part()
    assert p.acquire(A, [(0, 9)], 100, now=0) == [Acquired(0, 9, 1)]
    p.acknowledge(A, [ack(0, 0, AckType.RELEASE)], now=1)
    assert p.acquire(B, [(0, 0)], 1, now=1) == [Acquired(0, 0, 2)]
    if state == "available":
        p.acknowledge(A, [ack(5, 5, AckType.RELEASE)], now=2)
    elif state == "acknowledged":
        p.acknowledge(A, [ack(5, 5, AckType.ACCEPT)], now=2)
    elif state == "archived":
        p.acknowledge(A, [ack(5, 5, AckType.REJECT)], now=2)
    elif state == "acquired-by-other":
        p.acknowledge(A, [ack(5, 5, AckType.RELEASE)], now=2)
        assert p.acquire(B, [(5, 5)], 1, now=2) == [Acquired(5, 5, 2)]
    else:
        assert state == "acquired"
    return p


OK = {  # acknowledgement by A of record 5 acquired by A -> (state, delivery count, lock deadline)
    AckType.GAP: (RecordState.ARCHIVED, 1, None),
    AckType.ACCEPT: (RecordState.ACKNOWLEDGED, 1, None),
    AckType.RELEASE: (RecordState.AVAILABLE, 1, None),
    AckType.REJECT: (RecordState.ARCHIVED, 1, None),
    AckType.RENEW: (RecordState.ACQUIRED, 1, 50 + LOCK),
}


@pytest.mark.parametrize("ack_type", list(AckType), ids=lambda t: t.name)
@pytest.mark.parametrize("state", ["available", "acquired", "acquired-by-other", "acknowledged", "archived"])
def test_every_ack_type_in_every_state(state, ack_type):
    p = _record_5_in(state)
    before = states(p)
    if state != "acquired":
        with pytest.raises(AckError) as e:
            p.acknowledge(A, [ack(5, 5, ack_type)], now=50)
        assert e.value.code == ErrorCode.INVALID_RECORD_STATE
        assert states(p) == before  # nothing changed
        return
    p.acknowledge(A, [ack(5, 5, ack_type)], now=50)
    r = p.state_of(5)
    assert (r.state, r.delivery_count, r.lock_deadline) == OK[ack_type]
    assert r.member == (A if ack_type is AckType.RENEW else None)
    # the neighbours are untouched
    assert p.state_of(4).state is RecordState.ACQUIRED and p.state_of(6).state is RecordState.ACQUIRED


def test_table_is_the_only_source_of_moves():
    """Acquired is the only state acknowledgements leave; Available only by acquiring."""
    assert {s for s, _ in TRANSITIONS} == {RecordState.AVAILABLE, RecordState.ACQUIRED}


# --- acquisition, locks, delivery counts -----------------------------------------------------

def test_acquire_whole_batches_and_gaps_between_them():
    p = part()
    # batches 0-2 and 5-6: offsets 3-4 are absent from the log (compacted) and acquired as gaps
    assert p.acquire(A, [(0, 2), (5, 6)], 10, now=0) == [Acquired(0, 6, 1)]
    assert (p.start_offset, p.end_offset) == (0, 7)
    assert p.acquire(B, [(0, 2), (5, 6)], 10, now=0) == []  # nothing available
    assert p.next_fetch_offset() == 7


def test_acquire_stops_after_max_records_at_a_batch_boundary():
    p = part()
    got = p.acquire(A, [(0, 4), (5, 9), (10, 14)], 7, now=0)
    assert got == [Acquired(0, 9, 1)]  # the batch holding the 7th record is taken whole
    assert p.end_offset == 10


def test_max_record_locks_caps_the_window():
    p = part(max_record_locks=100)
    batches = [(i, i + 9) for i in range(0, 300, 10)]
    assert p.acquire(A, batches, 1000, now=0) == [Acquired(0, 99, 1)]
    assert p.acquire(B, [(b, e) for b, e in batches if b >= 100], 1000, now=0) == []
    p.acknowledge(A, [ack(0, 9, AckType.ACCEPT)], now=1)
    assert p.start_offset == 10
    assert p.acquire(B, [(b, e) for b, e in batches if b >= 100], 1000, now=1) == [Acquired(100, 109, 1)]


def test_lock_expiry_makes_records_available_again():
    p = part()
    p.acquire(A, [(0, 9)], 10, now=0)
    assert p.next_lock_deadline() == LOCK
    assert p.expire_locks(now=LOCK - 1) == []
    changed = p.expire_locks(now=LOCK)
    assert [(r.first, r.last, r.state) for r in changed] == [(0, 9, RecordState.AVAILABLE)]
    assert p.next_fetch_offset() == 0
    assert p.acquire(B, [(0, 9)], 10, now=LOCK) == [Acquired(0, 9, 2)]
    with pytest.raises(AckError) as e:  # A's lock is gone: its late acknowledgement is refused
        p.acknowledge(A, [ack(0, 9, AckType.ACCEPT)], now=LOCK + 1)
    assert e.value.code == ErrorCode.INVALID_RECORD_STATE


def test_renew_extends_the_lock():
    p = part()
    p.acquire(A, [(0, 0)], 1, now=0)
    p.acknowledge(A, [ack(0, 0, AckType.RENEW)], now=900)
    assert p.expire_locks(now=LOCK) == []
    assert p.state_of(0).state is RecordState.ACQUIRED
    assert len(p.expire_locks(now=900 + LOCK)) == 1


def test_delivery_count_limit_archives():
    p = part(delivery_count_limit=3)
    for attempt in (1, 2):
        assert p.acquire(A, [(0, 1)], 10, now=0) == [Acquired(0, 1, attempt)]
        p.acknowledge(A, [ack(0, 1, AckType.RELEASE)], now=0)
    assert p.acquire(A, [(0, 1)], 10, now=0) == [Acquired(0, 1, 3)]
    p.expire_locks(now=LOCK)  # the third delivery's lock runs out: the limit is reached
    assert p.runs == [] and (p.start_offset, p.end_offset) == (2, 2)  # archived and forgotten
    assert p.acquire(B, [(0, 1)], 10, now=LOCK) == []


def test_member_gone_returns_its_records_without_counting():
    p = part()
    p.acquire(A, [(0, 4)], 10, now=0)
    p.acquire(B, [(5, 9)], 10, now=0)
    p.release_member(A, now=1)
    assert states(p) == [(0, 4, "AVAILABLE", 1, None), (5, 9, "ACQUIRED", 1, B)]


# --- the window ------------------------------------------------------------------------------

def test_window_advances_past_the_done_prefix():
    p = part()
    p.acquire(A, [(0, 9)], 10, now=0)
    p.acknowledge(A, [ack(2, 4, AckType.ACCEPT)], now=1)
    assert p.start_offset == 0  # 0-1 still acquired
    p.acknowledge(A, [ack(0, 1, 1, 3)], now=1)  # per-offset types: ACCEPT 0, REJECT 1
    assert p.start_offset == 5
    assert states(p) == [(5, 9, "ACQUIRED", 1, A)]
    p.acknowledge(A, [ack(5, 9, AckType.ACCEPT)], now=2)
    assert (p.start_offset, p.end_offset, p.runs) == (10, 10, [])


def test_acknowledging_below_the_start_is_skipped():
    p = part()
    p.acquire(A, [(0, 9)], 10, now=0)
    p.acknowledge(A, [ack(0, 4, AckType.ACCEPT)], now=1)
    p.acknowledge(A, [ack(0, 4, AckType.ACCEPT)], now=1)  # again: already done, no error
    p.acknowledge(A, [ack(3, 6, AckType.ACCEPT)], now=1)  # straddles the start: 5-6 accepted
    assert p.start_offset == 7


# --- bad acknowledgements ------------------------------------------------------------------------

@pytest.mark.parametrize("batches", [
    [ack(5, 4, AckType.ACCEPT)],  # last before first
    [ack(0, 3, AckType.ACCEPT, AckType.ACCEPT)],  # two types for four offsets
    [ack(0, 0, 9)],  # unknown type
    [ack(0, 3, AckType.ACCEPT), ack(3, 5, AckType.ACCEPT)],  # overlap
    [ack(4, 5, AckType.ACCEPT), ack(0, 1, AckType.ACCEPT)],  # out of order
    [ack(8, 12, AckType.ACCEPT)],  # past the acquired records
    [ack(0, 1, AckType.ACCEPT), ack(20, 20, AckType.ACCEPT)],  # the second one is past them
], ids=["reversed", "type-count", "unknown-type", "overlap", "order", "past-end", "partly-past-end"])
def test_invalid_request_changes_nothing(batches):
    p = part()
    p.acquire(A, [(0, 9)], 10, now=0)
    before = (states(p), p.start_offset, p.end_offset)
    with pytest.raises(AckError) as e:
        p.acknowledge(A, batches, now=1)
    assert e.value.code == ErrorCode.INVALID_REQUEST
    assert (states(p), p.start_offset, p.end_offset) == before


def test_one_bad_record_rolls_back_the_whole_request():
    p = part()
    p.acquire(A, [(0, 4)], 5, now=0)
    p.acquire(B, [(5, 9)], 5, now=0)
    with pytest.raises(AckError) as e:
        p.acknowledge(A, [ack(0, 4, AckType.ACCEPT), ack(5, 5, AckType.ACCEPT)], now=1)
    assert e.value.code == ErrorCode.INVALID_RECORD_STATE
    assert states(p) == [(0, 4, "ACQUIRED", 1, A), (5, 9, "ACQUIRED", 1, B)]
    assert p.start_offset == 0


# --- persistence ---------------------------------------------------------------------------------

def test_snapshot_and_rebuild():
    p = part()
    p.acquire(A, [(0, 9)], 10, now=0)
    p.acknowledge(A, [ack(0, 1, AckType.ACCEPT), ack(3, 3, AckType.REJECT), ack(4, 5, AckType.RELEASE)], now=1)
    snap = p.snapshot()
    assert snap == Snapshot(2, (
        StateBatch(2, 2, 0, 1),  # acquired: persisted as available with its delivery count
        StateBatch(3, 3, 4, 1),
        StateBatch(4, 9, 0, 1),
    ))
    q = SharePartition.from_snapshot(snap, lock_duration_ms=LOCK)
    assert (q.start_offset, q.end_offset) == (2, 10)
    assert q.acquire(B, [(0, 9)], 100, now=5) == [Acquired(2, 2, 2), Acquired(4, 9, 2)]
    assert q.snapshot() == Snapshot(2, (StateBatch(2, 2, 0, 2), StateBatch(3, 3, 4, 1), StateBatch(4, 9, 0, 2)))


def test_rebuild_skips_what_is_below_the_start():
    snap = Snapshot(5, (StateBatch(0, 6, 0, 1), StateBatch(7, 7, 2, 1), StateBatch(8, 9, 4, 2)))
    q = SharePartition.from_snapshot(snap)
    assert (q.start_offset, q.end_offset) == (5, 10)
    assert states(q) == [(5, 6, "AVAILABLE", 1, None), (7, 7, "ACKNOWLEDGED", 1, None), (8, 9, "ARCHIVED", 2, None)]
