"""acks=all through replication: one partition with three replicas (three kcoord nodes in this
process, one event loop, real sockets between them; followers fetch from the leader) against
the same partition on one node without replication (the ceiling), in the same run.

A confluent-kafka idempotent producer (acks=all, linger.ms=0) sends N records of 100 bytes to
the leader with at most --in-flight unacknowledged at a time; the table gives records/s and the
latency from produce() to its delivery report (p50, p99). The three nodes share this process's
one core with the client's threads, so the ratio is a floor on what separate processes give.
The replica states come from a stand-in for the controller (server/replication's `apply`).

Usage: python bench/bench_replication.py [--records 20000] [--in-flight 100] [--rounds 3]
"""
from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kcoord.server.app import Server  # noqa: E402
from kcoord.server.cluster.partition_state import PartitionState  # noqa: E402
from kcoord.server.config import Config  # noqa: E402
from kcoord.server.node import replica_manager_for  # noqa: E402
from kcoord.server.replication.replica_manager import ReplicationSettings  # noqa: E402

TOPIC = "bench-rep"


async def start(root: Path, replicated: bool) -> tuple[list[Server], str]:
    ids = (1, 2, 3) if replicated else (1,)
    servers = []
    state: dict[str, PartitionState] = {}

    async def alter_isr(sent: PartitionState, isr: tuple[int, ...]) -> PartitionState | None:
        cur = state["p"]
        if sent.zk_version != cur.zk_version:
            return None
        state["p"] = replace(cur, isr=isr, zk_version=cur.zk_version + 1)
        return state["p"]

    for nid in ids:
        srv = Server(Config({"log.dirs": str(root / f"node{nid}"), "node.id": nid,
                             "listeners": "PLAINTEXT://127.0.0.1:0", "offsets.topic.num.partitions": 1}))
        await srv.start()
        srv.broker.create_topic(TOPIC, 1, {"min.insync.replicas": "2" if replicated else "1"})
        servers.append(srv)
    if replicated:
        endpoints = {nid: srv.bound[0][:2] for nid, srv in zip(ids, servers, strict=True)}
        state["p"] = PartitionState(TOPIC, 0, leader=1, leader_epoch=0, isr=ids, replicas=ids,
                                    controller_epoch=1, zk_version=0)
        for srv in servers:
            rm = replica_manager_for(srv.broker, alter_isr, ReplicationSettings())
            srv.broker.replicas = rm
            rm.start()
            rm.apply([state["p"]], endpoints)
    host, port = servers[0].bound[0][:2]
    return servers, f"{host}:{port}"


async def stop(servers: list[Server]) -> None:
    for srv in servers:
        rm = srv.broker.__dict__.get("replicas")
        if rm is not None:
            await rm.stop()
    for srv in servers:
        await srv.stop()


def produce(bootstrap: str, n: int, in_flight: int) -> tuple[float, list[float]]:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True, "linger.ms": 0,
                  "message.timeout.ms": 60000})
    latencies: list[float] = []
    errors: list = []
    pending = [0]

    def report(err, _msg, sent: float) -> None:
        pending[0] -= 1
        if err is not None:
            errors.append(err)
        latencies.append(time.perf_counter() - sent)

    value = b"x" * 100
    p.produce(TOPIC, value, partition=0)  # connection and idempotence set-up outside the window
    p.flush(30)
    start = time.perf_counter()
    for _ in range(n):
        while pending[0] >= in_flight:
            p.poll(0.01)
        sent = time.perf_counter()
        pending[0] += 1
        p.produce(TOPIC, value, partition=0, on_delivery=lambda e, m, s=sent: report(e, m, s))
        p.poll(0)
    p.flush(60)
    elapsed = time.perf_counter() - start
    if errors or len(latencies) != n:
        raise RuntimeError(f"{len(errors)} errors, {n - len(latencies)} undelivered: {errors[:3]}")
    return elapsed, latencies


async def one_round(replicated: bool, n: int, in_flight: int) -> tuple[float, float, float]:
    with tempfile.TemporaryDirectory() as tmp:
        servers, bootstrap = await start(Path(tmp), replicated)
        try:
            elapsed, lat = await asyncio.to_thread(produce, bootstrap, n, in_flight)
        finally:
            await stop(servers)
    lat.sort()
    return n / elapsed, lat[len(lat) // 2] * 1000, lat[int(len(lat) * 0.99)] * 1000


async def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=20000)
    ap.add_argument("--in-flight", type=int, default=100)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    rows: dict[str, list[tuple[float, float, float]]] = {"one node, no replication (ceiling)": [],
                                                          "3 replicas, ISR 3, min.insync 2": []}
    for _ in range(args.rounds):  # alternate, so load from elsewhere hits both alike
        rows["one node, no replication (ceiling)"].append(await one_round(False, args.records, args.in_flight))
        rows["3 replicas, ISR 3, min.insync 2"].append(await one_round(True, args.records, args.in_flight))
    print(f"{args.records:,} records of 100 B, acks=all, idempotent, at most {args.in_flight} in flight; "
          f"medians of {args.rounds} rounds")
    print(f"{'setup':>36} | {'records/s':>9} | {'of ceiling':>10} | {'p50 ms':>7} | {'p99 ms':>7}")
    print("-" * 37 + "+" + "-" * 11 + "+" + "-" * 12 + "+" + "-" * 9 + "+" + "-" * 8)
    ceiling = statistics.median(r[0] for r in rows["one node, no replication (ceiling)"])
    for name, rs in rows.items():
        rate = statistics.median(r[0] for r in rs)
        p50 = statistics.median(r[1] for r in rs)
        p99 = statistics.median(r[2] for r in rs)
        print(f"{name:>36} | {rate:>9,.0f} | {rate / ceiling:>9.0%} | {p50:>7.2f} | {p99:>7.2f}")


if __name__ == "__main__":
    asyncio.run(main())
