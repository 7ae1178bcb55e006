"""The control API on three kcoord nodes and a real ZooKeeper (server/control/cluster_moves.py,
the fixture's move_coordinator / move_leader): a group's coordinator and a partition's leader
move through the controller, as a preferred-leader election after a reassignment that puts the
target first, while real clients work:

- a confluent-kafka consumer group (classic and KIP-848 protocols, each member a process of its
  own) keeps consuming and committing while its coordinator moves: the commits acknowledged
  before the move survive, nothing below them is delivered again, the members commit on the
  new coordinator, FindCoordinator names it on every node and the old one answers
  NOT_COORDINATOR;
- an idempotent acks=all producer loses nothing acknowledged while its partition's leader
  moves twice, asked of a node that is neither the controller nor the target;
- what cannot be done is refused with a clear answer and changes nothing: an unknown node, a
  node holding no replica, a node out of the ISR, and reset (a cluster node has none).
"""
from __future__ import annotations

import signal
import time

import pytest
from clientlib import wait_balanced
from confluent_kafka import Consumer, TopicPartition
from conftest import call, unique
from kafka.protocol.consumer import OffsetFetchRequest
from kafka.protocol.metadata import FindCoordinatorRequest
from test_cluster import FAILOVER_S, all_online, create
from test_cluster_coordinators import commit_until_done
from test_cluster_group_failover import (
    OFFSETS,
    PARTITIONS,
    KeepProducing,
    acknowledged,
    commits_after,
    committed_offsets,
    coordinator_node,
    delivered_after,
    start_members,
)

from kcoord.protocol.partitioner import partition_for
from kcoord.server.control.client import ControlError
from kcoord.testing.cluster import wait_for

pytestmark = pytest.mark.integration

MEMBERS_S = 120.0  # members joining, balancing, catching up, on a shared machine


def find_coordinator(bootstrap: str, group: str) -> int:
    r = call(bootstrap, FindCoordinatorRequest(version=3, key=group, key_type=0), 3)
    return r.node_id if r.error_code == 0 else -1


def offset_fetch_error(bootstrap: str, group: str) -> int:
    return call(bootstrap, OffsetFetchRequest(version=7, group_id=group, topics=None, require_stable=False),
                7).error_code


def another(cluster, *not_these: int) -> int:
    return next(i for i in sorted(cluster.nodes) if i not in not_these)


KINDS = [("confluent", "classic"), ("confluent", "consumer")]


@pytest.mark.parametrize("kind", KINDS, ids=["-".join(k) for k in KINDS])
def test_a_groups_coordinator_moves_while_its_members_consume_and_commit(kcoord_cluster, kind):
    c = kcoord_cluster
    c.coordinator_topics()  # created at the first FindCoordinator, as on ZooKeeper-mode Kafka
    wait_for(lambda: all_online(c, OFFSETS, 50), 60, "__consumer_offsets leaders")
    topic, group = unique("moving"), unique("g")
    create(c.bootstrap, topic, PARTITIONS, 3)
    wait_for(lambda: all_online(c, topic, PARTITIONS), 30, "leaders")
    p = partition_for(group, 50)
    wait_for(lambda: len(c.state(OFFSETS, p)["isr"]) == 3, 30, "a full ISR of the group's partition")
    producer = KeepProducing(c.bootstrap, topic)
    members = start_members(c, kind, topic, group, 2)
    try:
        wait_balanced(members, PARTITIONS, MEMBERS_S, "two members")
        wait_for(lambda: commits_after(members, 0) >= 6, MEMBERS_S, "a stream of commits")
        old = coordinator_node(c, group)
        target = another(c, old, c.controller())  # the request goes to the controller over the wire
        epoch = c.state(OFFSETS, p)["leader_epoch"]
        moved_at = time.time()
        answer = c.move_coordinator(group, target, via=old)
        before = acknowledged(members, moved_at)
        assert before, "no commit acknowledged before the move"
        assert answer == {"group_id": group, "partition": p, "coordinator": target, "previous": old}
        # a real election: the target is the preferred (first) replica and leads in a new epoch
        state = c.state(OFFSETS, p)
        assert state["leader"] == target and state["leader_epoch"] > epoch, state
        assert c.assignment(OFFSETS)[p][0] == target
        # every node names the target; the old one no longer answers for the group
        wait_for(lambda: {find_coordinator(n.bootstrap, group) for n in c.nodes.values()} == {target}, 30,
                 "every node to name the new coordinator")
        assert offset_fetch_error(c.node(target).bootstrap, group) == 0  # loaded when the call returned
        assert offset_fetch_error(c.node(old).bootstrap, group) == 16  # NOT_COORDINATOR
        # the members go on committing, on the new coordinator
        wait_for(lambda: commits_after(members, moved_at) >= 6 and all(m.alive() for m in members), MEMBERS_S,
                 "commits acknowledged by the new coordinator")
        rewound = [(q, o) for q, o in delivered_after(members, moved_at) if o < before.get(q, 0)]
        assert not rewound, f"records below acknowledged commits {before} delivered again: {rewound[:10]}"
        committed = committed_offsets(c, group, topic)
        assert all(committed.get(q, -1) >= o for q, o in before.items()), (committed, before)
        assert all(m.alive() for m in members), [m.describe() for m in members if not m.alive()]
    finally:
        for m in members:
            m.kill()
        producer.stop()


