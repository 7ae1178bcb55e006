"""Transactions on three kcoord nodes and a real ZooKeeper: the controller creates
__transaction_state, FindCoordinator names the leader of a transactional id's partition on
every node, the coordinator sends its COMMIT / ABORT markers to each data partition's leader
on whichever node (WriteTxnMarkers between nodes), and a read_committed consumer
(confluent-kafka) sees exactly the committed records. When the coordinator's node is SIGKILLed
in the middle of a stream of transactions, the next leader of its __transaction_state
partition loads it (a prepared transaction gets its markers there) and the producer goes on
with it: every committed record is read once, no aborted one."""
from __future__ import annotations

import time
import uuid

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from conftest import call, unique
from kafka.protocol.metadata import FindCoordinatorRequest
from test_cluster import FAILOVER_S, all_online, create, zk_view

from kcoord.protocol.partitioner import partition_for
from kcoord.testing.cluster import wait_for

pytestmark = pytest.mark.integration

TXN = "__transaction_state"
OFFSETS = "__consumer_offsets"
PARTITIONS = 6


def txn_coordinator(bootstrap: str, transactional_id: str) -> int:
    r = call(bootstrap, FindCoordinatorRequest(version=3, key=transactional_id, key_type=1), 3)
    return r.node_id if r.error_code == 0 else -1


def ready(c, topic: str) -> None:
    c.coordinator_topics(transactions=True)  # created at the first FindCoordinator of each kind
    wait_for(lambda: all_online(c, TXN, 50), 90, "__transaction_state leaders")
    wait_for(lambda: all_online(c, OFFSETS, 50), 90, "__consumer_offsets leaders")
    create(c.bootstrap, topic, PARTITIONS, 3)
    wait_for(lambda: all_online(c, topic, PARTITIONS), 30, "leaders of the data partitions")


def txn_log_bytes(node, partition: int) -> int:
    """The size of a node's replica of a __transaction_state partition (replicas copy batches
    as they are)."""
    return sum(f.stat().st_size for f in (node.log_dir / f"{TXN}-{partition}").glob("*.log"))


def producer(bootstrap: str, transactional_id: str) -> Producer:
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": transactional_id,
                  "transaction.timeout.ms": 120000, "message.timeout.ms": 120000, "socket.timeout.ms": 10000})
    p.init_transactions(120)
    return p


