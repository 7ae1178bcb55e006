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
from kcoord.server.group.txn_offsets import PendingTxnOffsets
from kcoord.server.txn.coordinator import TransactionCoordinator
from kcoord.server.txn.group_log import GroupTxnLog
from kcoord.server.txn.markers import MarkerWriter
from kcoord.server.txn.metadata import TxnConfig
from kcoord.server.txn.metrics import TxnCounters
from kcoord.server.txn.shard import TxnRecords

if TYPE_CHECKING:
    from kcoord.server.broker import Broker

log = logging.getLogger("kcoord.txn")


class TxnService:
    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        cfg = broker.config
        assert broker.logs is not None
        self.pending = PendingTxnOffsets()
        broker.coordinator.offset_manager.txn_offsets = self.pending
        # its on_partition_loaded runs as the group runtime's load hook (server/broker.py)
        self.group_log = GroupTxnLog(broker, self.pending)
        ids = broker.data_plane.producer_ids
        self.coordinator = TransactionCoordinator(
            TxnConfig(cfg["transaction.max.timeout.ms"], cfg["transactional.id.expiration.ms"],
                      cfg["kcoord.transaction.version"]),
            broker.clock, self.num_partitions, ids.generate, ids.ensure_above)
        self.coordinator.answer_end_when_prepared = cfg["kcoord.transaction.end.answer.on.prepare"]
        self.counters = TxnCounters()
        coordinator = self.coordinator
        # Kafka writes TransactionLogValue v1 (flexible, tagged fields) from transaction.version 1
        records = TxnRecords(coordinator.partition_of, 1 if cfg["kcoord.transaction.version"] >= 1 else 0)
        self.runtime = CoordinatorRuntime(lambda _: coordinator, records, broker.logs, broker.clock,
                                          cfg["request.timeout.ms"], cfg["message.max.bytes"],
                                          cfg["transaction.state.log.load.buffer.size"])
        self.markers = MarkerWriter(broker, self)
        self.coordinator.set_marker_writer(self.markers)
        self.loaded = False  # __transaction_state's records are replayed (or there are none)
        if broker.topics.get(TXN_TOPIC) is not None:
            self.coordinator.active = True
            self.runtime.begin_loading_all()
            self._needs_load = True
        else:
            self._needs_load = False

    @property
    def num_partitions(self) -> int:
        """Kafka uses the existing topic's partition count over the setting."""
        t = self.broker.topics.get(TXN_TOPIC)
        return t.partitions if t is not None else self.broker.config["transaction.state.log.num.partitions"]

    def ensure_topic(self) -> None:
        """Create __transaction_state if it does not exist yet (nothing to load then)."""
        if self.broker.topics.get(TXN_TOPIC) is not None:
            return
        cfg = self.broker.config
        self.broker.create_topic(TXN_TOPIC, cfg["transaction.state.log.num.partitions"], {
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
        cfg = self.broker.config
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
        await self.runtime.stop()
