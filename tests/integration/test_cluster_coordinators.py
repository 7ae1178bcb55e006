"""Coordinators follow __consumer_offsets leadership on three kcoord nodes and a real
ZooKeeper: only the leader of a group's partition answers for the group (the others
NOT_COORDINATOR), and when the leader's node is SIGKILLed the new leader loads the partition
and the group's members (confluent-kafka) find it, read back what they committed before (every
commit waited for the in-sync replicas) and go on committing. FindCoordinator answers
COORDINATOR_NOT_AVAILABLE until enough nodes are up to create __consumer_offsets with
offsets.topic.replication.factor."""
from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer, KafkaException, TopicPartition
from conftest import call, unique
from kafka.protocol.consumer import OffsetFetchRequest
from kafka.protocol.metadata import FindCoordinatorRequest
from test_cluster import FAILOVER_S, all_online, create

from kcoord.protocol.partitioner import partition_for
from kcoord.testing.cluster import wait_for

pytestmark = pytest.mark.integration

OFFSETS = "__consumer_offsets"


def offset_fetch_error(bootstrap: str, group: str) -> int:
    return call(bootstrap, OffsetFetchRequest(version=7, group_id=group, topics=None, require_stable=False), 7).error_code


def coordinator(bootstrap: str, group: str) -> int:
    r = call(bootstrap, FindCoordinatorRequest(version=3, key=group, key_type=0), 3)
    return r.node_id if r.error_code == 0 else -1


def commit_until_done(consumer: Consumer, tp: TopicPartition, deadline_s: float) -> None:
    """Commit through whatever the consumer meets (a coordinator moving, a rejoin)."""
    deadline = time.monotonic() + deadline_s
    while True:
        consumer.poll(0.2)
        try:
            consumer.commit(offsets=[tp], asynchronous=False)
            return
        except KafkaException:
            if time.monotonic() > deadline:
                raise


def committed(consumer: Consumer, tp: TopicPartition, deadline_s: float) -> int:
    """The group's committed offset of `tp`, through whatever the consumer meets on the way."""
    deadline = time.monotonic() + deadline_s
    while True:
        try:
            return consumer.committed([tp], timeout=10)[0].offset
        except KafkaException:
            if time.monotonic() > deadline:
                raise


def test_only_the_leader_of_a_groups_partition_answers_for_it(kcoord_cluster):
    c = kcoord_cluster
    c.coordinator_topics()  # created at the first FindCoordinator
    wait_for(lambda: all_online(c, OFFSETS, 50), 60, "__consumer_offsets leaders")
    group = unique("g")
    leader = c.state(OFFSETS, partition_for(group, 50))["leader"]
    wait_for(lambda: {coordinator(n.bootstrap, group) for n in c.nodes.values()} == {leader}, 30,
             "every node to name the leader")
    wait_for(lambda: offset_fetch_error(c.node(leader).bootstrap, group) == 0, 30, "the leader to have loaded")
    for i, n in c.nodes.items():
        if i != leader:
            assert offset_fetch_error(n.bootstrap, group) == 16  # NOT_COORDINATOR


def test_a_group_follows_its_coordinator_when_the_node_is_killed(kcoord_cluster):
    c = kcoord_cluster
    c.coordinator_topics()  # created at the first FindCoordinator
    wait_for(lambda: all_online(c, OFFSETS, 50), 60, "__consumer_offsets leaders")
    topic = unique("moving")
    create(c.bootstrap, topic, 1, 3)
    wait_for(lambda: all_online(c, topic, 1), 30, "leaders")
    group = unique("g")
    p = partition_for(group, 50)
    old = c.state(OFFSETS, p)
    consumer = Consumer({"bootstrap.servers": c.bootstrap, "group.id": group, "enable.auto.commit": False,
                         "session.timeout.ms": 10000, "auto.offset.reset": "earliest"})
    try:
        consumer.subscribe([topic])
        wait_for(lambda: consumer.poll(0.2) is None and consumer.assignment(), 60, "the partition assigned")
        commit_until_done(consumer, TopicPartition(topic, 0, 5), 30)
        assert consumer.committed([TopicPartition(topic, 0)], timeout=20)[0].offset == 5

        c.kill(old["leader"])
        new = wait_for(lambda: (s := c.state(OFFSETS, p))["leader"] not in (old["leader"], -1) and s, FAILOVER_S,
                       "a new leader of the group's partition")
        assert new["leader_epoch"] > old["leader_epoch"]
        survivors = [i for i in c.nodes if i != old["leader"]]
        wait_for(lambda: all(coordinator(c.node(i).bootstrap, group) == new["leader"] for i in survivors), 30,
                 "FindCoordinator to name the new leader")
        # the offset committed before the SIGKILL was acknowledged by every in-sync replica
        # (offsets.commit.required.acks -1): the new coordinator reads it back
        assert committed(consumer, TopicPartition(topic, 0), FAILOVER_S) == 5
        # the members find the new coordinator and go on committing there
        commit_until_done(consumer, TopicPartition(topic, 0, 9), FAILOVER_S)
        assert consumer.committed([TopicPartition(topic, 0)], timeout=20)[0].offset == 9
        r = call(c.node(new["leader"]).bootstrap,
                 OffsetFetchRequest(version=7, group_id=group, topics=None, require_stable=False), 7)
        assert r.error_code == 0 and [(t.name, [q.committed_offset for q in t.partitions]) for t in r.topics] == \
            [(topic, [9])]
        # the old node, back, is no leader of the partition (out of the ISR): NOT_COORDINATOR
        c.start(old["leader"])
        wait_for(lambda: offset_fetch_error(c.node(old["leader"]).bootstrap, group) == 16, 60,
                 "the old node to answer NOT_COORDINATOR")
        wait_for(lambda: coordinator(c.node(old["leader"]).bootstrap, group) == new["leader"], 60,
                 "the old node, once it has read the cluster, to name the new coordinator")
    finally:
        consumer.close()


