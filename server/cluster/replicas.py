"""A cluster node's replica port (server/cluster/ports.py): LocalReplicas first (each hosted
partition's topic and log exist locally, deleted topics' logs go), then the ReplicaManager
(server/replication/: leader or follower of each, its fetchers, the ISR changes it proposes
through the node's `alter_isr`). Started with the node, stopped before the broker stops."""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from kcoord.server.cluster.local_replicas import LocalReplicas
from kcoord.server.cluster.partition_state import PartitionState


class ReplicatedReplicas:
    def __init__(self, local: LocalReplicas, manager: Any) -> None:
        self.local = local
        self.manager = manager  # kcoord.server.replication.replica_manager.ReplicaManager

    def apply(self, states: list[PartitionState], endpoints: Mapping[int, tuple[str, int]]) -> None:
        self.local.apply(states, endpoints)
        self.manager.apply(states, endpoints)

    def stop_replicas(self, topic_partitions: Iterable[tuple[str, int]], delete: bool) -> None:
        """No fetching, no serving first; a deleted topic's logs are then removed with the
        topic (LocalReplicas), not one by one."""
        topic_partitions = list(topic_partitions)
        self.manager.stop_replicas(topic_partitions, delete=False)
        self.local.stop_replicas(topic_partitions, delete)

    def start(self) -> None:
        self.manager.start()

    async def stop(self) -> None:
        await self.manager.stop()


def replicated_replicas(broker: Any, node: Any) -> ReplicatedReplicas:
    """The node's replicas: its logs, and a replica manager that proposes ISR changes through
    the node (the state znode, fenced by its version). `broker.replicas` is the manager the
    Produce and Fetch handlers consult."""
    from kcoord.server.replication.wiring import replica_manager_for

    manager = replica_manager_for(broker, node.alter_isr)
    broker.replicas = manager
    return ReplicatedReplicas(LocalReplicas(broker, node.cache), manager)
