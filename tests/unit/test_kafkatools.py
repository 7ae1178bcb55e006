"""The command-line tools' parsing (server/kafkatools), without a server: the forms Kafka's
tools accept, and their answers to misuse."""
from __future__ import annotations

import argparse

import pytest

from kcoord.server.kafkatools import configs, consumer_groups, topics


def test_topic_filter_is_kafkas_include_list():
    f = topics.topic_filter(" 'orders.*, payments' ")
    assert f.fullmatch("orders-eu") and f.fullmatch("payments") and not f.fullmatch("xpayments")
    with pytest.raises(topics.CommandError, match="is an invalid regex"):
        topics.topic_filter("(")


def test_replica_assignment():
    assert topics.parse_assignment("1:2,3:4") == {0: [1, 2], 1: [3, 4]}
    with pytest.raises(topics.CommandError, match="may not contain duplicate entries: 1"):
        topics.parse_assignment("1:1")
    with pytest.raises(topics.CommandError, match="Partition 1 has different replication factor"):
        topics.parse_assignment("1:2,3")


def test_topic_configs_are_checked_before_sending():
    assert topics.parse_configs(["retention.ms = 1000", "cleanup.policy=compact"]) == {
        "retention.ms": "1000", "cleanup.policy": "compact"}
    with pytest.raises(topics.CommandError, match='all configs to be added must be in the format "key=val"'):
        topics.parse_configs(["retention.ms"])
    with pytest.raises(Exception, match="Unknown topic config name: nope"):
        topics.parse_configs(["nope=1"])


def test_uuid_text_is_kafkas():
    import uuid

    assert topics.uuid_text(uuid.UUID(int=1)) == "AAAAAAAAAAAAAAAAAAAAAQ"


def _add(text: str) -> dict[str, str]:
    return configs.configs_to_add(argparse.Namespace(add_config=text, add_config_file=None))


def test_add_config_groups_values_in_brackets():
    assert _add("a=1,b=[x,y],c= 3") == {"a": "1", "b": "x,y", "c": "3"}
    with pytest.raises(configs.UsageError, match="Invalid entity config"):
        _add("a=1,b")
    with pytest.raises(configs.UsageError, match="Invalid character found for config key: a b"):
        _add("a b=1")


@pytest.mark.parametrize("text,ms", [
    ("2024-01-02T03:04:05.678", 1704164645678),
    ("2024-01-02T03:04:05.678Z", 1704164645678),
    ("2024-01-02T05:04:05.678+02:00", 1704164645678),
    ("2024-01-02T01:04:05.678-0200", 1704164645678),
])
def test_datetime_as_kafkas_getDateTime(text, ms):
    assert consumer_groups.parse_datetime(text) == ms


def test_datetime_errors():
    with pytest.raises(consumer_groups.UsageError, match="does not contain a 'T'"):
        consumer_groups.parse_datetime("2024-01-02")
    with pytest.raises(consumer_groups.UsageError, match="Unparseable date"):
        consumer_groups.parse_datetime("2024-01-02T03:04")


@pytest.mark.parametrize("text,ms", [("PT1H", 3_600_000), ("P1DT2M", 86_520_000), ("PT0.5S", 500),
                                     ("-PT10S", -10_000), ("pt3s", 3000)])
def test_duration_as_java_time_Duration(text, ms):
    assert consumer_groups.parse_duration_ms(text) == ms


def test_duration_errors():
    for bad in ("1H", "PT", "P", "PTH"):
        with pytest.raises(consumer_groups.UsageError):
            consumer_groups.parse_duration_ms(bad)


def test_consumer_assignment_bytes():
    import struct

    data = struct.pack(">hi", 0, 2) + struct.pack(">h", 1) + b"a" + struct.pack(">ii", 2, 0) + struct.pack(">i", 3)
    data += struct.pack(">h", 1) + b"b" + struct.pack(">ii", 1, 5) + struct.pack(">i", -1)
    assert consumer_groups.parse_assignment(data) == [("a", 0), ("a", 3), ("b", 5)]
    assert consumer_groups.parse_assignment(b"") == []


def test_reset_plan_csv():
    single = consumer_groups.parse_reset_plan("t,0,5\nt,1,7\n", "g")
    assert single == {"g": {("t", 0): 5, ("t", 1): 7}}
    assert consumer_groups.export_csv(single, True) == "t,0,5\nt,1,7\n"
    many = consumer_groups.parse_reset_plan("g1,t,0,5\ng2,t,0,6", None)
    assert consumer_groups.export_csv(many, False) == "g1,t,0,5\ng2,t,0,6\n"


def test_misuse_is_answered_with_usage_and_exit_1(capsys):
    with pytest.raises(SystemExit) as e:
        topics.main(["--bootstrap-server", "x:1", "--list", "--create", "--topic", "t"])
    assert e.value.code == 1
    assert capsys.readouterr().err.startswith("Command must include exactly one action")
    with pytest.raises(SystemExit) as e:
        consumer_groups.main(["--bootstrap-server", "x:1", "--reset-offsets", "--group", "g", "--to-earliest",
                              "--to-latest"])
    assert e.value.code == 1
    assert 'Option "[to-earliest]" can\'t be used with option "[to-latest]"' in capsys.readouterr().err
    assert configs.main(["--bootstrap-server", "x:1", "--describe", "--entity-type", "topics", "--topic", "t"]) == 1
    assert "Duplicate entity type(s) specified: topics" in capsys.readouterr().err
    assert configs.main(["--bootstrap-server", "x:1", "--describe", "--entity-name", "t", "--topic", "t"]) == 1
    assert "--entity-{type,name,default} should not be used" in capsys.readouterr().err


def test_acl_operations_principals_and_roles():
    from kcoord.server.kafkatools import acls

    assert acls.operation("IdempotentWrite") == "IDEMPOTENT_WRITE" and acls.operation("all") == "ALL"
    with pytest.raises(acls.UsageError):
        acls.operation("Fly")
    with pytest.raises(acls.UsageError, match="principalType:principalName"):
        acls.principal("alice")
    p = acls.parser()
    o = p.parse_args(["--bootstrap-server", "x:1", "--add", "--producer", "--consumer", "--idempotent",
                      "--allow-principal", "User:a", "--topic", "t", "--group", "g"])
    plan = acls.resource_acls(p, o, "LITERAL")
    ops = {f: sorted(e[2] for e in es) for f, es in plan.items()}
    assert ops == {("TOPIC", "t", "LITERAL"): ["CREATE", "DESCRIBE", "READ", "WRITE"],
                   ("GROUP", "g", "LITERAL"): ["READ"],
                   ("CLUSTER", "kafka-cluster", "LITERAL"): ["IDEMPOTENT_WRITE"]}
    assert acls.entry_text(("User:a", "*", "READ", "ALLOW")) == \
        "(principal=User:a, host=*, operation=READ, permissionType=ALLOW)"