def read_committed(bootstrap: str, topic: str, sentinel: str, partitions: int = PARTITIONS) -> list[str]:
    """Every value of `topic` a read_committed consumer reads, up to the sentinel the last
    (committed) transaction wrote to every one of its `partitions`: each is read to its end."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": unique("reader"), "isolation.level": "read_committed",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    values: list[str] = []
    done: set[int] = set()
    deadline = time.monotonic() + 120
    try:
        while len(done) < partitions:
            assert time.monotonic() < deadline, f"sentinels read from partitions {sorted(done)} only; {values}"
            m = consumer.poll(0.5)
            if m is None or m.error():
                continue
            v = m.value().decode()
            if v == sentinel:
                done.add(m.partition())
            else:
                values.append(v)
    finally:
        consumer.close()
    return values


def end_with_sentinel(p: Producer, topic: str, sentinel: str) -> None:
    p.begin_transaction()
    for part in range(PARTITIONS):
        p.produce(topic, sentinel.encode(), partition=part)
    p.commit_transaction(120)


def test_a_transaction_spans_partitions_led_by_every_node_and_read_committed_sees_only_commits(kcoord_cluster):
    c = kcoord_cluster
    topic = unique("txn")
    ready(c, topic)
    leaders = {v[0] for v in zk_view(c, topic).values()}
    assert len(leaders) >= 2, f"the data partitions' leaders: {leaders}"
    tid = unique("tx")
    coord = c.state(TXN, partition_for(tid, 50))["leader"]
    wait_for(lambda: {txn_coordinator(n.bootstrap, tid) for n in c.nodes.values()} == {coord}, 30,
             "every node to name the leader of the id's __transaction_state partition")

    p = producer(c.bootstrap, tid)
    committed: list[str] = []
    for i in range(12):
        p.begin_transaction()
        values = [f"{i}-{k}" for k in range(2 * PARTITIONS)]
        for k, v in enumerate(values):
            p.produce(topic, v.encode(), partition=k % PARTITIONS)
        if i % 3 == 2:
            p.abort_transaction(60)
        else:
            p.commit_transaction(60)
            committed.extend(values)
    sentinel = "end-" + uuid.uuid4().hex
    end_with_sentinel(p, topic, sentinel)
    got = read_committed(c.bootstrap, topic, sentinel)
    assert sorted(got) == sorted(committed)
    # partitions other nodes lead were among them: their markers went there (WriteTxnMarkers),
    # or the read above would have stopped at their open transactions
    assert leaders - {coord}


def test_the_coordinators_node_killed_mid_stream_the_next_leader_completes_and_the_producer_goes_on(kcoord_cluster):
    c = kcoord_cluster
    topic = unique("txnkill")
    ready(c, topic)
    tid = unique("tx")
    tp = partition_for(tid, 50)
    old = c.state(TXN, tp)
    p = producer(c.bootstrap, tid)
    committed: list[str] = []
    aborted: list[str] = []
    unknown: list[str] = []  # a commit whose outcome the client could not learn
    killed_at = 5
    i = 0
    deadline = time.monotonic() + 6 * FAILOVER_S
    while i < 14:
        assert time.monotonic() < deadline, f"stuck at transaction {i}"
        values = [f"{i}-{uuid.uuid4().hex[:8]}-{k}" for k in range(2 * PARTITIONS)]
        try:
            p.begin_transaction()
            for k, v in enumerate(values):
                p.produce(topic, v.encode(), partition=k % PARTITIONS)
            p.flush(60)
            if i == killed_at:
                c.kill(old["leader"])  # between the records and EndTxn: the coordinator is gone
            p.commit_transaction(120)
            committed.extend(values)
            i += 1
        except KafkaException as e:
            err = e.args[0]
            if err.txn_requires_abort():
                try:
                    p.abort_transaction(120)
                    aborted.extend(values)
                except KafkaException:
                    unknown.extend(values)
                    p = producer(c.bootstrap, tid)
            elif err.retriable():
                unknown.extend(values)
                p = producer(c.bootstrap, tid)  # fences the old instance; its transaction ends
            else:
                unknown.extend(values)
                p = producer(c.bootstrap, tid)
    new = c.state(TXN, tp)
    assert new["leader"] != old["leader"] and new["leader_epoch"] > old["leader_epoch"]
    wait_for(lambda: all(txn_coordinator(c.node(n).bootstrap, tid) == new["leader"]
                         for n in c.nodes if n != old["leader"]), 30, "FindCoordinator to name the new leader")
    sentinel = "end-" + uuid.uuid4().hex
    end_with_sentinel(p, topic, sentinel)
    got = read_committed(c.bootstrap, topic, sentinel)
    assert len(got) == len(set(got)), "a record read twice"
    assert set(committed) <= set(got), f"committed records missing: {len(set(committed) - set(got))}"
    assert not set(aborted) & set(got), "an aborted record was read"
    assert set(got) <= set(committed) | set(unknown)


def test_a_coordinator_that_dies_after_prepare_commit_is_completed_by_the_next_leader(kcoord_cluster_factory,
                                                                                     monkeypatch):
    """The coordinator's node kills itself once PrepareCommit is durable, before any marker
    (KCOORD_CRASH_AT=txn:prepared, given to that node alone): the transaction ends committed
    through the next leader of its __transaction_state partition, each record read once."""
    c = kcoord_cluster_factory(3, overrides={"leader.imbalance.check.interval.seconds": "1"})
    topic = unique("txnprep")
    ready(c, topic)
    tid = unique("tx")
    tp = partition_for(tid, 50)
    crashing = c.assignment(TXN)[tp][0]  # the preferred leader: it leads the partition again once back
    c.kill(crashing)
    wait_for(lambda: c.state(TXN, tp)["leader"] not in (crashing, -1), FAILOVER_S, "another leader meanwhile")
    monkeypatch.setenv("KCOORD_CRASH_AT", "txn:prepared")
    c.start(crashing)
    monkeypatch.delenv("KCOORD_CRASH_AT")
    wait_for(lambda: (s := c.state(TXN, tp))["leader"] == crashing and len(s["isr"]) == 3, 120,
             "the preferred leader to lead the id's partition again, its ISR full")
    wait_for(lambda: all_online(c, topic, PARTITIONS), 60, "leaders of the data partitions")
    p = producer(c.bootstrap, tid)
    values = [f"prep-{k}" for k in range(2 * PARTITIONS)]
    p.begin_transaction()
    for k, v in enumerate(values):
        p.produce(topic, v.encode(), partition=k % PARTITIONS)
    p.flush(60)
    # __transaction_state appends are acknowledged once durable on the coordinator's node, not
    # yet once its followers have them: wait until they do (InitProducerId, AddPartitionsToTxn),
    # so that the node's death loses only what the test is about
    wait_for(lambda: len({txn_log_bytes(c.node(n), tp) for n in c.nodes}) == 1, 60,
             "the followers to have the transaction's records")
    # answered once PrepareCommit is durable (as Kafka answers), then the node dies, before
    # any marker; the next leader of the partition loads the prepared transaction and writes them
    p.commit_transaction(180)
    wait_for(lambda: not c.node(crashing).alive(), 30, "the coordinator's node to kill itself")
    assert "Crash point txn:prepared reached" in c.node(crashing).log_text()
    sentinel = "end-" + uuid.uuid4().hex
    end_with_sentinel(p, topic, sentinel)
    got = read_committed(c.bootstrap, topic, sentinel)
    assert sorted(got) == sorted(values)


def test_producer_ids_come_from_blocks_the_nodes_claim_in_zookeeper(kcoord_cluster):
    """Kafka's /latest_producer_id_block: each node hands out ids from its own block of 1000, so
    producers initialised on different nodes never share an id."""
    import json

    from kafka.protocol.producer.transaction import InitProducerIdRequest

    c = kcoord_cluster
    ids = []
    for n in sorted(c.nodes):
        for _ in range(3):
            r = call(c.node(n).bootstrap, InitProducerIdRequest(
                version=4, transactional_id=None, transaction_timeout_ms=60000, producer_id=-1, producer_epoch=-1), 4)
            assert r.error_code == 0
            ids.append((n, r.producer_id))
    assert len({pid for _, pid in ids}) == len(ids), ids
    for n in c.nodes:  # each node's ids lie in one block of 1000 of its own
        mine = [pid for m, pid in ids if m == n]
        assert max(mine) // 1000 == min(mine) // 1000
    block = json.loads(c.zk().get("/latest_producer_id_block")[0])
    assert block["version"] == 1 and block["block_end"] == str(int(block["block_start"]) + 999)
    assert block["broker"] in c.nodes and int(block["block_end"]) >= max(pid for _, pid in ids)


@pytest.mark.timeout(600)
@pytest.mark.compat("java4", "transactions")
def test_java4_transactions_v2_on_a_cluster_whose_group_and_transaction_coordinators_differ(kcoord_cluster):
    """Java kafka-clients 4.3 (transactions v2: Produce v12 and TxnOffsetCommit v5 add their
    partitions implicitly, so every data partition's leader and the group's coordinator ask the
    transaction coordinator on its node): a consume-transform-produce loop with commits and
    aborts, then a second instance fencing the first (tests/compat/java4/TxnV2Scenarios.java)."""
    from collections import Counter

    from conftest import committed
    from kafka.protocol.admin.transactions import DescribeTransactionsRequest
    from test_transactions_v2 import java4
    from test_transactions_v2 import produce as produce_plain

    c = kcoord_cluster
    src, dst = unique("v2-in"), unique("v2-out")
    ready(c, src)
    create(c.bootstrap, dst, PARTITIONS, 3)
    wait_for(lambda: all_online(c, dst, PARTITIONS), 30, "leaders of the output partitions")
    # a transactional id and a group coordinated by different nodes
    group = unique("v2")
    group_node = c.state(OFFSETS, partition_for(group, 50))["leader"]
    tid = next(t for t in (unique("v2-tx") for _ in range(100))
               if c.state(TXN, partition_for(t, 50))["leader"] != group_node)
    produce_plain(c.bootstrap, src, 0, 600)
    txns = 9
    events = java4("TxnV2Scenarios", c.bootstrap, src, dst, group, tid, str(txns), timeout=400)
    outcomes = [e["outcome"] for e in events if e["kind"] == "txn"]
    assert outcomes == ["commit", "commit", "abort"] * 3, events
    assert [e["kind"] for e in events][-2:] == ["fenced", "done"], events
    copied = events[-1]["copied"]
    assert copied == sum(e["records"] for e in events if e.get("outcome") == "commit")
    sentinel = "end-" + uuid.uuid4().hex
    p = Producer({"bootstrap.servers": c.bootstrap})
    for part in range(PARTITIONS):
        p.produce(dst, sentinel.encode(), partition=part)
    assert p.flush(60) == 0
    counts = Counter(read_committed(c.bootstrap, dst, sentinel))
    assert not [v for v, n in counts.items() if n > 1], "a record copied twice"
    assert "zombie" not in counts and counts["from-the-second-instance"] == 1
    assert len(set(counts) - {"from-the-second-instance"}) == copied
    assert sum(committed(c.bootstrap, group, src).values()) == copied
    coord = c.state(TXN, partition_for(tid, 50))["leader"]
    state = call(c.node(coord).bootstrap, DescribeTransactionsRequest(version=0, transactional_ids=[tid]),
                 0).transaction_states[0]
    assert (state.error_code, state.transaction_state, state.producer_epoch) == (0, "CompleteCommit", txns + 2)


def test_librdkafka_sends_offsets_to_a_transaction_whose_coordinator_and_topic_live_on_other_nodes(kcoord_cluster):
    """A consume-transform-produce loop (confluent-kafka, transactions v1: AddOffsetsToTxn, then
    TxnOffsetCommit verified with the transaction coordinator on another node): its input topic
    has one replica, on a node that does not coordinate the group; each transaction's offsets
    count once it commits, and the copies are read once."""
    c = kcoord_cluster
    src, dst = unique("ctp-in"), unique("ctp-out")
    ready(c, dst)
    group = unique("ctp")
    group_node = c.state(OFFSETS, partition_for(group, 50))["leader"]
    tid = next(t for t in (unique("ctp-tx") for _ in range(100))
               if c.state(TXN, partition_for(t, 50))["leader"] != group_node)
    elsewhere = next(n for n in sorted(c.nodes) if n != group_node)
    create(c.bootstrap, src, 1, -1, replica_assignment=[[elsewhere]])
    wait_for(lambda: all_online(c, src, 1), 30, "the input partition's leader")
    plain = Producer({"bootstrap.servers": c.bootstrap})
    for i in range(40):
        plain.produce(src, f"v{i}".encode(), partition=0)
    assert plain.flush(60) == 0
    consumer = Consumer({"bootstrap.servers": c.bootstrap, "group.id": group, "enable.auto.commit": False,
                         "auto.offset.reset": "earliest", "isolation.level": "read_committed"})
    consumer.subscribe([src])
    p = producer(c.bootstrap, tid)
    copied = 0
    deadline = time.monotonic() + 120
    try:
        while copied < 40:
            assert time.monotonic() < deadline, f"{copied} records copied"
            batch = consumer.consume(10, 1.0)
            batch = [m for m in batch if not m.error()]
            if not batch:
                continue
            p.begin_transaction()
            for m in batch:
                p.produce(dst, b"copy-" + m.value(), partition=m.offset() % PARTITIONS)
            p.send_offsets_to_transaction(consumer.position(consumer.assignment()),
                                          consumer.consumer_group_metadata(), 60)
            p.commit_transaction(60)
            copied += len(batch)
        committed_offset = consumer.committed([TopicPartition(src, 0)], timeout=30)[0].offset
    finally:
        consumer.close()
    assert committed_offset == 40
    sentinel = "end-" + uuid.uuid4().hex
    end_with_sentinel(p, dst, sentinel)
    assert sorted(read_committed(c.bootstrap, dst, sentinel)) == sorted(f"copy-v{i}" for i in range(40))
