"""Client quotas (issue 27 item 3): DescribeClientQuotas / AlterClientQuotas as Kafka answers
them, kept across a restart, and enforced with throttle_time_ms and a muted channel, seen by
real clients (librdkafka's statistics and throttle callback, kafka-python, Java's Admin)."""
from __future__ import annotations

import json
import re
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest
from kafka.protocol.admin.client_quotas import AlterClientQuotasRequest, DescribeClientQuotasRequest
from kafka.protocol.metadata import MetadataRequest

from kcoord.testing import free_port
from tests.conftest import call
from tests.wire import WireClient

ROOT = Path(__file__).resolve().parent.parent.parent
AEntry = AlterClientQuotasRequest.EntryData
Component = DescribeClientQuotasRequest.ComponentData


def alter(bootstrap: str, entity: list[tuple[str, str | None]], ops: list[tuple[str, float | None]],
          validate_only: bool = False, version: int = 1):
    entry = AEntry(entity=[AEntry.EntityData(entity_type=t, entity_name=n) for t, n in entity],
                   ops=[AEntry.OpData(key=k, value=0.0 if v is None else v, remove=v is None) for k, v in ops])
    resp = call(bootstrap, AlterClientQuotasRequest(version=version, entries=[entry], validate_only=validate_only),
                version)
    assert len(resp.entries) == 1
    return resp.entries[0].error_code, resp.entries[0].error_message


def describe(bootstrap: str, components: list[tuple[str, int, str | None]], strict: bool = False,
             version: int = 1):
    resp = call(bootstrap, DescribeClientQuotasRequest(version=version, strict=strict, components=[
        Component(entity_type=t, match_type=m, match=n) for t, m, n in components]), version)
    if resp.error_code:
        return resp.error_code, resp.error_message
    return {tuple((e.entity_type, e.entity_name) for e in entry.entity): {v.key: v.value for v in entry.values}
            for entry in resp.entries}


def test_alter_and_describe_as_kafka_answers_them(kcoord_factory):
    srv = kcoord_factory()
    b = srv.bootstrap
    assert alter(b, [("client-id", "c1")], [("producer_byte_rate", 1024.0)]) == (0, None)
    assert alter(b, [("user", "alice"), ("client-id", None)], [("request_percentage", 12.5)]) == (0, None)
    assert alter(b, [("user", None)], [("consumer_byte_rate", 2048.0)]) == (0, None)
    assert alter(b, [("ip", "127.0.0.1")], [("connection_creation_rate", 10.0)]) == (0, None)
    # validate_only changes nothing
    assert alter(b, [("client-id", "c2")], [("producer_byte_rate", 5.0)], validate_only=True) == (0, None)
    everything = describe(b, [])
    assert everything == {
        (("client-id", "c1"),): {"producer_byte_rate": 1024.0},
        (("client-id", None), ("user", "alice")): {"request_percentage": 12.5},
        (("user", None),): {"consumer_byte_rate": 2048.0},
        (("ip", "127.0.0.1"),): {"connection_creation_rate": 10.0},
    }
    # exact, default and specified matches; strict leaves out entities with other types
    assert set(describe(b, [("user", 0, "alice")])) == {(("client-id", None), ("user", "alice"))}
    assert describe(b, [("user", 0, "alice")], strict=True) == {}
    assert set(describe(b, [("user", 1, None)], strict=True)) == {(("user", None),)}
    assert set(describe(b, [("client-id", 2, None)])) == {(("client-id", "c1"),),
                                                           (("client-id", None), ("user", "alice"))}
    assert set(describe(b, [("client-id", 2, None)], strict=True)) == {(("client-id", "c1"),)}
    # v0 (not flexible) reads the same
    assert describe(b, [("ip", 2, None)], version=0) == {(("ip", "127.0.0.1"),): {"connection_creation_rate": 10.0}}
    # removal
    assert alter(b, [("client-id", "c1")], [("producer_byte_rate", None)]) == (0, None)
    assert (("client-id", "c1"),) not in describe(b, [])
    # the last user/client quota gone: the dispatcher's plain path serves what follows
    assert alter(b, [("user", "alice"), ("client-id", None)], [("request_percentage", None)]) == (0, None)
    assert alter(b, [("user", None)], [("consumer_byte_rate", None)]) == (0, None)
    assert describe(b, []) == {(("ip", "127.0.0.1"),): {"connection_creation_rate": 10.0}}
    assert "Client quotas off (none defined)" in srv.log_text()


