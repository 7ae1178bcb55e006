"""A cluster node's replica port (server/cluster/ports.py): LocalReplicas first (each hosted
partition's topic and log exist locally, deleted topics' logs go), then the ReplicaManager
(server/replication/: leader or follower of each, its fetchers, the ISR changes it proposes
through the node's `alter_isr`). Started with the node, stopped before the broker stops."""
from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any

from kcoord.server.cluster.local_replicas import LocalReplicas
from kcoord.server.cluster.partition_state import PartitionState


class ReplicatedReplicas:
    def __init__(self, local: LocalReplicas, manager: Any) -> None:
        self.local = local
        self.manager = manager  # kcoord.server.replication.replica_manager.ReplicaManager
        self.applied: dict[tuple[str, int], PartitionState] = {}  # what the manager acted on last

    def apply(self, states: list[PartitionState], endpoints: Mapping[int, tuple[str, int]]) -> None:
        """The node passes every hosted partition's state at each change of any of them; the
        manager gets the ones that changed (a state it already holds, applied again, would
        make it a leader or follower again: producer state reloaded, fetchers restarted).
        Endpoints are passed every time."""
        self.local.apply(states, endpoints)
        changed = [s for s in states if self.applied.get((s.topic, s.partition)) != s and not self._holds(s)]
        errors = self.manager.apply(changed, endpoints) or {}
        for s in changed:
            key = (s.topic, s.partition)
            if key in errors:
                self.applied.pop(key, None)  # tried again at the next change
            else:
                self.applied[key] = s

    def _holds(self, s: PartitionState) -> bool:
        """The manager already acts on this state (an ISR change it proposed, accepted)."""
        r = self.manager.get(s.topic, s.partition)
        return r is not None and not r.stopped and r.state == s

    def stop_replicas(self, topic_partitions: Iterable[tuple[str, int]], delete: bool) -> None:
        """No fetching, no serving first; a deleted topic's logs are then removed with the
        topic (LocalReplicas), not one by one."""
        topic_partitions = list(topic_partitions)
        for key in topic_partitions:
            self.applied.pop(key, None)
        self.manager.stop_replicas(topic_partitions, delete=False)
        checkpoint = getattr(self.manager, "hw_checkpoint", None)
        if delete and checkpoint is not None:  # their logs go: so do their checkpointed high watermarks
            for key in topic_partitions:
                checkpoint.forget(key)
        self.local.stop_replicas(topic_partitions, delete)

    def start(self) -> None:
        self.manager.start()

    async def stop(self) -> None:
        await self.manager.stop()


def replicated_replicas(node: Any, local: LocalReplicas,
                        manager_for: Callable[[Callable[..., Awaitable[PartitionState | None]]], Any],
                        ) -> ReplicatedReplicas:
    """The node's replicas: its logs (`local`), and the replica manager `manager_for` builds
    (server/replication/wiring.py, from the composition root), which proposes ISR changes
    through the node (the state znode, fenced by its version)."""

    async def alter_isr(state: PartitionState, new_isr: tuple[int, ...]) -> PartitionState | None:
        """A broker joins the ISR only while registered (Kafka's ISR eligibility): a node in
        controlled shutdown still fetches until it stops, and adding it back would have the
        controller remove it again in a new leader epoch, over and over."""
        if any(b not in state.isr and b not in node.cache.live for b in new_isr):
            return None
        return await node.alter_isr(state, new_isr)

    return ReplicatedReplicas(local, manager_for(alter_isr))
