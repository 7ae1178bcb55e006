"""Compaction benchmark: ~2.5 million offset-commit records through the sidecar's Spark pass
(sidecar/pipeline.run_spark: the kafka_segments data source builds the key map, one task per
partition compacts and writes) against the single-process Python baseline.

    python bench/bench_compaction.py [--records 2500000] [--partitions 8] [--segment-bytes 8388608]
                                     [--repeat 3] [--masters local[1],local[2]] [--keep DIR]

The data is generated like a busy kcoord's __consumer_offsets: per partition 24 live consumer
groups (1-3 topics of 8/16/32 partitions, 1-4 members each committing its share in one batch),
a GroupMetadata record per rebalance, offset deletions and whole groups deleted (tombstones)
and replaced, over 3 days; several segments per partition, the last one active.

Every run compacts a fresh copy of the data in place (what `kcoord sidecar` does: closed
segments only, cleaned ones handed over as .swap files), planned by kcoord.sidecar.compact.plan_pass:
- baseline: compact_partition over every partition sequentially in this process, with the same
  reading and writing as the job (partition_io.process_partition without a key map);
- sidecar warm: run_spark on a SparkSession already started and warmed by one untimed pass,
  on local[1] and on local[2]. The baseline is run again before every timed Spark run, so
  both see the same machine; both must give the same per-partition results.
Seconds are the median of --repeat runs (every sample shown); CPU is the CPU time of this
process and all its children (JVM, Python workers) during the run. The ceiling for scaling is
measured in the same run: how much faster 2 CPU-bound Python processes do 2 jobs than 1 process
(2.0x on two idle cores; less when other work shares the machine).
"""
from __future__ import annotations

import argparse
import logging
import os
import random
import shutil
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from kcoord.protocol.coordinator_codec import encode_key, encode_value  # noqa: E402
from kcoord.protocol.coordinator_records import GroupKey, OffsetKey, OffsetValue  # noqa: E402
from kcoord.sidecar.compact import find_partitions, plan_pass  # noqa: E402
from kcoord.sidecar.compaction import Segment  # noqa: E402
from kcoord.sidecar.partition_io import process_partition  # noqa: E402
from kcoord.sidecar.pipeline import _segments_of, code_zip, get_spark, run_spark  # noqa: E402
from kcoord.sidecar.testdata import _group_value, groups_for_partition  # noqa: E402
from kcoord.storage.batch import build_batch  # noqa: E402
from kcoord.storage.segment import segment_name  # noqa: E402

NOW = 1_700_000_000_000
DAY_MS = 86_400_000
TOPIC = "__consumer_offsets"


# ------------------------------------------------------------------------------ data


class _SegmentWriter:
    """Appends batches to a partition directory's .log files, rolling at segment.bytes."""

    def __init__(self, directory: str, segment_bytes: int) -> None:
        self.directory, self.segment_bytes = directory, segment_bytes
        self.file = None
        self.size = 0
        self.offset = 0

    def append(self, recs: list, ts: int) -> int:
        buf = build_batch([(k, v, ts) for k, v in recs], self.offset, 5)
        if self.file is None or self.size + len(buf) > self.segment_bytes:
            self.close()
            self.file = open(os.path.join(self.directory, segment_name(self.offset) + ".log"), "wb")
            self.size = 0
        self.file.write(buf)
        self.size += len(buf)
        self.offset += len(recs)
        return len(recs)

    def close(self) -> None:
        if self.file is not None:
            self.file.close()


def _new_group(rnd: random.Random, name: str) -> dict:
    keys = [encode_key(OffsetKey(name, f"topic-{t}", q))
            for t in range(rnd.randint(1, 3)) for q in range(rnd.choice((8, 16, 32)))]
    return {"name": name, "keys": keys, "offsets": [0] * len(keys), "members": rnd.randint(1, 4),
            "generation": 1, "commits": 0}


