"""A leader cut off from ZooKeeper and the other nodes (network namespaces, nftables drops in the
node's own namespace; kcoord/testing/netns.py), while clients still reach it.

Three kcoord processes, each in its own namespace; a topic with replication factor 3 and
min.insync.replicas=2. One writer per node sends Produce requests straight to that node
(acks=all), recording each answer with the time it arrived; one more writes acks=1 to the
leader that is about to be cut off, and a confluent-kafka idempotent acks=all producer writes
through the bootstrap list. The leader is cut off; the controller elects another once the
cut-off node's ZooKeeper session expires.

What Kafka guarantees, and is checked: no acks=all write is acknowledged by the cut-off node
after the new leader's election (the state znode's mtime), and every acks=all write
acknowledged by anyone is in the final log at the offset it was acknowledged at. What kcoord
adds (docs/cluster.md, Fencing): the cut-off node stops answering as leader when its
ZooKeeper connection is suspended, before its session expires, so it answers
NOT_LEADER_OR_FOLLOWER before the election and acknowledges no acks=1 write after it either
(a ZooKeeper-mode Kafka broker keeps taking acks=1 writes until it hears of the new leader).
A client library connected to the cut-off node may wait there until the heal (its parked
produce answers at the request timeout, and its Metadata still names it leader, as a cut-off
ZooKeeper-mode Kafka broker's does); checked is that it then continues, losing nothing.
The acks=1 writes it took between the cut and the suspension are not on the new leader: after
the heal the node truncates them, rejoins the ISR, and its log is the leader's byte for byte."""
from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
from aiokafka.record.default_records import DefaultRecordBatchBuilder
from conftest import call, unique
from kafka.protocol.producer import ProduceRequest
from test_cluster_replication import Load, check_acked_read_once, create, full_isr, read_all

from kcoord.protocol.errors import ErrorCode as E
from kcoord.testing.cluster import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.timeout(480)]

SESSION_MS = 10000
FAILOVER_S = SESSION_MS / 1000 + 60
OVERRIDES = {"replica.lag.time.max.ms": "4000", "replica.fetch.wait.max.ms": "100",
             "replica.fetch.backoff.ms": "200"}


@dataclass(frozen=True)
class Answer:
    sent: float  # time.time() before sending
    received: float  # time.time() when the answer arrived
    error: int  # -1: no answer (connection failed or timed out)
    offset: int
    value: int


def batch(value: int) -> bytes:
    b = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=0, producer_id=-1,
                                  producer_epoch=-1, base_sequence=-1, batch_size=2**31 - 1)
    b.append(0, int(time.time() * 1000), b"k", str(value).encode(), [])
    return bytes(b.build())


class Writer:
    """Produce requests to one node only (no metadata, no retries to elsewhere): one record a
    request, each value new; every answer recorded."""

    def __init__(self, bootstrap: str, topic: str, acks: int, first_value: int) -> None:
        self.bootstrap, self.topic, self.acks = bootstrap, topic, acks
        self.next = first_value
        self.answers: list[Answer] = []
        self._stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        T = ProduceRequest.TopicProduceData
        while not self._stop.is_set():
            value, self.next = self.next, self.next + 1
            req = ProduceRequest(version=9, transactional_id=None, acks=self.acks, timeout_ms=3000, topic_data=[
                T(name=self.topic, partition_data=[T.PartitionProduceData(index=0, records=batch(value))])])
            sent = time.time()
            try:
                p = call(self.bootstrap, req, 9).responses[0].partition_responses[0]
                error, offset = p.error_code, p.base_offset
            except (OSError, AssertionError):
                error, offset = -1, -1
            self.answers.append(Answer(sent, time.time(), error, offset, value))
            if error != E.NONE:
                self._stop.wait(0.05)  # a refused write: back off a little, then try again

    def acked(self) -> list[Answer]:
        return [a for a in self.answers if a.error == E.NONE]

    def stop(self) -> None:
        self._stop.set()
        self.thread.join(30)


def log_bytes(cluster, broker: int, topic: str) -> bytes:
    d = Path(cluster.node(broker).log_dir) / f"{topic}-0"
    return b"".join(f.read_bytes() for f in sorted(d.glob("*.log")))


