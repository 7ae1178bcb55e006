"""A leader cut off from ZooKeeper answers the requests it had parked at once, not at their
timeouts: Kafka's leader completes its delayed produces with NOT_LEADER_OR_FOLLOWER once it no
longer leads, and kcoord's node stops leading when its ZooKeeper connection is suspended
(docs/cluster.md, Fencing; the replica manager's `fence`, server/replication/replica_manager.py).

Three kcoord processes in network namespaces (kcoord/testing/netns.py); a topic with
replication factor 3 and min.insync.replicas=2. The leader is cut off from ZooKeeper and the
other nodes while clients still reach it; right after the cut an acks=all produce (its
timeout 60 s) parks there, as its followers can no longer fetch, and a consumer fetch waits at
the log end (max_wait_ms 60 s). Both are answered NOT_LEADER_OR_FOLLOWER well before 30 s
(before the change: the produce at its 60 s timeout with REQUEST_TIMED_OUT)."""
from __future__ import annotations

import concurrent.futures
import socket
import struct
import time

import pytest
from aiokafka.record.default_records import DefaultRecordBatchBuilder
from conftest import unique
from kafka.protocol.consumer import FetchRequest
from kafka.protocol.producer import ProduceRequest
from test_cluster_replication import create, full_isr

from kcoord.protocol.api import API_TABLE
from kcoord.protocol.errors import ErrorCode as E
from kcoord.testing.cluster import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

SESSION_MS = 10000
OVERRIDES = {"replica.lag.time.max.ms": "4000", "replica.fetch.wait.max.ms": "100",
             "replica.fetch.backoff.ms": "200"}


def call(bootstrap: str, request, version: int, timeout: float = 90.0):
    """One request on a fresh connection, waiting up to `timeout` for its answer."""
    spec = API_TABLE[request.API_KEY]
    header = struct.pack(">hhih", request.API_KEY, version, 7, 4) + b"test"
    if spec.request_header_version(version) >= 2:
        header += b"\x00"
    payload = header + bytes(request.encode(version=version))
    host, port = bootstrap.split(":")
    with socket.create_connection((host, int(port)), timeout=timeout) as s:
        s.sendall(struct.pack(">i", len(payload)) + payload)
        data = b""
        while len(data) < 4 or len(data) < 4 + struct.unpack(">i", data[:4])[0]:
            chunk = s.recv(65536)
            assert chunk, "connection closed"
            data += chunk
    return spec.response.decode(data[4 + 4 + spec.response_header_version(version):], version=version)


def produce(bootstrap: str, topic: str) -> tuple[int, float]:
    b = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=0, producer_id=-1,
                                  producer_epoch=-1, base_sequence=-1, batch_size=2**31 - 1)
    b.append(0, int(time.time() * 1000), b"k", b"parked", [])
    T = ProduceRequest.TopicProduceData
    req = ProduceRequest(version=9, transactional_id=None, acks=-1, timeout_ms=60000, topic_data=[
        T(name=topic, partition_data=[T.PartitionProduceData(index=0, records=bytes(b.build()))])])
    p = call(bootstrap, req, 9).responses[0].partition_responses[0]
    return p.error_code, time.monotonic()


def fetch(bootstrap: str, topic: str, offset: int) -> tuple[int, float]:
    T = FetchRequest.FetchTopic
    req = FetchRequest(version=12, replica_id=-1, max_wait_ms=60000, min_bytes=1, max_bytes=2**20,
                       isolation_level=0, session_id=0, session_epoch=-1, topics=[T(topic=topic, partitions=[
                           T.FetchPartition(partition=0, current_leader_epoch=-1, fetch_offset=offset,
                                            last_fetched_epoch=-1, log_start_offset=-1, partition_max_bytes=2**20)])],
                       forgotten_topics_data=[], rack_id="")
    p = call(bootstrap, req, 12).responses[0].partitions[0]
    return p.error_code, time.monotonic()


def test_a_cut_off_leader_answers_its_parked_requests_when_it_fences_itself(kcoord_cluster_factory):
    c = kcoord_cluster_factory(3, overrides=OVERRIDES, netns=True, session_timeout_ms=SESSION_MS)
    topic = unique("parked")
    create(c.bootstrap, topic)
    st = wait_for(lambda: full_isr(c, topic), 90, "the partition online with its ISR")
    leader = c.node(st["leader"]).bootstrap
    assert produce(leader, topic)[0] == E.NONE  # offset 0, replicated: the fetch below waits at 1
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        c.cut_off(st["leader"])
        started = time.monotonic()
        produced = pool.submit(produce, leader, topic)
        fetched = pool.submit(fetch, leader, topic, 1)
        code, at = produced.result(120)
        assert code == E.NOT_LEADER_OR_FOLLOWER, E(code).name
        assert at - started < 30, f"the parked produce answered {at - started:.1f} s after the cut"
        code, at = fetched.result(120)
        assert code == E.NOT_LEADER_OR_FOLLOWER, E(code).name
        assert at - started < 30, f"the parked fetch answered {at - started:.1f} s after the cut"
