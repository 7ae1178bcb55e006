"""The marker writer's decision table (server/txn/marker_outcomes.py, Kafka's
TransactionMarkerRequestCompletionHandler): which answers retry a marker, which drop every
pending marker of the transaction (a newer coordinator owns it), which are fatal; and the
writer acting on it through an in-process broker's real coordinator (a fenced answer is not
retried, a retriable one is)."""
from __future__ import annotations

import asyncio

import pytest
from test_txn_broker import boot, until
from txn_client import TxnClient

from kcoord.protocol.errors import ErrorCode as E
from kcoord.server.txn import markers
from kcoord.server.txn.marker_outcomes import OUTCOMES, Outcome, decide, outcome_of
from kcoord.server.txn.state import TxnState

# Kafka's TransactionMarkerRequestCompletionHandler, code by code
KAFKA = {
    E.NONE: Outcome.WRITTEN,
    E.UNSUPPORTED_FOR_MESSAGE_FORMAT: Outcome.WRITTEN,  # the partition is removed from the wait
    E.UNSUPPORTED_VERSION: Outcome.WRITTEN,
    E.UNKNOWN_TOPIC_OR_PARTITION: Outcome.RETRY,
    E.NOT_LEADER_OR_FOLLOWER: Outcome.RETRY,
    E.NOT_ENOUGH_REPLICAS: Outcome.RETRY,
    E.NOT_ENOUGH_REPLICAS_AFTER_APPEND: Outcome.RETRY,
    E.REQUEST_TIMED_OUT: Outcome.RETRY,
    E.KAFKA_STORAGE_ERROR: Outcome.RETRY,
    E.INVALID_PRODUCER_EPOCH: Outcome.DROP,
    E.TRANSACTION_COORDINATOR_FENCED: Outcome.DROP,
    E.CORRUPT_MESSAGE: Outcome.FATAL,
    E.MESSAGE_TOO_LARGE: Outcome.FATAL,
    E.RECORD_LIST_TOO_LARGE: Outcome.FATAL,
    E.INVALID_REQUIRED_ACKS: Outcome.FATAL,
}


@pytest.mark.parametrize("code", list(KAFKA), ids=lambda c: c.name)
def test_each_code_kafka_names_has_kafkas_outcome(code):
    assert outcome_of(code) is KAFKA[code]


def test_kcoords_own_codes_retry_and_every_other_code_is_fatal():
    assert outcome_of(None) is Outcome.WRITTEN
    assert outcome_of(E.NETWORK_EXCEPTION) is Outcome.RETRY  # Kafka's disconnected destination
    assert outcome_of(E.COORDINATOR_LOAD_IN_PROGRESS) is Outcome.RETRY  # a loading __consumer_offsets leader
    named = set(KAFKA) | {E.NETWORK_EXCEPTION, E.COORDINATOR_LOAD_IN_PROGRESS}
    assert set(OUTCOMES) == named
    for code in E:
        if code not in named:
            assert outcome_of(code) is Outcome.FATAL, code


def test_a_coordinator_that_no_longer_owns_the_transaction_drops_whatever_was_answered():
    for errors in ({}, {("t", 0): None}, {("t", 0): E.NOT_LEADER_OR_FOLLOWER}):
        d = decide(False, errors)
        assert d.outcome is Outcome.DROP and d.retry == {} and d.cause is None


def test_one_fenced_partition_drops_the_whole_transaction_even_beside_retriable_ones():
    d = decide(True, {("a", 0): E.NOT_LEADER_OR_FOLLOWER, ("b", 1): E.TRANSACTION_COORDINATOR_FENCED, ("c", 0): None})
    assert d.outcome is Outcome.DROP and d.retry == {} and d.cause == (("b", 1), E.TRANSACTION_COORDINATOR_FENCED)
    d = decide(True, {("a", 0): E.INVALID_PRODUCER_EPOCH})
    assert d.outcome is Outcome.DROP


