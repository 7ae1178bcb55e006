"""Share-group operations against a live group (issue 25): `kcoord share-groups`
(bin/kafka-share-groups.sh) with --describe --offsets, --reset-offsets (dry run and --execute,
--to-earliest / --to-latest / --to-datetime), --delete-offsets and --delete; the Java Admin
client's listShareGroupOffsets / alterShareGroupOffsets / deleteShareGroupOffsets /
deleteShareGroups (tests/compat/java4/ShareAdminTool.java); and the cleanup of share-partition
state: a deleted share group's state goes with it (a recreated group starts fresh), a deleted
topic's share state goes with the topic."""
from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest
from clientlib import compile_java4, java4_classpath, run
from conftest import call, unique
from kafka.protocol.admin import DeleteTopicsRequest
from test_share_consumers import PyWorker, joined

from kcoord.protocol.share_messages import (
    AlterShareGroupOffsetsRequest,
    DescribeShareGroupOffsetsRequest,
    ShareGroupDescribeRequest,
)

pytestmark = pytest.mark.integration

SERVER = {
    "group.share.min.session.timeout.ms": "6000",
    "group.share.session.timeout.ms": "10000",
    "group.share.min.heartbeat.interval.ms": "500",
    "group.share.heartbeat.interval.ms": "1000",
}
ROOT = Path(__file__).resolve().parents[2]


def tool(server, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(ROOT / "bin" / "kafka-share-groups.sh"), "--bootstrap-server", server.bootstrap, *args],
                          capture_output=True, text=True, timeout=60, check=True)


def rows(out: str) -> list[list[str]]:
    lines = [x.split() for x in out.splitlines() if x.strip()]
    return lines[1:]  # under the header


def java_admin(server, *steps: list[str]) -> list[dict]:
    compile_java4()
    args: list[str] = []
    for i, s in enumerate(steps):
        args += (["--"] if i else []) + s
    r = run(["java", "-Xshare:auto", "-XX:TieredStopAtLevel=1", "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
             "-Dorg.slf4j.simpleLogger.logFile=System.err", "-cp", java4_classpath(), "ShareAdminTool",
             server.bootstrap, *args], timeout=180)
    return [json.loads(line) for line in r.stdout.splitlines() if line.startswith("{")]


def describe_offsets(server, group: str):
    G = DescribeShareGroupOffsetsRequest.DescribeShareGroupOffsetsRequestGroup
    return call(server.bootstrap, DescribeShareGroupOffsetsRequest(version=1, groups=[G(group_id=group, topics=None)]),
                1).groups[0]


def starts(server, group: str) -> dict[tuple[str, int], tuple[int, int]]:
    g = describe_offsets(server, group)
    assert g.error_code == 0, g
    return {(t.topic_name, p.partition_index): (p.start_offset, p.lag) for t in g.topics for p in t.partitions}


def wait_for(fn, timeout: float = 90.0):
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = fn()
        if last:
            return last
        time.sleep(0.2)
    raise AssertionError(f"condition not met in {timeout}s: last {last!r}")


def produce(bootstrap: str, topic: str, per_partition: int) -> None:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap})
    for i in range(per_partition * 2):
        p.produce(topic, value=b"v%d" % i, partition=i % 2)
    assert p.flush(60) == 0


def create_topic(server, topic: str) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": server.bootstrap})
    for f in admin.create_topics([NewTopic(topic, 2, 1)]).values():
        f.result(30)


def empty(server, group: str) -> bool:
    g = call(server.bootstrap, ShareGroupDescribeRequest(version=1, group_ids=[group],
                                                         include_authorized_operations=False), 1).groups[0]
    return g.error_code == 0 and g.group_state == "Empty"


def consume_all(server, group: str, topic: str, want: set[tuple[int, int]]) -> list[tuple[int, int]]:
    w = PyWorker(server.bootstrap, group, topic)
    try:
        joined(server, group, 1)
        wait_for(lambda: set(w.got) >= want, 120)
    finally:
        w.close()
    wait_for(lambda: empty(server, group), 60)
    return w.got


