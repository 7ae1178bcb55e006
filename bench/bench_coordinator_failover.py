"""Group coordinator failover on a three-node cluster (docs/cluster.md, Coordinators): a
confluent-kafka consumer in a group commits; the node leading the group's __consumer_offsets
partition is SIGKILLed; measured from the signal to the next commit the member gets
acknowledged (by the new leader, after it has loaded the partition and the member has found
it and rejoined). Each round is a new cluster: without replication (server/replication/) a
killed node does not rejoin any ISR, so a cluster survives only one such round cleanly.

The floor measured in the same run: from the signal until the state znode names the
partition's new leader (the session timeout and the controller's election), which no
coordinator failover through ZooKeeper can beat. The clients' own retry settings add to it:
librdkafka looks for a coordinator again after coordinator errors, and a member whose group
is unknown to the new coordinator rejoins.
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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--rounds", type=int, default=5)
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


if __name__ == "__main__":
    main()
