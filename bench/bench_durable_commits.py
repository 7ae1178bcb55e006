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

import os
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _commits import cluster_run, commit_request, measure, pct  # noqa: E402
from _util import SyncClient, closed_loop_args, create_topic, encode_request, start_bare, start_kcoord, table  # noqa: E402
from kafka.protocol.consumer import OffsetFetchRequest  # noqa: E402
from kafka.protocol.metadata import FindCoordinatorRequest  # noqa: E402

from kcoord.testing.cluster import KcoordCluster, wait_for  # noqa: E402

GROUP = "bench-durable"
TOPIC = "bench-durable-topic"
OFFSETS = "__consumer_offsets"


def commit_frame(partition: int, offset: int) -> bytes:
    return encode_request(commit_request(GROUP, TOPIC, partition, offset), 8, correlation_id=partition)


def prepare(port: int, partitions: int) -> None:
    """The commits' topic exists and a commit of the group is acknowledged on `port`."""
    create_topic(port, TOPIC, partitions, timeout_ms=30000, exists_ok=True)
    c = SyncClient(port)
    wait_for(lambda: c.call(commit_request(GROUP, TOPIC, 0, 1), 8).topics[0].partitions[0].error_code == 0,
             120, "a first acknowledged commit")
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


def main() -> None:
    ap = closed_loop_args()
    args = ap.parse_args()
    frames = [commit_frame(i, 1000 + i) for i in range(args.connections)]
    with cluster_run("bench-durable-") as (root, zk, procs, clusters):
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
                rate, lat, _, _ = measure([(port, f) for f in frames], args.seconds)
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


if __name__ == "__main__":
    main()
