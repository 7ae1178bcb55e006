"""Produce / Fetch / ListOffsets / InitProducerId through real clients against a kcoord process.

confluent-kafka (librdkafka 2.16: Produce v10, Fetch v16, ListOffsets v7, idempotence),
kafka-python 3 (Produce v9, Fetch v12, ListOffsets), aiokafka 0.14 (Produce v7, Fetch v11), and
a raw socket for what clients do not show (a re-sent duplicate batch, sequence errors). Topics
are auto-created by the producers' Metadata requests unless a test creates them with configs.
Every client run is bounded by timeouts.
"""
from __future__ import annotations

import asyncio
import socket
import struct
import time
from collections.abc import Iterator

import pytest
from confluent_kafka import TIMESTAMP_LOG_APPEND_TIME, Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from conftest import KcoordProcess, unique
from kafka.protocol.producer import (
    InitProducerIdRequest,
    InitProducerIdResponse,
    ProduceRequest,
    ProduceResponse,
)

from kcoord.storage.batch import split_batches

pytestmark = pytest.mark.integration

N = 500


@pytest.fixture(scope="module")
def shared(tmp_path_factory) -> Iterator[KcoordProcess]:
    srv = KcoordProcess(tmp_path_factory.mktemp("dataplane") / "data").start()
    yield srv
    srv.stop()


def ck_produce(bootstrap: str, topic: str, n: int = N, **conf) -> list[tuple[int, int]]:
    """Produce n keyed messages; returns (partition, offset) of each in send order."""
    p = Producer({"bootstrap.servers": bootstrap, "message.timeout.ms": 20000, "linger.ms": 5, **conf})
    delivered: dict[int, tuple[int, int]] = {}
    errors: list = []

    def cb(err, msg, i):
        if err is not None:
            errors.append(err)
        else:
            delivered[i] = (msg.partition(), msg.offset())

    for i in range(n):
        p.produce(topic, key=b"key-%d" % i, value=b"value-%d-" % i + b"x" * (i % 200),
                  on_delivery=lambda err, msg, i=i: cb(err, msg, i))
        p.poll(0)
    assert p.flush(30) == 0
    assert not errors, errors[:3]
    return [delivered[i] for i in range(n)]


def ck_consume(bootstrap: str, topic: str, n: int, partition: int = 0, timeout: float = 20.0, **conf) -> list:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused", "enable.auto.commit": False,
                  "auto.offset.reset": "earliest", **conf})
    try:
        c.assign([TopicPartition(topic, partition, 0)])
        got = []
        deadline = time.monotonic() + timeout
        while len(got) < n and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is None:
                continue
            assert m.error() is None, m.error()
            got.append(m)
        return got
    finally:
        c.close()


@pytest.mark.parametrize(("acks", "compression"), [
    ("1", "none"), ("all", "none"), ("1", "lz4"), ("all", "zstd"), ("1", "gzip"), ("all", "snappy"),
])
@pytest.mark.compat("confluent-kafka", "consume")
def test_confluent_produce_then_consume_in_order(shared, acks, compression):
    topic = unique(f"ck-{compression}")
    where = ck_produce(shared.bootstrap, topic, acks=acks, **{"compression.type": compression})
    assert where == [(0, i) for i in range(N)]  # auto-created topic, 1 partition, offsets in order
    got = ck_consume(shared.bootstrap, topic, N)
    assert [m.offset() for m in got] == list(range(N))
    assert [m.key() for m in got] == [b"key-%d" % i for i in range(N)]
    assert got[7].value() == b"value-7-" + b"x" * 7


def test_confluent_idempotent_producer(shared):
    topic = unique("idem")
    where = ck_produce(shared.bootstrap, topic, acks="all", **{"enable.idempotence": True,
                                                                "max.in.flight.requests.per.connection": 5})
    assert [o for _, o in where] == list(range(N))
    assert len(ck_consume(shared.bootstrap, topic, N)) == N


def test_confluent_list_offsets(shared):
    topic = unique("lo")
    t0 = int(time.time() * 1000) - 10_000
    p = Producer({"bootstrap.servers": shared.bootstrap, "linger.ms": 0})
    for i in range(10):
        p.produce(topic, value=b"v%d" % i, timestamp=t0 + 1000 * i)
        p.flush(10)
    c = Consumer({"bootstrap.servers": shared.bootstrap, "group.id": "unused"})
    try:
        assert c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10) == (0, 10)
        found = c.offsets_for_times([TopicPartition(topic, 0, t0 + 4500)], timeout=10)
        assert found[0].offset == 5
        found = c.offsets_for_times([TopicPartition(topic, 0, t0 + 999_999)], timeout=10)
        assert found[0].offset == -1  # librdkafka: OFFSET_END for "no such timestamp"
    finally:
        c.close()


