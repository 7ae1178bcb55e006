"""The consumer group protocol (KIP-848) with real clients: confluent-kafka 2.16 (librdkafka
2.16) consumers with group.protocol=consumer, each in its own process (tests/clientlib.py).

Three members share a 6-partition topic disjointly and completely; one closes, one is
SIGKILLed (its session expires), a static one restarts within its session: the others keep
their partitions throughout (incremental: no stop-the-world revocation). A regex subscription
picks up a topic created afterwards. A group moves from the classic protocol (kafka-python,
aiokafka) to the consumer protocol and back, keeping its committed offsets. A SIGKILLed and
restarted server restores the group from __consumer_offsets.
"""
from __future__ import annotations

import time

import pytest
from clientlib import Background, ClientError, python_member, wait_balanced
from conftest import call, unique
from kafka.admin import KafkaAdminClient, NewTopic
from kafka.protocol.admin import ListGroupsRequest
from kafka.protocol.consumer import OffsetFetchRequest

from kcoord.protocol.messages import ConsumerGroupDescribeRequest

pytestmark = pytest.mark.integration

PARTITIONS = 6
SESSION_MS = 10_000
# the consumer protocol's session and heartbeat come from the server: shorter than Kafka's
# defaults so that a SIGKILLed member expires within a test
SERVER = {
    "group.consumer.min.session.timeout.ms": "6000",
    "group.consumer.session.timeout.ms": str(SESSION_MS),
    "group.consumer.min.heartbeat.interval.ms": "500",
    "group.consumer.heartbeat.interval.ms": "1000",
}


@pytest.fixture
def server(kcoord_factory):
    return kcoord_factory(SERVER)


@pytest.fixture
def admin(server):
    a = KafkaAdminClient(bootstrap_servers=server.bootstrap, request_timeout_ms=15000)
    yield a
    a.close()


def member(members: list[Background], server, topic: str, group: str, name: str, **kw) -> Background:
    m = python_member("confluent", server.bootstrap, topic, group, name=name, group_protocol="consumer", **kw)
    members.append(m)
    return m


def produce(server, topic: str, n: int, partitions: int = PARTITIONS) -> None:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": server.bootstrap})
    for i in range(n):
        p.produce(topic, key=f"k{i}".encode(), value=b"v", partition=i % partitions)
    assert p.flush(30) == 0


def committed_offsets(server, group: str) -> dict[int, int]:
    r = call(server.bootstrap, OffsetFetchRequest(version=7, group_id=group, topics=None, require_stable=False), 7)
    return {p.partition_index: p.committed_offset for t in r.topics for p in t.partitions}


def describe(server, group: str):
    return call(server.bootstrap, ConsumerGroupDescribeRequest(version=1, group_ids=[group],
                                                               include_authorized_operations=False), 1).groups[0]


def never_revoked(m: Background, since: int) -> bool:
    """No partition was taken from `m` after its first `since` callbacks."""
    events = [e for e in m.events() if e["kind"] in ("assigned", "revoked", "lost")]
    return not [e for e in events[since:] if e["kind"] in ("revoked", "lost")]


def n_callbacks(m: Background) -> int:
    return len([e for e in m.events() if e["kind"] in ("assigned", "revoked", "lost")])


def wait_consumed(ms: list[Background], expected: int, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = {(p, o) for m in ms for p, o, _ in m.consumed()}
        if len(got) >= expected:
            return
        time.sleep(0.2)
    raise ClientError(f"consumed {len({(p, o) for m in ms for p, o, _ in m.consumed()})} of {expected}\n"
                      + "\n".join(m.describe() for m in ms))


@pytest.mark.compat("confluent-kafka", "consumer protocol (KIP-848)", "static membership", "rebalance on leave")
def test_three_members_share_and_survive_close_kill_and_static_restart(server, admin, members):
    topic, group = unique("cp"), unique("cp-group")
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])
    produce(server, topic, 60)
    a = member(members, server, topic, group, "a")
    b = member(members, server, topic, group, "b")
    s = member(members, server, topic, group, "s1", instance_id="static-s")
    owned = wait_balanced([a, b, s], PARTITIONS, 60, "three consumer-protocol members")
    assert sorted(len(o) for o in owned) == [2, 2, 2], owned
    wait_consumed([a, b, s], 60, 60)
    d = describe(server, group)
    assert (d.error_code, d.group_state, len(d.members)) == (0, "Stable", 3), d

    # a static member restarts within its session: it gets its partitions back, nobody else moves
    mark = {m.name: n_callbacks(m) for m in (a, b)}
    before = s.assignment()
    epoch = describe(server, group).group_epoch
    assert s.close() == 0, s.describe()
    s2 = member(members, server, topic, group, "s2", instance_id="static-s")
    wait_balanced([a, b, s2], PARTITIONS, 60, "static member back")
    assert s2.assignment() == before
    assert describe(server, group).group_epoch == epoch  # no new group epoch: no rebalance
    assert never_revoked(a, mark["a"]) and never_revoked(b, mark["b"]), a.describe() + b.describe()

    # a clean close: the others take its partitions over, keeping their own
    mark = {m.name: n_callbacks(m) for m in (a, s2)}
    assert b.close() == 0, b.describe()
    owned = wait_balanced([a, s2], PARTITIONS, 60, "take-over after a close")
    assert sorted(len(o) for o in owned) == [3, 3]
    assert never_revoked(a, mark["a"]) and never_revoked(s2, mark["s2"]), a.describe() + s2.describe()

    # SIGKILL: the member's session expires, the survivor takes everything, keeping its own
    mark = n_callbacks(a)
    t0 = time.monotonic()
    s2.kill()
    wait_balanced([a], PARTITIONS, SESSION_MS / 1000 + 45, "take-over after a SIGKILL")
    assert time.monotonic() - t0 >= (SESSION_MS - 2000) / 1000
    assert never_revoked(a, mark), a.describe()
    produce(server, topic, 12)
    wait_consumed([a], 72 - len({(p, o) for m in (b, s) for p, o, _ in m.consumed()}), 60)
    assert not a.events("commit_error") and not a.events("error"), a.describe()


