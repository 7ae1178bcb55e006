"""A transaction coordinator fenced while its markers are pending (Kafka's
TransactionMarkerRequestCompletionHandler: TRANSACTION_COORDINATOR_FENCED drops the pending
markers of the transaction, it is not retried; server/txn/marker_outcomes.py).

Three kcoord nodes, each in a network namespace of its own (kcoord/testing/netns.py). The node
leading the transactional id's __transaction_state partition freezes itself (SIGSTOP,
KCOORD_STOP_AT=txn:prepared, given to that node alone) once PrepareCommit is durable, before
any marker. Frozen, it is cut off from ZooKeeper (not from the other nodes); its session
expires, the controller gives the partition to another node, which loads the prepared
transaction and writes its markers at the next coordinator epoch, then CompleteCommit. The
frozen node is then continued: it still believes it coordinates the transaction (ZooKeeper
cannot tell it otherwise), sends its markers at the old coordinator epoch to the data
partitions' leaders (the other two nodes), is answered TRANSACTION_COORDINATOR_FENCED, and
drops them: no second attempt, while it still thinks itself coordinator. Healed, it rejoins;
a read_committed consumer reads every record of the transaction exactly once."""
from __future__ import annotations

import os
import signal
import threading
import uuid

import pytest
from confluent_kafka import KafkaException
from conftest import unique
from test_cluster import create
from test_cluster_transactions import producer, read_committed, txn_coordinator

from kcoord.protocol.partitioner import partition_for
from kcoord.testing.cluster import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.timeout(480)]

TXN = "__transaction_state"
SESSION_MS = 6000
FAILOVER_S = SESSION_MS / 1000 + 60
COORDINATOR = 1  # the node given KCOORD_STOP_AT; the test picks an id it coordinates
OVERRIDES = {"replica.lag.time.max.ms": "4000", "replica.fetch.wait.max.ms": "100", "replica.fetch.backoff.ms": "200"}


def test_a_fenced_coordinator_drops_its_pending_markers_and_the_new_one_completes(kcoord_cluster_factory):
    c = kcoord_cluster_factory(3, overrides=OVERRIDES, netns=True, session_timeout_ms=SESSION_MS,
                               node_env={COORDINATOR: {"KCOORD_STOP_AT": "txn:prepared"}})
    others = sorted(set(c.nodes) - {COORDINATOR})
    first = c.node(others[0]).bootstrap
    c.coordinator_topics(transactions=True)
    # an id whose __transaction_state partition the freezing node leads
    tid = next(t for t in (f"zombie-{uuid.uuid4().hex[:8]}" for _ in range(2000))
               if (s := c.state(TXN, partition_for(t, 50))) and s["leader"] == COORDINATOR and len(s["isr"]) == 3)
    tp = partition_for(tid, 50)
    epoch = c.state(TXN, tp)["leader_epoch"]
    wait_for(lambda: txn_coordinator(first, tid) == COORDINATOR, 30, "FindCoordinator to name the node")
    # the data partitions are led by the other two nodes: the frozen node's markers go to them
    topic = unique("zombie")
    create(c.bootstrap, topic, 2, -1, replica_assignment=[[others[0], others[1], COORDINATOR],
                                                           [others[1], others[0], COORDINATOR]])
    wait_for(lambda: all((s := c.state(topic, p)) and s["leader"] == others[p] for p in (0, 1)), 30,
             "the data partitions' leaders")

    p = producer(c.bootstrap, tid)
    values = [f"v-{k}" for k in range(6)]
    p.begin_transaction()
    for k, v in enumerate(values):
        p.produce(topic, v.encode(), partition=k % 2)
    p.flush(60)
    outcome: list[object] = []

    def commit() -> None:
        try:
            p.commit_transaction(180)
            outcome.append("committed")
        except KafkaException as e:  # the answer was lost with the frozen node: the outcome is the server's
            outcome.append(e)

    committer = threading.Thread(target=commit, daemon=True)
    committer.start()
    zombie = c.node(COORDINATOR)
    wait_for(lambda: "Stop point txn:prepared reached" in zombie.log_text(), 60, "the coordinator to freeze")
    c.cut_off(COORDINATOR, nodes=False)  # ZooKeeper cannot tell it anything once it continues
    try:
        new = wait_for(lambda: (s := c.state(TXN, tp))["leader"] in others and s, FAILOVER_S,
                       "another node to lead the id's __transaction_state partition")
        assert new["leader_epoch"] > epoch
        committer.join(240)
        assert not committer.is_alive() and outcome, "commit_transaction did not return"
        # the new coordinator completed it: the records are readable before the zombie wakes
        sentinel = "end-" + uuid.uuid4().hex
        p2 = producer(c.bootstrap, tid)  # through the new coordinator
        p2.begin_transaction()
        for part in (0, 1):
            p2.produce(topic, sentinel.encode(), partition=part)
        p2.commit_transaction(120)
        assert sorted(read_committed(c.bootstrap, topic, sentinel, 2)) == sorted(values)

        os.kill(zombie.proc.pid, signal.SIGCONT)
        dropped = f"Dropping the pending COMMIT markers of {tid} (attempt 1)"
        line = wait_for(lambda: next((ln for ln in zombie.log_text().splitlines() if dropped in ln), None), 60,
                        "the continued coordinator to drop its markers")
        assert "TRANSACTION_COORDINATOR_FENCED" in line, line
        # it finds out it is fenced from ZooKeeper only seconds later (its connection times out):
        # meanwhile, and after, it sends no marker of the transaction again
        wait_for(lambda: "ZooKeeper connection suspended" in zombie.log_text()
                 or "ZooKeeper connection lost" in zombie.log_text(), 60, "the zombie to notice")
        retried = [ln for ln in zombie.log_text().splitlines() if f"markers of {tid} failed" in ln]
        assert not retried, retried
    finally:
        c.heal(COORDINATOR)
    wait_for(lambda: all(COORDINATOR in c.state(topic, p)["isr"] for p in (0, 1)), 120,
             "the healed node back in the data partitions' ISR")
    assert zombie.alive()
    # the healed node loads nothing of the transaction again as a coordinator of an old epoch, and
    # every record is still read once
    sentinel = "end-" + uuid.uuid4().hex
    p3 = producer(c.bootstrap, tid)
    p3.begin_transaction()
    for part in (0, 1):
        p3.produce(topic, sentinel.encode(), partition=part)
    p3.commit_transaction(120)
    got = read_committed(c.bootstrap, topic, sentinel, 2)
    assert sorted(v for v in got if not v.startswith("end-")) == sorted(values)
    assert not [ln for ln in zombie.log_text().splitlines() if f"markers of {tid} failed" in ln]
