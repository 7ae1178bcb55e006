"""Exactly-once consume-transform-produce with Java kafka-clients 3.9 (tests/compat/java/
TxnCopier.java: read_committed input, a transactional producer, sendOffsetsToTransaction with
the consumer's group metadata) over 10,000 records, while the server is SIGKILLed and restarted
twice and a second instance joins (a rebalance between two transactional instances). Each
transaction pauses 100 ms before committing, so the kills land inside transactions.

Afterwards the output topic, read with read_committed, holds every input record exactly once,
and the group's committed offsets are the input's end offsets."""
from __future__ import annotations

import time
from collections import Counter

import pytest
from clientlib import Background, compile_java, java_classpath
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from conftest import committed, unique

N = 10_000
PARTITIONS = 4


def copier(bootstrap: str, src: str, dst: str, group: str, txn_id: str) -> Background:
    compile_java()
    return Background(["java", "-Xshare:auto", "-XX:TieredStopAtLevel=1", "-Xmx256m",
                       "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn", "-Dorg.slf4j.simpleLogger.logFile=System.err",
                       "-cp", java_classpath(), "TxnCopier", bootstrap, src, dst, group, txn_id, "100"], txn_id, deadline=420)


def produce(bootstrap: str, topic: str, start: int, end: int) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "enable.idempotence": True})
    for i in range(start, end):
        p.produce(topic, key=f"k{i}", value=f"v{i}")
        if i % 1000 == 0:
            p.poll(0)
    assert p.flush(60) == 0


def copied_total(bootstrap: str, group: str, topic: str) -> int:
    try:
        return sum(committed(bootstrap, group, topic).values())
    except Exception:  # noqa: BLE001 - the server may be restarting
        return -1


def wait_until(cond, timeout: float, what: str, *members: Background) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return
        time.sleep(0.5)
    raise AssertionError(f"timed out waiting for {what}\n" + "\n".join(m.describe() for m in members))


def read_committed(bootstrap: str, topic: str, expect: int, quiet_s: float = 3.0) -> list[str]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": unique("reader"), "isolation.level": "read_committed",
                  "enable.auto.commit": False})
    c.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
    values: list[str] = []
    last = time.monotonic()
    deadline = time.monotonic() + 120
    try:
        while time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is not None and not m.error():
                values.append(m.value().decode())
                last = time.monotonic()
            elif len(values) >= expect and time.monotonic() - last > quiet_s:
                break
    finally:
        c.close()
    return values


@pytest.mark.timeout(420)
@pytest.mark.compat("java", "transactions")
def test_consume_transform_produce_exactly_once_across_crashes_and_a_rebalance(kcoord_factory, members):
    srv = kcoord_factory({"num.partitions": str(PARTITIONS), "transaction.state.log.num.partitions": "4",
                          "offsets.topic.num.partitions": "4"})
    src, dst, group = unique("eos-in"), unique("eos-out"), unique("eos")
    admin = AdminClient({"bootstrap.servers": srv.bootstrap})
    for f in admin.create_topics([NewTopic(src, PARTITIONS, 1), NewTopic(dst, PARTITIONS, 1)]).values():
        f.result(30)
    produce(srv.bootstrap, src, 0, 2500)

    a = copier(srv.bootstrap, src, dst, group, "copier-a")
    members.append(a)
    a.wait_for(lambda m: m.events("txn"), 90, "a first transaction")
    wait_until(lambda: copied_total(srv.bootstrap, group, src) >= 1000, 90, "1,000 records copied", a)

    srv.kill()  # SIGKILL in the middle of the stream
    srv.start()
    b = copier(srv.bootstrap, src, dst, group, "copier-b")  # the group rebalances over two instances
    members.append(b)
    b.wait_for(lambda m: m.assignment(), 120, "the second instance's partitions")
    produce(srv.bootstrap, src, 2500, 5000)
    b.wait_for(lambda m: m.events("txn"), 120, "the second instance's first transaction")
    wait_until(lambda: copied_total(srv.bootstrap, group, src) >= 4000, 120, "4,000 records copied", a, b)

    srv.kill()
    srv.start()
    produce(srv.bootstrap, src, 5000, N)
    wait_until(lambda: copied_total(srv.bootstrap, group, src) == N, 180, "every record copied", a, b)
    a.close()
    b.close()

    out = read_committed(srv.bootstrap, dst, N)
    counts = Counter(out)
    dupes = {v: n for v, n in counts.items() if n > 1}
    assert not dupes, f"{len(dupes)} records copied more than once, e.g. {list(dupes.items())[:5]}"
    assert set(counts) == {f"copy-v{i}" for i in range(N)}
    c = Consumer({"bootstrap.servers": srv.bootstrap, "group.id": unique("w")})
    ends = {p: c.get_watermark_offsets(TopicPartition(src, p), timeout=10)[1] for p in range(PARTITIONS)}
    c.close()
    assert committed(srv.bootstrap, group, src) == ends
    assert a.events("assigned") and b.events("assigned")
