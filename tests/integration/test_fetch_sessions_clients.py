"""Fetch sessions (KIP-227) with the real clients that use them: Java kafka-clients (Fetch v17,
topic ids) and kafka-python 3 (Fetch v12, names) consume a 20-partition topic while a producer
writes to a few of its partitions; every record arrives once and in order per partition, and
the server's metrics show the fetches were incremental. Also the raw protocol over a socket:
a session created, fetched incrementally with and without news, and closed."""
from __future__ import annotations

import re
import urllib.request

import pytest
from clientlib import java_member, python_member
from confluent_kafka import Producer
from kafka.admin import KafkaAdminClient, NewTopic
from wire import WireClient

from kcoord.testing.process import free_port

PARTITIONS = 20
WRITTEN = (0, 7, 13)  # the partitions the producer writes
ROUNDS, PER_ROUND = 8, 60


def metric(port: int, name: str) -> float:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
        text = r.read().decode()
    m = re.search(r"^" + re.escape(name) + r" (\S+)$", text, re.M)
    assert m, f"{name} not in the metrics"
    return float(m.group(1))


@pytest.fixture
def server(kcoord_factory):
    port = free_port()
    srv = kcoord_factory({"kcoord.metrics.listener": f"http://127.0.0.1:{port}"})
    return srv, port


def create(bootstrap: str, topic: str) -> None:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=30000)
    try:
        admin.create_topics([NewTopic(topic, PARTITIONS, 1)])
    finally:
        admin.close()


