"""Online migration between the classic and the consumer group protocol (KIP-848) with real
clients, each in its own process (tests/clientlib.py): a classic group of kafka-python and
aiokafka members (eager roundrobin) consumes a topic while a producer keeps writing;
confluent-kafka members with group.protocol=consumer join one by one (the first converts the
group), the classic members keep consuming inside the consumer group; the server is SIGKILLed
and restarted in the middle and the mixed group comes back as it was; then the consumer-protocol
members leave one by one and the last one's leaving turns the group classic again, the classic
members still consuming. Throughout: no partition owned by two members at once (from the
members' own assignment callbacks, timestamped), every record consumed, none twice (each member
commits what it consumed, and before giving a partition up, so the next owner starts there).
"""
from __future__ import annotations

import threading
import time
from collections import defaultdict

import pytest
from clientlib import Background, ClientError, python_member, wait_balanced
from conftest import call, unique
from kafka.admin import KafkaAdminClient, NewTopic
from kafka.protocol.admin import DescribeGroupsRequest, ListGroupsRequest

from kcoord.protocol.messages import ConsumerGroupDescribeRequest

pytestmark = pytest.mark.integration

PARTITIONS = 6
SERVER = {
    "group.consumer.min.session.timeout.ms": "6000",
    "group.consumer.session.timeout.ms": "10000",
    "group.consumer.min.heartbeat.interval.ms": "500",
    "group.consumer.heartbeat.interval.ms": "1000",
    "group.initial.rebalance.delay.ms": "0",
}


class Producer:
    """Writes a keyed record every few milliseconds, round-robin over the partitions, until
    stopped; counts what was acknowledged."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        from confluent_kafka import Producer as P

        self.p = P({"bootstrap.servers": bootstrap, "linger.ms": 5, "message.timeout.ms": 120000})
        self.topic = topic
        self.acked: set[str] = set()
        self.failed: list[str] = []
        self._stop = threading.Event()
        self._paused = threading.Event()
        self._n = 0
        self._t = threading.Thread(target=self._run, daemon=True)
        self._t.start()

    def _run(self) -> None:
        def report(err, msg) -> None:
            if err is None:
                self.acked.add(msg.key().decode())
            else:
                self.failed.append(str(err))

        while not self._stop.is_set():
            if not self._paused.is_set():
                key = f"r{self._n}"
                self.p.produce(self.topic, key=key.encode(), value=b"v", partition=self._n % PARTITIONS,
                               on_delivery=report)
                self._n += 1
            self.p.poll(0.02)
        self.p.flush(60)

    def pause(self) -> None:
        """Stop producing; returns once everything produced is acknowledged."""
        self._paused.set()
        deadline = time.monotonic() + 60
        while len(self.acked) + len(self.failed) < self._n and time.monotonic() < deadline:
            time.sleep(0.05)

    def resume(self) -> None:
        self._paused.clear()

    def stop(self) -> None:
        self._stop.set()
        self._t.join(90)


def group_type(server, group: str) -> str | None:
    r = call(server.bootstrap, ListGroupsRequest(version=5, states_filter=[], types_filter=[]), 5)
    return next((g.group_type for g in r.groups if g.group_id == group), None)


def cg_describe(server, group: str):
    return call(server.bootstrap, ConsumerGroupDescribeRequest(version=1, group_ids=[group],
                                                               include_authorized_operations=False), 1).groups[0]


def wait_settled(server, group: str, timeout: float, what: str) -> None:
    """A consumer group Stable with every member at the group epoch (a classic group: Stable)."""
    deadline = time.monotonic() + timeout
    while True:
        if group_type(server, group) == "consumer":
            d = cg_describe(server, group)
            if d.group_state == "Stable" and all(m.member_epoch == d.group_epoch for m in d.members):
                return
        else:
            dg = call(server.bootstrap, DescribeGroupsRequest(version=5, groups=[group],
                                                              include_authorized_operations=False), 5).groups[0]
            if dg.group_state == "Stable":
                return
        if time.monotonic() > deadline:
            raise ClientError(f"{what}: the group did not settle within {timeout} s")
        time.sleep(0.2)


def wait_consumed(ms: list[Background], keys: set[str], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while True:
        got = {k for m in ms for _, _, k in m.consumed()}
        if keys <= got:
            return
        if time.monotonic() > deadline:
            raise ClientError(f"{len(keys - got)} of {len(keys)} records not consumed (e.g. "
                              f"{sorted(keys - got)[:5]})\n" + "\n".join(m.describe() for m in ms))
        time.sleep(0.2)


def ownership(m: Background) -> dict[int, list[tuple[float, float]]]:
    """From the member's callbacks: for each partition, the (from, to) times it owned it."""
    start: dict[int, float] = {}
    out: dict[int, list[tuple[float, float]]] = defaultdict(list)
    for e in m.events():
        kind, ts = e["kind"], e["ts"]
        if kind == "assigned":
            parts = set(e["partitions"])
            if not e.get("incremental"):  # an eager assignment replaces what it had
                for p in [p for p in start if p not in parts]:
                    out[p].append((start.pop(p), ts))
            for p in parts:
                start.setdefault(p, ts)
        elif kind in ("revoked", "lost"):
            for p in e["partitions"]:
                if p in start:
                    out[p].append((start.pop(p), ts))
    for p, t0 in start.items():
        out[p].append((t0, float("inf")))
    return out


