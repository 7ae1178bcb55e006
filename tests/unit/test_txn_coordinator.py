"""The transaction coordinator's behaviour, after Kafka's TransactionCoordinatorTest and
TransactionStateManagerTest: producer ids and epochs, fencing, timeouts, expiration, append
failures, restarts at every persisted step, describe and list."""
from __future__ import annotations

import pytest
from txn_helpers import OFFSETS, TOPIC, TxnHarness

from kcoord.protocol.errors import ErrorCode as E
from kcoord.protocol.txn_log import TxnKey
from kcoord.server.deferred import Deferred
from kcoord.server.txn.state import TxnState as S

MAX = 900_000


def test_new_transactional_id_gets_a_producer_id_at_epoch_0() -> None:
    h = TxnHarness()
    assert h.init("t") == (E.NONE, 1000, 0)
    (rec,) = h.decoded_log()
    assert rec.key == TxnKey("t")
    assert (rec.value.producer_id, rec.value.producer_epoch, rec.value.state, rec.value.partitions,
            rec.value.timeout_ms, rec.value.start_ms) == (1000, 0, S.EMPTY.id, {}, 60000, -1)


def test_reinit_bumps_the_epoch_and_keeps_the_producer_id() -> None:
    h = TxnHarness()
    h.init("t")
    assert h.init("t", timeout=30000) == (E.NONE, 1000, 1)
    assert h.coord.get("t").timeout_ms == 30000
    assert h.allocated == [1000]


def test_transaction_timeout_bounds() -> None:
    h = TxnHarness(transaction_max_timeout_ms=MAX)
    for bad in (0, -1, MAX + 1):
        assert h.init("t", timeout=bad) == (E.INVALID_TRANSACTION_TIMEOUT, -1, -1)
    assert h.coord.get("t") is None and h.log == []
    assert h.init("t", timeout=MAX)[0] == E.NONE


def test_kip360_expected_epoch() -> None:
    h = TxnHarness()
    _, pid, epoch = h.init("t")
    assert h.init("t", expected=(pid, epoch)) == (E.NONE, pid, epoch + 1)
    # a retry of that call (its answer was lost) gets the same epoch again, not a second bump
    assert h.init("t", expected=(pid, epoch)) == (E.NONE, pid, epoch + 1)
    assert h.init("t", expected=(pid, epoch + 5)) == (E.PRODUCER_FENCED, -1, -1)
    assert h.init("t", expected=(pid + 1, epoch + 1)) == (E.PRODUCER_FENCED, -1, -1)
    # the previous epoch is memory only: after a restart the retry is fenced, as in Kafka
    h2 = h.restart()
    assert h2.init("t", expected=(pid, epoch)) == (E.PRODUCER_FENCED, -1, -1)
    assert h2.init("t", expected=(pid, epoch + 1)) == (E.NONE, pid, epoch + 2)


def test_epoch_exhaustion_rotates_the_producer_id() -> None:
    h = TxnHarness()
    _, pid, _ = h.init("t")
    last = 2**15 - 2
    h.coord.get("t").producer_epoch = last  # as if bumped that often
    code, new_pid, epoch = h.init("t", expected=(pid, last))
    assert (code, epoch) == (E.NONE, 0) and new_pid != pid
    assert h.coord.get("t").previous_producer_id == pid
    # a retry of that call (answer lost) is recognised through previousProducerId and the
    # previous epoch, and gets the same new producer id without a bump
    assert h.init("t", expected=(pid, last)) == (E.NONE, new_pid, 0)
    assert h.init("t", expected=(pid, last - 1)) == (E.PRODUCER_FENCED, -1, -1)


def test_fresh_metadata_is_dropped_when_its_first_write_fails() -> None:
    h = TxnHarness()
    h.fail = E.NOT_COORDINATOR
    assert h.init("t") == (E.NOT_COORDINATOR, -1, -1)
    assert h.coord.get("t") is None and h.log == []
    assert h.init("t")[0] == E.NONE


def test_failed_writes_change_nothing_and_free_the_id() -> None:
    h = TxnHarness()
    _, pid, epoch = h.init("t")
    before = h.coord.get("t").snapshot()
    h.fail = E.COORDINATOR_NOT_AVAILABLE
    assert h.add("t", pid, epoch) == E.COORDINATOR_NOT_AVAILABLE
    assert h.coord.get("t").snapshot() == before and h.coord.get("t").pending is None
    assert h.add("t", pid, epoch) == E.NONE
    h.fail = E.NOT_COORDINATOR
    assert h.end("t", pid, epoch, commit=True) == (E.NOT_COORDINATOR, -1, -1)
    assert h.state("t") is S.ONGOING and h.coord.get("t").pending is None
    assert h.end("t", pid, epoch, commit=True) == (E.NONE, pid, epoch)


