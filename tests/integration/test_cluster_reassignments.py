"""AlterPartitionReassignments / ListPartitionReassignments on a real cluster: three kcoord
processes and ZooKeeper. A replica moves to another node, catches up, leadership leaves the
removed replica and its log is deleted, and every record is still there; a reassignment held
in progress (its new replica's process stopped with SIGSTOP) is listed as Kafka lists it and
cancelled; the errors are Kafka's (server/cluster/reassignment.py, docs/cluster.md)."""
from __future__ import annotations

import os
import signal

import pytest
from confluent_kafka import Consumer, Producer
from conftest import call, unique
from kafka.admin import KafkaAdminClient, NewPartitions, NewTopic
from kafka.errors import NoReassignmentInProgressError, ReassignmentInProgressError
from kafka.protocol.admin.topics import AlterPartitionReassignmentsRequest, ListPartitionReassignmentsRequest
from kafka.structs import TopicPartition

from kcoord.testing.cluster import wait_for

pytestmark = pytest.mark.integration

OVERRIDES = {"replica.lag.time.max.ms": "4000", "replica.fetch.wait.max.ms": "100",
             "replica.fetch.backoff.ms": "200", "offsets.topic.num.partitions": "3"}
DEADLINE = 90


def admin(bootstrap: str) -> KafkaAdminClient:
    return KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=30000)


def produce(bootstrap: str, topic: str, values: range) -> None:
    # not idempotent: every node allocates producer ids on its own (a new producer may get one
    # an earlier producer had on another node), which is not this test's subject
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": False, "retries": 0,
                  "message.timeout.ms": 90000})
    errors = []
    for v in values:
        p.produce(topic, str(v).encode(), partition=0,
                  on_delivery=lambda err, _msg: err is not None and errors.append(err))
        p.poll(0)
    assert p.flush(120) == 0 and not errors, errors


def read(bootstrap: str, topic: str, count: int) -> list[int]:
    from confluent_kafka import TopicPartition as TP

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": unique("g"), "enable.auto.commit": False,
                  "auto.offset.reset": "earliest", "topic.metadata.refresh.interval.ms": 1000})
    c.assign([TP(topic, 0, 0)])
    out: list[int] = []
    try:
        wait_for(lambda: (_poll(c, out), len(out) >= count)[1], DEADLINE, f"{count} records of {topic}")
    finally:
        c.close()
    return out


def _poll(c: Consumer, out: list[int]) -> None:
    m = c.poll(0.5)
    if m is not None:
        assert m.error() is None, m.error()
        out.append(int(m.value()))


def partition_dir(cluster, broker: int, topic: str) -> str:
    return str(cluster.directory / f"node-{broker}" / "data" / f"{topic}-0")


def settled(cluster, topic: str, replicas: list[int]):
    """The reassignment is over: RS = the target, nothing adding or removing, the ISR the target."""
    t = cluster.read(f"/brokers/topics/{topic}")
    st = cluster.state(topic, 0)
    if t is None or st is None:
        return None
    done = (t["partitions"]["0"] == replicas and not t["adding_replicas"] and not t["removing_replicas"]
            and sorted(st["isr"]) == sorted(replicas) and st["leader"] in replicas)
    return st if done else None


def controller_bootstrap(cluster) -> str:
    c = wait_for(lambda: cluster.controller() if cluster.controller() > 0 else None, DEADLINE, "a controller")
    return cluster.node(c).bootstrap


