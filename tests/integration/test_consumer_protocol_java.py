"""The consumer group protocol (KIP-848) with Java kafka-clients 4.3 consumers
(group.protocol=consumer; tests/compat/java4/ConsumerProtocolMember.java), each in its own JVM
(tests/clientlib.py java4_member), as test_consumer_protocol.py does with confluent-kafka.

Three members share a 6-partition topic disjointly and completely; a static one restarts
within its session, one closes, one is SIGKILLed (its session expires): the others never see a
partition they keep revoked (incremental, no stop-the-world). A SubscriptionPattern (which
Java sends as SubscribedTopicRegex) picks up a topic created afterwards. Java and
confluent-kafka consumer-protocol members share one group. Offsets Java commits (commitSync
with its member epoch) survive a server SIGKILL and restart. group.remote.assignor picks the
server-side assignor.

What is asserted comes from what the clients observed (their rebalance callbacks, records and
commits); the server's ConsumerGroupDescribe and OffsetFetch answers only back it up.
"""
from __future__ import annotations

import time

import pytest
from clientlib import Background, ClientError, balanced, java4_member, python_member
from conftest import call, unique
from kafka.admin import KafkaAdminClient, NewTopic
from kafka.protocol.consumer import OffsetFetchRequest

from kcoord.protocol.messages import ConsumerGroupDescribeRequest

pytestmark = pytest.mark.integration

PARTITIONS = 6
SESSION_MS = 10_000
# the consumer protocol's session and heartbeat interval come from the server: shorter than
# Kafka's defaults so that a SIGKILLed member expires within a test
SERVER = {
    "group.consumer.min.session.timeout.ms": "6000",
    "group.consumer.session.timeout.ms": str(SESSION_MS),
    "group.consumer.min.heartbeat.interval.ms": "500",
    "group.consumer.heartbeat.interval.ms": "1000",
}
JOIN_S = 90  # a JVM starting and joining on a loaded 2-core machine


@pytest.fixture
def server(kcoord_factory):
    return kcoord_factory(SERVER)


@pytest.fixture
def admin(server):
    a = KafkaAdminClient(bootstrap_servers=server.bootstrap, request_timeout_ms=15000)
    yield a
    a.close()


def java(members: list[Background], server, topic: str, group: str, name: str, **kw) -> Background:
    m = java4_member(server.bootstrap, topic, group, name=name, **kw)
    members.append(m)
    return m


def produce(server, topic: str, n: int, partitions: int = PARTITIONS, start: int = 0) -> None:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": server.bootstrap})
    for i in range(start, start + n):
        p.produce(topic, key=f"k{i}".encode(), value=b"v", partition=i % partitions)
    assert p.flush(30) == 0


def describe(server, group: str):
    return call(server.bootstrap, ConsumerGroupDescribeRequest(version=1, group_ids=[group],
                                                               include_authorized_operations=False), 1).groups[0]


def committed_offsets(server, group: str) -> dict[tuple[str, int], int]:
    r = call(server.bootstrap, OffsetFetchRequest(version=7, group_id=group, topics=None, require_stable=False), 7)
    return {(t.name, p.partition_index): p.committed_offset for t in r.topics for p in t.partitions}


def callbacks(m: Background) -> list[dict]:
    return [e for e in m.events() if e["kind"] in ("assigned", "revoked", "lost")]


def taken_since(m: Background, mark: int) -> list[dict]:
    """The revocations and losses `m` saw after its first `mark` callbacks."""
    return [e for e in callbacks(m)[mark:] if e["kind"] in ("revoked", "lost")]


def consumed(ms: list[Background], topic: str = "") -> list[tuple[str, int, int]]:
    """(topic, partition, offset) of every record the members processed, repeats included
    (confluent-kafka members print no topic: `topic`)."""
    return [(r[3] if len(r) > 3 else topic, r[0], r[1]) for m in ms for e in m.events("records") for r in e["records"]]


def wait_consumed(ms: list[Background], expected: int, timeout: float, what: str, topic: str = "") -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if len(set(consumed(ms, topic))) >= expected:
            return
        time.sleep(0.2)
    raise ClientError(f"{what}: consumed {len(set(consumed(ms, topic)))} of {expected}\n"
                      + "\n".join(m.describe() for m in ms))


def wait_even(ms: list[Background], timeout: float, what: str) -> list[set[int]]:
    """Wait until the members' partitions (per their callbacks) are disjoint, cover the topic
    and are spread evenly (what the uniform assignor targets): a snapshot in the middle of an
    incremental rebalance may cover the topic unevenly."""
    deadline = time.monotonic() + timeout
    while True:
        got = balanced(ms, PARTITIONS)
        if got is not None and max(map(len, got)) - min(map(len, got)) <= 1:
            return got
        if time.monotonic() > deadline or any(not m.alive() for m in ms):
            raise ClientError(f"{what}: not settled; assignments {[m.assignment() for m in ms]}\n"
                              + "\n".join(m.describe() for m in ms))
        time.sleep(0.1)


