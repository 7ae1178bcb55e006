"""The foundation seen through real clients: every client bootstraps (ApiVersions), creates a
topic (CreateTopics), sees it in Metadata and finds a group's coordinator (FindCoordinator).

Clients: kafka-python 3, aiokafka, confluent-kafka (librdkafka 2.16), kcat (librdkafka 2.0),
Java kafka-clients 3.9.1 (tests/compat/java/KcoordClient.java) and kafkajs 2.2.4
(tests/compat/node/client.js). Also CreateTopics' errors as an admin client reports them, the
internal __consumer_offsets topic, what survives a restart and two instances side by side.

Read-only and uniquely-named checks share one module-scoped server (`shared`); tests that
restart or need their own data directory use the function-scoped `kcoord` fixtures.
"""
from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from clientlib import ClientError, kafkajs, kcat_metadata, kcoord_java
from confluent_kafka import Consumer
from confluent_kafka.admin import AdminClient
from confluent_kafka.admin import NewTopic as CkNewTopic
from conftest import KcoordProcess, unique
from kafka.admin import KafkaAdminClient

pytestmark = pytest.mark.integration

NODE = 1
OFFSETS = "__consumer_offsets"

# Kafka error codes as the admin clients report them.
INVALID_TOPIC_EXCEPTION = 17
TOPIC_ALREADY_EXISTS = 36
INVALID_PARTITIONS = 37
INVALID_REPLICATION_FACTOR = 38


@pytest.fixture(scope="module")
def shared(tmp_path_factory) -> Iterator[KcoordProcess]:
    srv = KcoordProcess(tmp_path_factory.mktemp("shared") / "data").start()
    yield srv
    srv.stop()


def kp_admin(srv: KcoordProcess) -> KafkaAdminClient:
    return KafkaAdminClient(
        bootstrap_servers=srv.bootstrap,
        client_id="kcoord-test-admin",
        request_timeout_ms=10000,
        bootstrap_timeout_ms=10000,
        reconnect_backoff_max_ms=1000,
    )


def ck_admin(srv: KcoordProcess) -> AdminClient:
    return AdminClient({"bootstrap.servers": srv.bootstrap, "socket.timeout.ms": 10000})


def by_name(topics: list[dict]) -> dict[str, dict]:
    return {t["name"]: t for t in topics}


# ---- kafka-python 3 ----


@pytest.mark.compat("kafka-python", "bootstrap")
def test_kafka_python_admin_bootstrap_create_metadata_coordinator(shared):
    topic, group = unique("kp"), unique("kp-group")
    admin = kp_admin(shared)
    try:
        # ApiVersions: the ranges kafka-python negotiated against are the ones we advertise.
        versions = {int(k): v for k, v in admin.api_versions().items()}
        assert versions[18] == (0, 4)  # ApiVersions
        assert versions[3] == (0, 12)  # Metadata
        assert versions[10] == (0, 6)  # FindCoordinator
        assert versions[19] == (0, 7)  # CreateTopics

        created = admin.create_topics({topic: {"num_partitions": 3, "replication_factor": 1,
                                               "configs": {"retention.ms": "3600000"}}})
        (res,) = created["topics"]
        assert res["name"] == topic and res["error_code"] == 0, res
        assert res["num_partitions"] == 3 and res["replication_factor"] == 1
        # CreateTopics v5+ returns the topic's configs, ours marked as set on the topic.
        assert res["configs"]["retention.ms"]["value"] == "3600000"
        assert res["configs"]["retention.ms"]["config_source"] == "DYNAMIC_TOPIC_CONFIG"
        assert res["configs"]["cleanup.policy"]["value"] == "delete"
        topic_id = res["topic_id"]
        assert topic_id and topic_id != str(uuid.UUID(int=0))

        assert topic in admin.list_topics()
        (desc,) = admin.describe_topics([topic])
        assert desc["error_code"] == 0 and not desc["is_internal"]
        assert str(desc["topic_id"]) == str(topic_id)
        parts = sorted(desc["partitions"], key=lambda p: p["partition_index"])
        assert [p["partition_index"] for p in parts] == [0, 1, 2]
        assert all(p["leader_id"] == NODE and p["replica_nodes"] == [NODE] and p["isr_nodes"] == [NODE]
                   for p in parts)

        cluster = admin.describe_cluster()
        assert cluster["controller_id"] == NODE
        assert cluster["brokers"] == [{"broker_id": NODE, "host": "127.0.0.1", "port": shared.port,
                                       "rack": None}]
        assert cluster["cluster_id"]

        # FindCoordinator as the admin client does it (v4+ batched keys, since we advertise v6).
        coordinator = admin._manager.run(admin._find_coordinator_id, group)
        assert coordinator == NODE
        broker = admin._manager.cluster.broker_metadata(coordinator)
        assert (broker.host, broker.port) == ("127.0.0.1", shared.port)
    finally:
        admin.close()