def assert_never_owned_twice(ms: list[Background]) -> None:
    spans: dict[int, list[tuple[float, float, str]]] = defaultdict(list)
    for m in ms:
        for p, intervals in ownership(m).items():
            spans[p] += [(a, b, m.name) for a, b in intervals]
    for p, items in spans.items():
        items.sort()
        for (a1, b1, n1), (a2, _, n2) in zip(items, items[1:], strict=False):
            assert a2 >= b1, f"partition {p} owned by {n1} ({a1:.3f}-{b1:.3f}) and {n2} from {a2:.3f}"


def assert_consumed_again_only_after_failed_commits(ms: list[Background]) -> None:
    """At least once, and no more: a record is consumed a second time only if a commit covering
    it failed (a classic member committing with a generation that just went stale, as against
    Kafka: the classic protocol's own rebalances, or a downgrade while a member was behind)."""
    seen: dict[tuple[int, int], int] = defaultdict(int)
    for m in ms:
        for p, o, _ in m.consumed():
            seen[(p, o)] += 1
    failed = [(int(p), o) for m in ms for e in m.events("commit_error") for p, o in e["offsets"].items()]
    again = sorted(po for po, n in seen.items() if n > 1)
    unexplained = [(p, o) for p, o in again if not any(fp == p and o < fo for fp, fo in failed)]
    assert not unexplained, f"consumed twice without a failed commit: {unexplained[:10]}; failed {failed[:10]}"


@pytest.mark.timeout(420)
@pytest.mark.compat("confluent-kafka", "consumer protocol (KIP-848)", "online migration (KIP-848)")
@pytest.mark.compat("kafka-python", "online migration (KIP-848)")
@pytest.mark.compat("aiokafka", "online migration (KIP-848)")
def test_classic_group_upgraded_and_downgraded_online_while_consuming(kcoord_factory, members):
    server = kcoord_factory(SERVER)
    topic, group = unique("mig"), unique("mig-group")
    admin = KafkaAdminClient(bootstrap_servers=server.bootstrap, request_timeout_ms=15000)
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])
    admin.close()
    producer = Producer(server.bootstrap, topic)
    everyone: list[Background] = []

    def add(m: Background) -> Background:
        members.append(m)
        everyone.append(m)
        return m

    def checkpoint(ms: list[Background], what: str, timeout: float = 90, resume: bool = True) -> None:
        """The members in `ms` share the partitions, every member of a consumer group is at the
        group epoch, and everything produced so far is consumed."""
        wait_balanced(ms, PARTITIONS, timeout, what)
        wait_settled(server, group, timeout, what)
        producer.pause()
        wait_consumed(everyone, set(producer.acked), timeout)
        if resume:
            producer.resume()

    try:
        # a classic group: kafka-python and aiokafka
        kp = add(python_member("kafka-python", server.bootstrap, topic, group, name="kp"))
        aio = add(python_member("aiokafka", server.bootstrap, topic, group, name="aio"))
        checkpoint([kp, aio], "a classic group of kafka-python and aiokafka")
        assert group_type(server, group) == "classic"

        # consumer-protocol members join one by one; the first one converts the group
        c1 = add(python_member("confluent", server.bootstrap, topic, group, name="c1", group_protocol="consumer"))
        checkpoint([kp, aio, c1], "c1 joined the classic members")
        assert group_type(server, group) == "consumer"
        d = cg_describe(server, group)
        assert d.error_code == 0 and sorted(m.member_type for m in d.members) == [0, 0, 1], d
        dg = call(server.bootstrap, DescribeGroupsRequest(version=5, groups=[group],
                                                          include_authorized_operations=False), 5).groups[0]
        assert dg.error_code != 0  # a consumer group: ConsumerGroupDescribe describes it
        c2 = add(python_member("confluent", server.bootstrap, topic, group, name="c2", group_protocol="consumer"))
        checkpoint([kp, aio, c1, c2], "c2 joined")

        # the server dies and comes back: the mixed group is restored from __consumer_offsets
        before = cg_describe(server, group)
        server.kill()
        server.start()
        after = cg_describe(server, group)
        assert (after.group_epoch, after.assignment_epoch) == (before.group_epoch, before.assignment_epoch)
        assert sorted((m.member_id, m.member_type) for m in after.members) == \
            sorted((m.member_id, m.member_type) for m in before.members)
        checkpoint([kp, aio, c1, c2], "the mixed group after the restart", 120)

        # the consumer-protocol members leave; the last one turns the group classic again
        assert c2.close() == 0, c2.describe()
        checkpoint([kp, aio, c1], "c2 left")
        assert group_type(server, group) == "consumer"
        assert c1.close() == 0, c1.describe()
        checkpoint([kp, aio], "c1, the last consumer-protocol member, left")
        assert group_type(server, group) == "classic"
        dg = call(server.bootstrap, DescribeGroupsRequest(version=5, groups=[group],
                                                          include_authorized_operations=False), 5).groups[0]
        assert (dg.error_code, dg.group_state, dg.protocol_type, dg.protocol_data) == \
            (0, "Stable", "consumer", "roundrobin"), dg
        assert cg_describe(server, group).error_code != 0
        checkpoint([kp, aio], "the classic members keep consuming", resume=False)
    finally:
        producer.stop()
    assert not producer.failed, producer.failed[:5]
    assert_never_owned_twice(everyone)
    assert_consumed_again_only_after_failed_commits(everyone)
    assert not [e for m in everyone for e in m.events("error")], "\n".join(m.describe() for m in everyone)


