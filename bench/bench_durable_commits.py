"""Durable commits on a cluster: OffsetCommit from 100 connections (standalone commits of one
group, so every write lands in one __consumer_offsets partition and shares its fdatasyncs) to
the group's coordinator on three kcoord nodes through ZooKeeper, with
offsets.topic.replication.factor=3 (each commit answered once both followers have fetched it:
offsets.commit.required.acks -1) against replication factor 1 (answered after the local
fdatasync), in the same run. The ceilings, measured in the same run with the same frames: one
kcoord node without a cluster, and a bare uvloop server that appends the request bytes to a
file and fdatasyncs them with group commit. Throughput is the closed-loop rate (one request
outstanding per connection); latency is each request's time to its answer (p50, p99 over every
round). The servers run alternately, so machine noise hits each alike; every node of a cluster
shares the same cores as the load generator.

Usage: python bench/bench_durable_commits.py [--connections 100] [--seconds 3] [--rounds 3]
"""
from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _util import SyncClient, encode_request, start_bare, start_kcoord, stop, table, take_frames  # noqa: E402
from kafka.protocol.admin import CreateTopicsRequest  # noqa: E402
from kafka.protocol.consumer import OffsetCommitRequest, OffsetFetchRequest  # noqa: E402
from kafka.protocol.metadata import FindCoordinatorRequest  # noqa: E402

from kcoord.server.cluster.zookeeper_server import ZooKeeperServer  # noqa: E402
from kcoord.testing.cluster import KcoordCluster, wait_for  # noqa: E402

GROUP = "bench-durable"
TOPIC = "bench-durable-topic"
OFFSETS = "__consumer_offsets"


def commit_frame(partition: int, offset: int) -> bytes:
    T = OffsetCommitRequest.OffsetCommitRequestTopic
    P = T.OffsetCommitRequestPartition
    req = OffsetCommitRequest(
        group_id=GROUP, generation_id_or_member_epoch=-1, member_id="", group_instance_id=None,
        topics=[T(name=TOPIC, partitions=[P(partition_index=partition, committed_offset=offset,
                                            committed_leader_epoch=-1, committed_metadata="")])])
    return encode_request(req, 8, correlation_id=partition)


class _Timed(asyncio.Protocol):
    """One connection, one request outstanding: each answer's latency is recorded."""

    def __init__(self, frame: bytes, latencies: list[float], stop_at: float, measure_from: float) -> None:
        self.frame, self.latencies, self.stop_at, self.measure_from = frame, latencies, stop_at, measure_from
        self.buf = bytearray()
        self.sent = 0.0
        self.answered = 0
        self.done = asyncio.get_running_loop().create_future()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport
        self.sent = time.monotonic()
        transport.write(self.frame)  # type: ignore[attr-defined]

    def data_received(self, data: bytes) -> None:
        self.buf += data
        if take_frames(self.buf):
            now = time.monotonic()
            if now >= self.measure_from:
                self.latencies.append(now - self.sent)
                self.answered += 1
            if now < self.stop_at:
                self.sent = now
                self.transport.write(self.frame)  # type: ignore[attr-defined]
            elif not self.done.done():
                self.done.set_result(None)

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.done.done():
            self.done.set_result(None)


async def _run(port: int, frames: list[bytes], seconds: float, warmup: float) -> tuple[float, list[float]]:
    loop = asyncio.get_running_loop()
    latencies: list[float] = []
    start = time.monotonic()
    measure_from, stop_at = start + warmup, start + warmup + seconds
    conns = [(await loop.create_connection(lambda f=f: _Timed(f, latencies, stop_at, measure_from),
                                           "127.0.0.1", port))[1] for f in frames]
    await asyncio.sleep(max(0.0, stop_at - time.monotonic()))
    rate = sum(c.answered for c in conns) / seconds
    await asyncio.wait([c.done for c in conns], timeout=30)
    for c in conns:
        c.transport.close()
    return rate, latencies


def measure(port: int, frames: list[bytes], seconds: float) -> tuple[float, list[float]]:
    import uvloop

    return uvloop.run(_run(port, frames, seconds, 1.0))


