"""A broker's replica manager, wired to its logs and data plane (what the composition root
calls once, in cluster mode: `broker.replicas = replica_manager_for(broker, alter_isr)`)."""
from __future__ import annotations

import shutil
from typing import TYPE_CHECKING

from kcoord.server.replication.replica_manager import AlterIsr, DataHooks, ReplicaManager, ReplicationSettings

if TYPE_CHECKING:
    from kcoord.server.broker import Broker
    from kcoord.storage.log import PartitionLog


def replica_manager_for(broker: Broker, alter_isr: AlterIsr,
                        settings: ReplicationSettings | None = None) -> ReplicaManager:
    def log_for(topic: str, partition: int) -> PartitionLog | None:
        t = broker.topics.get(topic)
        if t is None or broker.logs is None or partition >= t.partitions:
            return None
        return broker.logs.get(topic, partition)

    def woken(topic: str, partition: int) -> None:
        broker.parts.data_plane.get().appended(topic, partition)

    def stale(topic: str, partition: int) -> None:
        """The log changed under the producer and transaction state (truncated, or taken over
        as leader): both are rebuilt from the log at their next use."""
        dp = broker.parts.data_plane.get()
        dp.producers.forget_partition(topic, partition)
        dp.txns.forget_partition(topic, partition)

    def replicated(topic: str, partition: int, plog: PartitionLog, headers: list, base: int) -> None:
        """A follower's append: the idempotent producers' sequences follow the leader's, so a
        leader elected from this replica continues them."""
        state = broker.parts.data_plane.get().producers.loaded(topic, partition)
        if state is None:
            return  # loaded from the log when first needed
        for h in headers:
            if h.producer_id < 0:
                continue
            if h.is_control:
                state.apply_marker(h.producer_id, h.producer_epoch, h.max_timestamp)
            else:
                state.update(h, h.base_offset)
        broker.parts.data_plane.get().txns.forget_partition(topic, partition)

    def deleted(topic: str, partition: int) -> None:
        assert broker.logs is not None
        plog = broker.logs.remove(topic, partition)
        stale(topic, partition)
        if plog is not None:
            shutil.rmtree(plog.path, ignore_errors=True)

    hooks = DataHooks(log_for=log_for, woken=woken, truncated=stale, replicated=replicated, deleted=deleted)
    from kcoord.server.replication.hw_checkpoint import HighWatermarkCheckpoint

    return ReplicaManager(broker.config.node_id, broker.clock, alter_isr, hooks,
                          settings or ReplicationSettings.from_config(broker.config),
                          HighWatermarkCheckpoint(str(broker.log_dir)))
