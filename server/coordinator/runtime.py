"""Runs a coordinator shard's results against its topic (Kafka's CoordinatorRuntime): the
group coordinator over __consumer_offsets, the transaction coordinator over
__transaction_state.

A shard's method returns a CoordinatorResult (records, response). The runtime replays the
records into the shard at once, through the replay start-up loading uses (keeping what
reverts them: server/coordinator/changes.py), appends them to their partitions
(server/coordinator/writer.py: coalesced per loop turn, group committed fdatasync, bounded by
the shard's commit timeout), and only once they are durable lets the response go. Nothing is
acknowledged that is not durable; a write whose records never reach the log is answered
with the code the shard's coordinator uses in Kafka and leaves the shard's state exactly as
before it. server/coordinator/result.py states the rule.

It also loads partitions (the shard answers COORDINATOR_LOAD_IN_PROGRESS for a partition
between begin_loading and end_loading), and runs the shard's periodic tasks (offsets
retention; aborting timed-out transactions, expiring transactional ids).

On one node every partition is loaded at start-up (load_all). On a cluster node the runtime
is `managed()`: it holds no partition until the cluster layer (server/cluster/coordinators.py)
calls load(partition, leader_epoch) when the node becomes the partition's leader and
unload(partition, leader_epoch) when it stops leading it (Kafka's scheduleLoadOperation /
scheduleUnloadOperation). Unloading answers everything held for the partition NOT_COORDINATOR
(parked requests, appends in flight, and later requests); a load or unload older than the
epoch last seen for the partition is ignored.
"""
from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Coroutine, Iterable
from typing import Any, Generic, Protocol, TypeVar

from kcoord.protocol.errors import ErrorCode, KafkaError
from kcoord.server.clock import Clock
from kcoord.server.coordinator.changes import Change, InFlight
from kcoord.server.coordinator.result import CoordinatorResult
from kcoord.server.coordinator.writer import LogWriter, RecordFormat
from kcoord.server.deferred import Deferred
from kcoord.storage.log_manager import LogManager

log = logging.getLogger("kcoord.coordinator")

R = TypeVar("R")


class Shard(Protocol[R]):
    """The state a runtime runs: GroupCoordinator, TransactionCoordinator."""

    num_partitions: int

    def replay(self, record: R) -> None: ...

    def current_record(self, key: Any) -> R:
        """The record that, replayed, puts back what the shard holds now for `key` (a
        tombstone when nothing): how the runtime reverts a write that never reached the log."""

    def begin_loading(self, partition: int) -> Any: ...

    def end_loading(self, partition: int) -> Any: ...

    def unload(self, partition: int) -> Any:
        """Drop the partition's state; its keys answer NOT_COORDINATOR until begin_loading."""

    def is_loading(self, partition: int | None = None) -> bool: ...


def keep_latest(latest: dict[bytes, bytes | None], key: bytes, value: bytes | None) -> None:
    """Kafka's loaders: per key only the last value counts (a tombstone too). Re-inserting
    moves the key to the end, so iterating `latest` replays the survivors in the order of
    their last appearance, which keeps a group record and its offsets in log order; only
    superseded values are skipped, and they are never decoded."""
    if key in latest:
        del latest[key]
    latest[key] = value


# Loading yields to the event loop this often so that other partitions' state, and every
# other API, keep being served while a large partition loads.
_LOAD_YIELD_EVERY = 20_000


class _PendingResponse(Deferred[Any]):
    """The response to a request whose records are being appended. The writer calls it with
    the append's outcome; it completes with on_appended's response. One object per commit in
    flight instead of a Deferred and a closure: every commit makes one."""

    __slots__ = ("_on_applied", "_records", "_on_appended", "_change")

    def __init__(self, on_applied: Callable[[list[Any]], None] | None, records: list[Any],
                 on_appended: Callable[[ErrorCode | None], Any], change: Change[Any]) -> None:
        super().__init__()
        self._on_applied = on_applied
        self._records = records
        self._on_appended = on_appended
        self._change = change

    def __call__(self, code: ErrorCode | None) -> None:
        if code is None:
            self._change.settle()
            if self._on_applied is not None:
                self._on_applied(self._records)
        else:
            self._change.failed()
        response = self._on_appended(code)
        if isinstance(response, Deferred):
            response.add_callback(self.complete)
        else:
            self.complete(response)


