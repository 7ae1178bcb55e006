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
from kcoord.server.data_plane import partition_log
from kcoord.server.deferred import Deferred
from kcoord.server.txn.result import MarkerJob
from kcoord.server.txn.state import TxnState
from kcoord.storage.flusher import group_commit
from kcoord.storage.txn_batches import build_marker

if TYPE_CHECKING:
    from kcoord.server.broker import Broker
    from kcoord.server.txn.service import TxnService

log = logging.getLogger("kcoord.txn")

RETRY_BACKOFF_S = 1.0
COORDINATOR_EPOCH = 0


async def wait(d: Deferred[Any]) -> Any:
    """Await a Deferred on the running loop."""
    if d.done:
        return d.result()
    fut = asyncio.get_running_loop().create_future()
    d.add_callback(lambda v: fut.done() or fut.set_result(v))
    return await fut


class MarkerWriter:
    def __init__(self, broker: Broker, service: TxnService) -> None:
        self.broker = broker
        self.service = service
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
        coordinator = self.service.coordinator
        while True:
            result = coordinator.complete(job)
            if not result.records:
                meta = coordinator.get(job.transactional_id)
                if meta is None or meta.state in (TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT):
                    break  # completed meanwhile (a timed-out write that still landed)
                log.error("Cannot complete %s: %r", job.transactional_id, meta)
                break
            code = await wait(self.service.runtime.submit_deferred(result))
            if code is None:
                self.service.counters.completed["commit" if job.commit else "abort"] += 1
                crash_point("txn:completed")
                break
            log.error("Writing the Complete state of %s failed: %s; retrying", job.transactional_id, code.name)
            done.complete(None)
            await asyncio.sleep(RETRY_BACKOFF_S)
        done.complete(None)

    async def write_markers(self, job: MarkerJob) -> None:
        """Append every marker of `job`; return once all are durable (raises on failure)."""
        broker = self.broker
        dp = broker.data_plane
        now = broker.clock.now_ms()
        waits: list[Deferred[ErrorCode | None]] = []
        for topic_name, p in sorted(job.partitions):
            if topic_name == OFFSETS_TOPIC:
                waits.append(self.service.group_log.write_marker(p, job.producer_id, job.producer_epoch, job.commit))
                continue
            topic = broker.topics.get(topic_name)
            plog = partition_log(broker, topic, p) if topic is not None else None
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
