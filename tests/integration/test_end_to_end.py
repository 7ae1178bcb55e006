"""The data plane end to end with real clients (issue: data plane).

10,000 keyed messages reach a 6-partition topic from confluent-kafka (5,000) and the Java
producer (5,000, idempotent: its default). A group of three consumers from three libraries
(confluent-kafka, kafka-python 3, aiokafka; roundrobin) processes every message exactly once:
each commits synchronously after every poll batch and, for the partitions being taken away, in
its revoke callback, so a rebalance redelivers nothing. After the consumers stop and the server
restarts, a new member of the group resumes at the committed offsets. kcat reads the topic as a
balanced consumer and reads the group's commit records back from __consumer_offsets; kafkajs
produces and consumes in a group.
"""
from __future__ import annotations

import struct
import time
from collections import Counter

import pytest
from clientlib import Background, ClientError, kafkajs, kcat, kcoord_java, python_member, wait_balanced
from confluent_kafka import Consumer, Producer, TopicPartition
from conftest import committed, unique
from kafka.admin import KafkaAdminClient, NewTopic

pytestmark = pytest.mark.integration

PARTITIONS = 6
N_CONFLUENT = 5000
N_JAVA = 5000
N_MORE = 100


def ck_produce(bootstrap: str, topic: str, keys: list[str]) -> list[tuple[int, int, str]]:
    """confluent-kafka: one message per key (value = key reversed); (partition, offset, key) of each."""
    p = Producer({"bootstrap.servers": bootstrap, "message.timeout.ms": 30000, "linger.ms": 5,
                  "enable.idempotence": True})
    delivered: list[tuple[int, int, str]] = []
    errors: list = []

    def report(err, msg):
        if err is not None:
            errors.append(err)
        else:
            delivered.append((msg.partition(), msg.offset(), msg.key().decode()))

    for k in keys:
        p.produce(topic, key=k.encode(), value=k[::-1].encode(), on_delivery=report)
        p.poll(0)
    assert p.flush(60) == 0
    assert not errors, errors[:3]
    assert len(delivered) == len(keys)
    return delivered


def end_offsets(bootstrap: str, topic: str, partitions: int = PARTITIONS) -> dict[int, int]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused-watermarks"})
    try:
        return {p: c.get_watermark_offsets(TopicPartition(topic, p), timeout=15)[1] for p in range(partitions)}
    finally:
        c.close()


def poll_until(condition, timeout: float, what: str, interval: float = 0.2):
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(interval)


def group_failure(kcoord, ms: list[Background], e: Exception) -> ClientError:
    log = "\n".join(ln for ln in kcoord.log_text().splitlines() if "kcoord.group" in ln)[-6000:]
    return ClientError(f"{e}\n" + "\n".join(m.describe() for m in ms) + f"\n--- kcoord group log ---\n{log}")


