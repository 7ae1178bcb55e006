"""Coordinators follow partition leadership (Kafka's GroupCoordinator and
TransactionCoordinator onElection / onResignation): the node that leads a __consumer_offsets
partition loads its groups and offsets into the group coordinator's runtime, the node that
leads a __transaction_state partition loads its transactional ids into the transaction
coordinator's; the node that stops leading a partition unloads it
(server/coordinator/runtime.py `load` / `unload`, fenced by the partition's leader epoch).
Each coordinator is one (topic, runtime) pair of the list this is built with.

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
offsets.commit.required.acks says, the transaction coordinator's once every in-sync replica has
them (server/coordinator/acks.py, given by `coordinator_acks`)."""
from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from kazoo.protocol.states import KazooState

from kcoord.server.cluster.partition_state import PartitionState
from kcoord.server.cluster.ports import ReplicaManagerPort

log = logging.getLogger("kcoord.cluster.coordinators")


class CoordinatorsFollowLeadership:
    """A ReplicaManagerPort that hands every call to `replicas`, then loads the coordinators'
    partitions this node leads and unloads those it no longer leads."""

    def __init__(self, replicas: ReplicaManagerPort, runtimes: Sequence[tuple[str, Callable[[], Any]]],
                 node: Any, acks: Mapping[str, Any] | None = None,
                 after_apply: Callable[[], None] | None = None) -> None:
        """runtimes: (topic, the runtime of the coordinator living in it) pairs, each runtime
        given by a function (the node's current parts', server/node.py: built at its first
        use); node: the ClusterNode (broker_id, leads, zk.on_state), built before this;
        acks: by topic, what its coordinator's appends wait for (server/coordinator/acks.py
        ReplicaAcks, `coordinator_acks` below); none when the partitions are not replicated;
        after_apply(): after every change told (what follows data partitions' leadership: the
        share partitions, server/share/cluster.py)."""
        self.replicas = replicas
        self.after_apply = after_apply
        self._runtimes = dict(runtimes)
        self.node = node
        self.broker_id = node.broker_id
        # the last state told of each coordinator partition, by topic
        self._states: dict[str, dict[int, PartitionState]] = {topic: {} for topic in self._runtimes}
        for topic in self._runtimes:
            # requests before the first apply: NOT_COORDINATOR, never this node alone
            runtime = self.runtime_of(topic)
            runtime.managed()
            if acks and acks.get(topic) is not None:
                runtime.replicate(acks[topic])
        node.zk.on_state(self._on_session_state)  # after the node's own listener: its fencing is set

    def runtime_of(self, topic: str) -> Any:
        return self._runtimes[topic]()

    def apply(self, states: list[PartitionState], endpoints: Mapping[int, tuple[str, int]]) -> None:
        self.replicas.apply(states, endpoints)
        for topic in self._runtimes:
            mine = [s for s in states if s.topic == topic]
            if mine:
                self._follow(topic, mine)
        if self.after_apply is not None:
            self.after_apply()

    def _follow(self, topic: str, states: list[PartitionState], again: bool = False) -> None:
        """`again`: states told before, to act on anew (the same session back)."""
        runtime = self.runtime_of(topic)
        told = self._states[topic]
        for s in states:
            if s.partition >= runtime.shard.num_partitions or (not again and told.get(s.partition) == s):
                continue  # the node tells every hosted state at each change: only changes count
            told[s.partition] = s
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
        for topic, p in topic_partitions:
            if topic not in self._runtimes:
                continue
            runtime = self.runtime_of(topic)
            if p < runtime.shard.num_partitions:
                self._states[topic].pop(p, None)
                runtime.unload(p, -1)  # no longer hosted here: whatever the epoch

    def _on_session_state(self, state: str) -> None:
        if state in (KazooState.SUSPENDED, KazooState.LOST):
            for topic in self._runtimes:
                runtime = self.runtime_of(topic)
                fenced = [p for p in range(runtime.shard.num_partitions) if runtime.state(p)[0] != "unloaded"]
                for p in fenced:
                    runtime.unload(p, -1)
                if fenced:
                    log.warning("ZooKeeper connection %s: unloaded %d %s partitions", state.lower(), len(fenced),
                                topic)
        elif state == KazooState.CONNECTED and self.node.leads_anything():
            for topic, told in self._states.items():  # the same session: what it still leads
                if told:
                    self._follow(topic, list(told.values()), again=True)


def coordinator_acks(required_acks: int, replicas: Any, min_isr: Callable[[str], int]) -> Any:
    """What a coordinator's appends wait for: `required_acks` (offsets.commit.required.acks for
    the group coordinator; -1 for the transaction coordinator, as Kafka's TransactionStateManager
    appends) through the node's replica manager (`replicas.manager`, server/cluster/replicas.py),
    `min_isr(topic)` the topic's effective min.insync.replicas. None without a replica manager."""
    manager = getattr(replicas, "manager", None)
    if manager is None:
        return None
    from kcoord.server.coordinator.acks import ReplicaAcks

    return ReplicaAcks(manager, required_acks, min_isr)