@pytest.mark.parametrize(("entity", "ops", "message"), [
    ([("client-id", "c")], [("no_such_quota", 1.0)], "Invalid configuration key no_such_quota"),
    ([("client-id", "c")], [("connection_creation_rate", 1.0)], "Invalid configuration key connection_creation_rate"),
    ([("ip", "127.0.0.1")], [("producer_byte_rate", 1.0)], "Invalid configuration key producer_byte_rate"),
    ([("group", "g")], [("producer_byte_rate", 1.0)], "Unhandled client quota entity type: group"),
    ([], [("producer_byte_rate", 1.0)], "Invalid empty client quota entity"),
    ([("user", "")], [("producer_byte_rate", 1.0)], "Empty user not supported"),
    ([("ip", "1.2.3.4"), ("user", "u")], [("connection_creation_rate", 1.0)], "Invalid quota entity combination"),
    ([("client-id", "c")], [("producer_byte_rate", 0.0)], "Quota producer_byte_rate must be greater than 0"),
    ([("client-id", "c")], [("producer_byte_rate", 1.5)], "producer_byte_rate cannot be a fractional value."),
    ([("client-id", "c")], [("producer_byte_rate", 1.0), ("producer_byte_rate", 2.0)], "Ignoring duplicate entity"),
])
def test_bad_alterations_get_invalid_request_and_change_nothing(kcoord_factory, entity, ops, message):
    srv = kcoord_factory()
    code, text = alter(srv.bootstrap, entity, ops)
    assert code == 42, text  # INVALID_REQUEST
    assert text is not None and text.startswith(message), text
    assert describe(srv.bootstrap, []) == {}


@pytest.mark.parametrize(("components", "code", "message"), [
    ([("group", 0, "g")], 35, "Unsupported entity type group"),  # UNSUPPORTED_VERSION, as Kafka
    ([("user", 0, None)], 42, "Request specified MATCH_TYPE_EXACT, but set match string to null."),
    ([("user", 1, "x")], 42, "Request specified MATCH_TYPE_DEFAULT, but also specified a match string."),
    ([("user", 2, "x")], 42, "Request specified MATCH_TYPE_SPECIFIED, but also specified a match string."),
    ([("user", 7, None)], 42, "Unknown match type 7"),
    ([("user", 2, None), ("user", 1, None)], 42, "Entity type user cannot appear more than once in the filter."),
    ([("ip", 2, None), ("user", 2, None)], 42, "Invalid entity filter component combination."),
    ([("", 2, None)], 42, "Invalid empty entity type."),
])
def test_bad_describe_filters_get_kafkas_errors(kcoord_factory, components, code, message):
    srv = kcoord_factory()
    got = describe(srv.bootstrap, components)
    assert got[0] == code and got[1].startswith(message), got


