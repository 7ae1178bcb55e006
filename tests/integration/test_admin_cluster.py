"""DescribeTopicPartitions, DescribeCluster, DescribeLogDirs, ElectLeaders,
ListPartitionReassignments and AlterPartitionReassignments against a kcoord process, through
Java's AdminClient (which describes topics with DescribeTopicPartitions first), kafka-python's
KafkaAdminClient, confluent-kafka's AdminClient and raw requests for the error paths."""
from __future__ import annotations

import os

import pytest
from confluent_kafka import ElectionType, KafkaException, TopicCollection, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from conftest import call, unique
from kafka.admin import KafkaAdminClient
from kafka.admin import NewTopic as KPNewTopic
from kafka.protocol.admin import (
    DescribeClusterRequest,
    DescribeLogDirsRequest,
    DescribeTopicPartitionsRequest,
    ElectLeadersRequest,
)
from kafka.structs import TopicPartition as KPTopicPartition
from test_admin_configs import admin_tool, produce_one

pytestmark = pytest.mark.integration

CLUSTER_OPERATIONS = ["ALTER", "ALTER_CONFIGS", "CLUSTER_ACTION", "CREATE", "DESCRIBE", "DESCRIBE_CONFIGS",
                      "IDEMPOTENT_WRITE"]


def dtp(bootstrap: str, names: list[str], limit: int = 2000, cursor: tuple[str, int] | None = None):
    R = DescribeTopicPartitionsRequest
    c = R.Cursor(topic_name=cursor[0], partition_index=cursor[1]) if cursor else None
    return call(bootstrap, R(version=0, topics=[R.TopicRequest(name=n) for n in names],
                             response_partition_limit=limit, cursor=c), 0)


def test_describe_topic_partitions_pages_with_a_cursor(kcoord):
    b = kcoord.bootstrap
    a, z = unique("dtp-a"), unique("dtp-z")
    admin = KafkaAdminClient(bootstrap_servers=b, request_timeout_ms=15000)
    try:
        admin.create_topics([KPNewTopic(a, 5, 1), KPNewTopic(z, 3, 1)])
        # kafka-python's own call, one page of 4, then the rest from the cursor it returned
        first = admin.describe_topic_partitions([a, z], response_partition_limit=4)
        assert [t["name"] for t in first["topics"]] == [a]
        assert [p["partition_index"] for p in first["topics"][0]["partitions"]] == [0, 1, 2, 3]
        assert first["next_cursor"] == {"topic_name": a, "partition_index": 4}
        rest = admin.describe_topic_partitions([a, z], response_partition_limit=4, cursor=first["next_cursor"])
        assert [(t["name"], [p["partition_index"] for p in t["partitions"]]) for t in rest["topics"]] == \
            [(a, [4]), (z, [0, 1, 2])]
        assert rest["next_cursor"] is None
    finally:
        admin.close()

    # a page that ends exactly at a topic's end: the cursor points at the next topic's start
    page = dtp(b, [a, z], limit=5)
    assert [t.name for t in page.topics] == [a]
    assert (page.next_cursor.topic_name, page.next_cursor.partition_index) == (z, 0)
    # all topics (an empty list) in name order, internal flagged; unknown and invalid names
    everything = dtp(b, [])
    names = [t.name for t in everything.topics]
    assert names == sorted(names) and "__consumer_offsets" in names
    assert next(t for t in everything.topics if t.name == "__consumer_offsets").is_internal
    odd = dtp(b, [a, "no-such-topic", "bad name!"])
    assert {t.name: t.error_code for t in odd.topics} == {a: 0, "no-such-topic": 3, "bad name!": 17}
    t = next(t for t in odd.topics if t.name == a)
    p = t.partitions[0]
    assert (p.leader_id, p.leader_epoch, p.replica_nodes, p.isr_nodes, p.offline_replicas) == (1, 0, [1], [1], [])
    assert t.topic_authorized_operations == sum(1 << op for op in (3, 4, 5, 6, 7, 8, 10, 11))
    # a cursor naming a topic not in the list, or a negative partition: INVALID_REQUEST for all
    bad = dtp(b, [a], cursor=(z, 0))
    assert [(t.name, t.error_code) for t in bad.topics] == [(a, 42)]
    assert [t.error_code for t in dtp(b, [a], cursor=(a, -1)).topics] == [42]


