"""Share partitions on a cluster node (zookeeper.connect set), as Kafka places them:

- a share partition lives on its data partition's leader: `leader_epoch(topic, partition)` is
  this node's leader epoch of it from the metadata cache (None when another node leads it: the
  share fetch answers NOT_LEADER_OR_FOLLOWER), and the manager drops a share partition whose
  leadership moved (ShareManager.drop_unled, called as leadership changes);
- its state is read and written at the share coordinator, the leader of the key's
  __share_group_state partition, here or on another node (persister.ClusterPersister);
- __share_group_state is created in the cluster through ZooKeeper at its first use, with
  `share.coordinator.state.topic.num.partitions`, the replication factor
  `share.coordinator.state.topic.replication.factor` (Kafka's default 3) and
  `min.insync.replicas` = `share.coordinator.state.topic.min.isr` (2) (cluster_topic_configs;
  server/cluster/node.py create_internal_topic_soon, as the other internal topics); the controller elects its
  leaders, and the share coordinator loads and unloads its partitions as their leadership moves
  (server/cluster/coordinators.py), its appends acknowledged by the ISR."""
from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from kcoord.protocol.topics import SHARE_STATE_TOPIC
from kcoord.server.share.persister import ClusterPersister

log = logging.getLogger("kcoord.share.cluster")


def on_cluster(manager: Any, cfg: Any, cluster: Callable[[], Any]) -> None:
    """Make `manager` (a ShareManager) a cluster node's: its persister and data leadership."""
    from kcoord.server.cluster.broker_clients import BrokerClients

    partitions = cfg["share.coordinator.state.topic.num.partitions"]

    def num_partitions() -> int:
        node = cluster()
        topic = None if node is None else node.topic(SHARE_STATE_TOPIC)
        return topic.partitions if topic is not None else partitions

    def create_topic() -> None:
        node = cluster()
        if node is not None:  # as every internal topic: with its settings, once enough brokers are up
            node.create_internal_topic_soon(SHARE_STATE_TOPIC)

    def leader_epoch(topic: str, partition: int) -> int | None:
        node = cluster()
        if node is None or not node.leads(topic, partition):
            return None
        st = node.cache.state(topic, partition)
        return None if st is None else st.leader_epoch

    manager.persister = ClusterPersister(manager.coordinator, cluster, BrokerClients(f"kcoord-share-{cfg.node_id}"),
                                         num_partitions, create_topic)
    manager.leader_epoch = leader_epoch


def state_topic_configs(cfg: Any) -> dict[str, str]:
    """__share_group_state's topic configs, as Kafka's share coordinator creates it (kept until
    pruned, not compacted); on a cluster its min.insync.replicas is added (cluster_topic_configs)."""
    return {"cleanup.policy": "delete", "retention.ms": "-1", "compression.type": "producer",
            "segment.bytes": str(cfg["share.coordinator.state.topic.segment.bytes"])}


def cluster_topic_configs(cfg: Any) -> dict[str, str]:
    """__share_group_state's topic configs on a cluster: with share.coordinator.state.topic.min.isr."""
    return dict(state_topic_configs(cfg), **{"min.insync.replicas": str(cfg["share.coordinator.state.topic.min.isr"])})
