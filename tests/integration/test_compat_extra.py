"""Cells of the client compatibility matrix (docs/compatibility.md) that no other integration test covers.

Each test drives one real client against a kcoord process and carries the `compat` marker of
the cell it backs: static membership and restart resume for kafka-python and aiokafka; reading
`__consumer_offsets` with the three Python clients; kcat's commit/fetch, restart resume, rebalance on leave and static membership;
kafkajs' rebalance on leave and restart resume; Java's restart resume.
"""
from __future__ import annotations

import asyncio
import re
import shutil
import struct
import subprocess
import threading
import time

import pytest
from clientlib import NODE_DIR, Background, kafkajs, kcat, kcoord_java, python_member, sarama, wait_balanced
from confluent_kafka import Consumer, Producer, TopicPartition
from conftest import committed, removals, unique
from kafka.admin import KafkaAdminClient, NewTopic

from kcoord.protocol.partitioner import partition_for

pytestmark = pytest.mark.integration

OFFSETS = "__consumer_offsets"
SESSION_MS = 10_000
# A static member restarted "within its session" must be back before this: long enough for a
# new client process to start and rejoin on a busy machine.
STATIC_SESSION_MS = 45_000
HEARTBEAT_MS = 1_000


def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=15000)
    try:
        admin.create_topics([NewTopic(topic, partitions, 1)])
    finally:
        admin.close()


def produce(bootstrap: str, topic: str, keys: list[str]) -> set[tuple[int, int]]:
    """confluent-kafka; the (partition, offset) of every message."""
    p = Producer({"bootstrap.servers": bootstrap, "message.timeout.ms": 20000, "linger.ms": 5})
    where: set[tuple[int, int]] = set()
    for k in keys:
        p.produce(topic, key=k.encode(), value=b"v-" + k.encode(),
                  on_delivery=lambda err, msg: err is None and where.add((msg.partition(), msg.offset())))
    assert p.flush(30) == 0
    assert len(where) == len(keys)
    return where


def wait_until(condition, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while not (value := condition()):
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.2)
    return value


# ---- static membership: kafka-python and aiokafka ----


@pytest.mark.parametrize("lib", [
    pytest.param("kafka-python", marks=pytest.mark.compat("kafka-python", "static membership")),
    pytest.param("aiokafka", marks=pytest.mark.compat("aiokafka", "static membership")),
])
def test_static_member_restart_keeps_its_partitions(kcoord, members, lib):
    """A static member (group.instance.id) SIGKILLed and restarted within its session gets its
    partitions back in the same generation; the other member (the leader) sees no rebalance."""
    topic, group = unique("static"), unique("static-group")
    create_topic(kcoord.bootstrap, topic, 6)
    leader = python_member("confluent", kcoord.bootstrap, topic, group, name="leader",
                           session_timeout_ms=SESSION_MS, heartbeat_interval_ms=HEARTBEAT_MS)
    members.append(leader)
    leader.wait_for(lambda m: m.assignment() == set(range(6)), 60, "the leader's assignment")

    def static() -> Background:
        m = python_member(lib, kcoord.bootstrap, topic, group, instance_id=f"{lib}-static-1", name="static",
                          session_timeout_ms=STATIC_SESSION_MS, heartbeat_interval_ms=HEARTBEAT_MS)
        members.append(m)
        return m

    first = static()
    owned = wait_balanced([leader, first], 6, 60, "two members")
    generation = first.events("assigned")[-1]["generation"]
    leader_before = [e for e in leader.events() if e["kind"] in ("assigned", "revoked", "lost")]

    first.kill()
    again = static()
    again.wait_for(lambda m: m.assignment() is not None, STATIC_SESSION_MS / 1000 - 5,
                   "the static member's assignment")
    assert again.assignment() == owned[1], again.describe()
    assert again.events("assigned")[-1]["generation"] == generation, again.describe()
    time.sleep(3 * HEARTBEAT_MS / 1000)  # a rebalance would reach the leader with its next heartbeats
    assert [e for e in leader.events() if e["kind"] in ("assigned", "revoked", "lost")] == leader_before, \
        leader.describe()
    for m in (leader, again):
        assert not m.events("error"), m.describe()


