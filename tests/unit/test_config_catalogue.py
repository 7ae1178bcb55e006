"""The config catalogue (server/config_catalogue.py) and its layers (server/config_layers.py):
Kafka's parsing, validation messages, defaults and synonyms, without a server."""
from __future__ import annotations

import pytest

from kcoord.server.config import SETTINGS, Config
from kcoord.server.config_catalogue import (
    BROKER_CONFIGS,
    LONG_MAX,
    TOPIC_CONFIGS,
    ConfigError,
    ConfigSource,
    ConfigType,
    Dynamic,
    check_topic_configs,
    java_double,
    parse_value,
)
from kcoord.server.config_layers import BrokerConfigs
from kcoord.server.topics import Topic

# Kafka 3.9's LogConfig names (kafka-configs --describe --all of a topic lists exactly these).
KAFKA_39_TOPIC_CONFIGS = {
    "cleanup.policy", "compression.gzip.level", "compression.lz4.level", "compression.type",
    "compression.zstd.level", "delete.retention.ms", "file.delete.delay.ms", "flush.messages", "flush.ms",
    "follower.replication.throttled.replicas", "index.interval.bytes", "leader.replication.throttled.replicas",
    "local.retention.bytes", "local.retention.ms", "max.compaction.lag.ms", "max.message.bytes",
    "message.downconversion.enable", "message.format.version", "message.timestamp.after.max.ms",
    "message.timestamp.before.max.ms", "message.timestamp.difference.max.ms", "message.timestamp.type",
    "min.cleanable.dirty.ratio", "min.compaction.lag.ms", "min.insync.replicas", "preallocate",
    "remote.log.copy.disable", "remote.log.delete.on.disable", "remote.storage.enable", "retention.bytes",
    "retention.ms", "segment.bytes", "segment.index.bytes", "segment.jitter.ms", "segment.ms",
    "unclean.leader.election.enable",
}


def test_topic_config_names_are_kafkas():
    assert set(TOPIC_CONFIGS) == KAFKA_39_TOPIC_CONFIGS


def test_every_topic_synonym_is_a_broker_config_with_the_same_type_and_default():
    for key in TOPIC_CONFIGS.values():
        for i, syn in enumerate(key.synonyms):
            broker = BROKER_CONFIGS[syn.name]
            if i == 0 and broker.default is not None:
                assert broker.default * syn.factor == key.default or key.name == "max.message.bytes", key.name
            if syn.factor == 1 and i == 0:
                assert broker.type == key.type, key.name
                # the first synonym of a topic config is dynamically updatable (DynamicLogConfig)
                expected = Dynamic.READ_ONLY if key.name == "message.format.version" else Dynamic.CLUSTER_WIDE
                assert broker.dynamic == expected, syn.name


def test_catalogue_defaults_match_the_servers_settings():
    """Where kcoord has a setting, the catalogue describes kcoord's own default (its "not set"
    markers -2 / "" are Kafka's null)."""
    for name, (_, default) in SETTINGS.items():
        key = BROKER_CONFIGS.get(name)
        if key is None:
            continue
        if default in ("", -2):
            assert key.default is None, name
        else:
            assert key.parse(default) == key.default, name


@pytest.mark.parametrize("ctype,raw,value", [
    (ConfigType.INT, " 42 ", 42), (ConfigType.INT, "-7", -7), (ConfigType.LONG, "9223372036854775807", LONG_MAX),
    (ConfigType.BOOLEAN, "TRUE", True), (ConfigType.BOOLEAN, "false", False),
    (ConfigType.DOUBLE, "0.25", 0.25), (ConfigType.LIST, "compact, delete", ["compact", "delete"]),
    (ConfigType.LIST, "", []), (ConfigType.STRING, " x ", "x"),
])
def test_parse(ctype, raw, value):
    assert parse_value("c", ctype, raw) == value


