"""Writing the markers of a prepared transaction, then its Complete state (Kafka's
TransactionMarkerChannelManager and the WriteTxnMarkers handler).

On one node every marker is written here. On a cluster node each partition's marker goes to
its leader (server/cluster/txn_markers.py: WriteTxnMarkers to other nodes, grouped per node,
re-routed after a leader change; the partitions led here are written directly), and
`write_here` is what the WriteTxnMarkers handler (server/handlers/write_txn_markers.py) calls
on the node that leads them. A coordinator that stops leading the transactional id's
__transaction_state partition stops retrying: its next leader loads the prepared transaction
and writes the markers again.

For each partition of the transaction a COMMIT / ABORT control batch is appended:
- to a data partition: its transaction state closes the producer's transaction (LSO moves,
  an abort is indexed), the producer's epoch there becomes the marker's (a fencing bump
  included), and long polls watching it are retried;
- to a __consumer_offsets partition: through server/txn/group_log.py, which turns the
  producer's pending offsets into committed ones (or drops them).
A partition whose topic is gone is skipped, as Kafka does. Once every marker is written
(server/txn/leader_append.py: durable, and in every ISR member on a cluster),
CompleteCommit / CompleteAbort is written. What a failed marker leads to is Kafka's
TransactionMarkerRequestCompletionHandler's table (server/txn/marker_outcomes.py): a retriable
error (a leader moving, too few replicas, a node that cannot be reached) is retried every
RETRY_BACKOFF_S, routed again; TRANSACTION_COORDINATOR_FENCED or INVALID_PRODUCER_EPOCH from a
partition, or this node no longer owning the transaction (its __transaction_state partition
unloaded, loading again, or reloaded at a new coordinator epoch), drops every pending marker of
the transaction (its next coordinator completes it); an error Kafka treats as fatal stops the
writer with an error logged. A failed write of the Complete state is retried while this node
owns the transaction. The Deferred handed back completes when the transaction is complete, or
at the first failure.
"""
from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from kcoord.protocol.errors import ErrorCode, KafkaError, error_code_of
from kcoord.protocol.topics import OFFSETS_TOPIC
from kcoord.server.crash_points import crash_point
from kcoord.server.deferred import Deferred, wait
from kcoord.server.txn.leader_append import append_as_leader, when_written
from kcoord.server.txn.marker_outcomes import Decision, Outcome, decide
from kcoord.server.txn.result import MarkerJob
from kcoord.server.txn.state import TxnState
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
TopicPartition = tuple[str, int]


class MarkersNotWritten(KafkaError):
    """Some markers of a job were not written: `left` holds their partitions (retried)."""

    def __init__(self, code: ErrorCode, left: dict[TopicPartition, ErrorCode]) -> None:
        super().__init__(code, f"markers not written to {sorted(left)}: "
                               f"{sorted({c.name for c in left.values()})}")
        self.left = left


