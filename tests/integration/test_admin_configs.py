"""DescribeConfigs / AlterConfigs / IncrementalAlterConfigs against a kcoord process, through
kafka-python's KafkaAdminClient, confluent-kafka's AdminClient, Java's AdminClient (kafka-clients
3.9.1, tests/compat/java/AdminTool.java) and raw requests for the error paths clients hide:
Kafka's sources and synonyms, its error codes and messages, validate_only, changes that take
effect at once on produce and retention, and every change still there after a restart."""
from __future__ import annotations

import time
from pathlib import Path

import pytest
from clientlib import run_java
from confluent_kafka import TIMESTAMP_LOG_APPEND_TIME, Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewTopic,
    OffsetSpec,
    ResourceType,
)
from conftest import call, unique
from kafka.admin import ConfigResource as KPResource
from kafka.admin import ConfigResourceType, KafkaAdminClient
from kafka.admin import NewTopic as KPNewTopic
from kafka.protocol.admin import (
    AlterConfigsRequest,
    DescribeConfigsRequest,
    IncrementalAlterConfigsRequest,
)

pytestmark = pytest.mark.integration

TOPIC, BROKER, BROKER_LOGGER = 2, 4, 8
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3


def kp_admin(bootstrap: str) -> KafkaAdminClient:
    return KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=15000)


def describe_raw(bootstrap: str, rtype: int, name: str, keys=None, version: int = 4, synonyms: bool = True):
    R = DescribeConfigsRequest
    resp = call(bootstrap, R(version=version, include_synonyms=synonyms, include_documentation=True, resources=[
        R.DescribeConfigsResource(resource_type=rtype, resource_name=name, configuration_keys=keys)]), version)
    return resp.results[0]


def raw_configs(bootstrap: str, rtype: int, name: str, keys=None) -> dict:
    r = describe_raw(bootstrap, rtype, name, keys)
    assert r.error_code == 0, (r.error_code, r.error_message)
    return {c.name: c for c in r.configs}


def incremental_raw(bootstrap: str, resources: list, validate_only: bool = False) -> list[tuple[int, str | None]]:
    R = IncrementalAlterConfigsRequest.AlterConfigsResource
    req = IncrementalAlterConfigsRequest(version=1, validate_only=validate_only, resources=[
        R(resource_type=t, resource_name=n, configs=[R.AlterableConfig(name=k, config_operation=op, value=v)
                                                      for k, op, v in ops])
        for t, n, ops in resources])
    return [(r.error_code, r.error_message) for r in call(bootstrap, req, 1).responses]


def legacy_raw(bootstrap: str, resources: list, validate_only: bool = False, version: int = 2):
    R = AlterConfigsRequest.AlterConfigsResource
    req = AlterConfigsRequest(version=version, validate_only=validate_only, resources=[
        R(resource_type=t, resource_name=n, configs=[R.AlterableConfig(name=k, value=v) for k, v in cfg])
        for t, n, cfg in resources])
    return [(r.error_code, r.error_message) for r in call(bootstrap, req, version).responses]


def produce_one(bootstrap: str, topic: str, key: bytes | None, value: bytes, acks: str = "all"):
    """(error or None, message) of one record produced with librdkafka."""
    p = Producer({"bootstrap.servers": bootstrap, "acks": acks, "message.timeout.ms": 15000,
                  "enable.idempotence": False, "linger.ms": 0})
    out: list = []
    p.produce(topic, key=key, value=value, on_delivery=lambda err, msg: out.append((err, msg)))
    assert p.flush(30) == 0
    return out[0]


def consume_timestamps(bootstrap: str, topic: str, n: int) -> list[tuple[int, int]]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": unique("ts"), "enable.auto.commit": False})
    try:
        c.assign([TopicPartition(topic, 0, 0)])
        got: list = []
        deadline = time.monotonic() + 30
        while len(got) < n and time.monotonic() < deadline:
            m = c.poll(1.0)
            if m is not None and m.error() is None:
                got.append(m.timestamp())
        return got
    finally:
        c.close()


# ---- kafka-python ------------------------------------------------------------------------------


