"""Group configs (server/group_configs.py): Kafka 4.3's names, types, defaults from the broker's
group.* settings, bounds and messages, sources, precedence, and durability in the dynamic-config
store (a real file in tmp_path, reloaded as a restart would)."""
from __future__ import annotations

import json

import pytest

from kcoord.server.config import Config
from kcoord.server.config_catalogue import ConfigError, ConfigSource, ConfigType
from kcoord.server.config_layers import BrokerConfigs
from kcoord.server.group.config import GroupConfig
from kcoord.server.group_configs import GROUP_CONFIGS, GroupConfigs
from kcoord.server.topics import DYNAMIC_FILE

# Kafka 4.3's GroupConfig (kafka.apache.org/43/configuration/group-configs)
KAFKA_43 = {
    "consumer.assignment.interval.ms", "consumer.heartbeat.interval.ms", "consumer.session.timeout.ms",
    "share.assignment.interval.ms", "share.auto.offset.reset", "share.delivery.count.limit",
    "share.heartbeat.interval.ms", "share.isolation.level", "share.partition.max.record.locks",
    "share.record.lock.duration.ms", "share.renew.acknowledge.enable", "share.session.timeout.ms",
    "streams.assignment.interval.ms", "streams.heartbeat.interval.ms", "streams.initial.rebalance.delay.ms",
    "streams.num.standby.replicas", "streams.session.timeout.ms",
}


def _configs(tmp_path, **given) -> tuple[GroupConfigs, BrokerConfigs]:
    store = BrokerConfigs(Config(given), tmp_path)
    store.load()
    return GroupConfigs(store), store


def _message(gc: GroupConfigs, configs: dict) -> str:
    with pytest.raises(ConfigError) as e:
        gc.check(configs)
    return str(e.value)


def test_names_types_and_kafka_defaults(tmp_path):
    gc, _ = _configs(tmp_path)
    assert set(GROUP_CONFIGS) == KAFKA_43
    assert gc.value("g", "consumer.session.timeout.ms") == 45000
    assert gc.value("g", "consumer.heartbeat.interval.ms") == 5000
    assert gc.value("g", "share.auto.offset.reset") == "latest"
    assert gc.value("g", "share.isolation.level") == "read_uncommitted"
    assert gc.value("g", "share.record.lock.duration.ms") == 30000
    assert gc.value("g", "share.delivery.count.limit") == 5
    assert gc.value("g", "share.renew.acknowledge.enable") is True
    assert gc.get("g") == {}
    assert GROUP_CONFIGS["share.renew.acknowledge.enable"].key.type == ConfigType.BOOLEAN


def test_defaults_come_from_the_broker_settings(tmp_path):
    gc, _ = _configs(tmp_path, **{"group.consumer.heartbeat.interval.ms": "6000",
                                  "group.share.record.lock.duration.ms": "20000"})
    assert gc.value("g", "consumer.heartbeat.interval.ms") == 6000
    assert gc.value("g", "share.record.lock.duration.ms") == 20000  # a setting kcoord only carries as text


def test_set_values_take_precedence_and_are_kept_across_a_reload(tmp_path):
    gc, store = _configs(tmp_path)
    gc.replace("g", gc.check({"consumer.session.timeout.ms": "50000", "share.auto.offset.reset": "earliest"}))
    assert gc.get("g") == {"consumer.session.timeout.ms": "50000", "share.auto.offset.reset": "earliest"}
    assert gc.value("g", "consumer.session.timeout.ms") == 50000
    assert gc.value("other", "consumer.session.timeout.ms") == 45000
    on_disk = json.loads((tmp_path / DYNAMIC_FILE).read_text())
    assert on_disk["groups"] == {"g": {"consumer.session.timeout.ms": "50000", "share.auto.offset.reset": "earliest"}}
    again, _ = _configs(tmp_path)  # a restart
    assert again.value("g", "share.auto.offset.reset") == "earliest"
    again.replace("g", {})
    assert "groups" not in json.loads((tmp_path / DYNAMIC_FILE).read_text())


def test_unknown_name_and_values_of_the_wrong_type(tmp_path):
    gc, _ = _configs(tmp_path)
    assert _message(gc, {"consumer.foo": "1"}) == "Unknown group config name: consumer.foo"
    assert _message(gc, {"consumer.session.timeout.ms": "abc"}) == (
        "Invalid value abc for configuration consumer.session.timeout.ms: Not a number of type INT")
    assert _message(gc, {"consumer.session.timeout.ms": "0"}) == (
        "Invalid value 0 for configuration consumer.session.timeout.ms: Value must be at least 1")
    assert _message(gc, {"share.record.lock.duration.ms": "999"}) == (
        "Invalid value 999 for configuration share.record.lock.duration.ms: Value must be at least 1000")
    assert _message(gc, {"share.isolation.level": "committed"}) == (
        "Invalid value committed for configuration share.isolation.level: String must be one of: "
        "read_committed, read_uncommitted")
    assert "share.auto.offset.reset" in _message(gc, {"share.auto.offset.reset": "newest"})
    assert _message(gc, {"share.renew.acknowledge.enable": "yes"}) == (
        "Invalid value yes for configuration share.renew.acknowledge.enable: Expected value to be either true or false")
    gc.check({"share.auto.offset.reset": "by_duration:PT1H"})
    gc.check({"share.auto.offset.reset": "by_duration:P1DT2H3M4.5S"})
    assert "Negative duration" in _message(gc, {"share.auto.offset.reset": "by_duration:-PT1H"})


