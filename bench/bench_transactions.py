"""Transactions through kcoord with confluent-kafka (librdkafka), each beside its baseline
measured in the same run:

1. A transaction of R records of 1 KiB (AddPartitionsToTxn, Produce, AddOffsetsToTxn,
   TxnOffsetCommit, EndTxn with its markers) against the same records produced idempotently
   with acks=all followed by a plain synchronous OffsetCommit, the kinds alternating round by
   round. Target: a transaction takes at most 2x the baseline. Two servers side by side, one
   per design of EndTxn's answer (kcoord.transaction.end.answer.on.prepare): once the
   transaction is complete, or once PrepareCommit is durable as Kafka answers (the markers
   follow; the next transaction's AddPartitionsToTxn may meet them and retry). Each is timed
   for one transaction and for transactions begun back to back.
2. Consuming the same transactional data (N records in transactions of 1,000, one in ten
   aborted) with isolation.level=read_committed against read_uncommitted, alternating.
   Target: read_committed at least 80% of read_uncommitted's throughput.

Usage: python bench/bench_transactions.py [--rounds 40] [--records 100] [--consume-records 100000]
"""
from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
import time

from _util import start_kcoord, stop, table
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

VALUE_SIZE = 1024
MiB = 1024 * 1024


def create(bootstrap: str, *topics: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.create_topics([NewTopic(t, 1, 1) for t in topics]).values():
        try:
            f.result(30)
        except KafkaException as e:
            if e.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
                raise


class TxnClient:
    """A transactional producer and the consumer group metadata its offsets go with."""

    def __init__(self, bootstrap: str, tag: str) -> None:
        create(bootstrap, f"bench-txn-{tag}", "bench-input")
        self.topic = f"bench-txn-{tag}"
        self.meta_consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"bench-txn-group-{tag}",
                                       "enable.auto.commit": False})
        self.meta = self.meta_consumer.consumer_group_metadata()
        self.p = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"bench-tx-{tag}", "linger.ms": 1})
        self.p.init_transactions(30)
        self.offset = 0

    def one(self, records: int, value: bytes) -> None:
        self.offset += 1
        self.p.begin_transaction()
        for _ in range(records):
            self.p.produce(self.topic, value=value)
        self.p.send_offsets_to_transaction([TopicPartition("bench-input", 0, self.offset)], self.meta, 30)
        self.p.commit_transaction(30)

    def close(self) -> None:
        self.meta_consumer.close()


def transactions_vs_idempotent(designs: dict[str, str], rounds: int, records: int) -> dict[str, list[float]]:
    """Per round, alternately: one transaction on each design's server, two transactions back
    to back on each (the second meets the first's markers if they are still being written),
    and the baseline. Returns seconds per run kind (back-to-back: per transaction)."""
    value = os.urandom(VALUE_SIZE)
    base = next(iter(designs.values()))
    create(base, "bench-idem", "bench-input")
    plain = Consumer({"bootstrap.servers": base, "group.id": "bench-idem-group", "enable.auto.commit": False})
    idem = Producer({"bootstrap.servers": base, "enable.idempotence": True, "acks": "all", "linger.ms": 1})
    idem.produce("bench-idem", value=b"warmup")
    idem.flush(30)
    plain.commit(offsets=[TopicPartition("bench-input", 0, 0)], asynchronous=False)
    clients = {name: TxnClient(b, f"d{i}") for i, (name, b) in enumerate(designs.items())}
    out: dict[str, list[float]] = {"baseline": []}
    for name in designs:
        out[name] = []
        out[name + " back-to-back"] = []
    for r in range(rounds + 1):  # round 0 warms every path up and is not counted
        for name, c in clients.items():
            t0 = time.perf_counter()
            c.one(records, value)
            t1 = time.perf_counter()
            c.one(records, value)
            c.one(records, value)
            t2 = time.perf_counter()
            if r:
                out[name].append(t1 - t0)
                out[name + " back-to-back"].append((t2 - t1) / 2)
        t0 = time.perf_counter()
        for _ in range(records):
            idem.produce("bench-idem", value=value)
        assert idem.flush(30) == 0
        plain.commit(offsets=[TopicPartition("bench-input", 0, r + 1)], asynchronous=False)
        if r:
            out["baseline"].append(time.perf_counter() - t0)
    for c in clients.values():
        c.close()
    plain.close()
    return out


