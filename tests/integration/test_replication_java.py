"""Java kafka-clients 4.x on a three-node cluster (three kcoord processes through ZooKeeper), a
topic with replication factor 3 and min.insync.replicas=2 (tests/compat/java4/
ReplicatedClient.java):

- an idempotent acks=all KafkaProducer and a KafkaConsumer (assigned partition 0 from the
  start) while the partition's leader is SIGKILLed, then restarted: nothing acknowledged is
  lost, the consumer reads every offset once, in order, and what it read is the log;
- the AdminClient's describeTopics names the replicas, the ISR and the leader as the state
  znode has them, through a controlled shutdown and a restart; electLeaders(PREFERRED) moves
  leadership back to the first replica, and a second one is ElectionNotNeededException."""
from __future__ import annotations

import shutil

import pytest
from clientlib import Background, compile_java4, java4_classpath
from conftest import unique
from test_cluster_replication import FAILOVER_S, OVERRIDES, create, full_isr

from kcoord.testing.cluster import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]


def java(mode: str, bootstrap: str, topic: str) -> Background:
    compile_java4()
    assert shutil.which("java"), "java not installed"
    return Background(["java", "-Xshare:auto", "-XX:TieredStopAtLevel=1", "-Xmx256m",
                       "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn", "-Dorg.slf4j.simpleLogger.logFile=System.err",
                       "-cp", java4_classpath(), "ReplicatedClient", mode, bootstrap, topic], f"java-{mode}",
                      deadline=540)


def acked(producer: Background) -> list[tuple[int, int]]:
    return [(o, v) for e in producer.events("acked") for o, v in e["acked"]]


def close(client: Background, timeout: float = 200) -> None:
    assert client.proc.stdin is not None
    client.proc.stdin.write("close\n")
    client.proc.stdin.flush()
    client.wait_for(lambda b: b.events("closed"), timeout, "closed")


def test_java_producer_and_consumer_lose_nothing_when_the_leader_is_sigkilled(kcoord_cluster_factory):
    c = kcoord_cluster_factory(3, overrides=OVERRIDES)
    topic = unique("jrep")
    create(c.bootstrap, topic)
    st = wait_for(lambda: full_isr(c, topic), 90, "the partition online with its ISR")
    producer = java("produce", c.bootstrap, topic)
    consumer = java("consume", c.bootstrap, topic)
    try:
        producer.wait_for(lambda b: len(acked(b)) >= 300, 120, "acknowledged writes before the kill")
        leader = st["leader"]
        c.kill(leader)
        before = len(acked(producer))
        moved = wait_for(lambda: (s := c.state(topic, 0)) and s["leader"] not in (-1, leader) and s, FAILOVER_S,
                         "a new leader")
        producer.wait_for(lambda b: len(acked(b)) >= before + 300, FAILOVER_S + 60, "writes on the new leader")
        c.start(leader)
        wait_for(lambda: full_isr(c, topic), 120, "the restarted node back in the ISR")
        producer.wait_for(lambda b: len(acked(b)) >= before + 500, 90, "writes with the node back")
        close(producer)
        assert not producer.events("error"), producer.events("error")[:5]
        got = sorted(acked(producer))
        end = got[-1][0] + 1
        consumer.wait_for(lambda b: any(o >= end - 1 for _, o, _ in b.consumed()), 120, "the consumer to read all")
        close(consumer)
    finally:
        for b in (producer, consumer):
            if b.alive():
                b.proc.kill()
    assert moved["leader_epoch"] > st["leader_epoch"]
    read = [(o, int(v)) for _, o, v in consumer.consumed()]
    assert [o for o, _ in read][:end] == list(range(end)), "the consumer skipped or repeated an offset"
    by_offset = dict(read)
    lost = [(o, v) for o, v in got if by_offset.get(o) != v]
    assert not lost, f"acknowledged and not read at their offsets: {lost[:5]}"
    values = [v for _, v in read]
    assert len(values) == len(set(values)), "a value in the log twice"
    assert [v for _, v in got] == sorted(v for _, v in got), "acknowledged out of order"


def described(admin: Background, n: int) -> dict:
    admin.proc.stdin.write("describe\n")
    admin.proc.stdin.flush()
    admin.wait_for(lambda b: len(b.events("described")) + len(b.events("error")) > n, 90, "describeTopics")
    assert not admin.events("error"), admin.events("error")
    return admin.events("described")[n]["partitions"][0]


def elect(admin: Background, n: int) -> str | None:
    admin.proc.stdin.write("elect\n")
    admin.proc.stdin.flush()
    admin.wait_for(lambda b: len(b.events("elected")) + len(b.events("error")) > n, 90, "electLeaders")
    assert not admin.events("error"), admin.events("error")
    return admin.events("elected")[n]["error"]


def test_java_admin_sees_replicas_isr_and_elections(kcoord_cluster_factory):
    c = kcoord_cluster_factory(3, overrides=OVERRIDES)
    topic = unique("jadm")
    create(c.bootstrap, topic)
    st = wait_for(lambda: full_isr(c, topic), 90, "the partition online with its ISR")
    replicas = c.assignment(topic)[0]
    preferred = replicas[0]
    assert st["leader"] == preferred
    admin = java("admin", c.bootstrap, topic)
    descs = 0

    def describe_until(cond, what: str) -> dict:
        nonlocal descs

        def once():
            nonlocal descs
            d = described(admin, descs)
            descs += 1
            return cond(d) and d
        return wait_for(once, 60, what, interval=0.5)

    try:
        d = describe_until(lambda d: True, "a description")
        assert d == {"partition": 0, "leader": preferred, "replicas": replicas, "isr": d["isr"]}
        assert sorted(d["isr"]) == [1, 2, 3]
        # the preferred leader shut down: another leads, the ISR loses it, the replicas keep it
        assert c.stop(preferred) == 0
        d = describe_until(lambda d: d["leader"] not in (-1, preferred), "the leader moved")
        assert d["replicas"] == replicas and sorted(d["isr"]) == sorted(set(replicas) - {preferred}), d
        assert d["leader"] == c.state(topic, 0)["leader"]
        c.start(preferred)
        wait_for(lambda: full_isr(c, topic), 120, "the restarted node back in the ISR")
        d = describe_until(lambda d: sorted(d["isr"]) == [1, 2, 3], "the ISR with every replica")
        assert d["leader"] != preferred  # auto.leader.rebalance's check runs every 300 s
        close(admin)
    finally:
        if admin.alive():
            admin.proc.kill()
    # a preferred election moves it back. The Admin sends it to the controller its metadata names;
    # one made before the controller moved (the stopped node may have been it) can be answered
    # NOT_CONTROLLER per partition, as a ZooKeeper-mode Kafka broker answers: a new Admin
    admin = java("admin", c.bootstrap, topic)
    descs = 0
    try:
        assert elect(admin, 0) is None
        d = describe_until(lambda d: d["leader"] == preferred, "the preferred replica leading")
        assert c.state(topic, 0)["leader"] == preferred and sorted(d["isr"]) == [1, 2, 3]
        assert elect(admin, 1) == "ElectionNotNeededException"
        close(admin)
    finally:
        if admin.alive():
            admin.proc.kill()