def test_a_replica_moves_catches_up_and_the_old_one_is_deleted(kcoord_cluster_factory):
    cluster = kcoord_cluster_factory(3, overrides=OVERRIDES)
    topic = unique("moving")
    a = admin(cluster.bootstrap)
    try:
        a.create_topics([NewTopic(topic, replica_assignments={0: [1, 2]},
                                  topic_configs={"min.insync.replicas": "1"})])
        wait_for(lambda: settled(cluster, topic, [1, 2]), DEADLINE, "the topic on 1 and 2")
        produce(cluster.bootstrap, topic, range(300))
        before = cluster.state(topic, 0)
        assert before["leader"] == 1
        assert os.path.isdir(partition_dir(cluster, 1, topic))

        # 1 -> 3: node 3 is added, catches up, leads (1, the leader, is removed), 1 deletes its log
        result = a.alter_partition_reassignments({TopicPartition(topic, 0): [3, 2]})
        assert result == {TopicPartition(topic, 0): None}
        st = wait_for(lambda: settled(cluster, topic, [3, 2]), DEADLINE, "the reassignment to complete")
        assert st["leader"] == 3 and st["leader_epoch"] > before["leader_epoch"]
        wait_for(lambda: not os.path.exists(partition_dir(cluster, 1, topic)), DEADLINE,
                 "node 1 to delete its log of the partition")
        assert os.path.isdir(partition_dir(cluster, 3, topic))
        assert a.list_partition_reassignments() == {}
        assert a.list_partition_reassignments([TopicPartition(topic, 0)]) == {}

        # every record is there, served by the new leader, which takes new ones
        produce(cluster.bootstrap, topic, range(300, 400))
        assert read(cluster.bootstrap, topic, 400) == list(range(400))
        # what Metadata says matches the znodes
        meta = a.describe_topics([topic])[0]["partitions"][0]
        assert (meta["leader_id"], sorted(meta["replica_nodes"]), sorted(meta["isr_nodes"])) == (3, [2, 3], [2, 3])

        # the leader itself stays when it is kept: 2 -> 1 (1 comes back with a new, empty log)
        a.alter_partition_reassignments({TopicPartition(topic, 0): [3, 1]})
        st = wait_for(lambda: settled(cluster, topic, [3, 1]), DEADLINE, "the second reassignment")
        assert st["leader"] == 3
        wait_for(lambda: not os.path.exists(partition_dir(cluster, 2, topic)), DEADLINE, "node 2's log to go")
        cluster.kill(3)  # node 1 now leads alone: what it copied is complete
        wait_for(lambda: (cluster.state(topic, 0) or {}).get("leader") == 1, DEADLINE, "node 1 to lead")
        assert read(cluster.bootstrap, topic, 400) == list(range(400))
    finally:
        a.close()


def test_in_progress_reassignment_is_listed_and_cancelled(kcoord_cluster_factory):
    cluster = kcoord_cluster_factory(3, overrides=OVERRIDES, session_timeout_ms=30000)
    topic = unique("held")
    a = admin(cluster.bootstrap)
    tp = TopicPartition(topic, 0)
    try:
        a.create_topics([NewTopic(topic, replica_assignments={0: [1, 2]})])
        wait_for(lambda: settled(cluster, topic, [1, 2]), DEADLINE, "the topic on 1 and 2")
        produce(cluster.bootstrap, topic, range(50))
        assert a.alter_partition_reassignments({tp: None}) == {tp: NoReassignmentInProgressError}

        # node 3 stopped (still registered): the reassignment to [1, 3] cannot complete
        pid = cluster.node(3).proc.pid
        os.kill(pid, signal.SIGSTOP)
        try:
            assert a.alter_partition_reassignments({tp: [1, 3]}) == {tp: None}
            listed = a.list_partition_reassignments()
            assert listed == {tp: {"replicas": [1, 3, 2], "adding_replicas": [3], "removing_replicas": [2]}}
            assert cluster.read(f"/brokers/topics/{topic}")["adding_replicas"] == {"0": [3]}
            assert cluster.read(f"/brokers/topics/{topic}")["removing_replicas"] == {"0": [2]}
            # no new partitions while one is moving
            with pytest.raises(ReassignmentInProgressError):
                a.create_partitions({topic: NewPartitions(2)})
            # the cancellation: back to [1, 2]
            assert a.alter_partition_reassignments({tp: None}) == {tp: None}
            assert a.list_partition_reassignments() == {}
            assert cluster.assignment(topic) == {0: [1, 2]}
            t = cluster.read(f"/brokers/topics/{topic}")
            assert (t["adding_replicas"], t["removing_replicas"]) == ({}, {})
        finally:
            os.kill(pid, signal.SIGCONT)
        st = wait_for(lambda: settled(cluster, topic, [1, 2]), DEADLINE, "the partition back on 1 and 2")
        assert 3 not in st["isr"]
        assert not os.path.exists(partition_dir(cluster, 3, topic))
        assert read(cluster.bootstrap, topic, 50) == list(range(50))
    finally:
        a.close()