def test_quotas_survive_a_restart_and_kcoord_configs_shows_them(kcoord_factory):
    srv = kcoord_factory()
    assert alter(srv.bootstrap, [("client-id", "keep")], [("producer_byte_rate", 4096.0)]) == (0, None)
    assert alter(srv.bootstrap, [("user", "bob"), ("client-id", "keep")],
                 [("consumer_byte_rate", 8192.0), ("request_percentage", 50.0)]) == (0, None)
    srv.restart()
    got = describe(srv.bootstrap, [])
    assert got == {(("client-id", "keep"),): {"producer_byte_rate": 4096.0},
                   (("client-id", "keep"), ("user", "bob")): {"consumer_byte_rate": 8192.0,
                                                              "request_percentage": 50.0}}
    out = subprocess.run([str(ROOT / ".venv/bin/kcoord"), "configs", "--bootstrap-server", srv.bootstrap,
                          "--describe", "--entity-type", "clients"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "Quota configs for client-id 'keep' are producer_byte_rate=4096.0" in out.stdout, out.stdout


def test_request_percentage_throttles_a_flood_of_metadata_requests(kcoord_factory):
    metrics_port = free_port()
    srv = kcoord_factory({"kcoord.metrics.listener": f"http://127.0.0.1:{metrics_port}"})
    assert alter(srv.bootstrap, [("client-id", "flood")], [("request_percentage", 1.0)]) == (0, None)
    throttled = []
    waited = []  # after a throttled answer: how long the next request took to be answered
    request = MetadataRequest(version=12, topics=None, allow_auto_topic_creation=False,
                              include_topic_authorized_operations=False)
    with WireClient(srv.bootstrap, client_id="flood") as c:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and len(throttled) < 3:
            resp = c.call(request, 12)
            if resp.throttle_time_ms > 0:
                throttled.append(resp.throttle_time_ms)
                sent = time.monotonic()
                c.call(request, 12)  # sent at once, as a client that ignores throttle_time_ms
                waited.append(time.monotonic() - sent)
    assert len(throttled) == 3, "no Metadata answer was throttled in 30 s"
    assert all(0 < t <= 1000 for t in throttled), throttled  # the request quota throttles one window at most
    # KIP-219: the connection is muted for the throttle time (the server reads nothing more)
    assert all(w >= t / 1000 * 0.9 for w, t in zip(waited, throttled, strict=True)), (waited, throttled)
    # metrics per quota entity: the client id's request-time measure and its throttle time
    with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=10) as r:
        text = r.read().decode()
    labels = 'client_id="flood",quota_type="Request",user=""'
    m = re.search(r"^kcoord_client_quota_throttle_time_ms_total\{" + re.escape(labels) + r"\} (\S+)$", text, re.M)
    assert m and float(m.group(1)) >= sum(throttled), text[-2000:]
    assert re.search(r"^kcoord_client_quota_rate\{" + re.escape(labels) + r"\} ", text, re.M)
    # another client id is not throttled
    with WireClient(srv.bootstrap, client_id="other") as c:
        resp = c.call(MetadataRequest(version=12, topics=None, allow_auto_topic_creation=False,
                                      include_topic_authorized_operations=False), 12)
        assert resp.throttle_time_ms == 0


def _kcoord_configs(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(ROOT / ".venv/bin/kcoord"), "configs", *args], capture_output=True, text=True,
                          timeout=60)


def test_kcoord_configs_alters_and_describes_quotas_as_kafka_configs_does(kcoord_factory):
    srv = kcoord_factory()
    b = ["--bootstrap-server", srv.bootstrap]
    out = _kcoord_configs(*b, "--alter", "--entity-type", "clients", "--entity-name", "throttled_client",
                          "--add-config", "producer_byte_rate=1024,consumer_byte_rate=2048")
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "Completed updating config for client throttled_client."
    out = _kcoord_configs(*b, "--alter", "--entity-type", "users", "--entity-default", "--add-config",
                          "request_percentage=200")
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "Completed updating default config for users in the cluster."
    out = _kcoord_configs(*b, "--alter", "--entity-type", "users", "--entity-name", "alice", "--entity-type",
                          "clients", "--entity-default", "--add-config", "producer_byte_rate=4096")
    assert out.returncode == 0, out.stderr
    out = _kcoord_configs(*b, "--describe", "--entity-type", "clients", "--entity-name", "throttled_client")
    assert out.returncode == 0, out.stderr
    line, = out.stdout.splitlines()
    assert line.startswith("Quota configs for client-id 'throttled_client' are ")
    assert sorted(line.split(" are ")[1].split(", ")) == ["consumer_byte_rate=2048.0", "producer_byte_rate=1024.0"]
    out = _kcoord_configs(*b, "--describe", "--entity-type", "users", "--entity-default")
    assert out.stdout.strip() == "Quota configs for the default user-principal are request_percentage=200.0", out
    out = _kcoord_configs(*b, "--describe", "--entity-type", "users", "--entity-type", "clients")
    assert out.stdout.strip() == ("Quota configs for user-principal 'alice', the default client-id are "
                                  "producer_byte_rate=4096.0"), out
    # bad input: what kafka-configs.sh refuses itself, and what the broker refuses
    out = _kcoord_configs(*b, "--alter", "--entity-type", "clients", "--entity-name", "c", "--add-config",
                          "retention.ms=5")
    assert out.returncode == 1
    assert "Only quota configs can be added for 'clients' using --bootstrap-server" in out.stderr
    out = _kcoord_configs(*b, "--alter", "--entity-type", "clients", "--entity-name", "c", "--add-config",
                          "producer_byte_rate=1.5")
    assert out.returncode == 1
    assert "InvalidRequestException: producer_byte_rate cannot be a fractional value." in out.stderr
    # deletion
    out = _kcoord_configs(*b, "--alter", "--entity-type", "clients", "--entity-name", "throttled_client",
                          "--delete-config", "producer_byte_rate,consumer_byte_rate")
    assert out.returncode == 0, out.stderr
    out = _kcoord_configs(*b, "--describe", "--entity-type", "clients")
    assert "throttled_client" not in out.stdout


