"""Scaling across nodes: aggregate durable OffsetCommit throughput of a 2-node kcoord cluster vs
a 1-node cluster under the same load, with offsets.topic.replication.factor=1 (each node leads,
and so coordinates, about half of the __consumer_offsets partitions). The groups are chosen by
FindCoordinator on the 2-node cluster so that half of them are coordinated by each node; every
connection commits (standalone commits, acknowledged after the local fdatasync) to its own
group's coordinator, one request outstanding each. The 1-node cluster gets the same groups and
the same connections. The ceiling, measured in the same run with the same frames split the same
way: two bare uvloop append+fdatasync servers (group commit) in parallel vs one. Each process is
single-threaded for its event loop, so two nodes can use both cores; the load generator (one
uvloop process) and ZooKeeper share those cores too, and the table shows every process's CPU
use during the measured windows. The four setups run alternately, so machine noise hits each
alike; the ratio is the 2-node median over the 1-node median, with the median of the
per-round ratios beside it. __consumer_offsets of the 2-node cluster is written (partitions
alternating between the nodes) before the nodes start: a controller creates an internal topic
as soon as replication-factor nodes are live, so with factor 1 the first node would get it all.

Usage: python bench/bench_cluster_scaling.py [--connections 100] [--groups-per-node 2]
                                             [--seconds 3] [--rounds 3]
"""
from __future__ import annotations

import os
import statistics
import sys
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _commits import cluster_run, commit_request, measure, pct  # noqa: E402
from _util import SyncClient, closed_loop_args, create_topic, encode_request, start_bare, table  # noqa: E402
from kafka.protocol.metadata import FindCoordinatorRequest  # noqa: E402

from kcoord.testing.cluster import KcoordCluster, wait_for  # noqa: E402

TOPIC = "bench-scaling-topic"
OFFSETS = "__consumer_offsets"


def offsets_ready(cluster: KcoordCluster) -> None:
    cluster.coordinator_topics()  # the first FindCoordinator creates __consumer_offsets
    wait_for(lambda: (a := cluster.assignment(OFFSETS)) and all(
        (s := cluster.state(OFFSETS, p)) and s.get("leader", -1) in cluster.nodes for p in a),
        120, "__consumer_offsets led")


def precreate_offsets(connect: str, chroot: str, nodes: list[int], partitions: int = 50) -> None:
    """__consumer_offsets with its partitions alternating between `nodes`, written before any node
    starts (Kafka's admin path: the config znode, then the topic znode). A cluster's controller
    creates the topic itself as soon as offsets.topic.replication.factor nodes are live, which
    with replication factor 1 is the first node alone, so every partition would land on it."""
    import uuid

    from kazoo.client import KazooClient

    from kcoord.server.cluster import znodes

    zk = KazooClient(hosts=connect)
    zk.start()
    try:
        a = znodes.TopicAssignment(OFFSETS, uuid.uuid4(), {p: (nodes[p % len(nodes)],) for p in range(partitions)})
        zk.ensure_path(chroot + znodes.CONFIG_TOPICS)
        zk.ensure_path(chroot + znodes.TOPICS)
        zk.create(f"{chroot}{znodes.CONFIG_TOPICS}/{OFFSETS}", znodes.encode_topic_config(
            {"cleanup.policy": "compact", "compression.type": "producer", "segment.bytes": "104857600"}))
        zk.create(chroot + znodes.topic_path(OFFSETS), znodes.encode_topic(a))
    finally:
        zk.stop()
        zk.close()


def coordinator(port: int, group: str) -> int:
    c = SyncClient(port)
    try:
        r = wait_for(lambda: (x := c.call(FindCoordinatorRequest(key=group, key_type=0), 3)).error_code == 0 and x,
                     60, f"the coordinator of {group}")
    finally:
        c.close()
    return r.port


def spread_groups(cluster: KcoordCluster, per_node: int) -> dict[str, int]:
    """Group ids whose coordinators are spread evenly: `per_node` on each node, with their port."""
    any_node = next(iter(cluster.nodes.values())).port
    chosen: dict[str, int] = {}
    count = {n.port: 0 for n in cluster.nodes.values()}
    i = 0
    while any(v < per_node for v in count.values()):
        if i >= 1000:
            leaders = {p: (cluster.state(OFFSETS, p) or {}).get("leader") for p in cluster.assignment(OFFSETS) or {}}
            raise RuntimeError(f"no spread of coordinators after {i} group ids: {OFFSETS} leaders {leaders}")
        g = f"bench-scaling-{i}"
        i += 1
        port = coordinator(any_node, g)
        if count[port] < per_node:
            count[port] += 1
            chosen[g] = port
    return chosen


def prepare(port: int, groups: list[str], partitions: int) -> None:
    """The commits' topic exists and a commit of every group is acknowledged on `port`."""
    create_topic(port, TOPIC, partitions, timeout_ms=30000, exists_ok=True)
    for g in groups:
        gc = SyncClient(coordinator(port, g))
        first = commit_request(g, TOPIC, 0, 1)
        wait_for(lambda gc=gc, first=first: gc.call(first, 8).topics[0].partitions[0].error_code == 0,
                 120, f"a first acknowledged commit of {g}")
        gc.close()


