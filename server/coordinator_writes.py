"""Durable, coalesced appends of coordinator records to __consumer_offsets.

Every write is staged, and at the end of the event-loop turn each partition's staged records
go to its log as ONE batch (one write(2), one CRC) that then waits for the partition's next
fdatasync round (group commit). A hundred commits arriving together thus cost one batch and
share one sync. When the batch is durable, each writer's records are replayed in append
order and its `done(None)` runs; a failure answers `done(code)` and replays nothing.
offsets.commit.timeout.ms bounds the wait per batch.
"""
from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from functools import lru_cache

from protocol.coordinator_codec import encode_key, encode_value
from protocol.coordinator_records import CoordinatorRecord
from protocol.errors import ErrorCode, KafkaError, coordinator_append_error, error_code_of
from protocol.partitioner import partition_for
from protocol.topics import OFFSETS_TOPIC
from server.clock import Clock
from storage.flusher import group_commit
from storage.log import PartitionLog
from storage.log_dir_failure import LogDirOfflineError
from storage.log_manager import LogManager

log = logging.getLogger("kcoord.coordinator")

Done = Callable[[ErrorCode | None], None]
_BATCH_OVERHEAD = 61  # RecordBatch v2 header
_RECORD_OVERHEAD = 24  # generous varint framing per record
_FLUSH_EARLY_BYTES = 512 * 1024  # a staged batch this large goes out without waiting


class _Writer:
    """One caller's write, possibly spread over several partitions' batches."""

    __slots__ = ("owner", "done", "left", "finished", "undo")

    def __init__(self, owner: CoordinatorWriter, done: Done, parts: int,
                 undo: Callable[[], None] | None = None) -> None:
        self.owner = owner
        self.done = done
        self.left = parts
        self.finished = False
        self.undo = undo  # records applied ahead of the append: how to take them back
        owner.pending += 1

    def finish(self, code: ErrorCode | None, appended: bool = True) -> None:
        """`appended` False: the records never reached the log, so applied ones are undone."""
        if not self.finished:
            self.finished = True
            self.owner.pending -= 1
            undo, self.undo = self.undo, None
            if undo is not None and not appended:
                undo()
            self.done(code)


# The encoded records of one write bound for one partition:
# (partition, [(key, value)], records, bytes they add to a batch)
_Part = tuple[int, list[tuple[bytes, bytes | None]], list[CoordinatorRecord], int]


class _Batch:
    __slots__ = ("plog", "kvs", "size", "entries")

    def __init__(self, plog: PartitionLog) -> None:
        self.plog = plog
        self.kvs: list[tuple[bytes, bytes | None]] = []
        self.size = _BATCH_OVERHEAD
        self.entries: list[tuple[_Writer, list[CoordinatorRecord]]] = []


