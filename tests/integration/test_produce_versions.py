"""Produce versions as Kafka 4.x has them (KIP-896, KAFKA-18659).

Kafka 4.0 serves Produce v3 and later but advertises v0 as its lowest version: librdkafka
before 2.11.1 (kcat here links 2.0) checks its compression features against Produce v0 and,
without it, sends every batch uncompressed. A request of v0-v2 is refused as Kafka 4 refuses a
version it does not serve: the connection is closed without an answer.

Checked with every client here: each produces with the codecs it has, and the batches written
to the partition's segment on disk carry that codec (not only "the produce succeeded", which an
uncompressed fallback would pass too).
"""
from __future__ import annotations

import asyncio
import socket
import struct
from collections.abc import Iterator

import pytest
from clientlib import kafkajs, kcat, kcoord_java
from conftest import KcoordProcess, call, unique
from kafka.protocol.admin import CreateTopicsRequest
from kafka.protocol.metadata import ApiVersionsRequest
from kafka.protocol.producer import ProduceRequest
from kafka.record.legacy_records import LegacyRecordBatchBuilder

from kcoord.protocol.api import API_TABLE, ApiKey
from kcoord.storage.batch import split_batches

pytestmark = pytest.mark.integration

N = 50
# librdkafka sends a batch uncompressed when compressing made it larger (rdkafka_msgset_writer.c):
# values that compress well whatever the batching, so every batch must carry the codec.
PAD = "x" * 200
CODECS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}


@pytest.fixture(scope="module")
def srv(tmp_path_factory) -> Iterator[KcoordProcess]:
    s = KcoordProcess(tmp_path_factory.mktemp("produce-versions") / "data").start()
    yield s
    s.stop()


@pytest.mark.parametrize("version", range(5))
def test_api_versions_advertise_produce_from_v0_like_kafka_4(srv, version):
    r = call(srv.bootstrap, ApiVersionsRequest(client_software_name="t", client_software_version="1"), version)
    ranges = {k.api_key: (k.min_version, k.max_version) for k in r.api_keys}
    assert ranges[ApiKey.PRODUCE] == (0, API_TABLE[ApiKey.PRODUCE].max_version)
    # every other API exactly as served
    assert {k: v for k, v in ranges.items() if k != ApiKey.PRODUCE} == {
        int(s.key): (s.min_version, s.max_version) for s in API_TABLE.values() if s.key != ApiKey.PRODUCE}


def _create(srv: KcoordProcess, topic: str, partitions: int = 1) -> None:
    CT = CreateTopicsRequest.CreatableTopic
    r = call(srv.bootstrap, CreateTopicsRequest(
        topics=[CT(name=topic, num_partitions=partitions, replication_factor=1, assignments=[], configs=[])],
        timeout_ms=15000, validate_only=False), 5)
    assert r.topics[0].error_code == 0, r


def _legacy_produce_frame(version: int, topic: str) -> bytes:
    """Produce v0/v1/v2 (magic 0/1 message set), framed as an old client sends it."""
    magic = 0 if version == 0 else 1
    builder = LegacyRecordBatchBuilder(magic, 0, 1 << 20)
    builder.append(0, timestamp=None if magic == 0 else 1_700_000_000_000, key=b"k", value=b"old")
    T = ProduceRequest.TopicProduceData
    req = ProduceRequest(transactional_id=None, acks=1, timeout_ms=10000, topic_data=[
        T(name=topic, partition_data=[T.PartitionProduceData(index=0, records=bytes(builder.build()))])])
    body = req.encode(version=version)
    header = struct.pack(">hhih", ApiKey.PRODUCE, version, 41, 3) + b"old"
    return struct.pack(">i", len(header) + len(body)) + header + body


def _partition_batches(srv: KcoordProcess, topic: str, partition: int) -> list:
    out = []
    for seg in sorted((srv.log_dir / f"{topic}-{partition}").glob("*.log")):
        if data := seg.read_bytes():
            out += split_batches(data)
    return out


