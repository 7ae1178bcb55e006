"""Group coordinator failover on a three-node cluster (docs/cluster.md, Coordinators).

1. From SIGKILL of the coordinator's node to the group's next acknowledged commit: a
   confluent-kafka consumer in a group commits (every commit waits for the in-sync replicas:
   offsets.commit.required.acks -1); the node leading the group's __consumer_offsets partition
   is SIGKILLed; measured from the signal to the next commit the member gets acknowledged (by
   the new leader, after it has loaded the partition and the member has found it). Each round
   is a new cluster. The floor measured in the same run: from the signal until the state znode
   names the partition's new leader (the ZooKeeper session timeout, then the controller's
   election), which no coordinator failover through ZooKeeper can beat. The clients' own retry
   settings are printed beside it: librdkafka looks for the coordinator again after a
   coordinator error or a lost connection, backing off up to retry.backoff.max.ms.
2. Group load on a new leader: 100,000 committed offsets (1,000 groups of one
   __consumer_offsets partition, 100 partitions each) are committed, the partition's leader is
   SIGKILLed, and the new leader's load of the partition (its log line: records, ms) is set
   beside the start-up load of the same log (the server's loading path, CoordinatorRuntime,
   on a copy of the new leader's replica, in this process), in the same run.

Usage: python bench/bench_coordinator_failover.py [--rounds 10] [--offsets 100000]
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _util import table  # noqa: E402
from confluent_kafka import Consumer, KafkaException, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

from kcoord.protocol.partitioner import partition_for  # noqa: E402
from kcoord.testing.cluster import KcoordCluster, wait_for  # noqa: E402

OFFSETS = "__consumer_offsets"


def commit(consumer: Consumer, tp: TopicPartition, deadline_s: float) -> None:
    deadline = time.monotonic() + deadline_s
    while True:
        consumer.poll(0.05)
        try:
            consumer.commit(offsets=[tp], asynchronous=False)
            return
        except KafkaException:
            if time.monotonic() > deadline:
                raise


def one_round(directory: Path, session_ms: int) -> tuple[float, float]:
    """(seconds from SIGKILL until the state znode names a new leader, until the next commit
    is acknowledged)."""
    cluster = KcoordCluster(directory, 3, session_timeout_ms=session_ms,
                            overrides={"auto.leader.rebalance.enable": "false"})
    try:
        cluster.start()
        cluster.coordinator_topics()  # the first FindCoordinator creates __consumer_offsets
        wait_for(lambda: (a := cluster.assignment(OFFSETS)) and all(
            (cluster.state(OFFSETS, p) or {}).get("leader", -1) > 0 for p in a), 60, "__consumer_offsets leaders")
        topic = f"cfail-{uuid.uuid4().hex[:8]}"
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})  # referenced until the result
        admin.create_topics([NewTopic(topic, 1, 3)])[topic].result(30)
        group = f"g-{uuid.uuid4().hex[:8]}"
        p = partition_for(group, 50)
        consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": group, "enable.auto.commit": False,
                             "session.timeout.ms": 10000, "auto.offset.reset": "earliest"})
        try:
            consumer.subscribe([topic])
            wait_for(lambda: consumer.poll(0.1) is None and consumer.assignment(), 60, "the assignment")
            commit(consumer, TopicPartition(topic, 0, 1), 30)
            old = cluster.state(OFFSETS, p)["leader"]
            start = time.monotonic()
            cluster.kill(old)
            moved = None
            offset = 2
            deadline = start + 120
            while True:  # commits keep being tried, as an application's would
                if moved is None and cluster.state(OFFSETS, p)["leader"] not in (old, -1):
                    moved = time.monotonic() - start
                consumer.poll(0.05)
                try:
                    consumer.commit(offsets=[TopicPartition(topic, 0, offset)], asynchronous=False)
                    if moved is not None:
                        break
                except KafkaException:
                    if time.monotonic() > deadline:
                        raise
                offset += 1
            acked = time.monotonic() - start
            assert cluster.state(OFFSETS, p)["leader"] not in (old, -1)
            return moved, acked
        finally:
            consumer.close()
    finally:
        cluster.close()


# the member's settings: given below or librdkafka's defaults (2.x)
CLIENT_RETRY = {"session.timeout.ms": 10000, "heartbeat.interval.ms": 3000, "retry.backoff.ms": 100,
                "retry.backoff.max.ms": 1000, "reconnect.backoff.ms": 100, "reconnect.backoff.max.ms": 10000,
                "socket.timeout.ms": 60000, "coordinator.query.interval.ms": 600000}


def _commit_many(port: int, groups: list[str], topic: str, partitions: int) -> None:
    """Each group commits every partition of `topic` (standalone commits), acknowledged."""
    from _util import SyncClient
    from kafka.protocol.consumer import OffsetCommitRequest

    T = OffsetCommitRequest.OffsetCommitRequestTopic
    c = SyncClient(port)
    try:
        for i, g in enumerate(groups):
            req = OffsetCommitRequest(group_id=g, generation_id_or_member_epoch=-1, member_id="", group_instance_id=None,
                                      topics=[T(name=topic, partitions=[T.OffsetCommitRequestPartition(
                                          partition_index=p, committed_offset=1000 + i, committed_leader_epoch=-1,
                                          committed_metadata="") for p in range(partitions)])])
            r = c.call(req, 8)
            assert all(q.error_code == 0 for t in r.topics for q in t.partitions), r
    finally:
        c.close()


def _startup_load_ms(replica_dir: Path, work: Path) -> float:
    """The server's start-up load (CoordinatorRuntime.load_all) of a copy of one partition."""
    import logging
    import shutil

    import uvloop

    from kcoord.server.clock import SystemClock
    from kcoord.server.coordinator.runtime import CoordinatorRuntime
    from kcoord.server.group.config import GroupConfig
    from kcoord.server.group.coordinator import GroupCoordinator
    from kcoord.server.group.shard import OffsetsRecords
    from kcoord.storage.log_manager import LogManager

    shutil.copytree(replica_dir, work / replica_dir.name)

    async def load() -> float:
        logs = LogManager(str(work))
        coord = GroupCoordinator(GroupConfig(), SystemClock(), 50)
        runtime = CoordinatorRuntime(lambda _: coord, OffsetsRecords(50), logs, SystemClock(), 5000, 1048588)
        t = time.perf_counter()
        await runtime.load_all()
        elapsed = time.perf_counter() - t
        logs.close()
        return elapsed * 1000

    logging.disable(logging.INFO)
    try:
        return uvloop.run(load())
    finally:
        logging.disable(logging.NOTSET)


