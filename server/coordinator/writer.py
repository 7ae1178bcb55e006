"""Durable, coalesced appends of a coordinator's records to its topic (__consumer_offsets,
__transaction_state).

Every write is staged, and at the end of the event-loop turn each partition's staged records
go to its log as ONE batch (one write(2), one CRC) that then waits for the partition's next
fdatasync round (group commit). A hundred commits arriving together thus cost one batch and
share one sync. When the batch is durable, each write's `done(None)` runs; a failure answers
`done(code)` (mapped by the format's append_error). The shard's commit timeout (offsets.commit.timeout.ms,
request.timeout.ms) bounds the wait per batch.

On a cluster node (`acks` set, server/coordinator/acks.py) a replicated partition's batch is
appended only by its leader, stamped with its leader epoch, and with
offsets.commit.required.acks -1 is answered only once every in-sync replica has it too (the
high watermark reached its end), within the same timeout; a refusal or a replication failure
answers the replica manager's code through the same append_error.

Every write comes with its `revert` (server/coordinator/result.py's rule: the runtime replayed
its records when it was made; the writer never replays): a write answered with an error (the
append, its fdatasync or its replication failed, or it timed out) is reverted first, newest
write first, so nothing a client was told failed stays in memory (a timed-out write's records
may still be in the log: a restart loads them, as Kafka's would). Only a partition unloaded
meanwhile reverts nothing: its state was dropped.

A write made with durable=False (CompleteCommit / CompleteAbort) is answered as soon as it is
appended.
"""
from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar

from kcoord.protocol.errors import ErrorCode, KafkaError, error_code_of
from kcoord.server.clock import Clock
from kcoord.storage.flusher import group_commit
from kcoord.storage.log import PartitionLog
from kcoord.storage.log_dir_failure import LogDirOfflineError
from kcoord.storage.log_manager import LogManager

if TYPE_CHECKING:
    from kcoord.server.coordinator.acks import ReplicaAcks

log = logging.getLogger("kcoord.coordinator")

R = TypeVar("R")
Done = Callable[[ErrorCode | None], None]
_BATCH_OVERHEAD = 61  # RecordBatch v2 header
_RECORD_OVERHEAD = 24  # generous varint framing per record
_FLUSH_EARLY_BYTES = 512 * 1024  # a staged batch this large goes out without waiting


class RecordFormat(Protocol[R]):
    """How a shard's records sit in its topic: the part of a shard the writer and the loader
    need."""

    topic: str
    timeout_config: str  # the setting that bounds a batch's wait for its fdatasync (for the log)
    decode_errors: tuple[type[Exception], ...]  # what decode raises for bytes it cannot read

    def partition_of(self, record: R) -> int: ...

    def encode(self, record: R) -> tuple[bytes, bytes | None]: ...

    def decode(self, key: bytes, value: bytes | None) -> R | None:
        """The record, or None for a key this coordinator does not know (skipped)."""

    def append_error(self, code: ErrorCode) -> ErrorCode:
        """The code the shard's clients see for a failed append."""


class _Write:
    """One caller's write, possibly spread over several partitions' batches."""

    __slots__ = ("owner", "done", "left", "finished", "undo", "durable")

    def __init__(self, owner: LogWriter[Any], done: Done, parts: int,
                 undo: Callable[[], None] | None, durable: bool) -> None:
        self.owner = owner
        self.done = done
        self.left = parts
        self.finished = False
        self.undo = undo  # how to take back the records' replay
        self.durable = durable
        owner.pending += 1

    def finish(self, code: ErrorCode | None, revert: bool = True) -> None:
        """A failure (`code`) reverts the records' replay, unless `revert` is False: the
        partition was unloaded meanwhile and its state dropped, nothing is left to revert."""
        if not self.finished:
            self.finished = True
            self.owner.pending -= 1
            undo, self.undo = self.undo, None
            if undo is not None and code is not None and revert:
                undo()
            self.done(code)


# The encoded records of one write bound for one partition:
# (partition, [(key, value)], bytes they add to a batch)
_Part = tuple[int, list[tuple[bytes, bytes | None]], int]


class _Batch:
    __slots__ = ("plog", "kvs", "size", "entries", "lazy")

    def __init__(self, plog: PartitionLog) -> None:
        self.plog = plog
        self.kvs: list[tuple[bytes, bytes | None]] = []
        self.size = _BATCH_OVERHEAD
        self.entries: list[_Write] = []
        self.lazy = False  # holds a write made with durable=False


