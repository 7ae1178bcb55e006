"""TLS listeners (SSL) with PEM keystores and truststores: the handshake, ssl.client.auth
none / requested / required, the client certificate's principal through
ssl.principal.mapping.rules, and start-up refusing keystores it cannot use."""
from __future__ import annotations

import asyncio
import logging
import ssl
import subprocess
import sys

import pytest
from conftest import ROOT, free_port
from pki import client_dn, make_pki
from wire import Closed, WireClient, client_tls

from kcoord.server.app import Server
from kcoord.server.config import Config


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    return make_pki(tmp_path_factory.mktemp("pki"))


async def _server(tmp_path, **overrides: str) -> Server:
    srv = Server(Config({"log.dirs": str(tmp_path / "data"), "offsets.topic.num.partitions": 2,
                         "group.initial.rebalance.delay.ms": 0, **overrides}))
    await srv.start()
    return srv


def _ssl_settings(pki, client_auth: str = "none", **extra: str) -> dict[str, str]:
    return {"listeners": "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0",
            "ssl.keystore.type": "PEM", "ssl.keystore.location": str(pki.server.keystore),
            "ssl.truststore.type": "PEM", "ssl.truststore.location": str(pki.ca_cert),
            "ssl.client.auth": client_auth, **extra}


def _principals(srv: Server, port: int) -> list[str]:
    return sorted(c.session.principal for c in srv.broker.connections if c.session.listener.bound_port == port)


async def test_ssl_listener_serves_kafka_requests_and_names_the_client(tmp_path, pki):
    srv = await _server(tmp_path, **_ssl_settings(pki, "requested", **{
        "ssl.principal.mapping.rules": "RULE:^CN=([^,]*),OU=clients,.*$/$1/U,DEFAULT"}))
    port = srv.listener("SSL").bound_port
    bootstrap = f"127.0.0.1:{port}"
    alice = pki.client("alice")
    try:
        def run() -> tuple[list[str], list[str], object]:
            with WireClient(bootstrap, client_tls(str(pki.ca_cert), str(alice.cert), str(alice.key))) as a, \
                    WireClient(bootstrap, client_tls(str(pki.ca_cert))) as anon:
                versions = a.api_versions()
                assert versions.error_code == 0
                anon.api_versions()
                got = _principals(srv, port)
                plain = WireClient(f"127.0.0.1:{srv.listener('PLAINTEXT').bound_port}")
                plain.api_versions()
                plain.close()
                return got, [c.session.principal for c in srv.broker.connections
                             if c.session.listener.name == "PLAINTEXT"], versions
        got, plaintext, _ = await asyncio.to_thread(run)
        # requested: a certificate names its holder (mapped by the rule), none is ANONYMOUS
        assert got == ["User:ALICE", "User:ANONYMOUS"]
        assert plaintext in ([], ["User:ANONYMOUS"])
    finally:
        await srv.stop()


async def test_default_mapping_is_the_rfc2253_subject(tmp_path, pki):
    srv = await _server(tmp_path, **_ssl_settings(pki, "required"))
    port = srv.listener("SSL").bound_port
    bob = pki.client("bob")
    try:
        def run() -> list[str]:
            with WireClient(f"127.0.0.1:{port}", client_tls(str(pki.ca_cert), str(bob.cert), str(bob.key))) as c:
                c.api_versions()
                return _principals(srv, port)
        assert await asyncio.to_thread(run) == [f"User:{client_dn('bob')}"]
    finally:
        await srv.stop()


async def test_required_client_auth_refuses_missing_and_untrusted_certificates(tmp_path, pki, caplog):
    caplog.set_level(logging.INFO, "kcoord.network")
    srv = await _server(tmp_path, **_ssl_settings(pki, "required"))
    bootstrap = f"127.0.0.1:{srv.listener('SSL').bound_port}"
    mallory = pki.client("mallory", untrusted=True)
    try:
        def attempt(ctx: ssl.SSLContext) -> str:
            try:
                with WireClient(bootstrap, ctx) as c:
                    c.api_versions()  # TLS 1.3: the refusal arrives with the first read
            except (ssl.SSLError, Closed, ConnectionError) as e:
                return type(e).__name__
            return "accepted"

        no_cert = await asyncio.to_thread(attempt, client_tls(str(pki.ca_cert)))
        untrusted = await asyncio.to_thread(attempt, client_tls(str(pki.ca_cert), str(mallory.cert), str(mallory.key)))
        assert no_cert != "accepted" and untrusted != "accepted"
        # and a client that does not trust the server's CA refuses the server
        foreign = ssl.create_default_context(cafile=str(pki.other_ca_cert))
        foreign.check_hostname = False
        assert await asyncio.to_thread(attempt, foreign) == "SSLCertVerificationError"
        for _ in range(100):
            lines = [r.getMessage() for r in caplog.records if "Failed authentication" in r.getMessage()]
            if len(lines) >= 2:
                break
            await asyncio.sleep(0.05)
        assert len(lines) >= 2 and all("SSL handshake failed" in ln and "/127.0.0.1:" in ln for ln in lines), lines
        assert srv.broker.connections == set() or all(c.session.listener.name != "SSL" for c in srv.broker.connections)
    finally:
        await srv.stop()