def test_kafka_python_describe_alter_errors_and_restart(kcoord_factory, tmp_path):
    srv = kcoord_factory({"log.retention.hours": "100"})
    topic = unique("kpcfg")
    admin = kp_admin(srv.bootstrap)
    try:
        admin.create_topics([KPNewTopic(topic, 2, 1, topic_configs={"retention.ms": "60000",
                                                                     "cleanup.policy": "compact"})])
        got = admin.describe_configs([KPResource(ConfigResourceType.TOPIC, topic)], include_synonyms=True,
                                     config_filter="all")["topic"][topic]
        assert got["retention.ms"]["value"] == "60000"
        assert got["retention.ms"]["config_source"] == "DYNAMIC_TOPIC_CONFIG"
        assert got["segment.bytes"]["config_source"] == "DEFAULT_CONFIG"
        assert got["cleanup.policy"]["config_type"] == "LIST"
        assert [s["name"] for s in got["cleanup.policy"]["synonyms"]] == ["cleanup.policy", "log.cleanup.policy"]
        assert len(got) == 36

        # incremental (what kafka-python picks on a broker that has it)
        res = admin.alter_configs([KPResource(ConfigResourceType.TOPIC, topic, configs={
            "retention.ms": "120000", "cleanup.policy": ("APPEND", "delete")})])
        assert res == {"topic": {topic: "OK"}}
        # legacy AlterConfigs replaces the topic's whole map: kafka-python sends the other
        # modified configs along (read-modify-write)
        res = admin.alter_configs([KPResource(ConfigResourceType.TOPIC, topic, configs={"max.message.bytes": "5000"})],
                                  incremental=False, raise_on_unknown=False)
        assert res == {"topic": {topic: "OK"}}
        modified = admin.describe_configs([KPResource(ConfigResourceType.TOPIC, topic)])["topic"][topic]
        assert {k: v["value"] for k, v in modified.items()} == {
            "max.message.bytes": "5000", "retention.ms": "120000", "cleanup.policy": "compact,delete"}

        # errors, as Kafka words them
        res = admin.alter_configs([KPResource(ConfigResourceType.TOPIC, topic, configs={"retention.ms": "soon"})],
                                  raise_on_unknown=False)
        assert "InvalidConfigurationError" in res["topic"][topic]
        assert "Invalid value soon for configuration retention.ms: Not a number of type LONG" in res["topic"][topic]
        res = admin.alter_configs([KPResource(ConfigResourceType.TOPIC, "no-such-topic",
                                              configs={"retention.ms": "1"})], raise_on_unknown=False)
        assert "UnknownTopicOrPartition" in res["topic"]["no-such-topic"]
        res = admin.alter_configs([KPResource(ConfigResourceType.TOPIC, topic, configs={"retention.ms": "1"})],
                                  validate_only=True)
        assert res == {"topic": {topic: "OK"}}

        # the broker: a cluster-wide default and this node's own value
        res = admin.alter_configs([KPResource(ConfigResourceType.BROKER, "1", configs={"log.retention.ms": "777000"})],
                                  raise_on_unknown=False)
        assert res == {"broker": {"1": "OK"}}
        res = admin.alter_configs([KPResource(ConfigResourceType.BROKER, "1", configs={"log.dirs": "/elsewhere"})],
                                  raise_on_unknown=False)
        assert "InvalidRequest" in res["broker"]["1"] and "Cannot update these configs dynamically" in res["broker"]["1"]
        brokers = admin.describe_configs([KPResource(ConfigResourceType.BROKER, "1")], include_synonyms=True,
                                         config_filter="all")["broker"]["1"]
        assert brokers["log.retention.ms"]["value"] == "777000"
        assert brokers["log.retention.ms"]["config_source"] == "DYNAMIC_BROKER_CONFIG"
        assert brokers["log.retention.hours"]["config_source"] == "STATIC_BROKER_CONFIG"
        assert brokers["log.dirs"]["read_only"] is True
        other = admin.describe_configs([KPResource(ConfigResourceType.TOPIC, topic)], config_filter="all")
        assert other["topic"][topic]["retention.ms"]["value"] == "120000"
    finally:
        admin.close()

    srv.restart()
    topic_cfg = raw_configs(srv.bootstrap, TOPIC, topic)
    assert topic_cfg["max.message.bytes"].value == "5000" and topic_cfg["retention.ms"].value == "120000"
    assert topic_cfg["cleanup.policy"].value == "compact,delete"
    broker_cfg = raw_configs(srv.bootstrap, BROKER, "1", ["log.retention.ms"])
    assert broker_cfg["log.retention.ms"].value == "777000"
    assert broker_cfg["log.retention.ms"].config_source == 2  # DYNAMIC_BROKER_CONFIG
    assert (Path(srv.log_dir) / "kcoord-broker-configs.json").exists()


