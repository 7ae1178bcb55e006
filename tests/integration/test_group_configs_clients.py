"""Group configs (the GROUP config resource, type 32) against a kcoord process: raw
DescribeConfigs / IncrementalAlterConfigs / AlterConfigs for Kafka's codes and messages, the
Java Admin of kafka-clients 4.3 (tests/compat/java4/GroupConfigTool.java), confluent-kafka's
AdminClient, kafka-python's KafkaAdminClient, `kafka-configs.sh --entity-type groups`; the configs kept across a SIGKILL and
restart; and a KIP-848 group's heartbeat interval and session timeout taken from them on the
next heartbeat (raw heartbeats, and a confluent-kafka group.protocol=consumer member SIGKILLed);
deleting the group leaves its configs, as in Kafka."""
from __future__ import annotations

import json
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from clientlib import compile_java4, java4_classpath, run
from conftest import call, unique
from kafka.protocol.admin import AlterConfigsRequest, DescribeConfigsRequest, IncrementalAlterConfigsRequest
from kafka.protocol.admin.groups import DeleteGroupsRequest

from kcoord.protocol.messages import ConsumerGroupDescribeRequest, ConsumerGroupHeartbeatRequest

pytestmark = pytest.mark.integration

GROUP = 32
SET, DELETE, APPEND = 0, 1, 2
INVALID_CONFIG, INVALID_REQUEST = 40, 42
GROUP_CONFIG, DEFAULT_CONFIG = 8, 5
BIN = Path(__file__).resolve().parents[2] / "bin"
# lower bounds below Kafka's so that a test can see a member expire and a short interval
SERVER = {"group.consumer.min.session.timeout.ms": "2000", "group.consumer.min.heartbeat.interval.ms": "200",
          "group.consumer.heartbeat.interval.ms": "1000"}


def incremental(bootstrap: str, name: str, ops: list, validate_only: bool = False) -> tuple[int, str | None]:
    R = IncrementalAlterConfigsRequest.AlterConfigsResource
    req = IncrementalAlterConfigsRequest(version=1, validate_only=validate_only, resources=[
        R(resource_type=GROUP, resource_name=name,
          configs=[R.AlterableConfig(name=k, config_operation=op, value=v) for k, op, v in ops])])
    r = call(bootstrap, req, 1).responses[0]
    return r.error_code, r.error_message


def legacy(bootstrap: str, name: str, configs: dict) -> tuple[int, str | None]:
    R = AlterConfigsRequest.AlterConfigsResource
    req = AlterConfigsRequest(version=2, validate_only=False, resources=[
        R(resource_type=GROUP, resource_name=name,
          configs=[R.AlterableConfig(name=k, value=v) for k, v in configs.items()])])
    r = call(bootstrap, req, 2).responses[0]
    return r.error_code, r.error_message


def describe(bootstrap: str, name: str, keys=None):
    R = DescribeConfigsRequest
    return call(bootstrap, R(version=4, include_synonyms=True, include_documentation=True, resources=[
        R.DescribeConfigsResource(resource_type=GROUP, resource_name=name, configuration_keys=keys)]), 4).results[0]


def configs(bootstrap: str, name: str) -> dict:
    r = describe(bootstrap, name)
    assert r.error_code == 0, (r.error_code, r.error_message)
    return {c.name: c for c in r.configs}


