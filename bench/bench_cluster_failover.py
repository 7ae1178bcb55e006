"""Failover on a three-node cluster (docs/cluster.md): from the end of a partition's leader
(SIGKILL, or SIGTERM's controlled shutdown) to the moment the partition's state znode names a
new leader, and to the first acks=all write a confluent-kafka producer sends after that and
gets acknowledged (by the new leader: the old one no longer leads). Each round uses a new topic with replication
factor 3 (so every replica is in the ISR: nothing replicates yet), and restarts the node after.

The floor measured in the same run: how long ZooKeeper takes to end the session of a SIGKILLed
client with the same session timeout (a python process holding one ephemeral znode), which no
failover through ZooKeeper can beat. Target (issue 23): SIGKILL failover at most
zookeeper.session.timeout.ms + 1 s; a controlled shutdown's, immediate.
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _util import table  # noqa: E402
from confluent_kafka import Producer  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

from kcoord.testing.cluster import KcoordCluster, wait_for  # noqa: E402

_HOLDER = """
import sys, time
from kazoo.client import KazooClient
zk = KazooClient(hosts=sys.argv[1], timeout=int(sys.argv[2]) / 1000)
zk.start()
zk.create(sys.argv[3], b"", ephemeral=True, makepath=True)
print("ready", flush=True)
time.sleep(3600)
"""


def session_expiry_s(cluster: KcoordCluster, session_ms: int) -> float:
    path = f"/bench/holder-{uuid.uuid4().hex[:8]}"
    proc = subprocess.Popen([sys.executable, "-c", _HOLDER, cluster.zookeeper, str(session_ms), path],
                            stdout=subprocess.PIPE)
    assert proc.stdout is not None and proc.stdout.readline().strip() == b"ready"
    gone = threading.Event()
    zk = cluster.zk()
    zk.exists(path, watch=lambda _e: gone.set())
    start = time.monotonic()
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert gone.wait(session_ms / 1000 * 5)
    return time.monotonic() - start


def failover_s(cluster: KcoordCluster, how: str) -> tuple[float, float]:
    """(seconds until the state znode names another leader, until the first write after the
    signal is acknowledged)."""
    topic = f"failover-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic(topic, 1, 3)])[topic].result(30)
    wait_for(lambda: (cluster.state(topic, 0) or {}).get("leader", -1) > 0, 30, "a leader")
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "message.timeout.ms": 120000,
                         "retry.backoff.ms": 50, "linger.ms": 0})
    producer.produce(topic, b"before", partition=0)
    assert producer.flush(30) == 0
    leader = cluster.state(topic, 0)["leader"]
    acked: list[float] = []
    moved: list[float] = []
    done = threading.Event()

    def watch_state() -> None:  # its own client: the cluster's is not shared across threads
        from kazoo.client import KazooClient

        zk = KazooClient(hosts=cluster.zookeeper, timeout=10)
        zk.start(30)
        path = f"/brokers/topics/{topic}/partitions/0/state"
        ready.set()
        while not done.is_set():
            if json.loads(zk.get(path)[0])["leader"] not in (leader, -1):
                moved.append(time.monotonic())
                break
            time.sleep(0.005)
        zk.stop()
        zk.close()

    ready = threading.Event()
    watcher = threading.Thread(target=watch_state)
    watcher.start()
    ready.wait(30)
    start = time.monotonic()
    if how == "kill":
        cluster.kill(leader)
    else:
        threading.Thread(target=cluster.stop, args=(leader,)).start()  # returns when the process exits
    watcher.join(120)
    assert moved, "the leader did not move"
    # a write sent once the leader has moved (before it, the old leader may still take it)
    producer.produce(topic, b"after", partition=0,
                     on_delivery=lambda err, _m: acked.append(time.monotonic()) if err is None else None)
    assert producer.flush(120) == 0 and acked, "the write after the failover was not acknowledged"
    done.set()
    new = cluster.state(topic, 0)["leader"]
    assert new not in (leader, -1), (leader, new)
    wait_for(lambda: not cluster.node(leader).alive(), 60, "the node to exit")
    cluster.start(leader)
    return moved[0] - start, acked[0] - start


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--session-timeout-ms", type=int, default=6000)
    args = ap.parse_args()
    session_ms = args.session_timeout_ms
    with tempfile.TemporaryDirectory(prefix="bench-cluster-") as d:
        cluster = KcoordCluster(Path(d), 3, session_timeout_ms=session_ms,
                                overrides={"auto.leader.rebalance.enable": "false"})
        try:
            cluster.start()
            floor: list[float] = []
            killed: list[tuple[float, float]] = []
            controlled: list[tuple[float, float]] = []
            for _ in range(args.rounds):  # alternated, so machine noise hits each alike
                floor.append(session_expiry_s(cluster, session_ms))
                killed.append(failover_s(cluster, "kill"))
                controlled.append(failover_s(cluster, "stop"))
        finally:
            cluster.close()
    target = session_ms / 1000 + 1

    def row(name: str, xs: list[float], goal: str) -> list[object]:
        return [name, f"{statistics.median(xs):.2f}", f"{max(xs):.2f}", goal]

    print(f"Failover on 3 local nodes, zookeeper.session.timeout.ms={session_ms}, {args.rounds} rounds "
          f"(seconds; {os.cpu_count()} cores)")
    acked_kill = [a for _, a in killed]
    print(table(["from the signal to", "median s", "max s", "target"], [
        row("ZooKeeper ending a SIGKILLed client's session (floor)", floor, "-"),
        row("SIGKILL: the state znode names a new leader", [m for m, _ in killed], "-"),
        row("SIGKILL: the first acks=all write acknowledged (confluent-kafka)", acked_kill, f"<= {target:.1f}"),
        row("SIGTERM: the state znode names a new leader", [m for m, _ in controlled], "-"),
        row("SIGTERM: the first acks=all write acknowledged (confluent-kafka)", [a for _, a in controlled],
            "immediate"),
    ]))
    print("met" if max(acked_kill) <= target else "NOT met",
          f"(SIGKILL max {max(acked_kill):.2f} s vs {target:.1f} s; librdkafka looks for a down leader's "
          "partitions again once a second)")


if __name__ == "__main__":
    main()