# ---- confluent-kafka ---------------------------------------------------------------------------


@pytest.mark.filterwarnings("ignore:alter_configs has been deprecated")
def test_confluent_admin_configs(kcoord_factory):
    srv = kcoord_factory()
    admin = AdminClient({"bootstrap.servers": srv.bootstrap})
    topic = unique("ckcfg")
    fs = admin.create_topics([NewTopic(topic, 3, 1, config={"segment.bytes": "1048576"})])
    fs[topic].result(30)
    res = ConfigResource(ResourceType.TOPIC, topic)
    got = admin.describe_configs([res])[res].result(30)
    assert got["segment.bytes"].value == "1048576" and got["segment.bytes"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    assert got["retention.ms"].value == "604800000" and got["retention.ms"].is_default

    inc = ConfigResource(ResourceType.TOPIC, topic, incremental_configs=[
        ConfigEntry("cleanup.policy", "compact", incremental_operation=AlterConfigOpType.APPEND),
        ConfigEntry("segment.bytes", None, incremental_operation=AlterConfigOpType.DELETE),
        ConfigEntry("message.timestamp.type", "LogAppendTime", incremental_operation=AlterConfigOpType.SET)])
    admin.incremental_alter_configs([inc])[inc].result(30)
    got = admin.describe_configs([res])[res].result(30)
    assert got["cleanup.policy"].value == "delete,compact"
    assert got["segment.bytes"].value == "1073741824" and got["segment.bytes"].is_default
    sub = ConfigResource(ResourceType.TOPIC, topic, incremental_configs=[
        ConfigEntry("cleanup.policy", "delete", incremental_operation=AlterConfigOpType.SUBTRACT)])
    admin.incremental_alter_configs([sub])[sub].result(30)
    assert admin.describe_configs([res])[res].result(30)["cleanup.policy"].value == "compact"

    # APPEND to a config that is not a list; a bad value; validate_only changes nothing
    bad = ConfigResource(ResourceType.TOPIC, topic, incremental_configs=[
        ConfigEntry("retention.ms", "5", incremental_operation=AlterConfigOpType.APPEND)])
    with pytest.raises(KafkaException) as e:
        admin.incremental_alter_configs([bad])[bad].result(30)
    assert e.value.args[0].name() == "INVALID_CONFIG"
    assert "Can't APPEND to key retention.ms because its type is not LIST." in e.value.args[0].str()
    legacy = ConfigResource(ResourceType.TOPIC, topic, set_config={"min.cleanable.dirty.ratio": "2"})
    with pytest.raises(KafkaException) as e:
        admin.alter_configs([legacy])[legacy].result(30)
    assert "Value must be no more than 1" in e.value.args[0].str()
    dry = ConfigResource(ResourceType.TOPIC, topic, set_config={"retention.ms": "1000"})
    admin.alter_configs([dry], validate_only=True)[dry].result(30)
    assert admin.describe_configs([res])[res].result(30)["message.timestamp.type"].value == "LogAppendTime"
    missing = ConfigResource(ResourceType.TOPIC, unique("missing"))
    with pytest.raises(KafkaException) as e:
        admin.describe_configs([missing])[missing].result(30)
    assert e.value.args[0].name() == "UNKNOWN_TOPIC_OR_PART"

    # the broker, per node and cluster-wide
    broker = ConfigResource(ResourceType.BROKER, "1")
    b = admin.describe_configs([broker])[broker].result(30)
    assert b["message.max.bytes"].value == "1048588" and b["listeners"].is_read_only
    # (librdkafka refuses an empty broker name, so the cluster default goes over the wire)
    assert incremental_raw(srv.bootstrap, [(BROKER, "", [("log.cleanup.policy", APPEND, "compact")])]) == [(0, None)]
    node = ConfigResource(ResourceType.BROKER, "1", incremental_configs=[
        ConfigEntry("log.retention.bytes", "1000000", incremental_operation=AlterConfigOpType.SET)])
    admin.incremental_alter_configs([node])[node].result(30)
    b = admin.describe_configs([broker])[broker].result(30)
    assert b["log.retention.bytes"].value == "1000000"
    assert b["log.retention.bytes"].source == ConfigSource.DYNAMIC_BROKER_CONFIG.value
    newer = unique("ckcfg2")
    admin.create_topics([NewTopic(newer, 1, 1)])[newer].result(30)
    r2 = ConfigResource(ResourceType.TOPIC, newer)
    cp = admin.describe_configs([r2])[r2].result(30)["cleanup.policy"]
    assert cp.value == "delete,compact" and cp.source == ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value

    srv.restart()
    admin = AdminClient({"bootstrap.servers": srv.bootstrap})
    got = admin.describe_configs([res])[res].result(30)
    assert got["cleanup.policy"].value == "compact" and got["message.timestamp.type"].value == "LogAppendTime"
    cp = admin.describe_configs([r2])[r2].result(30)["cleanup.policy"]
    assert cp.value == "delete,compact" and cp.source == ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value


# ---- Java AdminClient --------------------------------------------------------------------------


def admin_tool(bootstrap: str, *steps: list[str], timeout: float = 120):
    """Run AdminTool steps in one JVM; returns its JSON lines."""
    args: list[str] = [bootstrap]
    for i, s in enumerate(steps):
        if i:
            args.append("--")
        args.extend(s)
    return run_java("AdminTool", *args, timeout=timeout).records()


@pytest.mark.java
def test_java_admin_configs(kcoord_factory):
    srv = kcoord_factory()
    topic = unique("jcfg")
    out = admin_tool(srv.bootstrap,
                     ["create", topic, "2", "retention.ms=90000", "min.insync.replicas=2"],
                     ["describe-configs", "topic", topic, "synonyms", "docs"],
                     ["incremental", "topic", topic, "set:retention.ms=100000", "append:cleanup.policy=compact",
                      "delete:min.insync.replicas"],
                     ["incremental", "topic", topic, "validate", "set:retention.ms=5"],
                     ["incremental", "topic", topic, "set:retention.ms=-5"],
                     ["incremental", "topic", unique("nope"), "set:retention.ms=5"],
                     ["legacy", "topic", topic, "retention.ms=110000", "cleanup.policy=compact"],
                     ["describe-configs", "topic", topic, "synonyms"],
                     ["incremental", "broker", "", "set:message.max.bytes=2000000"],
                     ["incremental", "broker", "1", "set:log.retention.bytes=1000000"],
                     ["incremental", "broker", "", "set:advertised.listeners=PLAINTEXT://127.0.0.1:1"],
                     ["incremental", "broker", "1", "set:num.partitions=3"],
                     ["describe-configs", "broker", "1", "synonyms"],
                     ["incremental", "broker-logger", "1", "set:kcoord.dispatch=DEBUG"],
                     ["incremental", "broker-logger", "1", "set:kcoord.dispatch=LOUD"],
                     ["describe-configs", "broker-logger", "1"])
    kinds = [r["kind"] if r["kind"] != "error" else ("error", r["step"], r["error"]) for r in out]
    assert kinds == ["create", "describe-configs", "incremental", "incremental",
                     ("error", "incremental", "InvalidConfigurationException"),
                     ("error", "incremental", "UnknownTopicOrPartitionException"),
                     "legacy", "describe-configs", "incremental", "incremental",
                     ("error", "incremental", "InvalidRequestException"),
                     ("error", "incremental", "InvalidRequestException"),
                     "describe-configs", "incremental",
                     ("error", "incremental", "InvalidConfigurationException"),
                     "describe-configs", "done"], out
    created = out[0]["configs"]
    assert created["retention.ms"] == ["90000", "DYNAMIC_TOPIC_CONFIG"] and created["segment.ms"][1] == "DEFAULT_CONFIG"
    first = out[1]["entries"]
    assert first["min.insync.replicas"]["value"] == "2"
    assert first["retention.ms"]["type"] == "LONG" and first["retention.ms"]["doc"]
    assert first["retention.ms"]["synonyms"][0] == ["retention.ms", "90000", "DYNAMIC_TOPIC_CONFIG"]
    assert "Value must be at least -1" in out[4]["message"]
    assert "Cannot update these configs dynamically: Set(advertised.listeners)" in out[10]["message"]
    assert "Cannot update these configs dynamically: Set(num.partitions)" in out[11]["message"]
    assert "Valid log levels are DEBUG, ERROR, FATAL, INFO, TRACE, WARN" in out[14]["message"]
    after = out[7]["entries"]
    assert after["retention.ms"]["value"] == "110000"
    assert after["min.insync.replicas"]["source"] == "DEFAULT_CONFIG"  # legacy replaced the whole map
    broker = out[12]["entries"]
    assert broker["message.max.bytes"]["value"] == "2000000"
    assert broker["message.max.bytes"]["source"] == "DYNAMIC_DEFAULT_BROKER_CONFIG"
    assert broker["log.retention.bytes"]["source"] == "DYNAMIC_BROKER_CONFIG"
    assert broker["advertised.listeners"]["read_only"] is True
    assert broker["num.partitions"]["read_only"] is True
    assert out[15]["entries"]["kcoord.dispatch"]["value"] == "DEBUG"

    srv.restart()
    again = admin_tool(srv.bootstrap, ["describe-configs", "topic", topic],
                       ["describe-configs", "broker", "1"], ["describe-configs", "broker-logger", "1"])
    assert again[0]["entries"]["retention.ms"]["value"] == "110000"
    assert again[0]["entries"]["cleanup.policy"]["value"] == "compact"
    assert again[1]["entries"]["message.max.bytes"]["value"] == "2000000"
    # log levels are not kept across a restart, as in Kafka
    assert again[2]["entries"].get("kcoord.dispatch", {}).get("value", "INFO") == "INFO"


# ---- the configs kcoord honours take effect at once --------------------------------------------


def test_topic_configs_take_effect_at_once(kcoord_factory):
    srv = kcoord_factory({"log.retention.check.interval.ms": "300"})
    b = srv.bootstrap
    admin = AdminClient({"bootstrap.servers": b})
    topic = unique("effect")
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    res = ConfigResource(ResourceType.TOPIC, topic)

    def set_configs(**kv):
        r = ConfigResource(ResourceType.TOPIC, topic, incremental_configs=[
            ConfigEntry(k.replace("_", "."), v, incremental_operation=AlterConfigOpType.SET) for k, v in kv.items()])
        admin.incremental_alter_configs([r])[r].result(30)

    err, _ = produce_one(b, topic, b"k", b"x" * 4000)
    assert err is None
    set_configs(max_message_bytes="1000")
    err, _ = produce_one(b, topic, b"k", b"x" * 4000)
    assert err is not None and err.name() == "MSG_SIZE_TOO_LARGE"

    set_configs(message_timestamp_type="LogAppendTime", max_message_bytes="100000")
    err, _ = produce_one(b, topic, b"k", b"v")
    assert err is None
    assert consume_timestamps(b, topic, 2)[-1][0] == TIMESTAMP_LOG_APPEND_TIME

    set_configs(cleanup_policy="compact")
    err, _ = produce_one(b, topic, None, b"no key")
    assert err is not None and err.name() == "INVALID_RECORD"
    set_configs(cleanup_policy="delete", min_insync_replicas="2")
    err, _ = produce_one(b, topic, None, b"acks=all with min.insync.replicas=2 on one broker", acks="all")
    assert err is None  # Kafka 3.9 caps the effective minimum at the replica count (1)

    # segment.bytes: the next appends roll small segments; retention.ms then deletes the old ones
    set_configs(segment_bytes="1024")
    for i in range(6):
        assert produce_one(b, topic, b"k%d" % i, b"y" * 900)[0] is None
    segments = sorted(Path(srv.log_dir, f"{topic}-0").glob("*.log"))
    assert len(segments) >= 5, segments
    set_configs(retention_ms="1")
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        lo = admin.list_offsets({TopicPartition(topic, 0): OffsetSpec.earliest()})
        earliest = lo[TopicPartition(topic, 0)].result(30).offset
        if earliest > 0 and len(list(Path(srv.log_dir, f"{topic}-0").glob("*.log"))) == 1:
            break
        time.sleep(0.2)
    assert earliest > 0, "retention.ms=1 did not delete the closed segments"
    assert admin.describe_configs([res])[res].result(30)["retention.ms"].value == "1"


def test_segment_ms_rolls_the_active_segment_as_kafka_does(kcoord_factory):
    """segment.ms rolls at the first append whose records lie segment.ms after the segment's
    first batch (Kafka's LogSegment.shouldRoll, by record timestamps); set at creation or later."""
    srv = kcoord_factory()
    b = srv.bootstrap
    admin = AdminClient({"bootstrap.servers": b})
    topic = unique("segms")
    admin.create_topics([NewTopic(topic, 1, 1, config={"segment.ms": "60000"})])[topic].result(30)
    part = Path(srv.log_dir, f"{topic}-0")
    t0 = int(time.time() * 1000) - 600_000
    p = Producer({"bootstrap.servers": b, "linger.ms": 0, "enable.idempotence": False})

    def produce_at(ts: int) -> None:
        errs: list = []
        p.produce(topic, key=b"k", value=b"v", timestamp=ts, on_delivery=lambda err, _: errs.append(err))
        assert p.flush(30) == 0 and errs == [None]

    def segments() -> list[str]:
        return sorted(f.name for f in part.glob("*.log"))

    produce_at(t0)
    produce_at(t0 + 60_000)                            # exactly segment.ms after the first: no roll
    assert segments() == ["00000000000000000000.log"]
    produce_at(t0 + 60_001)
    assert segments() == ["00000000000000000000.log", "00000000000000000002.log"]
    r = ConfigResource(ResourceType.TOPIC, topic, incremental_configs=[
        ConfigEntry("segment.ms", "1000", incremental_operation=AlterConfigOpType.SET)])
    admin.incremental_alter_configs([r])[r].result(30)
    produce_at(t0 + 61_002)                            # the new value applies to the open log
    assert segments()[-1] == "00000000000000000003.log"


def test_dynamic_broker_defaults_take_effect_at_once(kcoord_factory):
    srv = kcoord_factory()
    b = srv.bootstrap
    topic = unique("dyn")
    admin = AdminClient({"bootstrap.servers": b})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    assert produce_one(b, topic, b"k", b"x" * 3000)[0] is None
    # cluster default message.max.bytes and log.message.timestamp.type reach every topic without
    # its own value at once
    assert incremental_raw(b, [(BROKER, "", [("message.max.bytes", SET, "2000"),
                                             ("log.message.timestamp.type", SET, "LogAppendTime")])]) == [(0, None)]
    err, _ = produce_one(b, topic, b"k", b"x" * 3000)
    assert err is not None and err.name() == "MSG_SIZE_TOO_LARGE"
    assert produce_one(b, topic, b"k", b"small")[0] is None
    assert consume_timestamps(b, topic, 2)[-1][0] == TIMESTAMP_LOG_APPEND_TIME
    cfg = raw_configs(b, TOPIC, topic, ["max.message.bytes"])["max.message.bytes"]
    assert cfg.value == "2000" and cfg.config_source == 3  # DYNAMIC_DEFAULT_BROKER_CONFIG
    # max.connections (cluster-wide) applies to the next connection
    assert incremental_raw(b, [(BROKER, "", [("max.connections", SET, "0")])]) == [(0, None)]
    with pytest.raises((AssertionError, OSError)):
        describe_raw(b, TOPIC, topic)
    srv.restart()  # the setting is kept: the first connection after the restart is refused too
    with pytest.raises((AssertionError, OSError)):
        describe_raw(b, TOPIC, topic)


# ---- raw requests: Kafka's answers to bad input ------------------------------------------------


def test_error_paths_over_the_wire(kcoord):
    b = kcoord.bootstrap
    topic = unique("raw")
    admin = kp_admin(b)
    try:
        admin.create_topics([KPNewTopic(topic, 1, 1)])
    finally:
        admin.close()

    # DescribeConfigs: every version, unknown and invalid topics, other broker ids, BROKER_LOGGER
    for v in range(5):
        r = describe_raw(b, TOPIC, topic, ["retention.ms", "cleanup.policy"], version=v)
        assert r.error_code == 0 and sorted(c.name for c in r.configs) == ["cleanup.policy", "retention.ms"]
        if v == 0:
            assert all(c.is_default for c in r.configs)
        else:
            assert {c.config_source for c in r.configs} == {5}
    assert describe_raw(b, TOPIC, "no-such-topic").error_code == 3
    assert describe_raw(b, TOPIC, "bad name!").error_code == 17
    r = describe_raw(b, BROKER, "2")
    assert (r.error_code, r.error_message) == (42, "Unexpected broker id, expected 1 or empty string, but received 2")
    assert describe_raw(b, BROKER, "one").error_message == "Broker id must be an integer, but it is: one"
    assert describe_raw(b, BROKER_LOGGER, "").error_message == "Broker id must not be empty"
    assert describe_raw(b, 1, "x").error_code == 42
    assert describe_raw(b, BROKER, "").configs == []  # no cluster-wide dynamic configs yet
    loggers = raw_configs(b, BROKER_LOGGER, "1")
    assert loggers["root"].value == "INFO" and loggers["root"].config_source == 6

    # IncrementalAlterConfigs
    assert incremental_raw(b, [(TOPIC, topic, [("retention.ms", SET, "1")]),
                               (TOPIC, topic, [("retention.ms", SET, "2")])]) == \
        [(42, "Each resource must appear at most once.")] * 2
    assert incremental_raw(b, [(TOPIC, topic, [("retention.ms", SET, "1"), ("retention.ms", DELETE, None)])]) == \
        [(42, "Error due to duplicate config keys")]
    assert incremental_raw(b, [(TOPIC, topic, [("retention.ms", SET, None)])]) == \
        [(42, "Null value not supported for : retention.ms")]
    assert incremental_raw(b, [(TOPIC, topic, [("retention.ms", 9, "1")])]) == [(42, "Unknown operations type 9")]
    assert incremental_raw(b, [(TOPIC, topic, [("no.such.config", SET, "1")])]) == \
        [(40, "Unknown topic config name: no.such.config")]
    assert incremental_raw(b, [(TOPIC, "", [("retention.ms", SET, "1")])]) == \
        [(42, "Default topic resources are not allowed.")]
    assert incremental_raw(b, [(TOPIC, "no-such-topic", [("retention.ms", SET, "1")])]) == \
        [(3, "The topic 'no-such-topic' does not exist.")]
    assert incremental_raw(b, [(BROKER, "7", [("message.max.bytes", SET, "1")])]) == \
        [(42, "Unexpected broker id, expected 1, but received 7")]
    assert incremental_raw(b, [(BROKER, "1", [("message.max.bytes", SET, "big")])]) == \
        [(42, "Invalid value big for configuration message.max.bytes: Not a number of type INT")]
    assert incremental_raw(b, [(BROKER, "1", [("message.max.bytes", APPEND, "1")])]) == \
        [(40, "Config value append is not allowed for config key: message.max.bytes")]
    assert incremental_raw(b, [(BROKER_LOGGER, "1", [("root", DELETE, None)])]) == \
        [(42, "Removing the log level of the root logger is not allowed")]
    assert incremental_raw(b, [(BROKER_LOGGER, "1", [("no.such.logger", SET, "INFO")])]) == \
        [(40, "Logger no.such.logger does not exist!")]
    assert incremental_raw(b, [(BROKER_LOGGER, "1", [("root", APPEND, "INFO")])]) == \
        [(42, "APPEND operation is not allowed for the BROKER_LOGGER resource")]
    assert incremental_raw(b, [(99, "x", [("a", SET, "1")])]) == [(42, "Unknown resource type 99")]
    # a custom (unknown) broker config is accepted at the cluster level, as Kafka does
    assert incremental_raw(b, [(BROKER, "", [("my.plugin.setting", SET, "on")])]) == [(0, None)]
    custom = raw_configs(b, BROKER, "", None)["my.plugin.setting"]
    assert custom.value is None and custom.is_sensitive  # unknown type: treated as sensitive

    # AlterConfigs (legacy): no BROKER_LOGGER, nulls refused, validate_only changes nothing
    assert legacy_raw(b, [(BROKER_LOGGER, "1", [("root", "DEBUG")])]) == [(42, "Unknown resource type 8")]
    assert legacy_raw(b, [(TOPIC, topic, [("retention.ms", None)])]) == \
        [(42, "Null value not supported for : retention.ms")]
    for v in range(3):
        assert legacy_raw(b, [(TOPIC, topic, [("retention.ms", "4242")])], validate_only=True, version=v) == \
            [(0, None)]
    assert raw_configs(b, TOPIC, topic)["retention.ms"].value == "604800000"
