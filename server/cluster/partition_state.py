"""What the controller decides for one partition, as Kafka's ZooKeeper-mode controller keeps
it in /brokers/topics/T/partitions/P/state and sends in LeaderAndIsr: the leader, its epoch,
the in-sync replicas, and the versions that fence stale writers."""
from __future__ import annotations

from dataclasses import dataclass

NO_LEADER = -1


@dataclass(frozen=True, slots=True)
class PartitionState:
    topic: str
    partition: int
    leader: int  # broker id, NO_LEADER when every replica is offline
    leader_epoch: int  # bumped by each leader election (and each ISR change a controller makes)
    isr: tuple[int, ...]  # in-sync replicas, the leader first when it is one of them
    replicas: tuple[int, ...]  # the assignment, preferred leader first
    controller_epoch: int  # epoch of the controller that wrote this state
    zk_version: int  # version of the state znode: an ISR change names the one it replaces

    @property
    def preferred_leader(self) -> int:
        return self.replicas[0] if self.replicas else NO_LEADER
