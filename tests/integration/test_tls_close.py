"""Closing a client's TLS connection (SSL and SASL_SSL listeners): the client's close_notify is
answered with the server's and the socket closed, so aiokafka's and confluent-kafka's consumers
and producers close at once, as against Kafka (they wait for the server's close_notify; without it
aiokafka's stop() took ~30 s). The server logs nothing worse than INFO for these connections."""
from __future__ import annotations

import asyncio
import socket
import time

import pytest
from conftest import KcoordProcess, free_port, unique
from pki import make_pki

pytestmark = pytest.mark.integration

USER, PASSWORD = "closer", "closer-pw"
JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
        f'username="{USER}" password="{PASSWORD}" user_{USER}="{PASSWORD}";')
LISTENERS = ["SSL", "SASL_SSL"]
# What a close may take: the clients close in milliseconds once answered; without the answer
# they wait for their own timeouts (aiokafka ~30 s). Generous for a busy machine.
CLOSE_BOUND_S = 5.0


@pytest.fixture(scope="module")
def tls_server(tmp_path_factory):
    root = tmp_path_factory.mktemp("tls-close")
    pki = make_pki(root / "pki")
    ports = {name: free_port() for name in ("PLAINTEXT", *LISTENERS)}
    srv = KcoordProcess(root / "data", port=ports["PLAINTEXT"], overrides={
        "listeners": ",".join(f"{n}://127.0.0.1:{p}" for n, p in ports.items()),
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_ssl.plain.sasl.jaas.config": JAAS,
        "ssl.keystore.type": "PEM", "ssl.keystore.location": str(pki.server.keystore),
        "ssl.truststore.type": "PEM", "ssl.truststore.location": str(pki.ca_cert),
    }).start()
    for port in ports.values():  # start() waits for the first listener only
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert time.monotonic() < deadline, f"port {port} never listened"
                time.sleep(0.05)
    yield srv, ports, pki
    srv.stop()


def _no_errors(srv: KcoordProcess) -> None:
    bad = [ln for ln in srv.log_text().splitlines() if " ERROR " in ln or " WARNING " in ln or "Traceback" in ln]
    assert not bad, bad[-10:]


@pytest.mark.parametrize("listener", LISTENERS)
def test_aiokafka_consumer_and_producer_stop_at_once(tls_server, listener):
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from aiokafka.helpers import create_ssl_context

    srv, ports, pki = tls_server
    conf: dict[str, object] = {"bootstrap_servers": f"127.0.0.1:{ports[listener]}", "security_protocol": listener,
                               "ssl_context": create_ssl_context(cafile=str(pki.ca_cert))}
    if listener == "SASL_SSL":
        conf.update(sasl_mechanism="PLAIN", sasl_plain_username=USER, sasl_plain_password=PASSWORD)
    topic = unique("tls-close-aio")

    async def main() -> dict[str, float]:
        producer = AIOKafkaProducer(**conf)
        await producer.start()
        await producer.send_and_wait(topic, b"v", partition=0)
        t = time.monotonic()
        await producer.stop()
        took = {"producer": time.monotonic() - t}
        consumer = AIOKafkaConsumer(topic, group_id=unique("tls-close-aio"), auto_offset_reset="earliest",
                                    enable_auto_commit=False, **conf)
        await consumer.start()
        got = await consumer.getone()
        assert got.value == b"v"
        await consumer.commit()
        t = time.monotonic()
        await consumer.stop()
        took["consumer"] = time.monotonic() - t
        return took

    took = asyncio.run(asyncio.wait_for(main(), 120))
    assert all(s < CLOSE_BOUND_S for s in took.values()), took
    _no_errors(srv)


@pytest.mark.parametrize("listener", LISTENERS)
def test_confluent_kafka_consumer_and_producer_close_at_once(tls_server, listener):
    from confluent_kafka import Consumer, Producer

    srv, ports, pki = tls_server
    conf = {"bootstrap.servers": f"127.0.0.1:{ports[listener]}", "security.protocol": listener,
            "ssl.ca.location": str(pki.ca_cert)}
    if listener == "SASL_SSL":
        conf.update({"sasl.mechanism": "PLAIN", "sasl.username": USER, "sasl.password": PASSWORD})
    topic = unique("tls-close-cf")
    producer = Producer(conf)
    producer.produce(topic, b"v", partition=0)
    assert producer.flush(30) == 0
    t = time.monotonic()
    producer.close()
    took = {"producer": time.monotonic() - t}
    consumer = Consumer({**conf, "group.id": unique("tls-close-cf"), "auto.offset.reset": "earliest",
                         "enable.auto.commit": False})
    consumer.subscribe([topic])
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        m = consumer.poll(0.2)
        if m is not None and m.error() is None:
            break
    assert m is not None and m.value() == b"v"
    consumer.commit(asynchronous=False)
    t = time.monotonic()
    consumer.close()
    took["consumer"] = time.monotonic() - t
    assert all(s < CLOSE_BOUND_S for s in took.values()), took
    _no_errors(srv)
