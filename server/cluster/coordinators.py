"""Coordinators follow partition leadership (Kafka's GroupCoordinator onElection /
onResignation): the node that leads a __consumer_offsets partition loads its groups and
offsets into the group coordinator's runtime; the node that stops leading it unloads them
(server/coordinator/runtime.py `load` / `unload`, fenced by the partition's leader epoch).

It sits in front of the node's replica manager (ReplicaManagerPort, server/cluster/ports.py):
every `apply` the cluster layer makes reaches the replica manager first (the partition's log
exists before it is loaded), then the coordinator. From the moment the node joins a cluster the
runtime is managed: no partition is served until this node is told it leads it."""
from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import Any

from kcoord.protocol.topics import OFFSETS_TOPIC
from kcoord.server.cluster.partition_state import PartitionState
from kcoord.server.cluster.ports import ReplicaManagerPort

log = logging.getLogger("kcoord.cluster.coordinators")


class CoordinatorsFollowLeadership:
    """A ReplicaManagerPort that hands every call to `replicas`, then loads the group
    coordinator's partitions this node leads and unloads those it no longer leads."""

    def __init__(self, replicas: ReplicaManagerPort, broker: Any, broker_id: int) -> None:
        self.replicas = replicas
        self.broker = broker  # .runtime: the group coordinator's runtime (built at first use)
        self.broker_id = broker_id
        self.runtime.managed()  # requests before the first apply: NOT_COORDINATOR, never this node alone

    @property
    def runtime(self) -> Any:
        return self.broker.runtime

    def apply(self, states: list[PartitionState], endpoints: Mapping[int, tuple[str, int]]) -> None:
        self.replicas.apply(states, endpoints)
        runtime = self.runtime
        for s in states:
            if s.topic != OFFSETS_TOPIC or s.partition >= runtime.shard.num_partitions:
                continue
            if s.leader == self.broker_id:
                runtime.load(s.partition, s.leader_epoch)
            else:
                runtime.unload(s.partition, s.leader_epoch)

    def stop_replicas(self, topic_partitions: Iterable[tuple[str, int]], delete: bool) -> None:
        topic_partitions = list(topic_partitions)
        self.replicas.stop_replicas(topic_partitions, delete)
        runtime = self.runtime
        for topic, p in topic_partitions:
            if topic == OFFSETS_TOPIC and p < runtime.shard.num_partitions:
                runtime.unload(p, -1)  # no longer hosted here: whatever the epoch