def generate_partition(d: str, p: int, partitions: int, records: int, segment_bytes: int,
                       rnd: random.Random) -> int:
    os.makedirs(d)
    names = iter(groups_for_partition(p, partitions, 2000))
    groups = [_new_group(rnd, next(names)) for _ in range(24)]
    ts = NOW - 3 * DAY_MS
    mean_step = 3 * DAY_MS * 12 // records
    out = _SegmentWriter(d, segment_bytes)
    written = 0
    while written < records:
        i = rnd.randrange(len(groups))
        g = groups[i]
        ts += rnd.randint(1, 2 * mean_step)
        r = rnd.random()
        if r < 0.0008:  # the group is deleted: tombstones for its offsets and its metadata
            written += out.append([(k, None) for k in g["keys"]] + [(encode_key(GroupKey(g["name"])), None)], ts)
            groups[i] = _new_group(rnd, next(names))
            continue
        if g["commits"] % 40 == 0:  # a rebalance
            written += out.append([(encode_key(GroupKey(g["name"])),
                                    encode_value(_group_value(g["name"], g["generation"], ts)))], ts)
            g["generation"] += 1
        g["commits"] += 1
        member = rnd.randrange(g["members"])
        idx = range(member, len(g["keys"]), g["members"])
        if r < 0.003:  # an OffsetDelete of one partition
            recs = [(g["keys"][idx[0]], None)]
        else:
            recs = []
            for j in idx:
                g["offsets"][j] += rnd.randint(0, 500)
                recs.append((g["keys"][j], encode_value(OffsetValue(g["offsets"][j], "", ts, g["generation"]))))
        written += out.append(recs, ts)
    out.close()
    return written


def generate(log_dir: str, records: int, partitions: int, segment_bytes: int, seed: int = 1) -> int:
    """Write the partitions' .log files directly (the bytes kcoord writes: one batch per
    commit request); returns the number of records."""
    rnd = random.Random(seed)
    return sum(generate_partition(os.path.join(log_dir, f"{TOPIC}-{p}"), p, partitions, records // partitions,
                                  segment_bytes, rnd) for p in range(partitions))


def dir_stats(log_dir: str) -> tuple[int, int]:
    files = [os.path.join(dp, f) for dp, _, fs in os.walk(log_dir) for f in fs if f.endswith(".log")]
    return len(files), sum(os.path.getsize(f) for f in files)


# ------------------------------------------------------------------------------ measuring

_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def tree_cpu() -> float | None:
    """CPU seconds of this process and all its descendants (incl. reaped children); Linux."""
    try:
        procs = {}
        for pid in os.listdir("/proc"):
            if pid.isdigit():
                try:
                    with open(f"/proc/{pid}/stat") as f:
                        s = f.read()
                except OSError:
                    continue
                fields = s[s.rindex(")") + 2:].split()
                procs[int(pid)] = (int(fields[1]), sum(int(x) for x in fields[11:15]) / _TICK)
    except OSError:
        return None
    children: dict[int, list[int]] = {}
    for pid, (ppid, _c) in procs.items():
        children.setdefault(ppid, []).append(pid)
    total, todo = 0.0, [os.getpid()]
    while todo:
        pid = todo.pop()
        total += procs.get(pid, (0, 0.0))[1]
        todo += children.get(pid, [])
    return total


def _spin(n: int) -> float:
    t = time.perf_counter()
    x = 0
    for i in range(n):
        x += i * i
    return time.perf_counter() - t