def test_retriable_partitions_alone_are_sent_again_written_ones_are_done():
    d = decide(True, {("a", 0): E.NOT_ENOUGH_REPLICAS, ("a", 1): None, ("b", 0): E.UNSUPPORTED_VERSION,
                      ("c", 0): E.NETWORK_EXCEPTION})
    assert d.outcome is Outcome.RETRY
    assert d.retry == {("a", 0): E.NOT_ENOUGH_REPLICAS, ("c", 0): E.NETWORK_EXCEPTION}
    assert decide(True, {("a", 0): None, ("b", 0): E.UNSUPPORTED_FOR_MESSAGE_FORMAT}).outcome is Outcome.WRITTEN


def test_a_fatal_error_stops_everything():
    d = decide(True, {("a", 0): E.NOT_LEADER_OR_FOLLOWER, ("b", 0): E.CORRUPT_MESSAGE,
                      ("c", 0): E.TRANSACTION_COORDINATOR_FENCED})
    assert d.outcome is Outcome.FATAL and d.cause == (("b", 0), E.CORRUPT_MESSAGE)
    assert decide(True, {("a", 0): E.UNKNOWN_SERVER_ERROR}).outcome is Outcome.FATAL


# ---- the writer, through a real in-process broker


@pytest.fixture
async def broker(tmp_path, monkeypatch):
    monkeypatch.setattr(markers, "RETRY_BACKOFF_S", 0.1)
    b = await boot(tmp_path)
    yield b
    await b.stop()


async def prepared_answering(broker, first: E):
    """A committed transaction whose markers' first attempt is answered `first` by ("t", 0);
    later attempts write for real. (coordinator, calls of write_markers)."""
    c = TxnClient(broker)
    assert (await c.find("tx")).error_code == 0
    txn = broker.parts.txn.get()
    r = await c.init("tx")
    pid, epoch = r.producer_id, r.producer_epoch
    assert await c.add("tx", pid, epoch, {"t": [0]}) == {("t", 0): 0}
    assert (await c.produce("tx", "t", 0, [b"a"], pid, epoch)).error_code == 0
    real = txn.markers.write_markers
    calls: list[int] = []

    async def answering(job):
        calls.append(1)
        if len(calls) == 1:
            raise markers.MarkersNotWritten(first, {("t", 0): first})
        await real(job)

    txn.markers.write_markers = answering
    assert (await c.end("tx", pid, epoch, commit=True, until_complete=False)).error_code == 0
    await until(lambda: calls, "the first attempt")
    return txn, calls


async def test_a_fenced_answer_is_not_retried(broker):
    txn, calls = await prepared_answering(broker, E.TRANSACTION_COORDINATOR_FENCED)
    await until(lambda: not txn.markers.in_flight, "the writer to stop")
    await asyncio.sleep(5 * markers.RETRY_BACKOFF_S)
    assert len(calls) == 1
    assert txn.counters.markers_dropped == 1
    # this node did not complete it: the coordinator that fenced it does
    assert txn.coordinator.get("tx").state is TxnState.PREPARE_COMMIT


async def test_a_fatal_answer_is_not_retried(broker):
    txn, calls = await prepared_answering(broker, E.CORRUPT_MESSAGE)
    await until(lambda: not txn.markers.in_flight, "the writer to stop")
    await asyncio.sleep(5 * markers.RETRY_BACKOFF_S)
    assert len(calls) == 1 and txn.counters.markers_failed == 1
    assert txn.coordinator.get("tx").state is TxnState.PREPARE_COMMIT


async def test_a_retriable_answer_is_retried_until_written(broker):
    txn, calls = await prepared_answering(broker, E.NOT_ENOUGH_REPLICAS)
    await until(lambda: txn.coordinator.get("tx").state is TxnState.COMPLETE_COMMIT, "the transaction completed")
    assert len(calls) == 2 and txn.counters.markers_dropped == 0