# ---- restart resume: kafka-python and aiokafka (confluent-kafka: test_end_to_end) ----


@pytest.mark.parametrize("lib", [
    pytest.param("kafka-python", marks=pytest.mark.compat("kafka-python", "restart resume")),
    pytest.param("aiokafka", marks=pytest.mark.compat("aiokafka", "restart resume")),
])
def test_group_resumes_at_committed_offsets_after_server_restart(kcoord, members, lib):
    topic, group = unique("resume"), unique("resume-group")
    create_topic(kcoord.bootstrap, topic, 3)
    old = produce(kcoord.bootstrap, topic, [f"a{i}" for i in range(60)])
    first = python_member(lib, kcoord.bootstrap, topic, group, name="first")
    members.append(first)
    first.wait_for(lambda m: len(m.consumed()) >= 60, 60, "the first 60 records")
    wait_until(lambda: sum(committed(kcoord.bootstrap, group, topic).values()) == 60, 30, "the commits")
    assert first.close() == 0, first.describe()

    kcoord.restart()
    new = produce(kcoord.bootstrap, topic, [f"b{i}" for i in range(40)])
    second = python_member(lib, kcoord.bootstrap, topic, group, name="second")
    members.append(second)
    second.wait_for(lambda m: len(m.consumed()) >= 40, 60, "the 40 new records")
    time.sleep(1)  # anything redelivered from before the restart would have come first
    got = {(p, o) for p, o, _ in second.consumed()}
    assert got == new and not got & old, second.describe()
    assert second.close() == 0, second.describe()


# ---- reading __consumer_offsets: the three Python clients ----


def decode_commit(key: bytes | None, value: bytes | None) -> tuple[str, str, int, int] | None:
    """(group, topic, partition, offset) of an OffsetCommit record (key version 0/1), else None."""
    if not key or value is None:
        return None
    (version, glen) = struct.unpack_from(">hh", key)
    if version not in (0, 1):
        return None  # group metadata
    group = key[4:4 + glen].decode()
    (tlen,) = struct.unpack_from(">h", key, 4 + glen)
    topic = key[6 + glen:6 + glen + tlen].decode()
    (partition,) = struct.unpack_from(">i", key, 6 + glen + tlen)
    (offset,) = struct.unpack_from(">q", value, 2)  # every value version starts with the offset
    return group, topic, partition, offset


def read_offsets_confluent(bootstrap: str, partition: int) -> list[tuple[bytes, bytes]]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": unique("reader"), "enable.auto.commit": False})
    try:
        tp = TopicPartition(OFFSETS, partition, 0)
        end = c.get_watermark_offsets(tp, timeout=10)[1]
        c.assign([tp])
        out: list[tuple[bytes, bytes]] = []
        deadline = time.monotonic() + 90
        last = -1
        while last < end - 1 and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is not None and m.error() is None:
                out.append((m.key(), m.value()))
                last = m.offset()
        return out
    finally:
        c.close()


def read_offsets_kafka_python(bootstrap: str, partition: int) -> list[tuple[bytes, bytes]]:
    from kafka import KafkaConsumer
    from kafka.structs import TopicPartition as KTP

    c = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, request_timeout_ms=10000,
                      consumer_timeout_ms=5000, fetch_max_wait_ms=200)
    try:
        tp = KTP(OFFSETS, partition)
        c.assign([tp])
        c.seek_to_beginning(tp)
        end = c.end_offsets([tp])[tp]
        out = []
        for m in c:
            out.append((m.key, m.value))
            if m.offset >= end - 1:
                break
        return out
    finally:
        c.close()


