"""Transactions v2 (KIP-890 part 2) in the coordinator: EndTxn v5 in every state (the table
END_TXN_V2), the epoch bump and the answer that carries it, retries, the producer id rotation
when the epoch is exhausted (nextProducerId in the Prepare record, taken on by the Complete
one, across a restart too), the implicit add's client version, and replay equal to live state."""
from __future__ import annotations

import pytest
from txn_helpers import TOPIC, TxnHarness

from kcoord.protocol.errors import ErrorCode as E
from kcoord.protocol.txn_log import TxnKey, TxnRecord, TxnValue
from kcoord.server.txn.metadata import INT16_MAX
from kcoord.server.txn.state import END_TXN_V2, REQUEST_OUTCOMES, TxnState

S = TxnState
REACHABLE = [S.EMPTY, S.ONGOING, S.PREPARE_COMMIT, S.PREPARE_ABORT, S.COMPLETE_COMMIT, S.COMPLETE_ABORT]


def end_v2(h: TxnHarness, tid: str, pid: int, epoch: int, commit: bool, finish: bool = True):
    answer = h.run(h.coord.end_txn(tid, pid, epoch, commit, client_version=2))
    if finish and not isinstance(answer, tuple):
        h.finish_markers()
        assert answer.done
        answer = answer.result()
    return answer


def add_v2(h: TxnHarness, tid: str, pid: int, epoch: int, parts=None) -> E:
    return h.run(h.coord.add_partitions(tid, pid, epoch, parts or [(TOPIC, 0)], client_version=2))


def to_state_v2(h: TxnHarness, tid: str, target: TxnState) -> tuple[int, int]:
    """`tid` in `target` through v2 requests; (producer id, epoch) the producer holds then."""
    h.init(tid)
    code, pid, epoch = h.init(tid)  # epoch 1: a retry's epoch (0) exists in every state
    assert code == E.NONE
    if target is S.EMPTY:
        return pid, epoch
    assert add_v2(h, tid, pid, epoch) == E.NONE
    if target is S.ONGOING:
        return pid, epoch
    commit = target in (S.PREPARE_COMMIT, S.COMPLETE_COMMIT)
    finish = target in (S.COMPLETE_COMMIT, S.COMPLETE_ABORT)
    answer = end_v2(h, tid, pid, epoch, commit, finish=finish)
    assert h.state(tid) is target
    if finish:
        assert answer == (E.NONE, pid, epoch + 1)
        return pid, epoch + 1
    return pid, epoch  # still completing: the producer has no answer yet


def test_the_table_covers_every_state_and_both_kinds_of_request() -> None:
    assert {(s, c, r) for s in REACHABLE for c in (True, False) for r in (True, False)} == set(END_TXN_V2)
    assert set(REQUEST_OUTCOMES["EndTxn v5(commit)"]) == set(REACHABLE)


@pytest.mark.parametrize("commit", [True, False], ids=["commit", "abort"])
@pytest.mark.parametrize("retry", [True, False], ids=["retry", "current"])
@pytest.mark.parametrize("state", REACHABLE)
def test_end_txn_v5_in_every_state(state: TxnState, commit: bool, retry: bool) -> None:
    h = TxnHarness()
    pid, epoch = to_state_v2(h, "t", state)
    meta = h.coord.get("t")
    if state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
        # the first EndTxn's markers are in flight: everything retries, as in Kafka
        asked = epoch if retry else epoch + 1
        assert end_v2(h, "t", pid, asked, commit, finish=False) == (E.CONCURRENT_TRANSACTIONS, -1, -1)
        return
    asked = meta.producer_epoch - 1 if retry else meta.producer_epoch
    before = meta.snapshot()
    outcome = END_TXN_V2[(state, commit, retry)]
    answer = end_v2(h, "t", pid, asked, commit)
    if outcome == "bump":
        assert answer == (E.NONE, pid, asked + 1)
        assert h.state("t") is (S.COMPLETE_COMMIT if commit else S.COMPLETE_ABORT)
        assert h.coord.get("t").producer_epoch == asked + 1
        prepare = [r.value for r in h.decoded_log() if r.value.state in (S.PREPARE_COMMIT.id, S.PREPARE_ABORT.id)][-1]
        assert (prepare.producer_epoch, prepare.client_transaction_version) == (asked + 1, 2)
    elif outcome == "none":
        assert answer == (E.NONE, pid, meta.producer_epoch)
        assert h.coord.get("t").snapshot() == before
    else:
        assert answer == (E[outcome], -1, -1)
        assert h.coord.get("t").snapshot() == before, "a refused request changed nothing"


