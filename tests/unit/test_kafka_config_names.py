"""Kafka's broker config names (server/kafka_broker_config_names.txt): what a server.properties
written for Kafka carries is recognised, so only names Kafka does not know either are reported
as unknown (server/config.py)."""
from __future__ import annotations

import re

from kcoord.server.config import SETTINGS, Config
from kcoord.server.config_catalogue import BROKER_CONFIGS
from kcoord.server.kafka_config_names import kafka_broker_config_names, known_to_kafka


def test_the_list_holds_kafkas_broker_configs_and_nothing_of_kcoords_own():
    names = kafka_broker_config_names()
    assert len(names) > 300
    for name in ("offsets.topic.replication.factor", "log.cleaner.threads", "num.network.threads", "process.roles",
                 "controller.quorum.voters", "zookeeper.connect", "transaction.state.log.replication.factor",
                 "log.segment.bytes", "compression.type", "unclean.leader.election.enable", "ssl.keystore.type",
                 "leader.replication.throttled.rate", "remote.log.storage.system.enable", "group.coordinator.threads"):
        assert name in names, name
    assert not [n for n in names if n.startswith("kcoord.")]
    assert not [n for n in names if not re.fullmatch(r"[a-z0-9.]+|zookeeper\.clientCnxnSocket", n)]
    # every broker default of a topic config kcoord knows is one of Kafka's broker configs
    assert set(BROKER_CONFIGS) <= names
    # kcoord's settings are Kafka's, but for its own and the authorizer's (StandardAuthorizer's)
    assert {n for n in SETTINGS if n not in names and not n.startswith("kcoord.")} == {
        "allow.everyone.if.no.acl.found", "super.users", "cluster.id", "log.level"}


def test_listener_prefixed_names_are_known_by_their_setting():
    assert known_to_kafka("listener.name.internal.ssl.keystore.type")
    assert known_to_kafka("listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config")
    assert known_to_kafka("listener.name.external.max.connections")
    assert not known_to_kafka("listener.name.internal.no.such.thing")
    assert not known_to_kafka("listener.name..ssl.keystore.type")
    assert not known_to_kafka("offsets.topic.replication.factors")


def test_kafkas_names_kcoord_does_not_use_are_ignored_and_others_unknown():
    cfg = Config({"num.io.threads": "3", "log.cleaner.threads": "2",
                  "listener.name.plaintext.ssl.keymanager.algorithm": "PKIX", "made.up.name": "1",
                  "listener.name.plaintext.made.up": "x"})
    assert cfg.unknown == {"made.up.name": "1", "listener.name.plaintext.made.up": "x"}
    assert set(cfg.ignored) == {"num.io.threads", "log.cleaner.threads",
                                "listener.name.plaintext.ssl.keymanager.algorithm"}