def test_wire_codes_messages_sources_and_restart(kcoord_factory):
    srv = kcoord_factory(SERVER)
    b = srv.bootstrap
    g = unique("gc")  # no group of this id exists: Kafka keeps its configs all the same
    assert incremental(b, g, [("consumer.session.timeout.ms", SET, "50000"),
                              ("share.auto.offset.reset", SET, "earliest")]) == (0, None)
    got = configs(b, g)
    st = got["consumer.session.timeout.ms"]
    assert (st.value, st.config_source, st.read_only, st.is_sensitive) == ("50000", GROUP_CONFIG, False, False)
    assert st.synonyms[0].source == GROUP_CONFIG and st.documentation
    hb = got["consumer.heartbeat.interval.ms"]
    assert (hb.value, hb.config_source) == ("1000", DEFAULT_CONFIG)  # the broker's group.consumer.* value
    assert got["share.auto.offset.reset"].value == "earliest"
    assert got["share.isolation.level"].value == "read_uncommitted"
    assert {c.name for c in describe(b, g, ["share.isolation.level"]).configs} == {"share.isolation.level"}

    assert incremental(b, g, [("consumer.foo", SET, "1")]) == (INVALID_CONFIG, "Unknown group config name: consumer.foo")
    assert incremental(b, g, [("share.isolation.level", SET, "dirty")]) == (
        INVALID_CONFIG, "Invalid value dirty for configuration share.isolation.level: String must be one of: "
                        "read_committed, read_uncommitted")
    assert incremental(b, g, [("consumer.session.timeout.ms", SET, "60001")]) == (
        INVALID_CONFIG, "consumer.session.timeout.ms must be less than or equal to group.consumer.max.session.timeout.ms")
    assert incremental(b, g, [("consumer.heartbeat.interval.ms", SET, "100")]) == (
        INVALID_CONFIG, "consumer.heartbeat.interval.ms must be greater than or equal to "
                        "group.consumer.min.heartbeat.interval.ms")
    assert incremental(b, g, [("consumer.session.timeout.ms", APPEND, "1")])[0] == INVALID_CONFIG
    assert incremental(b, "", [("consumer.session.timeout.ms", SET, "50000")]) == (
        INVALID_REQUEST, "Default group resources are not allowed.")
    empty = describe(b, "")
    assert (empty.error_code, empty.error_message) == (INVALID_REQUEST, "Group name must not be empty")
    # validate_only changes nothing; a failed change leaves the old values
    assert incremental(b, g, [("share.isolation.level", SET, "read_committed")], validate_only=True) == (0, None)
    assert configs(b, g)["share.isolation.level"].config_source == DEFAULT_CONFIG
    assert configs(b, g)["consumer.session.timeout.ms"].value == "50000"
    # AlterConfigs replaces the whole map
    assert legacy(b, g, {"share.isolation.level": "read_committed", "consumer.session.timeout.ms": "55000"}) == (0, None)
    got = configs(b, g)
    assert got["share.auto.offset.reset"].config_source == DEFAULT_CONFIG
    assert (got["consumer.session.timeout.ms"].value, got["share.isolation.level"].value) == ("55000", "read_committed")

    srv.kill()  # acknowledged means fsynced: a SIGKILL loses nothing
    srv.restart()
    got = configs(srv.bootstrap, g)
    assert (got["consumer.session.timeout.ms"].value, got["consumer.session.timeout.ms"].config_source) == (
        "55000", GROUP_CONFIG)
    assert got["share.isolation.level"].value == "read_committed"
    assert incremental(srv.bootstrap, g, [("share.isolation.level", DELETE, None)]) == (0, None)
    assert configs(srv.bootstrap, g)["share.isolation.level"].config_source == DEFAULT_CONFIG


def heartbeat(b: str, group: str, member: str, epoch: int, topics: list[str] | None):
    return call(b, ConsumerGroupHeartbeatRequest(
        version=0, group_id=group, member_id=member, member_epoch=epoch, instance_id=None, rack_id=None,
        rebalance_timeout_ms=30000 if epoch == 0 else -1, subscribed_topic_names=topics, server_assignor=None,
        topic_partitions=[] if epoch == 0 else None), 0)


def test_a_consumer_groups_heartbeat_interval_and_session_timeout_take_effect(kcoord_factory):
    srv = kcoord_factory(SERVER)
    b = srv.bootstrap
    g, member = unique("gc-live"), uuid.uuid4().hex[:22]
    r = heartbeat(b, g, member, 0, [unique("t")])
    assert r.error_code == 0 and r.heartbeat_interval_ms == 1000  # the broker's interval
    epoch = r.member_epoch
    assert incremental(b, g, [("consumer.heartbeat.interval.ms", SET, "2500")]) == (0, None)
    r = heartbeat(b, g, member, epoch, None)  # the next heartbeat answer carries the new interval
    assert r.error_code == 0 and r.heartbeat_interval_ms == 2500
    assert incremental(b, g, [("consumer.heartbeat.interval.ms", DELETE, None)]) == (0, None)
    assert heartbeat(b, g, member, epoch, None).heartbeat_interval_ms == 1000

    # the session timeout: a member that stops heartbeating is gone after the group's own
    # timeout (3 s), far sooner than the broker's 45 s
    assert incremental(b, g, [("consumer.session.timeout.ms", SET, "3000")]) == (0, None)
    assert heartbeat(b, g, member, epoch, None).error_code == 0  # its session restarts with 3 s
    start = time.monotonic()
    while True:
        d = call(b, ConsumerGroupDescribeRequest(version=0, group_ids=[g], include_authorized_operations=False),
                 0).groups[0]
        if not d.members:
            break
        assert time.monotonic() - start < 30, "the member outlived the group's session timeout"
        time.sleep(0.2)
    assert heartbeat(b, g, member, epoch, None).error_code == 25  # UNKNOWN_MEMBER_ID: fenced

    # deleting the group leaves its configs, as in Kafka 4.x (they are not group state)
    deleted = call(b, DeleteGroupsRequest(version=2, groups_names=[g]), 2).results
    assert [(d.group_id, d.error_code) for d in deleted] == [(g, 0)]
    assert configs(b, g)["consumer.session.timeout.ms"].config_source == GROUP_CONFIG