def read_offsets_aiokafka(bootstrap: str, partition: int) -> list[tuple[bytes, bytes]]:
    from aiokafka import AIOKafkaConsumer
    from aiokafka.structs import TopicPartition as ATP

    async def run() -> list[tuple[bytes, bytes]]:
        c = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, request_timeout_ms=10000,
                             fetch_max_wait_ms=200)
        await c.start()
        try:
            tp = ATP(OFFSETS, partition)
            c.assign([tp])
            await c.seek_to_beginning(tp)
            end = (await c.end_offsets([tp]))[tp]
            out: list[tuple[bytes, bytes]] = []
            last = -1
            while last < end - 1:
                for m in (await c.getmany(tp, timeout_ms=1000)).get(tp, []):
                    out.append((m.key, m.value))
                    last = m.offset
            return out
        finally:
            await c.stop()

    return asyncio.run(asyncio.wait_for(run(), 30))


def _unhex(records: list[dict], partition: int | None = None) -> list[tuple[bytes, bytes]]:
    return [(bytes.fromhex(r["key"]) if r["key"] else None, bytes.fromhex(r["value"]) if r["value"] else None)
            for r in records if partition is None or r["partition"] == partition]


def read_offsets_java(bootstrap: str, partition: int) -> list[tuple[bytes, bytes]]:
    res = kcoord_java("readhex", bootstrap, OFFSETS, partition, timeout=90)
    return _unhex(res.kinds("record"))


def read_offsets_kafkajs(bootstrap: str, partition: int) -> list[tuple[bytes, bytes]]:
    res = kafkajs("readhex", bootstrap, OFFSETS, unique("js-reader"), 3000, timeout=90)
    return _unhex(res.kinds("record"), partition)


def read_offsets_sarama(bootstrap: str, partition: int) -> list[tuple[bytes, bytes]]:
    return _unhex(sarama("readhex", bootstrap, OFFSETS, partition, timeout=90).kinds("record"))


