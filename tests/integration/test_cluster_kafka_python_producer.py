"""kafka-python 3.0.12's idempotent acks=all producer on three kcoord nodes and a real
ZooKeeper (test_cluster_replication.py runs confluent-kafka's producer the same way): a topic
with replication factor 3 and min.insync.replicas=2; the partition's leader is SIGKILLed while
KafkaProducer(acks='all', enable_idempotence=True) keeps producing, then restarted. Checked:
every record sent is acknowledged (the producer's retries find the new leader; none fails),
the log holds each value exactly once and in the order sent (the idempotent producer's
sequence numbers across the leader change), read back with kafka-python's own consumer;
nothing a kafka-python consumer read during the failover is retracted; the restarted node
rejoins the ISR. With two nodes down, what kafka-python surfaces for acks=all: the leader's
NOT_ENOUGH_REPLICAS (19) as NotEnoughReplicasError once the producer's retries are spent, and,
with its default unbounded retries, a KafkaTimeoutError at delivery.timeout.ms (the error is
retriable: it never gives up sooner); acks=1 is still served."""
from __future__ import annotations

import threading
import time

import pytest
from conftest import unique
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.errors import KafkaTimeoutError, NotEnoughReplicasError
from test_cluster_replication import FAILOVER_S, OVERRIDES, Reader, create, full_isr

from kcoord.testing.cluster import wait_for

pytestmark = pytest.mark.integration


class KafkaPythonLoad:
    """KafkaProducer(acks='all', enable_idempotence=True) in a thread sending 0, 1, 2, ... to
    partition 0; each acknowledged (offset, value) recorded, each failed send's exception."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.topic = topic
        self.acked: list[tuple[int, int]] = []
        self.errors: list[Exception] = []
        self.sent = 0
        self._stop = threading.Event()
        self.producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", enable_idempotence=True,
                                      linger_ms=5, delivery_timeout_ms=180000, request_timeout_ms=30000,
                                      retry_backoff_ms=100, metadata_max_age_ms=1000)
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            if self.sent - len(self.acked) - len(self.errors) > 2000:
                time.sleep(0.01)  # the leader is moving: do not fill the buffer meanwhile
                continue
            value = self.sent
            f = self.producer.send(self.topic, str(value).encode(), partition=0)
            f.add_callback(lambda md, v=value: self.acked.append((md.offset, v)))
            f.add_errback(self.errors.append)
            self.sent += 1
            if value % 50 == 0:
                time.sleep(0.005)

    def acked_after(self, n: int, timeout: float, what: str) -> None:
        wait_for(lambda: len(self.acked) >= n, timeout, what)

    def stop(self) -> None:
        self._stop.set()
        self.thread.join(30)
        self.producer.flush(180)
        self.producer.close(30)


def read_with_kafka_python(bootstrap: str, topic: str, end: int) -> list[tuple[int, int]]:
    """Partition 0 from offset 0 up to `end` with kafka-python's consumer."""
    c = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, auto_offset_reset="earliest",
                      request_timeout_ms=30000, metadata_max_age_ms=1000)
    tp = TopicPartition(topic, 0)
    c.assign([tp])
    c.seek(tp, 0)
    out: list[tuple[int, int]] = []
    deadline = time.monotonic() + 120
    try:
        while (not out or out[-1][0] < end - 1) and time.monotonic() < deadline:
            for recs in c.poll(timeout_ms=500).values():
                out.extend((r.offset, int(r.value)) for r in recs)
    finally:
        c.close()
    return out


