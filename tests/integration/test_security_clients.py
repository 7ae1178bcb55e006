"""Real clients over kcoord's secure listeners: SASL/PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512 over
SASL_PLAINTEXT and SASL_SSL, and mutual TLS (SSL with ssl.client.auth=required), with Java
kafka-clients, confluent-kafka, kcat, kafka-python, aiokafka, kafkajs and sarama. In each, a consumer
group reads the topic and commits (the commit checked through the PLAINTEXT listener); a wrong
password, an unknown user and a certificate from an untrusted CA are refused, and the client
reports it as an authentication (or TLS) failure. One server for the module, the CA made here
with openssl."""
from __future__ import annotations

import asyncio
import json
import logging
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest
from clientlib import kcat, run_java, run_node, sarama
from conftest import KcoordProcess, committed, free_port, unique
from pki import make_pki
from wire import WireClient

from kcoord.server.security.scram import ScramMechanism, salted_password

pytestmark = pytest.mark.integration

USER, PASSWORD = "alice", "alice-Pa55word"
BAD_PASSWORD = "not-alices-PW"
MESSAGES = 5
JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
        f'username="admin" password="admin-pw" user_admin="admin-pw" user_{USER}="{PASSWORD}";')


@dataclass(frozen=True)
class Case:
    name: str
    listener: str  # SASL_PLAINTEXT | SASL_SSL | SSL
    mechanism: str | None  # None: mutual TLS
    user: str = USER
    password: str = PASSWORD
    untrusted_cert: bool = False


