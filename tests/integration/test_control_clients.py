"""Every control function against real clients, asserting what the client does about it:
its commits survive NOT_COORDINATOR (and it looks for its coordinator again), it rejoins on
REBALANCE_IN_PROGRESS, its own round-trip statistics show injected latency, its request
timeout catches a stalled connection, it reconnects after a closed one, it rejoins after a
forced rebalance or its expiry, it retries through COORDINATOR_LOAD_IN_PROGRESS, and an error
injected for one topic reaches that topic's partitions only."""
from __future__ import annotations

import json
import logging
import time

import pytest
from clientlib import NODE_DIR, Background, java_member, python_member
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from conftest import committed, unique

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]


def produce(bootstrap: str, topic: str, n: int, start: int = 0) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    for i in range(start, start + n):
        p.produce(topic, key=b"k%d" % i, value=b"v%d" % i)
    assert p.flush(30) == 0


def wait_until(cond, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while True:
        value = cond()
        if value:
            return value
        assert time.monotonic() < deadline, f"timed out after {timeout} s waiting for {what}"
        time.sleep(0.1)


class _Lines(logging.Handler):
    """librdkafka's log lines (confluent-kafka's `logger`), kept for the test."""

    def __init__(self) -> None:
        super().__init__()
        self.lines: list[str] = []
        self.logger = logging.getLogger(f"rdkafka-{id(self)}")
        self.logger.setLevel(logging.DEBUG)
        self.logger.addHandler(self)

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


def last_committed(m: Background) -> int:
    return max((o for e in m.events("committed") for o in e["offsets"].values()), default=-1)


def start_member(kind: str, bootstrap: str, topic: str, group: str, name: str,
                 session_timeout_ms: int = 10000) -> Background:
    if kind == "java":
        return java_member(bootstrap, topic, group, name=name, session_timeout_ms=session_timeout_ms)
    if kind == "kafkajs":
        # client.js consume: a kafkajs group member that commits each batch (client id
        # kcoord-kafkajs-consumer), until 10 minutes idle; ended by the members fixture
        return Background(["node", NODE_DIR / "client.js", "consume", bootstrap, topic, group, 1_000_000,
                           600_000], "kafkajs", cwd=NODE_DIR)
    return python_member(kind, bootstrap, topic, group, name=name, session_timeout_ms=session_timeout_ms)


CLIENT_IDS = {"kafkajs": "kcoord-kafkajs-consumer"}


@pytest.mark.timeout(360)
@pytest.mark.parametrize("kind", ["confluent", "java"])
def test_commits_survive_three_not_coordinator_answers_and_the_client_finds_its_coordinator_again(
        kcoord, members, kind):
    topic, group, name = unique("nc"), unique("nc-group"), f"nc-{kind}"
    produce(kcoord.bootstrap, topic, 5)
    # librdkafka stops heartbeating while it looks for its coordinator again: Kafka's default
    # session timeout keeps the member in the group meanwhile
    m = start_member(kind, kcoord.bootstrap, topic, group, name, session_timeout_ms=45000)
    members.append(m)
    m.wait_for(lambda mm: last_committed(mm) == 5, 90, "the first commit")
    kcoord.control.start_recording()
    rule = kcoord.control.inject_error("OffsetCommit", "NOT_COORDINATOR", count=3, group_id=group)
    produce(kcoord.bootstrap, topic, 5, start=5)
    # librdkafka reconnects its coordinator after each NOT_COORDINATOR, and its retried commit
    # may race that reconnection several times over (its own behaviour, as against Kafka):
    # 20-80 s on a busy machine
    m.wait_for(lambda mm: last_committed(mm) == 10, 240, "the commit after three NOT_COORDINATOR answers")
    assert committed(kcoord.bootstrap, group, topic) == {0: 10}
    # the client retried them: the application never saw the coordinator error
    assert not [e for e in m.events("commit_error") if "coordinator" in str(e["error"]).lower()], m.describe()
    assert all(f["id"] != rule["id"] for f in kcoord.control.faults())  # all three were answered
    sent = kcoord.control.requests(client_id=name)
    commits = [r for r in sent if r["api"] == "OffsetCommit"]
    assert len(commits) >= 4, [r["api"] for r in sent]  # three refused, then the one that counted
    rediscovery = [r for r in sent if r["api"] == "FindCoordinator" and r["seq"] > commits[0]["seq"]]
    assert rediscovery, [r["api"] for r in sent]
    keys = rediscovery[0]["body"].get("coordinator_keys") or [rediscovery[0]["body"]["key"]]
    assert group in keys


@pytest.mark.parametrize("kind", ["confluent", "kafka-python", "aiokafka", "java", "kafkajs"])
def test_rebalance_in_progress_on_heartbeat_makes_every_client_rejoin(kcoord, members, kind):
    topic, group, name = unique("rip"), unique("rip-group"), f"rip-{kind}"
    produce(kcoord.bootstrap, topic, 1)
    m = start_member(kind, kcoord.bootstrap, topic, group, name)
    members.append(m)
    m.wait_for(lambda mm: mm.events("assigned"), 90, "the first assignment")
    m.wait_for(lambda mm: mm.events("committed"), 90, "the first record committed")
    client_id = CLIENT_IDS.get(kind, name)
    kcoord.control.start_recording(apis=["JoinGroup", "Heartbeat"])
    # steady first: a heartbeat after the member's last join (a client may rejoin on its own
    # right after its first assignment, kafka-python does)
    wait_until(lambda: [r["api"] for r in kcoord.control.requests(client_id=client_id)][-1:] == ["Heartbeat"]
               and m.events("assigned"), 90, "steady heartbeats")
    mark = kcoord.control.requests(client_id=client_id)[-1]["seq"]
    assigned = len(m.events("assigned"))
    kcoord.control.inject_error("Heartbeat", "REBALANCE_IN_PROGRESS", count=1, group_id=group)
    m.wait_for(lambda mm: len(mm.events("assigned")) > assigned, 90, "a new assignment after rejoining")
    assert kcoord.control.faults() == []  # the injected answer was given
    joins = kcoord.control.requests(api="JoinGroup", client_id=client_id, since=mark)
    beats = kcoord.control.requests(api="Heartbeat", client_id=client_id, since=mark)
    assert joins and beats and beats[0]["seq"] < joins[0]["seq"], (joins, beats)
    assert joins[0]["body"]["group_id"] == group and joins[0]["body"]["member_id"]  # rejoins as itself
    produce(kcoord.bootstrap, topic, 1, start=1)  # and goes on consuming
    m.wait_for(lambda mm: any(e.get("offsets", {}) and 2 in e["offsets"].values() for e in mm.events("committed")),
               90, "the record produced after the rejoin")


def test_injected_latency_shows_in_librdkafkas_measured_round_trip(kcoord):
    topic = unique("rtt")
    stats: list[dict] = []
    p = Producer({"bootstrap.servers": kcoord.bootstrap, "client.id": "rtt-producer", "linger.ms": 0,
                  "statistics.interval.ms": 200, "stats_cb": lambda s: stats.append(json.loads(s))})
    p.produce(topic, b"warm-up")
    assert p.flush(30) == 0
    kcoord.control.add_latency(1500, api="Produce", client_id="rtt-producer")
    for i in range(3):
        p.produce(topic, b"slow-%d" % i)
        assert p.flush(30) == 0

    def slowest_rtt_us() -> int:
        p.poll(0.1)
        brokers = [b for s in stats[-3:] for b in s["brokers"].values() if b["nodeid"] >= 0]
        return max((b["rtt"]["max"] for b in brokers), default=0)

    wait_until(lambda: slowest_rtt_us() >= 1_400_000, 30, "librdkafka's rtt statistics to show the delay")
    delayed = [f for f in kcoord.control.faults() if f["kind"] == "latency"][0]["delayed"]
    assert delayed >= 3


def test_a_stalled_connection_is_caught_by_the_clients_request_timeout(kcoord):
    topic = unique("stall")
    logs = _Lines()
    p = Producer({"bootstrap.servers": kcoord.bootstrap, "client.id": "stall-producer", "linger.ms": 0,
                  "socket.timeout.ms": 2000, "message.timeout.ms": 5000, "reconnect.backoff.max.ms": 500},
                 logger=logs.logger)
    p.produce(topic, b"before")
    assert p.flush(30) == 0
    stalled = kcoord.control.stall("stall-producer")
    assert stalled["stalled"], kcoord.control.connections()
    assert all(c["stalled"] for c in kcoord.control.connections() if c["client_id"] == "stall-producer")
    reports: list = []
    p.produce(topic, b"during", on_delivery=lambda err, msg: reports.append(err))
    wait_until(lambda: p.poll(0.2) is not None and reports, 60, "the delivery report")
    assert reports[0] is not None and reports[0].code() in (KafkaError._MSG_TIMED_OUT, KafkaError._TIMED_OUT), reports
    # librdkafka's own account: its request timeout caught the unanswered ProduceRequest
    assert any("REQTMOUT" in ln and "Timed out ProduceRequest" in ln for ln in logs.lines), logs.lines
    kcoord.control.unstall("stall-producer")
    p.produce(topic, b"after")
    assert p.flush(30) == 0  # reads again: delivered


def test_closed_connections_are_reconnected_by_the_client(kcoord):
    topic = unique("close")
    p = Producer({"bootstrap.servers": kcoord.bootstrap, "client.id": "close-producer", "linger.ms": 0,
                  "reconnect.backoff.ms": 50})
    p.produce(topic, b"before")
    assert p.flush(30) == 0
    before = {c["id"] for c in kcoord.control.connections() if c["client_id"] == "close-producer"}
    closed = kcoord.control.close_connections(client_id="close-producer")["closed"]
    assert set(closed) == before and before
    p.produce(topic, b"after")
    assert p.flush(30) == 0
    after = {c["id"] for c in kcoord.control.connections() if c["client_id"] == "close-producer"}
    assert after and not after & before  # a new connection carried it


@pytest.mark.parametrize("kind", ["confluent", "java"])
def test_a_forced_rebalance_makes_the_group_rejoin(kcoord, members, kind):
    topic, group = unique("force"), unique("force-group")
    produce(kcoord.bootstrap, topic, 1)
    m = start_member(kind, kcoord.bootstrap, topic, group, f"force-{kind}")
    members.append(m)
    m.wait_for(lambda mm: mm.events("assigned"), 90, "the first assignment")
    generation = wait_until(lambda: kcoord.control.group(group)["state"] == "Stable"
                            and kcoord.control.group(group)["generation"], 60, "a stable group")
    assert kcoord.control.rebalance(group)["state"] == "PreparingRebalance"
    m.wait_for(lambda mm: len(mm.events("assigned")) >= 2, 90, "the assignment of the next generation")
    wait_until(lambda: kcoord.control.group(group)["state"] == "Stable", 60, "the group stable again")
    assert kcoord.control.group(group)["generation"] == generation + 1


def test_an_expired_member_learns_it_and_joins_again_as_a_new_member(kcoord, members):
    topic, group = unique("expire"), unique("expire-group")
    produce(kcoord.bootstrap, topic, 1)
    m = python_member("confluent", kcoord.bootstrap, topic, group, name="expire-me")
    members.append(m)
    m.wait_for(lambda mm: mm.events("assigned"), 90, "the first assignment")
    first = wait_until(lambda: kcoord.control.group(group)["members"], 60, "the member")[0]["member_id"]
    assert kcoord.control.expire_member(group, first)["member_id"] == first
    # its next heartbeat is refused (UNKNOWN_MEMBER_ID): it drops its partitions and rejoins
    m.wait_for(lambda mm: mm.events("lost") and len(mm.events("assigned")) >= 2, 90, "losing and regaining")
    again = wait_until(lambda: kcoord.control.group(group)["members"], 60, "the member back")
    assert again[0]["member_id"] != first and again[0]["client_id"] == "expire-me"


def test_a_coordinator_loading_its_partition_is_waited_out_by_the_client(kcoord):
    topic, group = unique("load"), unique("load-group")
    produce(kcoord.bootstrap, topic, 3)
    c = Consumer({"bootstrap.servers": kcoord.bootstrap, "group.id": group, "client.id": "load-client",
                  "enable.auto.commit": False})
    c.commit(offsets=[TopicPartition(topic, 0, 3)], asynchronous=False)
    kcoord.control.start_recording(apis=["OffsetFetch"])
    held = kcoord.control.load_in_progress(8000, group_id=group)  # long enough for a busy machine
    started = time.monotonic()
    got = c.committed([TopicPartition(topic, 0)], timeout=60)
    waited = time.monotonic() - started
    c.close()
    assert got[0].offset == 3  # the offsets are back once the partition is loaded
    fetches = kcoord.control.requests(client_id="load-client")
    assert len(fetches) >= 2, fetches  # refused with COORDINATOR_LOAD_IN_PROGRESS, asked again
    assert waited >= 5.0, (waited, held)  # it could not have had them before the load


def test_an_error_for_one_topic_reaches_that_topics_partitions_only(kcoord):
    hit, spared = unique("hit"), unique("spared")
    produce(kcoord.bootstrap, hit, 1)
    produce(kcoord.bootstrap, spared, 1)
    kcoord.control.inject_error("Produce", "TOPIC_AUTHORIZATION_FAILED", count=-1, topic=hit)
    results: dict[str, list] = {hit: [], spared: []}
    p = Producer({"bootstrap.servers": kcoord.bootstrap, "linger.ms": 0, "message.timeout.ms": 20000})
    for t in (hit, spared):
        p.produce(t, b"x", on_delivery=lambda err, msg: results[msg.topic()].append(err))
    p.flush(30)
    assert results[spared] == [None]
    assert [e.code() for e in results[hit]] == [KafkaError.TOPIC_AUTHORIZATION_FAILED]


def test_a_consumer_protocol_member_expired_or_rebalanced_by_the_control_api(kcoord):
    """KIP-848 groups (librdkafka's group.protocol=consumer): an expired member is fenced (its
    partitions lost) and joins again (with the member id it made itself, from epoch 0); a forced
    rebalance is a new group epoch its member reconciles to."""
    topic, group = unique("kip848"), unique("kip848-group")
    produce(kcoord.bootstrap, topic, 1)
    events: list[str] = []
    c = Consumer({"bootstrap.servers": kcoord.bootstrap, "group.id": group, "group.protocol": "consumer",
                  "client.id": "kip848-client", "auto.offset.reset": "earliest", "enable.auto.commit": False})
    c.subscribe([topic], on_assign=lambda _c, parts: events.append("assigned"),
                on_revoke=lambda _c, parts: events.append("revoked"),
                on_lost=lambda _c, parts: events.append("lost"))

    def poll_until(cond, what: str, timeout: float = 90):
        deadline = time.monotonic() + timeout
        while not cond():
            assert time.monotonic() < deadline, f"timed out waiting for {what}: {events}"
            c.poll(0.2)
        return cond()

    try:
        poll_until(lambda: "assigned" in events, "the first assignment")
        first = poll_until(lambda: kcoord.control.group(group)["members"], "the member")[0]["member_id"]
        assert kcoord.control.group(group)["type"] == "consumer"
        epoch = kcoord.control.group(group)["epoch"]
        assert kcoord.control.rebalance(group)["group_id"] == group
        poll_until(lambda: kcoord.control.group(group)["epoch"] > epoch, "a new group epoch")
        assert kcoord.control.group(group)["members"][0]["member_id"] == first  # the same member, reconciled

        assigned = events.count("assigned")
        assert kcoord.control.expire_member(group, first)["member_id"] == first
        poll_until(lambda: events.count("assigned") > assigned, "an assignment after joining again")
        assert "lost" in events  # fenced: its partitions were lost, not revoked
        again = poll_until(lambda: kcoord.control.group(group)["members"], "the member back")[0]
        assert again["client_id"] == "kip848-client"
    finally:
        c.close()