def fill_transactional(bootstrap: str, topic: str, n: int) -> int:
    """n records in transactions of 1,000, every tenth aborted; returns how many committed."""
    create(bootstrap, topic)
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"{topic}-filler", "linger.ms": 5,
                  "queue.buffering.max.messages": 1_000_000})
    p.init_transactions(30)
    value = os.urandom(VALUE_SIZE)
    committed = 0
    for t in range(n // 1000):
        p.begin_transaction()
        for _ in range(1000):
            p.produce(topic, value=value)
        if t % 10 == 9:
            p.flush(60)
            p.abort_transaction(60)
        else:
            p.commit_transaction(60)
            committed += 1000
    return committed


def consume(bootstrap: str, topic: str, isolation: str, expect: int) -> tuple[float, int]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"bench-{isolation}-{time.monotonic_ns()}",
                  "isolation.level": isolation, "enable.auto.commit": False, "fetch.wait.max.ms": 100})
    c.assign([TopicPartition(topic, 0, 0)])
    got = 0
    t0 = time.perf_counter()
    deadline = t0 + 300
    while got < expect and time.perf_counter() < deadline:
        # small batches with a short wait: consume() blocks until num_messages or the timeout,
        # which would add a full timeout to whichever isolation level ends mid-batch
        for m in c.consume(num_messages=500, timeout=0.05):
            if m.error() is None:
                got += 1
    elapsed = time.perf_counter() - t0
    c.close()
    assert got >= expect, f"{isolation}: consumed {got} of {expect}"
    return elapsed, got


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=40)
    ap.add_argument("--records", type=int, default=100)
    ap.add_argument("--consume-records", type=int, default=100_000)
    ap.add_argument("--consume-runs", type=int, default=5)
    args = ap.parse_args()
    log_dir = tempfile.mkdtemp(prefix="kcoord-bench-txn-")
    procs = []
    try:
        designs: dict[str, str] = {}
        for name, on_prepare in (("EndTxn answered once complete", "false"),
                                 ("EndTxn answered once prepared (Kafka)", "true")):
            proc, port, _ = start_kcoord({"transaction.state.log.num.partitions": "50",
                                          "kcoord.transaction.end.answer.on.prepare": on_prepare},
                                         log_dir=os.path.join(log_dir, on_prepare))
            procs.append(proc)
            designs[name] = f"127.0.0.1:{port}"
        bootstrap = next(iter(designs.values()))
        try:
            runs = transactions_vs_idempotent(designs, args.rounds, args.records)
            n = args.consume_records
            committed = fill_transactional(bootstrap, "bench-consume", n)
            rc, ru = [], []
            for _ in range(args.consume_runs):  # alternately, so both see the same machine
                rc.append(consume(bootstrap, "bench-consume", "read_committed", committed)[0])
                ru.append(consume(bootstrap, "bench-consume", "read_uncommitted", n)[0])
        finally:
            for proc in procs:
                stop(proc)
    finally:
        shutil.rmtree(log_dir, ignore_errors=True)

    def ms(xs: list[float], q: float) -> float:
        return 1000 * statistics.quantiles(xs, n=100)[int(q) - 1] if len(xs) > 1 else 1000 * xs[0]

    i_med = statistics.median(runs["baseline"])
    rows = []
    for name in designs:
        for kind in (name, name + " back-to-back"):
            t = statistics.median(runs[kind])
            label = (f"transaction, {name}" if kind == name
                     else "  the same, the next transaction begun at once (per transaction)")
            rows.append([label, 1000 * t, ms(runs[kind], 90), int(args.records / t),
                         f"{t / i_med:.2f}x (target <= 2x)"])
    rows.append(["  baseline: idempotent acks=all produce + OffsetCommit", 1000 * i_med, ms(runs["baseline"], 90),
                 int(args.records / i_med), "1.00x"])
    print(f"{args.rounds} rounds of {args.records} records of {VALUE_SIZE} B, alternating; a transaction is "
          "AddPartitions, produce, AddOffsets, TxnOffsetCommit, EndTxn")
    print(table(["run", "median ms", "p90 ms", "records/s", "vs baseline"], rows))
    mb_u = n * VALUE_SIZE / MiB
    best_c, best_u = min(rc), min(ru)
    print(f"\nconsume {n:,} transactional records ({committed:,} committed, {n - committed:,} aborted), "
          f"best of {args.consume_runs} alternating runs")
    print(table(["run", "ms", "MiB/s (all bytes read)", "records/s delivered", "vs baseline"], [
        ["read_committed", 1000 * best_c, mb_u / best_c, int(committed / best_c),
         f"{100 * best_u / best_c:.0f}% (target >= 80%)"],
        ["  baseline: read_uncommitted", 1000 * best_u, mb_u / best_u, int(n / best_u), "100%"],
    ]))


if __name__ == "__main__":
    main()
