"""Topic and broker config changes across a real cluster (three kcoord processes, ZooKeeper):
the node asked writes /config/topics/T or /config/brokers/<id|<default>> and a
/config/changes/config_change_ notification, every node applies it and answers DescribeConfigs
with it, a topic's new min.insync.replicas is enforced by its leader wherever the change was
sent, and a node that was down when a change was made has it after its restart
(server/cluster/config_changes.py)."""
from __future__ import annotations

import pytest
from confluent_kafka import KafkaError, Producer
from conftest import unique
from kafka.admin import KafkaAdminClient, NewTopic
from test_admin_configs import incremental_raw, legacy_raw, raw_configs

from kcoord.testing.cluster import wait_for

pytestmark = pytest.mark.integration

TOPIC, BROKER = 2, 4
SET, DELETE = 0, 1
DYNAMIC_TOPIC, DYNAMIC_BROKER, DYNAMIC_DEFAULT, STATIC, DEFAULT = 1, 2, 3, 4, 5
OVERRIDES = {"replica.lag.time.max.ms": "3000", "replica.fetch.wait.max.ms": "100",
             "replica.fetch.backoff.ms": "200", "offsets.topic.num.partitions": "3"}
DEADLINE = 90


def create(bootstrap: str, topic: str, rf: int = 3, assignment=None) -> None:
    a = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=60000)
    try:
        a.create_topics([NewTopic(topic, replica_assignments=assignment) if assignment else NewTopic(topic, 1, rf)])
    finally:
        a.close()


def value_on(cluster, broker: int, rtype: int, name: str, key: str):
    c = raw_configs(cluster.node(broker).bootstrap, rtype, name, [key]).get(key)
    return None if c is None else (c.value, c.config_source)


def on_every_node(cluster, rtype: int, name: str, key: str, expected, nodes=None) -> None:
    for b in nodes or sorted(cluster.nodes):
        wait_for(lambda b=b: value_on(cluster, b, rtype, name, key) == expected, DEADLINE,
                 f"node {b} to describe {key} of {name!r} as {expected}")


def notifications(cluster) -> list[dict]:
    zk = cluster.zk()
    return [cluster.read(f"/config/changes/{c}") for c in sorted(zk.get_children("/config/changes"))]


def test_topic_config_changes_reach_every_node_and_are_enforced(kcoord_cluster_factory):
    cluster = kcoord_cluster_factory(3, overrides=OVERRIDES)
    topic, lonely = unique("cfg"), unique("lonely")
    create(cluster.bootstrap, topic)
    create(cluster.bootstrap, lonely, assignment={0: [1]})  # on node 1 only
    st = wait_for(lambda: (s := cluster.state(topic, 0)) and len(s["isr"]) == 3 and s, DEADLINE, "a full ISR")
    leader = st["leader"]
    elsewhere = next(b for b in sorted(cluster.nodes) if b != leader)

    # sent to a node that does not lead it (any node takes it, as Kafka's ZooKeeper-mode brokers)
    b = cluster.node(elsewhere).bootstrap
    assert incremental_raw(b, [(TOPIC, topic, [("min.insync.replicas", SET, "3"),
                                               ("retention.ms", SET, "3600000")])]) == [(0, None)]
    assert cluster.read(f"/config/topics/{topic}")["config"] == {"min.insync.replicas": "3", "retention.ms": "3600000"}
    assert {"version": 2, "entity_path": f"topics/{topic}"} in notifications(cluster)
    on_every_node(cluster, TOPIC, topic, "min.insync.replicas", ("3", DYNAMIC_TOPIC))
    on_every_node(cluster, TOPIC, topic, "retention.ms", ("3600000", DYNAMIC_TOPIC))

    # a node that does not host a topic describes and alters it all the same
    assert value_on(cluster, 3, TOPIC, lonely, "cleanup.policy") == ("delete", DEFAULT)
    assert legacy_raw(cluster.node(3).bootstrap, [(TOPIC, lonely, [("cleanup.policy", "compact")])]) == [(0, None)]
    on_every_node(cluster, TOPIC, lonely, "cleanup.policy", ("compact", DYNAMIC_TOPIC))
    assert incremental_raw(b, [(TOPIC, "no-such-topic", [("retention.ms", SET, "1")])])[0][0] == 3

    # the leader enforces the new min.insync.replicas: one follower down, acks=all is refused
    follower = next(r for r in st["isr"] if r != leader)
    cluster.kill(follower)
    wait_for(lambda: len(cluster.state(topic, 0)["isr"]) == 2, DEADLINE, "the ISR to shrink")
    errors: list[KafkaError] = []
    p = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "retries": 0,
                  "message.timeout.ms": 30000})
    p.produce(topic, b"x", partition=0, on_delivery=lambda err, _m: errors.append(err))
    p.flush(60)
    assert [e.code() for e in errors] == [KafkaError.NOT_ENOUGH_REPLICAS]


