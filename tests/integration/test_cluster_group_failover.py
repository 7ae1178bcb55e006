"""The group failover a user meets, on three kcoord nodes and a real ZooKeeper: the node
coordinating a consumer group is SIGKILLed in the middle of a stream of commits, or in the
middle of a rebalance, while real members (confluent-kafka with the classic and the consumer
protocol, aiokafka) consume a topic that a producer keeps writing to, each in its own
process (tests/clientlib.py: they commit synchronously after every batch and report what they
consumed and what was acknowledged, with wall-clock times).

Checked afterwards:
- the members find the new coordinator and go on committing there;
- every commit acknowledged before the SIGKILL survives: no record below it is delivered
  again after the failover, i.e. records are re-delivered only from the last committed offset
  (every commit waited for the in-sync replicas, offsets.commit.required.acks -1);
- the group's generation survives: a rebalance on the new coordinator continues from the
  generation (group epoch) the old one had, never from a new group;
- every produced record is consumed, and the group's committed offsets, read from the new
  coordinator, end at the log end.

kafka-python 3.0.12 members, whose node is also a leader of the topic, are in
test_cluster_kafka_python.py (they stopped receiving records after a failover while incremental
fetch sessions checked a replicated partition's epoch against 0, fixed in dfb37e6).
"""
from __future__ import annotations

import contextlib
import signal
import threading
import time
from collections.abc import Iterator

import pytest
from clientlib import Background, python_member, wait_balanced
from confluent_kafka import Producer
from conftest import call, unique
from kafka.protocol.admin import DescribeGroupsRequest
from kafka.protocol.consumer import OffsetFetchRequest
from test_cluster import FAILOVER_S, all_online, create

from kcoord.protocol.messages import ConsumerGroupDescribeRequest
from kcoord.protocol.partitioner import partition_for
from kcoord.testing.cluster import wait_for

pytestmark = pytest.mark.integration

OFFSETS = "__consumer_offsets"
PARTITIONS = 4
COMMIT_TIMEOUT_S = 5.0  # offsets.commit.timeout.ms, Kafka's default
MEMBERS_S = 120.0  # members joining, balancing, catching up, on a shared machine


class KeepProducing:
    """An idempotent acks=all producer writing numbered keys round the partitions until
    stopped; `acked` holds every key whose write was acknowledged."""

    def __init__(self, bootstrap: str, topic: str, per_second: float = 100.0) -> None:
        self.topic = topic
        self.acked: set[str] = set()
        self._stop = threading.Event()
        self._producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                                   "linger.ms": 5, "message.timeout.ms": 120000})
        self._interval = 1.0 / per_second
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        n = 0
        while not self._stop.is_set():
            key = str(n)
            self._producer.produce(self.topic, key=key, value=b"v" * 20, partition=n % PARTITIONS,
                                   on_delivery=lambda err, msg, key=key: err is None and self.acked.add(key))
            self._producer.poll(0)
            n += 1
            time.sleep(self._interval)
        self._producer.flush(120)

    def stop(self) -> set[str]:
        self._stop.set()
        self._thread.join(150)
        assert not self._thread.is_alive(), "the producer did not flush its records"
        return set(self.acked)


def coordinator_node(cluster, group: str) -> int:
    return cluster.state(OFFSETS, partition_for(group, 50))["leader"]


def committed_offsets(cluster, group: str, topic: str) -> dict[int, int]:
    """The group's committed offsets as its coordinator answers them now."""
    r = call(cluster.node(coordinator_node(cluster, group)).bootstrap,
             OffsetFetchRequest(version=7, group_id=group, topics=None, require_stable=False), 7)
    assert r.error_code == 0, r
    return {q.partition_index: q.committed_offset for t in r.topics if t.name == topic for q in t.partitions}


def settled_committed(cluster, group: str, topic: str) -> dict[int, int]:
    """The committed offsets once a commit the members sent before their SIGKILL can no longer
    land: such a commit is answered, or fails, within offsets.commit.timeout.ms (5 s), so the
    offsets are settled when they stay the same for longer than that."""
    window = COMMIT_TIMEOUT_S + 1.0
    last, since = committed_offsets(cluster, group, topic), time.monotonic()

    def settled() -> dict[int, int] | None:
        nonlocal last, since
        now = committed_offsets(cluster, group, topic)
        if now != last:
            last, since = now, time.monotonic()
            return None
        return now if time.monotonic() - since > window else None

    return wait_for(settled, MEMBERS_S, "the group's committed offsets to settle", interval=0.5)


def end_offsets(cluster, topic: str) -> dict[int, int]:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": unique("watermarks")})
    try:
        return {p: c.get_watermark_offsets(TopicPartition(topic, p), timeout=20)[1] for p in range(PARTITIONS)}
    finally:
        c.close()