class CoordinatorRuntime(Generic[R]):
    def __init__(
        self,
        build_shard: Callable[[CoordinatorRuntime[R]], Shard[R]],
        records: RecordFormat[R],
        logs: LogManager,
        clock: Clock,
        commit_timeout_ms: int,
        max_message_bytes: int,
        load_buffer_size: int = 5242880,
        on_append: Callable[[int], None] | None = None,
        on_applied: Callable[[list[R]], None] | None = None,
        load_hooks: Iterable[Callable[[int, Any], None]] = (),
        load_seconds: dict[int, float] | None = None,
    ) -> None:
        """build_shard(runtime): the shard, built with what it needs of its runtime (as
        Kafka's shard builder: the group coordinator gets write_background and end_of_turn).
        on_append(partition): after each append (fetch long polls on the topic).
        on_applied(records): once a request's records are durable and replayed (metrics).
        load_hooks(partition, log or None): after a partition's records are replayed and
        before its state is served (the transaction coordinator's open transactions).
        load_seconds: where each partition's load time goes (a metrics gauge)."""
        self.logs = logs
        self.clock = clock
        self.records = records
        self.topic = records.topic
        self.commit_timeout_s = commit_timeout_ms / 1000.0
        self.load_buffer_size = load_buffer_size
        self.on_applied = on_applied
        self.load_hooks = tuple(load_hooks)
        self.load_seconds = load_seconds
        self._tasks: list[asyncio.Task[None]] = []
        # managed (cluster) mode: partition -> (state, leader epoch); None on one node (all loaded)
        self._partitions: dict[int, tuple[str, int]] | None = None
        self._loads: dict[int, asyncio.Task[None]] = {}
        self.shard: Shard[R] = build_shard(self)
        self.in_flight: InFlight[R] = InFlight(self.shard.replay)
        self.writer: LogWriter[R] = LogWriter(logs, records, clock, self.commit_timeout_s, max_message_bytes,
                                              on_append)

    # ---------------------------------------------------------------- live writes
    #
    # Callback based on purpose: a commit costs no asyncio task (the writer coalesces the
    # records of a loop turn into one batch per partition).

    def _replay(self, result: CoordinatorResult[R]) -> Change[R]:
        """Replay the result's records now (unless the shard did as it made them) and keep
        what reverts them."""
        previous = result.previous
        records = result.records
        if previous is None:
            shard = self.shard
            if len(records) == 1:  # the usual write: one commit
                r = records[0]
                previous = [shard.current_record(r.key)]  # type: ignore[attr-defined]
                shard.replay(r)
            else:
                current, replay = shard.current_record, shard.replay
                previous = []
                for r in records:
                    previous.append(current(r.key))  # type: ignore[attr-defined]
                    replay(r)
        return self.in_flight.begin(records, previous)

    def committed(self, key: Any) -> Any:
        """The record last made durable for `key` while a write of it is in flight, else
        changes.CURRENT (what the shard holds is committed): what reads of committed state see."""
        return self.in_flight.committed(key)

    def submit(self, result: CoordinatorResult[R]) -> Any:
        """The response for `result`: now if it has no records, else a Deferred completed
        once its records are durable (or failed)."""
        if not result.records:
            return result.response
        assert result.on_appended is not None, "a result with records needs on_appended"
        change = self._replay(result)
        revert = change.revert
        if isinstance(result.response, Deferred):  # answered by on_appended
            self.writer.write(result.records, self._done(result, change), revert, result.durable)
            return result.response
        out = _PendingResponse(self.on_applied, result.records, result.on_appended, change)
        self.writer.write(result.records, out, revert, result.durable)
        return out

    def _done(self, result: CoordinatorResult[R], change: Change[R]) -> Callable[[ErrorCode | None], None]:
        on_appended, on_applied, records = result.on_appended, self.on_applied, result.records

        def done(code: ErrorCode | None) -> None:
            change.settle() if code is None else change.failed()
            if code is None and on_applied is not None:
                on_applied(records)
            if on_appended is not None:
                on_appended(code)

        return done

    def submit_deferred(self, result: CoordinatorResult[R]) -> Deferred[Any]:
        """submit, always as a Deferred."""
        answer = self.submit(result)
        if isinstance(answer, Deferred):
            return answer
        d: Deferred[Any] = Deferred()
        d.complete(answer)
        return d

    def write_background(self, result: CoordinatorResult[R]) -> None:
        """Append a result nobody waits on. The shard calls this from inside its own calls:
        the records are replayed now, as any write's, and the append starts on the next loop
        turn, never re-entering the shard's call."""
        if not result.records:
            return
        change = self._replay(result)
        asyncio.get_running_loop().call_soon(self.writer.write, result.records, self._done(result, change),
                                             change.revert, result.durable)

    @staticmethod
    def end_of_turn(fn: Callable[[], None]) -> None:
        """Run `fn` as the loop's next callback: work a shard defers to the end of the loop
        turn (one target assignment for every consumer-group heartbeat of the turn)."""
        asyncio.get_running_loop().call_soon(fn)

    def write(self, records: list[R]) -> asyncio.Future[ErrorCode | None]:
        """Replay now and append: resolves to None once durable, or to the mapped code of a
        failure (reverted)."""
        fut: asyncio.Future[ErrorCode | None] = asyncio.get_running_loop().create_future()
        result: CoordinatorResult[R] = CoordinatorResult(records=records,
                                                         on_appended=lambda code: fut.done() or fut.set_result(code))
        change = self._replay(result)
        self.writer.write(records, self._done(result, change), change.revert)
        return fut

    async def append(self, records: list[R]) -> None:
        """write, raising KafkaError on failure (reverted)."""
        code = await self.write(records)
        if code is not None:
            raise KafkaError(code)

    # ---------------------------------------------------------------- loading

    def begin_loading_all(self) -> None:
        for p in range(self.shard.num_partitions):
            self.shard.begin_loading(p)

    async def load_all(self) -> None:
        """Replay every partition in order, like Kafka's loaders (managed: nothing, the
        cluster layer loads what this node leads)."""
        if self._partitions is not None:
            return
        self.begin_loading_all()
        partitions = self.shard.num_partitions
        total_records = 0
        started = time.monotonic()
        for p in range(partitions):
            total_records += await self._load_partition(p)
        log.info("Loaded %d records of %d %s partitions in %d ms", total_records, partitions, self.topic,
                 (time.monotonic() - started) * 1000)

    # ---------------------------------------------------------------- immigration, emigration

    def managed(self) -> None:
        """From now on this node holds only the partitions it is told to load: every other
        partition's keys answer NOT_COORDINATOR (a cluster node, before it leads anything)."""
        if self._partitions is not None:
            return
        self._partitions = {}
        for p in range(self.shard.num_partitions):
            self.shard.unload(p)

    def replicate(self, acks: Any) -> None:
        """A cluster node's appends wait for the in-sync replicas as `acks` says
        (server/coordinator/acks.py ReplicaAcks); never called on one node."""
        self.writer.acks = acks

    def state(self, partition: int) -> tuple[str, int]:
        """("active" | "loading" | "unloaded", the last leader epoch seen; -1 for none)."""
        if self._partitions is None:  # one node: every partition, loaded at start-up
            return ("loading" if self.shard.is_loading(partition) else "active"), -1
        return self._partitions.get(partition, ("unloaded", -1))

    def load(self, partition: int, leader_epoch: int) -> asyncio.Task[None] | None:
        """This node leads `partition` from `leader_epoch`: replay its log (its keys answer
        COORDINATOR_LOAD_IN_PROGRESS meanwhile). A loaded or loading partition only takes
        the newer epoch; an older one is ignored. Returns the load, or None."""
        self.managed()
        assert self._partitions is not None
        state, epoch = self._partitions.get(partition, ("unloaded", -1))
        if leader_epoch < epoch or (leader_epoch == epoch and state != "unloaded"):
            log.info("Ignored loading %s-%d at leader epoch %d: epoch %d is %s", self.topic, partition,
                     leader_epoch, epoch, state)
            return None
        if state != "unloaded":
            self._partitions[partition] = (state, leader_epoch)
            return None
        self._partitions[partition] = ("loading", leader_epoch)
        self.shard.begin_loading(partition)
        log.info("Loading %s-%d as its leader at epoch %d", self.topic, partition, leader_epoch)
        task = asyncio.ensure_future(self._immigrate(partition))
        self._loads[partition] = task
        return task

    async def _immigrate(self, partition: int) -> None:
        try:
            await self._load_partition(partition)
        except asyncio.CancelledError:
            raise
        except Exception:  # noqa: BLE001 - the partition stays unloaded: NOT_COORDINATOR, clients look again
            log.exception("Loading %s-%d failed", self.topic, partition)
            self._drop(partition)
            return
        finally:
            if self._loads.get(partition) is asyncio.current_task():
                del self._loads[partition]
        assert self._partitions is not None
        state, epoch = self._partitions.get(partition, ("unloaded", -1))
        if state == "loading":
            self._partitions[partition] = ("active", epoch)

    def unload(self, partition: int, leader_epoch: int) -> bool:
        """This node no longer leads `partition` (`leader_epoch`: the epoch of the change, or
        -1 when unknown): a load in progress stops, appends in flight fail NOT_COORDINATOR
        (by the shard's mapping), parked requests are answered NOT_COORDINATOR, and so is
        every later request for its keys. Ignored when the partition was loaded at a newer
        epoch. Whether it was unloaded."""
        self.managed()
        assert self._partitions is not None
        state, epoch = self._partitions.get(partition, ("unloaded", -1))
        if leader_epoch >= 0 and leader_epoch <= epoch and state != "unloaded":
            log.info("Ignored unloading %s-%d at leader epoch %d: loaded at epoch %d", self.topic, partition,
                     leader_epoch, epoch)
            return False
        self._partitions[partition] = ("unloaded", max(epoch, leader_epoch))
        if state == "unloaded":
            return False
        self._drop(partition)
        log.info("Unloaded %s-%d (leader epoch %d)", self.topic, partition, leader_epoch)
        return True

    def _drop(self, partition: int) -> None:
        assert self._partitions is not None
        task = self._loads.pop(partition, None)
        if task is not None:
            task.cancel()  # raises at its next await: it replays nothing more
        state, epoch = self._partitions.get(partition, ("unloaded", -1))
        self._partitions[partition] = ("unloaded", epoch)
        self.writer.fence(partition, ErrorCode.NOT_LEADER_OR_FOLLOWER)
        self.shard.unload(partition)

    def reload(self, partition: int, hold_s: float = 0.0) -> Coroutine[Any, Any, None]:
        """Unload a partition now, and load it again from its log after `hold_s` seconds when
        the returned coroutine runs, as a coordinator that takes a partition over does: its
        state answers COORDINATOR_LOAD_IN_PROGRESS meanwhile, requests parked on it
        NOT_COORDINATOR, and what only memory held (members joining, sessions' deadlines)
        starts afresh."""
        self.shard.begin_loading(partition)
        return self._load_after(partition, hold_s)

    async def _load_after(self, partition: int, hold_s: float) -> None:
        if hold_s > 0:
            await asyncio.sleep(hold_s)
        await self._load_partition(partition)

    async def _load_partition(self, partition: int) -> int:
        started = reported = time.monotonic()
        topic = self.topic
        plog = self.logs.existing(topic, partition)  # a partition never written has no log
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
                        log.info("Loading %s-%d: %d records read, offset %d of %d", topic,
                                 partition, n, _offset, plog.log_end_offset)
                    await asyncio.sleep(0)
            decode, replay, errors = self.records.decode, self.shard.replay, self.records.decode_errors
            for key, value in latest.items():
                try:
                    record = decode(key, value)
                except errors as e:
                    log.warning("Skipping undecodable record in %s-%d: %s", topic, partition, e)
                    skipped += 1
                    continue
                if record is not None:
                    replay(record)
                replayed += 1
                if replayed % _LOAD_YIELD_EVERY == 0:
                    await asyncio.sleep(0)
        for hook in self.load_hooks:
            hook(partition, plog)
        self.shard.end_loading(partition)
        if self.load_seconds is not None:
            self.load_seconds[partition] = time.monotonic() - started
        if n:
            log.info("Loaded %s-%d in %d ms: %d records, %d latest per key replayed, %d skipped",
                     topic, partition, (time.monotonic() - started) * 1000, n, replayed, skipped)
        return n

    # ---------------------------------------------------------------- periodic tasks

    def every(self, interval_ms: int, task: Callable[[], Awaitable[Any] | Any]) -> None:
        """Run `task` every interval_ms until stop() (a failure is logged and retried at the
        next interval)."""
        self._tasks.append(asyncio.ensure_future(self._every(interval_ms, task)))

    @staticmethod
    async def _every(interval_ms: int, task: Callable[[], Awaitable[Any] | Any]) -> None:
        while True:
            await asyncio.sleep(interval_ms / 1000.0)
            try:
                out = task()
                if isinstance(out, Awaitable):
                    await out
            except Exception:  # noqa: BLE001 - retried at the next interval
                log.exception("Coordinator task %s failed", getattr(task, "__name__", task))

    def stop_tasks(self) -> None:
        for t in self._tasks:
            t.cancel()
        self._tasks.clear()

    # ---------------------------------------------------------------- shutdown

    async def stop(self) -> None:
        """Stop the periodic tasks; let writes in flight finish (bounded by the commit timeout)."""
        self.stop_tasks()
        deadline = time.monotonic() + self.commit_timeout_s
        while self.writer.pending and time.monotonic() < deadline:
            await asyncio.sleep(0.005)