def test_a_coordinator_paused_past_its_session_answers_not_coordinator_when_it_resumes(kcoord_cluster):
    import signal

    c = kcoord_cluster
    c.coordinator_topics()  # created at the first FindCoordinator
    wait_for(lambda: all_online(c, OFFSETS, 50), 60, "__consumer_offsets leaders")
    group = unique("g")
    p = partition_for(group, 50)
    old = c.state(OFFSETS, p)
    paused = old["leader"]
    wait_for(lambda: offset_fetch_error(c.node(paused).bootstrap, group) == 0, 30, "the leader to have loaded")
    proc = c.node(paused).proc
    proc.send_signal(signal.SIGSTOP)
    try:
        wait_for(lambda: paused not in c.registered(), FAILOVER_S, "its session to expire")
        new = wait_for(lambda: (s := c.state(OFFSETS, p))["leader"] not in (paused, -1) and s, FAILOVER_S,
                       "a new leader of the group's partition")
    finally:
        proc.send_signal(signal.SIGCONT)
    wait_for(lambda: paused in c.registered(), 60, "the node to register again")
    wait_for(lambda: offset_fetch_error(c.node(new["leader"]).bootstrap, group) == 0, 30, "the new leader to load")
    wait_for(lambda: coordinator(c.node(paused).bootstrap, group) == new["leader"], 30,
             "the resumed node to name the new coordinator")
    assert offset_fetch_error(c.node(paused).bootstrap, group) == 16  # NOT_COORDINATOR
    assert "unloaded" in c.node(paused).log_text()


def wait_for_state(cond, timeout: float) -> bool:
    """cond() within `timeout` seconds: True, or False (not an error: the caller tries again)."""
    try:
        return bool(wait_for(cond, timeout, "a state"))
    except AssertionError:
        return False