@pytest.mark.compat("confluent-kafka", "group join", "commit/fetch", "consume", "restart resume")
@pytest.mark.compat("kafka-python", "group join", "commit/fetch", "consume")
@pytest.mark.compat("aiokafka", "group join", "commit/fetch", "consume")
@pytest.mark.compat("kcat", "group join", "consume", "read __consumer_offsets")
def test_three_libraries_consume_exactly_once_and_resume_after_restart(kcoord, members):
    topic, group = unique("e2e"), unique("e2e-group")
    admin = KafkaAdminClient(bootstrap_servers=kcoord.bootstrap, request_timeout_ms=15000)
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])
    admin.close()

    # First half from confluent-kafka, before the group exists.
    ck_keys = [f"c{i}" for i in range(N_CONFLUENT)]
    ck_delivered = ck_produce(kcoord.bootstrap, topic, ck_keys)

    # The group forms while it consumes (members join one after another: rebalances in flight).
    for lib, name in (("confluent", "ck"), ("kafka-python", "kp"), ("aiokafka", "aio")):
        members.append(python_member(lib, kcoord.bootstrap, topic, group, name=name))
    ck, kp, aio = members
    try:
        wait_balanced(members, PARTITIONS, 90, "three members")
    except ClientError as e:
        raise group_failure(kcoord, members, e) from None

    # Second half from the Java producer (idempotent by default) into the stable group.
    java = kcoord_java("produce", kcoord.bootstrap, topic, N_JAVA, "j", timeout=120).one("produced")
    assert java["acked"] == N_JAVA and java["failed"] == 0, java

    ends = end_offsets(kcoord.bootstrap, topic)
    assert sum(ends.values()) == N_CONFLUENT + N_JAVA, ends
    all_pairs = {(p, o) for p in range(PARTITIONS) for o in range(ends[p])}
    assert {(p, o) for p, o, _ in ck_delivered} <= all_pairs

    def consumed() -> list[tuple[int, int, str | None]]:
        return [r for m in members for r in m.consumed()]

    try:
        poll_until(lambda: len(consumed()) >= len(all_pairs), 120, "10,000 records consumed")
        # every record processed is committed: the group's offsets reach the end of every partition
        poll_until(lambda: committed(kcoord.bootstrap, group, topic) == ends, 30, "the final commits", 0.5)
    except AssertionError as e:
        raise group_failure(kcoord, members, e) from None

    got = consumed()
    pairs = Counter((p, o) for p, o, _ in got)
    dupes = {po: n for po, n in pairs.items() if n > 1}
    assert not dupes, f"{len(dupes)} records processed twice, e.g. {sorted(dupes)[:10]}"
    assert set(pairs) == all_pairs
    assert Counter(k for _, _, k in got) == Counter(ck_keys + [f"j{i}" for i in range(N_JAVA)])
    where = {(p, o): k for p, o, k in got}
    assert all(where[(p, o)] == k for p, o, k in ck_delivered)  # keys are where the producer was told
    for m in members:
        assert m.consumed(), f"{m.name} processed nothing\n{m.describe()}"  # the Java half is shared
        assert not m.events("commit_error") and not m.events("error"), m.describe()
        # per partition, each member saw increasing offsets
        last: dict[int, int] = {}
        for p, o, _ in m.consumed():
            assert o > last.get(p, -1), (m.name, p, o, last.get(p))
            last[p] = o

    for m in members:
        assert m.close() == 0, m.describe()

    # A restart of the server; a new member of the group resumes where the group committed.
    kcoord.restart()
    assert committed(kcoord.bootstrap, group, topic) == ends
    resumed = python_member("confluent", kcoord.bootstrap, topic, group, name="resumed")
    members.append(resumed)
    resumed.wait_for(lambda m: m.assignment() == set(range(PARTITIONS)), 60, "the whole topic")
    more = ck_produce(kcoord.bootstrap, topic, [f"n{i}" for i in range(N_MORE)])
    try:
        resumed.wait_for(lambda m: len(m.consumed()) >= N_MORE, 60, f"the {N_MORE} new records")
        poll_until(lambda: sum(committed(kcoord.bootstrap, group, topic).values()) == len(all_pairs) + N_MORE,
                   30, "the new commits", 0.5)
    except AssertionError as e:
        raise group_failure(kcoord, [resumed], e) from None
    # in order per partition, so anything old would have come before the new records
    assert sorted(resumed.consumed()) == sorted(more), resumed.describe()
    assert resumed.close() == 0
    final = committed(kcoord.bootstrap, group, topic)
    assert final == end_offsets(kcoord.bootstrap, topic)

    # kcat as a balanced consumer of a new group reads the whole topic (and commits on close).
    res = kcat("-b", kcoord.bootstrap, "-X", "auto.offset.reset=earliest", "-X", "check.crcs=true",
               "-e", "-q", "-f", "%p %o %k\n", "-G", "kcat-" + group, topic, timeout=90)
    lines = [ln.split(" ") for ln in res.stdout.splitlines() if ln]
    assert len(lines) == len(all_pairs) + N_MORE, res.describe()[-3000:]
    assert {(int(p), int(o)) for p, o, _ in lines} == all_pairs | {(p, o) for p, o, _ in more}
    assert Counter(k for _, _, k in lines) == Counter(ck_keys + [f"j{i}" for i in range(N_JAVA)]
                                                      + [f"n{i}" for i in range(N_MORE)])
    poll_until(lambda: committed(kcoord.bootstrap, "kcat-" + group, topic) == final, 30, "kcat's commits", 0.5)

    # kcat reads __consumer_offsets itself: the group's OffsetCommit records are there, in
    # Kafka's format, the latest one per partition holding the committed offset.
    commits = read_consumer_offsets(kcoord.bootstrap)
    ours = [(tp, off) for (g, tp), off in commits if g == group and tp[0] == topic]
    assert ours, "no commit records for the group in __consumer_offsets"
    latest: dict[int, int] = {}
    for (_, p), off in ours:
        latest[p] = off
    assert latest == final