# ---- aiokafka ----


@pytest.mark.compat("aiokafka", "bootstrap")
async def test_aiokafka_bootstrap_create_metadata_coordinator(shared):
    from aiokafka import AIOKafkaClient
    from aiokafka.admin import AIOKafkaAdminClient
    from aiokafka.admin import NewTopic as AioNewTopic
    from aiokafka.client import CoordinationType

    topic, group = unique("aio"), unique("aio-group")
    admin = AIOKafkaAdminClient(bootstrap_servers=shared.bootstrap, request_timeout_ms=10000)
    await admin.start()
    try:
        resp = await admin.create_topics([AioNewTopic(topic, 2, 1)])
        errors = {t[0]: t[1] for t in resp.topic_errors}
        assert errors == {topic: 0}, resp
        assert topic in await admin.list_topics()
        (desc,) = await admin.describe_topics([topic])
        assert desc["error_code"] == 0 and desc["topic"] == topic
        assert sorted(p["partition"] for p in desc["partitions"]) == [0, 1]
        assert all(p["leader"] == NODE for p in desc["partitions"])
        assert await admin.find_coordinator(group) == NODE
    finally:
        await admin.close()

    client = AIOKafkaClient(bootstrap_servers=shared.bootstrap, request_timeout_ms=10000)
    await client.bootstrap()
    try:
        md = await client.fetch_all_metadata()
        assert topic in md.topics()
        assert md.partitions_for_topic(topic) == {0, 1}
        assert {b.nodeId for b in md.brokers()} == {NODE}
        node = await client.coordinator_lookup(CoordinationType.GROUP, group)
        assert node == NODE
        broker = client.cluster.broker_metadata(node)
        assert (broker.host, broker.port) == ("127.0.0.1", shared.port)
    finally:
        await client.close()


# ---- confluent-kafka (librdkafka 2.16) ----


