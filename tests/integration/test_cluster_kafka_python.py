"""kafka-python 3.0.12 consumers in a group on three kcoord nodes and a real ZooKeeper: the
node that coordinates the group and leads partitions of the topic is SIGKILLed while the
members consume and commit after every batch (tests/clientlib.py's member, in its own
process). kafka-python validates its positions after the leader epochs change
(OffsetForLeaderEpoch, KIP-320) and fetches from the new leaders in incremental fetch
sessions; checked afterwards, as test_cluster_group_failover.py checks the other clients:
the members go on consuming and committing on the new coordinator, nothing below a commit
acknowledged before the SIGKILL is delivered again, a fresh member starts at the committed
offsets, and the group's commits reach the log end once the producer stops.

Before dfb37e6 this failed on every run: an incremental fetch session checked a replicated
partition's current_leader_epoch against 0, so after the failover (epoch 1) the fresh member's
session fetches never returned the last records and its commits stopped short of the log end.
"""
from __future__ import annotations

import time

import pytest
from test_cluster import FAILOVER_S
from test_cluster_group_failover import (
    PARTITIONS,
    acknowledged,
    committing_group,
    coordinator_node,
    settle_and_check,
)

from kcoord.testing.cluster import wait_for

pytestmark = pytest.mark.integration

KIND = ("kafka-python", "classic")


def test_kafka_python_group_survives_its_leader_and_coordinator_killed(kcoord_cluster):
    c = kcoord_cluster
    with committing_group(c, KIND, "kp", 10) as (topic, group, producer, members):
        old = coordinator_node(c, group)
        led = [p for p in range(PARTITIONS) if c.state(topic, p)["leader"] == old]
        assert led, f"node {old} coordinates the group but leads no partition of {topic}"
        killed_at = time.time()
        c.kill(old)
        before = acknowledged(members, killed_at)
        assert before, "no commit acknowledged before the SIGKILL"
        wait_for(lambda: coordinator_node(c, group) not in (old, -1), FAILOVER_S, "a new coordinator")
        wait_for(lambda: all(c.state(topic, p)["leader"] not in (old, -1) for p in led), FAILOVER_S,
                 f"new leaders of partitions {led}")
        settle_and_check(c, KIND, members, producer, group, topic, killed_at, before)