class LogWriter(Generic[R]):
    def __init__(
        self,
        logs: LogManager,
        records: RecordFormat[R],
        clock: Clock,
        timeout_s: float,
        max_message_bytes: int,
        on_append: Callable[[int], None] | None = None,
    ) -> None:
        self.logs = logs
        self.records = records
        self.topic = records.topic
        self.clock = clock
        self.timeout_s = timeout_s
        self.max_message_bytes = max_message_bytes
        self.on_append = on_append  # told the partition after each append (fetch long polls)
        self.pending = 0  # writes not yet answered (kept by _Write)
        self._staged: dict[int, _Batch] = {}
        self._flush_scheduled = False
        self._fences: dict[int, int] = {}  # partition -> how many times fence() was called
        # a cluster node's: appends wait for the in-sync replicas (server/coordinator/acks.py)
        self.acks: ReplicaAcks | None = None

    def write(self, records: list[R], done: Done, revert: Callable[[], None], durable: bool = True) -> None:
        """Stage `records`; `done` runs exactly once, with None once they are durable (with
        durable=False: appended), or with the code the client should see, after `revert` took
        back their replay (they never reached the log)."""
        try:
            parts = self._encode(records)
        except Exception as e:  # noqa: BLE001 - the writer is told, so its pending state is undone
            if not isinstance(e, KafkaError):
                log.error("Could not encode %d records for %s: %r", len(records), self.topic, e)
            revert()
            done(self.records.append_error(error_code_of(e)))
            return
        write = _Write(self, done, len(parts), revert, durable)
        staged = self._staged
        for partition, kvs, size in parts:
            batch = staged.get(partition)
            if batch is not None and batch.size + size > self.max_message_bytes:
                if not self._flush_partition(partition):
                    # applied on top of what just failed to append: it cannot stand either
                    write.finish(ErrorCode.NOT_COORDINATOR)
                    return
                batch = None
            if batch is None:
                try:
                    plog = self._log(partition)
                except KafkaError as e:
                    write.finish(self.records.append_error(e.code))
                    return
                batch = staged[partition] = _Batch(plog)
            batch.kvs.extend(kvs)
            batch.size += size
            batch.entries.append(write)
            if not durable:
                batch.lazy = True
            if batch.size >= _FLUSH_EARLY_BYTES:
                self._flush_partition(partition)
        if staged and not self._flush_scheduled:
            self._flush_scheduled = True
            asyncio.get_running_loop().call_soon(self.flush)

    def _encode(self, records: list[R]) -> list[_Part]:
        """The records' bytes, by partition."""
        fmt = self.records
        if len(records) == 1:  # a one-partition commit, the usual write
            r = records[0]
            k, v = fmt.encode(r)
            size = len(k) + (0 if v is None else len(v)) + _RECORD_OVERHEAD
            if size + _BATCH_OVERHEAD > self.max_message_bytes:
                self._check_size(size)  # raises
            return [(fmt.partition_of(r), [(k, v)], size)]
        by_partition: dict[int, list[tuple[bytes, bytes | None]]] = {}
        for r in records:
            p = fmt.partition_of(r)
            kvs = by_partition.get(p)
            if kvs is None:
                kvs = by_partition[p] = []
            kvs.append(fmt.encode(r))
        out = []
        for p, kvs in by_partition.items():
            size = sum(len(k) + (len(v) if v is not None else 0) + _RECORD_OVERHEAD for k, v in kvs)
            self._check_size(size)
            out.append((p, kvs, size))
        return out

    def _check_size(self, size: int) -> None:
        if size + _BATCH_OVERHEAD > self.max_message_bytes:
            raise KafkaError(ErrorCode.RECORD_LIST_TOO_LARGE,
                             f"{size} bytes of {self.topic} records exceed max.message.bytes")

    def _log(self, partition: int) -> PartitionLog:
        try:
            plog = self.logs.get(self.topic, partition)  # a declared partition's log is created here
        except OSError as e:  # its log directory is offline
            raise KafkaError(ErrorCode.KAFKA_STORAGE_ERROR, str(e)) from e
        if plog is None:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"{self.topic}-{partition} has no log")
        return plog

    def fence(self, partition: int, code: ErrorCode) -> None:
        """The partition is no longer this node's (unloaded): its staged writes and those
        waiting for their fdatasync fail with `code` (as the shard maps it) and are never
        replayed."""
        self._fences[partition] = self._fences.get(partition, 0) + 1
        batch = self._staged.pop(partition, None)
        if batch is not None:
            self._fail(batch, self.records.append_error(code))

    def flush(self) -> None:
        """Append every staged batch (end of the loop turn)."""
        self._flush_scheduled = False
        for partition in list(self._staged):
            self._flush_partition(partition)

    def _flush_partition(self, partition: int) -> bool:
        """False when the append failed (its writes are answered)."""
        batch = self._staged.pop(partition)
        acks = self.acks
        replica = batch.plog.replica if acks is not None else None
        epoch = 0
        if replica is not None:  # a replicated partition: only its leader appends, at its epoch
            refused = acks.refused(replica, self.topic)  # type: ignore[union-attr]
            if refused is not None:
                self._fail(batch, self.records.append_error(refused))
                return False
            epoch = replica.leader_epoch
        try:
            base, last = batch.plog.append_records(batch.kvs, self.clock.now_ms(), epoch)
        except Exception as e:  # noqa: BLE001 - every failure becomes the clients' error code
            if not isinstance(e, LogDirOfflineError):  # that one was logged once, with the directory
                log.error("Appending %d records to %s-%d failed: %r", len(batch.kvs), self.topic, partition, e)
            self._fail(batch, self.records.append_error(error_code_of(e)))
            return False
        if replica is not None:
            acks.appended(replica, base)  # type: ignore[union-attr]
        if self.on_append is not None:
            self.on_append(partition)
        if batch.lazy and not self._appended(batch):
            return True  # nobody waits for this batch's fdatasync

        def timed_out() -> None:
            log.warning("%d records to %s-%d not durable within %s", len(batch.kvs), self.topic, partition,
                        self.records.timeout_config)
            self._fail(batch, self.records.append_error(ErrorCode.REQUEST_TIMED_OUT))

        loop = asyncio.get_running_loop()
        timer = loop.call_later(self.timeout_s, timed_out)
        fenced = self._fences.get(partition, 0)
        if replica is not None:
            self._when_replicated(batch, partition, replica, last, timer, fenced, loop.time() + self.timeout_s)
            return True

        def on_durable(exc: BaseException | None) -> None:
            timer.cancel()
            if self._fences.get(partition, 0) != fenced:  # unloaded meanwhile: the state is not ours
                self._fail(batch, self.records.append_error(ErrorCode.NOT_LEADER_OR_FOLLOWER), revert=False)
                return
            if exc is not None:  # not durable: reverted, nobody is told it was written
                if not isinstance(exc, LogDirOfflineError):
                    log.error("fdatasync of %s-%d failed: %r", self.topic, partition, exc)
                self._fail(batch, self.records.append_error(error_code_of(exc)))
                return
            self._completed(batch)

        group_commit(batch.plog).when_durable(last, on_durable)
        return True

    def _when_replicated(self, batch: _Batch, partition: int, replica: Any, last: int, timer: Any, fenced: int,
                         deadline: float) -> None:
        """A cluster node's batch: durable here, then (acks -1) in every ISR member's log,
        within the same deadline; then answered."""
        acks = self.acks
        assert acks is not None
        loop = asyncio.get_running_loop()

        def replicated(code: ErrorCode) -> None:
            """acks -1: the in-sync replicas have the batch, or not (`code`)."""
            timer.cancel()
            if self._fences.get(partition, 0) != fenced:  # unloaded meanwhile: the state is not ours
                self._fail(batch, self.records.append_error(ErrorCode.NOT_LEADER_OR_FOLLOWER), revert=False)
            elif code != ErrorCode.NONE:  # in the log, not acknowledged: reverted (Kafka's cache)
                if code != ErrorCode.NOT_LEADER_OR_FOLLOWER:
                    log.warning("%d records to %s-%d not acknowledged by the in-sync replicas: %s",
                                len(batch.kvs), self.topic, partition, code.name)
                self._fail(batch, self.records.append_error(code))
            else:
                self._completed(batch)

        def on_durable(exc: BaseException | None) -> None:
            if self._fences.get(partition, 0) != fenced:  # unloaded meanwhile: the state is not ours
                timer.cancel()
                self._fail(batch, self.records.append_error(ErrorCode.NOT_LEADER_OR_FOLLOWER), revert=False)
                return
            if exc is not None:  # not durable: reverted, nobody is told it was written
                timer.cancel()
                if not isinstance(exc, LogDirOfflineError):
                    log.error("fdatasync of %s-%d failed: %r", self.topic, partition, exc)
                self._fail(batch, self.records.append_error(error_code_of(exc)))
                return
            if acks.wait(replica, last + 1, max(0, int((deadline - loop.time()) * 1000)), replicated):
                return
            timer.cancel()
            self._completed(batch)

        group_commit(batch.plog).when_durable(last, on_durable)

    def _completed(self, batch: _Batch) -> None:
        """The batch is durable (and, on a cluster with acks -1, in every ISR member's log):
        answer its writes."""
        for write in batch.entries:
            if not write.durable:
                continue  # answered at the append
            write.left -= 1
            if write.left == 0:
                write.finish(None)

    def _appended(self, batch: _Batch) -> bool:
        """Answer the batch's writes made with durable=False; whether any write of the batch
        waits for its fdatasync."""
        waits = False
        for write in batch.entries:
            if write.durable:
                waits = True
                continue
            write.left -= 1
            if write.left == 0:
                write.finish(None)
        return waits

    @staticmethod
    def _fail(batch: _Batch, code: ErrorCode, revert: bool = True) -> None:
        # newest first: applied records are undone in the reverse order they were made
        for write in reversed(batch.entries):
            write.finish(code, revert)
