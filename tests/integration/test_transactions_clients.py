"""Transactions with real clients: confluent-kafka (librdkafka) commit and abort paths, a
read_committed consumer that never sees an aborted record, KIP-447 offsets
(send_offsets_to_transaction, a read_committed consumer's committed() waiting for the
transaction), a zombie producer fenced by a second instance with the same transactional.id,
a transaction aborted by the coordinator's timeout; kafkajs transactions with sendOffsets; the
transactional producers of kafka-python and aiokafka."""
from __future__ import annotations

import threading
import time

import pytest
from clientlib import run_node
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from conftest import committed, unique
from kafka.structs import OffsetAndMetadata as OffsetAndMetadata_
from kafka.structs import TopicPartition as TopicPartition_


def topics(bootstrap: str, *names: str, partitions: int = 2) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.create_topics([NewTopic(n, partitions, 1) for n in names]).values():
        f.result(30)


def txn_producer(bootstrap: str, tid: str, **extra) -> Producer:
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": tid, "linger.ms": 5, **extra})
    p.init_transactions(30)
    return p


def read(bootstrap: str, topic: str, isolation: str, expect: int, partitions: int = 2) -> list[str]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": unique("r"), "isolation.level": isolation,
                  "enable.auto.commit": False})
    c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    out: list[str] = []
    last = time.monotonic()
    deadline = last + 60
    try:
        while time.monotonic() < deadline:
            m = c.poll(0.3)
            if m is not None and not m.error():
                out.append(m.value().decode())
                last = time.monotonic()
            elif len(out) >= expect and time.monotonic() - last > 1.5:
                break
    finally:
        c.close()
    return out


@pytest.mark.compat("confluent-kafka", "transactions")
def test_commit_and_abort_read_committed(kcoord):
    b = kcoord.bootstrap
    out = unique("txn-out")
    topics(b, out)
    p = txn_producer(b, unique("tx"))
    want = []
    for n in range(6):
        p.begin_transaction()
        for i in range(20):
            p.produce(out, key=f"{n}-{i}", value=f"t{n}-{i}")
        if n % 2:
            p.flush(30)  # on the broker before the abort (librdkafka drops what it has not sent)
            p.abort_transaction(30)
        else:
            p.commit_transaction(30)
            want += [f"t{n}-{i}" for i in range(20)]
    committed_values = read(b, out, "read_committed", len(want))
    assert sorted(committed_values) == sorted(want)
    everything = read(b, out, "read_uncommitted", 120)
    assert len(everything) == 120 and set(want) < set(everything)


@pytest.mark.compat("confluent-kafka", "transactions")
def test_send_offsets_to_transaction(kcoord):
    b = kcoord.bootstrap
    src, out, group = unique("txn-in"), unique("txn-out"), unique("txn-g")
    topics(b, src, out)
    meta = Consumer({"bootstrap.servers": b, "group.id": group}).consumer_group_metadata()
    p = txn_producer(b, unique("tx"))
    p.begin_transaction()
    p.produce(out, value="x")
    p.send_offsets_to_transaction([TopicPartition(src, 0, 10), TopicPartition(src, 1, 20)], meta, 30)
    p.commit_transaction(30)
    assert committed(b, group, src) == {0: 10, 1: 20}
    p.begin_transaction()
    p.produce(out, value="y")
    p.send_offsets_to_transaction([TopicPartition(src, 0, 99)], meta, 30)
    p.abort_transaction(30)
    assert committed(b, group, src) == {0: 10, 1: 20}

    # KIP-447: a read_committed consumer's committed() waits while the offsets are pending
    p.begin_transaction()
    p.produce(out, value="z")
    p.send_offsets_to_transaction([TopicPartition(src, 0, 30)], meta, 30)
    c = Consumer({"bootstrap.servers": b, "group.id": group, "isolation.level": "read_committed"})
    got: list = []
    t = threading.Thread(target=lambda: got.append(c.committed([TopicPartition(src, 0)], timeout=30)))
    t.start()
    time.sleep(1.0)  # committed() is retrying UNSTABLE_OFFSET_COMMIT meanwhile
    assert not got, "committed() answered while the offsets were still pending"
    p.commit_transaction(30)
    t.join(40)
    c.close()
    assert got and got[0][0].offset == 30


@pytest.mark.compat("confluent-kafka", "transactions")
def test_zombie_producer_is_fenced(kcoord):
    b = kcoord.bootstrap
    out, tid = unique("txn-out"), unique("tx")
    topics(b, out)
    zombie = txn_producer(b, tid)
    zombie.begin_transaction()
    zombie.produce(out, value="zombie")
    zombie.flush(10)
    fresh = txn_producer(b, tid)  # fences the zombie and aborts its open transaction
    fresh.begin_transaction()
    fresh.produce(out, value="fresh")
    fresh.commit_transaction(30)
    with pytest.raises(KafkaException) as e:
        zombie.produce(out, value="late")
        zombie.commit_transaction(15)
    err = e.value.args[0]
    assert err.fatal() or err.code() in (KafkaError._FENCED, KafkaError.PRODUCER_FENCED,
                                          KafkaError.INVALID_PRODUCER_EPOCH), err
    assert read(b, out, "read_committed", 1) == ["fresh"]


