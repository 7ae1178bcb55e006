"""What the cluster layer needs of the rest of the node, and what it offers it (the contract
with the replication layer, server/replication/)."""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Protocol

from kcoord.server.cluster.partition_state import PartitionState


class ReplicaManagerPort(Protocol):
    """The node's replicas. The cluster layer calls `apply` whenever the state of a partition
    this node hosts changes (it leads it, follows it, a new epoch or ISR): every state of
    those partitions, and the endpoints (on the inter-broker listener) of every live broker.
    `stop_replicas` when the node stops hosting partitions (reassigned away, or the topic
    deleted: `delete` then removes their logs)."""

    def apply(self, states: list[PartitionState], endpoints: Mapping[int, tuple[str, int]]) -> None: ...

    def stop_replicas(self, topic_partitions: Iterable[tuple[str, int]], delete: bool) -> None: ...


class IsrWriter(Protocol):
    """What the replica manager calls to change a partition's ISR as its leader (Kafka
    ZooKeeper mode's leader-side ISR update): the state znode is written only if it is still
    at `state.zk_version`; None when fenced (a newer leader epoch, or a controller changed it)."""

    async def alter_isr(self, state: PartitionState, new_isr: tuple[int, ...]) -> PartitionState | None: ...
