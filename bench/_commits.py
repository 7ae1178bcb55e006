"""Shared pieces of the durable-commit benchmarks (bench_commit.py, bench_durable_commits.py,
bench_cluster_scaling.py): standalone OffsetCommit requests, and a closed-loop load generator
that records each answer's latency, optionally with the servers' CPU use over the measured
window; and the temporary directory of a benchmark on kcoord clusters."""
from __future__ import annotations

import asyncio
import contextlib
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from _util import process_cpu_s, stop, take_frames
from kafka.protocol.consumer import OffsetCommitRequest

if TYPE_CHECKING:
    from kcoord.server.cluster.zookeeper_server import ZooKeeperServer
    from kcoord.testing.cluster import KcoordCluster


def commit_request(group: str, topic: str, partition: int, offset: int) -> OffsetCommitRequest:
    """A standalone commit (generation -1, no member) of one partition's offset."""
    T = OffsetCommitRequest.OffsetCommitRequestTopic
    P = T.OffsetCommitRequestPartition
    return OffsetCommitRequest(
        group_id=group, generation_id_or_member_epoch=-1, member_id="", group_instance_id=None,
        topics=[T(name=topic, partitions=[P(partition_index=partition, committed_offset=offset,
                                            committed_leader_epoch=-1, committed_metadata="")])])


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


async def _run(targets: list[tuple[int, bytes]], seconds: float, warmup: float,
               server_pids: list[int]) -> tuple[float, list[float], float, float]:
    loop = asyncio.get_running_loop()
    latencies: list[float] = []
    start = time.monotonic()
    measure_from, stop_at = start + warmup, start + warmup + seconds
    conns = [(await loop.create_connection(lambda f=f: _Timed(f, latencies, stop_at, measure_from),
                                           "127.0.0.1", port))[1] for port, f in targets]
    await asyncio.sleep(max(0.0, measure_from - time.monotonic()))
    cpu0, me0 = sum(process_cpu_s(p) for p in server_pids), time.process_time()
    await asyncio.sleep(max(0.0, stop_at - time.monotonic()))
    cpu1, me1 = sum(process_cpu_s(p) for p in server_pids), time.process_time()
    rate = sum(c.answered for c in conns) / seconds
    await asyncio.wait([c.done for c in conns], timeout=30)
    for c in conns:
        c.transport.close()
    return rate, latencies, (cpu1 - cpu0) / seconds, (me1 - me0) / seconds


def measure(targets: list[tuple[int, bytes]], seconds: float,
            server_pids: list[int] | None = None) -> tuple[float, list[float], float, float]:
    """One connection per (port, frame), each with one request outstanding, for `seconds` after
    a second of warm-up: (answers per second, every answer's latency in seconds, the CPU cores
    the `server_pids` used, the CPU cores this load generator used) over the measured window."""
    import uvloop

    return uvloop.run(_run(targets, seconds, 1.0, server_pids or []))


def pct(xs: list[float], q: float) -> float:
    """The q-quantile of latencies `xs` (seconds), in milliseconds."""
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))] * 1000


@contextlib.contextmanager
def cluster_run(prefix: str) -> Iterator[tuple[Path, ZooKeeperServer, list[subprocess.Popen[bytes]],
                                               list[KcoordCluster]]]:
    """(root, zk, procs, clusters): a new temporary directory with a ZooKeeper running in it,
    and the lists the benchmark adds its server processes and kcoord clusters to; on the way
    out every cluster is closed, every process stopped, ZooKeeper stopped and the directory
    removed."""
    from kcoord.server.cluster.zookeeper_server import ZooKeeperServer

    root = Path(tempfile.mkdtemp(prefix=prefix))
    zk = ZooKeeperServer(root / "zookeeper").start()
    procs: list[subprocess.Popen[bytes]] = []
    clusters: list[KcoordCluster] = []
    try:
        yield root, zk, procs, clusters
    finally:
        for cluster in clusters:
            cluster.close()
        for p in procs:
            stop(p)
        zk.stop()
        shutil.rmtree(root, ignore_errors=True)
