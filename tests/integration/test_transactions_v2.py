"""Transactions v2 (KIP-890 part 2) against the real server.

- Java kafka-clients 4.3 (tests/compat/java4/TxnV2Scenarios.java), which uses transactions v2
  because the server finalizes transaction.version 2: a consume-transform-produce loop with
  sendOffsetsToTransaction, commits and aborts, then a second instance fencing the first. The
  output, read with read_committed, holds exactly the committed copies; the group's offsets
  are the last committed transaction's; the producer's epoch grew with every EndTxn (v2).
- The same copier as the 3.9 test (TxnCopier), built against 4.3, over 3,000 records with the
  server SIGKILLed in the middle: every record copied exactly once.
- The protocol level over a real socket with kafka-python's request classes: Produce v12,
  TxnOffsetCommit v5, EndTxn v5 and their errors, and a server that kills itself after each
  persisted step of an EndTxn v5 (KCOORD_CRASH_AT): after the restart the transaction ends as
  it was decided, with the bumped epoch the producer continues with."""
from __future__ import annotations

import json
import signal
import time
from collections import Counter

import pytest
from clientlib import Background, compile_java4, java4_classpath, run
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from conftest import call, committed, unique
from kafka.protocol.admin.transactions import DescribeTransactionsRequest
from kafka.protocol.consumer import FetchRequest, OffsetFetchRequest
from kafka.protocol.metadata import FindCoordinatorRequest
from kafka.protocol.producer import InitProducerIdRequest, ProduceRequest
from kafka.protocol.producer.transaction import EndTxnRequest, TxnOffsetCommitRequest

from kcoord.protocol.errors import ErrorCode as E
from kcoord.storage.batch import iter_batch_records, split_batches
from kcoord.testing.process import KcoordProcess

PARTITIONS = 2


def java4(*args: str, timeout: float = 180) -> list[dict]:
    compile_java4()
    r = run(["java", "-Xshare:auto", "-XX:TieredStopAtLevel=1", "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
             "-Dorg.slf4j.simpleLogger.logFile=System.err", "-cp", java4_classpath(), *args], timeout=timeout)
    return [json.loads(line) for line in r.stdout.splitlines() if line.startswith("{")]


def create(bootstrap: str, *names: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.create_topics([NewTopic(n, PARTITIONS, 1) for n in names]).values():
        f.result(30)


def produce(bootstrap: str, topic: str, start: int, end: int) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i in range(start, end):
        p.produce(topic, key=f"k{i}", value=f"v{i}")
    assert p.flush(60) == 0


def read_committed(bootstrap: str, topic: str, expect: int, quiet_s: float = 2.0) -> list[str]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": unique("reader"), "isolation.level": "read_committed",
                  "enable.auto.commit": False})
    c.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
    values: list[str] = []
    last = time.monotonic()
    deadline = last + 90
    try:
        while time.monotonic() < deadline:
            m = c.poll(0.3)
            if m is not None and not m.error():
                values.append(m.value().decode())
                last = time.monotonic()
            elif len(values) >= expect and time.monotonic() - last > quiet_s:
                break
    finally:
        c.close()
    return values


def describe(bootstrap: str, tid: str):
    r = call(bootstrap, DescribeTransactionsRequest(version=0, transactional_ids=[tid]), 0)
    return r.transaction_states[0]


@pytest.mark.timeout(300)
@pytest.mark.compat("java4", "transactions")
@pytest.mark.parametrize("tv", [2, 1], ids=["transaction.version=2", "transaction.version=1"])
def test_java4_uses_transactions_v2_commit_abort_and_fencing(kcoord_factory, tv):
    """With transaction.version 1 finalized the same client stays on transactions v1."""
    srv = kcoord_factory({"num.partitions": str(PARTITIONS), "group.initial.rebalance.delay.ms": "0",
                          "kcoord.transaction.version": str(tv)})
    b = srv.bootstrap
    src, dst, group, tid = unique("v2-in"), unique("v2-out"), unique("v2"), unique("v2-tx")
    create(b, src, dst)
    produce(b, src, 0, 600)
    txns = 9
    events = java4("TxnV2Scenarios", b, src, dst, group, tid, str(txns))
    outcomes = [e["outcome"] for e in events if e["kind"] == "txn"]
    assert outcomes == ["commit", "commit", "abort"] * 3, events
    assert [e["kind"] for e in events][-2:] == ["fenced", "done"], events
    fenced = events[-2]
    assert "ProducerFencedException" in fenced["abort"]
    # v2: the zombie's Produce is refused (INVALID_PRODUCER_EPOCH); v1: its AddPartitionsToTxn
    assert ("InvalidProducerEpochException" if tv == 2 else "ProducerFencedException") in fenced["send"]
    copied = events[-1]["copied"]
    assert copied == sum(e["records"] for e in events if e.get("outcome") == "commit")

    out = read_committed(b, dst, copied + 1)
    counts = Counter(out)
    assert not [v for v, n in counts.items() if n > 1], "a record copied twice"
    assert "zombie" not in counts and counts["from-the-second-instance"] == 1
    # an aborted transaction's records were read again and copied by a later commit
    copies = set(counts) - {"from-the-second-instance"}
    assert len(copies) == copied and copies <= {f"copy-v{i}" for i in range(600)}
    offsets = committed(b, group, src)
    assert sum(offsets.values()) == copied
    # transactions v2: every EndTxn bumped the epoch (9 of the first instance; the second's
    # InitProducerId and its commit); v1 keeps it (only the second's InitProducerId bumps it)
    state = describe(b, tid)
    assert (state.error_code, state.transaction_state) == (0, "CompleteCommit")
    assert state.producer_epoch == (txns + 2 if tv == 2 else 1)


