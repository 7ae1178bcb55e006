"""A SIGKILL in the middle of a topic deletion, at each of its persisted steps
(server/topic_deletion.py; the server kills itself at the step named by KCOORD_CRASH_AT, so
the moment is deterministic): after the restart nothing of the old topic remains, no file,
no `-delete` directory, no committed offset, no registry entry, and the topic created again
under its name starts empty with a new id, while other topics and offsets are untouched."""
from __future__ import annotations

import json
import os
import signal
import time

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from conftest import KcoordProcess, call, committed
from kafka.protocol.admin import CreateTopicsRequest, DeleteTopicsRequest

pytestmark = pytest.mark.integration

STEPS = ["registered", "renamed-first", "renamed", "tombstoned", "removed"]


def create(bootstrap: str, topic: str, partitions: int) -> str:
    req = CreateTopicsRequest(version=7, timeout_ms=10000, validate_only=False, topics=[
        CreateTopicsRequest.CreatableTopic(name=topic, num_partitions=partitions, replication_factor=1,
                                           assignments=[], configs=[])])
    resp = call(bootstrap, req, 7)
    assert resp.topics[0].error_code == 0, resp
    return str(resp.topics[0].topic_id)


def produce(bootstrap: str, topic: str, n: int, partitions: int) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "acks": "all", "message.timeout.ms": 20000})
    for i in range(n):
        p.produce(topic, value=b"v%d" % i, partition=i % partitions)
    assert p.flush(30) == 0


def commit(bootstrap: str, group: str, offsets: dict[tuple[str, int], int]) -> None:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        res = c.commit(offsets=[TopicPartition(t, p, o) for (t, p), o in offsets.items()], asynchronous=False)
        assert all(tp.error is None for tp in res), res
    finally:
        c.close()


def watermarks(bootstrap: str, topic: str, partition: int) -> tuple[int, int]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused"})
    try:
        return c.get_watermark_offsets(TopicPartition(topic, partition), timeout=10)
    finally:
        c.close()


@pytest.mark.parametrize("step", STEPS)
def test_sigkill_at_each_step_of_a_deletion(tmp_path, monkeypatch, step):
    srv = KcoordProcess(tmp_path / "data")
    monkeypatch.setenv("KCOORD_CRASH_AT", f"delete-topic:{step}")
    srv.start()
    monkeypatch.delenv("KCOORD_CRASH_AT")
    try:
        b = srv.bootstrap
        old_id = create(b, "doomed", 3)
        create(b, "kept", 1)
        produce(b, "doomed", 60, 3)
        produce(b, "kept", 5, 1)
        commit(b, "g1", {("doomed", 0): 10, ("doomed", 2): 20, ("kept", 0): 3})
        commit(b, "g2", {("doomed", 1): 5})
        with pytest.raises((AssertionError, OSError)):  # the server dies before it answers
            call(b, DeleteTopicsRequest(version=5, timeout_ms=10000, topic_names=["doomed"]), 5)
        srv.proc.wait(30)
        assert srv.proc.returncode == -signal.SIGKILL, srv.log_text()[-3000:]
        assert f"Crash point delete-topic:{step} reached" in srv.log_text()

        srv.start()
        deadline = time.monotonic() + 30
        registry = srv.log_dir / "kcoord-topics.json"
        while json.loads(registry.read_text()).get("deleting") and time.monotonic() < deadline:
            time.sleep(0.1)  # finished once __consumer_offsets is loaded
        data = json.loads(registry.read_text())
        assert data["deleting"] == [] and "doomed" not in [t["name"] for t in data["topics"]]
        assert not [n for n in os.listdir(srv.log_dir) if n.startswith("doomed") or n.endswith("-delete")]
        assert committed(b, "g1", "doomed") == {} and committed(b, "g2", "doomed") == {}
        assert committed(b, "g1", "kept") == {0: 3}
        assert watermarks(b, "kept", 0) == (0, 5)
        new_id = create(b, "doomed", 3)
        assert new_id != old_id
        assert [watermarks(b, "doomed", p) for p in range(3)] == [(0, 0)] * 3
        srv.restart()  # and it stays that way
        assert committed(b, "g1", "doomed") == {} and [watermarks(b, "doomed", p) for p in range(3)] == [(0, 0)] * 3
    finally:
        if srv.alive():
            srv.stop()
