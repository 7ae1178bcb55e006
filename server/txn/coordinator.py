"""TransactionCoordinator: the transaction coordinator the handlers call (Kafka's
TransactionCoordinator + TransactionStateManager): transactions v1 as Java 3.9, librdkafka and
kafkajs use them, and v2 (KIP-890 part 2, Java kafka-clients 4.x once transaction.version 2 is
finalized): partitions added implicitly (Produce v12, TxnOffsetCommit v5: add_partitions with
client_version 2) and the epoch bumped by every EndTxn v5 (a new producer id once it is
exhausted, taken on at CompleteCommit / CompleteAbort, as Kafka's nextProducerId).

Each API method returns a TxnResult (server/txn/result.py). Persisted state changes only in
replay(), under the one rule of server/coordinator/result.py: the runtime replays a write's
records as it is made, reverts them (replaying current_record()'s) if they never become
durable, and at start-up replays the latest record of every transactional id between
begin_loading() and end_loading(). What is not persisted is in memory only, as in Kafka: the
Complete state a prepared transaction waits for (`pending`) and the last epoch (a retried
InitProducerId).

Kafka's TransactionMetadata changes only once a transition's record is durable, a pending
state keeping every other transition off the id meanwhile. Here the record is replayed at
once, so that state is what the runtime last made durable (`runtime.committed`): every
request and every reader (InitProducerId, AddPartitionsToTxn, EndTxn, KIP-890 verification,
DescribeTransactions, ListTransactions, the periodic tasks) acts on `_durable(id)`, which while
a write of the id is in flight is the id's last durable record, pending with the state being
written. They see no transition before it is durable, and meet CONCURRENT_TRANSACTIONS while
it is written, as in Kafka; a failed write leaves the id as it was, reverted by the runtime.

A transaction ends in three steps: EndTxn writes PrepareCommit / PrepareAbort; the runtime's
marker writer (set_marker_writer) writes the COMMIT / ABORT control batches to every
partition of the transaction; complete() writes CompleteCommit / CompleteAbort. A prepared
transaction found when a partition finishes loading goes through the last two steps again,
so a crash between any two of them ends the way it was decided.

The transition table and each request's outcome in each state: server/txn/state.py.
"""
from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from typing import Any

from kcoord.protocol.errors import ErrorCode
from kcoord.protocol.partitioner import partition_for
from kcoord.protocol.txn_log import NO_PRODUCER_ID, TxnKey, TxnRecord
from kcoord.server.clock import Clock
from kcoord.server.coordinator.changes import CURRENT
from kcoord.server.deferred import Deferred
from kcoord.server.txn.metadata import (
    INT16_MAX,
    NO_PRODUCER_EPOCH,
    TopicPartition,
    TxnConfig,
    TxnMetadata,
    epoch_exhausted,
)
from kcoord.server.txn.result import MarkerJob, TxnResult
from kcoord.server.txn.state import (
    CA,
    CC,
    END_TXN_V2,
    EXPIRATION_ALLOWED,
    ON,
    PA,
    PC,
    PF,
    PREPARED,
    D,
    E,
    TxnState,
)

log = logging.getLogger("kcoord.txn")

TV_2 = 2  # transaction.version 2: transactions v2 (KIP-890 part 2), the epoch bumped by every EndTxn

# (error, producer id, producer epoch): InitProducerId's and EndTxn's answer
PidAnswer = tuple[ErrorCode, int, int]
MarkerWriter = Callable[[MarkerJob], Deferred[None]]


def _answer(code: ErrorCode, pid: int = NO_PRODUCER_ID, epoch: int = NO_PRODUCER_EPOCH) -> PidAnswer:
    return code, pid, epoch


def _added(error: ErrorCode | None) -> ErrorCode:
    """AddPartitionsToTxn's answer once its record is durable (or failed: reverted)."""
    return ErrorCode.NONE if error is None else error