@pytest.mark.parametrize("reader", [
    pytest.param(read_offsets_confluent, marks=pytest.mark.compat("confluent-kafka", "read __consumer_offsets"),
                 id="confluent-kafka"),
    pytest.param(read_offsets_kafka_python, marks=pytest.mark.compat("kafka-python", "read __consumer_offsets"),
                 id="kafka-python"),
    pytest.param(read_offsets_aiokafka, marks=pytest.mark.compat("aiokafka", "read __consumer_offsets"),
                 id="aiokafka"),
    pytest.param(read_offsets_java, marks=pytest.mark.compat("java", "read __consumer_offsets"), id="java"),
    pytest.param(read_offsets_kafkajs, marks=pytest.mark.compat("kafkajs", "read __consumer_offsets"),
                 id="kafkajs"),
    pytest.param(read_offsets_sarama, marks=pytest.mark.compat("sarama", "read __consumer_offsets"),
                 id="sarama"),
])
def test_client_reads_commit_records_from_consumer_offsets(kcoord, reader):
    """The client reads the group's partition of __consumer_offsets (abs(javaHash(group)) % 50)
    and finds the commit records, in Kafka's format, in commit order."""
    topic, group = unique("co"), unique("co-group")
    create_topic(kcoord.bootstrap, topic, 2)
    c = Consumer({"bootstrap.servers": kcoord.bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        for off in (5, 17):
            c.commit(offsets=[TopicPartition(topic, 0, off), TopicPartition(topic, 1, off + 1)], asynchronous=False)
    finally:
        c.close()
    records = reader(kcoord.bootstrap, partition_for(group, 50))
    commits = [d for k, v in records if (d := decode_commit(k, v)) is not None and d[0] == group]
    by_partition: dict[tuple[str, int], list[int]] = {}
    for _, t, p, off in commits:
        by_partition.setdefault((t, p), []).append(off)
    assert by_partition == {(topic, 0): [5, 17], (topic, 1): [6, 18]}, commits


# ---- kcat (librdkafka 2.0): commit/fetch, restart resume, rebalance on leave ----


def kcat_produce(bootstrap: str, topic: str, keys: list[str]) -> None:
    data = "".join(f"{k}:v-{k}\n" for k in keys).encode()
    kcat("-b", bootstrap, "-P", "-t", topic, "-K", ":", "-X", "socket.timeout.ms=10000", input=data, timeout=60)


def kcat_group_read(bootstrap: str, topic: str, group: str) -> list[tuple[int, int, str]]:
    """kcat as a balanced consumer of `group` until the end of every partition (commits on exit)."""
    res = kcat("-b", bootstrap, "-X", "auto.offset.reset=earliest", "-e", "-q", "-f", "%p %o %k\n",
               "-G", group, topic, timeout=90)
    return [(int(p), int(o), k) for p, o, k in (ln.split(" ") for ln in res.stdout.splitlines() if ln)]


@pytest.mark.compat("kcat", "commit/fetch")
def test_kcat_commits_and_a_second_run_resumes_at_the_commit(kcoord):
    topic, group = unique("kc"), unique("kc-group")
    create_topic(kcoord.bootstrap, topic, 3)
    kcat_produce(kcoord.bootstrap, topic, [f"a{i}" for i in range(50)])
    first = kcat_group_read(kcoord.bootstrap, topic, group)
    assert sorted(k for _, _, k in first) == sorted(f"a{i}" for i in range(50))
    ends: dict[int, int] = {}
    for p, o, _ in first:
        ends[p] = max(ends.get(p, 0), o + 1)
    wait_until(lambda: committed(kcoord.bootstrap, group, topic) == ends, 30, "kcat's commits")
    kcat_produce(kcoord.bootstrap, topic, [f"b{i}" for i in range(20)])
    second = kcat_group_read(kcoord.bootstrap, topic, group)  # OffsetFetch: starts at the commits
    assert sorted(k for _, _, k in second) == sorted(f"b{i}" for i in range(20)), second


@pytest.mark.compat("kcat", "restart resume")
def test_kcat_resumes_after_server_restart(kcoord):
    topic, group = unique("kcr"), unique("kcr-group")
    create_topic(kcoord.bootstrap, topic, 3)
    kcat_produce(kcoord.bootstrap, topic, [f"a{i}" for i in range(50)])
    assert len(kcat_group_read(kcoord.bootstrap, topic, group)) == 50
    wait_until(lambda: sum(committed(kcoord.bootstrap, group, topic).values()) == 50, 30, "kcat's commits")
    kcoord.restart()
    kcat_produce(kcoord.bootstrap, topic, [f"b{i}" for i in range(20)])
    again = kcat_group_read(kcoord.bootstrap, topic, group)
    assert sorted(k for _, _, k in again) == sorted(f"b{i}" for i in range(20)), again


@pytest.mark.compat("kcat", "rebalance on leave")
def test_kcat_leaving_hands_its_partitions_back(kcoord, members):
    """kcat joins a group beside a confluent-kafka member (both roundrobin), takes half of the
    partitions, reads to their end and closes (LeaveGroup): the other member takes everything
    back before any session could expire."""
    topic, group = unique("kcl"), unique("kcl-group")
    create_topic(kcoord.bootstrap, topic, 6)
    produce(kcoord.bootstrap, topic, [f"a{i}" for i in range(60)])
    stays = python_member("confluent", kcoord.bootstrap, topic, group, name="stays",
                          session_timeout_ms=SESSION_MS, heartbeat_interval_ms=HEARTBEAT_MS)
    members.append(stays)
    stays.wait_for(lambda m: m.assignment() == set(range(6)), 60, "the first member's assignment")
    stays.wait_for(lambda m: len(m.consumed()) >= 60, 60, "the 60 records")
    res = kcat("-b", kcoord.bootstrap, "-G", group, "-X", "partition.assignment.strategy=roundrobin",
               "-X", f"session.timeout.ms={SESSION_MS}", "-e", "-f", "%p %o\n", topic, timeout=60)
    shared = [e["partitions"] for e in stays.events("assigned")]
    assert any(len(p) == 3 for p in shared), (shared, res.describe())  # kcat held the other half
    stays.wait_for(lambda m: m.assignment() == set(range(6)), 60, "the take-over")
    assert removals(kcoord, group) == (1, 0), "kcat's close was not a LeaveGroup"
    assert not res.stdout.strip(), res.describe()  # everything was committed: kcat re-read nothing
    assert not stays.events("error") and not stays.events("commit_error"), stays.describe()


class KcatMember:
    """kcat as a long-running balanced consumer (-G); its assignments come from the
    "% Group ... rebalanced (...): assigned: t [0], t [3]" lines it prints on stderr."""

    _ASSIGNED = re.compile(r"rebalanced \(memberid ([^)]*)\): assigned: (.*)$")

    def __init__(self, bootstrap: str, topic: str, group: str, instance_id: str,
                 session_ms: int = STATIC_SESSION_MS) -> None:
        exe = shutil.which("kcat") or shutil.which("kafkacat")
        assert exe, "kcat not found: run `make clients`"
        self.proc = subprocess.Popen(
            [exe, "-b", bootstrap, "-G", group, "-X", f"group.instance.id={instance_id}",
             "-X", "partition.assignment.strategy=roundrobin", "-X", f"session.timeout.ms={session_ms}",
             "-X", f"heartbeat.interval.ms={HEARTBEAT_MS}", "-o", "end", topic],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        self.lines: list[str] = []
        threading.Thread(target=lambda: self.lines.extend(line.rstrip() for line in self.proc.stderr),
                         daemon=True).start()

    def assignments(self) -> list[tuple[str, set[int]]]:
        """(member id, partitions) of every assignment seen so far."""
        out = []
        for line in list(self.lines):
            if m := self._ASSIGNED.search(line):
                out.append((m.group(1), {int(p) for p in re.findall(r"\[(\d+)\]", m.group(2))}))
        return out

    def kill(self) -> None:
        self.proc.kill()  # SIGKILL: no LeaveGroup
        self.proc.wait()


@pytest.mark.compat("kcat", "static membership")
def test_kcat_static_member_restart_keeps_its_partitions(kcoord, members):
    """kcat with group.instance.id beside a confluent-kafka member: SIGKILLed and started again
    within its session, it gets the same partitions back under a new member id, and the other
    member sees no rebalance."""
    topic, group = unique("kcs"), unique("kcs-group")
    create_topic(kcoord.bootstrap, topic, 6)
    other = python_member("confluent", kcoord.bootstrap, topic, group, name="other",
                          session_timeout_ms=SESSION_MS, heartbeat_interval_ms=HEARTBEAT_MS)
    members.append(other)
    other.wait_for(lambda m: m.assignment() == set(range(6)), 60, "the first member's assignment")
    first = KcatMember(kcoord.bootstrap, topic, group, "kcat-static-1")
    try:
        wait_until(lambda: first.assignments() and other.assignment() is not None
                   and first.assignments()[-1][1] | other.assignment() == set(range(6))
                   and not first.assignments()[-1][1] & other.assignment(), 60, "a balanced group")
        first_id, owned = first.assignments()[-1]
        assert len(owned) == 3, first.lines
        before = [e for e in other.events() if e["kind"] in ("assigned", "revoked", "lost")]
    finally:
        first.kill()
    again = KcatMember(kcoord.bootstrap, topic, group, "kcat-static-1")
    try:
        wait_until(lambda: again.assignments(), STATIC_SESSION_MS / 1000 - 5, "the static member's assignment")
        new_id, got = again.assignments()[-1]
        assert got == owned and new_id != first_id, again.lines
        time.sleep(3 * HEARTBEAT_MS / 1000)  # a rebalance would reach the other member by now
        assert [e for e in other.events() if e["kind"] in ("assigned", "revoked", "lost")] == before, \
            other.describe()
        assert not other.events("error"), other.describe()
    finally:
        again.kill()


# ---- kafkajs 2.2.4: rebalance on leave and restart resume ----


def kafkajs_member(bootstrap: str, topic: str, group: str, idle_ms: int, name: str) -> Background:
    """tests/compat/node/client.js `consume` in the background: it leaves (disconnect: LeaveGroup)
    after idle_ms without records or rebalances."""
    # client.js's own deadline (90 s by default) is the test's to bound, not a busy machine's
    return Background(["env", "KCOORD_NODE_DEADLINE_MS=400000", "node", NODE_DIR / "client.js", "consume",
                       bootstrap, topic, group, 1_000_000, idle_ms], name, cwd=NODE_DIR)


@pytest.mark.compat("kafkajs", "rebalance on leave")
def test_kafkajs_member_leaving_hands_its_partitions_over(kcoord, members):
    topic, group = unique("kjl"), unique("kjl-group")
    create_topic(kcoord.bootstrap, topic, 3)
    everything = [f"{topic}-{p}" for p in range(3)]

    def latest(m: Background) -> list[str] | None:
        got = m.events("assigned")
        return got[-1]["partitions"] if got else None

    stays = kafkajs_member(kcoord.bootstrap, topic, group, 60_000, "stays")
    members.append(stays)
    stays.wait_for(lambda m: latest(m) == everything, 60, "the first member's assignment")
    leaves = kafkajs_member(kcoord.bootstrap, topic, group, 4_000, "leaves")
    members.append(leaves)
    leaves.wait_for(lambda m: latest(m), 60, "the second member's assignment")
    stays.wait_for(lambda m: latest(m) not in (None, everything), 30, "the first member giving partitions up")
    assert sorted(latest(stays) + latest(leaves)) == everything, (stays.describe(), leaves.describe())

    leaves.wait_for(lambda m: m.events("done"), 60, "the second member's disconnect")
    stays.wait_for(lambda m: latest(m) == everything, 60, "the take-over")
    # the take-over followed the LeaveGroup, not the expiry of the session
    assert removals(kcoord, group) == (1, 0), "the kafkajs disconnect was not a LeaveGroup"
    assert not stays.events("error") and not stays.events("crash"), stays.describe()


@pytest.mark.compat("kafkajs", "restart resume")
def test_kafkajs_group_resumes_after_server_restart(kcoord):
    topic, group = unique("kjr"), unique("kjr-group")
    create_topic(kcoord.bootstrap, topic, 3)
    assert kafkajs("produce", kcoord.bootstrap, topic, 90, timeout=90).one("produced")["acked"] == 90
    first = kafkajs("consume", kcoord.bootstrap, topic, group, 90, 5000, timeout=120)
    assert len(first.kinds("record")) == 90 and first.one("done")["commit_failures"] == 0, first.describe()
    old = {(r["partition"], r["offset"]) for r in first.kinds("record")}

    kcoord.restart()
    assert kafkajs("produce", kcoord.bootstrap, topic, 30, timeout=90).one("produced")["acked"] == 30
    again = kafkajs("consume", kcoord.bootstrap, topic, group, 1000, 5000, timeout=120)
    got = {(r["partition"], r["offset"]) for r in again.kinds("record")}
    assert len(got) == 30 and not got & old, again.describe()


# ---- Java kafka-clients 3.9: restart resume ----


@pytest.mark.java
@pytest.mark.compat("java", "restart resume")
def test_java_group_resumes_after_server_restart(kcoord):
    topic, group = unique("jr"), unique("jr-group")
    create_topic(kcoord.bootstrap, topic, 3)
    assert kcoord_java("produce", kcoord.bootstrap, topic, 90, "a", timeout=90).one("produced")["acked"] == 90
    first = kcoord_java("consume", kcoord.bootstrap, topic, group, 90, 3000, timeout=90)
    assert len(first.kinds("record")) == 90 and first.one("done")["commit_failures"] == 0, first.describe()

    kcoord.restart()
    assert kcoord_java("produce", kcoord.bootstrap, topic, 30, "b", timeout=90).one("produced")["acked"] == 30
    again = kcoord_java("consume", kcoord.bootstrap, topic, group, 1000, 3000, timeout=90)
    keys = sorted(r["key"] for r in again.kinds("record"))
    assert len(keys) == 30 and all(k.startswith("b") for k in keys), again.describe()
