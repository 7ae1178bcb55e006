"""The reassignment rules of server/cluster/reassignment.py as tables: RS/AR/RR as Kafka's
ReplicaAssignment computes them, target validation, and when a reassignment completes with
which leader and ISR; and the topic znode's JSON with a reassignment in progress."""
from __future__ import annotations

import json
import uuid

import pytest

from kcoord.server.cluster import znodes
from kcoord.server.cluster.reassignment import (
    ReplicaAssignment,
    completion,
    invalid_target,
    of,
    with_partition,
)


@pytest.mark.parametrize(("current", "target", "replicas", "adding", "removing"), [
    ((1, 2, 3), (4, 5, 6), (4, 5, 6, 1, 2, 3), (4, 5, 6), (1, 2, 3)),  # Kafka's own example
    ((1, 2), (3, 2), (3, 2, 1), (3,), (1,)),
    ((1, 2, 3), (3, 4, 2), (3, 4, 2, 1), (4,), (1,)),
    ((1, 2), (2, 1), (2, 1), (), ()),  # a reorder: nothing moves
    ((1, 2, 3), (1, 2), (1, 2, 3), (), (3,)),  # a smaller replication factor
])
def test_reassign_to(current, target, replicas, adding, removing):
    ra = ReplicaAssignment(current).reassign_to(target)
    assert (ra.replicas, ra.adding, ra.removing) == (replicas, adding, removing)
    # Kafka cannot keep the original order once the target overlaps it (its own comment says so)
    assert sorted(ra.origin) == sorted(current) and ra.target == target
    assert ra.reassigning == bool(adding or removing)


def test_a_new_target_replaces_one_in_progress_and_cancel_goes_back_to_the_origin():
    moving = ReplicaAssignment((1, 2)).reassign_to((3, 4))  # RS 3,4,1,2
    again = moving.reassign_to((1, 5))  # 3 and 4 are no longer wanted
    assert (again.replicas, again.adding, again.removing) == ((1, 5, 2), (5,), (2,))
    cancelled = moving.reassign_to(moving.origin)
    assert (cancelled.replicas, cancelled.adding, cancelled.removing) == ((1, 2), (), ())


@pytest.mark.parametrize(("target", "live", "message"), [
    ((), {1, 2, 3}, "Empty replica list specified in partition reassignment."),
    ((1, 1), {1, 2, 3}, "Duplicate replica ids in partition reassignment replica list: ArrayBuffer(1, 1)"),
    ((-1, 2), {1, 2, 3}, "Invalid broker id in replica list: ArrayBuffer(-1, 2)"),
    ((1, 9), {1, 2, 3}, "Replica assignment has brokers that are not alive. Replica list: ArrayBuffer(9), "
                        "live broker list: Set(1, 2, 3)"),
    ((2, 1), {1}, None),  # replicas kept need not be alive: only the ones added
    ((3, 1), {1, 2, 3}, None),
])
def test_invalid_target(target, live, message):
    assert invalid_target(target, ReplicaAssignment((1, 2)), live) == message


RA = ReplicaAssignment((3, 2, 1), (3,), (1,))  # [1, 2] -> [3, 2]


@pytest.mark.parametrize(("leader", "isr", "live", "expected"), [
    (1, (1, 2), {1, 2, 3}, None),  # 3 has not caught up
    (1, (1, 2, 3), {1, 2, 3}, (3, (2, 3))),  # the removed leader hands over to the first target replica
    (2, (1, 2, 3), {1, 2, 3}, (2, (2, 3))),  # a leader in the target stays
    (2, (2, 3), {2, 3}, (2, (2, 3))),
    (-1, (2, 3), {2, 3}, (3, (2, 3))),  # leaderless: the first live target replica in the ISR
    (1, (1, 2, 3), {1, 2}, (2, (2, 3))),  # 3 in the ISR but gone: 2 leads
])
def test_completion(leader, isr, live, expected):
    assert completion(RA, leader, isr, live) == expected


def test_the_topic_znode_keeps_a_reassignment_as_kafka_writes_it():
    tid = uuid.uuid4()
    topic = znodes.TopicAssignment("t", tid, {0: (1, 2), 1: (2, 3)})
    moving = with_partition(topic, 1, ReplicaAssignment((2, 3)).reassign_to((1, 3)))
    obj = json.loads(znodes.encode_topic(moving))
    assert obj["partitions"] == {"0": [1, 2], "1": [1, 3, 2]}
    assert (obj["adding_replicas"], obj["removing_replicas"]) == ({"1": [1]}, {"1": [2]})
    back = znodes.decode_topic("t", znodes.encode_topic(moving))
    assert back == moving and back.reassigning(1) and not back.reassigning(0)
    assert of(back, 1) == ReplicaAssignment((1, 3, 2), (1,), (2,))
    assert of(back, 7) == ReplicaAssignment(()) and of(None, 0) == ReplicaAssignment(())
    done = with_partition(back, 1, ReplicaAssignment((1, 3)))
    obj = json.loads(znodes.encode_topic(done))
    assert (obj["partitions"]["1"], obj["adding_replicas"], obj["removing_replicas"]) == ([1, 3], {}, {})