def read_consumer_offsets(bootstrap: str) -> list[tuple[tuple[str, tuple[str, int]], int]]:
    """`kcat -C -t __consumer_offsets -e`, decoded: ((group, (topic, partition)), offset) of every
    OffsetCommit record (key version 0/1), in log order per __consumer_offsets partition."""
    res = kcat("-b", bootstrap, "-C", "-t", "__consumer_offsets", "-e", "-q", "-X", "check.crcs=true",
               "-f", "%p %o %K %S\n%k%s", timeout=60)
    data, i, out = res.stdout_bytes, 0, []
    while i < len(data):
        nl = data.index(b"\n", i)
        _p, _o, klen, vlen = (int(x) for x in data[i:nl].split())
        i = nl + 1
        key, i = data[i:i + max(klen, 0)], i + max(klen, 0)
        value, i = data[i:i + max(vlen, 0)], i + max(vlen, 0)
        (kver,) = struct.unpack_from(">h", key)
        if kver not in (0, 1) or vlen < 0:
            continue  # group metadata (v2) or a tombstone
        (glen,) = struct.unpack_from(">h", key, 2)
        g = key[4:4 + glen].decode()
        (tlen,) = struct.unpack_from(">h", key, 4 + glen)
        t = key[6 + glen:6 + glen + tlen].decode()
        (part,) = struct.unpack_from(">i", key, 6 + glen + tlen)
        (offset,) = struct.unpack_from(">q", value, 2)  # every value version starts with the offset
        out.append(((g, (t, part)), offset))
    assert out or not data, res.describe()[-2000:]
    return out


@pytest.mark.compat("kafkajs", "group join", "commit/fetch", "consume")
def test_kafkajs_produces_and_consumes_in_a_group(kcoord):
    topic, group = unique("kjs"), unique("kjs-group")
    admin = KafkaAdminClient(bootstrap_servers=kcoord.bootstrap, request_timeout_ms=15000)
    admin.create_topics([NewTopic(topic, 3, 1)])
    admin.close()
    produced = kafkajs("produce", kcoord.bootstrap, topic, 600, timeout=90).one("produced")
    assert produced["acked"] == 600, produced

    res = kafkajs("consume", kcoord.bootstrap, topic, group, 600, 15000, timeout=120)
    recs = res.kinds("record")
    assert len(recs) == 600 and len({(r["partition"], r["offset"]) for r in recs}) == 600, res.describe()
    assert sorted(r["key"] for r in recs) == sorted(f"k{i}" for i in range(600))
    assert sorted(res.one("assigned")["partitions"]) == [f"{topic}-{p}" for p in range(3)]
    assert res.one("done")["commit_failures"] == 0
    ends = end_offsets(kcoord.bootstrap, topic, 3)
    assert committed(kcoord.bootstrap, group, topic) == ends

    # the same group again: it resumes at the committed offsets, so nothing is left to read
    again = kafkajs("consume", kcoord.bootstrap, topic, group, 600, 3000, timeout=90)
    assert again.kinds("assigned") and not again.kinds("record"), again.describe()