def test_log_append_time_topic(shared):
    topic = unique("lat")
    admin = AdminClient({"bootstrap.servers": shared.bootstrap})
    fut = admin.create_topics([NewTopic(topic, 1, 1, config={"message.timestamp.type": "LogAppendTime"})])
    fut[topic].result(10)
    before = int(time.time() * 1000)
    ck_produce(shared.bootstrap, topic, n=20, **{"acks": "1"})
    after = int(time.time() * 1000)
    got = ck_consume(shared.bootstrap, topic, 20)
    assert len(got) == 20
    for m in got:
        ts_type, ts = m.timestamp()
        assert ts_type == TIMESTAMP_LOG_APPEND_TIME and before - 5 <= ts <= after + 5


def test_long_poll_answers_as_soon_as_data_arrives(shared):
    topic = unique("poll")
    ck_produce(shared.bootstrap, topic, n=1)
    # A long max wait, so that "woken by the produce" and "answered at max wait" are far apart
    # whatever the machine's load.
    c = Consumer({"bootstrap.servers": shared.bootstrap, "group.id": "unused", "fetch.wait.max.ms": 20000,
                  "enable.auto.commit": False})
    try:
        c.assign([TopicPartition(topic, 0, 1)])
        c.poll(1.0)  # let the first (parked) fetch reach the broker
        p = Producer({"bootstrap.servers": shared.bootstrap, "linger.ms": 0})
        sent = time.monotonic()
        p.produce(topic, value=b"late")
        p.flush(10)
        m = None
        while m is None and time.monotonic() - sent < 40:
            m = c.poll(0.1)
        assert m is not None and m.value() == b"late"
        # the fetch parked at most ~1 s before `sent` would answer at max wait 19+ s after it
        assert time.monotonic() - sent < 15, "the parked fetch should be woken by the produce, not max_wait"
    finally:
        c.close()


@pytest.mark.compat("kafka-python", "consume")
def test_kafka_python_producer_consumer_and_offsets(shared):
    from kafka import KafkaConsumer, KafkaProducer
    from kafka.structs import TopicPartition as KTP

    topic = unique("kp")
    prod = KafkaProducer(bootstrap_servers=shared.bootstrap, acks="all", linger_ms=5, request_timeout_ms=10000,
                         max_block_ms=10000)
    t0 = int(time.time() * 1000) - 100_000
    futs = [prod.send(topic, key=b"k%d" % i, value=b"v%d" % i, timestamp_ms=t0 + i) for i in range(200)]
    prod.flush(20)
    metas = [f.get(10) for f in futs]
    assert [m.offset for m in metas] == list(range(200))
    prod.close(5)
    cons = KafkaConsumer(bootstrap_servers=shared.bootstrap, enable_auto_commit=False, request_timeout_ms=10000,
                         consumer_timeout_ms=10000, fetch_max_wait_ms=200)
    try:
        tp = KTP(topic, 0)
        cons.assign([tp])
        cons.seek_to_beginning(tp)
        got = []
        for msg in cons:
            got.append(msg)
            if len(got) == 200:
                break
        assert [(m.offset, m.value) for m in got] == [(i, b"v%d" % i) for i in range(200)]
        assert cons.beginning_offsets([tp]) == {tp: 0}
        assert cons.end_offsets([tp]) == {tp: 200}
        found = cons.offsets_for_times({tp: t0 + 150})
        assert found[tp].offset == 150 and found[tp].timestamp == t0 + 150
    finally:
        cons.close()


@pytest.mark.compat("aiokafka", "consume")
def test_aiokafka_producer_consumer(shared):
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from aiokafka.structs import TopicPartition as ATP

    topic = unique("aio")

    async def run():
        prod = AIOKafkaProducer(bootstrap_servers=shared.bootstrap, acks="all", enable_idempotence=True,
                                request_timeout_ms=10000)
        await prod.start()
        try:
            offsets = []
            for i in range(100):
                md = await prod.send_and_wait(topic, key=b"k%d" % i, value=b"v%d" % i)
                offsets.append(md.offset)
            futs = [await prod.send(topic, value=b"b%d" % i) for i in range(100)]  # batched, pipelined
            more = [(await f).offset for f in futs]
        finally:
            await prod.stop()
        assert offsets == list(range(100)) and more == list(range(100, 200))
        cons = AIOKafkaConsumer(bootstrap_servers=shared.bootstrap, enable_auto_commit=False,
                                request_timeout_ms=10000, fetch_max_wait_ms=200)
        await cons.start()
        try:
            tp = ATP(topic, 0)
            cons.assign([tp])
            await cons.seek_to_beginning(tp)
            got = []
            while len(got) < 200:
                recs = await cons.getmany(tp, timeout_ms=1000)
                got.extend(recs.get(tp, []))
            assert [m.offset for m in got] == list(range(200))
            assert got[5].value == b"v5" and got[150].value == b"b50"
            assert (await cons.end_offsets([tp]))[tp] == 200
        finally:
            await cons.stop()

    asyncio.run(asyncio.wait_for(run(), 60))


