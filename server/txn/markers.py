"""Writing the markers of a prepared transaction, then its Complete state (Kafka's
TransactionMarkerChannelManager and the WriteTxnMarkers handler, in one process).

For each partition of the transaction a COMMIT / ABORT control batch is appended:
- to a data partition: its transaction state closes the producer's transaction (LSO moves,
  an abort is indexed), the producer's epoch there becomes the marker's (a fencing bump
  included), and long polls watching it are retried;
- to a __consumer_offsets partition: through server/txn/group_log.py, which turns the
  producer's pending offsets into committed ones (or drops them).
A partition whose topic is gone is skipped, as Kafka does. Once every marker is durable,
CompleteCommit / CompleteAbort is written. A failure at any step is retried every
RETRY_BACKOFF_S until it succeeds (the decision is durable; Kafka retries forever too); the
Deferred handed back completes when the transaction is complete, or at the first failure.
"""
from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

from kcoord.protocol.errors import ErrorCode, KafkaError, error_code_of
from kcoord.protocol.topics import OFFSETS_TOPIC
from kcoord.server.crash_points import crash_point
from kcoord.server.deferred import Deferred, wait
from kcoord.server.txn.result import MarkerJob
from kcoord.server.txn.state import TxnState
from kcoord.storage.flusher import group_commit
from kcoord.storage.txn_batches import build_marker

if TYPE_CHECKING:
    from kcoord.server.clock import Clock
    from kcoord.server.coordinator.runtime import CoordinatorRuntime
    from kcoord.server.data_plane import DataPlane
    from kcoord.server.topics import TopicRegistry
    from kcoord.server.txn.coordinator import TransactionCoordinator
    from kcoord.server.txn.group_log import GroupTxnLog
    from kcoord.server.txn.metrics import TxnCounters
    from kcoord.storage.log_manager import LogManager

log = logging.getLogger("kcoord.txn")

RETRY_BACKOFF_S = 1.0
COORDINATOR_EPOCH = 0


class MarkerWriter:
    def __init__(self, clock: Clock, topics: TopicRegistry, logs: LogManager, data_plane: DataPlane,
                 group_log: GroupTxnLog, coordinator: TransactionCoordinator,
                 runtime: CoordinatorRuntime[Any], counters: TxnCounters) -> None:
        self.clock = clock
        self.topics = topics
        self.logs = logs
        self.data_plane = data_plane
        self.group_log = group_log
        self.coordinator = coordinator
        self.runtime = runtime
        self.counters = counters
        self.in_flight: set[asyncio.Task[None]] = set()

    def __call__(self, job: MarkerJob) -> Deferred[None]:
        done: Deferred[None] = Deferred()
        task = asyncio.get_running_loop().create_task(self._run(job, done))
        self.in_flight.add(task)
        task.add_done_callback(self.in_flight.discard)
        return done

    async def _run(self, job: MarkerJob, done: Deferred[None]) -> None:
        what = "COMMIT" if job.commit else "ABORT"
        crash_point("txn:prepared")  # the decision is durable, no marker written yet
        attempt = 0
        while True:
            attempt += 1
            try:
                await self.write_markers(job)
                crash_point("txn:markers-written")  # every marker durable, Complete not written
                break
            except Exception as e:  # noqa: BLE001 - retried: the decision is durable
                log.error("Writing the %s markers of %s failed (attempt %d), retrying: %r", what,
                          job.transactional_id, attempt, e)
                done.complete(None)
                await asyncio.sleep(RETRY_BACKOFF_S)
        coordinator = self.coordinator
        while True:
            result = coordinator.complete(job)
            if not result.records:
                meta = coordinator.get(job.transactional_id)
                if meta is None or meta.state in (TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT):
                    break  # completed meanwhile (a timed-out write that still landed)
                log.error("Cannot complete %s: %r", job.transactional_id, meta)
                break
            code = await wait(self.runtime.submit_deferred(result))
            if code is None:
                self.counters.completed["commit" if job.commit else "abort"] += 1
                crash_point("txn:completed")
                break
            log.error("Writing the Complete state of %s failed: %s; retrying", job.transactional_id, code.name)
            done.complete(None)
            await asyncio.sleep(RETRY_BACKOFF_S)
        done.complete(None)

    async def write_markers(self, job: MarkerJob) -> None:
        """Append every marker of `job`; return once all are durable (raises on failure)."""
        dp = self.data_plane
        now = self.clock.now_ms()
        waits: list[Deferred[ErrorCode | None]] = []
        for topic_name, p in sorted(job.partitions):
            if topic_name == OFFSETS_TOPIC:
                waits.append(self.group_log.write_marker(p, job.producer_id, job.producer_epoch, job.commit))
                continue
            topic = self.topics.get(topic_name)
            plog = self.logs.get(topic_name, p) if topic is not None and 0 <= p < topic.partitions else None
            if plog is None:
                log.info("Not writing a marker of %s to %s-%d: the partition no longer exists",
                         job.transactional_id, topic_name, p)
                continue
            txns = dp.txns.get(topic_name, p, plog)
            producers = dp.producers.get(topic_name, p, plog, now)
            data = build_marker(job.producer_id, job.producer_epoch, job.commit, COORDINATOR_EPOCH, now)
            base, last, _ = plog.append_batches(data)
            txns.on_marker(plog, job.producer_id, job.commit, base)
            producers.apply_marker(job.producer_id, job.producer_epoch, now)
            dp.appended(topic_name, p)
            d: Deferred[ErrorCode | None] = Deferred()
            group_commit(plog).when_durable(
                last, lambda exc, d=d: d.complete(None if exc is None else error_code_of(exc)))
            waits.append(d)
        for d in waits:
            code = await wait(d)
            if code is not None:
                raise KafkaError(code, "a marker is not durable")