def main() -> None:
    ap = closed_loop_args()
    ap.add_argument("--groups-per-node", type=int, default=2)
    args = ap.parse_args()
    warnings.filterwarnings("ignore", message="No chroot path exists")  # kazoo, before the nodes make it
    with cluster_run("bench-scaling-") as (root, zk, procs, clusters):
        overrides = {"offsets.topic.replication.factor": "1", "log.level": "WARNING"}
        two = KcoordCluster(root / "two", 2, zookeeper=f"{zk.connect}/two", overrides=overrides)
        one = KcoordCluster(root / "one", 1, zookeeper=f"{zk.connect}/one", overrides=overrides)
        clusters += [two, one]
        precreate_offsets(zk.connect, "/two", two.ids)
        two.start()
        one.start()
        for cluster in (two, one):  # the first FindCoordinator creates __consumer_offsets: on every node
            wait_for(lambda c=cluster: len(c.registered()) == c.count, 120, "every node registered")
            coordinator(next(iter(cluster.nodes.values())).port, "bench-scaling-probe")
            offsets_ready(cluster)
        groups = spread_groups(two, args.groups_per_node)
        names = sorted(groups)
        prepare(next(iter(two.nodes.values())).port, names, args.connections)
        one_port = next(iter(one.nodes.values())).port
        prepare(one_port, names, args.connections)
        # connection i commits partition i of group i mod G: the same frames for every setup
        frames = [(g, encode_request(commit_request(g, TOPIC, i, 1000 + i), 8, correlation_id=i))
                  for i, g in ((i, names[i % len(names)]) for i in range(args.connections))]
        (root / "bare1").mkdir()
        (root / "bare2").mkdir()
        (root / "bare3").mkdir()
        bare_one, bare_one_port = start_bare("append", str(root / "bare1"))
        bare_a, bare_a_port = start_bare("append", str(root / "bare2"))
        bare_b, bare_b_port = start_bare("append", str(root / "bare3"))
        procs += [bare_one, bare_a, bare_b]
        two_ports = sorted({p for p in groups.values()})
        bare_of = {two_ports[0]: bare_a_port, two_ports[1]: bare_b_port}
        pid_of = {n.port: n.proc.pid for n in two.nodes.values()}
        setups = [
            ("bare append+fdatasync, 1 process (ceiling)", [(bare_one_port, f) for _, f in frames], [bare_one.pid]),
            ("bare append+fdatasync, 2 processes (ceiling)",
             [(bare_of[groups[g]], f) for g, f in frames], [bare_a.pid, bare_b.pid]),
            ("kcoord, 1 node", [(one_port, f) for _, f in frames], [one.nodes[one.ids[0]].proc.pid]),
            ("kcoord, 2 nodes", [(groups[g], f) for g, f in frames], list(pid_of.values())),
        ]
        rates: dict[str, list[float]] = {s[0]: [] for s in setups}
        lats: dict[str, list[float]] = {s[0]: [] for s in setups}
        cpus: dict[str, list[tuple[float, float]]] = {s[0]: [] for s in setups}
        for _ in range(args.rounds):
            for name, targets, pids in setups:
                rate, lat, server_cpu, gen_cpu = measure(targets, args.seconds, pids)
                rates[name].append(rate)
                lats[name].extend(lat)
                cpus[name].append((server_cpu, gen_cpu))
        print(f"Durable OffsetCommit v8, {len(names)} groups ({args.groups_per_node} coordinated by each node of "
              f"the 2-node cluster), {args.connections} connections, one request outstanding each, "
              f"offsets.topic.replication.factor=1, {args.rounds} alternating runs of {args.seconds:g} s "
              f"({os.cpu_count()} cores; every process, the load generator and ZooKeeper share them)")
        med = {k: statistics.median(v) for k, v in rates.items()}
        print(table(["setup", "commits/s (median)", "p50 ms", "p99 ms", "server CPU (cores)", "load gen CPU",
                     "samples"], [
            [name, med[name], f"{pct(lats[name], 0.5):.1f}", f"{pct(lats[name], 0.99):.1f}",
             f"{statistics.median(c for c, _ in cpus[name]):.2f}",
             f"{statistics.median(g for _, g in cpus[name]):.2f}",
             " ".join(f"{x:,.0f}" for x in rates[name])] for name, _, _ in setups]))
        ceiling = med[setups[1][0]] / med[setups[0][0]]
        kcoord = med[setups[3][0]] / med[setups[2][0]]
        paired = statistics.median(a / b for a, b in zip(rates[setups[3][0]], rates[setups[2][0]], strict=True))
        paired_ceiling = statistics.median(a / b for a, b in zip(rates[setups[1][0]], rates[setups[0][0]], strict=True))
        print(f"2 nodes / 1 node: {kcoord:.2f}x the commits/s (the ceiling's 2 processes / 1: {ceiling:.2f}x); "
              f"median of the per-round ratios: {paired:.2f}x (ceiling {paired_ceiling:.2f}x)")


if __name__ == "__main__":
    main()