def test_wrong_producer_or_epoch() -> None:
    h = TxnHarness()
    pid, epoch = to_state_v2(h, "t", S.ONGOING)
    assert end_v2(h, "t", pid + 1, epoch, True) == (E.INVALID_PRODUCER_ID_MAPPING, -1, -1)
    assert end_v2(h, "t", pid, epoch + 1, True) == (E.PRODUCER_FENCED, -1, -1)
    assert end_v2(h, "t", pid, epoch - 1, True) == (E.PRODUCER_FENCED, -1, -1)
    assert end_v2(h, "other", pid, epoch, True) == (E.INVALID_PRODUCER_ID_MAPPING, -1, -1)
    assert end_v2(h, "", pid, epoch, True) == (E.INVALID_REQUEST, -1, -1)
    assert add_v2(h, "t", pid, epoch + 1) == E.PRODUCER_FENCED
    assert add_v2(h, "t", pid + 1, epoch) == E.INVALID_PRODUCER_ID_MAPPING


def test_each_transaction_bumps_the_epoch_and_a_zombie_is_fenced() -> None:
    h = TxnHarness()
    _, pid, epoch = h.init("t")
    for i in range(3):
        assert add_v2(h, "t", pid, epoch + i) == E.NONE
        assert end_v2(h, "t", pid, epoch + i, commit=i != 1) == (E.NONE, pid, epoch + i + 1)
    markers = [v for r in h.decoded_log() if (v := r.value).state in (S.PREPARE_COMMIT.id, S.PREPARE_ABORT.id)]
    assert [m.producer_epoch for m in markers] == [epoch + 1, epoch + 2, epoch + 3]
    # the producer of an older epoch (the one before the last end) is fenced everywhere
    assert add_v2(h, "t", pid, epoch + 2) == E.PRODUCER_FENCED
    assert h.verify("t", pid, epoch + 2) == E.PRODUCER_FENCED


def test_implicit_add_records_the_client_version() -> None:
    h = TxnHarness()
    _, pid, epoch = h.init("t")
    assert add_v2(h, "t", pid, epoch, [(TOPIC, 0), (TOPIC, 1)]) == E.NONE
    ongoing = h.decoded_log()[-1].value
    assert (ongoing.state, ongoing.partitions, ongoing.client_transaction_version) == (S.ONGOING.id, {TOPIC: [0, 1]}, 2)
    assert add_v2(h, "t", pid, epoch, [(TOPIC, 1)]) == E.NONE  # already in: nothing written
    assert len(h.log) == 2


def _at_epoch(h: TxnHarness, tid: str, pid: int, epoch: int) -> None:
    """Put `tid` at CompleteCommit with (pid, epoch) as a log record would (replay)."""
    h.coord.replay(TxnRecord(TxnKey(tid), TxnValue(producer_id=pid, producer_epoch=epoch, timeout_ms=60000,
                                                   state=S.COMPLETE_COMMIT.id, start_ms=1, last_update_ms=1)))


@pytest.mark.parametrize("restart", [False, True], ids=["live", "restarted-before-complete"])
def test_exhausted_epoch_rotates_the_producer_id(restart: bool) -> None:
    h = TxnHarness()
    old = 77
    last = INT16_MAX - 1  # exhausted: the last epoch a producer may hold
    _at_epoch(h, "t", old, last)
    assert add_v2(h, "t", old, last) == E.NONE
    answer = h.run(h.coord.end_txn("t", old, last, True, client_version=2))
    (new,) = h.allocated
    prepare = h.decoded_log()[-1].value
    assert (prepare.state, prepare.producer_id, prepare.producer_epoch, prepare.next_producer_id) == (
        S.PREPARE_COMMIT.id, old, INT16_MAX, new)
    if restart:
        h = h.restart()  # a prepared transaction's markers are written again; Complete takes the next id
    h.finish_markers()
    if not restart:
        assert answer.result() == (E.NONE, new, 0)
    complete = h.decoded_log()[-1].value
    assert (complete.state, complete.producer_id, complete.producer_epoch, complete.previous_producer_id,
            complete.next_producer_id) == (S.COMPLETE_COMMIT.id, new, 0, old, -1)
    # a retry of that EndTxn (the old id, the exhausted epoch) is answered with the new pair
    assert end_v2(h, "t", old, last, True) == (E.NONE, new, 0)
    assert end_v2(h, "t", old, last, False) == (E.INVALID_TXN_STATE, -1, -1)
    # the producer carries on with the new id
    assert add_v2(h, "t", new, 0) == E.NONE
    assert end_v2(h, "t", new, 0, False) == (E.NONE, new, 1)
    assert add_v2(h, "t", old, last) == E.INVALID_PRODUCER_ID_MAPPING


