"""Builds and starts this node's cluster membership from its configuration (called by the
server only when `zookeeper.connect` is set: nothing of server/cluster/ is imported otherwise)."""
from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable
from typing import Any

from kcoord.protocol.topics import OFFSETS_TOPIC
from kcoord.server.cluster.controller import ControllerSettings
from kcoord.server.cluster.coordinators import CoordinatorsFollowLeadership, group_acks
from kcoord.server.cluster.node import ClusterNode
from kcoord.server.cluster.ports import ReplicaManagerPort
from kcoord.server.cluster.replicas import replicated_replicas
from kcoord.server.cluster.zk import Zk
from kcoord.server.cluster.znodes import BrokerInfo


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
    return ControllerSettings(unclean, config["auto.leader.rebalance.enable"],
                              config["leader.imbalance.check.interval.seconds"],
                              config["leader.imbalance.per.broker.percentage"], {OFFSETS_TOPIC: offsets})


async def start_cluster(config: Any, broker: Any, listeners: Iterable[Any],
                        replicas: Callable[[ClusterNode], ReplicaManagerPort] | None = None) -> ClusterNode:
    """Connect, register and join; the broker answers from the cluster's metadata
    (broker.cluster) and its cluster id becomes the cluster's. Raises TimeoutError when
    ZooKeeper cannot be reached in zookeeper.connection.timeout.ms. `replicas` builds the
    node's replica port (it is given the node, whose `alter_isr` it calls); without one, the
    node's logs and its replica manager (server/cluster/replicas.py), started here."""
    session_ms = config["zookeeper.session.timeout.ms"]
    connect_ms = config["zookeeper.connection.timeout.ms"]
    zk = Zk(config["zookeeper.connect"], session_ms, session_ms if connect_ms < 0 else connect_ms,
            asyncio.get_running_loop())
    listeners = list(listeners)
    node = ClusterNode(zk, config.node_id, broker_info(config, listeners), config["inter.broker.listener.name"]
                       or None, controller_settings(config, lambda t: node.cache.topic_configs.get(t, {})),
                       session_ms)
    inner = replicas(node) if replicas is not None else replicated_replicas(broker, node)
    start = getattr(inner, "start", None)
    if start is not None:
        start()
    # the group coordinator loads and unloads its partitions as this node's leadership changes
    node.replicas = CoordinatorsFollowLeadership(inner, lambda: broker.parts.runtime.get(), node,
                                                 group_acks(config, broker, inner))
    # answering from the cluster from now on: until it is read, no broker and no leader (clients
    # retry), never this node alone as a single-node server would
    broker.cluster = node
    try:
        broker.cluster_id = await node.start(broker.cluster_id)
    except BaseException:
        broker.cluster = None
        stop = getattr(node.replicas, "stop", None)
        if stop is not None:
            await stop()
        await zk.stop()
        raise
    return node