def test_a_cut_off_leader_stops_serving_before_its_partition_is_given_to_another(kcoord_cluster_factory):
    c = kcoord_cluster_factory(3, overrides=OVERRIDES, netns=True, session_timeout_ms=SESSION_MS)
    topic = unique("cut")
    create(c.bootstrap, topic)
    st = wait_for(lambda: full_isr(c, topic), 90, "the partition online with its ISR")
    old = st["leader"]
    writers = {b: Writer(c.node(b).bootstrap, topic, -1, b * 1_000_000) for b in (1, 2, 3)}
    zombie = Writer(c.node(old).bootstrap, topic, 1, 9_000_000)
    load = Load(c.bootstrap, topic)
    path = f"/brokers/topics/{topic}/partitions/0/state"
    try:
        wait_for(lambda: len(writers[old].acked()) >= 20 and len(zombie.acked()) >= 20, 60,
                 "acknowledged writes on the leader before the cut")
        load.acked_after(100, 60, "the idempotent producer's writes before the cut")
        cut = time.time()
        c.cut_off(old)
        isolated = time.time()  # a write appended from here on cannot reach a follower

        def elected_state():  # the first state naming another leader, with its znode's stat
            data, stat = c.zk().get(path)
            s = json.loads(data)
            return s["leader"] not in (-1, old) and (s, stat)

        # polled closely; the znode's mtime is ZooKeeper's clock, this machine's
        moved, stat = wait_for(elected_state, FAILOVER_S, "a new leader", interval=0.02)
        elected = stat.mtime / 1000
        assert moved["leader_epoch"] > st["leader_epoch"] and old not in moved["isr"], moved
        # the session expired (the last ping before the cut is at most a third of it earlier)
        assert elected - cut >= SESSION_MS / 1000 * 0.6, f"elected {elected - cut:.1f} s after the cut"
        new = moved["leader"]
        wait_for(lambda: any(a.error == E.NONE and a.sent > elected for a in writers[new].answers), FAILOVER_S,
                 "acks=all acknowledged by the new leader")
        # the cut-off node keeps answering clients, as a follower of nothing it can reach
        wait_for(lambda: any(a.sent > elected and a.error >= 0 for a in zombie.answers), 30,
                 "the cut-off node answering after the election")
        c.heal(old)
        wait_for(lambda: full_isr(c, topic), 120, "the healed node back in the ISR")
        # the client library may have been held by the cut-off node meanwhile (its parked produce
        # until the request timeout, then its Metadata naming itself, as a cut-off ZooKeeper-mode
        # Kafka broker's does); healed, that node names the new leader
        load.acked_after(len(load.acked) + 100, 120, "the idempotent producer's writes after the heal")
    finally:
        for w in [*writers.values(), zombie]:
            w.stop()
        load.stop()

    # Kafka's guarantee: no acks=all write acknowledged by the cut-off leader after the election
    late = [a for a in writers[old].acked() if a.received >= elected]
    assert not late, f"acks=all acknowledged by the cut-off node after the election at {elected}: {late[:5]}"
    # kcoord's fencing: it answered as leader of nothing before the election, acks=1 included
    refused = [a for a in zombie.answers + writers[old].answers
               if a.sent > cut and a.error == E.NOT_LEADER_OR_FOLLOWER]
    assert refused and refused[0].received < elected, "the cut-off node still answered as leader at the election"
    assert not [a for a in zombie.acked() if a.received >= elected], "acks=1 acknowledged after the election"
    lost_acks1 = [a for a in zombie.acked() if a.sent > isolated]

    # nothing acknowledged with acks=all lost: every one at its offset, read once, in order
    acked = sorted(load.acked)
    direct = [(a.offset, a.value) for w in writers.values() for a in w.acked()]
    end = max(o for o, _ in acked + direct) + 1
    read = read_all(c.bootstrap, topic, end)
    assert [o for o, _ in read] == list(range(end)), "a gap or a hole in the log"
    check_acked_read_once(acked, read)
    final = dict(read)
    missing = [(o, v) for o, v in direct if final.get(o) != v]
    assert not missing, f"acks=all writes acknowledged and lost: {missing[:5]}"
    # the acks=1 writes the zombie took after the cut are on no other replica: truncated away
    values = set(final.values())
    assert not [a for a in lost_acks1 if a.value in values and final.get(a.offset) == a.value], \
        "an acks=1 write the cut-off node took reached the new leader"
    # no divergence: the healed node's log is the leader's, byte for byte
    leader = c.state(topic, 0)["leader"]
    wait_for(lambda: all(log_bytes(c, b, topic) == log_bytes(c, leader, topic) for b in (1, 2, 3)), 60,
             "every replica's log equal to the leader's")