def test_java_admin_and_the_wire_agree(kcoord_factory):
    from tests.clientlib import run_java

    srv = kcoord_factory()
    res = run_java("QuotaTool", srv.bootstrap, "alter", "user=alice,client-id=<default>", "producer_byte_rate=1000",
                   "request_percentage=50.5")
    assert res.stdout.strip() == "ok", res.stderr
    res = run_java("QuotaTool", srv.bootstrap, "alter", "client-id=c1", "consumer_byte_rate=2000")
    assert res.stdout.strip() == "ok", res.stderr
    res = run_java("QuotaTool", srv.bootstrap, "alter", "client-id=c1", "bogus_key=1")
    assert res.stdout.strip() == "error InvalidRequestException Invalid configuration key bogus_key", res.stdout
    assert alter(srv.bootstrap, [("ip", None)], [("connection_creation_rate", 30.0)]) == (0, None)
    res = run_java("QuotaTool", srv.bootstrap, "describe")
    assert res.stdout.splitlines() == [
        "client-id=<default>,user=alice producer_byte_rate=1000.0 request_percentage=50.5",
        "client-id=c1 consumer_byte_rate=2000.0",
        "ip=<default> connection_creation_rate=30.0",
    ], res.stdout
    expected = {
        (("client-id", None), ("user", "alice")): {"producer_byte_rate": 1000.0, "request_percentage": 50.5},
        (("client-id", "c1"),): {"consumer_byte_rate": 2000.0},
        (("ip", None),): {"connection_creation_rate": 30.0},
    }
    assert describe(srv.bootstrap, []) == expected
    # kafka-python 3.0's KafkaAdminClient has no describe_client_quotas: its connection manager
    # sends the request (at the version it negotiated) and reads the answer
    from kafka.admin import KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=srv.bootstrap, request_timeout_ms=30000)
    try:
        resp = admin._manager.run(admin._manager.send, DescribeClientQuotasRequest(components=[], strict=False))
    finally:
        admin.close()
    assert resp.error_code == 0
    assert {tuple((e.entity_type, e.entity_name) for e in entry.entity): {v.key: v.value for v in entry.values}
            for entry in resp.entries} == expected


# ---- enforcement seen by librdkafka (confluent-kafka) ----
#
# Kafka measures a rate over quota.window.num (11) windows of quota.window.size.seconds (1 s),
# counting at least 10 s: the first 10 s allow 10 s worth of bytes at once, then the rate
# settles at the quota. Each client asks for 1.5 times its quota (an unthrottled one gets
# 1.5x); one that asks for unlimited bytes gets, as from Kafka, a burst each time its oldest
# window expires, right on average but not over any 10 s.

RATE_WARMUP = 10.5
RATE_SPAN = 10.0
ASKED = 1.5


def _rate_between(deliveries: list[tuple[float, int]], start: float, end: float) -> float:
    return sum(n for t, n in deliveries if start <= t < end) / (end - start)


def _paced(started: float, rate: float, sent_bytes: int) -> bool:
    """Whether the client may ask for more bytes now, at ASKED times `rate`."""
    return sent_bytes < (time.monotonic() - started) * rate * ASKED


