"""KIP-392, fetch from the closest replica, on three kcoord nodes in three racks with
replica.selector.class=org.apache.kafka.common.replica.RackAwareReplicaSelector.

- The wire (Fetch v11+ with rack_id): the leader answers a consumer in a follower's rack with
  preferred_read_replica = that follower and no records; a consumer in the leader's rack, or
  with no rack, or a v10 Fetch, reads from the leader. The follower serves a v11 consumer
  fetch up to the high watermark it learnt from the leader (never above it), answers
  OFFSET_OUT_OF_RANGE past its log end, and NOT_LEADER_OR_FOLLOWER to a v10 fetch (no client
  metadata: leader only), as Kafka's ReplicaManager does.
- A confluent-kafka consumer with client.rack set to a follower's rack reads every record,
  and its own statistics show its Fetch requests going to that follower's broker after the
  leader's first answer."""
from __future__ import annotations

import json
import time

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as TP
from conftest import call, unique
from kafka.protocol.consumer import FetchRequest
from test_cluster_replication import OVERRIDES, create, full_isr

from kcoord.testing.cluster import wait_for

pytestmark = pytest.mark.integration

SELECTOR = {**OVERRIDES, "replica.selector.class": "org.apache.kafka.common.replica.RackAwareReplicaSelector"}
RACKS = {1: "rack-a", 2: "rack-b", 3: "rack-c"}
N = 500


def fetch(bootstrap: str, topic: str, offset: int, version: int, rack: str = ""):
    T = FetchRequest.FetchTopic
    fields = dict(replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=2**20, isolation_level=0,
                  session_id=0, session_epoch=-1, topics=[T(topic=topic, partitions=[T.FetchPartition(
                      partition=0, current_leader_epoch=-1, fetch_offset=offset, log_start_offset=-1,
                      partition_max_bytes=2**20, **({"last_fetched_epoch": -1} if version >= 12 else {}))])],
                  forgotten_topics_data=[], **({"rack_id": rack} if version >= 11 else {}))
    return call(bootstrap, FetchRequest(version=version, **fields), version).responses[0].partitions[0]


def last_offset(records: bytes | None) -> int:
    """The last offset of the whole batches in a Fetch answer (-1: none)."""
    data, pos, last = records or b"", 0, -1
    while len(data) - pos >= 61:
        last = int.from_bytes(data[pos:pos + 8], "big") + int.from_bytes(data[pos + 23:pos + 27], "big")
        pos += int.from_bytes(data[pos + 8:pos + 12], "big") + 12
    return last


def produce(bootstrap: str, topic: str, n: int) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True, "linger.ms": 5})
    for i in range(n):
        p.produce(topic, str(i).encode(), partition=0)
    assert p.flush(60) == 0


def test_leader_names_the_follower_in_the_clients_rack_which_serves_up_to_its_high_watermark(kcoord_cluster_factory):
    c = kcoord_cluster_factory(3, overrides=SELECTOR, racks=RACKS)
    topic = unique("kip392")
    create(c.bootstrap, topic)
    st = wait_for(lambda: full_isr(c, topic), 60, "the partition online with its ISR")
    leader = st["leader"]
    follower = next(b for b in (1, 2, 3) if b != leader)
    produce(c.bootstrap, topic, N)
    lb, fb = c.node(leader).bootstrap, c.node(follower).bootstrap
    # the leader: a consumer in the follower's rack is sent there, with no records
    p = fetch(lb, topic, 0, 11, RACKS[follower])
    assert (p.error_code, p.preferred_read_replica) == (0, follower), p
    assert not p.records and p.high_watermark == N
    # ... a consumer in the leader's rack, with no rack, or v10 (no rack_id): read here
    for version, rack in ((11, RACKS[leader]), (11, ""), (10, "")):
        p = fetch(lb, topic, 0, version, rack)
        assert p.error_code == 0 and p.records, (version, rack, p)
        assert getattr(p, "preferred_read_replica", -1) == -1
    # the follower: it serves a v11 consumer fetch below the high watermark the leader told it
    wait_for(lambda: fetch(fb, topic, 0, 11, RACKS[follower]).high_watermark == N, 30,
             "the follower to learn the high watermark")
    p = fetch(fb, topic, 0, 11, RACKS[follower])
    assert p.error_code == 0 and last_offset(p.records) == N - 1 and p.preferred_read_replica == -1
    p = fetch(fb, topic, N, 11, RACKS[follower])
    assert p.error_code == 0 and not p.records
    assert fetch(fb, topic, N + 5, 11, RACKS[follower]).error_code == 1  # OFFSET_OUT_OF_RANGE
    assert fetch(fb, topic, 0, 10).error_code == 6  # NOT_LEADER_OR_FOLLOWER: v10 reads from the leader only


def test_a_consumer_with_client_rack_fetches_from_the_follower_in_its_rack(kcoord_cluster_factory):
    c = kcoord_cluster_factory(3, overrides=SELECTOR, racks=RACKS)
    topic = unique("kip392c")
    create(c.bootstrap, topic)
    st = wait_for(lambda: full_isr(c, topic), 60, "the partition online with its ISR")
    leader = st["leader"]
    follower = next(b for b in (1, 2, 3) if b != leader)
    produce(c.bootstrap, topic, N)
    stats: list[dict] = []
    consumer = Consumer({"bootstrap.servers": c.bootstrap, "group.id": unique("g"), "client.rack": RACKS[follower],
                         "enable.auto.commit": False, "auto.offset.reset": "earliest",
                         "statistics.interval.ms": 500, "stats_cb": lambda s: stats.append(json.loads(s))})
    consumer.assign([TP(topic, 0, 0)])
    got: list[int] = []
    deadline = time.monotonic() + 90
    try:
        while len(got) < N and time.monotonic() < deadline:
            m = consumer.poll(0.5)
            if m is not None:
                assert m.error() is None, m.error()
                got.append(m.offset())
        assert got == list(range(N)), f"{len(got)} of {N} records"
        wait_for(lambda: consumer.poll(0.2) is None and fetches(stats, follower) > 0, 30,
                 "the consumer's statistics to show Fetch requests to the follower")
        before = (fetches(stats, leader), fetches(stats, follower))
        wait_for(lambda: consumer.poll(0.2) is None and fetches(stats, follower) > before[1] + 2, 30,
                 "more Fetch requests to the follower")
        assert fetches(stats, leader) <= before[0] + 1, "the consumer went on fetching from the leader"
    finally:
        consumer.close()


def fetches(stats: list[dict], broker: int) -> int:
    """Fetch requests the consumer sent to `broker`, by its last statistics."""
    if not stats:
        return 0
    for b in stats[-1]["brokers"].values():
        if b.get("nodeid") == broker:
            return int(b.get("req", {}).get("Fetch", 0))
    return 0
