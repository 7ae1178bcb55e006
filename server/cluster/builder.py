"""Builds and starts this node's cluster membership from its configuration (called by the
server only when `zookeeper.connect` is set: nothing of server/cluster/ is imported otherwise)."""
from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable
from typing import Any

from kcoord.protocol.topics import OFFSETS_TOPIC, SHARE_STATE_TOPIC, TXN_TOPIC
from kcoord.server.cluster.config_changes import Apply, ClusterConfigs
from kcoord.server.cluster.controller import ControllerSettings
from kcoord.server.cluster.coordinators import CoordinatorsFollowLeadership, coordinator_acks
from kcoord.server.cluster.node import ClusterNode
from kcoord.server.cluster.ports import ReplicaManagerPort
from kcoord.server.cluster.producer_ids import ZkProducerIdBlocks
from kcoord.server.cluster.zk import Zk
from kcoord.server.cluster.znodes import BrokerInfo
from kcoord.server.share.cluster import cluster_topic_configs


def broker_info(config: Any, listeners: Iterable[Any]) -> BrokerInfo:
    """The registration: every advertised listener's endpoint (its bound port when 0)."""
    endpoints: dict[str, tuple[str, int]] = {}
    security: dict[str, str] = {}
    for lst in listeners:
        if lst.advertised is not None:
            endpoints[lst.name] = lst.advertised
            security[lst.name] = getattr(lst.protocol, "name", str(lst.protocol))
    return BrokerInfo(config.node_id, endpoints, security, config["broker.rack"] or None)


def controller_settings(config: Any, topic_configs: Any) -> ControllerSettings:
    def unclean(topic: str) -> bool:
        value = topic_configs(topic).get("unclean.leader.election.enable")
        return config["unclean.leader.election.enable"] if value is None else value.strip().lower() == "true"

    offsets = (config["offsets.topic.num.partitions"], config["offsets.topic.replication.factor"],
               {"cleanup.policy": "compact", "compression.type": "producer",
                "segment.bytes": str(config["offsets.topic.segment.bytes"])})
    # Kafka's TransactionLog.loadPartitions configs: compact, uncompressed, its own min ISR
    txn = (config["transaction.state.log.num.partitions"], config["transaction.state.log.replication.factor"],
           {"cleanup.policy": "compact", "compression.type": "uncompressed",
            "min.insync.replicas": str(config["transaction.state.log.min.isr"]),
            "unclean.leader.election.enable": "false",
            "segment.bytes": str(config["transaction.state.log.segment.bytes"])})
    share = (config["share.coordinator.state.topic.num.partitions"],
             config["share.coordinator.state.topic.replication.factor"], cluster_topic_configs(config))
    return ControllerSettings(unclean, config["auto.leader.rebalance.enable"],
                              config["leader.imbalance.check.interval.seconds"],
                              config["leader.imbalance.per.broker.percentage"],
                              {OFFSETS_TOPIC: offsets, TXN_TOPIC: txn, SHARE_STATE_TOPIC: share})


async def start_cluster(config: Any, listeners: Iterable[Any], replicas: Callable[[ClusterNode], ReplicaManagerPort],
                        group_runtime: Callable[[], Any], txn_runtime: Callable[[], Any],
                        share_runtime: Callable[[], Any], leadership_changed: Callable[[], None],
                        use_producer_id_blocks: Callable[[Callable[[], Any]], None],
                        min_isr: Callable[[str], int], cluster_id: str,
                        answering: Callable[[ClusterNode | None], None],
                        config_changes: Apply | None = None) -> ClusterNode:
    """Connect, register and join (the composition root calls this, server/node.py); the
    node's cluster id becomes the cluster's (`node.cluster_id`). Raises TimeoutError when
    ZooKeeper cannot be reached in zookeeper.connection.timeout.ms. `replicas` builds the
    node's replica port (it is given the node, whose `alter_isr` it calls), started here;
    `group_runtime` / `txn_runtime` / `share_runtime`: the group, transaction and share
    coordinators' runtimes (the node's current ones); `leadership_changed()`: after every
    change of what this node leads (share partitions follow their data partitions' leaders); `use_producer_id_blocks(take)`: the node's producer ids come from the
    blocks `take` claims in ZooKeeper from now on; `min_isr(topic)`: a topic's effective
    min.insync.replicas (what the coordinators' appends need); `answering(node)`:
    the broker answers from the cluster's metadata from now on (None: it could not join);
    `config_changes(kind, name, configs)`: applies a topic or broker config change to this
    node (server/cluster/config_changes.py)."""
    session_ms = config["zookeeper.session.timeout.ms"]
    connect_ms = config["zookeeper.connection.timeout.ms"]
    zk = Zk(config["zookeeper.connect"], session_ms, session_ms if connect_ms < 0 else connect_ms,
            asyncio.get_running_loop())
    listeners = list(listeners)
    node = ClusterNode(zk, config.node_id, broker_info(config, listeners), config["inter.broker.listener.name"]
                       or None, controller_settings(config, lambda t: node.cache.topic_configs.get(t, {})),
                       session_ms)
    inner = replicas(node)
    start = getattr(inner, "start", None)
    if start is not None:
        start()
    # the group and transaction coordinators load and unload their partitions as this node's
    # leadership changes, their appends acknowledged by the in-sync replicas
    node.replicas = CoordinatorsFollowLeadership(inner, [
        (OFFSETS_TOPIC, group_runtime),
        (TXN_TOPIC, txn_runtime),
        (SHARE_STATE_TOPIC, share_runtime),
    ], node, {OFFSETS_TOPIC: coordinator_acks(config["offsets.commit.required.acks"], inner, min_isr),
              TXN_TOPIC: coordinator_acks(-1, inner, min_isr),
              SHARE_STATE_TOPIC: coordinator_acks(-1, inner, min_isr)}, leadership_changed)
    # producer ids from the blocks the cluster's nodes claim in ZooKeeper, never this node's own
    blocks = ZkProducerIdBlocks(zk, config.node_id)
    use_producer_id_blocks(blocks.take)
    # answering from the cluster from now on: until it is read, no broker and no leader (clients
    # retry), never this node alone as a single-node server would
    answering(node)
    try:
        await node.start(cluster_id)
        await blocks.start()
        # the metadata is read: topics deleted while this node was down go (stray_logs.py)
        local = getattr(inner, "local", None)
        if local is not None:
            local.remove_strays()
        if config_changes is not None:  # topic and broker configs through /config/changes
            node.configs = ClusterConfigs(zk, config.node_id, node.cache, config_changes)
            await node.configs.start()
    except BaseException:
        answering(None)
        stop = getattr(node.replicas, "stop", None)
        if stop is not None:
            await stop()
        await zk.stop()
        raise
    return node