def test_a_fence_of_an_exhausted_epoch_rotates_without_overflow() -> None:
    h = TxnHarness(transaction_version=2)
    _at_epoch(h, "t", 77, INT16_MAX - 1)
    assert h.run(h.coord.add_partitions("t", 77, INT16_MAX - 1, [(TOPIC, 0)])) == E.NONE
    assert h.init("t") == (E.CONCURRENT_TRANSACTIONS, -1, -1)  # the fence aborts the transaction
    prepare = h.decoded_log()[-1].value
    assert prepare.producer_epoch == INT16_MAX and prepare.next_producer_id == h.allocated[0]
    h.finish_markers()
    code, pid, epoch = h.init("t")
    assert (code, pid) == (E.NONE, h.allocated[0]) and epoch == 1


def test_replay_equals_live_state_after_every_v2_step() -> None:
    h = TxnHarness()
    steps = []
    _, pid, epoch = h.init("t")
    steps.append(h.coord.get("t").snapshot())
    add_v2(h, "t", pid, epoch)
    steps.append(h.coord.get("t").snapshot())
    end_v2(h, "t", pid, epoch, True)
    steps.append(h.coord.get("t").snapshot())
    end_v2(h, "t", pid, epoch + 1, False)  # an abort of nothing, v2 allows it
    steps.append(h.coord.get("t").snapshot())
    assert h.restart().coord.get("t").snapshot() == h.coord.get("t").snapshot()
    assert [s[6] for s in steps] == [S.EMPTY, S.ONGOING, S.COMPLETE_COMMIT, S.COMPLETE_ABORT]
    assert h.coord.get("t").producer_epoch == epoch + 2


def test_a_timeout_at_the_exhausted_epoch_rotates_and_a_late_abort_is_a_retry() -> None:
    """Kafka's timeout at epoch 32766 with transaction.version 2: the fence takes the epoch to
    32767 and names the next producer id; the producer's own late EndTxn(abort) with the old
    pair is then a retry, answered with the new pair."""
    h = TxnHarness(transaction_version=2)
    last = INT16_MAX - 1
    _at_epoch(h, "t", 77, last)
    assert add_v2(h, "t", 77, last) == E.NONE
    h.clock.advance(120_000)
    (result,) = h.coord.abort_timed_out()
    assert h.run(result) == (E.NONE, -1, -1)
    (new,) = h.allocated
    prepare = h.decoded_log()[-1].value
    assert (prepare.state, prepare.producer_epoch, prepare.next_producer_id) == (S.PREPARE_ABORT.id, INT16_MAX, new)
    h.finish_markers()
    assert (h.state("t"), h.coord.get("t").producer_id, h.coord.get("t").producer_epoch) == (S.COMPLETE_ABORT, new, 0)
    assert end_v2(h, "t", 77, last, commit=False) == (E.NONE, new, 0)
    assert end_v2(h, "t", 77, last, commit=True) == (E.INVALID_TXN_STATE, -1, -1)


@pytest.mark.parametrize("state", REACHABLE)
def test_the_documented_outcomes_are_what_happens(state: TxnState) -> None:
    """REQUEST_OUTCOMES' v2 rows (the producer's current epoch) against the coordinator."""
    for api in ("EndTxn v5(commit)", "EndTxn v5(abort)", "implicit add (v2)"):
        h = TxnHarness()
        pid, epoch = to_state_v2(h, "t", state)
        if state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
            epoch += 1  # the epoch the producer will be answered with
        if api == "implicit add (v2)":
            code = add_v2(h, "t", pid, epoch, [(TOPIC, 3)])
        else:
            code = end_v2(h, "t", pid, epoch, commit=api == "EndTxn v5(commit)")[0]
        text = REQUEST_OUTCOMES[api][state]
        assert code.name in text or (code == E.NONE and "->" in text), (api, state, code)
