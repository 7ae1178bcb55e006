"""Compaction benchmark: ~50 MB of generated __consumer_offsets data through the Spark job.

    python bench/bench_compaction.py [--mb 50] [--partitions 8] [--master local[*]] [--keep DIR]

Prints records/s and MB/s of the full job (read, compact, write, reload) with and without
--verify, next to two ceilings measured in the same run on the same bytes: Spark reading them
(binaryFile, shuffled by partition like the job, bytes summed in Python workers) and a plain
single-process Python read. Also the pure compaction function on one core, without Spark.
"""
from __future__ import annotations

import argparse
import io
import os
import random
import shutil
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from protocol.coordinator_codec import encode_key, encode_value  # noqa: E402
from protocol.coordinator_records import GroupKey, OffsetKey, OffsetValue  # noqa: E402
from sidecar.compact import get_spark, parse_args, run  # noqa: E402
from sidecar.compaction import compact_partition, read_partition_segments  # noqa: E402
from sidecar.testdata import _group_value, groups_for_partition  # noqa: E402
from storage.log import PartitionLog  # noqa: E402

NOW = 1_700_000_000_000


def generate(log_dir: str, total_mb: float, partitions: int, segment_bytes: int) -> int:
    """Offset commits as the coordinator writes them (one batch per commit request of a group:
    64 partitions of 2 topics), a group record every 50 commits, 1% tombstones."""
    rnd = random.Random(1)
    per_partition = int(total_mb * 1e6 / partitions)
    total = 0
    for p in range(partitions):
        plog = PartitionLog(os.path.join(log_dir, f"__consumer_offsets-{p}"), segment_bytes=segment_bytes)
        groups = groups_for_partition(p, partitions, 40)
        keys = {g: [encode_key(OffsetKey(g, f"topic-{t}", q)) for t in range(2) for q in range(32)] for g in groups}
        ts = NOW - 2 * 86_400_000
        i = 0
        while plog.size_in_bytes < per_partition:
            g = groups[i % len(groups)]
            recs = [(k, encode_value(OffsetValue(i * 10 + j, "", ts, 5))) for j, k in enumerate(keys[g])]
            if rnd.random() < 0.01:
                recs = [(k, None) for k in keys[g][:8]]
            plog.append_records(recs, ts)
            total += len(recs)
            if i % 50 == 0:
                plog.append_records([(encode_key(GroupKey(g)), encode_value(_group_value(g, i, ts)))], ts)
                total += 1
            ts += 1000
            i += 1
        plog.close()
    return total


def dir_bytes(log_dir: str) -> int:
    return sum(os.path.getsize(os.path.join(dp, f)) for dp, _, fs in os.walk(log_dir) for f in fs if f.endswith(".log"))


def spark_read_ceiling(spark, log_dir: str, partitions: int) -> float:
    from pyspark.sql import functions as F

    paths = ["file://" + os.path.join(dp, f) for dp, _, fs in os.walk(log_dir) for f in fs if f.endswith(".log")]
    t = time.perf_counter()
    df = (spark.read.format("binaryFile").load(paths)
          .withColumn("partition", F.regexp_extract("path", r"__consumer_offsets-(\d+)/", 1).cast("int"))
          .select("partition", "content").repartition(partitions, "partition"))
    n = df.rdd.mapPartitions(lambda rows: [sum(len(r["content"]) for r in rows)]).sum()
    assert n == dir_bytes(log_dir)
    return time.perf_counter() - t


def python_read_ceiling(log_dir: str) -> float:
    t = time.perf_counter()
    n = 0
    for dp, _, fs in os.walk(log_dir):
        for f in fs:
            if f.endswith(".log"):
                with open(os.path.join(dp, f), "rb") as fh:
                    n += len(fh.read())
    return time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mb", type=float, default=50)
    ap.add_argument("--partitions", type=int, default=8)
    ap.add_argument("--segment-bytes", type=int, default=1024 * 1024)
    ap.add_argument("--master", default="local[*]")
    ap.add_argument("--keep", default=None, help="generate into (and keep) this directory")
    a = ap.parse_args()

    root = a.keep or tempfile.mkdtemp(prefix="kcoord-bench-compact-")
    log_dir = os.path.join(root, "data")
    t = time.perf_counter()
    if not os.path.isdir(log_dir):
        generate(log_dir, a.mb, a.partitions, a.segment_bytes)
    records = 0  # counted by the job (its summary table's total row)
    gen_s = time.perf_counter() - t
    nbytes = dir_bytes(log_dir)
    print(f"data: {nbytes / 1e6:.1f} MB in {a.partitions} partitions, generated in {gen_s:.1f} s "
          f"(segment.bytes {a.segment_bytes}), cores {os.cpu_count()}, master {a.master}")

    spark = get_spark(a.master, "kcoord-bench-compaction")
    spark.sparkContext.setLogLevel("ERROR")
    try:
        spark.sparkContext.parallelize(range(4), 4).count()  # JVM + Python workers warm
        rows = []
        py_s = python_read_ceiling(log_dir)
        rows.append(("ceiling: Python read (1 process)", py_s, None))
        spark_read_ceiling(spark, log_dir, a.partitions)  # warm the binaryFile path once
        sp_s = spark_read_ceiling(spark, log_dir, a.partitions)
        rows.append(("ceiling: Spark binaryFile read + shuffle", sp_s, None))
        for verify in (False, True):
            out = os.path.join(root, f"out-{int(verify)}")
            shutil.rmtree(out, ignore_errors=True)
            argv = [log_dir, "--output", out, "--now-ms", str(NOW)] + (["--verify"] if verify else [])
            buf = io.StringIO()
            t = time.perf_counter()
            rc = run(parse_args(argv), spark=spark, out=buf)
            dt = time.perf_counter() - t
            assert rc == 0, buf.getvalue()
            total_line = [ln for ln in buf.getvalue().splitlines() if ln.strip().startswith("total")][0].split()
            records, out_records, out_bytes = int(total_line[1]), int(total_line[2]), int(total_line[4])
            rows.append((f"Spark compaction job{' + --verify' if verify else ''}", dt, (records, out_records, out_bytes)))
        # The pure function on one core, one partition, for scale.
        segs = read_partition_segments(os.path.join(log_dir, "__consumer_offsets-0"))
        t = time.perf_counter()
        res = compact_partition(segs, now_ms=NOW)
        pure_s = time.perf_counter() - t
    finally:
        spark.stop()

    print()
    print(f"{'what':45} {'seconds':>8} {'MB/s':>8} {'records/s':>11}  result")
    for name, secs, res_ in rows:
        extra = "" if res_ is None else f"{res_[0]} -> {res_[1]} records, {res_[2] / 1e6:.2f} MB out"
        print(f"{name:45} {secs:8.2f} {nbytes / 1e6 / secs:8.1f} {records / secs:11,.0f}  {extra}")
    pb = res.stats.bytes_in
    print(f"{'pure compact_partition, 1 core, partition 0':45} {pure_s:8.2f} {pb / 1e6 / pure_s:8.1f} "
          f"{res.stats.records_in / pure_s:11,.0f}  {res.stats.records_in} -> {res.stats.records_out} records")
    if not a.keep:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