async def test_inline_pem_keystore_with_an_encrypted_key_and_listener_prefixed_settings(tmp_path, pki):
    key = pki.encrypted_server_key("k3y-secret")
    srv = await _server(tmp_path, **{
        "listeners": "PLAINTEXT://127.0.0.1:0,INTERNAL://127.0.0.1:0",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,INTERNAL:SSL",
        "listener.name.internal.ssl.keystore.type": "PEM",
        "listener.name.internal.ssl.keystore.key": key.read_text(),
        "listener.name.internal.ssl.keystore.certificate.chain": pki.server.pem_chain(),
        "listener.name.internal.ssl.key.password": "k3y-secret",
        "listener.name.internal.ssl.enabled.protocols": "TLSv1.3"})
    try:
        port = srv.listener("INTERNAL").bound_port

        def run() -> str:
            with WireClient(f"127.0.0.1:{port}", client_tls(str(pki.ca_cert))) as c:
                c.api_versions()
                return c.sock.version()
        assert await asyncio.to_thread(run) == "TLSv1.3"
        only12 = client_tls(str(pki.ca_cert))
        only12.maximum_version = ssl.TLSVersion.TLSv1_2
        with pytest.raises((ssl.SSLError, ConnectionError)):
            await asyncio.to_thread(lambda: WireClient(f"127.0.0.1:{port}", only12).api_versions())
    finally:
        await srv.stop()


@pytest.mark.parametrize("overrides, message", [
    ({}, "an SSL listener needs ssl.keystore.location"),
    ({"ssl.keystore.location": "{pki}/server-keystore.pem", "ssl.keystore.type": "JKS"},
     "ssl.keystore.type=JKS is not supported"),
    ({"ssl.keystore.location": "{pki}/server-keystore.pem", "ssl.keystore.type": "PEM",
      "ssl.keystore.password": "s3cret-pw"}, "SSL key store password cannot be specified with PEM format"),
    ({"ssl.keystore.location": "{pki}/nope.pem", "ssl.keystore.type": "PEM"}, "does not exist"),
    ({"ssl.keystore.location": "{pki}/ca.pem", "ssl.keystore.type": "PEM"}, "could not load the PEM keystore"),
])
def test_unusable_keystores_stop_the_start_up_with_a_message(tmp_path, pki, overrides, message):
    port = free_port()
    opts = {"listeners": f"SSL://127.0.0.1:{port}", "log.dirs": str(tmp_path / "d"),
            **{k: v.format(pki=pki.root) for k, v in overrides.items()}}
    args = [sys.executable, "-m", "kcoord.server", "serve"]
    for k, v in opts.items():
        args += ["--override", f"{k}={v}"]
    r = subprocess.run(args, cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert r.returncode == 1, r.stderr
    assert message in r.stderr
    assert "s3cret-pw" not in r.stderr


async def test_large_requests_and_responses_cross_tls_intact(tmp_path, pki):
    """A produce of ~900 KiB and the fetch that reads it back: many TLS records each way, read
    and reassembled by the connection's TLS layer."""
    from aiokafka.record.default_records import DefaultRecordBatchBuilder
    from kafka.protocol.consumer import FetchRequest
    from kafka.protocol.producer import ProduceRequest

    srv = await _server(tmp_path, **_ssl_settings(pki), **{"message.max.bytes": 2_000_000})
    srv.broker.create_topic("big", 1, {"max.message.bytes": "2000000"})
    port = srv.listener("SSL").bound_port
    value = bytes(range(256)) * 3600  # 921,600 bytes
    b = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=0, producer_id=-1,
                                  producer_epoch=-1, base_sequence=-1, batch_size=2**31 - 1)
    b.append(0, 1_700_000_000_000, b"k", value, [])
    batch = bytes(b.build())
    try:
        def run() -> bytes:
            with WireClient(f"127.0.0.1:{port}", client_tls(str(pki.ca_cert))) as c:
                T = ProduceRequest.TopicProduceData
                r = c.call(ProduceRequest(version=9, transactional_id=None, acks=1, timeout_ms=5000, topic_data=[
                    T(name="big", partition_data=[T.PartitionProduceData(index=0, records=batch)])]), 9)
                assert r.responses[0].partition_responses[0].error_code == 0
                F = FetchRequest.FetchTopic
                f = c.call(FetchRequest(version=12, replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=4 << 20,
                                        isolation_level=0, session_id=0, session_epoch=-1, topics=[
                                            F(topic="big", partitions=[F.FetchPartition(
                                                partition=0, current_leader_epoch=-1, fetch_offset=0,
                                                last_fetched_epoch=-1, log_start_offset=-1,
                                                partition_max_bytes=4 << 20)])],
                                        forgotten_topics_data=[], rack_id=""), 12)
                return bytes(f.responses[0].partitions[0].records)
        got = await asyncio.to_thread(run)
        # as stored: the server set the base offset and partition leader epoch (bytes 0-15)
        assert len(got) == len(batch) and got[16:] == batch[16:]
    finally:
        await srv.stop()