def acknowledged(members: list[Background], before: float) -> dict[int, int]:
    """The highest offset per partition whose commit a member reported acknowledged before
    `before` (wall clock)."""
    out: dict[int, int] = {}
    for m in members:
        for e in m.events("committed"):
            if e["ts"] < before:
                for p, o in e["offsets"].items():
                    out[int(p)] = max(out.get(int(p), -1), o)
    return out


def delivered_after(members: list[Background], after: float) -> list[tuple[int, int]]:
    return [(r[0], r[1]) for m in members for e in m.events("records") if e["ts"] > after for r in e["records"]]


def commits_after(members: list[Background], after: float) -> int:
    return sum(1 for m in members for e in m.events("committed") if e["ts"] > after)


def generations(members: list[Background], after: float = 0.0) -> list[int]:
    """The generations the members were assigned partitions in (classic), after `after`."""
    return [e["generation"] for m in members for e in m.events("assigned")
            if e["ts"] > after and e.get("generation") is not None]


def consumer_group(cluster, group: str) -> tuple[int, set[str]] | None:
    """A consumer group's epoch and member ids as its coordinator describes it (KIP-848);
    None while it cannot answer (loading, moving)."""
    d = call(cluster.node(coordinator_node(cluster, group)).bootstrap,
             ConsumerGroupDescribeRequest(version=1, group_ids=[group], include_authorized_operations=False),
             1).groups[0]
    return (d.group_epoch, {m.member_id for m in d.members}) if d.error_code == 0 else None


def classic_state(cluster, group: str) -> str:
    d = call(cluster.node(coordinator_node(cluster, group)).bootstrap,
             DescribeGroupsRequest(version=5, groups=[group], include_authorized_operations=False), 5).groups[0]
    return d.group_state if d.error_code == 0 else f"error {d.error_code}"


def first_delivered(member: Background) -> dict[int, int]:
    out: dict[int, int] = {}
    for p, o, _ in member.consumed():
        out.setdefault(p, o)
    return out


def settle_and_check(cluster, kind: tuple[str, str], members: list[Background], producer: KeepProducing,
                     group: str, topic: str, killed_at: float, before: dict[int, int]) -> None:
    """After the failover: the members commit on the new coordinator; then they vanish
    (SIGKILL, no LeaveGroup, no last commit) and a new member of the group starts exactly at the
    committed offsets; once the producer stops, everything is consumed and committed."""
    wait_for(lambda: commits_after(members, killed_at) >= 3 and all(m.alive() for m in members), FAILOVER_S + 60,
             "commits acknowledged by the new coordinator")
    # re-delivered only from the last committed offset: nothing below a commit acknowledged
    # before the SIGKILL came back to the members after it
    rewound = [(p, o) for p, o in delivered_after(members, killed_at) if o < before.get(p, 0)]
    assert not rewound, f"records below acknowledged commits {before} delivered again: {rewound[:10]}"
    for m in members:
        m.kill()
    committed = settled_committed(cluster, group, topic)
    acked = acknowledged(members, time.time())
    # every acknowledged commit survived (a commit in flight at the members' SIGKILL may be higher)
    assert all(committed.get(p, -1) >= o for p, o in acked.items()), (committed, acked)
    assert all(committed.get(p, -1) >= o for p, o in before.items()), (committed, before)
    fresh = start_members(cluster, kind, topic, group, 1, "fresh")
    members.extend(fresh)
    wait_for(lambda: len(first_delivered(fresh[0])) == PARTITIONS, FAILOVER_S + MEMBERS_S,
             "the new member to get records of every partition")
    # exactly from the committed offsets; a partition the group never committed (its records
    # not yet consumed when the members died) from the log's start (auto.offset.reset earliest)
    assert first_delivered(fresh[0]) == {p: committed.get(p, 0) for p in range(PARTITIONS)}
    produced = producer.stop()
    ends = end_offsets(cluster, topic)
    assert sum(ends.values()) == len(produced)  # idempotent: every acknowledged write once
    try:
        wait_for(lambda: committed_offsets(cluster, group, topic) == ends, MEMBERS_S,
                 "the group's commits to reach the log end")
    except AssertionError as e:
        raise AssertionError(f"{e}: committed {committed_offsets(cluster, group, topic)}, log end {ends}\n"
                             + fresh[0].describe()) from None
    consumed = {r[2] for m in members for r in m.consumed()}
    assert produced <= consumed, f"{len(produced - consumed)} records never consumed"


