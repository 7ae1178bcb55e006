"""Java kafka-clients 4.3 KafkaShareConsumer scenarios of issue 25
(tests/compat/java4/ShareWorker.java): three consumers of one share group share 10,000 records
of a 2-partition topic, with implicit and with explicit acknowledgement; a consumer SIGKILLed
while it holds acquired records, which another consumer gets once their lock runs out; a record
released again and again reaches the delivery-count limit and is archived."""
from __future__ import annotations

import json
import subprocess
import threading
import time

import pytest
from clientlib import compile_java4, java4_classpath
from conftest import call, unique
from test_share_consumers import earliest, expected, joined, produce

from kcoord.protocol.share_messages import DescribeShareGroupOffsetsRequest

pytestmark = pytest.mark.integration

LOCK_MS = 5000
SERVER = {
    "group.share.min.session.timeout.ms": "6000",
    "group.share.session.timeout.ms": "10000",
    "group.share.min.heartbeat.interval.ms": "500",
    "group.share.heartbeat.interval.ms": "1000",
    "group.share.record.lock.duration.ms": str(LOCK_MS),
    "group.share.delivery.count.limit": "3",
}


class Worker:
    """ShareWorker in its own process: every record it is given as (partition, offset, delivery count)."""

    def __init__(self, bootstrap: str, group: str, topic: str, name: str, mode: str = "implicit") -> None:
        compile_java4()
        self.p = subprocess.Popen(
            ["java", "-Xshare:auto", "-XX:TieredStopAtLevel=1", "-Xmx256m",
             "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn", "-Dorg.slf4j.simpleLogger.logFile=System.err",
             "-cp", java4_classpath(), "ShareWorker", bootstrap, topic, group, name, mode],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        self.records: list[tuple[int, int, int]] = []
        self.at: dict[tuple[int, int], float] = {}  # when each record first came
        self.holding_at: float | None = None
        self.t = threading.Thread(target=self._read, daemon=True)
        self.t.start()

    @property
    def got(self) -> list[tuple[int, int]]:
        return [(p, o) for p, o, _ in self.records]

    def _read(self) -> None:
        assert self.p.stdout is not None
        for line in self.p.stdout:
            try:
                e = json.loads(line)
            except json.JSONDecodeError:
                continue
            if e.get("kind") == "record":
                self.records.append((e["p"], e["o"], e["d"]))
                self.at.setdefault((e["p"], e["o"]), time.monotonic())
            elif e.get("kind") == "holding":
                self.holding_at = time.monotonic()

    def close(self) -> None:
        if self.p.poll() is None:
            try:
                assert self.p.stdin is not None
                self.p.stdin.write("close\n")
                self.p.stdin.flush()
                self.p.wait(60)
            except (OSError, subprocess.TimeoutExpired):
                self.p.kill()
                self.p.wait(10)
        self.t.join(10)


def until(fn, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = fn()
        if got:
            return got
        time.sleep(0.2)
    raise AssertionError(f"{what}: not within {timeout}s")


def new_topic(server) -> tuple[str, str]:
    from confluent_kafka.admin import AdminClient, NewTopic

    topic, group = unique("share-t"), unique("share-g")
    admin = AdminClient({"bootstrap.servers": server.bootstrap})
    for f in admin.create_topics([NewTopic(topic, 2, 1)]).values():
        f.result(30)
    earliest(server, group, topic)
    return topic, group


def offsets(server, group: str) -> dict[int, tuple[int, int]]:
    G = DescribeShareGroupOffsetsRequest.DescribeShareGroupOffsetsRequestGroup
    g = call(server.bootstrap, DescribeShareGroupOffsetsRequest(version=1, groups=[G(group_id=group, topics=None)]),
             1).groups[0]
    return {p.partition_index: (p.start_offset, p.lag) for t in g.topics for p in t.partitions}


@pytest.mark.compat("java4", "share groups")
@pytest.mark.parametrize("mode", ["implicit", "explicit"])
def test_three_java_share_consumers_share_10000_records(kcoord_factory, mode: str) -> None:
    server = kcoord_factory(SERVER | {"group.share.record.lock.duration.ms": "30000"})
    topic, group = new_topic(server)
    n = 10_000
    workers = [Worker(server.bootstrap, group, topic, f"java-{i}", mode) for i in range(3)]
    try:
        joined(server, group, 3)
        # in small waves until each consumer has some, then the rest
        sent, deadline = 0, time.monotonic() + 60
        while sent < n and not all(w.records for w in workers) and time.monotonic() < deadline:
            produce(server.bootstrap, topic, 20, sent)
            sent += 20
            time.sleep(0.3)
        produce(server.bootstrap, topic, n - sent, sent)
        until(lambda: len({x for w in workers for x in w.got}) >= n, 240, f"{n} records consumed")
        # every record accepted: the share partitions' start offsets reach the log end, no lag
        until(lambda: offsets(server, group) == {0: (n // 2, 0), 1: (n // 2, 0)} or None, 60, "no lag left")
    finally:
        for w in workers:
            w.close()
    got = [x for w in workers for x in w.got]
    assert set(got) == expected(n)
    assert len(got) == n, "a record was delivered twice"
    assert all(w.records for w in workers), "a consumer got no record"
    readers = {p: sum(1 for w in workers if any(q == p for q, _ in w.got)) for p in range(2)}
    # the simple assignor gives each of the 3 members one of the 2 partitions: one is shared
    assert min(readers.values()) >= 1 and max(readers.values()) >= 2, readers


@pytest.mark.compat("java4", "share groups")
def test_sigkilled_consumer_records_go_to_another_after_the_lock(kcoord_factory) -> None:
    server = kcoord_factory(SERVER)
    topic, group = new_topic(server)
    holder = Worker(server.bootstrap, group, topic, "java-holder", "hold")
    other = None
    try:
        joined(server, group, 1)
        produce(server.bootstrap, topic, 200)
        until(lambda: holder.holding_at is not None, 120, "the holder got records")
        held = set(holder.got)
        holding_at = holder.holding_at
        assert held
        other = Worker(server.bootstrap, group, topic, "java-other")
        holder.p.kill()  # SIGKILL: it never acknowledges nor leaves
        holder.p.wait(10)
        until(lambda: held <= set(other.got), 120, "the held records delivered to the other consumer")
        assert holding_at is not None
        # not before their lock ran out (the holder acquired them just before it printed
        # "holding": a second of slack for that)
        first_again = min(other.at[x] for x in held)
        assert first_again - holding_at >= LOCK_MS / 1000 - 1.0, first_again - holding_at
        again = {(p, o): d for p, o, d in other.records if (p, o) in held}
        assert all(d >= 2 for d in again.values()), again  # their second delivery (at least)
        until(lambda: set(other.got) | held >= expected(200), 120, "every record consumed")
    finally:
        holder.close()
        if other is not None:
            other.close()


@pytest.mark.compat("java4", "share groups")
def test_released_records_reach_the_delivery_count_limit(kcoord_factory) -> None:
    server = kcoord_factory(SERVER)
    topic, group = new_topic(server)
    w = Worker(server.bootstrap, group, topic, "java-release", "release")
    try:
        joined(server, group, 1)
        produce(server.bootstrap, topic, 10)
        # released three times (the limit), then archived: the share partitions end past them
        until(lambda: offsets(server, group) == {0: (5, 0), 1: (5, 0)} or None, 120, "all archived")
    finally:
        w.close()
    per_record: dict[tuple[int, int], list[int]] = {}
    for p, o, d in w.records:
        per_record.setdefault((p, o), []).append(d)
    assert set(per_record) == expected(10)
    assert all(sorted(ds) == [1, 2, 3] for ds in per_record.values()), per_record