@pytest.mark.timeout(300)
@pytest.mark.compat("confluent-kafka", "online migration (KIP-848)")
def test_cooperative_classic_members_revoke_incrementally_inside_a_consumer_group(kcoord_factory, members):
    """librdkafka with group.protocol=classic and the cooperative-sticky assignor reports what it
    owns in its JoinGroup subscription: inside the consumer group it gives up only what moves
    (incremental revocation, signalled by REBALANCE_IN_PROGRESS), and keeps the rest."""
    server = kcoord_factory(SERVER)
    topic, group = unique("coop"), unique("coop-group")
    admin = KafkaAdminClient(bootstrap_servers=server.bootstrap, request_timeout_ms=15000)
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])
    admin.close()
    producer = Producer(server.bootstrap, topic)
    coop = {"partition.assignment.strategy": "cooperative-sticky"}
    everyone: list[Background] = []

    def add(m: Background) -> Background:
        members.append(m)
        everyone.append(m)
        return m

    def checkpoint(ms: list[Background], what: str) -> None:
        wait_balanced(ms, PARTITIONS, 90, what)
        wait_settled(server, group, 90, what)
        producer.pause()
        wait_consumed(everyone, set(producer.acked), 90)
        producer.resume()

    try:
        r1 = add(python_member("confluent", server.bootstrap, topic, group, name="r1", conf=coop))
        r2 = add(python_member("confluent", server.bootstrap, topic, group, name="r2", conf=coop))
        checkpoint([r1, r2], "a cooperative classic group")
        kept = {m.name: m.assignment() for m in (r1, r2)}
        c = add(python_member("confluent", server.bootstrap, topic, group, name="c", group_protocol="consumer"))
        checkpoint([r1, r2, c], "a consumer-protocol member joined")
        assert group_type(server, group) == "consumer"
        # the classic members kept what they did not give to the newcomer
        for m in (r1, r2):
            assert m.assignment() <= kept[m.name], (m.name, m.assignment(), kept[m.name])
            assert not m.events("lost"), m.describe()
        assert c.close() == 0, c.describe()
        checkpoint([r1, r2], "the consumer-protocol member left: a classic group again")
        assert group_type(server, group) == "classic"
    finally:
        producer.pause()
        producer.stop()
    assert not producer.failed, producer.failed[:5]
    assert_never_owned_twice(everyone)
    assert_consumed_again_only_after_failed_commits(everyone)
