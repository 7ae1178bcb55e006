"""The cluster layer's pure rules as tables: replica assignment (Kafka's ZooKeeper-mode
algorithm, racks included), leader election by reason, preferred-replica imbalance, and the
znodes' JSON in Kafka's formats."""
from __future__ import annotations

import json
import random
import uuid
from collections import Counter

import pytest

from kcoord.server.cluster import election, znodes
from kcoord.server.cluster.assignment import AssignmentError, assign_replicas, check_manual, rack_alternated
from kcoord.server.cluster.partition_state import PartitionState

# ---- assignment


def test_assignment_without_racks_is_kafkas_for_a_fixed_start():
    # five brokers, ten partitions, RF 3, start index and shift 0: the first replica walks the
    # brokers, the followers' shift grows by one after each round of the list
    got = assign_replicas(dict.fromkeys(range(5)), 10, 3, start_index=0, shift=0)
    assert got == {0: (0, 1, 2), 1: (1, 2, 3), 2: (2, 3, 4), 3: (3, 4, 0), 4: (4, 0, 1),
                   5: (0, 2, 3), 6: (1, 3, 4), 7: (2, 4, 0), 8: (3, 0, 1), 9: (4, 1, 2)}


@pytest.mark.parametrize("racks, order", [
    ({0: "rack1", 1: "rack3", 2: "rack3", 3: "rack2", 4: "rack2", 5: "rack1"}, [0, 3, 1, 5, 4, 2]),
    ({0: "a", 1: "a", 2: "a", 3: "b"}, [0, 3, 1, 2]),
    ({7: "x"}, [7]),
])
def test_rack_alternated_broker_list(racks, order):
    assert rack_alternated(racks) == order


@pytest.mark.parametrize("seed", range(20))
def test_rack_aware_assignment_spreads_replicas_over_racks_and_leaders_over_brokers(seed):
    rng = random.Random(seed)
    racks = {0: "r1", 1: "r1", 2: "r2", 3: "r2", 4: "r3", 5: "r3"}
    got = assign_replicas(racks, 12, 3, rng=rng)
    assert sorted(got) == list(range(12))
    for replicas in got.values():
        assert len(set(replicas)) == 3
        assert len({racks[b] for b in replicas}) == 3  # one replica per rack while racks suffice
    assert set(Counter(r[0] for r in got.values()).values()) == {2}  # 12 leaders over 6 brokers


def test_rack_aware_with_more_replicas_than_racks_still_uses_distinct_brokers():
    racks = {0: "r1", 1: "r1", 2: "r2", 3: "r2"}
    for replicas in assign_replicas(racks, 8, 3, rng=random.Random(1)).values():
        assert len(set(replicas)) == 3 and {racks[b] for b in replicas} == {"r1", "r2"}


def test_racks_count_only_when_every_broker_has_one():
    mixed = {0: "r1", 1: None, 2: "r2"}
    assert assign_replicas(mixed, 3, 2, start_index=0, shift=0) == \
        assign_replicas(dict.fromkeys(mixed), 3, 2, start_index=0, shift=0)


@pytest.mark.parametrize("brokers, rf", [(3, 4), (1, 2), (0, 1)])
def test_replication_factor_above_the_broker_count_is_refused(brokers, rf):
    with pytest.raises(AssignmentError, match=f"larger than available brokers: {brokers}"):
        assign_replicas(dict.fromkeys(range(brokers)), 1, rf)


def test_added_partitions_continue_the_walk():
    full = assign_replicas(dict.fromkeys(range(3)), 6, 2, start_index=1, shift=2)
    tail = assign_replicas(dict.fromkeys(range(3)), 3, 2, start_partition=3, start_index=1, shift=2)
    assert tail == {p: full[p] for p in (3, 4, 5)}


@pytest.mark.parametrize("assignment, problem", [
    ({0: (1, 2), 1: (2, 3)}, None),
    ({0: (1, 1)}, "Duplicate brokers"),
    ({0: (1, 9)}, "Unknown broker"),
    ({0: (1, 2), 1: (3,)}, "same number of replicas"),
    ({0: ()}, "empty"),
])
def test_manual_assignment_checks(assignment, problem):
    got = check_manual(assignment, {1, 2, 3})
    assert (got is None) if problem is None else (problem in got)


# ---- elections: (replicas, isr, live, unclean) -> (leader, isr) or None

OFFLINE = [
    # the first replica in assignment order that is live and in the ISR; the ISR keeps its live members
    ((1, 2, 3), (1, 2, 3), {2, 3}, False, (2, (2, 3))),
    ((1, 2, 3), (3, 1), {2, 3}, False, (3, (3,))),
    ((3, 2, 1), (1, 2, 3), {1, 2}, False, (2, (1, 2))),
    # no live ISR member: none, unless unclean (then the first live replica, alone in the ISR)
    ((1, 2, 3), (1,), {2, 3}, False, None),
    ((1, 2, 3), (1,), {2, 3}, True, (2, (2,))),
    ((1, 2, 3), (1, 2, 3), set(), True, None),
]