SCENARIOS = [Case(f"{lst.lower()}-{m.lower()}", lst, m) for lst in ("SASL_PLAINTEXT", "SASL_SSL")
             for m in ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")] + [Case("ssl-mutual-tls", "SSL", None)]
REFUSALS = [
    Case("wrong-password-plain", "SASL_PLAINTEXT", "PLAIN", password=BAD_PASSWORD),
    Case("wrong-password-scram-sha-512", "SASL_SSL", "SCRAM-SHA-512", password=BAD_PASSWORD),
    Case("unknown-user-scram-sha-256", "SASL_PLAINTEXT", "SCRAM-SHA-256", user="mallory"),
    Case("untrusted-certificate", "SSL", None, untrusted_cert=True),
]


class Secure:
    def __init__(self, srv: KcoordProcess, ports: dict[str, int], pki, topic: str) -> None:
        self.srv = srv
        self.ports = ports
        self.pki = pki
        self.topic = topic
        self.plaintext = f"127.0.0.1:{ports['PLAINTEXT']}"

    def bootstrap(self, c: Case) -> str:
        return f"127.0.0.1:{self.ports[c.listener]}"

    def client_cert(self, c: Case):
        return self.pki.client("mallory", untrusted=True) if c.untrusted_cert else self.pki.client(USER)


@pytest.fixture(scope="module")
def secure(tmp_path_factory):
    root = tmp_path_factory.mktemp("secure")
    pki = make_pki(root / "pki")
    ports = {name: free_port() for name in ("PLAINTEXT", "SASL_PLAINTEXT", "SASL_SSL", "SSL")}
    srv = KcoordProcess(root / "data", port=ports["PLAINTEXT"], overrides={
        "listeners": ",".join(f"{n}://127.0.0.1:{p}" for n, p in ports.items()),
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
        "listener.name.sasl_ssl.plain.sasl.jaas.config": JAAS,
        "ssl.keystore.type": "PEM", "ssl.keystore.location": str(pki.server.keystore),
        "ssl.truststore.type": "PEM", "ssl.truststore.location": str(pki.ca_cert),
        "listener.name.ssl.ssl.client.auth": "required",
        "connection.failed.authentication.delay.ms": "100",
    }).start()
    pki.client(USER)
    pki.client("mallory", untrusted=True)
    from kafka.protocol.admin.users import AlterUserScramCredentialsRequest as Alter

    for mech in (ScramMechanism.SCRAM_SHA_256, ScramMechanism.SCRAM_SHA_512):  # one user per request (Kafka's rule)
        salt = os.urandom(16)
        with WireClient(f"127.0.0.1:{ports['PLAINTEXT']}") as w:
            r = w.call(Alter(deletions=[], upsertions=[Alter.ScramCredentialUpsertion(
                name=USER, mechanism=int(mech), iterations=8192, salt=salt,
                salted_password=salted_password(mech, PASSWORD, salt, 8192))]), 0)
            assert [x.error_code for x in r.results] == [0]
    from confluent_kafka import Producer

    topic = unique("secure-data")
    producer = Producer({"bootstrap.servers": srv.bootstrap})
    for i in range(MESSAGES):
        producer.produce(topic, key=f"k{i}".encode(), value=f"v{i}".encode(), partition=0)
    assert producer.flush(30) == 0
    env = Secure(srv, ports, pki, topic)
    yield env
    srv.stop()
    log = srv.log_text()
    # secrets never reach the log; every refusal was logged
    assert PASSWORD not in log and BAD_PASSWORD not in log and "admin-pw" not in log


def _check_commits(env: Secure, groups: dict[str, str]) -> None:
    for name, group in groups.items():
        got = committed(env.plaintext, group, env.topic)
        assert got == {0: MESSAGES}, f"{name}: group {group} committed {got}"


def _run_all(fn, cases):
    with ThreadPoolExecutor(len(cases)) as pool:
        return dict(zip([c.name for c in cases], pool.map(fn, cases), strict=True))


# ---- confluent-kafka (librdkafka 2.16) ----


def _librdkafka_conf(env: Secure, c: Case) -> dict[str, str]:
    conf = {"bootstrap.servers": env.bootstrap(c), "security.protocol": c.listener}
    if c.listener != "SASL_PLAINTEXT":
        conf["ssl.ca.location"] = str(env.pki.ca_cert)
    if c.mechanism is None:
        cert = env.client_cert(c)
        conf.update({"ssl.certificate.location": str(cert.cert), "ssl.key.location": str(cert.key)})
    else:
        conf.update({"sasl.mechanism": c.mechanism, "sasl.username": c.user, "sasl.password": c.password})
    return conf


@pytest.mark.compat("confluent-kafka", "SASL and TLS")
def test_confluent_kafka(secure):
    from confluent_kafka import Consumer

    groups = {c.name: unique(f"cf-{c.name}") for c in SCENARIOS}

    def consume(c: Case) -> int:
        cons = Consumer({**_librdkafka_conf(secure, c), "group.id": groups[c.name], "auto.offset.reset": "earliest",
                         "enable.auto.commit": False})
        cons.subscribe([secure.topic])
        n, deadline = 0, time.monotonic() + 60
        while n < MESSAGES and time.monotonic() < deadline:
            m = cons.poll(0.2)
            if m is not None and m.error() is None:
                n += 1
        cons.commit(asynchronous=False)
        cons.close()
        return n

    def refuse(c: Case) -> list[str]:
        errors: list = []
        cons = Consumer({**_librdkafka_conf(secure, c), "group.id": "never", "error_cb": errors.append})
        cons.subscribe([secure.topic])
        deadline = time.monotonic() + 30
        while not errors and time.monotonic() < deadline:
            cons.poll(0.2)
        cons.close()
        return [f"{e.name()}: {e.str()}" for e in errors]

    assert _run_all(consume, SCENARIOS) == {c.name: MESSAGES for c in SCENARIOS}
    _check_commits(secure, groups)
    refused = _run_all(refuse, REFUSALS)
    for c in REFUSALS:
        first = refused[c.name][0] if refused[c.name] else "no error"
        if c.mechanism is None:  # TLS 1.3: the server's alert arrives with the first read
            assert "alert unknown ca" in first, (c.name, refused[c.name])
        else:
            assert first.startswith("_AUTHENTICATION: ") \
                and "SASL authentication error: Authentication failed" in first, (c.name, refused[c.name])


# ---- kcat (librdkafka 2.0) ----


def _kcat_args(env: Secure, c: Case) -> list[str]:
    out: list[str] = []
    for k, v in _librdkafka_conf(env, c).items():
        if k == "bootstrap.servers":
            out += ["-b", v]
        else:
            out += ["-X", f"{'sasl.mechanisms' if k == 'sasl.mechanism' else k}={v}"]
    return out


@pytest.mark.compat("kcat", "SASL and TLS")
def test_kcat(secure):
    groups = {c.name: unique(f"kc-{c.name}") for c in SCENARIOS}

    def consume(c: Case) -> int:
        res = kcat(*_kcat_args(secure, c), "-X", "auto.offset.reset=earliest", "-e", "-q", "-f", "%o\n",
                   "-G", groups[c.name], secure.topic, timeout=90)
        return len([ln for ln in res.stdout.splitlines() if ln.strip()])

    def refuse(c: Case) -> tuple[int, str]:
        res = kcat(*_kcat_args(secure, c), "-L", "-m", "5", check=False, timeout=60)
        return res.returncode, res.stderr

    assert _run_all(consume, SCENARIOS) == {c.name: MESSAGES for c in SCENARIOS}
    for group in groups.values():  # kcat commits as it closes
        deadline = time.monotonic() + 30
        while committed(secure.plaintext, group, secure.topic) != {0: MESSAGES} and time.monotonic() < deadline:
            time.sleep(0.2)
    _check_commits(secure, groups)
    refused = _run_all(refuse, REFUSALS)
    for c in REFUSALS:
        rc, err = refused[c.name]
        assert rc != 0, (c.name, err)
        expected = "alert unknown ca" if c.mechanism is None else "SASL authentication error: Authentication failed"
        assert expected in err, (c.name, err)


# ---- kafka-python 3 ----


def _kafka_python_conf(env: Secure, c: Case) -> dict[str, object]:
    conf: dict[str, object] = {"bootstrap_servers": env.bootstrap(c), "security_protocol": c.listener}
    if c.listener != "SASL_PLAINTEXT":
        conf["ssl_cafile"] = str(env.pki.ca_cert)
    if c.mechanism is None:
        cert = env.client_cert(c)
        conf.update(ssl_certfile=str(cert.cert), ssl_keyfile=str(cert.key))
    else:
        conf.update(sasl_mechanism=c.mechanism, sasl_plain_username=c.user, sasl_plain_password=c.password)
    return conf


class _Captured(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.lines: list[str] = []  # Handler.handle holds the handler's own lock around emit

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


@pytest.mark.compat("kafka-python", "SASL and TLS")
def test_kafka_python(secure):
    from kafka import KafkaConsumer, TopicPartition
    from kafka.errors import KafkaTimeoutError

    groups = {c.name: unique(f"kp-{c.name}") for c in SCENARIOS}

    def consume(c: Case) -> int:
        cons = KafkaConsumer(group_id=groups[c.name], auto_offset_reset="earliest", enable_auto_commit=False,
                             request_timeout_ms=20000, **_kafka_python_conf(secure, c))
        deadline = time.monotonic() + 30
        while not cons.partitions_for_topic(secure.topic) and time.monotonic() < deadline:
            time.sleep(0.1)
        cons.subscribe([secure.topic])
        n, deadline = 0, time.monotonic() + 60
        while n < MESSAGES and time.monotonic() < deadline:
            n += sum(len(v) for v in cons.poll(200).values())
        cons.commit()
        assert cons.committed(TopicPartition(secure.topic, 0)) == MESSAGES
        cons.close()
        return n

    captured = _Captured()
    logging.getLogger("kafka").addHandler(captured)

    def refuse(c: Case) -> list[str]:  # one at a time: what was logged meanwhile is about this client
        captured.lines.clear()
        try:
            KafkaConsumer(bootstrap_timeout_ms=3000, **_kafka_python_conf(secure, c)).close()
            return ["not refused"]
        except KafkaTimeoutError:  # kafka-python retries the bootstrap until its timeout: what it logged says why
            return list(captured.lines)

    try:  # one client at a time: kafka-python 3's clients hang when several bootstrap at once in threads
        assert {c.name: consume(c) for c in SCENARIOS} == {c.name: MESSAGES for c in SCENARIOS}
        _check_commits(secure, groups)
        refused = {c.name: refuse(c) for c in REFUSALS}
    finally:
        logging.getLogger("kafka").removeHandler(captured)
    for c in REFUSALS:
        expected = "TLSV1_ALERT_UNKNOWN_CA" if c.mechanism is None else "SaslAuthenticationFailedError"
        assert any(expected in ln for ln in refused[c.name]), (c.name, refused[c.name][:5])


# ---- aiokafka ----


def _aiokafka_conf(env: Secure, c: Case) -> dict[str, object]:
    from aiokafka.helpers import create_ssl_context

    conf: dict[str, object] = {"bootstrap_servers": env.bootstrap(c), "security_protocol": c.listener}
    if c.listener != "SASL_PLAINTEXT":
        cert = env.client_cert(c) if c.mechanism is None else None
        conf["ssl_context"] = create_ssl_context(cafile=str(env.pki.ca_cert),
                                                 certfile=str(cert.cert) if cert else None,
                                                 keyfile=str(cert.key) if cert else None)
    if c.mechanism is not None:
        conf.update(sasl_mechanism=c.mechanism, sasl_plain_username=c.user, sasl_plain_password=c.password)
    return conf


@pytest.mark.compat("aiokafka", "SASL and TLS")
def test_aiokafka(secure, caplog):
    from aiokafka import AIOKafkaConsumer
    from aiokafka.errors import KafkaConnectionError

    caplog.set_level(logging.ERROR, "aiokafka")
    groups = {c.name: unique(f"aio-{c.name}") for c in SCENARIOS}

    async def consume(c: Case) -> int:
        cons = AIOKafkaConsumer(secure.topic, group_id=groups[c.name], auto_offset_reset="earliest",
                                enable_auto_commit=False, request_timeout_ms=20000, **_aiokafka_conf(secure, c))
        await cons.start()
        try:
            n, deadline = 0, time.monotonic() + 60
            while n < MESSAGES and time.monotonic() < deadline:
                n += sum(len(v) for v in (await cons.getmany(timeout_ms=200)).values())
            await cons.commit()
            return n
        finally:
            await cons.stop()

    async def refuse(c: Case) -> str:
        cons = AIOKafkaConsumer(request_timeout_ms=10000, **_aiokafka_conf(secure, c))
        try:
            await cons.start()
            return "not refused"
        except KafkaConnectionError as e:
            return repr(e)
        finally:
            await cons.stop()

    async def main() -> tuple[list[int], list[str]]:
        consumed = await asyncio.gather(*(consume(c) for c in SCENARIOS))
        refused = [await refuse(c) for c in REFUSALS]  # one at a time: the log says which
        return consumed, refused

    consumed, refused = asyncio.run(main())
    assert consumed == [MESSAGES] * len(SCENARIOS)
    _check_commits(secure, groups)
    assert all(r != "not refused" for r in refused), refused
    logged = [r.getMessage() for r in caplog.records]
    # aiokafka logs why it could not connect: the server's SASL error; a TLS 1.3 client sees
    # the untrusted-certificate refusal only as the connection closing (the server logged why)
    assert sum("SaslAuthenticationFailed" in ln for ln in logged) >= 3, logged
    assert "Authentication failed: Invalid username or password" in "\n".join(logged)


# ---- kafkajs ----


@pytest.mark.compat("kafkajs", "SASL and TLS")
def test_kafkajs(secure, tmp_path):
    groups = {c.name: unique(f"js-{c.name}") for c in SCENARIOS}
    mech = {"PLAIN": "plain", "SCRAM-SHA-256": "scram-sha-256", "SCRAM-SHA-512": "scram-sha-512"}

    def spec(c: Case, expect: str) -> dict[str, object]:
        ssl = None
        if c.listener != "SASL_PLAINTEXT":
            ssl = {"ca": str(secure.pki.ca_cert)}
            if c.mechanism is None:
                cert = secure.client_cert(c)
                ssl.update(cert=str(cert.cert), key=str(cert.key))
        sasl = None if c.mechanism is None else {"mechanism": mech[c.mechanism], "username": c.user,
                                                 "password": c.password}
        return {"name": c.name, "bootstrap": secure.bootstrap(c), "topic": secure.topic, "messages": MESSAGES,
                "group": groups.get(c.name, "never"), "expect": expect, "ssl": ssl, "sasl": sasl}

    scenarios = tmp_path / "scenarios.json"
    scenarios.write_text(json.dumps([spec(c, "consume") for c in SCENARIOS] + [spec(c, "refuse") for c in REFUSALS]))
    res = run_node("secure.js", scenarios, timeout=150)
    out = {r["name"]: r for r in res.records()}
    for c in SCENARIOS:
        assert out.get(c.name, {}).get("kind") == "consumed", (c.name, res.describe())
        assert out[c.name]["records"] == MESSAGES and out[c.name]["committed"] == MESSAGES, out[c.name]
    _check_commits(secure, groups)
    for c in REFUSALS:
        r = out.get(c.name, {})
        assert r.get("kind") == "refused", (c.name, res.describe())
        if c.mechanism is not None:
            assert r["error"] == "KafkaJSSASLAuthenticationError", r
            assert "SASL" in r["message"] and "Authentication failed" in r["message"], r
        else:  # Node reports the server's TLS alert
            assert "unknown ca" in r["message"].lower(), r


# ---- sarama (Go) ----


@pytest.mark.compat("sarama", "SASL and TLS")
def test_sarama(secure):
    """Sarama 1.22 (configured as Kafka 2.1, so SaslHandshake v1 and SaslAuthenticate for every
    mechanism), TLS through Go's crypto/tls. A refusal shows only in sarama's log: the
    server's SASL_AUTHENTICATION_FAILED, or the TLS alert for the untrusted certificate."""
    groups = {c.name: unique(f"go-{c.name}") for c in SCENARIOS}

    def env(c: Case) -> dict[str, str]:
        e = {}
        if c.listener != "SASL_PLAINTEXT":
            e["KCOORD_TLS_CA"] = str(secure.pki.ca_cert)
        if c.mechanism is None:
            cert = secure.client_cert(c)
            e.update(KCOORD_TLS_CERT=str(cert.cert), KCOORD_TLS_KEY=str(cert.key))
        else:
            e.update(KCOORD_SASL_MECHANISM=c.mechanism, KCOORD_SASL_USER=c.user, KCOORD_SASL_PASSWORD=c.password)
        return e

    def consume(c: Case):
        return sarama("consume", secure.bootstrap(c), secure.topic, groups[c.name], MESSAGES, env=env(c),
                      timeout=120)

    def refused(c: Case):
        return sarama("consume", secure.bootstrap(c), secure.topic, "never", 1, timeout=120, check=False,
                      env={**env(c), "KCOORD_METADATA_RETRIES": "1"})

    for name, res in _run_all(consume, SCENARIOS).items():
        assert res.one("closed")["consumed"] == MESSAGES, (name, res.describe())
    _check_commits(secure, groups)
    for name, res in _run_all(refused, REFUSALS).items():
        assert res.returncode == 1 and res.kinds("error") and not res.kinds("consumed"), (name, res.describe())
        why = "tls: unknown certificate authority" if name == "untrusted-certificate" else \
            "kafka server: SASL Authentication failed."
        assert why in res.stderr, (name, res.describe())


@pytest.mark.compat("java", "SASL and TLS")
@pytest.mark.java
def test_java(secure, tmp_path):
    groups = {c.name: unique(f"java-{c.name}") for c in SCENARIOS}
    modules = {"PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule"}

    def props(c: Case, expect: str) -> str:
        p = {"bootstrap.servers": secure.bootstrap(c), "security.protocol": c.listener, "kcoord.expect": expect,
             "kcoord.topic": secure.topic, "kcoord.messages": str(MESSAGES), "group.id": groups.get(c.name, "never")}
        if c.listener != "SASL_PLAINTEXT":
            p.update({"ssl.truststore.type": "PEM", "ssl.truststore.location": str(secure.pki.ca_cert)})
        if c.mechanism is None:
            p.update({"ssl.keystore.type": "PEM", "ssl.keystore.location": str(secure.client_cert(c).keystore)})
        else:
            module = modules.get(c.mechanism, "org.apache.kafka.common.security.scram.ScramLoginModule")
            p.update({"sasl.mechanism": c.mechanism,
                      "sasl.jaas.config": f'{module} required username="{c.user}" password="{c.password}";'})
        return "".join(f"{k}={v}\n" for k, v in p.items())

    for c in SCENARIOS:
        (tmp_path / f"{c.name}.properties").write_text(props(c, "consume"))
    for c in REFUSALS:
        (tmp_path / f"{c.name}.properties").write_text(props(c, "refuse"))
    res = run_java("SecureClient", tmp_path, timeout=180)
    out = {r["name"]: r for r in res.records()}
    for c in SCENARIOS:
        r = out.get(c.name, {})
        assert r.get("kind") == "consumed", (c.name, res.describe())
        assert (r["records"], r["committed"]) == (str(MESSAGES), str(MESSAGES)), r
    _check_commits(secure, groups)
    for c in REFUSALS:
        r = out.get(c.name, {})
        assert r.get("kind") == "refused", (c.name, res.describe())
        assert r["error"] == ("SslAuthenticationException" if c.mechanism is None else "SaslAuthenticationException"), r
        if c.mechanism == "PLAIN":
            assert r["message"] == "Authentication failed: Invalid username or password", r
        elif c.mechanism is not None:
            assert r["message"] == ("Authentication failed during authentication due to invalid credentials with "
                                    f"SASL mechanism {c.mechanism}"), r


SCRAM_USER, SCRAM_PASSWORD = "carol", "carol-Scr4m-pw"


@pytest.mark.java
def test_java_admin_manages_scram_credentials(secure, tmp_path):
    """Java's Admin (what kafka-configs.sh --alter --add-config 'SCRAM-SHA-512=[...]' --entity-type
    users uses), over SASL_SSL as a PLAIN user: upserts a user's credentials, describes them, the
    new user authenticates with them, and once they are deleted is refused."""
    p = {"bootstrap.servers": f"127.0.0.1:{secure.ports['SASL_SSL']}", "security.protocol": "SASL_SSL",
         "ssl.truststore.type": "PEM", "ssl.truststore.location": str(secure.pki.ca_cert),
         "sasl.mechanism": "PLAIN", "sasl.jaas.config": "org.apache.kafka.common.security.plain.PlainLoginModule "
                                                        f'required username="{USER}" password="{PASSWORD}";',
         "kcoord.expect": "scram", "kcoord.topic": secure.topic, "kcoord.messages": "0",
         "kcoord.scram.user": SCRAM_USER + "-java", "kcoord.scram.password": SCRAM_PASSWORD}
    (tmp_path / "scram.properties").write_text("".join(f"{k}={v}\n" for k, v in p.items()))
    res = run_java("SecureClient", tmp_path, timeout=180)
    out = {r["name"]: r for r in res.records()}
    r = out.get("scram", {})
    assert r.get("kind") == "scram", res.describe()
    assert r["described"] == "SCRAM_SHA_512:8192" and r["cluster"]
    assert r["after_delete"] == "SaslAuthenticationException", r


def test_confluent_kafka_admin_manages_scram_credentials(secure):
    """librdkafka's Admin: the same, with SCRAM-SHA-256."""
    from confluent_kafka import KafkaError
    from confluent_kafka.admin import (
        AdminClient,
        ScramCredentialInfo,
        ScramMechanism,
        UserScramCredentialDeletion,
        UserScramCredentialUpsertion,
    )

    user = SCRAM_USER + "-cf"
    base = {"bootstrap.servers": f"127.0.0.1:{secure.ports['SASL_SSL']}", "security.protocol": "SASL_SSL",
            "ssl.ca.location": str(secure.pki.ca_cert)}
    admin = AdminClient({**base, "sasl.mechanism": "PLAIN", "sasl.username": USER, "sasl.password": PASSWORD})
    info = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 8192)
    for f in admin.alter_user_scram_credentials([UserScramCredentialUpsertion(user, info,
                                                                              SCRAM_PASSWORD.encode())]).values():
        assert f.result(30) is None
    described = admin.describe_user_scram_credentials([user])[user].result(30)
    assert [(i.mechanism, i.iterations) for i in described.scram_credential_infos] == \
        [(ScramMechanism.SCRAM_SHA_256, 8192)]
    as_user = {**base, "sasl.mechanism": "SCRAM-SHA-256", "sasl.username": user, "sasl.password": SCRAM_PASSWORD}
    assert AdminClient(as_user).list_topics(timeout=20).cluster_id
    for f in admin.alter_user_scram_credentials([UserScramCredentialDeletion(
            user, ScramMechanism.SCRAM_SHA_256)]).values():
        assert f.result(30) is None
    errors: list = []  # librdkafka reports the refusal through error_cb, served by poll()
    refused = AdminClient({**as_user, "error_cb": errors.append})
    deadline = time.monotonic() + 30
    while not errors and time.monotonic() < deadline:
        refused.poll(0.2)
    assert errors and errors[0].code() == KafkaError._AUTHENTICATION, errors
    assert "Authentication failed during authentication due to invalid credentials" in errors[0].str(), errors


def _configs_tool(*args: str) -> subprocess.CompletedProcess[str]:
    """`kcoord configs` (kafka-configs.sh) of this venv."""
    return subprocess.run([str(Path(sys.executable).parent / "kcoord"), "configs", *args], capture_output=True,
                          text=True, timeout=60)


def test_kafka_configs_tool_manages_scram_users(secure):
    """kafka-configs.sh --alter --entity-type users --add-config 'SCRAM-SHA-512=[password=...]'
    (what client projects' CI scripts run to make a SCRAM user) sends AlterUserScramCredentials;
    the user then logs in with librdkafka; --describe prints the credentials as ConfigCommand
    does; --delete-config removes one."""
    from confluent_kafka.admin import AdminClient

    user, b = SCRAM_USER + "-tool", secure.plaintext
    r = _configs_tool("--bootstrap-server", b, "--alter", "--entity-type", "users", "--entity-name", user,
                      "--add-config", f"SCRAM-SHA-512=[password={SCRAM_PASSWORD}]")
    assert (r.returncode, r.stdout, r.stderr) == (0, f"Completed updating config for user {user}.\n", "")
    r = _configs_tool("--bootstrap-server", b, "--alter", "--entity-type", "users", "--entity-name", user,
                      "--add-config", f"SCRAM-SHA-256=[iterations=8192,password={SCRAM_PASSWORD}]")
    assert r.returncode == 0, r.stderr

    def login(mechanism: str) -> list:
        errors: list = []
        admin = AdminClient({"bootstrap.servers": secure.bootstrap(Case("", "SASL_PLAINTEXT", mechanism)),
                             "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": mechanism,
                             "sasl.username": user, "sasl.password": SCRAM_PASSWORD, "error_cb": errors.append})
        md = admin.list_topics(timeout=20) if not errors else None
        return [] if md is not None and md.cluster_id else errors

    assert login("SCRAM-SHA-512") == [] and login("SCRAM-SHA-256") == []
    r = _configs_tool("--bootstrap-server", b, "--describe", "--entity-type", "users", "--entity-name", user)
    assert (r.returncode, r.stdout) == (0, f"SCRAM credential configs for user-principal '{user}' are "
                                           "SCRAM-SHA-256=iterations=8192, SCRAM-SHA-512=iterations=4096\n"), r.stderr
    every = _configs_tool("--bootstrap-server", b, "--describe", "--entity-type", "users").stdout.splitlines()
    assert f"SCRAM credential configs for user-principal '{user}' are SCRAM-SHA-256=iterations=8192, " \
           "SCRAM-SHA-512=iterations=4096" in every
    assert _configs_tool("--bootstrap-server", b, "--describe", "--entity-type", "users", "--entity-name",
                         "nobody-at-all").stdout == ""  # a user without credentials prints nothing
    r = _configs_tool("--bootstrap-server", b, "--alter", "--entity-type", "users", "--entity-name", user,
                      "--delete-config", "SCRAM-SHA-256")
    assert r.returncode == 0, r.stderr
    r = _configs_tool("--bootstrap-server", b, "--describe", "--entity-type", "users", "--entity-name", user)
    assert r.stdout == f"SCRAM credential configs for user-principal '{user}' are SCRAM-SHA-512=iterations=4096\n"
    # ConfigCommand's refusals, its messages on stderr and exit code 1
    for extra, message in [
        (["--entity-name", user, "--add-config", "SCRAM-SHA-512=[iterations=1000,password=x]"],
         "Iterations 1000 is less than the minimum 4096 required for SCRAM-SHA-512"),
        (["--entity-default", "--add-config", "SCRAM-SHA-512=[password=x]"],
         "The use of --entity-default or --user-defaults is not allowed with User SCRAM Credentials using "
         "--bootstrap-server."),
        (["--entity-name", user, "--add-config", "SCRAM-SHA-512=[password=x],producer_byte_rate=1024"],
         "Cannot alter both quota and SCRAM credential configs simultaneously for 'users' using --bootstrap-server."),
        (["--entity-name", user, "--add-config", "widgets=3"],
         "Only quota and SCRAM credential configs can be added for 'users' using --bootstrap-server. Unexpected "
         "config names: Set(widgets)"),
    ]:
        r = _configs_tool("--bootstrap-server", b, "--alter", "--entity-type", "users", *extra)
        assert (r.returncode, r.stderr) == (1, message + "\n"), extra
    # the server's refusal: the Java tool's ExecutionException
    r = _configs_tool("--bootstrap-server", b, "--alter", "--entity-type", "users", "--entity-name", user,
                      "--delete-config", "SCRAM-SHA-256")
    assert r.returncode == 1 and r.stderr.splitlines()[1] == (
        "java.util.concurrent.ExecutionException: org.apache.kafka.common.errors.ResourceNotFoundException: "
        "Attempt to delete a user credential that does not exist"), r.stderr
    assert login("SCRAM-SHA-512") == []


def test_every_refusal_was_logged_once_with_the_address(secure):
    """Runs after the clients (module order): the server logged each failed attempt as one line
    with the client's address (and for SASL the user it tried), never a password."""
    log = secure.srv.log_text()
    lines = [ln for ln in log.splitlines() if "Failed authentication" in ln]
    assert any("principal User:mallory" in ln and "SCRAM-SHA-256" in ln for ln in lines), lines[-10:]
    assert any("SSL handshake failed" in ln for ln in lines), lines[-10:]
    assert all("/127.0.0.1:" in ln for ln in lines)
    assert PASSWORD not in log and BAD_PASSWORD not in log

