"""A Go client (sarama, tests/compat/go/sarama) on a three-node cluster, with a topic of
replication factor 3: franz-go-style checks of what a Go user meets when the node coordinating
their group dies.

sarama produces with acks=all (WaitForAll) to a topic whose three partitions each have three
replicas; a sarama consumer group member reads everything, marking each message, and commits
on close. The node coordinating the group (the leader of its __consumer_offsets partition) is
SIGKILLed. Once the controller has moved that partition (and the data partitions' leadership
and ISR) to the surviving nodes, sarama produces more with acks=all, and a sarama member of
the same group resumes from the committed offsets: it reads exactly the new messages, none of
the first ones again, and commits past them on the new coordinator."""
from __future__ import annotations

import pytest
from clientlib import sarama
from conftest import committed, unique
from test_cluster import FAILOVER_S, all_online, create, zk_view

from kcoord.protocol.partitioner import partition_for
from kcoord.testing.cluster import find_coordinator, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

OFFSETS = "__consumer_offsets"
PARTITIONS = 3


def test_sarama_group_resumes_from_its_committed_offsets_after_its_coordinators_node_is_killed(kcoord_cluster):
    c = kcoord_cluster
    c.coordinator_topics()  # the first FindCoordinator creates __consumer_offsets
    topic, group = unique("go-rf3"), unique("go-rf3-group")
    create(c.bootstrap, topic, PARTITIONS, 3)
    view = wait_for(lambda: all_online(c, topic, PARTITIONS), 30, "leaders of the topic")
    assert all(len(replicas) == 3 and len(isr) == 3 for _, replicas, isr in view.values()), view

    produced = sarama("produce", c.bootstrap, topic, 30, "first", timeout=120).kinds("produced")
    assert len(produced) == 30
    ends = {p: sum(1 for r in produced if r["partition"] == p) for p in range(PARTITIONS)}
    assert all(ends.values()), ends
    first = sarama("consume", c.bootstrap, topic, group, 30, timeout=180)
    assert sorted(r["value"] for r in first.kinds("consumed")) == sorted(r["value"] for r in produced)
    assert committed(c.bootstrap, group, topic) == ends

    gp = partition_for(group, 50)
    coordinator = c.state(OFFSETS, gp)["leader"]
    assert find_coordinator(c.node(coordinator).bootstrap, group) == (0, coordinator)
    c.kill(coordinator)
    survivors = sorted(set(c.nodes) - {coordinator})
    new = wait_for(lambda: (s := c.state(OFFSETS, gp))["leader"] in survivors and s["leader"], FAILOVER_S,
                   "another node to lead the group's __consumer_offsets partition")
    # acks=all from here: every data partition led by a survivor, the dead node out of its ISR
    wait_for(lambda: all(v and v[0] in survivors and coordinator not in v[2] for v in zk_view(c, topic).values()),
             FAILOVER_S, "the data partitions led by survivors, the dead node out of their ISR")
    wait_for(lambda: all(find_coordinator(c.node(n).bootstrap, group) == (0, new) for n in survivors), 60,
             "the survivors to name the new coordinator")

    more = sarama("produce", c.bootstrap, topic, 6, "second", timeout=120).kinds("produced")
    assert len(more) == 6
    second = sarama("consume", c.bootstrap, topic, group, 6, timeout=180)
    # resumed from the committed offsets: exactly the new messages, none of the first 30 again
    assert sorted(r["value"] for r in second.kinds("consumed")) == sorted(r["value"] for r in more)
    for r in second.kinds("consumed"):
        assert r["offset"] >= ends[r["partition"]], r
    after = {p: ends[p] + sum(1 for r in more if r["partition"] == p) for p in range(PARTITIONS)}
    assert committed(c.bootstrap, group, topic) == after  # committed on the new coordinator