@pytest.mark.compat("confluent-kafka", "consumer protocol (KIP-848)")
def test_regex_subscription_picks_up_a_topic_created_later(server, admin, members):
    prefix = unique("rx")
    admin.create_topics([NewTopic(f"{prefix}-one", 2, 1)])
    m = member(members, server, f"^{prefix}-.*", unique("rx-group"), "rx")
    m.wait_for(lambda m: m.assignment() == {0, 1}, 60, "the first topic's partitions")
    admin.create_topics([NewTopic(f"{prefix}-two", 3, 1)])
    m.wait_for(lambda m: any(f"{prefix}-two" in e.get("topics", []) for e in m.events("assigned")), 60,
               "the new topic's partitions")
    got = {t for e in m.events("assigned") for t in e["topics"]}
    assert got == {f"{prefix}-one", f"{prefix}-two"}, m.describe()


@pytest.mark.compat("confluent-kafka", "consumer protocol (KIP-848)", "commit/fetch")
@pytest.mark.compat("kafka-python", "commit/fetch")
@pytest.mark.compat("aiokafka", "commit/fetch")
def test_group_moves_between_protocols_keeping_offsets(server, admin, members):
    topic, group = unique("mig"), unique("mig-group")
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])
    produce(server, topic, 30)
    # classic members consume and commit everything, then leave
    kp = python_member("kafka-python", server.bootstrap, topic, group, name="kp")
    aio = python_member("aiokafka", server.bootstrap, topic, group, name="aio")
    members += [kp, aio]
    wait_consumed([kp, aio], 30, 90)
    committed = {}
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and committed != dict.fromkeys(range(PARTITIONS), 5):
        time.sleep(0.2)
        committed = committed_offsets(server, group)
    assert committed == dict.fromkeys(range(PARTITIONS), 5), committed
    assert kp.close() == 0 and aio.close() == 0
    # consumer-protocol members take the (Empty) group over and start after the committed offsets
    produce(server, topic, 12)
    c1 = member(members, server, topic, group, "c1")
    c2 = member(members, server, topic, group, "c2")
    wait_consumed([c1, c2], 12, 60)
    d = describe(server, group)
    assert (d.error_code, len(d.members)) == (0, 2), d
    assert {o for m in (c1, c2) for _, o, _ in m.consumed()} == set(range(5, 7)), "resumed from the commits"
    assert c1.close() == 0 and c2.close() == 0
    # and back to the classic protocol
    produce(server, topic, 6)
    kp2 = python_member("kafka-python", server.bootstrap, topic, group, name="kp2")
    members.append(kp2)
    wait_consumed([kp2], 6, 90)
    assert {o for _, o, _ in kp2.consumed()} == {7}, kp2.describe()
    groups = call(server.bootstrap, ListGroupsRequest(version=5, states_filter=[], types_filter=["classic"]), 5)
    assert group in [g.group_id for g in groups.groups]


@pytest.mark.compat("confluent-kafka", "consumer protocol (KIP-848)", "restart resume")
def test_server_sigkill_and_restart_restores_the_group(server, admin, members):
    topic, group = unique("rs"), unique("rs-group")
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])
    a = member(members, server, topic, group, "a")
    b = member(members, server, topic, group, "b")
    wait_balanced([a, b], PARTITIONS, 60, "two members")
    before = describe(server, group)
    server.kill()
    server.start()
    after = describe(server, group)
    assert (after.error_code, after.group_epoch, after.assignment_epoch) == \
        (0, before.group_epoch, before.assignment_epoch), (before, after)
    assert sorted(m.member_id for m in after.members) == sorted(m.member_id for m in before.members)
    # the members carry on (their heartbeats are accepted), nothing is reassigned
    mark = {m.name: n_callbacks(m) for m in (a, b)}
    produce(server, topic, 12)
    wait_consumed([a, b], 12, 60)
    assert never_revoked(a, mark["a"]) and never_revoked(b, mark["b"]), a.describe() + b.describe()
    assert describe(server, group).group_epoch == before.group_epoch
