"""The transaction coordinator beside the group coordinator: how the broker builds, starts and
stops it, and the topic it lives in.

`__transaction_state` is created the first time a client looks for a transaction coordinator
(FindCoordinator key type 1, or InitProducerId with a transactional id), as Kafka creates it,
with transaction.state.log.num.partitions partitions, cleanup.policy=compact and
transaction.state.log.segment.bytes. When it exists at start-up its partitions answer
COORDINATOR_LOAD_IN_PROGRESS until they are loaded, which happens once __consumer_offsets is
loaded (a prepared transaction's markers go to both).
"""
from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from kcoord.protocol.topics import TXN_TOPIC
from kcoord.server.coordinator.runtime import CoordinatorRuntime
from kcoord.server.txn.coordinator import TransactionCoordinator
from kcoord.server.txn.markers import MarkerWriter
from kcoord.server.txn.metadata import TxnConfig
from kcoord.server.txn.metrics import TxnCounters
from kcoord.server.txn.shard import TxnRecords

if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

    from kcoord.server.clock import Clock
    from kcoord.server.config import Config
    from kcoord.server.data_plane import DataPlane
    from kcoord.server.topics import Topic, TopicRegistry
    from kcoord.server.txn.group_log import GroupTxnLog
    from kcoord.storage.log_manager import LogManager

log = logging.getLogger("kcoord.txn")


class TxnService:
    """Built by the composition root (server/node.py) with the group coordinator's side of
    transactions (`group_log`: offsets and markers in __consumer_offsets), the data plane (its
    producer ids) and `create_topic` for __transaction_state."""

    def __init__(self, config: Config, clock: Clock, logs: LogManager, topics: TopicRegistry,
                 create_topic: Callable[..., Topic], data_plane: DataPlane, group_log: GroupTxnLog,
                 cluster: Callable[[], Any] = lambda: None) -> None:
        cfg = self.config = config
        self.topics = topics
        self.cluster = cluster  # the node's ClusterNode on a cluster node: its controller creates the topic
        self._create_topic = create_topic
        self.group_log = group_log  # its on_partition_loaded runs as the group runtime's load hook
        ids = data_plane.producer_ids
        txn_config = TxnConfig(cfg["transaction.max.timeout.ms"], cfg["transactional.id.expiration.ms"],
                               cfg["kcoord.transaction.version"])

        def build_shard(runtime: CoordinatorRuntime) -> TransactionCoordinator:
            return TransactionCoordinator(txn_config, clock, self.num_partitions, ids.generate, runtime.committed,
                                          ids.ensure_above)

        # Kafka writes TransactionLogValue v1 (flexible, tagged fields) from transaction.version 1
        records = TxnRecords(lambda tid: self.coordinator.partition_of(tid),
                             1 if cfg["kcoord.transaction.version"] >= 1 else 0)
        self.runtime = CoordinatorRuntime(build_shard, records, logs, clock,
                                          cfg["request.timeout.ms"], cfg["message.max.bytes"],
                                          cfg["transaction.state.log.load.buffer.size"],
                                          # followers' fetches (and kcat) parked on the partition wake
                                          on_append=lambda p: data_plane.appended(TXN_TOPIC, p))
        coordinator: TransactionCoordinator = self.runtime.shard  # type: ignore[assignment]
        self.coordinator = coordinator
        coordinator.answer_end_when_prepared = cfg["kcoord.transaction.end.answer.on.prepare"]
        self.counters = TxnCounters()
        self.markers = MarkerWriter(clock, topics, logs, data_plane, group_log, coordinator, self.runtime,
                                    self.counters, cluster, cfg["request.timeout.ms"])
        self.coordinator.set_marker_writer(self.markers)
        self.loaded = False  # __transaction_state's records are replayed (or there are none)
        if topics.get(TXN_TOPIC) is not None:
            self.coordinator.active = True
            self.runtime.begin_loading_all()
            self._needs_load = True
        else:
            self._needs_load = False

    @property
    def num_partitions(self) -> int:
        """Kafka uses the existing topic's partition count over the setting."""
        t = self.topics.get(TXN_TOPIC)
        return t.partitions if t is not None else self.config["transaction.state.log.num.partitions"]

    def managed_runtime(self) -> CoordinatorRuntime:
        """The runtime as a cluster node's coordinators follow it (server/cluster/coordinators.py,
        which makes it managed: only the partitions this node leads are loaded); the partition
        count is the cluster's __transaction_state's once this node hosts it."""
        self.coordinator.num_partitions = self.num_partitions
        return self.runtime

    def ensure_topic(self) -> None:
        """Create __transaction_state if it does not exist yet (nothing to load then). On a
        cluster node the controller creates it (server/cluster/builder.py)."""
        if self.topics.get(TXN_TOPIC) is not None or self.cluster() is not None:
            return
        cfg = self.config
        self._create_topic(TXN_TOPIC, cfg["transaction.state.log.num.partitions"], {
            "cleanup.policy": "compact",
            "compression.type": "uncompressed",
            "segment.bytes": str(cfg["transaction.state.log.segment.bytes"]),
        }, internal=True)
        self.coordinator.num_partitions = self.num_partitions
        self.coordinator.active = True

    async def run(self, group_loading: asyncio.Future[None]) -> None:
        """Background: load (after __consumer_offsets), then the periodic tasks."""
        await group_loading
        if self._needs_load:
            await self.runtime.load_all()
        self.loaded = True
        cfg = self.config
        self.runtime.every(cfg["transaction.abort.timed.out.transaction.cleanup.interval.ms"], self.abort_timed_out)
        self.runtime.every(cfg["transaction.remove.expired.transaction.cleanup.interval.ms"],
                           self.expire_transactional_ids)

    def abort_timed_out(self) -> int:
        """Abort the transactions open longer than their timeout (a periodic task)."""
        results = self.coordinator.abort_timed_out()
        for r in results:
            self.runtime.submit(r)
        self.counters.timed_out += len(results)
        return len(results)

    def expire_transactional_ids(self) -> int:
        """Forget ids idle longer than transactional.id.expiration.ms (a periodic task)."""
        result = self.coordinator.expire_transactional_ids()
        self.runtime.submit(result)
        return len(result.records)

    async def stop(self) -> None:
        for t in list(self.markers.in_flight):
            t.cancel()
        self.markers.close()
        await self.runtime.stop()
