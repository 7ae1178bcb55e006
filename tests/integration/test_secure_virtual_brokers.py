"""Virtual brokers (kcoord.virtual.brokers, server/virtual/) on secure listeners: every node's
twin of a SASL_SSL listener runs the same TLS and SASL, Metadata over it names every node's
SASL_SSL endpoint, and librdkafka produces to and consumes (as a group, committing) partitions
led by all three nodes over SASL_SSL."""
from __future__ import annotations

import asyncio
import time

import pytest
from conftest import unique
from kafka.protocol.metadata import MetadataRequest
from pki import make_pki
from wire import Closed, WireClient, client_tls

from kcoord.server.app import Server
from kcoord.server.config import Config

pytestmark = pytest.mark.integration

USER, PASSWORD = "alice", "alice-Pw0"
JAAS = f'org.apache.kafka.common.security.plain.PlainLoginModule required user_{USER}="{PASSWORD}";'
MESSAGES = 30


def _metadata(c: WireClient, topics: list[str] | None = None):
    wanted = None if topics is None else [MetadataRequest.MetadataRequestTopic(name=t) for t in topics]
    return c.call(MetadataRequest(version=12, topics=wanted, allow_auto_topic_creation=False,
                                  include_topic_authorized_operations=False), 12)


async def test_every_virtual_broker_serves_the_secure_listener(tmp_path):
    pki = make_pki(tmp_path / "pki")
    srv = Server(Config({
        "log.dirs": str(tmp_path / "data"), "offsets.topic.num.partitions": 3, "group.initial.rebalance.delay.ms": 0,
        "kcoord.virtual.brokers": 3,
        "listeners": "PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0",
        "sasl.enabled.mechanisms": "PLAIN", "listener.name.sasl_ssl.plain.sasl.jaas.config": JAAS,
        "ssl.keystore.type": "PEM", "ssl.keystore.location": str(pki.server.keystore),
        "ssl.truststore.type": "PEM", "ssl.truststore.location": str(pki.ca_cert),
    }))
    await srv.start()
    tls = client_tls(str(pki.ca_cert))
    topic = unique("secure-virtual")
    try:
        def brokers() -> dict[int, tuple[str, int]]:
            with WireClient(f"127.0.0.1:{srv.listener('SASL_SSL').bound_port}", tls) as c:
                c.authenticate("PLAIN", USER, PASSWORD)
                return {b.node_id: (b.host, b.port) for b in _metadata(c).brokers}

        nodes = await asyncio.to_thread(brokers)
        assert len(nodes) == 3 and len({port for _, port in nodes.values()}) == 3

        def each_node() -> list[bool]:
            """Per node: whether a request before authentication was refused (connection closed)."""
            out = []
            for _, (host, port) in sorted(nodes.items()):
                with WireClient(f"{host}:{port}", tls) as anon:  # TLS, then nothing before SASL
                    try:
                        _metadata(anon)
                        refused = False
                    except Closed:
                        refused = True
                with WireClient(f"{host}:{port}", tls) as c:
                    c.authenticate("PLAIN", USER, PASSWORD)
                    md = _metadata(c)
                    assert {b.port for b in md.brokers} == {p for _, p in nodes.values()}
                    out.append(refused)
            return out

        assert await asyncio.to_thread(each_node) == [True, True, True]

        def produce_and_consume() -> tuple[set[int], int, int]:
            from confluent_kafka import Consumer, Producer, TopicPartition
            from confluent_kafka.admin import AdminClient, NewTopic

            conf = {"bootstrap.servers": f"127.0.0.1:{srv.listener('SASL_SSL').bound_port}",
                    "security.protocol": "SASL_SSL", "ssl.ca.location": str(pki.ca_cert),
                    "sasl.mechanism": "PLAIN", "sasl.username": USER, "sasl.password": PASSWORD}
            admin = AdminClient(conf)
            for f in admin.create_topics([NewTopic(topic, 3, 1)]).values():
                f.result(30)
            leaders = {p.leader for p in admin.list_topics(topic, timeout=30).topics[topic].partitions.values()}
            producer = Producer(conf)
            for i in range(MESSAGES):
                producer.produce(topic, value=f"v{i}".encode(), partition=i % 3)
            assert producer.flush(30) == 0
            consumer = Consumer({**conf, "group.id": unique("g-secure-virtual"), "auto.offset.reset": "earliest",
                                 "enable.auto.commit": False})
            consumer.subscribe([topic])
            n = 0
            deadline = time.monotonic() + 60
            while n < MESSAGES and time.monotonic() < deadline:
                m = consumer.poll(0.2)
                if m is not None and m.error() is None:
                    n += 1
            consumer.commit(asynchronous=False)
            committed = consumer.committed([TopicPartition(topic, p) for p in range(3)], timeout=30)
            consumer.close()
            return leaders, n, sum(tp.offset for tp in committed)

        leaders, consumed, committed = await asyncio.to_thread(produce_and_consume)
        assert leaders == set(nodes)  # the partitions are led by all three nodes
        assert (consumed, committed) == (MESSAGES, MESSAGES)
    finally:
        await srv.stop()