def test_librdkafka_producer_is_throttled_to_its_producer_byte_rate(kcoord_factory):
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    srv = kcoord_factory()
    rate = 100 * 1024
    assert alter(srv.bootstrap, [("client-id", "throttled-producer")], [("producer_byte_rate", float(rate))]) == (0, None)
    admin = AdminClient({"bootstrap.servers": srv.bootstrap})
    admin.create_topics([NewTopic("q-produce", 1, 1)])["q-produce"].result(30)
    throttles: list[float] = []
    stats_throttle: list[int] = []
    deliveries: list[tuple[float, int]] = []

    def on_stats(text: str) -> None:
        for b in json.loads(text)["brokers"].values():
            if b.get("throttle", {}).get("max", 0) > 0:
                stats_throttle.append(b["throttle"]["max"])

    p = Producer({"bootstrap.servers": srv.bootstrap, "client.id": "throttled-producer", "linger.ms": 5,
                  "batch.size": 16384, "message.timeout.ms": 120000, "statistics.interval.ms": 1000,
                  "stats_cb": on_stats, "throttle_cb": lambda ev: throttles.append(ev.throttle_time)})
    payload = b"x" * 1000
    started = time.monotonic()

    def delivered(err, msg) -> None:  # noqa: ANN001
        if err is None:
            deliveries.append((time.monotonic() - started, len(msg.value())))

    sent = 0
    end = RATE_WARMUP + RATE_SPAN + 1.5
    while time.monotonic() - started < end:
        if _paced(started, rate, sent):
            p.produce("q-produce", payload, callback=delivered)
            sent += len(payload)
            p.poll(0)
        else:
            p.poll(0.005)
    p.purge()  # what the quota still holds back
    p.flush(30)
    measured = _rate_between(deliveries, RATE_WARMUP, RATE_WARMUP + RATE_SPAN)
    assert abs(measured - rate) <= 0.2 * rate, f"{measured:.0f} B/s against a quota of {rate} B/s"
    assert throttles and max(throttles) > 0, "no throttle callback"
    assert stats_throttle, "statistics never showed a throttle time"


def test_librdkafka_consumer_is_throttled_to_its_consumer_byte_rate(kcoord_factory):
    from confluent_kafka import Consumer, Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    srv = kcoord_factory()
    rate = 256 * 1024
    admin = AdminClient({"bootstrap.servers": srv.bootstrap})
    admin.create_topics([NewTopic("q-fetch", 1, 1)])["q-fetch"].result(30)
    p = Producer({"bootstrap.servers": srv.bootstrap, "linger.ms": 5, "batch.size": 16384})
    payload = b"y" * 1000
    for _ in range(9000):  # ~9 MB: more than 10 s at the quota, the burst and 10 s more
        while True:
            try:
                p.produce("q-fetch", payload)
                break
            except BufferError:
                p.poll(0.05)
    assert p.flush(60) == 0
    assert alter(srv.bootstrap, [("client-id", "throttled-consumer")], [("consumer_byte_rate", float(rate))]) == (0, None)
    throttles: list[float] = []
    received: list[tuple[float, int]] = []
    # a small prefetch queue: librdkafka fetches about as fast as the application consumes
    c = Consumer({"bootstrap.servers": srv.bootstrap, "client.id": "throttled-consumer", "group.id": "q-fetch-g",
                  "auto.offset.reset": "earliest", "enable.auto.commit": False, "fetch.max.bytes": 16384,
                  "message.max.bytes": 16384,
                  "max.partition.fetch.bytes": 16384, "queued.max.messages.kbytes": 64,
                  "throttle_cb": lambda ev: throttles.append(ev.throttle_time)})
    try:
        c.subscribe(["q-fetch"])
        started = None
        got = 0
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            if started is not None and not _paced(started, rate, got):
                time.sleep(0.002)
                continue
            msg = c.poll(0.2)
            if msg is None or msg.error():
                continue
            now = time.monotonic()
            if started is None:
                started = now
            received.append((now - started, len(msg.value())))
            got += len(msg.value())
            if now - started > RATE_WARMUP + RATE_SPAN + 0.5:
                break
    finally:
        c.close()
    assert received and received[-1][0] > RATE_WARMUP + RATE_SPAN, "the consumer ran out of records or time"
    measured = _rate_between(received, RATE_WARMUP, RATE_WARMUP + RATE_SPAN)
    assert abs(measured - rate) <= 0.2 * rate, f"{measured:.0f} B/s against a quota of {rate} B/s"
    assert throttles and max(throttles) > 0, "no throttle callback"


