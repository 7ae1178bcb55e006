"""A cluster node serves Kafka requests only once it has joined the cluster (Kafka's
enableRequestProcessing at the end of the broker's startup).

Found by the Jepsen-style test: a leader was SIGKILLed and restarted; its listeners were bound
and served before the node had read the cluster's metadata or its partition states, so a
producer still holding the old metadata sent its buffered acks=all batches to the restarted
node, which appended and acknowledged them as a single-node server (its logs had no replica
yet). A moment later the node became a follower of the new leader and truncated them away
(they were never on the leader): acknowledged records lost. These tests hold a node in its
join (ZooKeeper unreachable) and probe it with an acks=all Produce, with the real sockets,
the real Server and a real ZooKeeper for the node that does join."""
from __future__ import annotations

import asyncio
import socket
import time
import uuid

import pytest
from aiokafka.record.default_records import DefaultRecordBatchBuilder
from conftest import call
from kafka.protocol.metadata import ApiVersionsRequest
from kafka.protocol.producer import ProduceRequest

from kcoord.server.app import Server
from kcoord.server.config import Config

TOPIC = "joining"


def _batch() -> bytes:
    b = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=0, producer_id=-1,
                                  producer_epoch=-1, base_sequence=-1, batch_size=2**31 - 1)
    b.append(0, int(time.time() * 1000), b"k", b"acked?", [])
    return bytes(b.build())


def _produce_all(bootstrap: str):
    T = ProduceRequest.TopicProduceData
    req = ProduceRequest(version=9, transactional_id=None, acks=-1, timeout_ms=5000, topic_data=[
        T(name=TOPIC, partition_data=[T.PartitionProduceData(index=0, records=_batch())])])
    return call(bootstrap, req, 9).responses[0].partition_responses[0]


def _closed_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


async def test_a_node_still_joining_the_cluster_acknowledges_no_produce(tmp_path):
    log_dir = str(tmp_path / "node3")
    # the node's log of the partition exists on disk, as a restarted leader's does
    first = Server(Config({"log.dirs": log_dir, "node.id": 3, "listeners": "PLAINTEXT://127.0.0.1:0"}))
    await first.start()
    first.broker.create_topic(TOPIC, 1, {"min.insync.replicas": "2"})
    await first.stop()
    srv = Server(Config({"log.dirs": log_dir, "node.id": 3, "listeners": "PLAINTEXT://127.0.0.1:0",
                         "zookeeper.connect": f"127.0.0.1:{_closed_port()}",
                         "zookeeper.connection.timeout.ms": 8000}))
    starting = asyncio.ensure_future(srv.start())  # joins for as long as ZooKeeper does not answer
    try:
        deadline = time.monotonic() + 30
        while not srv.bound:
            assert not starting.done(), starting.exception()
            assert time.monotonic() < deadline, "the listener was never bound"
            await asyncio.sleep(0.01)
        host, port = srv.bound[0][:2]
        bootstrap = f"{host}:{port}"
        try:
            answer = await asyncio.to_thread(_produce_all, bootstrap)
        except OSError:
            answer = None  # refused: a client retries elsewhere, as with a node that is down
        assert answer is None, f"a node that has not joined the cluster answered {answer}"
        assert srv.broker.logs.get(TOPIC, 0).log_end_offset == 0
        assert not starting.done(), "the probe ran after the node gave up joining"
        with pytest.raises(TimeoutError):  # it never joins: start-up fails, nothing was served
            await starting
    finally:
        starting.cancel()
        await srv.stop()


async def test_a_node_serves_once_it_has_joined(tmp_path, kcoord_zookeeper):
    srv = Server(Config({"log.dirs": str(tmp_path / "node1"), "node.id": 1, "listeners": "PLAINTEXT://127.0.0.1:0",
                         "zookeeper.connect": f"{kcoord_zookeeper}/join-{uuid.uuid4().hex[:8]}"}))
    await asyncio.wait_for(srv.start(), 120)
    try:
        host, port = srv.bound[0][:2]
        bootstrap = f"{host}:{port}"
        resp = await asyncio.to_thread(call, bootstrap, ApiVersionsRequest(version=3, client_software_name="t",
                                                                           client_software_version="1"), 3)
        assert resp.error_code == 0 and resp.api_keys
    finally:
        await srv.stop()


pytestmark = pytest.mark.asyncio