def prepare(port: int, partitions: int) -> None:
    """The commits' topic exists and a commit of the group is acknowledged on `port`."""
    c = SyncClient(port)
    CT = CreateTopicsRequest.CreatableTopic
    r = c.call(CreateTopicsRequest(topics=[CT(name=TOPIC, num_partitions=partitions, replication_factor=1,
                                              assignments=[], configs=[])], timeout_ms=30000,
                                   validate_only=False), 5)
    assert r.topics[0].error_code in (0, 36), r  # 36: exists

    def committed() -> bool:
        T = OffsetCommitRequest.OffsetCommitRequestTopic
        req = OffsetCommitRequest(group_id=GROUP, generation_id_or_member_epoch=-1, member_id="",
                                  group_instance_id=None, topics=[T(name=TOPIC, partitions=[
                                      T.OffsetCommitRequestPartition(partition_index=0, committed_offset=1,
                                                                     committed_leader_epoch=-1,
                                                                     committed_metadata="")])])
        return c.call(req, 8).topics[0].partitions[0].error_code == 0

    wait_for(committed, 120, "a first acknowledged commit")
    c.close()


def cluster_coordinator(cluster: KcoordCluster, partitions: int) -> int:
    """The port of the group's coordinator, once __consumer_offsets is led and in full ISR."""
    rf = int(cluster.overrides["offsets.topic.replication.factor"])
    cluster.coordinator_topics()  # the first FindCoordinator creates __consumer_offsets
    wait_for(lambda: (a := cluster.assignment(OFFSETS)) and all(
        len((cluster.state(OFFSETS, p) or {}).get("isr", ())) == rf for p in a), 120, "__consumer_offsets in ISR")
    any_node = next(iter(cluster.nodes.values())).port
    c = SyncClient(any_node)
    r = wait_for(lambda: (x := c.call(FindCoordinatorRequest(key=GROUP, key_type=0), 3)).error_code == 0 and x,
                 60, "the coordinator")
    c.close()
    wait_for(lambda: SyncClient(r.port).call(OffsetFetchRequest(version=7, group_id=GROUP, topics=None,
                                                                require_stable=False), 7).error_code == 0,
             60, "the coordinator's load")
    prepare(r.port, partitions)
    return r.port


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))] * 1000


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--connections", type=int, default=100)
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    frames = [commit_frame(i, 1000 + i) for i in range(args.connections)]
    root = Path(tempfile.mkdtemp(prefix="bench-durable-"))
    zk = ZooKeeperServer(root / "zookeeper").start()
    procs = []
    clusters: list[KcoordCluster] = []
    try:
        (root / "bare").mkdir()
        bare, bare_port = start_bare("append", str(root / "bare"))
        procs.append(bare)
        single, single_port, _ = start_kcoord(log_dir=str(root / "single"))
        procs.append(single)
        prepare(single_port, args.connections)
        servers = [("bare uvloop append+fdatasync (ceiling)", bare_port),
                   ("kcoord, one node (no cluster)", single_port)]
        for rf in (1, 3):
            cluster = KcoordCluster(root / f"rf{rf}", 3, zookeeper=f"{zk.connect}/rf{rf}",
                                    overrides={"offsets.topic.replication.factor": str(rf),
                                               "log.level": "WARNING"})
            clusters.append(cluster)
            cluster.start()
            servers.append((f"kcoord, 3 nodes, offsets.topic.replication.factor={rf}",
                            cluster_coordinator(cluster, args.connections)))
        rates: dict[str, list[float]] = {name: [] for name, _ in servers}
        lats: dict[str, list[float]] = {name: [] for name, _ in servers}
        for _ in range(args.rounds):
            for name, port in servers:
                rate, lat = measure(port, frames, args.seconds)
                rates[name].append(rate)
                lats[name].extend(lat)
        ceiling = statistics.median(rates[servers[0][0]])
        print(f"Durable OffsetCommit v8, one group, {args.connections} connections, one request outstanding each, "
              f"{args.rounds} alternating runs of {args.seconds:g} s ({os.cpu_count()} cores; every process shares them)")
        print(table(["server", "commits/s (median)", "% of ceiling", "p50 ms", "p99 ms", "samples"], [
            [name, statistics.median(rates[name]), 100.0 * statistics.median(rates[name]) / ceiling,
             f"{pct(lats[name], 0.5):.1f}", f"{pct(lats[name], 0.99):.1f}",
             " ".join(f"{x:,.0f}" for x in rates[name])] for name, _ in servers]))
        r1 = statistics.median(rates[servers[2][0]])
        r3 = statistics.median(rates[servers[3][0]])
        print(f"replication factor 3 / 1: {100.0 * r3 / r1:.1f}% of the throughput; p99 "
              f"{pct(lats[servers[3][0]], 0.99):.1f} ms vs {pct(lats[servers[2][0]], 0.99):.1f} ms")
    finally:
        for cluster in clusters:
            cluster.close()
        for p in procs:
            stop(p)
        zk.stop()
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