class _Collect(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []
        self._mu = threading.Lock()

    def emit(self, record: logging.LogRecord) -> None:
        with self._mu:
            self.lines.append(record.getMessage())

    def matching(self, text: str) -> list[str]:
        with self._mu:
            return [line for line in self.lines if text in line]


@pytest.mark.compat("confluent-kafka", "bootstrap")
def test_confluent_admin_create_and_list(shared):
    topic = unique("ck")
    admin = ck_admin(shared)
    futures = admin.create_topics([CkNewTopic(topic, num_partitions=4, replication_factor=1)],
                                  request_timeout=10)
    assert futures[topic].result(timeout=15) is None
    md = admin.list_topics(timeout=10)
    assert md.cluster_id and md.controller_id == NODE
    assert {b.id: (b.host, b.port) for b in md.brokers.values()} == {NODE: ("127.0.0.1", shared.port)}
    assert topic in md.topics
    t = md.topics[topic]
    assert t.error is None
    assert sorted(t.partitions) == [0, 1, 2, 3]
    assert all(p.leader == NODE and p.replicas == [NODE] and p.isrs == [NODE] for p in t.partitions.values())
    assert len(md.topics[OFFSETS].partitions) == 50

    # The same topic again: librdkafka reports TOPIC_ALREADY_EXISTS through the future.
    again = admin.create_topics([CkNewTopic(topic, num_partitions=1, replication_factor=1)], request_timeout=10)
    with pytest.raises(Exception) as info:
        again[topic].result(timeout=15)
    assert info.value.args[0].code() == TOPIC_ALREADY_EXISTS, info.value


def test_confluent_consumer_finds_coordinator(shared):
    """librdkafka's consumer looks up its group coordinator as soon as it has a group.id."""
    group = unique("ck-group")
    collect = _Collect()
    logger = logging.getLogger(f"kcoord.test.rdkafka.{group}")
    logger.addHandler(collect)
    logger.setLevel(logging.DEBUG)
    logger.propagate = False
    consumer = Consumer({
        "bootstrap.servers": shared.bootstrap,
        "group.id": group,
        "debug": "cgrp",
        "logger": logger,
        "socket.timeout.ms": 10000,
    })
    try:
        want = f'Group "{group}" coordinator is 127.0.0.1:{shared.port} id {NODE}'
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not collect.matching(want):
            consumer.poll(0.1)
        assert collect.matching(want), "librdkafka never found the coordinator:\n" + "\n".join(
            collect.lines[-40:])
        assert not collect.matching("coordinator query failed"), collect.matching("coordinator")
    finally:
        consumer.close()


# ---- kcat (librdkafka 2.0.2, Debian) ----


@pytest.mark.compat("kcat", "bootstrap")
def test_kcat_metadata(shared):
    topic = unique("kcat")
    admin = kp_admin(shared)
    try:
        admin.create_topics({topic: {"num_partitions": 2, "replication_factor": 1}})
    finally:
        admin.close()
    md = kcat_metadata(shared.bootstrap)
    assert md["controllerid"] == NODE
    assert md["brokers"] == [{"id": NODE, "name": f"127.0.0.1:{shared.port}"}]
    topics = {t["topic"]: t for t in md["topics"]}
    assert topic in topics and OFFSETS in topics
    assert [p["partition"] for p in topics[topic]["partitions"]] == [0, 1]
    assert all(p["leader"] == NODE for p in topics[topic]["partitions"])
    assert len(topics[OFFSETS]["partitions"]) == 50


# ---- Java kafka-clients 3.9.1 ----


@pytest.fixture(scope="module")
def java_admin(shared):
    topic, group = unique("java"), unique("java-group")
    res = kcoord_java("admin", shared.bootstrap, topic, 3, group, timeout=90, check=False)
    return res, topic, group


@pytest.mark.compat("java", "bootstrap")
def test_java_admin_bootstrap_create_metadata(shared, java_admin):
    res, topic, _group = java_admin
    for step in ("describeCluster", "createTopics", "listTopics", "describeTopics"):
        errors = [r for r in res.kinds("error") if r["step"] == step]
        assert not errors, f"{step} failed\n{res.describe()}"
    cluster = res.one("cluster")
    assert cluster["controller"] == NODE and cluster["nodes"] == [f"{NODE}@127.0.0.1:{shared.port}"]
    created = res.one("created")
    assert created["partitions"] == 3 and created["replication_factor"] == 1
    assert created["retention_ms"] == "3600000"
    assert created["topic_id"] not in ("AAAAAAAAAAAAAAAAAAAAAA", "null")
    again = {r["topic"]: r for r in res.kinds("create_again")}
    assert again[topic]["error"] == "TopicExistsException", res.describe()
    assert again["bad name"]["error"] == "InvalidTopicException", res.describe()
    listed = {r["name"]: r for r in res.kinds("topic")}
    assert listed[topic]["internal"] is False and listed[topic]["topic_id"] == created["topic_id"]
    assert listed[OFFSETS]["internal"] is True
    described = {r["name"]: r for r in res.kinds("described")}
    assert described[topic]["leaders"] == [NODE] * 3
    assert described[topic]["topic_id"] == created["topic_id"]
    assert described[OFFSETS]["internal"] is True and described[OFFSETS]["partitions"] == 50


def test_java_admin_describe_group_reports_coordinator(shared, java_admin):
    """describeConsumerGroups: FindCoordinator (v6, batched), then DescribeGroups at the coordinator."""
    res, _topic, group = java_admin
    groups = res.kinds("group")
    assert groups, f"describeConsumerGroups failed\n{res.describe()}"
    (g,) = groups
    assert (g["coordinator_id"], g["coordinator_host"], g["coordinator_port"]) == (NODE, "127.0.0.1", shared.port)
    assert g["group"] == group and g["members"] == 0
    assert res.returncode == 0, res.describe()


def test_java_find_coordinator_every_version(shared):
    """Java's own FindCoordinator request/response classes, v0 to v6, over one connection."""
    group = unique("java-fc")
    res = kcoord_java("findcoordinator", shared.bootstrap, group, timeout=60)
    lines = res.kinds("findcoordinator")
    assert [r["version"] for r in lines] == list(range(7)), res.describe()
    for r in lines:
        assert (r["error_code"], r["node_id"], r["host"], r["port"], r["key"]) == (
            0, NODE, "127.0.0.1", shared.port, group), r


# ---- kafkajs 2.2.4 ----


@pytest.mark.compat("kafkajs", "bootstrap")
def test_kafkajs_admin_bootstrap_create_metadata_coordinator(shared):
    topic, group = unique("js"), unique("js-group")
    res = kafkajs("admin", shared.bootstrap, topic, 2, group, timeout=60, check=False)
    assert not res.kinds("error"), res.describe()
    assert res.returncode == 0, res.describe()
    cluster = res.one("cluster")
    assert cluster["controller"] == NODE and cluster["nodes"] == [f"{NODE}@127.0.0.1:{shared.port}"]
    assert res.one("created")["created"] is True
    assert res.one("create_again")["created"] is False  # kafkajs: TOPIC_ALREADY_EXISTS -> false
    names = res.one("topics")["names"]
    assert topic in names and OFFSETS in names
    described = res.one("described")
    assert (described["name"], described["partitions"], described["leaders"]) == (topic, 2, [NODE, NODE])
    coord = res.one("coordinator")
    assert (coord["error_code"], coord["node_id"], coord["host"], coord["port"]) == (
        0, NODE, "127.0.0.1", shared.port)


# ---- describe-group-based coordinator lookups (FindCoordinator + DescribeGroups) ----


def test_kafka_python_describe_groups_reaches_coordinator(shared):
    group = unique("kp-dg")
    admin = kp_admin(shared)
    try:
        described = admin.describe_groups([group])
    finally:
        admin.close()
    assert group in described, described
    # A group nobody joined: no error, state Dead, no members (DescribeGroups v0-v5).
    assert described[group]["error"] is None, described
    assert described[group]["group_state"] == "Dead" and described[group]["members"] == []


def test_confluent_describe_consumer_groups_reports_coordinator(shared):
    group = unique("ck-dg")
    admin = ck_admin(shared)
    desc = admin.describe_consumer_groups([group], request_timeout=10)[group].result(timeout=15)
    assert desc.group_id == group and desc.members == []
    c = desc.coordinator
    assert (c.id, c.host, c.port) == (NODE, "127.0.0.1", shared.port)


# ---- CreateTopics errors through a real admin client (kafka-python, CreateTopics v7) ----


def _create(admin: KafkaAdminClient, topics: dict, validate_only: bool = False) -> dict[str, dict]:
    res = admin.create_topics(topics, raise_errors=False, validate_only=validate_only)
    return by_name(res["topics"])


def test_create_topics_errors(shared):
    admin = kp_admin(shared)
    try:
        existing = unique("exists")
        assert _create(admin, {existing: {"num_partitions": 1}})[existing]["error_code"] == 0
        res = _create(admin, {existing: {"num_partitions": 1}})[existing]
        assert res["error_code"] == TOPIC_ALREADY_EXISTS, res
        assert res["error_message"] == f"Topic '{existing}' already exists."
        assert (res["num_partitions"], res["replication_factor"]) == (-1, -1)

        for bad in ["", ".", "..", "a" * 250, "a b", "tab\there", "slash/name", "ünïcode"]:
            res = _create(admin, {bad: {"num_partitions": 1}})
            assert res[bad]["error_code"] == INVALID_TOPIC_EXCEPTION, (bad, res)
            assert res[bad]["error_message"], (bad, res)
        longest = "b" * 249  # Kafka's limit is inclusive
        assert _create(admin, {longest: {"num_partitions": 1}})[longest]["error_code"] == 0

        t = unique("parts")
        for n in (0, -2):
            res = _create(admin, {t: {"num_partitions": n}})[t]
            assert res["error_code"] == INVALID_PARTITIONS, (n, res)
        for rf in (3, 0):
            res = _create(admin, {t: {"num_partitions": 1, "replication_factor": rf}})[t]
            assert res["error_code"] == INVALID_REPLICATION_FACTOR, (rf, res)

        # One request, several topics: each gets its own result.
        ok, bad = unique("mixed-ok"), "mixed bad"
        res = _create(admin, {ok: {"num_partitions": 2}, bad: {"num_partitions": 1}})
        assert res[ok]["error_code"] == 0 and res[bad]["error_code"] == INVALID_TOPIC_EXCEPTION

        # num_partitions / replication_factor -1: the broker's num.partitions (1) and RF 1.
        dflt = unique("defaults")
        res = _create(admin, {dflt: {}})[dflt]
        assert (res["error_code"], res["num_partitions"], res["replication_factor"]) == (0, 1, 1)

        # validate_only answers as if created, and creates nothing.
        v = unique("validate")
        res = _create(admin, {v: {"num_partitions": 5}}, validate_only=True)[v]
        assert (res["error_code"], res["num_partitions"]) == (0, 5), res
        assert v not in admin.list_topics()
        res = _create(admin, {existing: {"num_partitions": 1}}, validate_only=True)[existing]
        assert res["error_code"] == TOPIC_ALREADY_EXISTS
        res = _create(admin, {v: {"num_partitions": 5}})[v]
        assert res["error_code"] == 0
        (desc,) = admin.describe_topics([v])
        assert len(desc["partitions"]) == 5

        # Nothing with an invalid name or a failed validation was created on the way.
        listed = set(admin.list_topics())
        assert not listed & {"", ".", "..", "a" * 250, "a b", t, "mixed bad"}
        assert {existing, longest, ok, dflt, v} <= listed
    finally:
        admin.close()


def test_consumer_offsets_is_internal_with_50_partitions(shared):
    admin = kp_admin(shared)
    try:
        (desc,) = admin.describe_topics([OFFSETS])
        assert desc["error_code"] == 0 and desc["is_internal"] is True
        assert sorted(p["partition_index"] for p in desc["partitions"]) == list(range(50))
        assert all(p["leader_id"] == NODE for p in desc["partitions"])
        # All-topics metadata lists it as internal too, with the same topic id.
        everything = by_name(admin.describe_topics())
        assert everything[OFFSETS]["is_internal"] is True
        assert everything[OFFSETS]["topic_id"] == desc["topic_id"]
        res = _create(admin, {OFFSETS: {"num_partitions": 1}})[OFFSETS]
        assert res["error_code"] == TOPIC_ALREADY_EXISTS
    finally:
        admin.close()


# ---- restart and a second instance ----


def _snapshot(srv: KcoordProcess) -> tuple[str, dict[str, tuple[str, int, bool]]]:
    admin = kp_admin(srv)
    try:
        cluster_id = admin.describe_cluster()["cluster_id"]
        topics = {t["name"]: (str(t["topic_id"]), len(t["partitions"]), t["is_internal"])
                  for t in admin.describe_topics()}
        return cluster_id, topics
    finally:
        admin.close()


def test_topics_ids_and_cluster_id_survive_restart(kcoord):
    admin = kp_admin(kcoord)
    try:
        res = _create(admin, {
            "orders": {"num_partitions": 4, "configs": {"retention.ms": "60000", "cleanup.policy": "compact"}},
            "events.v1": {"num_partitions": 1},
        })
        ids = {name: r["topic_id"] for name, r in res.items()}
        assert all(r["error_code"] == 0 for r in res.values()), res
    finally:
        admin.close()
    cluster_id, before = _snapshot(kcoord)
    assert before["orders"] == (ids["orders"], 4, False)
    assert before["events.v1"] == (ids["events.v1"], 1, False)
    assert before[OFFSETS][1:] == (50, True)

    kcoord.restart()
    cluster_id_after, after = _snapshot(kcoord)
    assert cluster_id_after == cluster_id
    assert after == before

    # The restarted registry still refuses duplicates and name collisions.
    admin = kp_admin(kcoord)
    try:
        assert _create(admin, {"orders": {}})["orders"]["error_code"] == TOPIC_ALREADY_EXISTS
        assert _create(admin, {"events_v1": {}})["events_v1"]["error_code"] == INVALID_TOPIC_EXCEPTION
    finally:
        admin.close()

    # A hard kill (no orderly shutdown) keeps them too: the registry is written atomically.
    kcoord.kill()
    kcoord.start()
    assert _snapshot(kcoord) == (cluster_id, before)


def test_topic_configs_survive_restart(kcoord):
    """Configs given at creation still apply after a restart: max.message.bytes refuses a big
    record and LogAppendTime stamps the broker's time (needs Produce)."""
    from kafka import KafkaProducer
    from kafka.errors import MessageSizeTooLargeError

    admin = kp_admin(kcoord)
    try:
        res = _create(admin, {"small": {"num_partitions": 1, "configs": {
            "max.message.bytes": "2000", "message.timestamp.type": "LogAppendTime"}}})
        assert res["small"]["error_code"] == 0
        assert res["small"]["configs"]["max.message.bytes"]["value"] == "2000"
    finally:
        admin.close()
    kcoord.restart()

    producer = KafkaProducer(bootstrap_servers=kcoord.bootstrap, request_timeout_ms=5000,
                             max_block_ms=10000, retries=0, linger_ms=0)
    try:
        small = producer.send("small", value=b"x", timestamp_ms=1000).get(timeout=15)
        assert small.offset == 0
        # LogAppendTime: the broker's clock, not the 1000 the producer set.
        assert small.timestamp > 1_600_000_000_000, small
        with pytest.raises(MessageSizeTooLargeError):
            producer.send("small", value=b"y" * 5000).get(timeout=15)
    finally:
        producer.close(timeout=5)


def test_second_instance_beside_the_first(kcoord_factory, tmp_path: Path):
    first = kcoord_factory()
    second = kcoord_factory(log_dir=tmp_path / "second-data")
    assert first.port != second.port
    a1, a2 = kp_admin(first), kp_admin(second)
    try:
        assert _create(a1, {"only-on-first": {"num_partitions": 2}})["only-on-first"]["error_code"] == 0
        assert _create(a2, {"only-on-second": {"num_partitions": 3}})["only-on-second"]["error_code"] == 0
        t1, t2 = set(a1.list_topics()), set(a2.list_topics())
        assert "only-on-first" in t1 and "only-on-first" not in t2
        assert "only-on-second" in t2 and "only-on-second" not in t1
        c1, c2 = a1.describe_cluster(), a2.describe_cluster()
        assert c1["cluster_id"] != c2["cluster_id"]
        assert c1["brokers"][0]["port"] == first.port and c2["brokers"][0]["port"] == second.port
        # Each coordinates its own groups at its own address.
        for admin, srv in ((a1, first), (a2, second)):
            node = admin._manager.run(admin._find_coordinator_id, "shared-group-name")
            broker = admin._manager.cluster.broker_metadata(node)
            assert (node, broker.host, broker.port) == (NODE, "127.0.0.1", srv.port)
    finally:
        a1.close()
        a2.close()
    assert (tmp_path / "second-data" / "meta.properties").exists()
    assert first.alive() and second.alive()


def test_missing_client_is_a_failure_not_a_skip(monkeypatch):
    """clientlib raises (never skips) when a client is not installed."""
    import clientlib

    monkeypatch.setattr(clientlib, "NODE_DIR", Path("/nonexistent/node"))
    with pytest.raises(ClientError, match="make clients"):
        clientlib.kafkajs("admin", "127.0.0.1:1", "t", 1, "g", timeout=5)