def test_broker_configs_per_node_and_cluster_defaults(kcoord_cluster_factory):
    cluster = kcoord_cluster_factory(3, overrides=OVERRIDES)
    b1 = cluster.node(1).bootstrap
    initial = value_on(cluster, 3, BROKER, "3", "log.retention.ms")
    assert initial[1] == DEFAULT
    # the cluster-wide default, sent to node 1, answered by every node
    assert incremental_raw(b1, [(BROKER, "", [("log.retention.ms", SET, "555000")])]) == [(0, None)]
    assert cluster.read("/config/brokers/<default>")["config"] == {"log.retention.ms": "555000"}
    assert {"version": 2, "entity_path": "brokers/<default>"} in notifications(cluster)
    on_every_node(cluster, BROKER, "", "log.retention.ms", ("555000", DYNAMIC_DEFAULT))
    for b in sorted(cluster.nodes):  # each node's own view: the default is its effective value
        assert value_on(cluster, b, BROKER, str(b), "log.retention.ms") == ("555000", DYNAMIC_DEFAULT)
    # a topic's effective value follows the new default on every node
    topic = unique("dflt")
    create(cluster.bootstrap, topic)
    on_every_node(cluster, TOPIC, topic, "retention.ms", ("555000", DYNAMIC_DEFAULT))

    # node 2's own config: only node 2 has it
    b2 = cluster.node(2).bootstrap
    assert incremental_raw(b2, [(BROKER, "2", [("log.retention.ms", SET, "666000")])]) == [(0, None)]
    assert cluster.read("/config/brokers/2")["config"] == {"log.retention.ms": "666000"}
    assert value_on(cluster, 2, BROKER, "2", "log.retention.ms") == ("666000", DYNAMIC_BROKER)
    assert value_on(cluster, 1, BROKER, "1", "log.retention.ms") == ("555000", DYNAMIC_DEFAULT)
    # another node's id is Kafka's INVALID_REQUEST (the admin clients send it to that node)
    assert incremental_raw(b1, [(BROKER, "2", [("log.retention.ms", SET, "1")])])[0][0] == 42

    # node 3 down while the default and a topic change: it has both after its restart
    cluster.stop(3)
    assert incremental_raw(b1, [(BROKER, "", [("log.retention.ms", SET, "777000")])]) == [(0, None)]
    assert incremental_raw(b1, [(TOPIC, topic, [("retention.ms", SET, "888000")])]) == [(0, None)]
    cluster.start(3)
    on_every_node(cluster, BROKER, "", "log.retention.ms", ("777000", DYNAMIC_DEFAULT))
    on_every_node(cluster, TOPIC, topic, "retention.ms", ("888000", DYNAMIC_TOPIC))
    # and deleting the default goes everywhere too
    assert incremental_raw(b1, [(BROKER, "", [("log.retention.ms", DELETE, None)])]) == [(0, None)]
    on_every_node(cluster, BROKER, "3", "log.retention.ms", initial, nodes=[3])
    assert cluster.read("/config/brokers/<default>")["config"] == {}