def no_errors(*ms: Background) -> None:
    """No error and no failed commit, except the one race Kafka's protocol has too: a commitSync
    built at the member epoch the client knew while its own heartbeat (owning its new
    assignment) was already moving it to the next epoch is answered STALE_MEMBER_EPOCH ("the
    member must retry after receiving its updated member epoch"); the member then committed the
    same offsets at a later epoch."""
    for m in ms:
        bad = m.events("error")
        events = m.events()
        for i, e in enumerate(events):
            if e["kind"] != "commit_error":
                continue
            retried = "stale member epoch" in e.get("message", "") and any(
                later["kind"] == "committed" and later["offsets"] == e["offsets"] and later["epoch"] > e["epoch"]
                for later in events[i + 1:])
            if not retried:
                bad.append(e)
        assert not bad, m.describe()


def last_committed(ms: list[Background], topic: str) -> dict[tuple[str, int], int]:
    """The highest offset each partition was committed at, as the clients reported it."""
    out: dict[tuple[str, int], int] = {}
    for m in ms:
        for e in m.events("committed"):
            for p, o in e["offsets"].items():
                key = (topic, int(p))
                out[key] = max(out.get(key, 0), o)
    return out


def tps(m: Background) -> set[str]:
    """The topic-partitions `m` owns now per its (incremental) callbacks."""
    owned: set[str] = set()
    for e in callbacks(m):
        if e["kind"] == "assigned":
            owned |= set(e["tps"])
        else:
            owned -= set(e["tps"])
    return owned


@pytest.mark.timeout(420)
@pytest.mark.compat("java4", "group join", "consumer protocol (KIP-848)", "static membership",
                    "rebalance on leave", "consume", "commit/fetch")
def test_three_java_members_share_and_survive_close_kill_and_static_restart(server, admin, members):
    topic, group = unique("jcp"), unique("jcp-group")
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])
    produce(server, topic, 60)
    a = java(members, server, topic, group, "a")
    b = java(members, server, topic, group, "b")
    s = java(members, server, topic, group, "s1", instance_id="static-s")
    owned = wait_even([a, b, s], JOIN_S, "three Java consumer-protocol members")
    assert sorted(len(o) for o in owned) == [2, 2, 2], owned
    wait_consumed([a, b, s], 60, 60, "the first 60 records")
    d = describe(server, group)
    assert (d.error_code, d.group_state, len(d.members)) == (0, "Stable", 3), d
    # each callback reports the member epoch the consumer is at (groupMetadata().generationId())
    epochs = {m.name: m.events("assigned")[-1]["generation"] for m in (a, b, s)}
    assert all(e > 0 for e in epochs.values()), epochs

    # the static member closes (epoch -2: it leaves for a while) and a new JVM with the same
    # group.instance.id comes back within the session: its partitions back, nobody else moves
    mark = {m.name: len(callbacks(m)) for m in (a, b)}
    before = s.assignment()
    epoch = describe(server, group).group_epoch
    assert s.close() == 0, s.describe()
    s2 = java(members, server, topic, group, "s2", instance_id="static-s")
    wait_even([a, b, s2], JOIN_S, "the static member back")
    assert s2.assignment() == before
    assert describe(server, group).group_epoch == epoch  # no new group epoch: no rebalance
    assert not taken_since(a, mark["a"]) and not taken_since(b, mark["b"]), a.describe() + b.describe()

    # a clean close: the others take its partitions over, keeping their own
    mark = {m.name: len(callbacks(m)) for m in (a, s2)}
    assert b.close() == 0, b.describe()
    assert b.events("closed"), b.describe()
    owned = wait_even([a, s2], 60, "take-over after a close")
    assert sorted(len(o) for o in owned) == [3, 3]
    assert not taken_since(a, mark["a"]) and not taken_since(s2, mark["s2"]), a.describe() + s2.describe()

    # SIGKILL: the member's session expires, the survivor takes everything, keeping its own
    mark = len(callbacks(a))
    t0 = time.monotonic()
    s2.kill()
    wait_even([a], SESSION_MS / 1000 + 60, "take-over after a SIGKILL")
    assert time.monotonic() - t0 >= (SESSION_MS - 2000) / 1000
    assert not taken_since(a, mark), a.describe()
    produce(server, topic, 12, start=60)
    wait_consumed([a, b, s, s2], 72, 60, "the 12 records after the take-over")
    # every record processed once: each member committed what it processed after every batch
    # and before giving a partition up (a SIGKILL loses nothing but uncommitted work)
    seen = consumed([a, b, s, s2])
    assert len(seen) == len(set(seen)) == 72, sorted(seen)
    no_errors(a, b, s, s2)