def test_kafka_python_idempotent_producer_survives_its_leader_sigkilled(kcoord_cluster_factory):
    c = kcoord_cluster_factory(3, overrides=OVERRIDES)
    topic = unique("kpp")
    create(c.bootstrap, topic)
    st = wait_for(lambda: full_isr(c, topic), 60, "the partition online with its ISR")
    load = KafkaPythonLoad(c.bootstrap, topic)
    reader = Reader(c.bootstrap, topic)
    try:
        load.acked_after(500, 60, "acknowledged writes before the kill")
        leader = st["leader"]
        c.kill(leader)
        before = len(load.acked)
        moved = wait_for(lambda: (s := c.state(topic, 0)) and s["leader"] not in (-1, leader) and s, FAILOVER_S,
                         "a new leader")
        assert moved["leader_epoch"] > st["leader_epoch"]
        load.acked_after(before + 500, FAILOVER_S, "acknowledged writes on the new leader")
        c.start(leader)
        wait_for(lambda: full_isr(c, topic), 120, "the restarted node back in the ISR")
        load.acked_after(len(load.acked) + 300, 60, "writes with the restarted node in the ISR")
    finally:
        load.stop()
        reader.stop()
    assert not load.errors, load.errors[:5]
    acked = sorted(load.acked)
    assert len(acked) == load.sent, f"{load.sent} sent, {len(acked)} acknowledged"
    # acknowledged in the order sent, at increasing offsets
    assert [v for _, v in acked] == list(range(load.sent)), "acknowledged out of order"
    end = acked[-1][0] + 1
    read = read_with_kafka_python(c.bootstrap, topic, end)
    assert [o for o, _ in read] == list(range(end)), "a gap, a repeat or a hole in the log"
    # exactly once, in order: the retries across the leader change wrote no duplicate
    assert [v for _, v in read] == list(range(load.sent)), "a value lost, repeated or out of order"
    assert dict(read) == dict(acked), "a record is not at the offset it was acknowledged at"
    # nothing the kafka-python consumer was given during the failover was taken back
    assert reader.seen, "the kafka-python consumer read nothing"
    final = dict(read)
    assert all(final.get(o) == v for o, v in reader.seen), "a record read was retracted"
    assert sorted(c.state(topic, 0)["isr"]) == [1, 2, 3]


def test_kafka_python_acks_all_refused_with_two_nodes_down_acks_1_served(kcoord_cluster_factory):
    c = kcoord_cluster_factory(3, overrides=OVERRIDES)
    topic = unique("kpminisr")
    create(c.bootstrap, topic)
    st = wait_for(lambda: full_isr(c, topic), 60, "the partition online with its ISR")
    leader = st["leader"]
    p = KafkaProducer(bootstrap_servers=c.bootstrap, acks="all", enable_idempotence=True)
    assert p.send(topic, b"before", partition=0).get(60).offset == 0
    p.close(30)
    for b in (1, 2, 3):
        if b != leader:
            c.kill(b)
    wait_for(lambda: (s := c.state(topic, 0)) and s["isr"] == [leader], FAILOVER_S, "the ISR shrunk to the leader")
    bootstrap = c.node(leader).bootstrap
    # bounded retries: the broker's own error once they are spent
    p = KafkaProducer(bootstrap_servers=bootstrap, acks="all", enable_idempotence=True, retries=3,
                      retry_backoff_ms=200, request_timeout_ms=10000, delivery_timeout_ms=60000)
    with pytest.raises(NotEnoughReplicasError):
        p.send(topic, b"refused", partition=0).get(90)
    p.close(30)
    # kafka-python's defaults (retries unbounded): it retries the retriable error until
    # delivery.timeout.ms, then fails the send with a timeout
    p = KafkaProducer(bootstrap_servers=bootstrap, acks="all", enable_idempotence=True,
                      retry_backoff_ms=200, request_timeout_ms=3000, delivery_timeout_ms=6000)
    started = time.monotonic()
    with pytest.raises(KafkaTimeoutError):
        p.send(topic, b"timed out", partition=0).get(90)
    assert time.monotonic() - started >= 5
    p.close(30)
    # acks=1 (idempotence needs acks=all: off) is served by the leader alone
    p = KafkaProducer(bootstrap_servers=bootstrap, acks=1, enable_idempotence=False)
    md = p.send(topic, b"acks=1", partition=0).get(60)
    p.close(30)
    assert md.offset >= 1
    c2 = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, auto_offset_reset="earliest")
    tp = TopicPartition(topic, 0)
    c2.assign([tp])
    c2.seek(tp, 0)
    values: list[bytes] = []
    deadline = time.monotonic() + 60
    while b"acks=1" not in values and time.monotonic() < deadline:
        for recs in c2.poll(timeout_ms=500).values():
            values.extend(r.value for r in recs)
    c2.close()
    assert values[0] == b"before" and values[-1] == b"acks=1", values
    assert b"refused" not in values and b"timed out" not in values, values