def test_describe_cluster_log_dirs_elections_and_reassignments_with_python_clients(kcoord):
    b = kcoord.bootstrap
    topic = unique("cluster")
    ck = AdminClient({"bootstrap.servers": b})
    ck.create_topics([NewTopic(topic, 2, 1)])[topic].result(30)
    for _i in range(5):
        assert produce_one(b, topic, b"k", b"x" * 100)[0] is None  # all to one partition (same key)

    # (librdkafka describes the cluster with Metadata, not DescribeCluster)
    d = ck.describe_cluster().result(30)
    assert [(n.id, n.host, n.port) for n in d.nodes] == [(1, "127.0.0.1", kcoord.port)]
    assert d.controller.id == 1 and d.cluster_id
    desc = ck.describe_topics(TopicCollection([topic]))[topic].result(30)
    assert [(p.id, p.leader.id, [r.id for r in p.isr]) for p in desc.partitions] == [(0, 1, [1]), (1, 1, [1])]
    result = ck.elect_leaders(ElectionType.PREFERRED, [TopicPartition(topic, 0)]).result(30)
    assert [e.name() for e in result.values()] == ["ELECTION_NOT_NEEDED"]
    assert ck.elect_leaders(ElectionType.UNCLEAN, None).result(30) == {}  # nothing needed anywhere

    kp = KafkaAdminClient(bootstrap_servers=b, request_timeout_ms=15000)
    try:
        cluster = kp.describe_cluster()
        assert cluster["controller_id"] == 1 and sorted(cluster["authorized_operations"]) == CLUSTER_OPERATIONS
        dirs = kp.describe_log_dirs({topic: [0, 1]})
        (broker,) = dirs
        (logdir,) = broker["log_dirs"]
        assert logdir["log_dir"] == os.path.abspath(kcoord.log_dir) and logdir["error_code"] == 0
        assert 0 < logdir["usable_bytes"] <= logdir["total_bytes"]
        sizes = {p["partition_index"]: p["partition_size"] for t in logdir["topics"] for p in t["partitions"]}
        on_disk = {p: sum(f.stat().st_size for f in (kcoord.log_dir / f"{topic}-{p}").glob("*.log")) for p in (0, 1)}
        assert sizes == on_disk and sum(sizes.values()) > 500
        assert all(p["offset_lag"] == 0 for t in logdir["topics"] for p in t["partitions"])
        assert kp.list_partition_reassignments() == {}
        moved = kp.alter_partition_reassignments({KPTopicPartition(topic, 0): [1], KPTopicPartition(topic, 1): [2]})
        assert moved[KPTopicPartition(topic, 0)] is None and moved[KPTopicPartition(topic, 1)].__name__ == "InvalidReplicationAssignmentError"
        r = kp.elect_leaders(0, {topic: [0, 7]}, raise_errors=False)
        assert [(p.partition_id, p.error_code) for p in r.replica_election_results[0].partition_result] == \
            [(0, 84), (7, 3)]
    finally:
        kp.close()