class MarkerWriter:
    def __init__(self, clock: Clock, topics: TopicRegistry, logs: LogManager, data_plane: DataPlane,
                 group_log: GroupTxnLog, coordinator: TransactionCoordinator,
                 runtime: CoordinatorRuntime[Any], counters: TxnCounters,
                 cluster: Callable[[], Any] = lambda: None, timeout_ms: int = 30000) -> None:
        """cluster: the node's ClusterNode on a cluster node, else None; timeout_ms: how long a
        marker waits for the ISR. A marker to a data partition is appended with acks -1 through
        the transaction runtime's ReplicaAcks (its writer's `acks`, set on a cluster node only)."""
        self.clock = clock
        self.topics = topics
        self.logs = logs
        self.data_plane = data_plane
        self.group_log = group_log
        self.coordinator = coordinator
        self.runtime = runtime
        self.counters = counters
        self.cluster = cluster
        self.timeout_ms = timeout_ms
        self.in_flight: set[asyncio.Task[None]] = set()
        self._channel: Any = None  # server/cluster/txn_markers.py, built at the first cluster job

    def __call__(self, job: MarkerJob) -> Deferred[None]:
        done: Deferred[None] = Deferred()
        partition = self.coordinator.partition_of(job.transactional_id)
        _, epoch = self.runtime.state(partition)
        job = dataclasses.replace(job, coordinator_epoch=max(epoch, 0))
        # the id's state the job belongs to: a reload of the partition replaces it
        meta = self.coordinator.get(job.transactional_id)
        task = asyncio.get_running_loop().create_task(self._run(job, done, partition, meta))
        self.in_flight.add(task)
        task.add_done_callback(self.in_flight.discard)
        return done

    def _still_coordinator(self, job: MarkerJob, partition: int, meta: Any) -> bool:
        """Whether this node still holds the id's partition without having unloaded it since
        the job began (a new leader epoch that keeps it here does not count; a reload replays
        the id into a new state, and starts its own job for a prepared transaction). Always
        on one node."""
        return self.runtime.state(partition)[0] != "unloaded" and self.coordinator.get(job.transactional_id) is meta

    async def _run(self, job: MarkerJob, done: Deferred[None], partition: int, meta: Any) -> None:
        what = "COMMIT" if job.commit else "ABORT"
        crash_point("txn:prepared")  # the decision is durable, no marker written yet
        attempt = 0
        left = job
        while True:
            attempt += 1
            errors: dict[TopicPartition, ErrorCode] | None = {}
            try:
                await self.write_markers(left)
            except MarkersNotWritten as e:
                errors = e.left
            except Exception as e:  # noqa: BLE001 - not an answer of the partitions: retried
                log.error("Writing the %s markers of %s failed (attempt %d), retrying: %r", what,
                          job.transactional_id, attempt, e)
                errors = None
            if errors is not None:
                decision = decide(self._still_coordinator(job, partition, meta), errors)
                if decision.outcome is Outcome.WRITTEN:
                    break
                if decision.outcome is not Outcome.RETRY:
                    self._stopped(job, what, attempt, decision)
                    done.complete(None)
                    return
                left = dataclasses.replace(left, partitions=frozenset(decision.retry))
                log.warning("Writing the %s markers of %s failed (attempt %d), retrying: %s", what,
                            job.transactional_id, attempt, sorted((f"{t}-{p}", c.name) for (t, p), c
                                                                  in decision.retry.items()))
            done.complete(None)
            await asyncio.sleep(RETRY_BACKOFF_S)
            if not self._still_coordinator(job, partition, meta):
                self._stopped(job, what, attempt, Decision(Outcome.DROP, {}))
                done.complete(None)
                return
        crash_point("txn:markers-written")  # every marker durable, Complete not written
        coordinator = self.coordinator
        while self._still_coordinator(job, partition, meta):  # else its next coordinator completes it
            result = coordinator.complete(job)
            if not result.records:
                meta = coordinator.get(job.transactional_id)
                if meta is None or meta.state in (TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT):
                    break  # completed meanwhile (a timed-out write that still landed), or unloaded
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

    def _stopped(self, job: MarkerJob, what: str, attempt: int, decision: Decision) -> None:
        """The writer gives the transaction up (a DROP or FATAL decision): say why."""
        if decision.outcome is Outcome.FATAL:
            (t, p), code = decision.cause  # type: ignore[misc]
            log.error("Writing the %s markers of %s failed with %s from %s-%d (attempt %d), an error Kafka "
                      "treats as fatal: not retried; the transaction stays prepared until its partition is "
                      "loaded again", what, job.transactional_id, code.name, t, p, attempt)
            self.counters.markers_failed += 1
            return
        self.counters.markers_dropped += 1
        if decision.cause is None:
            log.info("No longer the coordinator of %s at coordinator epoch %d: dropping its pending %s markers "
                     "(attempt %d), its next coordinator writes them", job.transactional_id,
                     job.coordinator_epoch, what, attempt)
        else:
            (t, p), code = decision.cause
            log.info("Dropping the pending %s markers of %s (attempt %d): %s-%d answered %s at coordinator "
                     "epoch %d, a newer coordinator owns the transaction", what, job.transactional_id, attempt,
                     t, p, code.name, job.coordinator_epoch)

    async def write_markers(self, job: MarkerJob) -> None:
        """Write every marker of `job`; return once all are written. Raises MarkersNotWritten
        naming the partitions whose marker was not (a partition that no longer exists counts
        as written: skipped, as Kafka skips it; on a cluster, one the metadata no longer has)."""
        cluster = self.cluster()
        if cluster is None:
            pending = self.write_here(job.producer_id, job.producer_epoch, job.commit, sorted(job.partitions),
                                      job.coordinator_epoch)
            errors = {tp: await wait(d) for tp, d in pending.items()}
        else:
            if self._channel is None:
                from kcoord.server.cluster.txn_markers import MarkerChannel

                self._channel = MarkerChannel.of_node(cluster, self.write_here)
            errors = await self._channel.write(job)
        left: dict[TopicPartition, ErrorCode] = {}
        for tp, code in errors.items():
            if code is None or code == ErrorCode.NONE:
                continue
            # one node: the partition is gone; on a cluster the channel skips a partition the
            # metadata no longer has, and a node that does not know one yet is asked again
            if code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION and cluster is None:
                log.info("Not writing a marker of %s to %s-%d: the partition no longer exists",
                         job.transactional_id, *tp)
                continue
            left[tp] = code
        if left:
            raise MarkersNotWritten(next(iter(left.values())), left)

    def write_here(self, producer_id: int, producer_epoch: int, commit: bool, partitions: Iterable[TopicPartition],
                   coordinator_epoch: int) -> dict[TopicPartition, Deferred[ErrorCode | None]]:
        """Append a marker to each partition, as its leader (Kafka's WriteTxnMarkers handler):
        each Deferred completes with None once the marker is written, or with its error
        (NOT_LEADER_OR_FOLLOWER where this node does not lead the partition,
        UNKNOWN_TOPIC_OR_PARTITION where it does not exist)."""
        out: dict[TopicPartition, Deferred[ErrorCode | None]] = {}
        for tp in partitions:
            topic_name, p = tp
            if topic_name == OFFSETS_TOPIC:
                out[tp] = self.group_log.write_marker(p, producer_id, producer_epoch, commit, coordinator_epoch)
                continue
            d: Deferred[ErrorCode | None] = Deferred()
            out[tp] = d
            try:
                self._append_marker(topic_name, p, producer_id, producer_epoch, commit, coordinator_epoch, d)
            except Exception as e:  # noqa: BLE001 - the partition's error code, the sender retries
                d.complete(error_code_of(e))
        return out

    def _append_marker(self, topic_name: str, p: int, producer_id: int, producer_epoch: int, commit: bool,
                       coordinator_epoch: int, done: Deferred[ErrorCode | None]) -> None:
        from kcoord.server.data_plane import not_leader

        cluster = self.cluster()
        if cluster is not None and not_leader(cluster, topic_name, p):
            raise KafkaError(ErrorCode.NOT_LEADER_OR_FOLLOWER, f"not the leader of {topic_name}-{p}")
        topic = self.topics.get(topic_name)
        plog = self.logs.get(topic_name, p) if topic is not None and 0 <= p < topic.partitions else None
        if plog is None:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"{topic_name}-{p} does not exist")
        dp = self.data_plane
        now = self.clock.now_ms()
        txns = dp.txns.get(topic_name, p, plog)
        producers = dp.producers.get(topic_name, p, plog, now)
        producers.check_marker(producer_id, coordinator_epoch)  # TRANSACTION_COORDINATOR_FENCED
        data = build_marker(producer_id, producer_epoch, commit, coordinator_epoch, now)
        acks = self.runtime.writer.acks  # -1, as the transaction coordinator's own appends
        base, last = append_as_leader(plog, data, acks)
        txns.on_marker(plog, producer_id, commit, base)
        producers.apply_marker(producer_id, producer_epoch, now, coordinator_epoch)
        dp.appended(topic_name, p)
        when_written(plog, last, acks, self.timeout_ms, done.complete)

    def close(self) -> None:
        """Close the channel's connections to other nodes (the server stops)."""
        if self._channel is not None:
            self._channel.close()