@pytest.mark.parametrize("version", [0, 1, 2])
def test_produce_v0_to_v2_is_refused_like_kafka_4(srv, version):
    topic = unique(f"old-v{version}")
    _create(srv, topic)
    before = len(srv.log_text())
    with socket.create_connection(("127.0.0.1", srv.port), timeout=30) as s:
        s.sendall(_legacy_produce_frame(version, topic))
        assert s.recv(4096) == b"", "Kafka 4 answers nothing to a Produce it does not serve: it closes"
    log = srv.log_text()[before:]
    assert f"unsupported version {version} of PRODUCE" in log, log[-2000:]
    assert _partition_batches(srv, topic, 0) == []  # nothing was appended
    # v3, the lowest served version, works on the same server
    r = call(srv.bootstrap, ApiVersionsRequest(client_software_name="t", client_software_version="1"), 3)
    assert r.error_code == 0


# ---- every client produces, compressed as asked ----


def _kcat(srv: KcoordProcess, topic: str, codec: str) -> None:
    data = "".join(f"k{i}:v{i}{PAD}\n" for i in range(N)).encode()
    kcat("-b", srv.bootstrap, "-P", "-t", topic, "-K", ":", "-z", codec, "-X", "linger.ms=50",
         "-X", "socket.timeout.ms=20000", input=data, timeout=90)


def _confluent(srv: KcoordProcess, topic: str, codec: str) -> None:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": srv.bootstrap, "compression.type": codec, "linger.ms": 50,
                  "message.timeout.ms": 60000})
    errors: list = []
    for i in range(N):
        p.produce(topic, key=b"k%d" % i, value=b"v%d" % i + PAD.encode(),
                  on_delivery=lambda e, _m: e and errors.append(e))
    assert p.flush(90) == 0 and not errors, errors


def _kafka_python(srv: KcoordProcess, topic: str, codec: str) -> None:
    from kafka import KafkaProducer

    p = KafkaProducer(bootstrap_servers=srv.bootstrap, compression_type=codec, linger_ms=50, acks="all",
                      request_timeout_ms=30000)
    try:
        for i in range(N):
            p.send(topic, key=b"k%d" % i, value=b"v%d" % i)
        p.flush(90)
    finally:
        p.close()


def _aiokafka(srv: KcoordProcess, topic: str, codec: str) -> None:
    from aiokafka import AIOKafkaProducer

    async def go() -> None:
        p = AIOKafkaProducer(bootstrap_servers=srv.bootstrap, compression_type=codec, linger_ms=50,
                             request_timeout_ms=30000)
        await p.start()
        try:
            batch = [await p.send(topic, key=b"k%d" % i, value=b"v%d" % i) for i in range(N)]
            await asyncio.gather(*batch)
        finally:
            await p.stop()

    asyncio.run(asyncio.wait_for(go(), 120))


def _kafkajs(srv: KcoordProcess, topic: str, codec: str) -> None:
    res = kafkajs("produce", srv.bootstrap, topic, N, codec, timeout=120)
    assert res.one("produced")["acked"] == N, res.describe()


def _java(srv: KcoordProcess, topic: str, codec: str) -> None:
    res = kcoord_java("produce", srv.bootstrap, topic, N, "k", codec, timeout=120)
    assert res.one("produced")["acked"] == N, res.describe()


PRODUCERS = {"kcat": _kcat, "confluent-kafka": _confluent, "kafka-python": _kafka_python,
             "aiokafka": _aiokafka, "kafkajs": _kafkajs, "java": _java}
CASES = [("kcat", c) for c in ("gzip", "snappy", "lz4", "zstd")] + \
    [("confluent-kafka", c) for c in ("gzip", "snappy", "lz4", "zstd")] + \
    [("aiokafka", c) for c in ("gzip", "snappy", "lz4", "zstd")] + \
    [("kafka-python", "gzip"), ("kafkajs", "gzip"), ("java", "lz4"), ("java", "zstd")]


@pytest.mark.parametrize(("client", "codec"), CASES, ids=[f"{c}-{z}" for c, z in CASES])
def test_every_client_produces_with_its_codec(srv, client, codec):
    topic = unique(f"z-{client}-{codec}")
    _create(srv, topic)
    PRODUCERS[client](srv, topic, codec)
    batches = _partition_batches(srv, topic, 0)
    assert sum(h.last_offset_delta + 1 for h in batches) == N
    codecs = {h.compression for h in batches}
    assert codecs == {CODECS[codec]}, f"{client} wrote batches with codec ids {codecs}, asked for {codec}"