def test_controller_mutation_rate_refuses_strictly_then_throttles_old_versions(kcoord_factory):
    from kafka.protocol.admin import CreatePartitionsRequest, CreateTopicsRequest, DeleteTopicsRequest

    srv = kcoord_factory()
    # 2 partitions/s: the bucket holds 11 windows x 1 s x 2 = 22 partitions
    assert alter(srv.bootstrap, [("client-id", "mutator")], [("controller_mutation_rate", 2.0)]) == (0, None)
    T = CreateTopicsRequest.CreatableTopic

    def create(c: WireClient, name: str, partitions: int, version: int = 7):
        r = c.call(CreateTopicsRequest(version=version, timeout_ms=5000, validate_only=False, topics=[
            T(name=name, num_partitions=partitions, replication_factor=1, assignments=[], configs=[])]), version)
        return r.topics[0].error_code, r.throttle_time_ms

    with WireClient(srv.bootstrap, client_id="mutator") as c:
        assert create(c, "m-big", 30) == (0, 0)  # a full bucket lets one large request through: 22 - 30 = -8
        code, throttle = create(c, "m-next", 1)
        assert code == 89  # THROTTLING_QUOTA_EXCEEDED
        assert 3000 <= throttle <= 4000, throttle  # -(-8) / 2 per second, less the time since
        started = time.monotonic()
        # v5 is permissive: done even below zero, and throttled; the connection was muted
        # meanwhile, so the bucket is back at about zero
        code, throttle = create(c, "m-old", 10, version=5)
        assert time.monotonic() - started >= 2.5  # the mute of the refused request's throttle
        assert code == 0 and throttle >= 4000  # done, then throttled: about -10 / 2 per second
    with WireClient(srv.bootstrap, client_id="mutator") as c:  # another connection, the same bucket
        r = c.call(CreatePartitionsRequest(version=3, timeout_ms=5000, validate_only=False, topics=[
            CreatePartitionsRequest.CreatePartitionsTopic(name="m-old", count=12, assignments=None)]), 3)
        assert r.results[0].error_code == 89 and r.throttle_time_ms > 0
    with WireClient(srv.bootstrap, client_id="other") as c:  # another client id has no quota
        assert create(c, "m-free", 50) == (0, 0)
        r = c.call(DeleteTopicsRequest(version=6, timeout_ms=5000, topics=[
            DeleteTopicsRequest.DeleteTopicState(name="m-free", topic_id=None)]), 6)
        assert r.responses[0].error_code == 0 and r.throttle_time_ms == 0


def test_user_quotas_apply_to_the_authenticated_principal(tmp_path):
    from kcoord.testing import KcoordProcess

    plain, sasl = free_port(), free_port()
    jaas = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
            'user_alice="alice-pw" user_bob="bob-pw";')
    srv = KcoordProcess(tmp_path / "data", port=plain, overrides={
        "listeners": f"PLAINTEXT://127.0.0.1:{plain},SASL_PLAINTEXT://127.0.0.1:{sasl}",
        "sasl.enabled.mechanisms": "PLAIN", "listener.name.sasl_plaintext.plain.sasl.jaas.config": jaas})
    srv.start()
    try:
        # alice's own quota; every other user gets the default one, larger than any flood here
        assert alter(srv.bootstrap, [("user", "alice")], [("request_percentage", 1.0)]) == (0, None)
        assert alter(srv.bootstrap, [("user", None)], [("request_percentage", 10000.0)]) == (0, None)
        request = MetadataRequest(version=12, topics=None, allow_auto_topic_creation=False,
                                  include_topic_authorized_operations=False)

        def flood(user: str) -> int:
            with WireClient(f"127.0.0.1:{sasl}", client_id=f"{user}-app") as c:
                c.authenticate("PLAIN", user, f"{user}-pw")
                deadline = time.monotonic() + 5
                while time.monotonic() < deadline:
                    throttle = c.call(request, 12).throttle_time_ms
                    if throttle:
                        return throttle
            return 0

        assert flood("alice") > 0
        assert flood("bob") == 0  # 5 s of Metadata requests, none throttled
    finally:
        srv.stop()
