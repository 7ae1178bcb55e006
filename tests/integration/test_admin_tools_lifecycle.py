"""What kafka-topics.sh and kafka-consumer-groups.sh do, end to end against kcoord, with kcoord's
own kafka-topics.sh (--alter --partitions) and with Java's AdminClient (kafka-clients 3.9.1,
tests/compat/java/AdminTool.java): create a topic with configs, describe it and its configs,
alter its configs, add partitions, delete it; describe a group with its lag, reset its offsets
(earliest, latest, a timestamp, a shift) while it is inactive, delete offsets, delete the group;
with restarts in between. Adding partitions needs CreatePartitions (issue 12, topic admin)."""
from __future__ import annotations

import time

import pytest
from clientlib import java_member, kcoord_java
from conftest import unique
from test_admin_configs import admin_tool
from test_kafka_tools import tool

pytestmark = pytest.mark.integration


def test_topics_tool_adds_partitions(kcoord_factory):
    """--alter --partitions (CreatePartitions): the new count, kept across a restart."""
    srv = kcoord_factory()
    b = srv.bootstrap
    name = unique("cli-grow")
    assert tool("topics", "--bootstrap-server", b, "--create", "--topic", name, "--partitions", "1").returncode == 0
    r = tool("topics", "--bootstrap-server", b, "--alter", "--topic", name, "--partitions", "3")
    assert (r.returncode, r.stdout) == (0, ""), r
    r = tool("topics", "--bootstrap-server", b, "--alter", "--topic", name, "--partitions", "2")
    assert r.returncode == 1 and r.stdout.startswith("Error while executing topic command : "), r
    r = tool("topics", "--bootstrap-server", b, "--alter", "--topic", name, "--config", "a=b", "--partitions", "4")
    assert r.returncode == 1 and r.stderr.startswith('Option combination "[bootstrap-server, config]" can\'t be used')
    srv.restart()
    lines = tool("topics", "--bootstrap-server", b, "--describe", "--topic", name).stdout.splitlines()
    assert "\tPartitionCount: 3\t" in lines[0] and len(lines) == 4


def _offsets(record: dict, topic: str) -> dict[int, tuple[int, int, int]]:
    """describe-group rows: partition -> (committed, end, lag)."""
    return {int(k.rsplit("-", 1)[1]): tuple(v) for k, v in record["offsets"].items() if k.startswith(topic + "-")}


@pytest.mark.java
def test_java_admin_topic_and_group_lifecycle(kcoord_factory, members):
    srv = kcoord_factory()
    b = srv.bootstrap
    topic, group = unique("jtools"), unique("jtools-g")

    out = admin_tool(b, ["create", topic, "2", "retention.ms=3600000"],
                     ["describe-configs", "topic", topic],
                     ["incremental", "topic", topic, "set:retention.ms=7200000", "set:max.message.bytes=500000"],
                     ["create-partitions", topic, "4"],
                     ["describe-topics", topic])
    assert [r["kind"] for r in out] == ["create", "describe-configs", "incremental", "create-partitions", "topic",
                                        "done"], out
    assert out[1]["entries"]["retention.ms"]["value"] == "3600000"
    assert [p[0] for p in out[4]["partitions"]] == [0, 1, 2, 3]

    # 20 records, a timestamp, 20 more: the timestamp splits them
    kcoord_java("produce", b, topic, 20, "a", timeout=90)
    time.sleep(0.05)
    split_ms = int(time.time() * 1000)
    time.sleep(0.05)
    kcoord_java("produce", b, topic, 20, "b", timeout=90)
    consumed = kcoord_java("consume", b, topic, group, 25, 3000, timeout=120)
    assert consumed.one("done")["commit_failures"] == 0

    out = admin_tool(b, ["describe-group", group])
    rows = _offsets(out[0], topic)
    assert out[0]["state"] == "Empty" and out[0]["members"] == []
    assert sum(end for _, end, _ in rows.values()) == 40
    assert all(lag == end - committed >= 0 for committed, end, lag in rows.values())
    assert sum(committed for committed, _, _ in rows.values()) >= 25

    # an active member: offsets cannot be reset under it
    m = java_member(b, topic, group, name="active")
    members.append(m)
    m.wait_for(lambda x: x.assignment() is not None, 90, "the member's assignment")
    out = admin_tool(b, ["describe-group", group], ["reset-offsets", group, topic, "earliest"])
    assert out[0]["state"] == "Stable" and out[0]["members"] == ["active"]
    assert out[1]["kind"] == "error" and out[1]["error"] == "UnknownMemberIdException", out
    assert m.close(45) == 0

    out = admin_tool(b, ["reset-offsets", group, topic, "earliest"], ["describe-group", group],
                     ["reset-offsets", group, topic, f"timestamp:{split_ms}"], ["describe-group", group])
    assert [r["kind"] for r in out] == ["reset-offsets", "describe-group", "reset-offsets", "describe-group", "done"]
    assert all(c == 0 for c, _, _ in _offsets(out[1], topic).values())
    at_split = _offsets(out[3], topic)
    assert sum(c for c, _, _ in at_split.values()) == 20  # the first offset at or after the split

    srv.restart()
    out = admin_tool(b, ["describe-group", group], ["reset-offsets", group, topic, "latest"],
                     ["reset-offsets", group, topic, "shift:-3"], ["describe-group", group])
    assert _offsets(out[0], topic) == at_split  # the reset survived the restart
    shifted = _offsets(out[3], topic)
    assert all(c == max(0, end - 3) and lag == end - c for c, end, lag in shifted.values())

    out = admin_tool(b, ["delete-offsets", group, topic, "0"], ["describe-group", group],
                     ["delete-group", group], ["describe-group", group],
                     ["delete-topics", topic], ["describe-topics", topic])
    assert [r["kind"] if r["kind"] != "error" else r["error"] for r in out] == [
        "delete-offsets", "describe-group", "delete-group", "describe-group", "delete-topics",
        "UnknownTopicOrPartitionException", "done"], out
    assert 0 not in _offsets(out[1], topic) and set(_offsets(out[1], topic)) == {1, 2, 3}
    assert out[3]["state"] == "Dead" and out[3]["offsets"] == {}

    srv.restart()
    out = admin_tool(b, ["describe-topics", topic], ["describe-group", group])
    assert out[0]["kind"] == "error" and out[0]["error"] == "UnknownTopicOrPartitionException"
    assert out[1]["state"] == "Dead"
