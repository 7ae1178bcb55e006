"""Replication on a real cluster: three kcoord processes joined through ZooKeeper, each node's
replica manager driven by the controller's states (server/cluster/replicas.py). A topic with
replication factor 3 and min.insync.replicas=2 served to a confluent-kafka idempotent acks=all
producer and kafka-python / confluent-kafka consumers while leaders are SIGKILLed, restarted and
shut down (SIGTERM). What is checked: every acknowledged record is read back once, at the
offset it was acknowledged at, in order; nothing a consumer read is ever retracted; a restarted
node rejoins the ISR (the state znode); two nodes down refuse acks=all with NOT_ENOUGH_REPLICAS
and serve acks=1. Deadlines are generous (a session timeout, then the controller's work)."""
from __future__ import annotations

import threading
import time

import pytest
from aiokafka.record.default_records import DefaultRecordBatchBuilder
from confluent_kafka import Consumer, KafkaError, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from conftest import call, unique
from kafka import KafkaConsumer, TopicPartition
from kafka.protocol.consumer import FetchRequest
from kafka.protocol.metadata import MetadataRequest
from kafka.protocol.producer import ProduceRequest

from kcoord.testing.cluster import wait_for

pytestmark = pytest.mark.integration

SESSION_S = 6.0
FAILOVER_S = SESSION_S + 45
OVERRIDES = {"replica.lag.time.max.ms": "4000", "replica.fetch.wait.max.ms": "100",
             "replica.fetch.backoff.ms": "200"}


def create(bootstrap: str, topic: str, partitions: int = 1) -> None:
    a = AdminClient({"bootstrap.servers": bootstrap})
    fs = a.create_topics([NewTopic(topic, partitions, 3, config={"min.insync.replicas": "2"})], request_timeout=90)
    fs[topic].result(120)  # generous: the nodes are still making their 50 __consumer_offsets replicas


def full_isr(cluster, topic: str, partition: int = 0):
    st = cluster.state(topic, partition)
    return st if st and st["leader"] > 0 and sorted(st["isr"]) == [1, 2, 3] else None


class Load:
    """A confluent-kafka idempotent acks=all producer in a thread: sequential values, each
    acknowledged one recorded with its offset; errors recorded by code."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.topic = topic
        self.acked: list[tuple[int, int]] = []  # (offset, value)
        self.errors: list[KafkaError] = []
        self.sent = 0
        self._stop = threading.Event()
        self.producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all",
                                  "linger.ms": 5, "message.timeout.ms": 120000, "retry.backoff.ms": 100,
                                  "topic.metadata.refresh.interval.ms": 1000})
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _done(self, err, msg) -> None:
        if err is not None:
            self.errors.append(err)
        else:
            self.acked.append((msg.offset(), int(msg.value())))

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.producer.produce(self.topic, str(self.sent).encode(), partition=0, on_delivery=self._done)
                self.sent += 1
            except BufferError:
                pass
            self.producer.poll(0.005)

    def acked_after(self, n: int, timeout: float, what: str) -> None:
        wait_for(lambda: len(self.acked) >= n, timeout, what)

    def stop(self) -> None:
        self._stop.set()
        self.thread.join(30)
        left = self.producer.flush(150)
        assert left == 0, f"{left} records never answered"


class Reader:
    """A kafka-python consumer in a thread reading partition 0 from the start (read_committed
    is not needed: no transactions): every (offset, value) it is ever given."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.seen: list[tuple[int, int]] = []
        self._stop = threading.Event()
        self.consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False,
                                      auto_offset_reset="earliest", metadata_max_age_ms=1000,
                                      request_timeout_ms=30000, retry_backoff_ms=200)
        self.consumer.assign([TopicPartition(topic, 0)])
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                for recs in self.consumer.poll(timeout_ms=200).values():
                    self.seen.extend((r.offset, int(r.value)) for r in recs)
            except Exception:  # noqa: BLE001 - the leader is moving; kafka-python retries at the next poll
                time.sleep(0.2)

    def stop(self) -> None:
        self._stop.set()
        self.thread.join(30)
        self.consumer.close()


def read_all(bootstrap: str, topic: str, end: int) -> list[tuple[int, int]]:
    """Partition 0 from the start to `end` with confluent-kafka (its Fetch carries the leader
    epoch the Metadata answer gave it: a mismatch would be FENCED_LEADER_EPOCH)."""
    from confluent_kafka import TopicPartition as TP

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": unique("g"), "enable.auto.commit": False,
                  "auto.offset.reset": "earliest"})
    c.assign([TP(topic, 0, 0)])
    out: list[tuple[int, int]] = []
    deadline = time.monotonic() + 90
    try:
        while (not out or out[-1][0] < end - 1) and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is None:
                continue
            assert m.error() is None, m.error()
            out.append((m.offset(), int(m.value())))
    finally:
        c.close()
    return out