@pytest.mark.parametrize("replicas, isr, live, unclean, expected", OFFLINE)
def test_offline_partition_election(replicas, isr, live, unclean, expected):
    e = election.offline(replicas, isr, live, unclean)
    assert (None if e is None else (e.leader, e.isr)) == expected
    if e is not None:
        assert e.unclean == (e.leader not in isr)


@pytest.mark.parametrize("replicas, live, expected", [
    ((1, 2, 3), {1, 2, 3}, (1, (1, 2, 3))),
    ((1, 2, 3), {2, 3}, (2, (2, 3))),
    ((1, 2, 3), set(), None),
])
def test_new_partition_election(replicas, live, expected):
    e = election.new_partition(replicas, live)
    assert (None if e is None else (e.leader, e.isr)) == expected


@pytest.mark.parametrize("replicas, isr, live, expected", [
    ((1, 2, 3), (2, 1, 3), {1, 2, 3}, 1),
    ((1, 2, 3), (2, 3), {1, 2, 3}, None),  # the preferred replica is not in sync
    ((1, 2, 3), (2, 1, 3), {2, 3}, None),  # nor alive
])
def test_preferred_replica_election(replicas, isr, live, expected):
    e = election.preferred(replicas, isr, live)
    assert (None if e is None else e.leader) == expected


@pytest.mark.parametrize("replicas, isr, shutting, expected", [
    ((1, 2, 3), (1, 2, 3), {1}, (2, (2, 3))),
    ((1, 2, 3), (1, 3), {1}, (3, (3,))),
    ((1, 2, 3), (1,), {1}, None),  # nowhere to move: it stays until the broker goes
])
def test_controlled_shutdown_election(replicas, isr, shutting, expected):
    e = election.controlled_shutdown(replicas, isr, {1, 2, 3}, shutting)
    assert (None if e is None else (e.leader, e.isr)) == expected


@pytest.mark.parametrize("leader, isr, gone, expected", [
    (1, (1, 2, 3), 2, (1, (1, 3))),
    (1, (1, 2, 3), 1, (-1, (2, 3))),
    (1, (1,), 1, (-1, (1,))),  # the last ISR member stays: a later election knows it would be unclean
])
def test_a_replica_going_away_leaves_the_isr(leader, isr, gone, expected):
    assert election.without_replica(leader, isr, gone) == expected


def test_imbalance_over_the_percentage_moves_back_to_preferred():
    preferred = {("t", p): p % 2 + 1 for p in range(10)}  # broker 1 preferred for 5, broker 2 for 5
    leaders = dict(preferred)
    leaders[("t", 0)] = 1
    leaders[("t", 1)] = 1  # one of broker 2's five (20%) led by broker 1
    assert election.imbalanced(leaders, preferred, 10) == [("t", 1)]
    assert election.imbalanced(leaders, preferred, 20) == []


# ---- znodes


def test_znode_formats_are_kafkas():
    info = znodes.BrokerInfo(2, {"PLAINTEXT": ("127.0.0.1", 9092), "SSL": ("h", 9093)},
                             {"PLAINTEXT": "PLAINTEXT", "SSL": "SSL"}, "r1")
    reg = json.loads(znodes.encode_broker(info))
    assert reg["version"] == 5 and reg["rack"] == "r1" and reg["host"] == "127.0.0.1" and reg["port"] == 9092
    assert reg["endpoints"] == ["PLAINTEXT://127.0.0.1:9092", "SSL://h:9093"]
    assert reg["listener_security_protocol_map"] == {"PLAINTEXT": "PLAINTEXT", "SSL": "SSL"}
    assert znodes.decode_broker(2, znodes.encode_broker(info)) == info

    tid = uuid.uuid4()
    topic = znodes.TopicAssignment("t", tid, {0: (1, 2), 1: (2, 3)})
    obj = json.loads(znodes.encode_topic(topic))
    assert obj["version"] == 3 and obj["partitions"] == {"0": [1, 2], "1": [2, 3]}
    assert znodes.topic_id_from_text(obj["topic_id"]) == tid and len(obj["topic_id"]) == 22
    assert znodes.decode_topic("t", znodes.encode_topic(topic)) == topic

    st = PartitionState("t", 1, 2, 5, (2, 3), (2, 3), 4, 7)
    assert json.loads(znodes.encode_state(st)) == {"controller_epoch": 4, "leader": 2, "version": 1,
                                                   "leader_epoch": 5, "isr": [2, 3]}
    assert znodes.decode_state("t", 1, (2, 3), znodes.encode_state(st), 7) == st
    assert znodes.state_path("t", 1) == "/brokers/topics/t/partitions/1/state"
    assert json.loads(znodes.encode_controller(3))["brokerid"] == 3
    assert znodes.decode_epoch(znodes.encode_epoch(12)) == 12
    assert znodes.decode_cluster_id(znodes.encode_cluster_id("abc")) == "abc"
