"""Moves through the control API on a three-node cluster (docs/cluster.md, "Moving leaders and
coordinators"): how long `POST /partitions/T/P/leader` and `POST /groups/G/coordinator` take
from the request to their answer (the target leads; for a group, it has loaded the group and
answers OffsetFetch), round robin over the nodes, each asked of a node that is not the target.

Beside them, measured in the same run: a control call that changes nothing (GET /status, the
HTTP round trip) and a move to the node that already leads (the checks: ZooKeeper reads, no
reorder, no election), the floor under every move.
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
from confluent_kafka import Consumer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

from kcoord.protocol.partitioner import partition_for  # noqa: E402
from kcoord.testing.cluster import KcoordCluster, wait_for  # noqa: E402


def timed(fn, *args, **kw) -> float:  # noqa: ANN001, ANN002, ANN003
    start = time.perf_counter()
    fn(*args, **kw)
    return time.perf_counter() - start


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--commits", type=int, default=500, help="offset commits the moved group's partition holds")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-moves-") as d:
        cluster = KcoordCluster(Path(d), 3, control=True)
        try:
            cluster.start()
            topic, group = f"moves-{uuid.uuid4().hex[:8]}", f"g-{uuid.uuid4().hex[:8]}"
            admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
            admin.create_topics([NewTopic(topic, 1, 3)])[topic].result(30)
            p = partition_for(group, 50)
            cluster.coordinator_topics()  # __consumer_offsets: created at the first FindCoordinator
            wait_for(lambda: len((cluster.state(topic, 0) or {}).get("isr", [])) == 3
                     and len((cluster.state("__consumer_offsets", p) or {}).get("isr", [])) == 3, 60, "full ISRs")
            consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": group, "enable.auto.commit": False})
            consumer.assign([TopicPartition(topic, 0, 0)])
            for i in range(args.commits):
                consumer.commit(offsets=[TopicPartition(topic, 0, i + 1)], asynchronous=False)
            consumer.close()
            status, noop, leader, coordinator = [], [], [], []
            for _ in range(args.rounds):
                now = cluster.state(topic, 0)["leader"]
                status.append(timed(cluster.control(now).status))
                noop.append(timed(cluster.move_leader, topic, 0, now, via=now))
                target = next(i for i in sorted(cluster.nodes) if i != now)
                leader.append(timed(cluster.move_leader, topic, 0, target, via=now))
                held = cluster.state("__consumer_offsets", p)["leader"]
                to = next(i for i in sorted(cluster.nodes) if i != held)
                coordinator.append(timed(cluster.move_coordinator, group, to, via=held))
        finally:
            cluster.close()

    def row(name: str, xs: list[float]) -> list[object]:
        return [name, f"{statistics.median(xs) * 1000:.1f}", f"{max(xs) * 1000:.1f}"]

    print(f"Control API moves on 3 local nodes, {args.rounds} rounds, the group's partition holding "
          f"{args.commits} commits (milliseconds; {os.cpu_count()} cores)")
    print(table(["control call", "median ms", "max ms"], [
        row("GET /status (floor: the HTTP round trip)", status),
        row("move_leader to the node that leads (floor: the checks)", noop),
        row("move_leader to another node (reorder + preferred election)", leader),
        row("move_coordinator to another node (+ the group loaded there)", coordinator),
    ]))


if __name__ == "__main__":
    main()