class CoordinatorWriter:
    def __init__(
        self,
        logs: LogManager,
        num_partitions: int,
        replay: Callable[[CoordinatorRecord], None],
        clock: Clock,
        commit_timeout_s: float,
        max_message_bytes: int,
        on_append: Callable[[int], None] | None = None,
    ) -> None:
        self.logs = logs
        self.replay = replay
        self.clock = clock
        self.commit_timeout_s = commit_timeout_s
        self.max_message_bytes = max_message_bytes
        self.on_append = on_append  # told the partition after each append (fetch long polls)
        self.pending = 0  # writers not yet answered (kept by _Writer)
        self._staged: dict[int, _Batch] = {}
        self._flush_scheduled = False
        self._partition_of = lru_cache(maxsize=65536)(lambda g: partition_for(g, num_partitions))

    def write(self, records: list[CoordinatorRecord], done: Done, replay: bool = True,
              undo: Callable[[], None] | None = None) -> None:
        """Stage `records`; `done` runs exactly once, with None once they are durable and
        replayed, or with the code the client should see. replay=False: the caller applied
        them already (consumer groups); `undo` takes them back if they never reach the log."""
        try:
            parts = self._encode(records)
        except Exception as e:  # noqa: BLE001 - the writer is told, so its pending state is undone
            if not isinstance(e, KafkaError):
                log.error("Could not encode %d coordinator records: %r", len(records), e)
            if undo is not None:
                undo()
            done(coordinator_append_error(error_code_of(e)))
            return
        writer = _Writer(self, done, len(parts), undo)
        staged = self._staged
        for partition, kvs, recs, size in parts:
            batch = staged.get(partition)
            if batch is not None and batch.size + size > self.max_message_bytes:
                if not self._flush_partition(partition) and writer.undo is not None:
                    # applied on top of what just failed to append: it cannot stand either
                    writer.finish(ErrorCode.NOT_COORDINATOR, appended=False)
                    return
                batch = None
            if batch is None:
                try:
                    plog = self._log(partition)
                except KafkaError as e:
                    writer.finish(coordinator_append_error(e.code), appended=False)
                    return
                batch = staged[partition] = _Batch(plog)
            batch.kvs.extend(kvs)
            batch.size += size
            batch.entries.append((writer, recs if replay else ()))
            if batch.size >= _FLUSH_EARLY_BYTES:
                self._flush_partition(partition)
        if staged and not self._flush_scheduled:
            self._flush_scheduled = True
            asyncio.get_running_loop().call_soon(self.flush)

    def _encode(self, records: list[CoordinatorRecord]) -> list[_Part]:
        """The records' bytes, by partition."""
        if len(records) == 1:  # a one-partition commit, the usual write
            r = records[0]
            k = encode_key(r.key)
            v = None if r.value is None else encode_value(r.value)
            size = len(k) + (0 if v is None else len(v)) + _RECORD_OVERHEAD
            if size + _BATCH_OVERHEAD > self.max_message_bytes:
                self._check_size(size)  # raises
            return [(self._partition_of(r.key.group), [(k, v)], records, size)]
        by_partition: dict[int, tuple[list[tuple[bytes, bytes | None]], list[CoordinatorRecord]]] = {}
        for r in records:
            p = self._partition_of(r.key.group)
            entry = by_partition.get(p)
            if entry is None:
                entry = by_partition[p] = ([], [])
            entry[0].append((encode_key(r.key), None if r.value is None else encode_value(r.value)))
            entry[1].append(r)
        out = []
        for p, (kvs, recs) in by_partition.items():
            size = sum(len(k) + (len(v) if v is not None else 0) + _RECORD_OVERHEAD for k, v in kvs)
            self._check_size(size)
            out.append((p, kvs, recs, size))
        return out

    def _check_size(self, size: int) -> None:
        if size + _BATCH_OVERHEAD > self.max_message_bytes:
            raise KafkaError(ErrorCode.RECORD_LIST_TOO_LARGE,
                             f"{size} bytes of coordinator records exceed max.message.bytes")

    def _log(self, partition: int) -> PartitionLog:
        try:
            plog = self.logs.get(OFFSETS_TOPIC, partition)  # a declared partition's log is created here
        except OSError as e:  # its log directory is offline
            raise KafkaError(ErrorCode.KAFKA_STORAGE_ERROR, str(e)) from e
        if plog is None:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"{OFFSETS_TOPIC}-{partition} has no log")
        return plog

    def flush(self) -> None:
        """Append every staged batch (end of the loop turn)."""
        self._flush_scheduled = False
        for partition in list(self._staged):
            self._flush_partition(partition)

    def _flush_partition(self, partition: int) -> bool:
        """False when the append failed (its writers are answered)."""
        batch = self._staged.pop(partition)
        try:
            _, last = batch.plog.append_records(batch.kvs, self.clock.now_ms())
        except Exception as e:  # noqa: BLE001 - every failure becomes the clients' error code
            if not isinstance(e, LogDirOfflineError):  # that one was logged once, with the directory
                log.error("Appending %d records to %s-%d failed: %r", len(batch.kvs), OFFSETS_TOPIC, partition, e)
            self._fail(batch, coordinator_append_error(error_code_of(e)), appended=False)
            return False
        if self.on_append is not None:
            self.on_append(partition)

        def timed_out() -> None:
            log.warning("%d records to %s-%d not durable within offsets.commit.timeout.ms",
                        len(batch.kvs), OFFSETS_TOPIC, partition)
            self._fail(batch, coordinator_append_error(ErrorCode.REQUEST_TIMED_OUT))

        timer = asyncio.get_running_loop().call_later(self.commit_timeout_s, timed_out)

        def on_durable(exc: BaseException | None) -> None:
            timer.cancel()
            if exc is not None:  # not durable: nothing is replayed, nobody is told it was written
                if not isinstance(exc, LogDirOfflineError):
                    log.error("fdatasync of %s-%d failed: %r", OFFSETS_TOPIC, partition, exc)
                self._fail(batch, coordinator_append_error(error_code_of(exc)))
                return
            for writer, recs in batch.entries:
                # Replayed even if its writer already heard of a timeout: the log has them,
                # and memory must agree with what a restart would load.
                for r in recs:
                    self.replay(r)
                writer.left -= 1
                if writer.left == 0:
                    writer.finish(None)

        group_commit(batch.plog).when_durable(last, on_durable)
        return True

    @staticmethod
    def _fail(batch: _Batch, code: ErrorCode, appended: bool = True) -> None:
        # newest first: applied records are undone in the reverse order they were made
        for writer, _recs in reversed(batch.entries):
            writer.finish(code, appended)
