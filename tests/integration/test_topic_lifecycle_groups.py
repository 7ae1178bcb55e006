"""A consumer group of librdkafka (confluent-kafka) and Java kafka-clients members while its
topic changes under it, as against Kafka: the members learn of the change through Metadata
(refreshed every second here, as librdkafka's own tests configure it), and rebalance.

- CreatePartitions: the new partitions are assigned and their records consumed.
- DeleteTopics: every partition is revoked from the members, the group's committed offsets of
  the topic are gone, and when the topic is created again the members consume the new topic
  from its first offset (an old committed offset left behind would make them skip records).
"""
from __future__ import annotations

import os
import time

import pytest
from clientlib import java_member, python_member, wait_balanced
from confluent_kafka import Producer
from conftest import committed, unique
from test_topic_admin import ck_create, ck_delete_error, ck_grow_error

pytestmark = pytest.mark.integration

CK_CONF = {"topic.metadata.refresh.interval.ms": 1000}
JAVA_CONF = {"metadata.max.age.ms": 1000}


def produce_keyed(bootstrap: str, topic: str, keys: list[str], partitions: int) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "message.timeout.ms": 20000})
    for i, k in enumerate(keys):
        p.produce(topic, key=k.encode(), value=b"v", partition=i % partitions)
    assert p.flush(30) == 0


def consumed_keys(members) -> set[str]:
    return {k for m in members for _, _, k in m.consumed()}


def wait_keys(members, keys: set[str], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not keys <= consumed_keys(members):
        if time.monotonic() > deadline:
            missing = sorted(keys - consumed_keys(members))[:10]
            raise AssertionError(f"{what}: {len(keys - consumed_keys(members))} keys never consumed, e.g. {missing}\n"
                                 + "\n".join(m.describe() for m in members))
        time.sleep(0.2)


def start_group(bootstrap: str, topic: str, group: str, members: list) -> list:
    ck = python_member("confluent", bootstrap, topic, group, name="ck", conf=CK_CONF)
    members.append(ck)
    jv = java_member(bootstrap, topic, group, name="java", conf=JAVA_CONF)
    members.append(jv)
    return [ck, jv]


def test_new_partitions_reach_a_mixed_group(kcoord, members):
    b = kcoord.bootstrap
    topic, group = unique("grow-group"), unique("g")
    ck_create(b, topic, 2)
    group_members = start_group(b, topic, group, members)
    wait_balanced(group_members, 2, 90, "first assignment over 2 partitions")
    first = [f"a{i}" for i in range(20)]
    produce_keyed(b, topic, first, 2)
    wait_keys(group_members, set(first), 60, "records of the first 2 partitions")
    assert ck_grow_error(b, topic, 6) is None
    wait_balanced(group_members, 6, 90, "assignment over the 6 partitions after CreatePartitions")
    second = [f"b{i}" for i in range(60)]
    produce_keyed(b, topic, second, 6)
    wait_keys(group_members, set(second), 60, "records of all 6 partitions")
    for m in group_members:
        assert m.close() == 0, m.describe()
    assert set(committed(b, group, topic)) == set(range(6))


def test_deleting_the_topic_of_a_mixed_group(kcoord_factory, members):
    # Java consumers ask Metadata to auto-create what they subscribe to (allow.auto.create.topics,
    # true by default), so against a broker that allows it the deleted topic comes straight
    # back, as with Kafka: this broker does not.
    kcoord = kcoord_factory({"auto.create.topics.enable": "false"})
    b = kcoord.bootstrap
    topic, group = unique("del-group"), unique("g")
    ck_create(b, topic, 4)
    group_members = start_group(b, topic, group, members)
    wait_balanced(group_members, 4, 90, "first assignment over 4 partitions")
    old = [f"old{i}" for i in range(200)]
    produce_keyed(b, topic, old, 4)
    wait_keys(group_members, set(old), 60, "records before the deletion")
    deadline = time.monotonic() + 30
    while set(committed(b, group, topic)) != set(range(4)) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert committed(b, group, topic) == {p: 50 for p in range(4)}

    assert ck_delete_error(b, topic) is None
    for m in group_members:  # the topic left the metadata: every partition is revoked
        m.wait_for(lambda m: m.assignment() == set(), 90, "its partitions revoked after the deletion")
    assert committed(b, group, topic) == {}
    assert not [n for n in os.listdir(kcoord.log_dir) if n.startswith(topic)]
    assert all(m.alive() for m in group_members), "\n".join(m.describe() for m in group_members)

    ck_create(b, topic, 2)  # the same name, a new topic: consumed from its first offset
    wait_balanced(group_members, 2, 90, "assignment over the recreated topic")
    new = [f"new{i}" for i in range(10)]
    produce_keyed(b, topic, new, 2)
    wait_keys(group_members, set(new), 60, "every record of the recreated topic")
    new_offsets = {(p, o) for m in group_members for p, o, k in m.consumed() if k.startswith("new")}
    assert new_offsets == {(p, o) for p in range(2) for o in range(5)}
    for m in group_members:
        assert m.close() == 0, m.describe()
    assert committed(b, group, topic) == {0: 5, 1: 5}
