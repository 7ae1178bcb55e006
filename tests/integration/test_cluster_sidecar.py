"""Each node's own `kcoord sidecar` compacts its own log directory, on a real three-node
cluster (docker-compose.cluster.yml runs one sidecar beside each node the same way).

A compacted topic with replication factor 3 (small segments) is written with acks=all by
confluent-kafka: many values for a few keys, every replica holding the same log. Then, one
node at a time, a sidecar started with that node's own settings (its log.dirs) runs one pass,
and the running node swaps the cleaned segments in: that replica's segment bytes shrink. Read
through each node in turn as the partition's leader (leadership moved by controlled
shutdowns), the partition holds the latest value of every key and far fewer records than
were written. Replication goes on after compaction: new acks=all writes reach every replica,
and a follower whose replica was wiped fetches the compacted log from a compacted leader
(gaps in the offsets and all) and rejoins the ISR with the leader's records, offset for offset.
One Spark JVM at a time, one pass per node."""
from __future__ import annotations

import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyspark  # noqa: F401  (make test installs it: failing here means setup is incomplete)
import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as TP
from confluent_kafka.admin import AdminClient, NewTopic
from conftest import ROOT, unique
from test_cluster_replication import FAILOVER_S, OVERRIDES, full_isr
from test_sidecar_server import Output

from kcoord.storage.log import PartitionLog
from kcoord.testing.cluster import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]

KEYS = 40
ROUNDS = 40
SEGMENT_BYTES = 32768
SETTINGS = {**OVERRIDES, "kcoord.compaction.handoff.check.ms": "200"}


def create_compacted(bootstrap: str, topic: str) -> None:
    a = AdminClient({"bootstrap.servers": bootstrap})
    fs = a.create_topics([NewTopic(topic, 1, 3, config={
        "cleanup.policy": "compact", "segment.bytes": str(SEGMENT_BYTES), "min.insync.replicas": "2",
        "min.cleanable.dirty.ratio": "0.01"})], request_timeout=90)
    fs[topic].result(120)


def produce_rounds(bootstrap: str, topic: str, first_round: int, rounds: int) -> dict[bytes, bytes]:
    """`rounds` values for each key with acks=all; the last value written per key."""
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True, "linger.ms": 5,
                  "batch.size": SEGMENT_BYTES // 4})  # a batch fits a segment
    errors: list = []
    latest: dict[bytes, bytes] = {}
    for r in range(first_round, first_round + rounds):
        for k in range(KEYS):
            key, value = f"k{k}".encode(), f"r{r}-k{k}-".encode() + b"x" * 300
            p.produce(topic, value, key, partition=0,
                      on_delivery=lambda err, _m: err is not None and errors.append(err))
            latest[key] = value
        p.poll(0)
    assert p.flush(120) == 0, "records never answered"
    assert not errors, errors[:3]
    return latest


def partition_dir(cluster, node: int, topic: str) -> Path:
    return Path(cluster.node(node).overrides["log.dirs"]) / f"{topic}-0"


def segment_bytes(d: Path) -> int:
    return sum(f.stat().st_size for f in d.glob("*.log"))


def records_on_disk(d: Path, scratch: Path) -> list[tuple[int, bytes, bytes]]:
    """(offset, key, value) of a replica, read from a copy of its directory (a live node's own
    files are never opened by the test)."""
    shutil.rmtree(scratch, ignore_errors=True)
    shutil.copytree(d, scratch)
    plog = PartitionLog(str(scratch))
    try:
        return [(o, k, v) for o, k, v in plog.iter_records()]
    finally:
        plog.close()
        shutil.rmtree(scratch, ignore_errors=True)