def start_members(cluster, kind: tuple[str, str], topic: str, group: str, count: int,
                  name: str = "") -> list[Background]:
    lib, protocol = kind
    return [python_member(lib, cluster.bootstrap, topic, group, name=f"{lib}-{name}{i}", group_protocol=protocol)
            for i in range(count)]


@contextlib.contextmanager
def committing_group(cluster, kind: tuple[str, str], prefix: str,
                     commits: int) -> Iterator[tuple[str, str, KeepProducing, list[Background]]]:
    """(topic, group, producer, members): a new topic of PARTITIONS partitions (replication
    factor 3, every leader online) that a KeepProducing writes to, and two members of `kind` in
    a new group, balanced and with `commits` commits acknowledged. On the way out every member
    (those added to the list too) is killed and the producer stopped."""
    cluster.coordinator_topics()  # created at the first FindCoordinator
    wait_for(lambda: all_online(cluster, OFFSETS, 50), 60, "__consumer_offsets leaders")
    topic, group = unique(prefix), unique("g")
    create(cluster.bootstrap, topic, PARTITIONS, 3)
    wait_for(lambda: all_online(cluster, topic, PARTITIONS), 30, "leaders")
    producer = KeepProducing(cluster.bootstrap, topic)
    members = start_members(cluster, kind, topic, group, 2)
    try:
        wait_balanced(members, PARTITIONS, MEMBERS_S, "two members")
        wait_for(lambda: commits_after(members, 0) >= commits, MEMBERS_S, "a stream of commits")
        yield topic, group, producer, members
    finally:
        for m in members:
            m.kill()
        producer.stop()


KINDS = [("confluent", "classic"), ("confluent", "consumer"), ("aiokafka", "classic")]


@pytest.mark.parametrize("kind", KINDS, ids=["-".join(k) for k in KINDS])
def test_coordinator_killed_in_a_stream_of_commits(kcoord_cluster, kind):
    c = kcoord_cluster
    with committing_group(c, kind, "failover", 10) as (topic, group, producer, members):
        described = wait_for(lambda: consumer_group(c, group), 30, "its description") if kind[1] == "consumer" else None
        stored = max(generations(members) or [-1])
        old = coordinator_node(c, group)
        killed_at = time.time()
        c.kill(old)
        before = acknowledged(members, killed_at)
        assert before, "no commit acknowledged before the SIGKILL"
        wait_for(lambda: coordinator_node(c, group) not in (old, -1), FAILOVER_S, "a new coordinator")
        if described is not None:
            # the new coordinator loaded the same group: its epoch and members
            loaded = wait_for(lambda: consumer_group(c, group), FAILOVER_S, "the new coordinator to describe it")
            assert loaded[0] >= described[0] and loaded[1] == described[1], (described, loaded)
        settle_and_check(c, kind, members, producer, group, topic, killed_at, before)
        if described is None:
            # members that kept their generation committed with it on the new coordinator (the
            # commits above); a rebalance there, if any, continued from it
            assert stored >= 1 and all(g > stored for g in generations(members, killed_at))


REBALANCING = [("confluent", "classic"), ("aiokafka", "classic")]


@pytest.mark.parametrize("kind", REBALANCING, ids=["-".join(k) for k in REBALANCING])
def test_coordinator_killed_in_the_middle_of_a_rebalance(kcoord_cluster, kind):
    """One member is paused (SIGSTOP) and a third joins: the group waits in PreparingRebalance
    for the paused member, and the coordinator's node is SIGKILLed then. The new coordinator
    loads the group at the generation the old one had stored; the rebalance completes there at
    a later generation, with the three members."""
    c = kcoord_cluster
    with committing_group(c, kind, "rebal", 6) as (topic, group, producer, members):
        stored = max(generations(members))
        paused = members[0]
        paused._signal_group(signal.SIGSTOP)  # noqa: SLF001 - the member stops answering, mid-group
        try:
            members.append(python_member(kind[0], c.bootstrap, topic, group, name=f"{kind[0]}-joining"))
            wait_for(lambda: classic_state(c, group) == "PreparingRebalance", MEMBERS_S,
                     "the group to wait for its members in PreparingRebalance")
            old = coordinator_node(c, group)
            killed_at = time.time()
            c.kill(old)
            before = acknowledged(members, killed_at)
        finally:
            paused._signal_group(signal.SIGCONT)  # noqa: SLF001
        assert before
        wait_for(lambda: coordinator_node(c, group) not in (old, -1), FAILOVER_S, "a new coordinator")
        wait_balanced(members, PARTITIONS, FAILOVER_S + MEMBERS_S, "three members on the new coordinator")
        after = generations(members, killed_at)
        assert after and min(after) > stored, (stored, after)  # continued, not a new group's generation 1
        settle_and_check(c, kind, members, producer, group, topic, killed_at, before)
