"""Runs group-coordinator results against __consumer_offsets.

A coordinator handler returns (records, response). This runtime appends the records to the
group's __consumer_offsets partition, waits until they are on disk (fdatasync shared by
concurrent writers: group commit, bounded by offsets.commit.timeout.ms), replays them into
the coordinator — the same replay start-up loading uses — and only then lets the response go.
Nothing is acknowledged that is not durable; a failed write is answered with the code Kafka's
coordinator uses and changes no state.

It also loads every partition at start-up (groups answer COORDINATOR_LOAD_IN_PROGRESS until
their partition is loaded) and runs the offsets retention task.
"""
from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Coroutine
from typing import Any

from protocol.coordinator_codec import CodecError, decode_record
from protocol.coordinator_records import CoordinatorRecord
from protocol.errors import ErrorCode, KafkaError
from server.clock import Clock
from server.coordinator_writes import CoordinatorWriter
from server.deferred import Deferred
from server.group.coordinator import GroupCoordinator
from server.group.result import CoordinatorResult
from server.metrics import Metrics
from storage.log_manager import OFFSETS_TOPIC, LogManager

log = logging.getLogger("kcoord.coordinator")


def keep_latest(latest: dict[bytes, bytes | None], key: bytes, value: bytes | None) -> None:
    """Kafka's loadGroupsAndOffsets: per key only the last value counts (a tombstone too).
    Re-inserting moves the key to the end, so iterating `latest` replays the survivors in
    the order of their last appearance, which keeps a group record and its offsets in log
    order; only superseded values are skipped, and they are never decoded."""
    if key in latest:
        del latest[key]
    latest[key] = value


# Loading yields to the event loop this often so that other partitions' groups, and every
# other API, keep being served while a large partition loads.
_LOAD_YIELD_EVERY = 20_000


class _PendingResponse(Deferred[Any]):
    """The response to a request whose records are being appended. The writer calls it with
    the append's outcome; it replays (on_appended) and completes with the response. One
    object per commit in flight instead of a Deferred and a closure: every commit makes one."""

    __slots__ = ("_metrics", "_records", "_on_appended")

    def __init__(self, metrics: Metrics, records: list[CoordinatorRecord],
                 on_appended: Callable[[ErrorCode | None], Any]) -> None:
        super().__init__()
        self._metrics = metrics
        self._records = records
        self._on_appended = on_appended

    def __call__(self, code: ErrorCode | None) -> None:
        if code is None:
            self._metrics.records_applied(self._records)
        response = self._on_appended(code)
        if isinstance(response, Deferred):
            response.add_callback(self.complete)
        else:
            self.complete(response)


