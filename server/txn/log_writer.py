"""Durable appends to __transaction_state.

Like the group coordinator's writer (server/coordinator_writes.py): the records staged during
one event-loop turn go to each partition as one batch, which waits for the partition's next
fdatasync round (group commit). Once durable, each write's records are replayed in append
order and its `done(None)` runs; a failure answers `done(code)` (already mapped for clients)
and replays nothing. request.timeout.ms bounds the wait, as Kafka's transaction log appends.
A write made with durable=False (CompleteCommit / CompleteAbort, see TxnResult.durable) is
replayed and answered as soon as it is appended.
"""
from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from protocol.errors import ErrorCode, KafkaError, error_code_of, txn_append_error
from protocol.topics import TXN_TOPIC
from protocol.txn_log import VALUE_VERSION, TxnRecord, encode_txn_key, encode_txn_value
from server.clock import Clock
from storage.flusher import group_commit
from storage.log_manager import LogManager

log = logging.getLogger("kcoord.txn")

Done = Callable[[ErrorCode | None], None]
_BATCH_OVERHEAD = 61
_RECORD_OVERHEAD = 24


class _Write:
    __slots__ = ("done", "left", "finished", "durable")

    def __init__(self, done: Done, parts: int, durable: bool) -> None:
        self.done = done
        self.left = parts
        self.finished = False
        self.durable = durable

    def finish(self, code: ErrorCode | None) -> None:
        if not self.finished:
            self.finished = True
            self.done(code)


class _Staged:
    __slots__ = ("kvs", "size", "entries")

    def __init__(self) -> None:
        self.kvs: list[tuple[bytes, bytes | None]] = []
        self.size = _BATCH_OVERHEAD
        self.entries: list[tuple[_Write, list[TxnRecord]]] = []


class TxnLogWriter:
    def __init__(self, logs: LogManager, partition_of: Callable[[str], int],
                 replay: Callable[[TxnRecord], None], clock: Clock, timeout_s: float,
                 max_message_bytes: int) -> None:
        self.logs = logs
        self.partition_of = partition_of
        self.replay = replay
        self.clock = clock
        self.timeout_s = timeout_s
        self.max_message_bytes = max_message_bytes
        self.value_version = VALUE_VERSION  # 0 below transaction.version 1 (server/txn/service.py)
        self.pending = 0
        self._staged: dict[int, _Staged] = {}
        self._flush_scheduled = False

    def write(self, records: list[TxnRecord], done: Done, durable: bool = True) -> None:
        """Stage `records`; `done` runs exactly once: None once durable and replayed, or the
        code the client should see."""
        by_partition: dict[int, tuple[list[tuple[bytes, bytes | None]], list[TxnRecord], int]] = {}
        try:
            for r in records:
                p = self.partition_of(r.key.transactional_id)
                k, v = encode_txn_key(r.key), encode_txn_value(r.value, self.value_version)
                kvs, recs, size = by_partition.get(p, ([], [], 0))
                kvs.append((k, v))
                recs.append(r)
                by_partition[p] = (kvs, recs, size + len(k) + len(v or b"") + _RECORD_OVERHEAD)
            for p, (_, _, size) in by_partition.items():
                if size + _BATCH_OVERHEAD > self.max_message_bytes:
                    raise KafkaError(ErrorCode.RECORD_LIST_TOO_LARGE, f"{size} bytes of transaction records")
                if self.logs.get(TXN_TOPIC, p) is None:
                    raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"{TXN_TOPIC}-{p} has no log")
        except Exception as e:  # noqa: BLE001 - the writer is told, so its pending state is undone
            if not isinstance(e, KafkaError):
                log.error("Could not encode %d transaction records: %r", len(records), e)
            done(txn_append_error(error_code_of(e)))
            return
        self.pending += 1
        write = _Write(self._counted(done), len(by_partition), durable)
        for p, (kvs, recs, size) in by_partition.items():
            staged = self._staged.get(p)
            if staged is not None and staged.size + size > self.max_message_bytes:
                self._flush_partition(p)
                staged = None
            if staged is None:
                staged = self._staged[p] = _Staged()
            staged.kvs.extend(kvs)
            staged.size += size
            staged.entries.append((write, recs))
        if not self._flush_scheduled:
            self._flush_scheduled = True
            asyncio.get_running_loop().call_soon(self.flush)

    def _counted(self, done: Done) -> Done:
        def finish(code: ErrorCode | None) -> None:
            self.pending -= 1
            done(code)
        return finish

    def flush(self) -> None:
        self._flush_scheduled = False
        for p in list(self._staged):
            self._flush_partition(p)

    def _flush_partition(self, partition: int) -> None:
        staged = self._staged.pop(partition)
        plog = self.logs.get(TXN_TOPIC, partition)
        try:
            if plog is None:
                raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
            _, last = plog.append_records(staged.kvs, self.clock.now_ms())
        except Exception as e:  # noqa: BLE001 - every failure becomes the clients' error code
            log.error("Appending %d records to %s-%d failed: %r", len(staged.kvs), TXN_TOPIC, partition, e)
            self._fail(staged, txn_append_error(error_code_of(e)))
            return

        for write, recs in staged.entries:
            if not write.durable:
                for r in recs:
                    self.replay(r)
                write.left -= 1
                if write.left == 0:
                    write.finish(None)
        if all(not w.durable for w, _ in staged.entries):
            return

        def timed_out() -> None:
            log.warning("%d records to %s-%d not durable within request.timeout.ms", len(staged.kvs), TXN_TOPIC,
                        partition)
            self._fail(staged, txn_append_error(ErrorCode.REQUEST_TIMED_OUT))

        timer = asyncio.get_running_loop().call_later(self.timeout_s, timed_out)

        def on_durable(exc: BaseException | None) -> None:
            timer.cancel()
            if exc is not None:
                log.error("fdatasync of %s-%d failed: %r", TXN_TOPIC, partition, exc)
                self._fail(staged, txn_append_error(error_code_of(exc)))
                return
            for write, recs in staged.entries:
                if not write.durable:
                    continue  # replayed at the append
                # Replayed even if its writer already heard of a timeout: the log has them.
                for r in recs:
                    self.replay(r)
                write.left -= 1
                if write.left == 0:
                    write.finish(None)

        group_commit(plog).when_durable(last, on_durable)

    @staticmethod
    def _fail(staged: _Staged, code: ErrorCode) -> None:
        for write, _ in staged.entries:
            if write.durable:
                write.finish(code)