def test_cluster_apis_over_the_wire(kcoord):
    b = kcoord.bootstrap
    topic = unique("wire")
    ck = AdminClient({"bootstrap.servers": b})
    ck.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    for v in (0, 1):
        r = call(b, DescribeClusterRequest(version=v, include_cluster_authorized_operations=False, endpoint_type=1), v)
        assert r.error_code == 0 and r.authorized_operations is None and [x.broker_id for x in r.brokers] == [1]
    r = call(b, DescribeClusterRequest(version=1, include_cluster_authorized_operations=False, endpoint_type=2), 1)
    assert r.error_code == 114 and "wanted an endpoint of type CONTROLLER" in r.error_message
    r = call(b, DescribeClusterRequest(version=1, include_cluster_authorized_operations=False, endpoint_type=7), 1)
    assert (r.error_code, r.error_message) == (115, "Unsupported endpoint type 7")

    for v in range(5):
        T = DescribeLogDirsRequest.DescribableLogDirTopic
        r = call(b, DescribeLogDirsRequest(version=v, topics=[T(topic=topic, partitions=[0, 5])]), v)
        (res,) = r.results
        assert [(t.name, [p.partition_index for p in t.partitions]) for t in res.topics] == [(topic, [0])]
        if v >= 4:
            assert res.total_bytes > 0 and res.usable_bytes > 0
    everything = call(b, DescribeLogDirsRequest(version=4, topics=None), 4).results[0]
    assert topic in {t.name for t in everything.topics}

    T = ElectLeadersRequest.TopicPartitions
    for v in range(3):
        r = call(b, ElectLeadersRequest(version=v, election_type=0, timeout_ms=1000,
                                        topic_partitions=[T(topic=topic, partitions=[0]),
                                                          T(topic="no-such-topic", partitions=[0])]), v)
        assert [(x.topic, [(p.partition_id, p.error_code, p.error_message) for p in x.partition_result])
                for x in r.replica_election_results] == [
            (topic, [(0, 84, "Leader election not needed for topic partition.")]),
            ("no-such-topic", [(0, 3, "No such topic as no-such-topic")])]
    r = call(b, ElectLeadersRequest(version=1, election_type=5, timeout_ms=1000,
                                    topic_partitions=[T(topic=topic, partitions=[0])]), 1)
    assert r.error_code == 42 and r.replica_election_results[0].partition_result[0].error_code == 42
    r = call(b, ElectLeadersRequest(version=2, election_type=1, timeout_ms=1000, topic_partitions=None), 2)
    assert topic in [x.topic for x in r.replica_election_results]
    assert all(x.partition_result == [] for x in r.replica_election_results)


@pytest.mark.java
def test_java_admin_cluster_apis(kcoord):
    b = kcoord.bootstrap
    topic = unique("jcluster")
    out = admin_tool(b, ["create", topic, "3"],
                     ["describe-topics", f"{topic},__consumer_offsets"],
                     ["describe-topics", unique("missing")],
                     ["describe-cluster"],
                     ["log-dirs", "1"],
                     ["elect", "preferred", f"{topic}:0,{topic}:9"],
                     ["elect", "unclean", "all"],
                     ["list-reassignments"],
                     ["reassign", f"{topic}:1", "1"],
                     ["reassign", f"{topic}:1", "1,2"],
                     ["reassign", f"{topic}:1", "cancel"])
    kinds = [r["kind"] if r["kind"] != "error" else ("error", r["error"]) for r in out]
    assert kinds == ["create", "topic", "topic", ("error", "UnknownTopicOrPartitionException"), "describe-cluster",
                     "log-dirs", "elect", "elect", "list-reassignments", "reassign",
                     ("error", "InvalidReplicaAssignmentException"), ("error", "NoReassignmentInProgressException"),
                     "done"], out
    offsets, mine = out[1], out[2]
    assert offsets["name"] == "__consumer_offsets" and offsets["internal"] and len(offsets["partitions"]) == 50
    assert mine["name"] == topic and mine["partitions"] == [[p, 1, [1], [1]] for p in range(3)]
    assert out[4]["nodes"] == [f"1@127.0.0.1:{kcoord.port}"] and out[4]["operations"] == CLUSTER_OPERATIONS
    assert out[5]["dir"] == os.path.abspath(kcoord.log_dir) and out[5]["total"] > 0
    assert f"{topic}-2" in out[5]["replicas"]
    assert out[6]["results"] == {f"{topic}-0": "ElectionNotNeededException",
                                 f"{topic}-9": "UnknownTopicOrPartitionException"}
    assert out[7]["results"] == {} and out[8]["partitions"] == []
    assert "includes broker 2, but no such broker is registered" in out[10]["message"]


def test_confluent_describe_topics_of_an_unknown_topic(kcoord):
    ck = AdminClient({"bootstrap.servers": kcoord.bootstrap})
    name = unique("missing")
    with pytest.raises(KafkaException) as e:
        ck.describe_topics(TopicCollection([name]))[name].result(30)
    assert e.value.args[0].name() == "UNKNOWN_TOPIC_OR_PART"
