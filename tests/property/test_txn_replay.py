"""Property: whatever InitProducerId / AddPartitionsToTxn / EndTxn calls (transactions v1 and
v2, the server at transaction.version 1 or 2, epochs run up to exhaustion and producer ids
rotating), markers completing or not, timeouts, expirations and failed appends happen, loading
the __transaction_state
records that were written (their bytes, latest per key) into a fresh coordinator yields the
same transactional ids with the same persisted state as the live coordinator; and a prepared
transaction is completed after that restart the way it was decided."""
from __future__ import annotations

import os
import sys

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "unit"))

from txn_helpers import TxnHarness  # noqa: E402

from kcoord.protocol.errors import ErrorCode as E  # noqa: E402
from kcoord.protocol.txn_log import TxnKey, TxnRecord, TxnValue, encode_txn_key, encode_txn_value  # noqa: E402
from kcoord.server.txn.metadata import INT16_MAX  # noqa: E402
from kcoord.server.txn.state import TxnState  # noqa: E402

IDS = ["a", "b", "c"]
PARTS = [("t0", 0), ("t0", 1), ("t1", 0), ("__consumer_offsets", 2)]

ops = st.lists(st.one_of(
    st.tuples(st.just("init"), st.sampled_from(IDS), st.booleans(), st.integers(-1, 2)),
    st.tuples(st.just("add"), st.sampled_from(IDS), st.lists(st.sampled_from(PARTS), min_size=1, max_size=3),
              st.integers(-1, 1), st.sampled_from([0, 2])),
    st.tuples(st.just("end"), st.sampled_from(IDS), st.booleans(), st.integers(-1, 0), st.sampled_from([0, 2])),
    st.tuples(st.just("exhaust"), st.sampled_from(IDS), st.booleans()),
    st.tuples(st.just("v2 transaction"), st.sampled_from(IDS), st.booleans()),
    st.tuples(st.just("markers")),
    st.tuples(st.just("time"), st.integers(1, 120_000)),
    st.tuples(st.just("timeouts")),
    st.tuples(st.just("expire")),
    st.tuples(st.just("fail"), st.sampled_from([E.NOT_COORDINATOR, E.COORDINATOR_NOT_AVAILABLE])),
), max_size=40)


def persisted(h: TxnHarness) -> dict:
    return {m.transactional_id: m.snapshot() for m in h.coord.transactions()}


def exhaust(h: TxnHarness, tid: str) -> None:
    """Write (and replay) a record taking a finished id's epoch to the last one a producer
    may hold, as if it had run 32,766 transactions."""
    meta = h.coord.get(tid)
    if meta is None or meta.pending is not None or meta.state not in (TxnState.EMPTY, TxnState.COMPLETE_COMMIT,
                                                                       TxnState.COMPLETE_ABORT):
        return
    value = TxnValue(producer_id=meta.producer_id, producer_epoch=INT16_MAX - 1, timeout_ms=meta.timeout_ms,
                     state=meta.state.id, partitions={}, last_update_ms=h.clock.now_ms(), start_ms=meta.start_ms,
                     client_transaction_version=meta.client_transaction_version)
    record = TxnRecord(TxnKey(tid), value)
    h.log.append((encode_txn_key(record.key), encode_txn_value(value)))
    h.coord.replay(record)


def v2_transaction(h: TxnHarness, tid: str, commit: bool) -> None:
    """A producer's whole transaction in v2: Produce v12's implicit add, then EndTxn v5."""
    meta = h.coord.get(tid)
    if meta is not None:
        h.run(h.coord.add_partitions(tid, meta.producer_id, meta.producer_epoch, [PARTS[0]], client_version=2))
        h.run(h.coord.end_txn(tid, meta.producer_id, meta.producer_epoch, commit, client_version=2))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from([1, 2]), ops)
def test_replay_equals_live(server_version, steps) -> None:
    h = TxnHarness(transactional_id_expiration_ms=200_000, transaction_version=server_version)
    for step in steps:
        kind = step[0]
        if kind == "init":
            _, tid, with_expected, epoch_delta = step
            meta = h.coord.get(tid)
            expected = (meta.producer_id, meta.producer_epoch + epoch_delta) if with_expected and meta else None
            h.init(tid, timeout=60_000, expected=expected)
        elif kind in ("add", "end"):
            tid = step[1]
            meta = h.coord.get(tid)
            if meta is None:
                continue
            delta, version = step[3], step[4]
            if kind == "add":
                h.run(h.coord.add_partitions(tid, meta.producer_id, meta.producer_epoch + delta, step[2],
                                             client_version=version))
            else:
                h.run(h.coord.end_txn(tid, meta.producer_id, meta.producer_epoch + delta, step[2],
                                      client_version=version))
        elif kind == "exhaust":
            exhaust(h, step[1])
            if step[2]:
                v2_transaction(h, step[1], True)
        elif kind == "v2 transaction":
            v2_transaction(h, step[1], step[2])

        elif kind == "markers":
            h.finish_markers()
        elif kind == "time":
            h.clock.advance(step[1])
        elif kind == "timeouts":
            for r in h.coord.abort_timed_out():
                h.run(r)
        elif kind == "expire":
            h.run(h.coord.expire_transactional_ids())
        elif kind == "fail":
            h.fail = step[1]
    h.fail = None
    restarted = h.restart()
    assert persisted(restarted) == persisted(h)
    # after the restart every prepared transaction gets its markers again, and ends as decided
    decided = {m.transactional_id: m.state for m in h.coord.transactions()
               if m.state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT)}
    restarted.finish_markers()
    for tid, state in decided.items():
        want = TxnState.COMPLETE_COMMIT if state is TxnState.PREPARE_COMMIT else TxnState.COMPLETE_ABORT
        assert restarted.state(tid) is want