def test_a_partitions_leader_moves_twice_under_an_acks_all_producer_and_nothing_acknowledged_is_lost(
        kcoord_cluster):
    c = kcoord_cluster
    topic = unique("leader")
    create(c.bootstrap, topic, PARTITIONS, 3)
    wait_for(lambda: all_online(c, topic, PARTITIONS), 30, "leaders")
    wait_for(lambda: all(len(c.state(topic, q)["isr"]) == 3 for q in range(PARTITIONS)), 30, "full ISRs")
    producer = KeepProducing(c.bootstrap, topic, per_second=200)
    try:
        wait_for(lambda: len(producer.acked) >= 200, 60, "acknowledged records")
        for step in range(2):
            old = c.state(topic, 0)["leader"]
            target = another(c, old)
            via = another(c, target, c.controller())  # neither the target nor (if possible) the controller
            acked_before = len(producer.acked)
            answer = c.move_leader(topic, 0, target, via=via)
            assert answer == {"topic": topic, "partition": 0, "leader": target, "previous": old}, step
            assert c.state(topic, 0)["leader"] == target
            assert c.assignment(topic)[0][0] == target
            # the producer goes on, on the new leader
            wait_for(lambda n=acked_before: len(producer.acked) >= n + 300, 60, "acknowledgements after the move")
    finally:
        acked = producer.stop()
    # every acknowledged record is in the log, once (idempotent)
    consumer = Consumer({"bootstrap.servers": c.bootstrap, "group.id": unique("check"),
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    try:
        consumer.assign([TopicPartition(topic, q, 0) for q in range(PARTITIONS)])
        seen: list[str] = []
        deadline = time.monotonic() + 60
        while len(seen) < len(acked) and time.monotonic() < deadline:
            for msg in consumer.consume(1000, timeout=1.0):
                if msg.error() is None:
                    seen.append(msg.key().decode())
    finally:
        consumer.close()
    assert not acked - set(seen), f"{len(acked - set(seen))} acknowledged records lost"
    assert len(seen) == len(set(seen)), "duplicates"


def test_moves_that_cannot_be_done_are_refused_and_reset_is_refused_on_a_cluster_node(kcoord_cluster_factory):
    # a long session (a paused node stays registered) and a short lag time (it leaves the ISR)
    c = kcoord_cluster_factory(3, session_timeout_ms=60000, overrides={"replica.lag.time.max.ms": "2000"})
    topic = unique("refused")
    create(c.bootstrap, topic, 1, 2)
    wait_for(lambda: all_online(c, topic, 1), 30, "a leader")
    replicas = c.assignment(topic)[0]
    outsider = next(i for i in c.nodes if i not in replicas)
    ctl = c.control()
    with pytest.raises(ControlError) as e:
        c.move_leader(topic, 0, 9)
    assert e.value.status == 400 and "not a live broker" in e.value.message
    with pytest.raises(ControlError) as e:
        c.move_leader(topic, 0, outsider)
    assert e.value.status == 409 and "holds no replica" in e.value.message
    with pytest.raises(ControlError) as e:
        c.move_leader(unique("nothing"), 0, outsider)
    assert e.value.status == 404
    with pytest.raises(ControlError) as e:
        c.move_leader(topic, 5, outsider)
    assert e.value.status == 404
    assert c.assignment(topic)[0] == replicas  # nothing changed

    # a follower out of the ISR (paused: registered, not fetching) cannot lead
    leader = c.state(topic, 0)["leader"]
    follower = next(r for r in replicas if r != leader)
    proc = c.node(follower).proc
    proc.send_signal(signal.SIGSTOP)
    try:
        wait_for(lambda: follower not in c.state(topic, 0)["isr"], 60, "the paused follower to leave the ISR")
        with pytest.raises(ControlError) as e:
            c.move_leader(topic, 0, follower, via=leader)
        assert e.value.status == 409 and "not in the ISR" in e.value.message
        assert c.state(topic, 0)["leader"] == leader and c.assignment(topic)[0] == replicas
    finally:
        proc.send_signal(signal.SIGCONT)
    wait_for(lambda: follower in c.state(topic, 0)["isr"], 60, "the follower back in the ISR")
    assert c.move_leader(topic, 0, follower, via=leader)["leader"] == follower

    # reset: refused, and the node goes on as a member of the cluster
    with pytest.raises(ControlError) as e:
        ctl.reset()
    assert e.value.status == 409 and "cluster node" in e.value.message
    status = ctl.status()
    assert status["cluster"]["controller"] == c.controller() and status["cluster"]["brokers"] == [1, 2, 3]
    assert sorted(b["node_id"] for b in ctl.brokers()) == [1, 2, 3]
    assert c.move_leader(topic, 0, leader)["previous"] == follower


def test_a_coordinator_moved_to_a_node_that_is_then_killed_comes_back_to_it_once_it_restarts(kcoord_cluster):
    """Move, SIGKILL, fail over, start, move back: the restarted node loads the group again
    with every commit made meanwhile on the others."""
    c = kcoord_cluster
    c.coordinator_topics()  # created at the first FindCoordinator, as on ZooKeeper-mode Kafka
    wait_for(lambda: all_online(c, OFFSETS, 50), 60, "__consumer_offsets leaders")
    topic, group = unique("back"), unique("g")
    create(c.bootstrap, topic, 1, 3)
    wait_for(lambda: all_online(c, topic, 1), 30, "a leader")
    p = partition_for(group, 50)
    wait_for(lambda: len(c.state(OFFSETS, p)["isr"]) == 3, 30, "a full ISR of the group's partition")
    tp = lambda offset: TopicPartition(topic, 0, offset)  # noqa: E731
    consumer = Consumer({"bootstrap.servers": c.bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        consumer.assign([tp(0)])
        commit_until_done(consumer, tp(5), 30)
        target = another(c, c.state(OFFSETS, p)["leader"])
        assert c.move_coordinator(group, target)["coordinator"] == target
        commit_until_done(consumer, tp(10), 30)
        c.kill(target)
        failover = wait_for(lambda: (s := c.state(OFFSETS, p))["leader"] not in (target, -1) and s["leader"],
                            FAILOVER_S, "another leader of the group's partition")
        commit_until_done(consumer, tp(15), FAILOVER_S)  # on the node the controller chose
        c.start(target)
        wait_for(lambda: target in c.state(OFFSETS, p)["isr"], 60, "the restarted node back in the ISR")
        moved = c.move_coordinator(group, target)
        assert moved["previous"] == failover and moved["coordinator"] == target
        wait_for(lambda: {find_coordinator(n.bootstrap, group) for n in c.nodes.values()} == {target}, 30,
                 "every node to name the restarted node")
        r = call(c.node(target).bootstrap, OffsetFetchRequest(version=7, group_id=group, topics=None,
                                                              require_stable=False), 7)
        assert r.error_code == 0
        assert [(t.name, [q.committed_offset for q in t.partitions]) for t in r.topics] == [(topic, [15])]
        assert offset_fetch_error(c.node(failover).bootstrap, group) == 16  # NOT_COORDINATOR
        commit_until_done(consumer, tp(20), 30)
        assert consumer.committed([tp(0)], timeout=20)[0].offset == 20
    finally:
        consumer.close()