def test_offsets_reset_delete_and_a_fresh_group(kcoord_factory) -> None:
    server = kcoord_factory(SERVER)
    topic, group = unique("share-t"), unique("share-g")
    create_topic(server, topic)
    produce(server.bootstrap, topic, 5)

    # a dry run prints the plan (and a warning) and changes nothing
    r = tool(server, "--reset-offsets", "--group", group, "--topic", topic, "--to-earliest")
    assert "--execute option is missing" in r.stderr
    assert rows(r.stdout) == [[group, topic, "0", "0"], [group, topic, "1", "0"]], r.stdout
    assert describe_offsets(server, group).error_code == 69  # GROUP_ID_NOT_FOUND: nothing was written
    r = tool(server, "--reset-offsets", "--group", group, "--topic", topic, "--to-earliest", "--execute")
    assert rows(r.stdout) == [[group, topic, "0", "0"], [group, topic, "1", "0"]], r.stdout
    out = tool(server, "--describe", "--group", group, "--offsets").stdout
    assert out.split("\n")[1].split() == ["GROUP", "TOPIC", "PARTITION", "START-OFFSET", "LAG"], out
    assert rows(out) == [[group, topic, "0", "0", "5"], [group, topic, "1", "0", "5"]], out

    # consumed and accepted: the start moves to the end, no lag
    consume_all(server, group, topic, {(p, o) for p in range(2) for o in range(5)})
    assert wait_for(lambda: starts(server, group) == {(topic, 0): (5, 0), (topic, 1): (5, 0)} or None, 30)
    out = tool(server, "--describe", "--group", group, "--verbose").stdout  # --offsets is the default
    assert rows(out) == [[group, topic, "0", "0", "5", "0"], [group, topic, "1", "0", "5", "0"]], out

    # --to-datetime far in the past: the earliest offsets (a dry run); --to-latest --all-topics
    r = tool(server, "--reset-offsets", "--group", group, "--all-topics", "--to-datetime", "2001-01-01T00:00:00.000",
             "--dry-run")
    assert rows(r.stdout) == [[group, topic, "0", "0"], [group, topic, "1", "0"]], r.stdout
    assert starts(server, group)[(topic, 0)] == (5, 0)
    r = tool(server, "--reset-offsets", "--group", group, "--all-topics", "--to-latest", "--execute")
    assert rows(r.stdout) == [[group, topic, "0", "5"], [group, topic, "1", "5"]], r.stdout

    # the Java Admin client: list, alter, delete offsets
    out = java_admin(server, ["offsets", group], ["alter", group, f"{topic}:0=2", f"{topic}:1=3"],
                     ["offsets", group], ["delete-offsets", group, topic], ["offsets", group],
                     ["alter", group, f"{topic}:0=2", f"{topic}:1=2"])
    assert [o["kind"] for o in out] == ["offsets", "alter", "offsets", "delete-offsets", "offsets", "alter"], out
    assert out[0]["offsets"] == {f"{topic}-0": [5, 0], f"{topic}-1": [5, 0]}, out
    assert out[2]["offsets"] == {f"{topic}-0": [2, 3], f"{topic}-1": [3, 2]}, out
    assert out[4]["offsets"] == {}, out
    assert starts(server, group) == {(topic, 0): (2, 3), (topic, 1): (2, 3)}

    # --delete-offsets through the tool
    r = tool(server, "--delete-offsets", "--group", group, "--topic", topic)
    assert "Successful" in r.stdout and rows(r.stdout)[-1] == [topic, "Successful"], r.stdout
    assert starts(server, group) == {}
    java_admin(server, ["alter", group, f"{topic}:0=2", f"{topic}:1=2"])

    # a group with a member cannot be deleted, nor its offsets reset
    w = PyWorker(server.bootstrap, group, topic)
    try:
        joined(server, group, 1)
        r = tool(server, "--delete", "--group", group)
        assert "GroupNotEmptyException" in r.stdout, r.stdout
        r = tool(server, "--reset-offsets", "--group", group, "--topic", topic, "--to-earliest", "--execute")
        assert f"Share group '{group}' is not empty." in r.stdout, r.stdout
        wait_for(lambda: len(w.got) >= 6)  # offsets 2..4 of both partitions
    finally:
        w.close()
    wait_for(lambda: empty(server, group), 60)
    java_admin(server, ["alter", group, f"{topic}:0=2", f"{topic}:1=2"])  # unacknowledged again from 2

    # --delete: the group and its share-partition state go
    r = tool(server, "--delete", "--group", group)
    assert r.stdout.strip() == f"Deletion of requested share groups ('{group}') was successful.", r.stdout
    g = describe_offsets(server, group)
    assert g.error_code == 69, g  # no state left behind (it would keep the group known)

    # recreated, the group starts fresh: share.auto.offset.reset=latest, so none of the old records
    w = PyWorker(server.bootstrap, group, topic)
    try:
        joined(server, group, 1)
        wait_for(lambda: starts(server, group) if describe_offsets(server, group).error_code == 0
                 and len(starts(server, group)) == 2 else None, 60)
        produce(server.bootstrap, topic, 2)
        wait_for(lambda: len(set(w.got)) >= 4, 120)
        assert set(w.got) == {(0, 5), (0, 6), (1, 5), (1, 6)}, w.got
    finally:
        w.close()

    # the Java Admin client's deleteShareGroups
    wait_for(lambda: empty(server, group), 60)
    assert [o["kind"] for o in java_admin(server, ["delete", group])] == ["delete"]
    assert describe_offsets(server, group).error_code == 69


def test_deleting_a_topic_deletes_its_share_state(kcoord_factory) -> None:
    server = kcoord_factory(SERVER)
    topic, other, group = unique("share-t"), unique("share-o"), unique("share-g")
    create_topic(server, topic)
    create_topic(server, other)
    T = AlterShareGroupOffsetsRequest.AlterShareGroupOffsetsRequestTopic
    resp = call(server.bootstrap, AlterShareGroupOffsetsRequest(version=0, group_id=group, topics=[
        T(topic_name=t, partitions=[T.AlterShareGroupOffsetsRequestPartition(partition_index=p, start_offset=0)
                                    for p in range(2)]) for t in (topic, other)]), 0)
    assert resp.error_code == 0
    assert set(starts(server, group)) == {(topic, 0), (topic, 1), (other, 0), (other, 1)}
    r = call(server.bootstrap, DeleteTopicsRequest(version=5, topic_names=[topic], timeout_ms=30000), 5)
    assert r.responses[0].error_code == 0
    assert wait_for(lambda: set(starts(server, group)) == {(other, 0), (other, 1)} or None, 60)
    # the tombstones are durable: after a restart the deleted topic's state stays gone
    server.restart()
    assert set(starts(server, group)) == {(other, 0), (other, 1)}
    # and once the other topic is gone too, so is the group (it only lived in its share state)
    r = call(server.bootstrap, DeleteTopicsRequest(version=5, topic_names=[other], timeout_ms=30000), 5)
    assert r.responses[0].error_code == 0
    assert wait_for(lambda: describe_offsets(server, group).error_code == 69, 60)