def test_add_partitions_starts_and_grows_a_transaction() -> None:
    h = TxnHarness()
    _, pid, epoch = h.init("t")
    start = h.clock.now_ms()
    assert h.add("t", pid, epoch, [(TOPIC, 0)]) == E.NONE
    h.clock.advance(500)
    assert h.add("t", pid, epoch, [(TOPIC, 1), (OFFSETS, 3)]) == E.NONE
    meta = h.coord.get("t")
    assert meta.state is S.ONGOING and meta.start_ms == start
    assert meta.partitions == {(TOPIC, 0), (TOPIC, 1), (OFFSETS, 3)}
    n = len(h.log)
    assert h.add("t", pid, epoch, [(TOPIC, 0)]) == E.NONE
    assert len(h.log) == n, "partitions already in the transaction write nothing"


def test_end_txn_answers_once_markers_are_written() -> None:
    h = TxnHarness()
    _, pid, epoch = h.init("t")
    h.add("t", pid, epoch, [(TOPIC, 0), (OFFSETS, 1)])
    answer = h.end("t", pid, epoch, commit=True, finish=False)
    assert isinstance(answer, Deferred) and not answer.done
    assert h.state("t") is S.PREPARE_COMMIT and h.coord.get("t").pending is S.COMPLETE_COMMIT
    ((job, _),) = h.coord.marker_jobs
    assert (job.producer_id, job.producer_epoch, job.commit) == (pid, epoch, True)
    assert job.partitions == {(TOPIC, 0), (OFFSETS, 1)}
    h.finish_markers()
    assert answer.result() == (E.NONE, pid, epoch)
    last = h.decoded_log()[-1].value
    assert (last.state, last.partitions) == (S.COMPLETE_COMMIT.id, {})
    # a retried EndTxn of a finished transaction is answered without writing
    n = len(h.log)
    assert h.end("t", pid, epoch, commit=True) == (E.NONE, pid, epoch)
    assert len(h.log) == n


# The coordinator's own aborts follow the server's transaction.version: v1 aborts with the fenced
# epoch (epoch + 1), v2 bumps it once more (epoch + 2), as every v2 end does.
@pytest.mark.parametrize("tv", [1, 2])
def test_init_fences_an_ongoing_transaction(tv: int) -> None:
    h = TxnHarness(transaction_version=tv)
    fenced = 1 if tv < 2 else 2
    _, pid, epoch = h.init("t")
    h.add("t", pid, epoch)
    assert h.init("t") == (E.CONCURRENT_TRANSACTIONS, -1, -1)
    prepare = h.decoded_log()[-1].value
    assert (prepare.state, prepare.producer_epoch) == (S.PREPARE_ABORT.id, epoch + fenced)
    assert prepare.client_transaction_version == (0 if tv < 2 else 2)
    ((job, _),) = h.coord.marker_jobs
    assert (job.commit, job.producer_epoch) == (False, epoch + fenced)
    assert h.init("t") == (E.CONCURRENT_TRANSACTIONS, -1, -1)  # markers still being written
    h.finish_markers()
    assert h.state("t") is S.COMPLETE_ABORT
    assert h.init("t") == (E.NONE, pid, epoch + fenced + 1)
    assert h.add("t", pid, epoch) == E.PRODUCER_FENCED  # the zombie
    assert h.end("t", pid, epoch, commit=True) == (E.PRODUCER_FENCED, -1, -1)


@pytest.mark.parametrize("tv", [1, 2])
def test_timed_out_transactions_are_aborted_and_their_producer_fenced(tv: int) -> None:
    h = TxnHarness(transaction_version=tv)
    fenced = 1 if tv < 2 else 2
    _, pid, epoch = h.init("t", timeout=10_000)
    h.add("t", pid, epoch)
    h.clock.advance(10_000)
    assert h.coord.abort_timed_out() == []  # started exactly timeout ago: not yet
    h.clock.advance(1)
    (result,) = h.coord.abort_timed_out()
    assert h.run(result) == (E.NONE, -1, -1)
    assert h.state("t") is S.PREPARE_ABORT and h.coord.get("t").producer_epoch == epoch + fenced
    assert h.coord.abort_timed_out() == []  # already being aborted
    h.finish_markers()
    assert h.state("t") is S.COMPLETE_ABORT
    assert h.end("t", pid, epoch, commit=True) == (E.PRODUCER_FENCED, -1, -1)
    assert h.init("t", expected=(pid, epoch)) == (E.PRODUCER_FENCED, -1, -1)
    assert h.init("t") == (E.NONE, pid, epoch + fenced + 1)


def test_idle_transactional_ids_expire() -> None:
    day = 86_400_000
    h = TxnHarness(transactional_id_expiration_ms=7 * day)
    h.init("idle")
    _, pid, epoch = h.init("busy")
    h.add("busy", pid, epoch)
    h.clock.advance(7 * day)
    result = h.coord.expire_transactional_ids()
    assert [r.key.transactional_id for r in result.records] == ["idle"]
    assert all(r.value is None for r in result.records)
    h.run(result)
    assert h.coord.get("idle") is None and h.state("busy") is S.ONGOING
    assert h.restart().coord.get("idle") is None
    h.fail = E.NOT_COORDINATOR
    h.run(h.coord.expire_transactional_ids())  # nothing to expire: no write, nothing fails
    assert h.fail is E.NOT_COORDINATOR