@pytest.mark.timeout(300)
@pytest.mark.compat("java4", "consumer protocol (KIP-848)")
def test_java_subscription_pattern_picks_up_a_topic_created_later(server, admin, members):
    prefix = unique("jrx")
    admin.create_topics([NewTopic(f"{prefix}-one", 2, 1), NewTopic(f"other-{prefix}", 1, 1)])
    group = unique("jrx-group")
    m = java(members, server, f"^{prefix}-.*", group, "rx")
    m.wait_for(lambda m: tps(m) == {f"{prefix}-one-0", f"{prefix}-one-1"}, JOIN_S, "the first topic's partitions")
    assert describe(server, group).members[0].subscribed_topic_regex == f"^{prefix}-.*"
    admin.create_topics([NewTopic(f"{prefix}-two", 3, 1)])
    want = {f"{prefix}-one-0", f"{prefix}-one-1", f"{prefix}-two-0", f"{prefix}-two-1", f"{prefix}-two-2"}
    m.wait_for(lambda m: tps(m) == want, 60, "the new topic's partitions")
    # the new topic came on top: nothing was taken away for it
    assert not taken_since(m, 0), m.describe()
    # and it consumes from it
    produce(server, f"{prefix}-two", 3, partitions=3)
    m.wait_for(lambda m: {(t, p) for t, p, _ in consumed([m])} == {(f"{prefix}-two", p) for p in range(3)}, 60,
               "records of the new topic")
    no_errors(m)


@pytest.mark.timeout(300)
@pytest.mark.compat("java4", "consumer protocol (KIP-848)", "rebalance on leave")
@pytest.mark.compat("confluent-kafka", "consumer protocol (KIP-848)")
def test_java_and_confluent_members_in_one_group(server, admin, members):
    topic, group = unique("jmix"), unique("jmix-group")
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])
    produce(server, topic, 30)
    j1 = java(members, server, topic, group, "j1")
    j2 = java(members, server, topic, group, "j2")
    c = python_member("confluent", server.bootstrap, topic, group, name="c", group_protocol="consumer")
    members.append(c)
    owned = wait_even([j1, j2, c], JOIN_S, "two Java and one confluent-kafka member")
    assert sorted(len(o) for o in owned) == [2, 2, 2], owned
    d = describe(server, group)
    assert (d.error_code, len(d.members)) == (0, 3), d
    assert sorted(mb.client_id for mb in d.members) == ["c", "j1", "j2"]

    # a Java member leaves: the Java and the librdkafka member split its partitions, keeping theirs
    mark = {m.name: len(callbacks(m)) for m in (j1, c)}
    assert j2.close() == 0, j2.describe()
    owned = wait_even([j1, c], 60, "take-over after the Java member left")
    assert sorted(len(o) for o in owned) == [3, 3]
    assert not taken_since(j1, mark["j1"]) and not taken_since(c, mark["c"]), j1.describe() + c.describe()

    # the librdkafka member leaves: the Java member takes everything, keeping its own
    mark = len(callbacks(j1))
    assert c.close() == 0, c.describe()
    wait_even([j1], 60, "take-over after the confluent-kafka member left")
    assert not taken_since(j1, mark), j1.describe()
    produce(server, topic, 12, start=30)
    wait_consumed([j1, j2, c], 42, 60, "the records after the take-over", topic)
    seen = consumed([j1, j2, c], topic)
    assert len(seen) == len(set(seen)) == 42, sorted(seen)
    no_errors(j1, j2, c)