def read_through(bootstrap: str, topic: str, end: int) -> list[tuple[int, bytes, bytes]]:
    """Partition 0 from the start until offset `end - 1` with confluent-kafka, through one node."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": unique("g"), "enable.auto.commit": False,
                  "auto.offset.reset": "earliest"})
    c.assign([TP(topic, 0, 0)])
    out: list[tuple[int, bytes, bytes]] = []
    deadline = time.monotonic() + 90
    try:
        while (not out or out[-1][0] < end - 1) and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is None:
                continue
            assert m.error() is None, m.error()
            out.append((m.offset(), m.key(), m.value()))
    finally:
        c.close()
    return out


def check_compacted(read: list[tuple[int, bytes, bytes]], latest: dict[bytes, bytes], written: int) -> None:
    offsets = [o for o, _, _ in read]
    assert offsets == sorted(set(offsets)), "offsets repeat or go backwards"
    last = {k: v for _, k, v in read}
    assert last == latest, "the latest value of some key is missing or wrong"
    assert len(read) < written // 2, f"{len(read)} of {written} records: not compacted"


def run_sidecar(cluster, node: int, tmp_path: Path) -> str:
    """The node's own sidecar, with the node's own settings, until its first pass is done and
    swapped in by the running node; returns its output."""
    props = tmp_path / f"node-{node}.properties"
    settings = {**cluster.node(node).overrides, "log.cleaner.backoff.ms": "500"}
    props.write_text("".join(f"{k}={v}\n" for k, v in settings.items()))
    swapped_before = cluster.node(node).log_text().count("swapped in compacted segment")
    proc = subprocess.Popen([sys.executable, "-m", "kcoord.server", "sidecar", str(props), "--master", "local[1]"],
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    out = Output(proc)
    try:
        def passed() -> bool:
            assert proc.poll() is None, out.text
            return any(x.startswith("pass 1:") for x in out.lines)

        wait_for(passed, 240, f"node {node}'s sidecar to finish a pass", interval=0.5)
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(90)
        except subprocess.TimeoutExpired:
            proc.kill()
    assert proc.wait() == 0, out.text
    wait_for(lambda: cluster.node(node).log_text().count("swapped in compacted segment") > swapped_before, 60,
             f"node {node} to swap the cleaned segments in")
    return out.text


def test_each_nodes_sidecar_compacts_its_own_replica(kcoord_cluster_factory, tmp_path):
    c = kcoord_cluster_factory(3, overrides=SETTINGS)
    topic = unique("compacted")
    create_compacted(c.bootstrap, topic)
    st = wait_for(lambda: full_isr(c, topic), 60, "the partition online with its ISR")
    latest = produce_rounds(c.bootstrap, topic, 0, ROUNDS)
    written = KEYS * ROUNDS
    dirs = {b: partition_dir(c, b, topic) for b in (1, 2, 3)}
    # every replica has every record (acks=all with the whole ISR) in many closed segments
    wait_for(lambda: all(len(list(d.glob("*.log"))) >= 5 for d in dirs.values()), 60, "segments on every replica")
    before = {b: segment_bytes(d) for b, d in dirs.items()}

    for b in (1, 2, 3):  # one Spark JVM at a time
        text = run_sidecar(c, b, tmp_path)
        assert f"{topic}" in text, text
        after = segment_bytes(dirs[b])
        assert after < before[b] // 2, f"node {b}: {before[b]} -> {after} segment bytes"
        assert not list(dirs[b].glob("*.swap")) and not list(dirs[b].glob("*.cleaned"))
    # the partition through each node as its leader, compacted on each
    order = [st["leader"]]
    check_compacted(read_through(c.node(order[0]).bootstrap, topic, written), latest, written)
    for _ in range(2):
        assert c.stop(order[-1]) == 0  # controlled shutdown: leadership moves to another replica
        s = wait_for(lambda: (s := c.state(topic, 0)) and s["leader"] not in (-1, *order) and s, FAILOVER_S,
                     "leadership on a node that has not led yet")
        order.append(s["leader"])
        check_compacted(read_through(c.node(s["leader"]).bootstrap, topic, written), latest, written)
    assert sorted(order) == [1, 2, 3]
    for b in order[:2]:
        c.start(b)
    wait_for(lambda: full_isr(c, topic), 120, "the stopped nodes back in the ISR")

    # replication after compaction: new acks=all writes reach every replica ...
    latest.update(produce_rounds(c.bootstrap, topic, ROUNDS, 2))
    written += 2 * KEYS
    # ... and a follower whose replica is wiped fetches the compacted log from a compacted leader
    leader = c.state(topic, 0)["leader"]
    follower = next(b for b in (1, 2, 3) if b != leader)
    assert c.stop(follower) == 0
    wait_for(lambda: follower not in c.state(topic, 0)["isr"], FAILOVER_S, f"node {follower} out of the ISR")
    shutil.rmtree(dirs[follower])
    c.start(follower)
    wait_for(lambda: full_isr(c, topic), 120, f"node {follower} back in the ISR with a fresh replica")
    end = read_through(c.node(leader).bootstrap, topic, written)
    check_compacted(end, latest, written)

    def same_as_leader() -> bool:
        return records_on_disk(dirs[follower], tmp_path / "copy") == records_on_disk(dirs[leader], tmp_path / "copy")

    wait_for(same_as_leader, 60, f"node {follower}'s replica to hold the leader's records offset for offset")
    assert [(o, k, v) for o, k, v in records_on_disk(dirs[follower], tmp_path / "copy")] == end