@pytest.mark.timeout(420)
def test_java4_consume_transform_produce_exactly_once_across_a_crash(kcoord_factory, members):
    n = 3000
    srv = kcoord_factory({"num.partitions": str(PARTITIONS), "transaction.state.log.num.partitions": "4",
                          "offsets.topic.num.partitions": "4", "group.initial.rebalance.delay.ms": "0"})
    src, dst, group = unique("v2eos-in"), unique("v2eos-out"), unique("v2eos")
    create(srv.bootstrap, src, dst)
    produce(srv.bootstrap, src, 0, n // 2)
    compile_java4()
    a = Background(["java", "-Xshare:auto", "-XX:TieredStopAtLevel=1", "-Xmx256m",
                    "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn", "-Dorg.slf4j.simpleLogger.logFile=System.err",
                    "-cp", java4_classpath(), "TxnCopier", srv.bootstrap, src, dst, group, "copier-v2", "50"],
                   "copier-v2", deadline=400)
    members.append(a)

    def total() -> int:
        try:
            return sum(committed(srv.bootstrap, group, src).values())
        except Exception:  # noqa: BLE001 - the server may be restarting
            return -1

    def wait(cond, timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if cond():
                return
            time.sleep(0.5)
        raise AssertionError(f"timed out waiting for {what}\n{a.describe()}")

    wait(lambda: total() >= 500, 120, "500 records copied")
    srv.kill()  # SIGKILL inside a transaction (each pauses 50 ms before its commit)
    srv.start()
    produce(srv.bootstrap, src, n // 2, n)
    wait(lambda: total() == n, 240, "every record copied")
    a.close()
    out = read_committed(srv.bootstrap, dst, n)
    counts = Counter(out)
    assert not {v: c for v, c in counts.items() if c > 1}, "records copied more than once"
    assert set(counts) == {f"copy-v{i}" for i in range(n)}


# ---------------------------------------------------------------- the protocol level


def batch(values: list[bytes], pid: int, epoch: int, seq: int) -> bytes:
    from aiokafka.record.default_records import DefaultRecordBatchBuilder

    bb = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=1, producer_id=pid,
                                   producer_epoch=epoch, base_sequence=seq, batch_size=2**31 - 1)
    for i, v in enumerate(values):
        bb.append(i, int(time.time() * 1000), b"k", v, [])
    return bytes(bb.build())


class V2Producer:
    """A transactions v2 producer spoken by hand: InitProducerId v5, Produce v12 (no
    AddPartitionsToTxn), TxnOffsetCommit v5 (no AddOffsetsToTxn), EndTxn v5."""

    def __init__(self, bootstrap: str, tid: str) -> None:
        self.b, self.tid = bootstrap, tid
        self.seq: dict[tuple[str, int], int] = {}
        assert call(bootstrap, FindCoordinatorRequest(version=3, key=tid, key_type=1), 3).error_code == 0
        r = call(bootstrap, InitProducerIdRequest(version=5, transactional_id=tid, transaction_timeout_ms=60000,
                                                  producer_id=-1, producer_epoch=-1), 5)
        assert r.error_code == 0
        self.pid, self.epoch = r.producer_id, r.producer_epoch

    def produce(self, topic: str, p: int, values: list[bytes], epoch: int | None = None) -> int:
        epoch = self.epoch if epoch is None else epoch
        seq = self.seq.get((topic, p), 0)
        T = ProduceRequest.TopicProduceData
        r = call(self.b, ProduceRequest(version=12, transactional_id=self.tid, acks=-1, timeout_ms=10000, topic_data=[
            T(name=topic, partition_data=[T.PartitionProduceData(index=p, records=batch(values, self.pid, epoch, seq))])]),
            12)
        code = r.responses[0].partition_responses[0].error_code
        if code == 0:
            self.seq[(topic, p)] = seq + len(values)
        return code

    def commit_offsets(self, group: str, topic: str, p: int, offset: int, epoch: int | None = None) -> int:
        T = TxnOffsetCommitRequest.TxnOffsetCommitRequestTopic
        r = call(self.b, TxnOffsetCommitRequest(
            version=5, transactional_id=self.tid, group_id=group, producer_id=self.pid,
            producer_epoch=self.epoch if epoch is None else epoch, generation_id=-1, member_id="",
            group_instance_id=None, topics=[T(name=topic, partitions=[T.TxnOffsetCommitRequestPartition(
                partition_index=p, committed_offset=offset, committed_leader_epoch=-1, committed_metadata="")])]), 5)
        return r.topics[0].partitions[0].error_code

    def end(self, commit: bool, epoch: int | None = None):
        r = call(self.b, EndTxnRequest(version=5, transactional_id=self.tid, producer_id=self.pid,
                                       producer_epoch=self.epoch if epoch is None else epoch, committed=commit), 5)
        if r.error_code == 0 and epoch is None:
            self.pid, self.epoch = r.producer_id, r.producer_epoch
            self.seq.clear()  # a new epoch starts its sequences at 0
        return r


def fetch(bootstrap: str, topic: str, p: int, isolation: int = 1):
    T = FetchRequest.FetchTopic
    r = call(bootstrap, FetchRequest(
        version=12, replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=2**20, isolation_level=isolation,
        session_id=0, session_epoch=-1, rack_id="", forgotten_topics_data=[],
        topics=[T(topic=topic, partitions=[T.FetchPartition(
            partition=p, current_leader_epoch=-1, fetch_offset=0, last_fetched_epoch=-1, log_start_offset=-1,
            partition_max_bytes=2**20)])]), 12)
    part = r.responses[0].partitions[0]
    data = part.records or b""
    vals = [bytes(v) for h in (split_batches(data) if data else []) if not h.is_control
            for _, _, _, v in iter_batch_records(memoryview(data)[h.position:h.position + h.size])]
    return part, vals


def group_offset(bootstrap: str, group: str, topic: str, p: int) -> tuple[int, int]:
    T = OffsetFetchRequest.OffsetFetchRequestTopic
    r = call(bootstrap, OffsetFetchRequest(version=7, group_id=group, require_stable=True,
                                           topics=[T(name=topic, partition_indexes=[p])]), 7)
    part = r.topics[0].partitions[0]
    return part.committed_offset, part.error_code


def completed(bootstrap: str, tid: str, state: str) -> None:
    """Wait for the transaction's Complete state: EndTxn is answered once the Prepare state is
    durable, as Kafka answers it, and the markers follow."""
    deadline = time.monotonic() + 30
    while describe(bootstrap, tid).transaction_state != state:
        assert time.monotonic() < deadline, f"{tid} never reached {state}"
        time.sleep(0.02)


def test_v2_over_a_socket_and_its_errors(kcoord_factory):
    srv = kcoord_factory({"num.partitions": str(PARTITIONS)})
    b = srv.bootstrap
    create(b, "v2t", "v2in")
    pr = V2Producer(b, "sock-tx")
    pid, epoch = pr.pid, pr.epoch
    assert pr.produce("v2t", 0, [b"a", b"b"]) == 0
    assert pr.produce("v2t", 1, [b"c"]) == 0
    assert pr.commit_offsets("g-sock", "v2in", 0, 7) == 0
    assert group_offset(b, "g-sock", "v2in", 0) == (-1, E.UNSTABLE_OFFSET_COMMIT)
    state = describe(b, "sock-tx")
    assert state.transaction_state == "Ongoing"
    assert {(t.topic, p) for t in state.topics for p in t.partitions} >= {("v2t", 0), ("v2t", 1)}
    r = pr.end(commit=True)
    assert (r.error_code, r.producer_id, r.producer_epoch) == (0, pid, epoch + 1)
    completed(b, "sock-tx", "CompleteCommit")
    part, vals = fetch(b, "v2t", 0)
    assert vals == [b"a", b"b"] and part.aborted_transactions in (None, [])
    assert group_offset(b, "g-sock", "v2in", 0) == (7, 0)
    # a retry of the EndTxn that succeeded (the epoch it was sent with): the same answer
    r = pr.end(commit=True, epoch=epoch)
    assert (r.error_code, r.producer_id, r.producer_epoch) == (0, pid, epoch + 1)
    assert pr.end(commit=False, epoch=epoch).error_code == E.INVALID_TXN_STATE
    # the old epoch is fenced: Produce, TxnOffsetCommit, EndTxn
    assert pr.produce("v2t", 0, [b"zombie"], epoch=epoch) == E.INVALID_PRODUCER_EPOCH
    assert pr.commit_offsets("g-sock", "v2in", 0, 9, epoch=epoch) == E.INVALID_PRODUCER_EPOCH
    assert pr.end(commit=True, epoch=epoch - 1 if epoch else epoch + 5).error_code == E.PRODUCER_FENCED
    # an abort of an empty transaction is allowed in v2 and bumps the epoch
    r = pr.end(commit=False)
    assert (r.error_code, r.producer_epoch) == (0, epoch + 2)
    assert pr.end(commit=True).error_code == E.INVALID_TXN_STATE  # commit of nothing
    # unknown transactional id / wrong producer id
    bad = V2Producer.__new__(V2Producer)
    bad.b, bad.tid, bad.seq, bad.pid, bad.epoch = b, "nobody", {}, pid, 0
    assert bad.end(commit=True).error_code == E.INVALID_PRODUCER_ID_MAPPING
    assert bad.produce("v2t", 0, [b"x"]) == E.INVALID_PRODUCER_ID_MAPPING
    assert bad.commit_offsets("g-sock", "v2in", 0, 1) == E.INVALID_PRODUCER_ID_MAPPING
    # a partition of a topic that does not exist: refused, the rest of the transaction goes on
    assert pr.produce("no-such-topic", 0, [b"x"]) == E.UNKNOWN_TOPIC_OR_PARTITION
    assert pr.produce("v2t", 1, [b"d"]) == 0
    assert pr.end(commit=False).error_code == 0
    completed(b, "sock-tx", "CompleteAbort")
    part, vals = fetch(b, "v2t", 1)
    assert vals == [b"c", b"d"] and [a.producer_id for a in part.aborted_transactions] == [pid]
    assert describe(b, "sock-tx").transaction_state == "CompleteAbort"


@pytest.mark.timeout(240)
@pytest.mark.parametrize("commit", [True, False], ids=["commit", "abort"])
@pytest.mark.parametrize("step", ["prepared", "markers-written", "completed"])
def test_v2_crash_after_each_persisted_step(tmp_path, monkeypatch, step, commit):
    srv = KcoordProcess(tmp_path / "data", overrides={"num.partitions": str(PARTITIONS)})
    srv.start()
    b = srv.bootstrap
    create(b, "ct", "cin")
    pr = V2Producer(b, "crash-tx")
    pid, epoch = pr.pid, pr.epoch
    assert pr.produce("ct", 0, [b"a"]) == 0 and pr.produce("ct", 1, [b"b"]) == 0
    assert pr.commit_offsets("g-crash", "cin", 0, 3) == 0
    srv.stop()
    monkeypatch.setenv("KCOORD_CRASH_AT", f"txn:{step}")
    srv.start()
    monkeypatch.delenv("KCOORD_CRASH_AT")
    b = srv.bootstrap
    try:
        r = pr.end(commit=commit)  # answered (or not) as the server dies
        answered = r.error_code == 0
    except (AssertionError, OSError):
        answered = False
    srv.proc.wait(30)
    assert srv.proc.returncode == -signal.SIGKILL, srv.log_text()[-3000:]
    assert f"Crash point txn:{step} reached" in srv.log_text()
    srv.start()
    b = pr.b = srv.bootstrap
    deadline = time.monotonic() + 60
    while describe(b, "crash-tx").transaction_state not in ("CompleteCommit", "CompleteAbort"):
        assert time.monotonic() < deadline, "recovery did not complete the transaction"
        time.sleep(0.2)
    state = describe(b, "crash-tx")
    assert state.transaction_state == ("CompleteCommit" if commit else "CompleteAbort")
    assert (state.producer_id, state.producer_epoch) == (pid, epoch + 1)
    for p, want in ((0, [b"a"]), (1, [b"b"])):
        part, vals = fetch(b, "ct", p)  # the records, and which of them a read_committed reader drops
        assert vals == want and part.last_stable_offset == part.high_watermark
        # (a marker written again by the recovery adds an empty aborted transaction, as in Kafka)
        assert {a.producer_id for a in part.aborted_transactions or []} == (set() if commit else {pid})
    assert group_offset(b, "g-crash", "cin", 0) == ((3, 0) if commit else (-1, 0))
    # the producer continues with the bumped epoch (a retry of its EndTxn first, if unanswered)
    if not answered:
        r = pr.end(commit=commit)
        assert (r.error_code, r.producer_epoch) == (0, epoch + 1)
    assert pr.epoch == epoch + 1
    assert pr.produce("ct", 0, [b"next"]) == 0
    assert pr.end(commit=True).error_code == 0
    part, vals = fetch(b, "ct", 0)
    assert vals == [b"a", b"next"] and part.last_stable_offset == part.high_watermark
    srv.stop()