def test_a_preferred_leader_election_moves_a_group_away_from_a_live_node(kcoord_cluster_factory):
    """The old coordinator stays up: once a preferred leader election (ElectLeaders, through
    the controller) moves the partition it answers NOT_COORDINATOR for the group at once, and
    the member reads back its commit on the new leader and commits there."""
    from confluent_kafka import ElectionType
    from test_cluster import admin, seen_live_everywhere

    c = kcoord_cluster_factory(3, overrides={"auto.leader.rebalance.enable": "false"})
    c.coordinator_topics()  # created at the first FindCoordinator
    wait_for(lambda: all_online(c, OFFSETS, 50), 60, "__consumer_offsets leaders")
    group = unique("g")
    p = partition_for(group, 50)
    preferred = c.assignment(OFFSETS)[p][0]
    # the preferred replica goes and comes back: another node coordinates the group meanwhile
    c.kill(preferred)
    middle = wait_for(lambda: (s := c.state(OFFSETS, p))["leader"] not in (preferred, -1) and s, FAILOVER_S,
                      "a new leader")["leader"]
    c.start(preferred)
    seen_live_everywhere(c, preferred)
    topic = unique("elected")
    create(c.bootstrap, topic, 1, 2)
    wait_for(lambda: all_online(c, topic, 1), 30, "leaders")
    consumer = Consumer({"bootstrap.servers": c.bootstrap, "group.id": group, "enable.auto.commit": False,
                         "session.timeout.ms": 10000, "auto.offset.reset": "earliest"})
    try:
        consumer.subscribe([topic])
        wait_for(lambda: consumer.poll(0.2) is None and consumer.assignment(), 60, "the partition assigned")
        commit_until_done(consumer, TopicPartition(topic, 0, 3), 30)
        assert c.state(OFFSETS, p)["leader"] == middle
        assert offset_fetch_error(c.node(middle).bootstrap, group) == 0
        # the preferred replica catches up and rejoins the ISR (replication), then is elected
        wait_for(lambda: preferred in c.state(OFFSETS, p)["isr"], 60, "the preferred replica back in the ISR")

        def elected() -> bool:
            # a fresh Admin each time: the controller may have moved with the node's restart,
            # and an election sent to the old one is refused NOT_CONTROLLER (per partition)
            if c.state(OFFSETS, p)["leader"] == preferred:
                return True
            a = admin(c.bootstrap)  # held: a handle collected mid-call fails the call with _DESTROY
            errors = a.elect_leaders(ElectionType.PREFERRED, [TopicPartition(OFFSETS, p)]).result(30)
            print(f"ElectLeaders({OFFSETS}-{p}): {errors}")
            return wait_for_state(lambda: c.state(OFFSETS, p)["leader"] == preferred, 5)

        wait_for(elected, 90, "the preferred election", interval=1.0)
        wait_for(lambda: offset_fetch_error(c.node(middle).bootstrap, group) == 16, 30,
                 "the old coordinator to answer NOT_COORDINATOR")
        assert committed(consumer, TopicPartition(topic, 0), FAILOVER_S) == 3  # replicated to the new leader
        commit_until_done(consumer, TopicPartition(topic, 0, 7), FAILOVER_S)
        r = call(c.node(preferred).bootstrap,
                 OffsetFetchRequest(version=7, group_id=group, topics=None, require_stable=False), 7)
        assert r.error_code == 0 and [(t.name, [q.committed_offset for q in t.partitions]) for t in r.topics] == \
            [(topic, [7])]
        assert offset_fetch_error(c.node(middle).bootstrap, group) == 16
    finally:
        consumer.close()


def test_find_coordinator_waits_for_enough_nodes_for_the_offsets_topic(tmp_path, kcoord_zookeeper):
    """offsets.topic.replication.factor=3 on two live nodes: __consumer_offsets cannot be
    created, every node answers COORDINATOR_NOT_AVAILABLE (Kafka's answer while too few
    brokers are up, and nothing is written to ZooKeeper); once the third node is registered the
    next lookup creates it (Kafka's ZooKeeper-mode brokers create it at a FindCoordinator)."""
    import uuid

    from kcoord.testing.cluster import KcoordCluster

    connect = f"{kcoord_zookeeper}/offsets-rf-{uuid.uuid4().hex[:8]}"
    rf3 = {"offsets.topic.replication.factor": "3"}
    two = KcoordCluster(tmp_path / "two", 2, zookeeper=connect, overrides=rf3)
    third = KcoordCluster(tmp_path / "third", 1, zookeeper=connect, overrides=rf3, first_id=3)
    try:
        two.start()
        group = unique("g")
        wait_for(lambda: two.controller() in (1, 2), 60, "a controller")
        for n in two.nodes.values():
            r = call(n.bootstrap, FindCoordinatorRequest(version=3, key=group, key_type=0), 3)
            assert r.error_code == 15  # COORDINATOR_NOT_AVAILABLE
        assert two.assignment(OFFSETS) is None
        third.start()
        assert two.assignment(OFFSETS) is None  # a registration creates nothing: the next lookup does
        wait_for(lambda: call(third.node(3).bootstrap, FindCoordinatorRequest(version=3, key=group, key_type=0),
                              3).error_code == 0, 60, "a lookup on three nodes to name a coordinator")
        wait_for(lambda: (a := two.assignment(OFFSETS)) and all(len(r) == 3 for r in a.values()), 60,
                 "__consumer_offsets with three replicas per partition")
        wait_for(lambda: all_online(two, OFFSETS, 50), 60, "__consumer_offsets leaders")
        leader = two.state(OFFSETS, partition_for(group, 50))["leader"]
        for n in [*two.nodes.values(), *third.nodes.values()]:
            wait_for(lambda n=n: coordinator(n.bootstrap, group) == leader, 30, "every node to name the leader")
    finally:
        third.close()
        two.close()
