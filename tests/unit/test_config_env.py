"""KAFKA_<NAME> environment variables are settings, named as the apache/kafka image names them,
one layer between a config file and --override."""
from __future__ import annotations

import pytest

from kcoord.server.config import Config
from kcoord.server.config_env import env_settings, setting_name


@pytest.mark.parametrize("variable, name", [
    ("KAFKA_LOG_DIRS", "log.dirs"),
    ("KAFKA_LISTENER_SECURITY_PROTOCOL_MAP", "listener.security.protocol.map"),
    ("KAFKA_ADVERTISED_LISTENERS", "advertised.listeners"),
    ("KAFKA_LISTENER_NAME_EXTERNAL_PLAIN_SASL_JAAS_CONFIG", "listener.name.external.plain.sasl.jaas.config"),
    ("KAFKA_A__B___C", "a_b-c"),
    ("KAFKA_SOME___DASHED_NAME", "some-dashed.name"),
    ("KAFKA_KCOORD_CONTROL_LISTENER", "kcoord.control.listener"),
])
def test_names_map_as_the_kafka_image_maps_them(variable, name):
    assert setting_name(variable) == name


def test_only_kafka_settings_are_taken():
    env = {"KAFKA_NUM_PARTITIONS": "3", "KAFKA_HEAP_OPTS": "-Xmx1g", "KAFKA_OPTS": "-Dx=y",
           "KAFKA_LOG4J_LOGGERS": "kafka=WARN", "PATH": "/bin", "KAFKA_": "x", "MY_KAFKA_X": "1"}
    assert env_settings(env) == {"num.partitions": "3"}


def test_listeners_follow_the_advertised_ones_when_not_given():
    env = {"KAFKA_ADVERTISED_LISTENERS": "INTERNAL://kcoord:29092,EXTERNAL://localhost:9092"}
    assert env_settings(env)["listeners"] == "INTERNAL://0.0.0.0:29092,EXTERNAL://0.0.0.0:9092"
    env["KAFKA_LISTENERS"] = "INTERNAL://:29092,EXTERNAL://:9092"
    assert env_settings(env)["listeners"] == "INTERNAL://:29092,EXTERNAL://:9092"


def test_cluster_id_variable():
    assert env_settings({"CLUSTER_ID": "abc"})["cluster.id"] == "abc"
    assert env_settings({"CLUSTER_ID": "abc", "KAFKA_CLUSTER_ID": "def"})["cluster.id"] == "def"


def test_two_listeners_from_the_environment(tmp_path):
    env = {
        "KAFKA_LISTENERS": "INTERNAL://0.0.0.0:29092,EXTERNAL://0.0.0.0:9092",
        "KAFKA_ADVERTISED_LISTENERS": "INTERNAL://kcoord:29092,EXTERNAL://localhost:9092",
        "KAFKA_LISTENER_SECURITY_PROTOCOL_MAP": "INTERNAL:PLAINTEXT,EXTERNAL:PLAINTEXT",
        "KAFKA_LOG_DIRS": str(tmp_path),
    }
    cfg = Config.load(None, [], environ=env)
    assert [(e.name, e.host, e.port) for e in cfg.advertised_listeners] == [
        ("INTERNAL", "kcoord", 29092), ("EXTERNAL", "localhost", 9092)]
    assert [e.port for e in cfg.listeners] == [29092, 9092]
    assert cfg.log_dir == tmp_path


def test_layers_file_then_environment_then_override(tmp_path):
    props = tmp_path / "server.properties"
    props.write_text("num.partitions=2\noffsets.topic.num.partitions=7\nlog.retention.hours=5\n")
    env = {"KAFKA_NUM_PARTITIONS": "4", "KAFKA_OFFSETS_TOPIC_NUM_PARTITIONS": "9"}
    cfg = Config.load(props, ["offsets.topic.num.partitions=11"], environ=env)
    assert cfg["num.partitions"] == 4  # the environment over the file
    assert cfg["offsets.topic.num.partitions"] == 11  # --override over the environment
    assert cfg["log.retention.hours"] == 5  # the file where the environment says nothing
    assert Config.load(props, [])["num.partitions"] == 2  # no environ given: no environment layer


def test_a_bad_value_from_the_environment_is_refused():
    with pytest.raises(ValueError, match="num.partitions"):
        Config.load(None, [], environ={"KAFKA_NUM_PARTITIONS": "many"})


def test_the_command_line_reads_the_environment(monkeypatch, tmp_path):
    from kcoord.server import cli

    monkeypatch.setenv("KAFKA_LOG_DIRS", str(tmp_path / "env-dir"))
    monkeypatch.setenv("KAFKA_NUM_PARTITIONS", "6")

    class Args:
        config = None
        override = ["num.partitions=8"]

    cfg = cli._load(Args())
    assert cfg is not None and cfg.log_dir == tmp_path / "env-dir" and cfg["num.partitions"] == 8