def check_acked_read_once(acked: list[tuple[int, int]], read: list[tuple[int, int]]) -> None:
    offsets = [o for o, _ in read]
    assert offsets == sorted(set(offsets)), "offsets repeat or go backwards"
    by_offset = dict(read)
    for offset, value in acked:
        assert by_offset.get(offset) == value, f"acknowledged {value} at {offset}, read {by_offset.get(offset)}"
    values = [v for _, v in read]
    assert len(values) == len(set(values)), "a value was written twice"
    acked_values = [v for _, v in sorted(acked)]
    assert acked_values == sorted(acked_values), "acknowledged out of order"


def test_leader_sigkilled_under_load_loses_nothing_acknowledged_and_rejoins_after_restart(kcoord_cluster_factory):
    c = kcoord_cluster_factory(3, overrides=OVERRIDES)
    topic = unique("rep")
    create(c.bootstrap, topic)
    st = wait_for(lambda: full_isr(c, topic), 60, "the partition online with its ISR")
    load = Load(c.bootstrap, topic)
    reader = Reader(c.bootstrap, topic)
    try:
        load.acked_after(200, 60, "acknowledged writes before the kill")
        leader = st["leader"]
        c.kill(leader)
        before = len(load.acked)
        moved = wait_for(lambda: (s := c.state(topic, 0)) and s["leader"] not in (-1, leader) and s, FAILOVER_S,
                         "a new leader")
        assert moved["leader_epoch"] > st["leader_epoch"]
        load.acked_after(before + 300, FAILOVER_S, "acknowledged writes on the new leader")
        c.start(leader)
        wait_for(lambda: full_isr(c, topic), 120, "the restarted node back in the ISR")
        load.acked_after(len(load.acked) + 100, 60, "writes with the restarted node in the ISR")
    finally:
        load.stop()
        reader.stop()
    fatal = [e for e in load.errors if not e.retriable()]
    assert not fatal, fatal
    acked = sorted(load.acked)
    end = acked[-1][0] + 1
    read = read_all(c.bootstrap, topic, end)
    check_acked_read_once(acked, read)
    assert [o for o, _ in read] == list(range(end)), "a gap or a hole in the log"
    # nothing a consumer was given during the failover was taken back
    seen = dict(reader.seen)
    assert seen, "the kafka-python consumer read nothing"
    final = dict(read)
    assert all(final.get(o) == v for o, v in seen.items() if o < end), "a record read was retracted"
    # the restarted node's return to the ISR was the leader's change (the state znode, at the
    # epoch of the failover); the controller's next state starts from it: a controlled
    # shutdown of the leader leaves the two others, the restarted one among them, in the ISR
    rejoined = c.state(topic, 0)
    assert sorted(rejoined["isr"]) == [1, 2, 3] and rejoined["leader_epoch"] == moved["leader_epoch"]
    assert c.stop(rejoined["leader"]) == 0
    after = c.state(topic, 0)
    assert after["leader"] not in (-1, rejoined["leader"]) and after["leader_epoch"] > rejoined["leader_epoch"]
    assert sorted(after["isr"]) == sorted(b for b in (1, 2, 3) if b != rejoined["leader"]), after
    # the restarted node alone: it leads, and its log (truncated to its leader's, then caught
    # up) is the one every acknowledged record was read from
    third = next(b for b in (1, 2, 3) if b not in (leader, rejoined["leader"]))
    assert c.stop(third) == 0
    assert c.state(topic, 0)["leader"] == leader
    assert read_all(c.node(leader).bootstrap, topic, end)[:end] == read


def batch(value: bytes) -> bytes:
    b = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=0, producer_id=-1,
                                  producer_epoch=-1, base_sequence=-1, batch_size=2**31 - 1)
    b.append(0, 1_700_000_000_000, b"k", value, [])
    return bytes(b.build())


def produce(bootstrap: str, topic: str, acks: int) -> int:
    T = ProduceRequest.TopicProduceData
    r = call(bootstrap, ProduceRequest(version=9, transactional_id=None, acks=acks, timeout_ms=5000, topic_data=[
        T(name=topic, partition_data=[T.PartitionProduceData(index=0, records=batch(b"x"))])]), 9)
    return r.responses[0].partition_responses[0].error_code