def test_kafka_configs_tool_groups(kcoord_factory):
    srv = kcoord_factory(SERVER)
    b = srv.bootstrap
    g = unique("gc-tool")

    def tool(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([str(BIN / "kafka-configs.sh"), "--bootstrap-server", b, *args],
                              capture_output=True, text=True, timeout=60)

    r = tool("--alter", "--entity-type", "groups", "--entity-name", g, "--add-config",
             "consumer.heartbeat.interval.ms=2000,share.auto.offset.reset=earliest")
    assert r.returncode == 0 and r.stdout.strip() == f"Completed updating config for group {g}.", r
    r = tool("--describe", "--entity-type", "groups", "--entity-name", g)
    assert r.returncode == 0, r
    assert r.stdout.splitlines() == [
        f"Dynamic configs for group {g} are:",
        "  consumer.heartbeat.interval.ms=2000 sensitive=false synonyms={DYNAMIC_GROUP_CONFIG:"
        "consumer.heartbeat.interval.ms=2000, STATIC_BROKER_CONFIG:group.consumer.heartbeat.interval.ms=1000, "
        "DEFAULT_CONFIG:group.consumer.heartbeat.interval.ms=5000}",
        "  share.auto.offset.reset=earliest sensitive=false synonyms={DYNAMIC_GROUP_CONFIG:share.auto.offset.reset=earliest}",
    ]
    every = tool("--describe", "--group", g, "--all").stdout.splitlines()
    assert every[0] == f"All configs for group {g} are:" and len(every) == 1 + 17
    r = tool("--alter", "--group", g, "--delete-config", "share.auto.offset.reset")
    assert r.returncode == 0, r
    r = tool("--alter", "--group", g, "--delete-config", "share.isolation.level")
    assert r.returncode == 1 and "Invalid config(s): share.isolation.level" in r.stderr
    r = tool("--alter", "--group", g, "--add-config", "consumer.nope=1")
    assert r.returncode == 1 and "Unknown group config name: consumer.nope" in r.stderr
    r = subprocess.run([sys.executable, "-m", "kcoord.server", "configs", "--bootstrap-server", b, "--describe",
                        "--entity-type", "groups", "--entity-name", g], capture_output=True, text=True, timeout=60,
                       cwd=Path(__file__).resolve().parents[2])
    assert r.stdout.splitlines()[1].startswith("  consumer.heartbeat.interval.ms=2000 "), r
    assert len(r.stdout.splitlines()) == 2


def test_confluent_admin_group_configs(kcoord_factory):
    from confluent_kafka.admin import (
        AdminClient,
        AlterConfigOpType,
        ConfigEntry,
        ConfigResource,
        ResourceType,
    )

    srv = kcoord_factory(SERVER)
    admin = AdminClient({"bootstrap.servers": srv.bootstrap})
    g = unique("gc-ck")
    res = ConfigResource(ResourceType.GROUP, g, incremental_configs=[
        ConfigEntry("consumer.session.timeout.ms", "40000", incremental_operation=AlterConfigOpType.SET)])
    admin.incremental_alter_configs([res])[res].result(30)
    got = admin.describe_configs([ConfigResource(ResourceType.GROUP, g)])
    entries = next(iter(got.values())).result(30)
    assert entries["consumer.session.timeout.ms"].value == "40000"
    assert entries["consumer.heartbeat.interval.ms"].value == "1000"


@pytest.mark.java
def test_java_admin_group_configs(kcoord_factory):
    srv = kcoord_factory(SERVER)
    g = unique("gc-java")
    compile_java4()
    steps = [["alter", g, "set:consumer.heartbeat.interval.ms=3000", "set:share.isolation.level=read_committed"],
             ["describe", g],
             ["alter", g, "set:share.record.lock.duration.ms=500"],
             ["alter", g, "set:consumer.nope=1"],
             ["alter", g, "delete:share.isolation.level"],
             ["describe", g]]
    args: list[str] = []
    for i, s in enumerate(steps):
        args += (["--"] if i else []) + s
    r = run(["java", "-Xshare:auto", "-XX:TieredStopAtLevel=1", "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
             "-Dorg.slf4j.simpleLogger.logFile=System.err", "-cp", java4_classpath(), "GroupConfigTool",
             srv.bootstrap, *args], timeout=180)
    out = [json.loads(line) for line in r.stdout.splitlines() if line.startswith("{")]
    kinds = [o["kind"] if o["kind"] != "error" else ("error", o["error"]) for o in out]
    assert kinds == ["alter", "describe", ("error", "InvalidConfigurationException"),
                     ("error", "InvalidConfigurationException"), "alter", "describe", "done"], (out, r.stderr[-3000:])
    first = out[1]["entries"]
    assert first["consumer.heartbeat.interval.ms"][:3] == ["3000", "DYNAMIC_GROUP_CONFIG", "INT"]
    assert first["consumer.heartbeat.interval.ms"][3][0] == "consumer.heartbeat.interval.ms=DYNAMIC_GROUP_CONFIG"
    assert first["share.isolation.level"][:3] == ["read_committed", "DYNAMIC_GROUP_CONFIG", "STRING"]
    assert first["consumer.session.timeout.ms"][:2] == ["45000", "DEFAULT_CONFIG"]
    assert first["share.renew.acknowledge.enable"][2] == "BOOLEAN"
    assert "Value must be at least 1000" in out[2]["message"]
    assert out[3]["message"] == "Unknown group config name: consumer.nope"
    last = out[5]["entries"]
    assert last["share.isolation.level"][:2] == ["read_uncommitted", "DEFAULT_CONFIG"]
    assert last["consumer.heartbeat.interval.ms"][0] == "3000"


def _members(b: str, g: str) -> list:
    return call(b, ConsumerGroupDescribeRequest(version=0, group_ids=[g], include_authorized_operations=False),
                0).groups[0].members


def test_a_confluent_consumer_protocol_member_expires_after_its_groups_session_timeout(kcoord_factory):
    from clientlib import python_member
    from confluent_kafka.admin import AdminClient, NewTopic

    srv = kcoord_factory(SERVER)
    b = srv.bootstrap
    topic, g = unique("gc-t"), unique("gc-ck848")
    admin = AdminClient({"bootstrap.servers": b})
    admin.create_topics([NewTopic(topic, 2, 1)])[topic].result(30)
    assert incremental(b, g, [("consumer.session.timeout.ms", SET, "3000")]) == (0, None)
    m = python_member("confluent", b, topic, g, name="ck848", group_protocol="consumer")
    try:
        deadline = time.monotonic() + 90
        while not _members(b, g):
            assert time.monotonic() < deadline, "the member never joined"
            time.sleep(0.2)
        m.kill()  # no leave: only the session timeout removes it
        killed = time.monotonic()
        while _members(b, g):
            # the broker's own session timeout is 45 s: gone well before means the group's 3 s
            assert time.monotonic() - killed < 30, "the member outlived the group's session timeout"
            time.sleep(0.2)
    finally:
        m.kill()


def test_kafka_python_admin_group_configs(kcoord_factory):
    from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient

    srv = kcoord_factory(SERVER)
    g = unique("gc-kp")
    admin = KafkaAdminClient(bootstrap_servers=srv.bootstrap, request_timeout_ms=15000)
    try:
        admin.alter_configs([ConfigResource(ConfigResourceType.GROUP, g, configs={"share.delivery.count.limit": "7"})])
        resp = admin.describe_configs([ConfigResource(ConfigResourceType.GROUP, g)], include_synonyms=True,
                                      config_filter="all")
        got = resp["group"][g]
        assert got["share.delivery.count.limit"]["value"] == "7"
        assert got["share.delivery.count.limit"]["config_source"] == "DYNAMIC_GROUP_CONFIG"
        assert got["share.isolation.level"]["config_source"] == "DEFAULT_CONFIG"
        assert len(got) == 17
    finally:
        admin.close()