def produce_while_consumed(bootstrap: str, topic: str, member) -> dict[int, list[str]]:
    """Write ROUNDS rounds to the WRITTEN partitions, each round once the member has read the
    previous one (so the consumer's session sees many small changes); returns what was written."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "enable.idempotence": True})
    written: dict[int, list[str]] = {p: [] for p in WRITTEN}
    for r in range(ROUNDS):
        for i in range(PER_ROUND):
            for p in WRITTEN:
                key = f"{p}:{r * PER_ROUND + i}"
                producer.produce(topic, key=key, value=b"v" * 50, partition=p)
                written[p].append(key)
        assert producer.flush(60) == 0
        total = sum(len(v) for v in written.values())
        member.wait_for(lambda m, total=total: len(m.consumed()) >= total, 120, f"round {r}'s records")
    return written


def check_once_in_order(member, written: dict[int, list[str]]) -> None:
    got: dict[int, list[tuple[int, str]]] = {}
    for partition, offset, key in member.consumed():
        got.setdefault(partition, []).append((offset, key))
    assert set(got) == set(WRITTEN)
    for p, keys in written.items():
        assert [k for _, k in got[p]] == keys, f"partition {p}: not every record once in order"
        offsets = [o for o, _ in got[p]]
        assert offsets == list(range(len(keys)))


@pytest.mark.parametrize("lib", ["java", "kafka-python"])
def test_consumers_fetch_incrementally_and_get_every_record_once(server, lib):
    srv, port = server
    topic, group = f"sessions-{lib}", f"sessions-{lib}-g"
    create(srv.bootstrap, topic)
    if lib == "java":
        member = java_member(srv.bootstrap, topic, group)
    else:
        member = python_member("kafka-python", srv.bootstrap, topic, group)
    try:
        member.wait_for(lambda m: m.assignment() == set(range(PARTITIONS)), 120, "all 20 partitions")
        before = metric(port, "kcoord_fetch_session_incremental_fetches_total")
        written = produce_while_consumed(srv.bootstrap, topic, member)
        check_once_in_order(member, written)
        assert metric(port, "kcoord_fetch_sessions") >= 1
        # one incremental fetch at least per round (the client reads each round separately)
        assert metric(port, "kcoord_fetch_session_incremental_fetches_total") - before >= ROUNDS
        assert metric(port, "kcoord_fetch_session_partitions_cached") >= PARTITIONS
    finally:
        member.close()


def test_raw_session_over_a_socket(server):
    from kafka.protocol.consumer import FetchRequest

    srv, _ = server
    topic = "sessions-raw"
    create(srv.bootstrap, topic)

    def req(parts, sid, epoch, max_wait_ms=0):
        T = FetchRequest.FetchTopic
        P = T.FetchPartition
        topics = [T(topic=topic, partitions=[P(partition=p, current_leader_epoch=-1, fetch_offset=o,
                                                  last_fetched_epoch=-1, log_start_offset=-1,
                                                  partition_max_bytes=2**20) for p, o in parts])] if parts else []
        return FetchRequest(version=12, replica_id=-1, max_wait_ms=max_wait_ms, min_bytes=1, max_bytes=2**24,
                            isolation_level=0, session_id=sid, session_epoch=epoch, topics=topics,
                            forgotten_topics_data=[], rack_id="")

    producer = Producer({"bootstrap.servers": srv.bootstrap})
    with WireClient(srv.bootstrap) as c:
        resp = c.call(req([(p, 0) for p in range(PARTITIONS)], 0, 0), 12)
        sid = resp.session_id
        assert resp.error_code == 0 and sid != 0
        assert sum(len(t.partitions) for t in resp.responses) == PARTITIONS
        resp = c.call(req([], sid, 1, max_wait_ms=100), 12)  # nothing new: parks, then answers empty
        assert resp.error_code == 0 and resp.responses == []
        producer.produce(topic, value=b"x", partition=11)
        assert producer.flush(30) == 0
        resp = c.call(req([], sid, 2, max_wait_ms=5000), 12)
        assert [(t.topic, [p.partition_index for p in t.partitions]) for t in resp.responses] == [(topic, [11])]
        assert resp.responses[0].partitions[0].high_watermark == 1
        resp = c.call(req([(11, 1)], sid, 3), 12)
        assert resp.error_code == 0 and resp.responses == []
        resp = c.call(req([], sid, 3), 12)
        assert resp.error_code == 71  # INVALID_FETCH_SESSION_EPOCH (the duplicate of the last request)
        resp = c.call(req([(0, 0)], sid, -1), 12)  # close
        assert resp.error_code == 0 and resp.session_id == 0
        resp = c.call(req([], sid, 4), 12)
        assert resp.error_code == 70  # FETCH_SESSION_ID_NOT_FOUND


def test_a_throttled_fetch_keeps_its_session(server):
    """A fetch over its consumer_byte_rate is answered empty with throttle_time_ms, as Kafka's
    getThrottledResponse: the session id stays in the answer, so the session goes on."""
    from kafka.protocol.admin import AlterClientQuotasRequest
    from kafka.protocol.consumer import FetchRequest

    srv, _ = server
    topic = "sessions-throttled"
    create(srv.bootstrap, topic)
    producer = Producer({"bootstrap.servers": srv.bootstrap})
    for _ in range(8):
        producer.produce(topic, value=b"x" * 1000, partition=0)
    assert producer.flush(30) == 0
    E = AlterClientQuotasRequest.EntryData
    with WireClient(srv.bootstrap) as c:
        resp = c.call(AlterClientQuotasRequest(version=1, validate_only=False, entries=[E(
            entity=[E.EntityData(entity_type="client-id", entity_name="slow")],
            ops=[E.OpData(key="consumer_byte_rate", value=1024.0, remove=False)])]), 1)
        assert resp.entries[0].error_code == 0

    def req(sid, epoch):
        T = FetchRequest.FetchTopic
        parts = [T.FetchPartition(partition=0, current_leader_epoch=-1, fetch_offset=0, last_fetched_epoch=-1,
                                  log_start_offset=-1, partition_max_bytes=2**20)] if epoch == 0 else []
        return FetchRequest(version=12, replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=2**24,
                            isolation_level=0, session_id=sid, session_epoch=epoch,
                            topics=[T(topic=topic, partitions=parts)] if parts else [],
                            forgotten_topics_data=[], rack_id="")

    with WireClient(srv.bootstrap, client_id="slow") as c:
        resp = c.call(req(0, 0), 12)  # 8 KB: answered, and over the quota from now on
    sid = resp.session_id
    assert resp.error_code == 0 and sid != 0 and resp.throttle_time_ms == 0
    for epoch in (1, 2):  # new connections each time: a throttled one is muted
        with WireClient(srv.bootstrap, client_id="slow") as c:
            resp = c.call(req(sid, epoch), 12)  # the same 8 KB again (the offset was not moved on)
        assert resp.throttle_time_ms > 0 and resp.responses == []
        assert resp.error_code == 0 and resp.session_id == sid