def test_expiration_write_failure_keeps_the_id() -> None:
    h = TxnHarness(transactional_id_expiration_ms=1000)
    h.init("t")
    h.clock.advance(1000)
    h.fail = E.NOT_COORDINATOR
    h.run(h.coord.expire_transactional_ids())
    meta = h.coord.get("t")
    assert meta is not None and meta.pending is None


def test_an_id_whose_tombstone_is_in_flight_is_listed_and_described_until_it_is_durable() -> None:
    """Its durable state stays what readers see (Kafka keeps the metadata, pending Dead, until
    the tombstone is written); a failed tombstone leaves the id as it was."""
    h = TxnHarness(transactional_id_expiration_ms=1000)
    _, pid, _ = h.init("t")
    h.clock.advance(1000)
    finish = h.begin(h.coord.expire_transactional_ids())
    assert h.coord.get("t") is None  # replayed: gone from the state being written
    _, _, listed = h.coord.list_transactions([], [])
    assert [(m.transactional_id, m.producer_id, m.state) for m in listed] == [("t", pid, S.EMPTY)]
    code, meta = h.coord.describe("t")
    assert code == E.NONE and meta.pending is S.DEAD
    assert h.coord.counts_by_state()[S.EMPTY] == 1
    assert h.coord.expire_transactional_ids().records == []  # not expired twice
    finish(E.NOT_COORDINATOR)  # the tombstone failed: reverted
    assert h.state("t") is S.EMPTY and [m.transactional_id for m in h.coord.list_transactions([], [])[2]] == ["t"]
    finish = h.begin(h.coord.expire_transactional_ids())
    finish(None)
    assert h.coord.list_transactions([], [])[2] == [] and h.coord.describe("t")[0] == E.TRANSACTIONAL_ID_NOT_FOUND


def test_restart_after_each_persisted_step() -> None:
    """Kafka's outcome whatever step a crash follows: Empty/Ongoing stay; a prepared
    transaction is completed the way it was decided; a complete one stays complete."""
    for commit in (True, False):
        h = TxnHarness()
        _, pid, epoch = h.init("t")
        assert h.restart().state("t") is S.EMPTY
        h.add("t", pid, epoch)
        assert h.restart().state("t") is S.ONGOING
        h.end("t", pid, epoch, commit=commit, finish=False)
        r = h.restart()
        assert r.state("t") is (S.PREPARE_COMMIT if commit else S.PREPARE_ABORT)
        ((job, _),) = r.coord.marker_jobs
        assert (job.commit, job.producer_id, job.producer_epoch, job.partitions) == (commit, pid, epoch,
                                                                                    {(TOPIC, 0)})
        assert r.init("t") == (E.CONCURRENT_TRANSACTIONS, -1, -1)
        r.finish_markers()
        assert r.state("t") is (S.COMPLETE_COMMIT if commit else S.COMPLETE_ABORT)
        h.finish_markers()
        done = h.restart()
        assert done.state("t") is (S.COMPLETE_COMMIT if commit else S.COMPLETE_ABORT)
        assert done.coord.marker_jobs == []


def test_producer_ids_in_the_log_are_never_handed_out_again() -> None:
    noted: list[int] = []
    h = TxnHarness()
    h.init("t")
    h2 = TxnHarness(next_pid=0)
    h2.coord._note_pid = noted.append
    from kcoord.protocol.txn_log import decode_txn_record
    for k, v in h.log:
        h2.coord.replay(decode_txn_record(k, v))
    assert noted == [1000]


def test_describe_and_list() -> None:
    h = TxnHarness()
    _, pid, epoch = h.init("a")
    h.add("a", pid, epoch, [(TOPIC, 1)])
    h.init("b")
    code, meta = h.coord.describe("a")
    assert code == E.NONE and meta.state is S.ONGOING and meta.partitions == {(TOPIC, 1)}
    assert h.coord.describe("nope") == (E.TRANSACTIONAL_ID_NOT_FOUND, None)
    assert h.coord.describe("") == (E.INVALID_REQUEST, None)
    code, unknown, found = h.coord.list_transactions([], ["Ongoing", "Bogus"])
    assert (code, unknown, [m.transactional_id for m in found]) == (E.NONE, ["Bogus"], ["a"])
    _, _, found = h.coord.list_transactions([pid], [])
    assert [m.transactional_id for m in found] == ["a"]
    h.clock.advance(5000)
    _, _, found = h.coord.list_transactions([], ["Ongoing"], duration_ms=4999)
    assert [m.transactional_id for m in found] == ["a"]
    _, _, found = h.coord.list_transactions([], ["Ongoing"], duration_ms=5000)
    assert found == []
    h.coord.begin_loading(0)
    assert h.coord.list_transactions([], [])[0] == E.COORDINATOR_LOAD_IN_PROGRESS
    assert h.coord.counts_by_state()[S.ONGOING] == 1


def test_transactional_ids_route_like_kafka() -> None:
    """abs(javaHash(id)) % transaction.state.log.num.partitions (DESIGN.md's checks)."""
    h = TxnHarness(partitions=50)
    assert h.coord.partition_of("testgroup") == 27
    assert h.coord.partition_of("polygenelubricants") == 0  # hashCode == Integer.MIN_VALUE