class TransactionCoordinator:
    def __init__(self, config: TxnConfig, clock: Clock, num_partitions: int,
                 allocate_producer_id: Callable[[], int], committed: Callable[[TxnKey], Any],
                 note_producer_id: Callable[[int], None] = lambda pid: None) -> None:
        """committed: its runtime's `committed` (the record of a key last made durable while a
        write of it is in flight, else changes.CURRENT)."""
        self.config = config
        self._committed = committed
        self.clock = clock
        self.num_partitions = num_partitions
        self._allocate = allocate_producer_id
        self._note_pid = note_producer_id  # ids found in the log are never handed out again
        self._txns: dict[str, TxnMetadata] = {}
        # ids whose expiration tombstone is in flight: replayed (gone from _txns), still listed
        # from their durable state until the tombstone is durable
        self._expiring: set[str] = set()
        self._loading: set[int] = set()
        self._unloaded: set[int] = set()  # partitions another node leads: NOT_COORDINATOR
        self.active = False  # __transaction_state exists (Kafka: the coordinator is elected)
        self._marker_writer: MarkerWriter | None = None
        # When a client's EndTxn is answered: once Prepare* is durable (Kafka's behaviour and
        # the server's default; the markers follow, a request meeting them gets
        # CONCURRENT_TRANSACTIONS, or waits for them: server/txn/settling.py) or once the
        # transaction is complete (markers and Complete* written)
        self.answer_end_when_prepared = False
        # ids whose markers are being written (Complete* pending): the writer's Deferred
        self._completing: dict[str, Deferred[None]] = {}
        self.waiting_requests = 0  # requests waiting for a completion (server/txn/settling.py)
        self.marker_jobs: list[tuple[MarkerJob, Deferred[None]]] = []  # without a writer (tests)

    # ================================================================== routing / lookups

    def partition_of(self, transactional_id: str) -> int:
        return partition_for(transactional_id, self.num_partitions)

    def _is_loading(self, transactional_id: str) -> bool:
        return bool(self._loading) and self.partition_of(transactional_id) in self._loading

    def _unavailable(self, transactional_id: str) -> ErrorCode | None:
        if not self.active:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if self._is_loading(transactional_id):
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        if self._unloaded and self.partition_of(transactional_id) in self._unloaded:
            return ErrorCode.NOT_COORDINATOR
        return None

    def get(self, transactional_id: str) -> TxnMetadata | None:
        """The state replayed last, durable or not (tests and tools read it; do not mutate)."""
        return self._txns.get(transactional_id)

    def _durable(self, transactional_id: str) -> TxnMetadata | None:
        """The id's state as last made durable: what requests and readers act on. While a
        write of the id is in flight, a copy made from its last durable record, `pending` with
        the state being written (Dead for a tombstone); None for an id with no durable record
        (one whose first record is in flight: `_writing`)."""
        record = self._committed(TxnKey(transactional_id))
        if record is CURRENT:
            return self._txns.get(transactional_id)
        if record.value is None:
            return None
        meta = TxnMetadata.from_value(transactional_id, record.value)
        live = self._txns.get(transactional_id)
        meta.pending = D if live is None else live.state
        return meta

    def _durable_states(self) -> list[TxnMetadata]:
        """Every id's `_durable` state (an id whose expiration tombstone is in flight with it,
        pending Dead)."""
        out = []
        tids = list(self._txns)
        if self._expiring:
            tids += [t for t in self._expiring if t not in self._txns]
        for tid in tids:
            meta = self._durable(tid)
            if meta is not None:
                out.append(meta)
        return out

    def _writing(self, transactional_id: str) -> bool:
        """Whether a write of the id is in flight."""
        return self._committed(TxnKey(transactional_id)) is not CURRENT

    def transactions(self) -> list[TxnMetadata]:
        return list(self._txns.values())

    def is_loading(self, partition: int | None = None) -> bool:
        return bool(self._loading) if partition is None else partition in self._loading

    def completing(self, transactional_id: str) -> Deferred[None] | None:
        """The Deferred of the id's markers while they are being written (completed once its
        Complete state is written, or at the writer's first failure), else None."""
        return self._completing.get(transactional_id)

    def set_marker_writer(self, writer: MarkerWriter | None) -> None:
        """Who writes the markers of a prepared transaction: a function returning a Deferred
        completed (with None) once every marker is durable and complete() has been written, or
        earlier if that keeps failing (the decision is durable; the writer keeps retrying)."""
        self._marker_writer = writer

    # ================================================================== InitProducerId

    def init_producer_id(self, transactional_id: str, timeout_ms: int,
                         expected: tuple[int, int] | None = None) -> TxnResult:
        """InitProducerId with a transactional id. `expected` is the (producer id, epoch) the
        client holds (v3+, KIP-360), None for a fresh producer."""
        if transactional_id == "":
            return TxnResult(response=_answer(ErrorCode.INVALID_REQUEST))
        if not 0 < timeout_ms <= self.config.transaction_max_timeout_ms:
            return TxnResult(response=_answer(ErrorCode.INVALID_TRANSACTION_TIMEOUT))
        err = self._unavailable(transactional_id)
        if err is not None:
            return TxnResult(response=_answer(err))
        now = self.clock.now_ms()
        meta = self._durable(transactional_id)
        if meta is None:
            if self._writing(transactional_id):  # its first record is being written
                return TxnResult(response=_answer(ErrorCode.CONCURRENT_TRANSACTIONS))
            try:
                pid = self._allocate()
            except OSError as e:
                log.error("Allocating a producer id failed: %r", e)
                return TxnResult(response=_answer(ErrorCode.UNKNOWN_SERVER_ERROR))
            # its first record's replay puts it in memory; the runtime removes it again if
            # the write fails
            meta = TxnMetadata(transactional_id, pid, timeout_ms, now)
        if meta.pending is not None:
            return TxnResult(response=_answer(ErrorCode.CONCURRENT_TRANSACTIONS))
        if expected is not None and not self._valid_expected_producer(meta, expected):
            return TxnResult(response=_answer(ErrorCode.PRODUCER_FENCED))
        state = meta.state
        if state in PREPARED:
            return TxnResult(response=_answer(ErrorCode.CONCURRENT_TRANSACTIONS))
        if state is ON:
            # Fence the producer of the ongoing transaction: abort it with the next epoch. That
            # epoch is never handed out: the client is told to retry, and its retry (once the
            # abort is complete) bumps the epoch again.
            log.info("Aborting the ongoing transaction of %s (producer id %d, epoch %d) to fence its producer",
                     transactional_id, meta.producer_id, meta.producer_epoch)
            return self._fence_and_abort(meta, answer_with=ErrorCode.CONCURRENT_TRANSACTIONS)
        if state not in (E, CC, CA):
            log.error("Found transactional id %s in state %s: this should never happen", transactional_id, state)
            return TxnResult(response=_answer(ErrorCode.UNKNOWN_SERVER_ERROR))
        if meta.epoch_exhausted and (expected is None or expected[1] == meta.producer_epoch):
            try:
                new_pid = self._allocate()
            except OSError as e:
                log.error("Allocating a producer id failed: %r", e)
                return TxnResult(response=_answer(ErrorCode.UNKNOWN_SERVER_ERROR))
            value = meta.value(E, now, producer_id=new_pid, producer_epoch=0,
                               last_producer_epoch=meta.producer_epoch if expected is not None else NO_PRODUCER_EPOCH,
                               timeout_ms=timeout_ms, partitions=set(), start_ms=-1,
                               previous_producer_id=meta.producer_id)
        else:
            bump = self._next_epochs(meta, None if expected is None else expected[1])
            if bump is None:
                log.info("Expected producer epoch %s of %s matches neither the current epoch %d nor the previous "
                         "one %d", expected, transactional_id, meta.producer_epoch, meta.last_producer_epoch)
                return TxnResult(response=_answer(ErrorCode.PRODUCER_FENCED))
            epoch, last_epoch = bump
            value = meta.value(E, now, producer_epoch=epoch, last_producer_epoch=last_epoch, timeout_ms=timeout_ms,
                               partitions=set(), start_ms=-1, previous_producer_id=meta.producer_id)
        record = TxnRecord(TxnKey(transactional_id), value)

        def on_appended(error: ErrorCode | None) -> PidAnswer:
            if error is not None:
                log.info("Returning %s to InitProducerId of %s", error.name, transactional_id)
                return _answer(error)
            log.info("Initialized transactional id %s with producer id %d and epoch %d on partition "
                     "__transaction_state-%d", transactional_id, value.producer_id, value.producer_epoch,
                     self.partition_of(transactional_id))
            return _answer(ErrorCode.NONE, value.producer_id, value.producer_epoch)

        return TxnResult(records=[record], on_appended=on_appended)

    @staticmethod
    def _valid_expected_producer(meta: TxnMetadata, expected: tuple[int, int]) -> bool:
        pid, epoch = expected
        return (meta.producer_epoch == NO_PRODUCER_EPOCH or pid == meta.producer_id
                or (pid == meta.previous_producer_id and epoch_exhausted(epoch)))

    @staticmethod
    def _next_epochs(meta: TxnMetadata, expected_epoch: int | None) -> tuple[int, int] | None:
        """(new epoch, last epoch) of Kafka's prepareIncrementProducerEpoch; None = fenced."""
        bumped = meta.producer_epoch + 1
        if expected_epoch is None:
            return bumped, NO_PRODUCER_EPOCH
        if meta.producer_epoch == NO_PRODUCER_EPOCH or expected_epoch == meta.producer_epoch:
            return bumped, meta.producer_epoch
        if expected_epoch == meta.last_producer_epoch:
            return meta.producer_epoch, meta.last_producer_epoch  # a retry of a call that succeeded
        return None

    # ================================================================== AddPartitionsToTxn

    def add_partitions(self, transactional_id: str, producer_id: int, producer_epoch: int,
                       partitions: Iterable[TopicPartition], client_version: int = 0) -> TxnResult:
        """AddPartitionsToTxn (and AddOffsetsToTxn with the group's offsets partition; with
        client_version 2 the implicit add of Produce v12 / TxnOffsetCommit v5). The response is
        one ErrorCode for every partition."""
        wanted = set(partitions)
        if not transactional_id:
            return TxnResult(response=ErrorCode.INVALID_REQUEST)
        err = self._unavailable(transactional_id)
        if err is not None:
            return TxnResult(response=err)
        meta = self._durable(transactional_id)
        err = self._check_producer(meta, producer_id, producer_epoch)
        if err is not None:
            return TxnResult(response=err)
        assert meta is not None
        if meta.pending is not None or meta.state in PREPARED:
            return TxnResult(response=ErrorCode.CONCURRENT_TRANSACTIONS)
        if meta.state is ON and wanted <= meta.partitions:
            return TxnResult(response=ErrorCode.NONE)
        if meta.state not in (E, ON, CC, CA):
            log.error("Found transactional id %s in state %s: this should never happen", transactional_id, meta.state)
            return TxnResult(response=ErrorCode.UNKNOWN_SERVER_ERROR)
        now = self.clock.now_ms()
        start = now if meta.state in (E, CC, CA) else meta.start_ms
        value = meta.value(ON, now, partitions=meta.partitions | wanted, start_ms=start,
                           client_transaction_version=client_version)

        return TxnResult(records=[TxnRecord(TxnKey(transactional_id), value)], on_appended=_added)

    def _check_producer(self, meta: TxnMetadata | None, producer_id: int, producer_epoch: int) -> ErrorCode | None:
        if meta is None or meta.producer_id != producer_id:
            return ErrorCode.INVALID_PRODUCER_ID_MAPPING
        if meta.producer_epoch != producer_epoch:
            return ErrorCode.PRODUCER_FENCED
        return None

    def verify_partitions(self, transactional_id: str | None, producer_id: int, producer_epoch: int,
                          partitions: Iterable[TopicPartition]) -> dict[TopicPartition, ErrorCode]:
        """Whether the partitions belong to the producer's ongoing transaction (KIP-890
        verification, Kafka's handleVerifyPartitionsInTransaction): NONE for each that does,
        TRANSACTION_ABORTABLE for each that does not, one error for all otherwise."""
        parts = list(partitions)
        if not transactional_id:
            return dict.fromkeys(parts, ErrorCode.INVALID_REQUEST)
        err = self._unavailable(transactional_id)
        if err is None:
            meta = self._durable(transactional_id)
            err = self._check_producer(meta, producer_id, producer_epoch)
            if err is None:
                assert meta is not None
                if meta.state in PREPARED:
                    err = ErrorCode.CONCURRENT_TRANSACTIONS
                else:
                    ongoing = meta.state is ON
                    return {tp: ErrorCode.NONE if ongoing and tp in meta.partitions else ErrorCode.TRANSACTION_ABORTABLE
                            for tp in parts}
        return dict.fromkeys(parts, err)

    # ================================================================== EndTxn

    def end_txn(self, transactional_id: str, producer_id: int, producer_epoch: int, commit: bool,
                client_version: int = 0) -> TxnResult:
        """EndTxn from a client: the response is (error, producer id, epoch), given once the
        Prepare state is durable (answer_end_when_prepared) or once the transaction is complete
        (markers written). client_version 2 (EndTxn v5): transactions
        v2, the epoch is bumped and the answer carries the producer's next id and epoch."""
        if client_version >= TV_2:
            return self._end_v2(transactional_id, producer_id, producer_epoch, commit, from_client=True)
        return self._end(transactional_id, producer_id, producer_epoch, commit, from_client=True)

    def _end(self, transactional_id: str, producer_id: int, producer_epoch: int, commit: bool,
             from_client: bool, fence: bool = False) -> TxnResult:
        if not transactional_id:
            return TxnResult(response=_answer(ErrorCode.INVALID_REQUEST))
        err = self._unavailable(transactional_id)
        if err is not None:
            return TxnResult(response=_answer(err))
        meta = self._durable(transactional_id)
        if meta is None or meta.producer_id != producer_id:
            return TxnResult(response=_answer(ErrorCode.INVALID_PRODUCER_ID_MAPPING))
        if (from_client and producer_epoch != meta.producer_epoch) or producer_epoch < meta.producer_epoch:
            return TxnResult(response=_answer(ErrorCode.PRODUCER_FENCED))
        if meta.pending is not None and not fence:
            return TxnResult(response=_answer(ErrorCode.CONCURRENT_TRANSACTIONS))
        current = (meta.producer_id, meta.producer_epoch)
        state = meta.state
        wanted_complete, wanted_prepare = (CC, PC) if commit else (CA, PA)
        if state is ON:
            pass
        elif state is wanted_complete:
            return TxnResult(response=_answer(ErrorCode.NONE, *current))  # a retry of a finished EndTxn
        elif state is wanted_prepare:
            return TxnResult(response=_answer(ErrorCode.CONCURRENT_TRANSACTIONS))
        elif state in (E, CC, CA, PC, PA):
            log.debug("Transactional id %s is %s, but received EndTxn(%s)", transactional_id, state,
                      "commit" if commit else "abort")
            return TxnResult(response=_answer(ErrorCode.INVALID_TXN_STATE))
        else:
            log.error("Found transactional id %s in state %s: this should never happen", transactional_id, state)
            return TxnResult(response=_answer(ErrorCode.UNKNOWN_SERVER_ERROR))
        now = self.clock.now_ms()
        if fence:
            meta.pending = None  # the fence becomes this abort
            value = meta.value(PA, now, producer_epoch=producer_epoch, last_producer_epoch=NO_PRODUCER_EPOCH)
        else:
            value = meta.value(wanted_prepare, now)
        record = TxnRecord(TxnKey(transactional_id), value)

        def on_appended(error: ErrorCode | None) -> Any:
            if error is not None:
                log.info("Writing %s of %s failed: %s", wanted_prepare, transactional_id, error.name)
                return _answer(error)
            done = self._start_markers(meta)
            if from_client and not self.answer_end_when_prepared:
                out: Deferred[PidAnswer] = Deferred()
                done.add_callback(lambda _: out.complete(_answer(ErrorCode.NONE, meta.producer_id, meta.producer_epoch)))
                return out
            return _answer(ErrorCode.NONE, meta.producer_id, meta.producer_epoch)

        return TxnResult(records=[record], on_appended=on_appended)

    def _end_v2(self, transactional_id: str, producer_id: int, producer_epoch: int, commit: bool,
                from_client: bool, fence: bool = False) -> TxnResult:
        """Kafka's endTransaction with TV_2: the outcome of each state is END_TXN_V2; a fence
        (the coordinator's own abort of an ongoing transaction) bumps the fenced epoch again."""
        if not transactional_id:
            return TxnResult(response=_answer(ErrorCode.INVALID_REQUEST))
        err = self._unavailable(transactional_id)
        if err is not None:
            return TxnResult(response=_answer(err))
        meta = self._durable(transactional_id)
        if meta is None:
            return TxnResult(response=_answer(ErrorCode.INVALID_PRODUCER_ID_MAPPING))
        retry_on_overflow = (not fence and meta.previous_producer_id == producer_id
                             and producer_epoch == INT16_MAX - 1 and meta.producer_epoch == 0)
        retry_on_bump = not fence and meta.producer_epoch == producer_epoch + 1
        if meta.producer_id != producer_id and not retry_on_overflow:
            return TxnResult(response=_answer(ErrorCode.INVALID_PRODUCER_ID_MAPPING))
        if meta.pending is not None and not fence:
            return TxnResult(response=_answer(ErrorCode.CONCURRENT_TRANSACTIONS))
        state = meta.state
        if fence:
            if (from_client and producer_epoch != meta.producer_epoch) or producer_epoch < meta.producer_epoch:
                return TxnResult(response=_answer(ErrorCode.PRODUCER_FENCED))
            outcome = "bump"
        else:
            retry = retry_on_bump or retry_on_overflow
            if not retry and producer_epoch != meta.producer_epoch:
                return TxnResult(response=_answer(ErrorCode.PRODUCER_FENCED))
            outcome = END_TXN_V2.get((state, commit, retry))
            if outcome is None:
                log.error("Found transactional id %s in state %s: this should never happen", transactional_id, state)
                return TxnResult(response=_answer(ErrorCode.UNKNOWN_SERVER_ERROR))
        if outcome == "none":
            return TxnResult(response=_answer(ErrorCode.NONE, meta.producer_id, meta.producer_epoch))
        if outcome != "bump":
            if outcome == "INVALID_TXN_STATE":
                log.debug("Transactional id %s is %s, but received EndTxn(%s)", transactional_id, state,
                          "commit" if commit else "abort")
            return TxnResult(response=_answer(ErrorCode[outcome]))
        # The epoch the transaction ends with; the producer id rotates once it is exhausted
        # (the Prepare record names the next id, the Complete record takes it on).
        epoch = producer_epoch if fence else meta.producer_epoch
        next_pid = NO_PRODUCER_ID
        if epoch_exhausted(epoch):
            try:
                next_pid = self._allocate()
            except OSError as e:
                log.error("Allocating a producer id failed: %r", e)
                return TxnResult(response=_answer(ErrorCode.UNKNOWN_SERVER_ERROR))
        now = self.clock.now_ms()
        target = PC if commit else PA
        no_partitions = state is not ON
        if fence:
            meta.pending = None  # the fence becomes this abort
        # (a fence of an epoch already at the maximum cannot bump again; the new id follows)
        value = meta.value(target, now, producer_epoch=min(epoch + 1, INT16_MAX), last_producer_epoch=epoch,
                           start_ms=now if no_partitions else None, next_producer_id=next_pid,
                           client_transaction_version=TV_2)
        record = TxnRecord(TxnKey(transactional_id), value)

        def on_appended(error: ErrorCode | None) -> Any:
            if error is not None:
                log.info("Writing %s of %s failed: %s", target, transactional_id, error.name)
                return _answer(error)
            done = self._start_markers(meta)
            # what the producer continues with: the Complete state's id and epoch
            answer = (_answer(ErrorCode.NONE, next_pid, 0) if next_pid != NO_PRODUCER_ID
                      else _answer(ErrorCode.NONE, meta.producer_id, meta.producer_epoch))
            if from_client and not self.answer_end_when_prepared:
                out: Deferred[PidAnswer] = Deferred()
                done.add_callback(lambda _: out.complete(answer))
                return out
            return answer

        return TxnResult(records=[record], on_appended=on_appended)

    def _fence_and_abort(self, meta: TxnMetadata, answer_with: ErrorCode) -> TxnResult:
        """Kafka's prepareFenceProducerEpoch + endTransaction(ABORT, isFromClient=false)."""
        if meta.producer_epoch >= INT16_MAX:
            log.error("Cannot fence producer %d of %s: its epoch would overflow", meta.producer_id,
                      meta.transactional_id)
            return TxnResult(response=_answer(ErrorCode.UNKNOWN_SERVER_ERROR))
        meta.pending = PF
        # not from a client: the server's transaction.version decides the path, as in Kafka
        end = self._end_v2 if self.config.transaction_version >= TV_2 else self._end
        result = end(meta.transactional_id, meta.producer_id, meta.producer_epoch + 1, commit=False,
                     from_client=False, fence=True)
        if not result.records:
            meta.pending = None
            return result
        inner = result.on_appended
        assert inner is not None

        def on_appended(error: ErrorCode | None) -> PidAnswer:
            answer = inner(error)
            if error is not None:
                return answer
            return _answer(answer_with)

        result.on_appended = on_appended
        return result

    # ================================================================== markers and completion

    def _start_markers(self, meta: TxnMetadata) -> Deferred[None]:
        """The prepared transaction's decision is durable: write its markers (Kafka's
        prepareComplete: the Complete state is pending from now until it is written)."""
        commit = meta.state is PC
        meta.pending = CC if commit else CA
        job = MarkerJob(meta.transactional_id, meta.producer_id, meta.producer_epoch, commit,
                        frozenset(meta.partitions))
        if self._marker_writer is not None:
            d = self._marker_writer(job)
        else:
            d = Deferred()
            self.marker_jobs.append((job, d))
        tid = meta.transactional_id
        self._completing[tid] = d

        def settled(_: None) -> None:
            if self._completing.get(tid) is d:
                del self._completing[tid]

        d.add_callback(settled)
        return d

    def complete(self, job: MarkerJob) -> TxnResult:
        """Every marker of `job` is durable: the record of CompleteCommit / CompleteAbort. The
        response is None (written) or the error of the write; a transactional id that moved
        on (it cannot, while its Complete state is pending) gets no record."""
        meta = self._txns.get(job.transactional_id)
        target = CC if job.commit else CA
        if meta is None or meta.producer_id != job.producer_id or meta.producer_epoch != job.producer_epoch \
                or meta.pending is not target:
            log.error("Not completing %s: its state changed while its markers were written (%r)",
                      job.transactional_id, meta)
            return TxnResult(response=ErrorCode.INVALID_TXN_STATE)
        if meta.next_producer_id != NO_PRODUCER_ID:
            # transactions v2, the epoch exhausted: the producer continues with the next id
            value = meta.value(target, self.clock.now_ms(), partitions=set(), producer_id=meta.next_producer_id,
                               producer_epoch=0, previous_producer_id=meta.producer_id,
                               next_producer_id=NO_PRODUCER_ID)
        else:
            value = meta.value(target, self.clock.now_ms(), partitions=set())

        def on_appended(error: ErrorCode | None) -> ErrorCode | None:
            if error is None:  # else reverted to the prepared state, still completing: the writer retries
                meta.pending = None
                log.debug("Completed %s of %s", target, job.transactional_id)
            return error

        return TxnResult(records=[TxnRecord(TxnKey(job.transactional_id), value)], on_appended=on_appended,
                         durable=False)

    # ================================================================== timeouts / expiration

    def abort_timed_out(self) -> list[TxnResult]:
        """Kafka's abortTimedOutTransactions: each Ongoing transaction started longer than its
        timeout ago is aborted with the producer's epoch bumped (fencing it)."""
        now = self.clock.now_ms()
        out = []
        for meta in self._durable_states():
            if meta.pending is not None or meta.state is not ON or self._is_loading(meta.transactional_id):
                continue
            if meta.start_ms + meta.timeout_ms < now:
                log.info("Aborting transaction of %s (producer id %d, epoch %d): started %d ms ago, timeout %d ms",
                         meta.transactional_id, meta.producer_id, meta.producer_epoch, now - meta.start_ms,
                         meta.timeout_ms)
                out.append(self._fence_and_abort(meta, answer_with=ErrorCode.NONE))
        return out

    def expire_transactional_ids(self) -> TxnResult:
        """Tombstones for ids idle longer than transactional.id.expiration.ms (Kafka's
        removeExpiredTransactionalIds); their records may belong to several partitions."""
        now = self.clock.now_ms()
        horizon = now - self.config.transactional_id_expiration_ms
        expiring = [m for m in self._durable_states()
                    if m.pending is None and m.state in EXPIRATION_ALLOWED and m.last_update_ms <= horizon
                    and not self._is_loading(m.transactional_id)]
        if not expiring:
            return TxnResult()
        ids = [m.transactional_id for m in expiring]
        self._expiring.update(ids)

        def on_appended(error: ErrorCode | None) -> None:
            self._expiring.difference_update(ids)
            if error is not None:  # reverted: the ids are back, to expire at a later run
                log.warning("Writing tombstones of %d expired transactional ids failed: %s", len(expiring), error.name)
            else:
                log.info("Expired %d transactional ids", len(expiring))

        return TxnResult(records=[TxnRecord(TxnKey(m.transactional_id), None) for m in expiring],
                         on_appended=on_appended)

    # ================================================================== describe / list

    def describe(self, transactional_id: str) -> tuple[ErrorCode, TxnMetadata | None]:
        if not self.active:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, None
        if transactional_id == "":
            return ErrorCode.INVALID_REQUEST, None
        if self._is_loading(transactional_id):
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, None
        if self._unloaded and self.partition_of(transactional_id) in self._unloaded:
            return ErrorCode.NOT_COORDINATOR, None
        meta = self._durable(transactional_id)
        if meta is None or meta.state is D or meta.producer_epoch == NO_PRODUCER_EPOCH:
            return ErrorCode.TRANSACTIONAL_ID_NOT_FOUND, None
        return ErrorCode.NONE, meta

    def list_transactions(self, producer_ids: Iterable[int], state_names: Iterable[str],
                          duration_ms: int = -1) -> tuple[ErrorCode, list[str], list[TxnMetadata]]:
        """(error, unknown state filters, matching transactions) of ListTransactions."""
        if not self.active:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, [], []
        if self._loading:
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, [], []
        pids = set(producer_ids)
        names = list(state_names)
        states = {s for s in (TxnState.from_name(n) for n in names) if s is not None}
        unknown = [n for n in names if TxnState.from_name(n) is None]
        now = self.clock.now_ms()
        out = []
        for m in self._durable_states():
            if m.state is D or m.producer_epoch == NO_PRODUCER_EPOCH:
                continue
            if pids and m.producer_id not in pids:
                continue
            if names and m.state not in states:
                continue
            if duration_ms >= 0 and now - m.start_ms <= duration_ms:
                continue
            out.append(m)
        return ErrorCode.NONE, unknown, out

    def counts_by_state(self) -> dict[TxnState, int]:
        out = dict.fromkeys(TxnState, 0)
        for m in self._durable_states():
            if m.producer_epoch != NO_PRODUCER_EPOCH:
                out[m.state] += 1
        return out

    # ================================================================== replay / loading

    def current_record(self, key: TxnKey) -> TxnRecord:
        """What the id holds now as its record (a tombstone when nothing): replayed, it puts
        the id back as it is (how the runtime reverts a write that never became durable)."""
        meta = self._txns.get(key.transactional_id)
        return TxnRecord(key, None if meta is None else meta.record_value())

    def replay(self, record: TxnRecord) -> None:
        tid = record.key.transactional_id
        value = record.value
        if value is None:
            self._txns.pop(tid, None)
            return
        meta = self._txns.get(tid)
        if meta is None:
            self._txns[tid] = TxnMetadata.from_value(tid, value)
        else:
            meta.apply(value)
        self._note_pid(value.producer_id)
        if value.next_producer_id >= 0:
            self._note_pid(value.next_producer_id)

    def begin_loading(self, partition: int) -> None:
        """Ids of `partition` answer COORDINATOR_LOAD_IN_PROGRESS until end_loading; anything
        held for it is dropped (the log is the truth). A coordinator loading a partition is
        active (on a cluster node: it leads a __transaction_state partition)."""
        self.active = True
        self._loading.add(partition)
        self._unloaded.discard(partition)
        for tid in [t for t in self._txns if self.partition_of(t) == partition]:
            del self._txns[tid]
            self._completing.pop(tid, None)

    def unload(self, partition: int) -> None:
        """Another node coordinates `partition` (runtime.unload): its ids' state is dropped
        and they answer NOT_COORDINATOR until begin_loading. Markers already being written
        for them are not recalled (the next coordinator writes them again after its load)."""
        active = self.active
        self.begin_loading(partition)
        self.active = active
        self._loading.discard(partition)
        self._unloaded.add(partition)

    def end_loading(self, partition: int) -> list[Deferred[None]]:
        """The partition is loaded: its prepared transactions get their markers (again)."""
        self._loading.discard(partition)
        out = []
        n = 0
        for meta in list(self._txns.values()):
            if self.partition_of(meta.transactional_id) != partition:
                continue
            n += 1
            if meta.state in PREPARED and meta.pending is None:
                log.info("Writing the %s markers of %s (producer id %d) prepared before the restart",
                         "COMMIT" if meta.state is PC else "ABORT", meta.transactional_id, meta.producer_id)
                out.append(self._start_markers(meta))
        if n:
            log.info("Finished loading %d transaction metadata from __transaction_state-%d", n, partition)
        return out
