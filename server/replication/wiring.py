"""A node's replica manager, wired to its logs and data plane: what the composition root
(server/node.py, `replica_manager_for`) builds once on a cluster node, given the node's current
topic registry, logs and data plane as accessors."""
from __future__ import annotations

import shutil
from collections.abc import Callable
from typing import TYPE_CHECKING

from kcoord.server.replication.replica_manager import AlterIsr, DataHooks, ReplicaManager, ReplicationSettings

if TYPE_CHECKING:
    from kcoord.server.clock import Clock
    from kcoord.server.data_plane import DataPlane
    from kcoord.server.topics import TopicRegistry
    from kcoord.storage.log import PartitionLog
    from kcoord.storage.log_manager import LogManager


def replica_manager(node_id: int, clock: Clock, alter_isr: AlterIsr, settings: ReplicationSettings,
                    topics: Callable[[], TopicRegistry], logs: Callable[[], LogManager],
                    data_plane: Callable[[], DataPlane], log_dir: str | None = None) -> ReplicaManager:
    """`log_dir`: where replication-offset-checkpoint is kept (hw_checkpoint.py); None: none."""
    def log_for(topic: str, partition: int) -> PartitionLog | None:
        t = topics().get(topic)
        if t is None or partition >= t.partitions:
            return None
        return logs().get(topic, partition)

    def woken(topic: str, partition: int) -> None:
        data_plane().appended(topic, partition)

    def stale(topic: str, partition: int) -> None:
        """The log changed under the producer and transaction state (truncated, or taken over
        as leader): both are rebuilt from the log at their next use."""
        dp = data_plane()
        dp.producers.forget_partition(topic, partition)
        dp.txns.forget_partition(topic, partition)

    def replicated(topic: str, partition: int, plog: PartitionLog, headers: list, base: int) -> None:
        """A follower's append: the idempotent producers' sequences follow the leader's, so a
        leader elected from this replica continues them."""
        state = data_plane().producers.loaded(topic, partition)
        if state is None:
            return  # loaded from the log when first needed
        for h in headers:
            if h.producer_id < 0:
                continue
            if h.is_control:
                state.apply_marker(h.producer_id, h.producer_epoch, h.max_timestamp)
            else:
                state.update(h, h.base_offset)
        data_plane().txns.forget_partition(topic, partition)

    def deleted(topic: str, partition: int) -> None:
        plog = logs().remove(topic, partition)
        stale(topic, partition)
        if plog is not None:
            shutil.rmtree(plog.path, ignore_errors=True)

    hooks = DataHooks(log_for=log_for, woken=woken, truncated=stale, replicated=replicated, deleted=deleted)
    from kcoord.server.replication.hw_checkpoint import HighWatermarkCheckpoint

    checkpoint = HighWatermarkCheckpoint(log_dir) if log_dir is not None else None
    return ReplicaManager(node_id, clock, alter_isr, hooks, settings, checkpoint)