def test_two_nodes_down_refuse_acks_all_with_not_enough_replicas_and_serve_acks_1(kcoord_cluster_factory):
    c = kcoord_cluster_factory(3, overrides=OVERRIDES)
    topic = unique("minisr")
    create(c.bootstrap, topic)
    st = wait_for(lambda: full_isr(c, topic), 60, "the partition online with its ISR")
    leader = st["leader"]
    assert produce(c.node(leader).bootstrap, topic, -1) == 0
    for b in (1, 2, 3):
        if b != leader:
            c.kill(b)
    wait_for(lambda: (s := c.state(topic, 0)) and s["isr"] == [leader], FAILOVER_S, "the ISR shrunk to the leader")
    wait_for(lambda: produce(c.node(leader).bootstrap, topic, -1) == 19, 30, "acks=all refused NOT_ENOUGH_REPLICAS")
    assert produce(c.node(leader).bootstrap, topic, 1) == 0


def test_controlled_shutdown_moves_leadership_with_retriable_errors_only(kcoord_cluster_factory):
    c = kcoord_cluster_factory(3, overrides=OVERRIDES)
    topic = unique("cs")
    create(c.bootstrap, topic)
    st = wait_for(lambda: full_isr(c, topic), 60, "the partition online with its ISR")
    load = Load(c.bootstrap, topic)
    try:
        load.acked_after(200, 60, "acknowledged writes before the shutdown")
        leader = st["leader"]
        assert c.stop(leader) == 0
        s = c.state(topic, 0)
        assert s["leader"] not in (-1, leader), s  # moved before the process exited
        before = len(load.acked)
        load.acked_after(before + 200, 60, "acknowledged writes on the new leader")
    finally:
        load.stop()
    fatal = [e for e in load.errors if not e.retriable()]
    assert not fatal and not load.errors, load.errors
    acked = sorted(load.acked)
    check_acked_read_once(acked, read_all(c.bootstrap, topic, acked[-1][0] + 1))


def metadata_epoch(bootstrap: str, topic: str) -> tuple[int, int]:
    """(leader, leader_epoch) of partition 0 in one node's Metadata v12 answer."""
    r = call(bootstrap, MetadataRequest(version=12, topics=[MetadataRequest.MetadataRequestTopic(topic_id=None,
                                                                                                 name=topic)],
                                        allow_auto_topic_creation=False, include_topic_authorized_operations=False),
             12)
    p = r.topics[0].partitions[0]
    return p.leader_id, p.leader_epoch


def fetch_error(bootstrap: str, topic: str, epoch: int) -> int:
    T = FetchRequest.FetchTopic
    req = FetchRequest(version=12, replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=2**20, isolation_level=0,
                       session_id=0, session_epoch=-1, topics=[T(topic=topic, partitions=[T.FetchPartition(
                           partition=0, current_leader_epoch=epoch, fetch_offset=0, last_fetched_epoch=-1,
                           log_start_offset=-1, partition_max_bytes=2**20)])], forgotten_topics_data=[], rack_id="")
    return call(bootstrap, req, 12).responses[0].partitions[0].error_code


def test_leader_epochs_clients_are_told_are_the_ones_the_leader_checks(kcoord_cluster_factory):
    c = kcoord_cluster_factory(3, overrides=OVERRIDES)
    topic = unique("epoch")
    create(c.bootstrap, topic)
    st = wait_for(lambda: full_isr(c, topic), 60, "the partition online with its ISR")
    old = st["leader"]
    c.kill(old)
    st = wait_for(lambda: (s := c.state(topic, 0)) and s["leader"] not in (-1, old) and s, FAILOVER_S,
                  "a new leader")
    epoch = st["leader_epoch"]
    assert epoch > 0
    for b in (1, 2, 3):
        if b != old:
            wait_for(lambda b=b: metadata_epoch(c.node(b).bootstrap, topic) == (st["leader"], epoch), 30,
                     f"node {b}'s Metadata to report leader {st['leader']} at epoch {epoch}")
    leader = c.node(st["leader"]).bootstrap
    assert fetch_error(leader, topic, epoch) == 0
    assert fetch_error(leader, topic, -1) == 0
    assert fetch_error(leader, topic, epoch - 1) == 74  # FENCED_LEADER_EPOCH
    assert fetch_error(leader, topic, epoch + 1) == 75  # UNKNOWN_LEADER_EPOCH