def test_reassignment_errors_are_kafkas(kcoord_cluster_factory):
    cluster = kcoord_cluster_factory(3, overrides=OVERRIDES)
    topic = unique("errors")
    a = admin(cluster.bootstrap)
    try:
        a.create_topics([NewTopic(topic, replica_assignments={0: [1, 2]})])
        wait_for(lambda: settled(cluster, topic, [1, 2]), DEADLINE, "the topic")
    finally:
        a.close()
    R = AlterPartitionReassignmentsRequest
    P = R.ReassignableTopic.ReassignablePartition

    def alter(bootstrap: str, partitions: dict[tuple[str, int], list[int] | None]):
        by_topic: dict[str, list] = {}
        for (t, p), replicas in partitions.items():
            by_topic.setdefault(t, []).append(P(partition_index=p, replicas=replicas))
        return call(bootstrap, R(timeout_ms=30000, topics=[R.ReassignableTopic(name=t, partitions=ps)
                                                            for t, ps in by_topic.items()]), 0)

    ctl = controller_bootstrap(cluster)
    resp = alter(ctl, {(topic, 0): [], (topic, 1): [1, 2], ("no-such-topic", 0): [1],
                       ("no-such-topic", 1): None})
    assert resp.error_code == 0
    got = {(t.name, p.partition_index): (p.error_code, p.error_message) for t in resp.responses for p in t.partitions}
    assert got == {
        (topic, 0): (39, "Empty replica list specified in partition reassignment."),
        (topic, 1): (3, "The partition does not exist."),
        ("no-such-topic", 0): (3, "The partition does not exist."),
        ("no-such-topic", 1): (85, "No partition reassignment is in progress."),
    }
    resp = alter(ctl, {(topic, 0): [1, 1]})
    p = resp.responses[0].partitions[0]
    assert (p.error_code, p.error_message) == (39, "Duplicate replica ids in partition reassignment replica list: "
                                                   "ArrayBuffer(1, 1)")
    resp = alter(ctl, {(topic, 0): [1, 99]})
    p = resp.responses[0].partitions[0]
    assert p.error_code == 39 and p.error_message.startswith("Replica assignment has brokers that are not alive.")
    resp = alter(ctl, {(topic, 0): [-1, 2]})
    assert resp.responses[0].partitions[0].error_code == 39
    assert cluster.assignment(topic) == {0: [1, 2]}

    # any node but the controller: NOT_CONTROLLER for both APIs
    other = next(n.bootstrap for i, n in sorted(cluster.nodes.items()) if i != cluster.controller())
    resp = alter(other, {(topic, 0): [2, 3]})
    assert (resp.error_code, resp.responses) == (41, [])
    L = ListPartitionReassignmentsRequest
    assert call(other, L(timeout_ms=30000, topics=None), 0).error_code == 41
    listed = call(ctl, L(timeout_ms=30000, topics=[L.ListPartitionReassignmentsTopics(
        name=topic, partition_indexes=[0, 5])]), 0)
    assert (listed.error_code, listed.topics) == (0, [])


def local_dirs(cluster, broker: int, topic: str) -> list[str]:
    data = cluster.directory / f"node-{broker}" / "data"
    return sorted(p.name for p in data.iterdir() if p.name.startswith(topic + "-"))


def test_a_node_deletes_at_start_up_the_logs_of_topics_deleted_while_it_was_down(kcoord_cluster_factory):
    cluster = kcoord_cluster_factory(3, overrides=OVERRIDES)
    gone, again, kept = unique("gone"), unique("again"), unique("kept")
    a = admin(cluster.bootstrap)
    try:
        a.create_topics([NewTopic(t, replica_assignments={0: [1, 2, 3]}) for t in (gone, again, kept)])
        for t in (gone, again, kept):
            wait_for(lambda t=t: settled(cluster, t, [1, 2, 3]), DEADLINE, f"{t} on every node")
            produce(cluster.bootstrap, t, range(20))
        wait_for(lambda: all(local_dirs(cluster, 3, t) == [f"{t}-0"] for t in (gone, again, kept)), DEADLINE,
                 "node 3's logs")
        old_id = cluster.read(f"/brokers/topics/{again}")["topic_id"]
        cluster.stop(3)
        # while node 3 is down: one topic deleted, another deleted and created again (elsewhere)
        a.delete_topics([gone, again])
        wait_for(lambda: cluster.read(f"/brokers/topics/{gone}") is None
                 and cluster.read(f"/brokers/topics/{again}") is None, DEADLINE, "the deletions")
        wait_for(lambda: (a.create_topics([NewTopic(again, replica_assignments={0: [1, 2]})]), True)[1],
                 DEADLINE, "the topic created again")
        assert cluster.read(f"/brokers/topics/{again}")["topic_id"] != old_id
        assert local_dirs(cluster, 3, gone) == [f"{gone}-0"]  # what node 3 left behind
        cluster.start(3)
        wait_for(lambda: local_dirs(cluster, 3, gone) == [] and local_dirs(cluster, 3, again) == [], DEADLINE,
                 "node 3 to delete the logs of the deleted topics")
        assert local_dirs(cluster, 3, kept) == [f"{kept}-0"]
        wait_for(lambda: settled(cluster, kept, [1, 2, 3]), DEADLINE, "node 3 back in the ISR of the kept topic")
        assert read(cluster.bootstrap, kept, 20) == list(range(20))
    finally:
        a.close()