@pytest.mark.parametrize("ctype,raw", [
    (ConfigType.INT, "2147483648"), (ConfigType.INT, "1.5"), (ConfigType.INT, "1_000"), (ConfigType.INT, "0x10"),
    (ConfigType.LONG, "9223372036854775808"), (ConfigType.LONG, "abc"), (ConfigType.DOUBLE, "half"),
])
def test_parse_refuses_what_java_refuses(ctype, raw):
    with pytest.raises(ConfigError, match=f"Invalid value {raw} for configuration c: Not a number of type {ctype.name}"):
        parse_value("c", ctype, raw)


def test_boolean_message():
    with pytest.raises(ConfigError, match="Expected value to be either true or false"):
        parse_value("c", ConfigType.BOOLEAN, "yes")


@pytest.mark.parametrize("x,text", [(0.5, "0.5"), (1.0, "1.0"), (0.01, "0.01"), (1e-5, "1.0E-5"),
                                    (1e7, "1.0E7"), (12345678.9, "1.23456789E7"), (0.0, "0.0")])
def test_java_double(x, text):
    assert java_double(x) == text


@pytest.mark.parametrize("configs,message", [
    ({"no.such": "1"}, "Unknown topic config name: no.such"),
    ({"retention.ms": None}, "Null value not supported for topic configs: retention.ms"),
    ({"retention.ms": "abc"}, "Invalid value abc for configuration retention.ms: Not a number of type LONG"),
    ({"retention.ms": "-2"}, "Invalid value -2 for configuration retention.ms: Value must be at least -1"),
    ({"segment.bytes": "13"}, "Invalid value 13 for configuration segment.bytes: Value must be at least 14"),
    ({"cleanup.policy": "compact,forever"},
     "Invalid value forever for configuration cleanup.policy: String must be one of: compact, delete"),
    ({"message.timestamp.type": "Now"}, "Invalid value Now for configuration message.timestamp.type: "
                                        "String must be one of: CreateTime, LogAppendTime"),
    ({"min.cleanable.dirty.ratio": "1.5"},
     "Invalid value 1.5 for configuration min.cleanable.dirty.ratio: Value must be no more than 1"),
    ({"compression.gzip.level": "0"},
     "Invalid value 0 for configuration compression.gzip.level: Value must be between 1 and 9 or equal to -1"),
    ({"message.format.version": "0.7"},
     "Invalid value 0.7 for configuration message.format.version: Version 0.7 is not a valid version"),
    ({"leader.replication.throttled.replicas": "0:1,x"}, "leader.replication.throttled.replicas must be the "
                                                         "literal '\\*' or a list of replicas"),
    ({"min.compaction.lag.ms": "10", "max.compaction.lag.ms": "5"},
     r"conflict topic config setting min.compaction.lag.ms \(10\) > max.compaction.lag.ms \(5\)"),
    ({"remote.storage.enable": "true"}, "Tiered Storage functionality is disabled in the broker"),
    # the first bad value in LogConfig's definition order is the one reported
    ({"unclean.leader.election.enable": "x", "segment.bytes": "x"}, "configuration segment.bytes"),
])
def test_topic_validation_messages(configs, message):
    with pytest.raises(ConfigError, match=message):
        check_topic_configs(configs, _defaults())


def test_topic_validation_accepts_kafkas_forms():
    parsed = check_topic_configs({"message.format.version": "0.10.0.0", "leader.replication.throttled.replicas": "*",
                                  "cleanup.policy": "compact, delete", "retention.ms": "-1"}, _defaults())
    assert parsed["cleanup.policy"] == ["compact", "delete"] and parsed["retention.ms"] == -1


def _defaults():
    return {name: key.default for name, key in TOPIC_CONFIGS.items()}


# ---- layers --------------------------------------------------------------------------------


def _layers(tmp_path, **given) -> BrokerConfigs:
    cfg = Config({k.replace("_", "."): v for k, v in given.items()})
    return BrokerConfigs(cfg, tmp_path)


