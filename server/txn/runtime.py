"""Runs transaction-coordinator results against __transaction_state.

A coordinator method returns (records, response). The runtime appends the records durably
(server/txn/log_writer.py), replays them into the coordinator — the replay start-up loading
uses — and only then lets the response go. It also loads every partition at start-up (ids
answer COORDINATOR_LOAD_IN_PROGRESS meanwhile; prepared transactions get their markers once
their partition is loaded) and runs the two periodic tasks: aborting transactions past their
timeout (transaction.abort.timed.out.transaction.cleanup.interval.ms) and expiring idle
transactional ids (transaction.remove.expired.transaction.cleanup.interval.ms).
"""
from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from protocol.errors import ErrorCode
from protocol.topics import TXN_TOPIC
from protocol.txn_log import TxnCodecError, decode_txn_record
from server.clock import Clock
from server.deferred import Deferred
from server.txn.coordinator import TransactionCoordinator
from server.txn.log_writer import TxnLogWriter
from server.txn.metrics import TxnCounters
from server.txn.result import TxnResult
from storage.log_manager import LogManager

log = logging.getLogger("kcoord.txn")

_LOAD_YIELD_EVERY = 20_000


class TxnRuntime:
    def __init__(self, coordinator: TransactionCoordinator, logs: LogManager, clock: Clock,
                 request_timeout_ms: int, max_message_bytes: int, load_buffer_size: int = 5242880,
                 counters: TxnCounters | None = None) -> None:
        self.coordinator = coordinator
        self.logs = logs
        self.clock = clock
        self.load_buffer_size = load_buffer_size
        self.request_timeout_s = request_timeout_ms / 1000.0
        self.writer = TxnLogWriter(logs, coordinator.partition_of, coordinator.replay, clock,
                                   self.request_timeout_s, max_message_bytes)
        self._tasks: list[asyncio.Task[None]] = []
        self.counters = counters or TxnCounters()

    # ---------------------------------------------------------------- live writes

    def submit(self, result: TxnResult) -> Any:
        """The response of `result`: now if it has no records, else a Deferred completed once
        they are durable and replayed (or failed)."""
        if not result.records:
            return result.response
        assert result.on_appended is not None, "a result with records needs on_appended"
        on_appended = result.on_appended
        out: Deferred[Any] = Deferred()

        def done(code: ErrorCode | None) -> None:
            response = on_appended(code)
            if isinstance(response, Deferred):
                response.add_callback(out.complete)
            else:
                out.complete(response)

        self.writer.write(result.records, done, durable=result.durable)
        return out

    def submit_deferred(self, result: TxnResult) -> Deferred[Any]:
        answer = self.submit(result)
        if isinstance(answer, Deferred):
            return answer
        d: Deferred[Any] = Deferred()
        d.complete(answer)
        return d

    # ---------------------------------------------------------------- loading

    def begin_loading_all(self, partitions: int) -> None:
        for p in range(partitions):
            self.coordinator.begin_loading(p)

    async def load_all(self, partitions: int) -> None:
        total = 0
        started = time.monotonic()
        for p in range(partitions):
            total += await self._load_partition(p)
        log.info("Loaded %d records of %d %s partitions in %d ms", total, partitions, TXN_TOPIC,
                 (time.monotonic() - started) * 1000)

    async def _load_partition(self, partition: int) -> int:
        plog = self.logs.existing(TXN_TOPIC, partition)  # a declared partition holds nothing yet
        n = 0
        if plog is not None:
            latest: dict[bytes, bytes | None] = {}
            for _offset, key, value in plog.iter_records(buffer_size=self.load_buffer_size):
                n += 1
                if key is None:
                    log.warning("Skipping a record without a key in %s-%d", TXN_TOPIC, partition)
                    continue
                latest.pop(key, None)  # Kafka's loader: the last value of each key wins
                latest[key] = value
                if n % _LOAD_YIELD_EVERY == 0:
                    await asyncio.sleep(0)
            for key, value in latest.items():
                try:
                    record = decode_txn_record(key, value)
                except TxnCodecError as e:
                    log.warning("Skipping an undecodable record in %s-%d: %s", TXN_TOPIC, partition, e)
                    continue
                if record is None:
                    log.warning("Skipping a record with an unknown key version in %s-%d", TXN_TOPIC, partition)
                    continue
                self.coordinator.replay(record)
        self.coordinator.end_loading(partition)
        return n

    # ---------------------------------------------------------------- periodic tasks

    def start_periodic(self, abort_interval_ms: int, expire_interval_ms: int) -> None:
        self._tasks.append(asyncio.ensure_future(self._every(abort_interval_ms, self.abort_timed_out)))
        self._tasks.append(asyncio.ensure_future(self._every(expire_interval_ms, self.expire_transactional_ids)))

    @staticmethod
    async def _every(interval_ms: int, fn) -> None:  # noqa: ANN001
        while True:
            await asyncio.sleep(interval_ms / 1000.0)
            try:
                fn()
            except Exception:  # noqa: BLE001 - retried at the next interval
                log.exception("Transaction coordinator task %s failed", fn.__name__)

    def abort_timed_out(self) -> int:
        results = self.coordinator.abort_timed_out()
        for r in results:
            self.submit(r)
        self.counters.timed_out += len(results)
        return len(results)

    def expire_transactional_ids(self) -> int:
        result = self.coordinator.expire_transactional_ids()
        self.submit(result)
        return len(result.records)

    async def stop(self) -> None:
        for t in self._tasks:
            t.cancel()
        deadline = time.monotonic() + self.request_timeout_s
        while self.writer.pending and time.monotonic() < deadline:
            await asyncio.sleep(0.005)
