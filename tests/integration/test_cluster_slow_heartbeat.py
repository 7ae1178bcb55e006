"""A consumer-protocol (KIP-848) heartbeat answered after the client gave up on it, on three
kcoord nodes and a real ZooKeeper.

librdkafka waits for a ConsumerGroupHeartbeat answer only one heartbeat interval (the
server's group.consumer.heartbeat.interval.ms, 1 s here); the coordinator answers once the
records the heartbeat changed are replicated (offsets.commit.required.acks -1). When a
follower of the group's __consumer_offsets partition stalls (SIGSTOP here; a busy machine, a
network hiccup, a node cut off elsewhere), the answer waits for it. The answer that told the
old member to give half its partitions up to a new member was such an answer: the coordinator,
as Kafka's, sends an assignment only when it changed or the request was full, so the old
member never learnt it, kept every partition, and the new member stayed without any until the
old one's rebalance timeout (max.poll.interval.ms, 300 s) fenced it. This is what left the Java
member of the Jepsen test's consumer-protocol group unassigned for 180 s.

The follower is stopped before the new member joins and resumed once the old member's
librdkafka has logged that its heartbeat timed out (replica.lag.time.max.ms is long enough
that the follower stays in the ISR meanwhile). Checked: the new member gets its share of the
partitions and the old one gives the rest up, within a minute of the follower resuming."""
from __future__ import annotations

import os
import re
import signal
import time

import pytest
from clientlib import java4_member, python_member
from conftest import call, unique
from test_cluster import create

from kcoord.protocol.messages import ConsumerGroupDescribeRequest
from kcoord.protocol.partitioner import partition_for
from kcoord.testing.cluster import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.timeout(420)]

OFFSETS = "__consumer_offsets"
PARTITIONS = 6
LAG_MS = 120000  # replica.lag.time.max.ms: the stalled follower stays in the ISR
SERVER = {
    "replica.lag.time.max.ms": str(LAG_MS),
    "group.consumer.min.session.timeout.ms": "6000",
    "group.consumer.session.timeout.ms": "30000",  # no member expires while its writes wait
    "group.consumer.min.heartbeat.interval.ms": "500",
    "group.consumer.heartbeat.interval.ms": "1000",
}
SETTLE_S = 120.0  # members starting and joining on a shared machine
RECOVER_S = 60.0


def describe(cluster, group: str, node: int) -> dict[str, tuple[int, set[int]]] | None:
    """client id -> (member epoch, assigned partitions) as the coordinator describes them now."""
    d = call(cluster.node(node).bootstrap, ConsumerGroupDescribeRequest(
        version=1, group_ids=[group], include_authorized_operations=False), 1).groups[0]
    if d.error_code != 0:
        return None
    return {m.client_id: (m.member_epoch, {p for t in m.assignment.topic_partitions for p in t.partitions})
            for m in d.members}


def test_revocation_answered_after_the_client_timed_out(kcoord_cluster_factory):
    # the stalled follower keeps its ZooKeeper session and its place in the ISR
    cluster = kcoord_cluster_factory(3, overrides=SERVER, session_timeout_ms=60000)
    topic, group = unique("slowhb"), unique("slowhb-group")
    create(cluster.bootstrap, topic, PARTITIONS, 3)
    old = python_member("confluent", cluster.bootstrap, topic, group, group_protocol="consumer", name="rdkafka-old")
    new = None
    stopped = None
    try:
        old.wait_for(lambda m: m.assignment() == set(range(PARTITIONS)), SETTLE_S, "every partition")
        offsets_partition = partition_for(group, 50)
        state = cluster.state(OFFSETS, offsets_partition)
        coordinator = state["leader"]
        stopped = next(n for n in state["isr"] if n != coordinator)
        # the new member's JVM is up before the stall (it joins within the stall)
        new = java4_member(cluster.bootstrap, topic, group, name="java-new")
        new.wait_for(lambda m: m.events("started"), SETTLE_S, "the JVM to start")
        os.kill(cluster.node(stopped).proc.pid, signal.SIGSTOP)
        # the old member is told to revoke (its assignment halved) while the write that says so
        # waits for the stalled follower ...
        wait_for(lambda: (d := describe(cluster, group, coordinator)) is not None and "java-new" in d
                 and len(d["rdkafka-old"][1]) < PARTITIONS, SETTLE_S, "the coordinator to halve the old member's assignment")
        halved = time.time()
        # ... until its librdkafka gives up on the answer (a heartbeat after it waits behind it)
        old.wait_for(lambda m: any(timed_out_heartbeat(line, halved) for line in m.stderr_lines()), SETTLE_S,
                     "librdkafka to time a ConsumerGroupHeartbeat out")
        assert stopped in cluster.state(OFFSETS, offsets_partition)["isr"]  # the answer still waits
        os.kill(cluster.node(stopped).proc.pid, signal.SIGCONT)
        stopped = None
        new.wait_for(lambda m: m.assignment(), RECOVER_S, "a share of the partitions")
        old.wait_for(lambda m: m.assignment() is not None and len(m.assignment()) < PARTITIONS, RECOVER_S,
                     "the old member to give partitions up")
        assert old.assignment().isdisjoint(new.assignment())
        assert old.assignment() | new.assignment() == set(range(PARTITIONS))
    finally:
        if stopped is not None:
            os.kill(cluster.node(stopped).proc.pid, signal.SIGCONT)
        for m in (old, new):
            if m is not None:
                m.kill()


def timed_out_heartbeat(line: str, after: float) -> bool:
    """A librdkafka log line saying a ConsumerGroupHeartbeat request timed out, logged after
    `after` (its "%5|SECONDS|REQTMOUT|..." prefix)."""
    m = re.match(r"%\d\|(\d+\.\d+)\|REQTMOUT\|", line)
    return m is not None and float(m.group(1)) >= after and "ConsumerGroupHeartbeat" in line