@pytest.mark.timeout(360)
@pytest.mark.compat("java4", "commit/fetch", "restart resume", "consumer protocol (KIP-848)")
def test_java_commits_survive_a_server_sigkill_and_restart(server, admin, members):
    topic, group = unique("jrs"), unique("jrs-group")
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])
    a = java(members, server, topic, group, "a")
    b = java(members, server, topic, group, "b")
    wait_even([a, b], JOIN_S, "two Java members")
    produce(server, topic, 60)  # both have records to commit
    wait_consumed([a, b], 60, 60, "the first 60 records")
    want = {(topic, p): 10 for p in range(PARTITIONS)}
    a.wait_for(lambda _: last_committed([a, b], topic) == want, 60, "the commits of all 60 records")
    # the commits carried the member epochs the members were at
    d = describe(server, group)
    at = {mb.member_id: mb.member_epoch for mb in d.members}
    for m in (a, b):
        member_id = m.events("assigned")[-1]["member_id"]
        assert m.events("committed")[-1]["epoch"] == at[member_id], (at, m.describe())
    assert committed_offsets(server, group) == want

    server.kill()
    server.start()
    assert committed_offsets(server, group) == want
    after = describe(server, group)
    assert (after.error_code, after.group_epoch, after.assignment_epoch) == \
        (0, d.group_epoch, d.assignment_epoch), (d, after)
    # the members carry on with their epochs (heartbeats and commits accepted), nothing moves
    mark = {m.name: len(callbacks(m)) for m in (a, b)}
    produce(server, topic, 12, start=60)
    wait_consumed([a, b], 72, 90, "the records after the restart")
    assert not taken_since(a, mark["a"]) and not taken_since(b, mark["b"]), a.describe() + b.describe()
    want = {(topic, p): 12 for p in range(PARTITIONS)}
    a.wait_for(lambda _: last_committed([a, b], topic) == want, 60, "the commits after the restart")
    assert committed_offsets(server, group) == want
    assert describe(server, group).group_epoch == d.group_epoch
    seen = consumed([a, b])
    assert len(seen) == len(set(seen)) == 72, sorted(seen)

    # a new member of the group, once the others left, starts from the committed offsets
    assert a.close() == 0 and b.close() == 0, a.describe() + b.describe()
    produce(server, topic, 6, start=72)
    c = java(members, server, topic, group, "c")
    wait_consumed([c], 6, JOIN_S, "the records after the commits")
    assert {(p, o) for _, p, o in consumed([c])} == {(p, 12) for p in range(PARTITIONS)}, c.describe()
    no_errors(a, b, c)


@pytest.mark.timeout(300)
@pytest.mark.parametrize("assignor", ["uniform", "range"])
@pytest.mark.compat("java4", "consumer protocol (KIP-848)")
def test_java_group_remote_assignor(kcoord_factory, members, assignor):
    """group.remote.assignor picks the server-side assignor: the server's default is the other
    one, so what the members get shows which ran. Two topics of 3 partitions and two members:
    range gives each member the same partition numbers of both topics (co-partitioned: 4 and
    2), uniform balances them (3 and 3)."""
    other = "range" if assignor == "uniform" else "uniform"
    server = kcoord_factory({**SERVER, "group.consumer.assignors": f"{other},{assignor}"})
    prefix, group = unique("jas"), unique("jas-group")
    a = KafkaAdminClient(bootstrap_servers=server.bootstrap, request_timeout_ms=15000)
    try:
        a.create_topics([NewTopic(f"{prefix}-a", 3, 1), NewTopic(f"{prefix}-b", 3, 1)])
    finally:
        a.close()
    ms = [java(members, server, f"^{prefix}-.*", group, f"m{i}", assignor=assignor) for i in (1, 2)]
    everything = {f"{prefix}-{t}-{p}" for t in "ab" for p in range(3)}

    def settled(_) -> list[set[str]] | None:
        got = [tps(m) for m in ms]
        return got if set().union(*got) == everything and sum(map(len, got)) == 6 and all(got) else None

    owned = ms[0].wait_for(settled, JOIN_S, "both members assigned")
    d = describe(server, group)
    assert (d.error_code, d.assignor_name, len(d.members)) == (0, assignor, 2), d
    if assignor == "range":
        assert sorted(map(len, owned)) == [2, 4], owned
        for o in owned:  # the same partition numbers of both topics
            numbers = {t: {int(tp.rsplit("-", 1)[1]) for tp in o if tp.startswith(f"{prefix}-{t}-")} for t in "ab"}
            assert numbers["a"] == numbers["b"], owned
    else:
        assert sorted(map(len, owned)) == [3, 3], owned
    no_errors(*ms)


@pytest.mark.timeout(180)
@pytest.mark.compat("java4", "bootstrap", "consumer protocol (KIP-848)")
def test_java_unknown_remote_assignor_is_fatal_for_the_member(server, admin, members):
    """An assignor the server does not have: the heartbeat answers UNSUPPORTED_ASSIGNOR, which
    Java raises from poll() as UnsupportedAssignorException (the member does not retry)."""
    topic = unique("jua")
    admin.create_topics([NewTopic(topic, 2, 1)])
    m = java(members, server, topic, unique("jua-group"), "m", assignor="sticky")
    [error] = m.wait_for(lambda m: m.events("error"), JOIN_S, "the member's error")
    assert error["error"] == "UnsupportedAssignorException", m.describe()
    assert error["message"] == "ServerAssignor sticky is not supported. Supported assignors: uniform, range."
    assert not m.events("assigned")