def parallel_ceiling(n: int = 4_000_000) -> float:
    """How much faster two CPU-bound Python processes finish two equal jobs than one process
    does them in turn, right now (the machine's usable parallelism; 2.0 on two idle cores)."""
    import multiprocessing

    t = time.perf_counter()
    _spin(n)
    _spin(n)
    one = time.perf_counter() - t
    with multiprocessing.get_context("fork").Pool(2) as pool:
        pool.map(_spin, [n // 10, n // 10])  # started
        t = time.perf_counter()
        pool.map(_spin, [n, n])
        two = time.perf_counter() - t
    return one / two


def fresh_plans(data: str, work: str):
    shutil.rmtree(work, ignore_errors=True)
    shutil.copytree(data, work)
    plans, skipped = plan_pass(work, find_partitions(work, None), output_dir=None)
    assert not skipped, skipped
    return plans


def baseline(plans, options) -> list[dict]:
    out = []
    for pl in plans:
        segs = []
        for base, path in zip(pl.bases, pl.paths(), strict=True):
            with open(path, "rb") as f:
                segs.append(Segment(base, f.read()))
        out.append(process_partition(pl.partition, _segments_of(pl, segs), source_dir=pl.directory,
                                     output=pl.output, **options))
    return out


def timed(fn):
    c0, t0 = tree_cpu(), time.perf_counter()
    result = fn()
    secs = time.perf_counter() - t0
    c1 = tree_cpu()
    return result, secs, (None if c0 is None or c1 is None else c1 - c0)


def comparable(results: list[dict]) -> list[dict]:
    return [{k: v for k, v in r.items() if k != "seconds"} for r in sorted(results, key=lambda r: r["partition"])]


# ------------------------------------------------------------------------------ main


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=2_500_000)
    ap.add_argument("--partitions", type=int, default=8)
    ap.add_argument("--segment-bytes", type=int, default=8 * 1024 * 1024)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--masters", default="local[1],local[2]")
    ap.add_argument("--keep", default=None, help="generate into (and keep) this directory")
    a = ap.parse_args()
    logging.getLogger("kcoord.storage").setLevel(logging.ERROR)

    root = a.keep or tempfile.mkdtemp(prefix="kcoord-bench-compact-")
    data = os.path.join(root, "data")
    work = os.path.join(root, "work")
    t = time.perf_counter()
    if not os.path.isdir(data):
        generate(data, a.records, a.partitions, a.segment_bytes)
    gen_s = time.perf_counter() - t
    nfiles, nbytes = dir_stats(data)
    options = dict(now_ms=NOW)

    rows = []  # (name, [seconds], [cpu], records)
    base_secs: list[float] = []
    base_cpu: list[float] = []
    records = 0
    reference = None

    def run_baseline():
        nonlocal records, reference
        plans = fresh_plans(data, work)
        res, secs, cpu = timed(lambda: baseline(plans, options))
        assert not any(r["extra"].get("error") for r in res), res
        records = sum(r["records_in"] for r in res)
        reference = comparable(res)
        base_secs.append(secs)
        base_cpu.append(cpu)
        return res

    out_records = sum(r["records_out"] for r in run_baseline())  # also warms this process
    base_secs.clear()
    base_cpu.clear()
    print(f"data: {records:,} records to clean (+ the active segments) in {a.partitions} partitions, "
          f"{nfiles} segments, {nbytes / 1e6:.1f} MB (segment.bytes {a.segment_bytes}), generated in "
          f"{gen_s:.1f} s; {out_records:,} records kept; cores {os.cpu_count()}", flush=True)

    ceilings = [parallel_ceiling()]
    code_dir = tempfile.mkdtemp(prefix="kcoord-bench-code-")
    spark_rows = []
    try:
        for master in a.masters.split(","):
            spark = get_spark(master, "kcoord-bench-compaction")
            spark.sparkContext.setLogLevel("ERROR")
            spark.sparkContext.addPyFile(code_zip(code_dir))
            try:
                t = time.perf_counter()
                run_spark(spark, fresh_plans(data, work), options)  # warm: JVM, Python workers, JIT
                warm_s = time.perf_counter() - t
                secs, cpus = [], []
                for _ in range(a.repeat):
                    run_baseline()
                    plans = fresh_plans(data, work)
                    res, s, c = timed(lambda plans=plans, spark=spark: run_spark(spark, plans, options))
                    assert comparable(res) == reference, "the Spark pass and the baseline differ"
                    secs.append(s)
                    cpus.append(c)
                spark_rows.append((f"sidecar warm, {master}", secs, cpus, warm_s))
            finally:
                spark.stop()
    finally:
        shutil.rmtree(code_dir, ignore_errors=True)
        shutil.rmtree(work, ignore_errors=True)
        if not a.keep:
            shutil.rmtree(root, ignore_errors=True)

    ceilings.append(parallel_ceiling())
    rows.append(("baseline: compact_partition, 1 process", base_secs, base_cpu, None))
    rows += spark_rows
    base = statistics.median(base_secs)
    print()
    print(f"{'what':40} {'seconds':>8} {'records/s':>11} {'vs base':>8} {'CPU s':>6}  samples (s)")
    for name, secs, cpus, warm_s in rows:
        med = statistics.median(secs)
        cpu = "-" if None in cpus else f"{statistics.median(cpus):.1f}"
        samples = " ".join(f"{s:.2f}" for s in secs) + (f" (warm-up pass {warm_s:.1f})" if warm_s else "")
        print(f"{name:40} {med:8.2f} {records / med:11,.0f} {base / med:7.2f}x {cpu:>6}  {samples}")
    if len(spark_rows) >= 2:
        one, two = statistics.median(spark_rows[0][1]), statistics.median(spark_rows[-1][1])
        print(f"\nscaling {spark_rows[0][0].split(', ')[1]} -> {spark_rows[-1][0].split(', ')[1]}: "
              f"{one / two:.2f}x; baseline samples alternate with the Spark runs")
    print("ceiling: 2 CPU-bound Python processes vs 1, before and after: "
          + ", ".join(f"{c:.2f}x" for c in ceilings))


if __name__ == "__main__":
    main()