def load_round(directory: Path, session_ms: int, offsets: int) -> tuple[int, float, float]:
    """(records in the partition's log, the new leader's load in ms, the start-up load in ms)."""
    import re

    partitions = 100
    groups_needed = max(1, offsets // partitions)
    cluster = KcoordCluster(directory / "cluster", 3, session_timeout_ms=session_ms,
                            overrides={"auto.leader.rebalance.enable": "false"})
    try:
        cluster.start()
        cluster.coordinator_topics()  # the first FindCoordinator creates __consumer_offsets
        wait_for(lambda: (a := cluster.assignment(OFFSETS)) and all(
            len((cluster.state(OFFSETS, p) or {}).get("isr", ())) == 3 for p in a), 120, "__consumer_offsets ISR")
        topic = f"cload-{uuid.uuid4().hex[:8]}"
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(30)
        p = partition_for("cload-0", 50)
        groups = [g for g in (f"cload-{i}" for i in range(groups_needed * 60)) if partition_for(g, 50) == p]
        groups = groups[:groups_needed]
        assert len(groups) == groups_needed
        leader = cluster.state(OFFSETS, p)["leader"]
        wait_for(lambda: topic in admin.list_topics(topic, timeout=10).topics, 30, "the topic")
        _commit_many(cluster.node(leader).port, groups, topic, partitions)
        cluster.kill(leader)
        new = wait_for(lambda: (s := cluster.state(OFFSETS, p))["leader"] not in (leader, -1) and s["leader"],
                       120, "a new leader")
        pattern = re.compile(rf"Loaded {OFFSETS}-{p} in (\d+) ms: (\d+) records")
        m = wait_for(lambda: pattern.search(cluster.node(new).log_text()), 120, "the new leader's load")
        cluster_ms, n = float(m.group(1)), int(m.group(2))
        startup_ms = _startup_load_ms(cluster.node(new).log_dir / f"{OFFSETS}-{p}", directory / "copy")
        return n, max(cluster_ms, 1.0), startup_ms
    finally:
        cluster.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--offsets", type=int, default=100_000)
    ap.add_argument("--session-timeout-ms", type=int, default=6000)
    args = ap.parse_args()
    moved: list[float] = []
    acked: list[float] = []
    with tempfile.TemporaryDirectory(prefix="bench-coordfail-") as d:
        for i in range(args.rounds):
            m, a = one_round(Path(d) / f"round{i}", args.session_timeout_ms)
            moved.append(m)
            acked.append(a)

    def row(name: str, xs: list[float]) -> list[object]:
        return [name, f"{statistics.median(xs):.2f}", f"{max(xs):.2f}"]

    print(f"Group coordinator failover on 3 local nodes, zookeeper.session.timeout.ms={args.session_timeout_ms}, "
          f"{args.rounds} rounds (seconds; {os.cpu_count()} cores)")
    print(table(["from SIGKILL of the coordinator's node to", "median s", "max s"], [
        row("the state znode naming a new leader (floor)", moved),
        row("the member's next commit acknowledged (confluent-kafka)", acked),
    ]))
    print("the member's retry settings (librdkafka defaults unless set): " + ", ".join(
        f"{k}={v}" for k, v in CLIENT_RETRY.items()))
    print(f"what they allow: the floor + retry.backoff.max.ms = {statistics.median(moved) + 1.0:.2f} s (median), "
          f"{max(moved) + 1.0:.2f} s (max)")
    with tempfile.TemporaryDirectory(prefix="bench-coordload-") as d:
        n, cluster_ms, startup_ms = load_round(Path(d), args.session_timeout_ms, args.offsets)
    print()
    print(f"Group load on a new leader: {args.offsets:,} committed offsets in one __consumer_offsets partition "
          f"({n:,} records in its log)")
    print(table(["load of the partition", "ms", "records/s", "% of start-up"], [
        ["start-up load of the same log (ceiling: CoordinatorRuntime, in process)", f"{startup_ms:.0f}",
         f"{n / startup_ms * 1000:,.0f}", "100.0"],
        ["the new leader's load after the SIGKILL", f"{cluster_ms:.0f}", f"{n / cluster_ms * 1000:,.0f}",
         f"{100.0 * startup_ms / cluster_ms:.1f}"],
    ]))

if __name__ == "__main__":
    main()