def test_bounds_from_the_broker_settings(tmp_path):
    gc, _ = _configs(tmp_path)
    assert _message(gc, {"consumer.heartbeat.interval.ms": "4999"}) == (
        "consumer.heartbeat.interval.ms must be greater than or equal to group.consumer.min.heartbeat.interval.ms")
    assert _message(gc, {"consumer.heartbeat.interval.ms": "15001"}) == (
        "consumer.heartbeat.interval.ms must be less than or equal to group.consumer.max.heartbeat.interval.ms")
    assert _message(gc, {"consumer.session.timeout.ms": "60001"}) == (
        "consumer.session.timeout.ms must be less than or equal to group.consumer.max.session.timeout.ms")
    assert _message(gc, {"share.delivery.count.limit": "11"}) == (
        "share.delivery.count.limit must be less than or equal to group.share.max.delivery.count.limit")
    assert _message(gc, {"streams.num.standby.replicas": "3"}) == (
        "streams.num.standby.replicas must be less than or equal to group.streams.max.standby.replicas")
    (tmp_path / "loose").mkdir()
    loose, _ = _configs(tmp_path / "loose", **{"group.consumer.min.heartbeat.interval.ms": "100",
                                                "group.consumer.min.session.timeout.ms": "1000"})
    loose.check({"consumer.heartbeat.interval.ms": "100", "consumer.session.timeout.ms": "1000"})


def test_session_must_exceed_heartbeat_merged_with_the_defaults(tmp_path):
    gc, _ = _configs(tmp_path, **{"group.consumer.max.heartbeat.interval.ms": "50000"})
    # the broker's session timeout (45000) is below the new interval
    assert _message(gc, {"consumer.heartbeat.interval.ms": "46000"}) == (
        "consumer.session.timeout.ms must be greater than consumer.heartbeat.interval.ms")


def test_describe_entries_sources_and_synonyms(tmp_path):
    gc, _ = _configs(tmp_path, **{"group.consumer.session.timeout.ms": "50000"})
    gc.replace("g", {"consumer.heartbeat.interval.ms": "6000"})
    entries = {e.name: e for e in gc.entries("g", None, docs=True)}
    assert set(entries) == KAFKA_43
    hb = entries["consumer.heartbeat.interval.ms"]
    assert (hb.value, hb.source, hb.read_only, hb.sensitive) == ("6000", ConfigSource.GROUP_CONFIG, False, False)
    assert hb.synonyms[0].source == ConfigSource.GROUP_CONFIG and hb.doc
    st = entries["consumer.session.timeout.ms"]
    assert (st.value, st.source) == ("50000", ConfigSource.DEFAULT_CONFIG)
    assert [(s.name, s.source) for s in st.synonyms] == [
        ("consumer.session.timeout.ms", ConfigSource.DEFAULT_CONFIG),
        ("group.consumer.session.timeout.ms", ConfigSource.STATIC_BROKER_CONFIG),
        ("group.consumer.session.timeout.ms", ConfigSource.DEFAULT_CONFIG)]
    assert [e.name for e in gc.entries("g", ["share.isolation.level"], docs=False)] == ["share.isolation.level"]


def test_the_coordinator_reads_a_groups_own_session_and_interval(tmp_path):
    gc, _ = _configs(tmp_path, **{"group.consumer.min.heartbeat.interval.ms": "100"})
    config = GroupConfig(overrides=gc)
    assert config.consumer_heartbeat_interval_ms("g") == 5000
    gc.replace("g", gc.check({"consumer.heartbeat.interval.ms": "250", "consumer.session.timeout.ms": "50000"}))
    assert config.consumer_heartbeat_interval_ms("g") == 250
    assert config.consumer_session_timeout_ms("g") == 50000
    assert config.consumer_session_timeout_ms("h") == 45000


def test_a_stored_value_outside_the_brokers_bounds_now_is_capped(tmp_path):
    gc, _ = _configs(tmp_path, **{"group.consumer.min.heartbeat.interval.ms": "100"})
    gc.replace("g", gc.check({"consumer.heartbeat.interval.ms": "200"}))
    (tmp_path / "later").mkdir()
    (tmp_path / "later" / DYNAMIC_FILE).write_bytes((tmp_path / DYNAMIC_FILE).read_bytes())
    later, _ = _configs(tmp_path / "later")  # restarted with Kafka's bounds (5000-15000)
    assert later.get("g") == {"consumer.heartbeat.interval.ms": "200"}  # kept as set
    assert later.value("g", "consumer.heartbeat.interval.ms") == 5000  # used within the bounds
    assert GroupConfig(overrides=later).consumer_heartbeat_interval_ms("g") == 5000
    described = {e.name: e for e in later.entries("g", None, docs=False)}["consumer.heartbeat.interval.ms"]
    assert (described.value, described.source) == ("200", ConfigSource.GROUP_CONFIG)  # described as kept
