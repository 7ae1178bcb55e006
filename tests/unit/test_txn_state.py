"""The transaction state machine table (server/txn/state.py) and every transaction API's
answer in every state, driven through the coordinator (Kafka's TransactionCoordinatorTest)."""
from __future__ import annotations

import pytest
from txn_helpers import TOPIC, TxnHarness

from kcoord.protocol.errors import ErrorCode as E
from kcoord.server.txn.state import (
    EXPIRATION_ALLOWED,
    REQUEST_OUTCOMES,
    VALID_PREVIOUS_STATES,
    IllegalTxnTransition,
    TxnState,
    check_transition,
)

S = TxnState
REACHABLE = [S.EMPTY, S.ONGOING, S.PREPARE_COMMIT, S.PREPARE_ABORT, S.COMPLETE_COMMIT, S.COMPLETE_ABORT]


def test_ids_and_names_are_kafkas() -> None:
    assert [(s.id, s.wire_name) for s in TxnState] == [
        (0, "Empty"), (1, "Ongoing"), (2, "PrepareCommit"), (3, "PrepareAbort"), (4, "CompleteCommit"),
        (5, "CompleteAbort"), (6, "Dead"), (7, "PrepareEpochFence")]
    assert all(TxnState.from_id(s.id) is s and TxnState.from_name(s.wire_name) is s for s in TxnState)
    assert TxnState.from_name("Bogus") is None


def test_transition_table_is_kafkas() -> None:
    assert VALID_PREVIOUS_STATES == {
        S.EMPTY: {S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT},
        S.ONGOING: {S.ONGOING, S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT},
        S.PREPARE_COMMIT: {S.ONGOING},
        S.PREPARE_ABORT: {S.ONGOING, S.PREPARE_EPOCH_FENCE, S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT},
        S.COMPLETE_COMMIT: {S.PREPARE_COMMIT},
        S.COMPLETE_ABORT: {S.PREPARE_ABORT},
        S.DEAD: {S.EMPTY, S.COMPLETE_ABORT, S.COMPLETE_COMMIT},
        S.PREPARE_EPOCH_FENCE: {S.ONGOING},
    }
    assert EXPIRATION_ALLOWED == {S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}


@pytest.mark.parametrize("current", list(TxnState))
@pytest.mark.parametrize("target", list(TxnState))
def test_check_transition_follows_the_table(current: TxnState, target: TxnState) -> None:
    if current in VALID_PREVIOUS_STATES[target]:
        assert check_transition("t", current, target) is target
    else:
        with pytest.raises(IllegalTxnTransition):
            check_transition("t", current, target)


# API -> state -> the answer of a request from the id's own producer (pid and epoch right)
EXPECTED = {
    "InitProducerId": {S.EMPTY: E.NONE, S.ONGOING: E.CONCURRENT_TRANSACTIONS, S.PREPARE_COMMIT: E.CONCURRENT_TRANSACTIONS,
                       S.PREPARE_ABORT: E.CONCURRENT_TRANSACTIONS, S.COMPLETE_COMMIT: E.NONE, S.COMPLETE_ABORT: E.NONE},
    "AddPartitionsToTxn": {S.EMPTY: E.NONE, S.ONGOING: E.NONE, S.PREPARE_COMMIT: E.CONCURRENT_TRANSACTIONS,
                           S.PREPARE_ABORT: E.CONCURRENT_TRANSACTIONS, S.COMPLETE_COMMIT: E.NONE,
                           S.COMPLETE_ABORT: E.NONE},
    "EndTxn(commit)": {S.EMPTY: E.INVALID_TXN_STATE, S.ONGOING: E.NONE, S.PREPARE_COMMIT: E.CONCURRENT_TRANSACTIONS,
                       S.PREPARE_ABORT: E.CONCURRENT_TRANSACTIONS, S.COMPLETE_COMMIT: E.NONE,
                       S.COMPLETE_ABORT: E.INVALID_TXN_STATE},
    "EndTxn(abort)": {S.EMPTY: E.INVALID_TXN_STATE, S.ONGOING: E.NONE, S.PREPARE_COMMIT: E.CONCURRENT_TRANSACTIONS,
                      S.PREPARE_ABORT: E.CONCURRENT_TRANSACTIONS, S.COMPLETE_COMMIT: E.INVALID_TXN_STATE,
                      S.COMPLETE_ABORT: E.NONE},
    "verify partition": {S.EMPTY: E.TRANSACTION_ABORTABLE, S.ONGOING: E.NONE,
                         S.PREPARE_COMMIT: E.CONCURRENT_TRANSACTIONS, S.PREPARE_ABORT: E.CONCURRENT_TRANSACTIONS,
                         S.COMPLETE_COMMIT: E.TRANSACTION_ABORTABLE, S.COMPLETE_ABORT: E.TRANSACTION_ABORTABLE},
}
NEXT_STATE = {  # where a successful request leaves the id (None: unchanged)
    ("InitProducerId", S.EMPTY): S.EMPTY, ("InitProducerId", S.COMPLETE_COMMIT): S.EMPTY,
    ("InitProducerId", S.COMPLETE_ABORT): S.EMPTY, ("InitProducerId", S.ONGOING): S.PREPARE_ABORT,
    ("AddPartitionsToTxn", S.EMPTY): S.ONGOING, ("AddPartitionsToTxn", S.COMPLETE_COMMIT): S.ONGOING,
    ("AddPartitionsToTxn", S.COMPLETE_ABORT): S.ONGOING, ("AddPartitionsToTxn", S.ONGOING): S.ONGOING,
    ("EndTxn(commit)", S.ONGOING): S.COMPLETE_COMMIT, ("EndTxn(abort)", S.ONGOING): S.COMPLETE_ABORT,
}