@pytest.mark.compat("confluent-kafka", "transactions")
def test_transaction_past_its_timeout_is_aborted(kcoord_factory):
    srv = kcoord_factory({"transaction.abort.timed.out.transaction.cleanup.interval.ms": "200"})
    b = srv.bootstrap
    out = unique("txn-out")
    topics(b, out)
    p = txn_producer(b, unique("tx"), **{"transaction.timeout.ms": 2000})
    p.begin_transaction()
    p.produce(out, value="never")
    p.flush(10)
    time.sleep(3.5)  # past the timeout: the coordinator aborts and bumps the epoch
    with pytest.raises(KafkaException):
        p.commit_transaction(15)
    # the open transaction no longer holds read_committed readers back
    assert read(b, out, "read_committed", 0) == []
    assert "never" in read(b, out, "read_uncommitted", 1)


@pytest.mark.compat("kafkajs", "transactions")
def test_kafkajs_transactions_with_send_offsets(kcoord):
    b = kcoord.bootstrap
    src, out, group = unique("js-in"), unique("js-out"), unique("js-g")
    topics(b, src, out, partitions=1)
    res = run_node("txn.js", b, out, src, group, unique("js-tx"), timeout=90)
    assert [r["kind"] for r in res.records()] == ["committed", "aborted", "offsets", "read"], res.describe()
    assert res.one("offsets")["offsets"] == {f"{src}-0": 10}
    assert sorted(res.one("read")["values"]) == sorted(f"c-{i}" for i in range(10))
    assert committed(b, group, src) == {0: 10}


@pytest.mark.compat("confluent-kafka", "transactions")
def test_transaction_metrics(kcoord_factory):
    from conftest import free_port
    from test_metrics import scrape, value

    port = free_port()
    srv = kcoord_factory({"kcoord.metrics.listener": f"http://127.0.0.1:{port}"})
    out = unique("txn-out")
    topics(srv.bootstrap, out)
    p = txn_producer(srv.bootstrap, unique("tx"))
    for commit in (True, False):
        p.begin_transaction()
        p.produce(out, value="x")
        p.flush(10)
        (p.commit_transaction if commit else p.abort_transaction)(30)
    # EndTxn is answered once PrepareAbort is durable, as Kafka answers it; the markers follow
    deadline = time.monotonic() + 30
    while True:
        m = scrape(port)
        if value(m["kcoord_transactions"], "kcoord_transactions", state="CompleteAbort") == 1 \
                or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert value(m["kcoord_transactions"], "kcoord_transactions", state="CompleteAbort") == 1
    assert value(m["kcoord_transactions"], "kcoord_transactions", state="Ongoing") == 0
    assert value(m["kcoord_transactions_completed"], "kcoord_transactions_completed_total", result="commit") == 1
    assert value(m["kcoord_transactions_completed"], "kcoord_transactions_completed_total", result="abort") == 1
    assert value(m["kcoord_transactions_timed_out"], "kcoord_transactions_timed_out_total") == 0


@pytest.mark.compat("kafka-python", "transactions")
def test_kafka_python_transactions(kcoord):
    from kafka import KafkaProducer

    b = kcoord.bootstrap
    src, out, group = unique("kp-in"), unique("kp-out"), unique("kp-g")
    topics(b, src, out)
    p = KafkaProducer(bootstrap_servers=b, transactional_id=unique("kp-tx"), request_timeout_ms=15000)
    p.init_transactions()
    p.begin_transaction()
    p.send(out, b"committed")
    p.send_offsets_to_transaction({TopicPartition_(src, 0): OffsetAndMetadata_(7)}, group)
    p.commit_transaction()
    p.begin_transaction()
    p.send(out, b"aborted")
    p.flush()
    p.send_offsets_to_transaction({TopicPartition_(src, 0): OffsetAndMetadata_(9)}, group)
    p.abort_transaction()
    p.close()
    assert committed(b, group, src) == {0: 7}
    assert read(b, out, "read_committed", 1) == ["committed"]


@pytest.mark.compat("aiokafka", "transactions")
def test_aiokafka_transactions(kcoord):
    import asyncio

    from aiokafka import AIOKafkaProducer
    from aiokafka.structs import TopicPartition as ATP

    b = kcoord.bootstrap
    src, out, group = unique("aio-in"), unique("aio-out"), unique("aio-g")
    topics(b, src, out)

    async def run() -> None:
        p = AIOKafkaProducer(bootstrap_servers=b, transactional_id=unique("aio-tx"), request_timeout_ms=15000)
        await p.start()
        try:
            async with p.transaction():
                await p.send_and_wait(out, b"committed")
                await p.send_offsets_to_transaction({ATP(src, 0): 11}, group)
            await p.begin_transaction()
            await p.send_and_wait(out, b"aborted")
            await p.send_offsets_to_transaction({ATP(src, 0): 13}, group)
            await p.abort_transaction()
        finally:
            await p.stop()

    asyncio.run(asyncio.wait_for(run(), 60))
    assert committed(b, group, src) == {0: 11}
    assert read(b, out, "read_committed", 1) == ["committed"]
