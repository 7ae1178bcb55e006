"""Coordinators follow partition leadership (Kafka's GroupCoordinator onElection /
onResignation): the node that leads a __consumer_offsets partition loads its groups and
offsets into the group coordinator's runtime; the node that stops leading it unloads them
(server/coordinator/runtime.py `load` / `unload`, fenced by the partition's leader epoch).

It sits in front of the node's replica manager (ReplicaManagerPort, server/cluster/ports.py):
every `apply` the cluster layer makes reaches the replica manager first (the partition's log
exists before it is loaded), then the coordinator. From the moment the node joins a cluster the
runtime is managed: no partition is served until this node is told it leads it.

Fencing: while the node's ZooKeeper connection is suspended or its session lost (when
ClusterNode.leads answers False for every partition) it unloads every partition it holds: the
controller may be electing other leaders. Back within the same session it loads again the
partitions it still leads; in a new session the node re-reads every state and tells its
replica manager, and so this, again.

Appends: the group coordinator's records are answered only once acknowledged as
offsets.commit.required.acks says (server/coordinator/acks.py, given by `group_acks`)."""
from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from kazoo.protocol.states import KazooState

from kcoord.protocol.topics import OFFSETS_TOPIC
from kcoord.server.cluster.partition_state import PartitionState
from kcoord.server.cluster.ports import ReplicaManagerPort

log = logging.getLogger("kcoord.cluster.coordinators")


class CoordinatorsFollowLeadership:
    """A ReplicaManagerPort that hands every call to `replicas`, then loads the group
    coordinator's partitions this node leads and unloads those it no longer leads."""

    def __init__(self, replicas: ReplicaManagerPort, group_runtime: Callable[[], Any], node: Any,
                 acks: Any = None) -> None:
        """group_runtime: the group coordinator's runtime (built at its first use; the node's
        current parts', server/node.py); node: the ClusterNode (broker_id, leads, zk.on_state),
        built before this; acks: what its appends wait for (server/coordinator/acks.py
        ReplicaAcks, `group_acks` below), None when the partitions are not replicated."""
        self.replicas = replicas
        self._group_runtime = group_runtime
        self.node = node
        self.broker_id = node.broker_id
        self._states: dict[int, PartitionState] = {}  # the last state told of each offsets partition
        self.runtime.managed()  # requests before the first apply: NOT_COORDINATOR, never this node alone
        if acks is not None:
            self.runtime.replicate(acks)
        node.zk.on_state(self._on_session_state)  # after the node's own listener: its fencing is set

    @property
    def runtime(self) -> Any:
        return self._group_runtime()

    def apply(self, states: list[PartitionState], endpoints: Mapping[int, tuple[str, int]]) -> None:
        self.replicas.apply(states, endpoints)
        self._follow([s for s in states if s.topic == OFFSETS_TOPIC])

    def _follow(self, states: list[PartitionState]) -> None:
        runtime = self.runtime
        for s in states:
            if s.partition >= runtime.shard.num_partitions:
                continue
            self._states[s.partition] = s
            if s.leader == self.broker_id:
                runtime.load(s.partition, s.leader_epoch)
            else:
                runtime.unload(s.partition, s.leader_epoch)

    async def stop(self) -> None:
        """The wrapped replicas' own stop (the replica manager's fetchers), when they have one."""
        stop = getattr(self.replicas, "stop", None)
        if stop is not None:
            await stop()

    def stop_replicas(self, topic_partitions: Iterable[tuple[str, int]], delete: bool) -> None:
        topic_partitions = list(topic_partitions)
        self.replicas.stop_replicas(topic_partitions, delete)
        runtime = self.runtime
        for topic, p in topic_partitions:
            if topic == OFFSETS_TOPIC and p < runtime.shard.num_partitions:
                self._states.pop(p, None)
                runtime.unload(p, -1)  # no longer hosted here: whatever the epoch

    def _on_session_state(self, state: str) -> None:
        runtime = self.runtime
        if state in (KazooState.SUSPENDED, KazooState.LOST):
            fenced = [p for p in range(runtime.shard.num_partitions) if runtime.state(p)[0] != "unloaded"]
            for p in fenced:
                runtime.unload(p, -1)
            if fenced:
                log.warning("ZooKeeper connection %s: unloaded %d __consumer_offsets partitions", state.lower(),
                            len(fenced))
        elif state == KazooState.CONNECTED and self.node.leads_anything():
            self._follow(list(self._states.values()))  # the same session: what it still leads


def group_acks(config: Any, broker: Any, replicas: Any) -> Any:
    """What the group coordinator's appends wait for: offsets.commit.required.acks through the
    node's replica manager (`replicas.manager`, server/cluster/replicas.py), min.insync.replicas
    of __consumer_offsets as its topic configs say. None without a replica manager."""
    manager = getattr(replicas, "manager", None)
    if manager is None:
        return None
    from kcoord.server.coordinator.acks import ReplicaAcks

    def min_isr(topic: str) -> int:
        t = broker.topics.get(topic)
        return 1 if t is None else broker.configs.topic_values(t)["min.insync.replicas"]

    return ReplicaAcks(manager, config["offsets.commit.required.acks"], min_isr)