def _ask(h: TxnHarness, api: str, tid: str, pid: int, epoch: int) -> E:
    if api == "InitProducerId":
        return h.init(tid)[0]
    if api == "AddPartitionsToTxn":
        return h.add(tid, pid, epoch, [(TOPIC, 1)])
    if api == "verify partition":
        return h.verify(tid, pid, epoch)
    answer = h.end(tid, pid, epoch, commit=api == "EndTxn(commit)")
    return answer[0]


@pytest.mark.parametrize("api", list(EXPECTED))
@pytest.mark.parametrize("state", REACHABLE)
def test_every_api_in_every_state(api: str, state: TxnState) -> None:
    h = TxnHarness()
    pid, epoch = h.to_state("t", state)
    before = h.coord.get("t").snapshot()
    want = EXPECTED[api][state]
    assert _ask(h, api, "t", pid, epoch) == want
    text = REQUEST_OUTCOMES[api][state]
    assert want.name in text or (want == E.NONE and ("->" in text or "NONE" in text))
    after = NEXT_STATE.get((api, state))
    if want != E.NONE and after is None:
        assert h.coord.get("t").snapshot() == before, "a refused request changed nothing"
    if after is not None:
        assert h.state("t") is after


@pytest.mark.parametrize("api", ["AddPartitionsToTxn", "EndTxn(commit)", "EndTxn(abort)", "verify partition"])
@pytest.mark.parametrize("state", REACHABLE)
def test_wrong_producer_and_epoch_in_every_state(api: str, state: TxnState) -> None:
    h = TxnHarness()
    pid, epoch = h.to_state("t", state)
    before = h.coord.get("t").snapshot()
    assert _ask(h, api, "t", pid + 1, epoch) == E.INVALID_PRODUCER_ID_MAPPING
    assert _ask(h, api, "t", pid, epoch - 1 if epoch > 0 else epoch + 1) == E.PRODUCER_FENCED
    assert _ask(h, api, "unknown", pid, epoch) == E.INVALID_PRODUCER_ID_MAPPING
    assert _ask(h, api, "", pid, epoch) == E.INVALID_REQUEST
    assert h.coord.get("t").snapshot() == before


@pytest.mark.parametrize("api", list(EXPECTED))
def test_loading_partition_answers_load_in_progress(api: str) -> None:
    h = TxnHarness()
    pid, epoch = h.to_state("t", S.ONGOING)
    h.coord.begin_loading(h.coord.partition_of("t"))
    assert _ask(h, api, "t", pid, epoch) == E.COORDINATOR_LOAD_IN_PROGRESS


@pytest.mark.parametrize("api", list(EXPECTED))
def test_inactive_coordinator_is_not_available(api: str) -> None:
    h = TxnHarness()
    h.coord.active = False
    assert _ask(h, api, "t", 1, 0) == E.COORDINATOR_NOT_AVAILABLE


def test_every_table_row_covers_every_reachable_state() -> None:
    for api, row in REQUEST_OUTCOMES.items():
        assert set(row) == set(REACHABLE), api