class CoordinatorRuntime:
    def __init__(
        self,
        coordinator: GroupCoordinator,
        logs: LogManager,
        clock: Clock,
        num_partitions: int,
        commit_timeout_ms: int,
        max_message_bytes: int,
        load_buffer_size: int = 5242880,
        on_append: Callable[[int], None] | None = None,
        metrics: Metrics | None = None,
    ) -> None:
        self.coordinator = coordinator
        self.logs = logs
        self.clock = clock
        self.num_partitions = num_partitions
        self.commit_timeout_s = commit_timeout_ms / 1000.0
        self.load_buffer_size = load_buffer_size
        self.metrics = metrics or Metrics()
        self.writer = CoordinatorWriter(logs, num_partitions, coordinator.replay, clock,
                                        commit_timeout_ms / 1000.0, max_message_bytes, on_append)
        self._retention_task: asyncio.Task[None] | None = None
        # (partition, its log) -> None, run after a partition's records are replayed and
        # before its groups are served (the transaction coordinator adds open transactions)
        self.load_hooks: list[Callable[[int, Any], None]] = []
        # Writes no request asked for (a group emptied by a session timeout) come through here.
        coordinator.set_background_writer(self.write_background)
        # work the coordinator defers to the end of the loop turn (one target assignment for
        # every consumer-group heartbeat of the turn) runs as the loop's next callback
        coordinator.set_end_of_turn(lambda fn: asyncio.get_running_loop().call_soon(fn))

    # ---------------------------------------------------------------- live writes
    #
    # Callback based on purpose: a commit costs no asyncio task (server/coordinator_writes.py
    # coalesces the records of a loop turn into one batch per partition).

    def submit(self, result: CoordinatorResult) -> Any:
        """The response for `result`: now if it has no records, else a Deferred completed
        once its records are durable and replayed (or failed)."""
        if not result.records:
            return result.response
        assert result.on_appended is not None, "a result with records needs on_appended"
        if isinstance(result.response, Deferred):  # answered by the replay itself (or on_appended)
            on_appended, records, metrics = result.on_appended, result.records, self.metrics

            def done(code: ErrorCode | None) -> None:
                if code is None:
                    metrics.records_applied(records)
                on_appended(code)

            self.writer.write(records, done, not result.applied, result.undo)
            return result.response
        out = _PendingResponse(self.metrics, result.records, result.on_appended)
        self.writer.write(result.records, out, not result.applied, result.undo)
        return out

    def write_background(self, result: CoordinatorResult) -> None:
        """Append a result nobody waits on. The coordinator calls this from inside its own
        calls, so the write starts on the next loop turn, never re-entering it."""
        on_appended = result.on_appended

        def done(code: ErrorCode | None) -> None:
            if code is None:
                self.metrics.records_applied(result.records)
            if on_appended is not None:
                on_appended(code)

        asyncio.get_running_loop().call_soon(self.writer.write, result.records, done, not result.applied,
                                             result.undo)

    async def append(self, records: list[CoordinatorRecord]) -> None:
        """Append, wait until durable and replayed; raises KafkaError on failure."""
        fut: asyncio.Future[ErrorCode | None] = asyncio.get_running_loop().create_future()
        self.writer.write(records, lambda code: fut.done() or fut.set_result(code))
        code = await fut
        if code is not None:
            raise KafkaError(code)

    # ---------------------------------------------------------------- start-up loading

    async def load_all(self) -> None:
        """Replay every partition in order, like Kafka's loadGroupsAndOffsets."""
        for p in range(self.num_partitions):
            self.coordinator.begin_loading(p)
        total_records = 0
        started = time.monotonic()
        for p in range(self.num_partitions):
            total_records += await self._load_partition(p)
        log.info("Loaded %d records of %d %s partitions in %d ms", total_records,
                 self.num_partitions, OFFSETS_TOPIC, (time.monotonic() - started) * 1000)

    def reload(self, partition: int, hold_s: float = 0.0) -> Coroutine[Any, Any, None]:
        """Unload a partition now, and load it again from its log after `hold_s` seconds when
        the returned coroutine runs, as a coordinator that takes a partition over does: its
        groups answer COORDINATOR_LOAD_IN_PROGRESS meanwhile, requests parked on them
        NOT_COORDINATOR, and what only memory held (members joining, sessions' deadlines)
        starts afresh."""
        self.coordinator.begin_loading(partition)
        return self._load_after(partition, hold_s)

    async def _load_after(self, partition: int, hold_s: float) -> None:
        if hold_s > 0:
            await asyncio.sleep(hold_s)
        await self._load_partition(partition)

    async def _load_partition(self, partition: int) -> int:
        started = reported = time.monotonic()
        plog = self.logs.existing(OFFSETS_TOPIC, partition)  # a partition never written has no log
        n = skipped = replayed = 0
        if plog is not None:
            latest: dict[bytes, bytes | None] = {}
            for _offset, key, value in plog.iter_records(buffer_size=self.load_buffer_size):
                n += 1
                if key is None:
                    skipped += 1
                    continue
                keep_latest(latest, key, value)
                if n % _LOAD_YIELD_EVERY == 0:
                    if time.monotonic() - reported >= 2.0:  # a long load shows it is moving
                        reported = time.monotonic()
                        log.info("Loading %s-%d: %d records read, offset %d of %d", OFFSETS_TOPIC,
                                 partition, n, _offset, plog.log_end_offset)
                    await asyncio.sleep(0)
            for key, value in latest.items():
                try:
                    record = decode_record(key, value)
                except CodecError as e:
                    log.warning("Skipping undecodable record in %s-%d: %s", OFFSETS_TOPIC, partition, e)
                    skipped += 1
                    continue
                if record is not None:
                    self.coordinator.replay(record)
                replayed += 1
                if replayed % _LOAD_YIELD_EVERY == 0:
                    await asyncio.sleep(0)
        for hook in self.load_hooks:
            hook(partition, plog)
        self.coordinator.end_loading(partition)
        self.metrics.partition_load_seconds[partition] = time.monotonic() - started
        if n:
            log.info("Loaded %s-%d in %d ms: %d records, %d latest per key replayed, %d skipped",
                     OFFSETS_TOPIC, partition, (time.monotonic() - started) * 1000, n, replayed, skipped)
        return n

    # ---------------------------------------------------------------- retention

    def start_retention(self, interval_ms: int) -> None:
        self._retention_task = asyncio.ensure_future(self._retention_loop(interval_ms))

    def stop_retention(self) -> None:
        if self._retention_task is not None:
            self._retention_task.cancel()
            self._retention_task = None

    async def _retention_loop(self, interval_ms: int) -> None:
        while True:
            await asyncio.sleep(interval_ms / 1000.0)
            await self.run_retention()

    async def run_retention(self) -> None:
        result = self.coordinator.expire_offsets()
        if result.records:
            try:
                await self.append(result.records)
            except Exception as e:  # noqa: BLE001 - retried at the next interval
                log.error("Writing expired-offset tombstones failed: %r", e)
            else:
                self.metrics.records_applied(result.records, expired=True)

    # ---------------------------------------------------------------- shutdown

    async def stop(self) -> None:
        """Let writes in flight finish (bounded by offsets.commit.timeout.ms)."""
        self.stop_retention()
        deadline = time.monotonic() + self.commit_timeout_s
        while self.writer.pending and time.monotonic() < deadline:
            await asyncio.sleep(0.005)