def test_static_and_default_sources_and_synonyms(tmp_path):
    layers = _layers(tmp_path, log_retention_hours="100", log_segment_bytes="2048")
    topic = Topic("t", __import__("uuid").uuid4(), 1, {"cleanup.policy": "compact"})
    values = layers.topic_values(topic)
    assert values["retention.ms"] == 100 * 3_600_000 and values["segment.bytes"] == 2048
    seg = layers.topic_entry(topic, "segment.bytes", docs=False)
    assert seg.source == ConfigSource.STATIC_BROKER_CONFIG
    assert [(s.name, s.value, s.source) for s in seg.synonyms] == [
        ("log.segment.bytes", "2048", ConfigSource.STATIC_BROKER_CONFIG),
        ("log.segment.bytes", "1073741824", ConfigSource.DEFAULT_CONFIG)]
    # Kafka's quirk: retention.ms's synonym list starts at log.retention.ms, which is not set
    ret = layers.topic_entry(topic, "retention.ms", docs=True)
    assert ret.value == "360000000" and ret.source == ConfigSource.DEFAULT_CONFIG and ret.synonyms == ()
    assert ret.doc
    cp = layers.topic_entry(topic, "cleanup.policy", docs=False)
    assert cp.source == ConfigSource.DYNAMIC_TOPIC_CONFIG and cp.synonyms[0].name == "cleanup.policy"
    # CreateTopics v5+ resolves like the KRaft controller: hours converted, static source
    created = layers.created_topic_entry({}, "retention.ms")
    assert (created.value, created.source) == ("360000000", ConfigSource.STATIC_BROKER_CONFIG)


def test_dynamic_layers_win_push_into_config_and_survive_a_reload(tmp_path):
    layers = _layers(tmp_path, message_max_bytes="5000")
    topic = Topic("t", __import__("uuid").uuid4(), 1, {})
    assert layers.topic_values(topic)["max.message.bytes"] == 5000
    layers.replace(False, {"message.max.bytes": "6000", "log.retention.ms": "1234"})
    assert layers.config["message.max.bytes"] == 6000  # what the rest of the server reads
    assert layers.topic_values(topic)["max.message.bytes"] == 6000  # the cache was dropped
    layers.replace(True, {"message.max.bytes": "7000"})
    entry = layers.broker_entry("message.max.bytes", per_node=True, docs=False)
    assert entry.value == "7000" and entry.source == ConfigSource.DYNAMIC_BROKER_CONFIG
    assert [s.source for s in entry.synonyms] == [ConfigSource.DYNAMIC_BROKER_CONFIG,
                                                  ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG,
                                                  ConfigSource.STATIC_BROKER_CONFIG, ConfigSource.DEFAULT_CONFIG]
    assert layers.topic_values(topic)["retention.ms"] == 1234

    again = _layers(tmp_path, message_max_bytes="5000")
    again.load()
    assert again.config["message.max.bytes"] == 7000
    assert again.topic_values(topic)["retention.ms"] == 1234
    again.replace(True, {})
    assert again.config["message.max.bytes"] == 6000
    again.replace(False, {})
    assert again.config["message.max.bytes"] == 5000  # the static value comes back


def test_a_stored_config_that_is_no_longer_valid_is_dropped(tmp_path):
    (tmp_path / "kcoord-broker-configs.json").write_text(
        '{"cluster": {"message.max.bytes": "x", "log.dirs": "/elsewhere", "custom.thing": "1"}, "brokers": {}}')
    layers = _layers(tmp_path)
    layers.load()
    assert layers.cluster == {"custom.thing": "1"}


def test_static_broker_defaults_of_topic_configs_are_checked_at_start():
    with pytest.raises(ValueError, match="log.cleanup.policy"):
        Config({"log.cleanup.policy": "sometimes"})
    cfg = Config({"log.cleanup.policy": "compact", "num.network.threads": "3"})
    assert "log.cleanup.policy" not in cfg.unknown and cfg.unknown == {}
    assert cfg.ignored == {"num.network.threads": "3"}  # Kafka's name, not kcoord's: ignored, not unknown
    assert cfg.given == {"log.cleanup.policy": "compact", "num.network.threads": "3"}


def test_unknown_given_names_are_described_as_sensitive(tmp_path):
    layers = _layers(tmp_path, num_network_threads="3")
    e = layers.broker_entry("num.network.threads", per_node=True, docs=False)
    assert e.value is None and e.sensitive and e.type == ConfigType.UNKNOWN and e.read_only
