"""acks=all at replication factor 3 as librdkafka's 0142_reauthentication produces (200 records/s,
one record a request with linger.ms=5, one partition), on a three-node cluster (three `kcoord
serve` processes and ZooKeeper, kcoord.testing.cluster) that holds more and more other,
idle, replicated partitions: each follower's replica fetcher names every partition it follows
in every Fetch (full fetches, no KIP-227 session), so each round of acks=all costs more CPU on
every node as the cluster holds more partitions. The ceiling, in the same run on the same
cluster: acks=1 to the same leader (no follower round trip).

Columns: latency from produce() to the delivery report (p50, p90, p99), and the CPU seconds
the three nodes used per 1,000 records (user + system, /proc). 0142 re-authenticates 1 s
before its session ends and its SaslHandshake waits behind the connection's Produce requests,
so when acks=all takes longer than the 5 ms between requests for long enough, the backlog
passes 1 s and the session expires first.

Usage: python bench/bench_acks_all_partitions.py [--records 1000] [--steps 0,150,300]
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from confluent_kafka import Producer  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

from bench._util import process_cpu_s, table  # noqa: E402
from kcoord.testing.cluster import KcoordCluster  # noqa: E402

RATE = 200  # records/s, as 0142-reauthentication.c's msgrate


def produce(bootstrap: str, topic: str, acks: str, n: int) -> list[float]:
    p = Producer({"bootstrap.servers": bootstrap, "acks": acks, "linger.ms": 5})
    p.produce(topic, b"warm-up")
    p.flush(30)
    lat: list[float] = []
    start = time.monotonic()
    for i in range(n):
        due = start + i / RATE
        while time.monotonic() < due:
            p.poll(max(0.0, due - time.monotonic()))
        sent = time.monotonic()
        p.produce(topic, b"x" * 100, on_delivery=lambda err, msg, sent=sent: lat.append((time.monotonic() - sent) * 1000))
    assert p.flush(120) == 0
    return sorted(lat)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=1000)
    ap.add_argument("--steps", default="0,150,300", help="idle RF3 partitions added before each row")
    args = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as d:
        cluster = KcoordCluster(Path(d), nodes=3, overrides={"default.replication.factor": "3"}).start()
        try:
            pids = [cluster.node(i).proc.pid for i in (1, 2, 3)]
            admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
            held = 0
            for step, extra in enumerate(int(s) for s in args.steps.split(",")):
                if extra > held:
                    new = [NewTopic(f"idle-{step}-{i}", 10, 3) for i in range((extra - held) // 10)]
                    for f in admin.create_topics(new).values():
                        f.result(120)
                    held = extra
                    time.sleep(3)  # the followers' fetchers take the new partitions up
                topic = f"probe-{step}"
                for f in admin.create_topics([NewTopic(topic, 1, 3)]).values():
                    f.result(60)
                for acks in ("all", "1"):
                    cpu0 = sum(process_cpu_s(p) for p in pids)
                    lat = produce(cluster.bootstrap, topic, acks, args.records)
                    cpu = sum(process_cpu_s(p) for p in pids) - cpu0

                    def q(f: float, lat: list[float] = lat) -> str:
                        return f"{lat[int(f * (len(lat) - 1))]:.1f}"

                    rows.append([held, "acks=all (RF3)" if acks == "all" else "acks=1 (ceiling)", q(.5), q(.9), q(.99),
                                 f"{cpu / args.records * 1000:.2f}", f"{os.getloadavg()[0]:.1f}"])
        finally:
            cluster.close()
    print(table(["other partitions", "acks", "p50 ms", "p90 ms", "p99 ms", "node CPU s / 1k records", "load"], rows))


if __name__ == "__main__":
    main()