@pytest.mark.compat("confluent-kafka", "group join", "consume")
def test_confluent_group_consumption(shared):
    topic = unique("grp")
    admin = AdminClient({"bootstrap.servers": shared.bootstrap})
    admin.create_topics([NewTopic(topic, 3, 1)])[topic].result(10)
    where = ck_produce(shared.bootstrap, topic, n=300)
    assert {p for p, _ in where} <= {0, 1, 2}
    c = Consumer({"bootstrap.servers": shared.bootstrap, "group.id": unique("g"), "auto.offset.reset": "earliest",
                  "session.timeout.ms": 6000})
    try:
        c.subscribe([topic])
        got = []
        deadline = time.monotonic() + 30
        while len(got) < 300 and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is not None and m.error() is None:
                got.append((m.partition(), m.offset()))
        assert sorted(got) == sorted(where)
    finally:
        c.close()


# ------------------------------------------------------------------ raw socket


class Raw:
    """A minimal blocking Kafka client: one request at a time."""

    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        self.corr = 0

    def call(self, api_key: int, version: int, req, resp_cls, flexible: bool):
        self.corr += 1
        body = req.encode(version=version)
        client = b"raw-test"
        header = struct.pack(">hhih", api_key, version, self.corr, len(client)) + client
        if flexible:
            header += b"\x00"
        payload = header + body
        self.sock.sendall(struct.pack(">i", len(payload)) + payload)
        size = struct.unpack(">i", self._recv(4))[0]
        data = self._recv(size)
        assert struct.unpack(">i", data[:4])[0] == self.corr
        return resp_cls.decode(memoryview(data[5 if flexible else 4:]), version=version)

    def _recv(self, n: int) -> bytes:
        buf = b""
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise ConnectionError("closed")
            buf += chunk
        return buf

    def close(self) -> None:
        self.sock.close()

    def init_producer_id(self) -> tuple[int, int]:
        r = self.call(22, 4, InitProducerIdRequest(version=4, transactional_id=None, transaction_timeout_ms=60000,
                                                   producer_id=-1, producer_epoch=-1), InitProducerIdResponse, True)
        assert r.error_code == 0
        return r.producer_id, r.producer_epoch

    def produce(self, topic: str, records: bytes, acks: int = -1) -> tuple[int, int]:
        T = ProduceRequest.TopicProduceData
        req = ProduceRequest(version=9, transactional_id=None, acks=acks, timeout_ms=10000, topic_data=[
            T(name=topic, partition_data=[T.PartitionProduceData(index=0, records=records)])])
        r = self.call(0, 9, req, ProduceResponse, True)
        p = r.responses[0].partition_responses[0]
        return p.error_code, p.base_offset


def idem_batch(pid: int, epoch: int, seq: int, values: list[bytes]) -> bytes:
    from aiokafka.record.default_records import DefaultRecordBatchBuilder

    b = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=0, producer_id=pid,
                                  producer_epoch=epoch, base_sequence=seq, batch_size=2**31 - 1)
    now = int(time.time() * 1000)
    for i, v in enumerate(values):
        b.append(i, now, None, v, [])
    data = bytes(b.build())
    split_batches(data)  # well formed
    return data


def test_raw_duplicate_batch_gets_original_offset_even_after_restart(kcoord):
    topic = unique("dup")
    ck_produce(kcoord.bootstrap, topic, n=3)  # creates the topic, offsets 0..2
    raw = Raw(kcoord.port)
    pid, epoch = raw.init_producer_id()
    b0 = idem_batch(pid, epoch, 0, [b"a", b"b"])
    b1 = idem_batch(pid, epoch, 2, [b"c"])
    assert raw.produce(topic, b0) == (0, 3)
    assert raw.produce(topic, b1) == (0, 5)
    assert raw.produce(topic, b0) == (0, 3)  # duplicate: original offset, not appended
    assert raw.produce(topic, idem_batch(pid, epoch, 9, [b"gap"]))[0] == 45  # OUT_OF_ORDER_SEQUENCE_NUMBER
    raw.close()
    kcoord.restart()
    raw = Raw(kcoord.port)
    assert raw.produce(topic, b1) == (0, 5)  # rebuilt from the log
    assert raw.produce(topic, idem_batch(pid, epoch, 3, [b"d"])) == (0, 6)
    pid2, _ = raw.init_producer_id()
    assert pid2 != pid  # ids are not reused across restarts
    raw.close()
    got = ck_consume(kcoord.bootstrap, topic, 7)
    assert [m.value() for m in got][3:] == [b"a", b"b", b"c", b"d"]


@pytest.mark.compat("java", "consume")
@pytest.mark.java
def test_java_idempotent_producer_and_consumer(shared):
    """Java kafka-clients 3.9: InitProducerId v5 + Produce v11 (idempotent by default), Fetch v17
    with topic ids and a session request (epoch 0, answered with session id 0), ListOffsets v9."""
    from clientlib import kcoord_java

    topic, group = unique("java"), unique("jg")
    res = kcoord_java("produce", shared.bootstrap, topic, 300, timeout=90)
    produced = res.one("produced")
    assert (produced["acked"], produced["failed"], produced["last_offsets"]) == (300, 0, {"0": 299}), res.describe()
    res = kcoord_java("consume", shared.bootstrap, topic, group, 300, 3000, timeout=90)
    recs = res.kinds("record")
    assert [r["offset"] for r in recs] == list(range(300)), res.describe()
    assert recs[42]["value"] == "v42"