@pytest.mark.java
def test_java_admin_client_reassigns_on_a_cluster(kcoord_cluster_factory):
    from test_admin_configs import admin_tool

    cluster = kcoord_cluster_factory(3, overrides=OVERRIDES, session_timeout_ms=30000)
    ctl = controller_bootstrap(cluster) and cluster.controller()
    x, held = [b for b in sorted(cluster.nodes) if b != ctl]
    topic = unique("jmove")
    a = admin(cluster.bootstrap)
    try:
        a.create_topics([NewTopic(topic, replica_assignments={0: [ctl, x]})])
    finally:
        a.close()
    wait_for(lambda: settled(cluster, topic, [ctl, x]), DEADLINE, "the topic")
    produce(cluster.bootstrap, topic, range(100))
    reachable = ",".join(cluster.node(b).bootstrap for b in (ctl, x))

    pid = cluster.node(held).proc.pid
    os.kill(pid, signal.SIGSTOP)  # the reassignment to it cannot complete while it is stopped
    try:
        out = admin_tool(reachable, ["reassign", f"{topic}:0", f"{ctl},{held}"], ["list-reassignments"],
                         ["reassign", f"{topic}:0", "cancel"], ["list-reassignments"],
                         ["reassign", f"{topic}:0", "cancel"], ["reassign", f"{topic}:0", f"{ctl},99"],
                         ["reassign", f"{topic}:7", f"{ctl}"])
    finally:
        os.kill(pid, signal.SIGCONT)
    kinds = [r["kind"] if r["kind"] != "error" else ("error", r["error"]) for r in out]
    assert kinds == ["reassign", "list-reassignments", "reassign", "list-reassignments",
                     ("error", "NoReassignmentInProgressException"), ("error", "InvalidReplicaAssignmentException"),
                     ("error", "UnknownTopicOrPartitionException"), "done"], out
    assert out[1]["partitions"] == [f"{topic}-0"] and out[3]["partitions"] == []
    wait_for(lambda: settled(cluster, topic, [ctl, x]), DEADLINE, "the cancelled reassignment to settle")

    # a full move with the Java client, then what it describes
    out = admin_tool(cluster.bootstrap, ["reassign", f"{topic}:0", f"{held},{x}"])
    assert out[0]["kind"] == "reassign", out
    wait_for(lambda: settled(cluster, topic, [held, x]), DEADLINE, "the move to complete")
    wait_for(lambda: not os.path.exists(partition_dir(cluster, ctl, topic)), DEADLINE, "the old log to go")
    out = admin_tool(cluster.bootstrap, ["list-reassignments"], ["describe-topics", topic])
    assert out[0]["partitions"] == []
    (p,) = out[1]["partitions"]
    assert (p[0], p[1], sorted(p[2]), sorted(p[3])) == (0, held, sorted([held, x]), sorted([held, x]))
    assert read(cluster.bootstrap, topic, 100) == list(range(100))


def test_the_legacy_znode_reassigns_and_goes_when_done(kcoord_cluster_factory):
    """/admin/reassign_partitions, as kafka-reassign-partitions.sh --zookeeper wrote it: the
    controller starts what it lists, drops what it cannot do, and deletes it once all is done."""
    import json

    cluster = kcoord_cluster_factory(3, overrides=OVERRIDES)
    topic = unique("legacy")
    a = admin(cluster.bootstrap)
    try:
        a.create_topics([NewTopic(topic, replica_assignments={0: [1, 2], 1: [2, 3]})])
    finally:
        a.close()
    wait_for(lambda: settled(cluster, topic, [1, 2]), DEADLINE, "the topic")
    produce(cluster.bootstrap, topic, range(50))
    zk = cluster.zk()
    assert not zk.exists("/admin/reassign_partitions")  # no request until a tool writes one
    request = {"version": 1, "partitions": [{"topic": topic, "partition": 0, "replicas": [3, 2]},
                                            {"topic": "no-such-topic", "partition": 0, "replicas": [1]}]}
    zk.create("/admin/reassign_partitions", json.dumps(request).encode())
    wait_for(lambda: settled(cluster, topic, [3, 2]), DEADLINE, "the reassignment from the znode")
    wait_for(lambda: not zk.exists("/admin/reassign_partitions"), DEADLINE, "the znode to be deleted")
    assert cluster.assignment(topic) == {0: [3, 2], 1: [2, 3]}
    wait_for(lambda: not os.path.exists(partition_dir(cluster, 1, topic)), DEADLINE, "node 1's log to go")
    assert read(cluster.bootstrap, topic, 50) == list(range(50))
