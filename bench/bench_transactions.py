"""Transactions through kcoord with confluent-kafka (librdkafka), each beside its baseline
measured in the same run:

1. A transaction of R records of 1 KiB (AddPartitionsToTxn, Produce, AddOffsetsToTxn,
   TxnOffsetCommit, EndTxn with its markers) against the same records produced idempotently
   with acks=all followed by a plain synchronous OffsetCommit, the kinds alternating within
   every round (their order rotating round by round, so drift and position hit all alike).
   Target: a transaction takes at most 2x the baseline. The ratio is taken per round (each
   run against the baseline of its own round) and reported as the median of those ratios
   with its interquartile range and a bootstrap 95% interval, so a noisy machine shows as a
   wide interval instead of a wrong number; the load average is printed beside it. Two
   servers side by side, one per design of EndTxn's answer
   (kcoord.transaction.end.answer.on.prepare): once PrepareCommit is durable, as Kafka
   answers (the default; the markers follow, and a request of the next transaction meeting
   them waits for them: server/txn/settling.py), or once the transaction is complete. Each is
   timed for one transaction and for transactions begun back to back.
2. Consuming the same transactional data (N records in transactions of 1,000, one in ten
   aborted) with isolation.level=read_committed against read_uncommitted, alternating.
   Target: read_committed at least 80% of read_uncommitted's throughput.

Usage: python bench/bench_transactions.py [--rounds 200] [--records 100] [--consume-records 100000]
"""
from __future__ import annotations

import argparse
import os
import random
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
    """Per round, in a rotating order: one transaction on each design's server, two
    transactions back to back on each (the second meets the first's markers if they are
    still being written), and the baseline. Returns seconds per run kind and round
    (back-to-back: per transaction); every list is indexed by round."""
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

    def baseline(r: int) -> None:
        t0 = time.perf_counter()
        for _ in range(records):
            idem.produce("bench-idem", value=value)
        assert idem.flush(30) == 0
        plain.commit(offsets=[TopicPartition("bench-input", 0, r + 1)], asynchronous=False)
        if r:
            out["baseline"].append(time.perf_counter() - t0)

    def transactions(name: str, c: TxnClient, r: int) -> None:
        t0 = time.perf_counter()
        c.one(records, value)
        t1 = time.perf_counter()
        c.one(records, value)
        c.one(records, value)
        t2 = time.perf_counter()
        if r:
            out[name].append(t1 - t0)
            out[name + " back-to-back"].append((t2 - t1) / 2)

    steps = [lambda r: baseline(r)] + [lambda r, n=n, c=c: transactions(n, c, r) for n, c in clients.items()]
    for r in range(rounds + 1):  # round 0 warms every path up and is not counted
        k = r % len(steps)
        for step in steps[k:] + steps[:k]:
            step(r)
    for c in clients.values():
        c.close()
    plain.close()
    return out


def quantile(xs: list[float], q: float) -> float:
    """The q-quantile (0..1) of xs, interpolated."""
    ys = sorted(xs)
    if len(ys) == 1:
        return ys[0]
    i = q * (len(ys) - 1)
    lo = int(i)
    hi = min(lo + 1, len(ys) - 1)
    return ys[lo] + (ys[hi] - ys[lo]) * (i - lo)


def median_interval(xs: list[float], resamples: int = 2000) -> tuple[float, float]:
    """A bootstrap 95% interval of the median of xs (seeded: the same data, the same interval)."""
    rng = random.Random(1)
    meds = sorted(statistics.median(rng.choices(xs, k=len(xs))) for _ in range(resamples))
    return meds[int(0.025 * resamples)], meds[int(0.975 * resamples) - 1]


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
    ap.add_argument("--rounds", type=int, default=200)
    ap.add_argument("--records", type=int, default=100)
    ap.add_argument("--consume-records", type=int, default=100_000)
    ap.add_argument("--consume-runs", type=int, default=5)
    args = ap.parse_args()
    log_dir = tempfile.mkdtemp(prefix="kcoord-bench-txn-")
    procs = []
    try:
        designs: dict[str, str] = {}
        for name, on_prepare in (("EndTxn answered once prepared (Kafka, the default)", "true"),
                                 ("EndTxn answered once complete", "false")):
            proc, port, _ = start_kcoord({"transaction.state.log.num.partitions": "50",
                                          "kcoord.transaction.end.answer.on.prepare": on_prepare},
                                         log_dir=os.path.join(log_dir, on_prepare))
            procs.append(proc)
            designs[name] = f"127.0.0.1:{port}"
        bootstrap = next(iter(designs.values()))
        load_before = os.getloadavg()
        try:
            runs = transactions_vs_idempotent(designs, args.rounds, args.records)
            load_after = os.getloadavg()
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

    base = runs["baseline"]
    rows = []
    for name in designs:
        for kind in (name, name + " back-to-back"):
            xs = runs[kind]
            ratios = [x / b for x, b in zip(xs, base, strict=True)]
            r_med = statistics.median(ratios)
            lo, hi = median_interval(ratios)
            label = (f"transaction, {name}" if kind == name
                     else "  the same, the next transaction begun at once (per transaction)")
            rows.append([label, 1000 * statistics.median(xs), f"{1000 * quantile(xs, .25):.1f}-{1000 * quantile(xs, .75):.1f}",
                         1000 * quantile(xs, .9), int(args.records / statistics.median(xs)),
                         f"{r_med:.2f}x ({quantile(ratios, .25):.2f}-{quantile(ratios, .75):.2f})",
                         f"{lo:.2f}-{hi:.2f}x", "yes" if hi <= 2 else "no" if lo > 2 else "unclear"])
    b_med = statistics.median(base)
    rows.append(["  baseline: idempotent acks=all produce + OffsetCommit", 1000 * b_med,
                 f"{1000 * quantile(base, .25):.1f}-{1000 * quantile(base, .75):.1f}", 1000 * quantile(base, .9),
                 int(args.records / b_med), "1.00x", "", ""])
    print(f"{args.rounds} rounds of {args.records} records of {VALUE_SIZE} B, the kinds alternating in a rotating "
          "order; a transaction is AddPartitions, produce, AddOffsets, TxnOffsetCommit, EndTxn; "
          f"load average {load_before[0]:.2f} before, {load_after[0]:.2f} after ({os.cpu_count()} cores)")
    print(table(["run", "median ms", "p25-p75 ms", "p90 ms", "records/s", "vs baseline: median of per-round "
                 "ratios (p25-p75)", "95% interval", "<= 2x"], rows))
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
