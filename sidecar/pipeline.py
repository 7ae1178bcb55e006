"""The Spark side of a compaction pass: one Spark job, two stages, over the planned partitions
of every compacted topic (numbered within the job: topics share partition numbers).

Phase 1 reads every cleanable planned segment with the `kafka_segments` data source
(sidecar/datasource.py), one task per segment, with latestPerKey: each task keeps the last
record of each key of its segment. Spark SQL then takes max(offset) per (partition, key):
Kafka's offset map of each log partition, built in parallel. Phase 2 hands each log
partition's map to one task (groupBy + applyInArrow), which reads that partition's planned
segments from disk, compacts them with the map (sidecar/compaction.py) and writes the output
(sidecar/partition_io.py: a new directory, or `.cleaned`/`.swap` files beside the live
segments); it returns process_partition's stats. Executors read and write the log directory
themselves: it must be on a filesystem every executor sees (local mode, or a shared volume).

The key map covers the cleanable segments only (never the active one), as Kafka's does; with
`active_base` set the active segment is not read at all and an empty stand-in takes its place.
"""
from __future__ import annotations

import contextlib
import json
import logging
import os
import sys
import zipfile
from dataclasses import dataclass, field

from kcoord.sidecar.partition_io import Output

__all__ = ["PartitionPlan", "cleanable_paths", "code_zip", "compact_planned_partition", "compaction_frame", "get_spark",
           "run_spark", "slot_values", "spark_hash_int"]

_PACKAGES = ("kcoord",)  # its server/protocol/storage/sidecar are links in a checkout


@dataclass(frozen=True)
class PartitionPlan:
    """What one pass does with one partition (of any compacted topic)."""

    partition: int
    directory: str
    bases: list[int]  # segments to read, oldest first
    output: Output
    # The active segment's base offset when it is not read (in place: the server appends to
    # it); compaction then gets an empty stand-in for it. None: `bases` ends with the active one.
    active_base: int | None = None
    topic: str = "__consumer_offsets"
    # this partition's own pass options over the pass's (its topic's segment.bytes,
    # delete.retention.ms, the verify mode)
    settings: dict = field(default_factory=dict)

    @property
    def key(self) -> tuple[str, int]:
        return self.topic, self.partition

    def paths(self) -> list[str]:
        from kcoord.storage.segment import segment_name

        return [os.path.join(self.directory, segment_name(b) + ".log") for b in self.bases]


def code_zip(tmpdir: str) -> str:
    """The project's packages as a zip for the executors (spark.addPyFile), with their data
    files (protocol/schemas/*.json and the like): an executor imports the project from this
    zip first, whether or not the project's source directory is also on its path."""
    import importlib

    path = os.path.join(tmpdir, "kcoord_code.zip")
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        for pkg in _PACKAGES:
            root = os.path.dirname(importlib.import_module(pkg).__file__)
            base = os.path.dirname(root)
            for dirpath, dirnames, files in os.walk(root, followlinks=True):
                dirnames[:] = [d for d in dirnames if d != "__pycache__"]
                for fn in files:
                    if not fn.endswith((".pyc", ".pyo")):
                        full = os.path.join(dirpath, fn)
                        z.write(full, os.path.relpath(full, base))
    return path


def get_spark(master: str = "local[*]", app_name: str = "kcoord-compact"):
    """A SparkSession (reused if one is active). Executors default to this interpreter.

    The JVMs run with C1 only (-XX:TieredStopAtLevel=1; KCOORD_COMPACT_JAVA_OPTS replaces
    it): the JVM only coordinates here (the records are parsed in Python), and C2 kept
    recompiling for ~0.8 CPU-s per pass, warm, on 2 cores shared with the Python workers."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    java_opts = os.environ.get("KCOORD_COMPACT_JAVA_OPTS", "-XX:TieredStopAtLevel=1")
    return (SparkSession.builder.master(master).appName(app_name)
            .config("spark.ui.enabled", "false")
            .config("spark.ui.showConsoleProgress", "false")
            .config("spark.sql.shuffle.partitions", "8")
            .config("spark.driver.memory", os.environ.get("KCOORD_COMPACT_DRIVER_MEMORY", "2g"))
            .config("spark.driver.extraJavaOptions", java_opts)
            .config("spark.executor.extraJavaOptions", java_opts)
            .getOrCreate())


def _segments_of(plan: PartitionPlan, segs: list) -> list:
    from kcoord.sidecar.compaction import Segment

    segs = sorted(segs, key=lambda s: s.base_offset)
    if plan.active_base is not None:
        segs.append(Segment(plan.active_base, b""))
    return segs


def cleanable_paths(plan: PartitionPlan) -> list[str]:
    """The planned segments the key map is built over: all but the active one (when the plan
    reads it, i.e. `active_base` is None, it is the last of `bases`)."""
    paths = plan.paths()
    return paths if plan.active_base is not None else paths[:-1]


# ------------------------------------------------------------------------------ slots
# Phase 2 runs one task per log partition. Spark hash-partitions a shuffle by Murmur3 (seed 42)
# of the key, pmod the partition count, so partition numbers themselves would collide (two
# log partitions in one task, an idle core meanwhile). Each log partition instead gets a
# "slot": an int that hashes to the shuffle partition we choose for it, the biggest log
# partition in shuffle partition 0 (Spark launches a stage's tasks in index order, so this
# is longest-first scheduling).


def _imul(a: int, b: int) -> int:
    return (a * b) & 0xFFFFFFFF


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (32 - r))) & 0xFFFFFFFF


def spark_hash_int(value: int, seed: int = 42) -> int:
    """Spark's Murmur3_x86_32.hashInt (what `F.hash` and hash partitioning compute for an int)."""
    k1 = _imul(_rotl(_imul(value & 0xFFFFFFFF, 0xCC9E2D51), 15), 0x1B873593)
    h1 = _rotl((seed & 0xFFFFFFFF) ^ k1, 13)
    h1 = (h1 * 5 + 0xE6546B64) & 0xFFFFFFFF
    h1 ^= 4
    h1 ^= h1 >> 16
    h1 = _imul(h1, 0x85EBCA6B)
    h1 ^= h1 >> 13
    h1 = _imul(h1, 0xC2B2AE35)
    h1 ^= h1 >> 16
    return h1 - (1 << 32) if h1 & 0x80000000 else h1


def slot_values(n: int) -> list[int]:
    """For each shuffle partition i < n, the smallest int that hash partitioning sends to i."""
    slots: list[int | None] = [None] * n
    missing, v = n, 0
    while missing:
        i = spark_hash_int(v) % n  # Python's % is Spark's pmod for a positive n
        if slots[i] is None:
            slots[i] = v
            missing -= 1
        v += 1
    return slots  # type: ignore[return-value]


def _size(path: str) -> int:
    try:
        return os.path.getsize(path)
    except OSError:
        return 0


def _planned_bytes(plan: PartitionPlan) -> int:
    return sum(map(_size, plan.paths()))


# ------------------------------------------------------------------------------ the job


def _error_result(plan: PartitionPlan, error: Exception) -> dict:
    """A result like process_partition's for a failure before it could run."""
    from kcoord.sidecar.compaction import PartitionStats

    st = PartitionStats(topic=plan.topic, partition=plan.partition, segments_in=len(plan.bases), verified="error")
    st.extra["error"] = f"{type(error).__name__}: {error}"
    return st.as_dict()


def compact_planned_partition(plan: PartitionPlan, key_map: dict[bytes, int] | None, options: dict) -> dict:
    """Phase 2 for one log partition (an executor): read its planned segments, compact them
    with the key map phase 1 built, write the output (sidecar/partition_io.py)."""
    from kcoord.sidecar.compaction import Segment
    from kcoord.sidecar.partition_io import process_partition

    segs = []
    try:
        for base, path in zip(plan.bases, plan.paths(), strict=True):
            with open(path, "rb") as f:
                segs.append(Segment(base, f.read()))
    except OSError as e:
        return _error_result(plan, e)
    return process_partition(plan.partition, _segments_of(plan, segs), source_dir=plan.directory,
                             output=plan.output, key_map=key_map, topic=plan.topic,
                             **{**options, **plan.settings})


def _phase2(plans: dict[int, PartitionPlan], options: dict):
    """The grouped-map function: (slot, plan number) and that partition's key-map rows ->
    one row (plan number, pickled result dict). Plans are numbered because the partitions of
    several topics share their partition numbers."""

    def run(key, table):
        import pickle

        import pyarrow as pa

        from kcoord.sidecar.datasource import freeze_worker_heap

        freeze_worker_heap()
        logging.getLogger("kcoord.storage").setLevel(logging.ERROR)
        partition = key[1].as_py()
        keys = table.column("key").to_pylist()
        offsets = table.column("offset").to_pylist()
        key_map = {k: o for k, o in zip(keys, offsets, strict=True) if k is not None}
        result = compact_planned_partition(plans[partition], key_map, options)
        return pa.table({"partition": pa.array([partition], pa.int32()),
                         "result": pa.array([pickle.dumps(result)], pa.binary())})

    return run


def compaction_frame(spark, plans: list[PartitionPlan], options: dict):
    """The pass as one DataFrame of (partition, pickled result): phase 1 reads every cleanable
    segment with the kafka_segments source (one task per segment, small segments packed into
    tasks of up to PACK_BYTES, latestPerKey), phase 2 takes
    max(offset) per (partition, key), Kafka's offset map, and hands each partition's map to one
    task that compacts and writes it."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import BinaryType, IntegerType, LongType, StructField, StructType

    from kcoord.sidecar.datasource import register

    register(spark)
    number = {pl.key: i for i, pl in enumerate(plans)}  # the `partition` column of the job
    ordered = sorted(plans, key=lambda pl: (-_planned_bytes(pl), pl.key))  # longest first
    slots = dict(zip((number[pl.key] for pl in ordered), slot_values(len(ordered)), strict=True))
    slot_of = F.create_map(*[F.lit(x) for p, s in slots.items() for x in (p, s)])
    # Phase 1's tasks longest first too (the key map does not depend on their order).
    paths = sorted(((path, number[pl.key]) for pl in ordered for path in cleanable_paths(pl)),
                   key=lambda pn: _size(pn[0]), reverse=True)
    key_rows = StructType([StructField("slot", IntegerType(), False), StructField("partition", IntegerType(), False),
                           StructField("key", BinaryType(), True), StructField("offset", LongType(), True)])
    # One key-less row per planned partition: every partition gets its phase-2 task, even
    # with nothing to read.
    frame = spark.createDataFrame([(slots[number[pl.key]], number[pl.key], None, None) for pl in ordered], key_rows)
    if paths:
        latest = (spark.read.format("kafka_segments")
                  .option("paths", json.dumps([p for p, _ in paths]))
                  .option("partitionOf", json.dumps([n for _, n in paths]))
                  .option("latestPerKey", "true")
                  .option("failOnCorrupt", "false")  # phase 2 reports it, for its partition only
                  .option("packBytes", str(PACK_BYTES))
                  .load()
                  .select(slot_of[F.col("partition")].cast("int").alias("slot"), "partition", "key", "offset"))
        frame = latest.unionByName(frame)
    key_map = (frame.repartition(len(ordered), "slot")
               .groupBy("slot", "partition", "key").agg(F.max("offset").alias("offset")))
    return (key_map.groupBy("slot", "partition")
            .applyInArrow(_phase2({number[pl.key]: pl for pl in plans}, options),
                          "partition int, result binary"))


# Phase 1's task size for small segments (spark.sql.files.maxPartitionBytes' default): a
# 100 MiB __consumer_offsets segment is a task of its own, while the segments of a topic with
# segment.bytes=10000 (librdkafka's 0077 test) go some 30 to a task instead of one each.
PACK_BYTES = 128 << 20


# Session settings for the pass (restored afterwards). Adaptive execution would cut the plan
# into query stages run as separate jobs with re-planning in between, for nothing here: the
# shuffle's partitioning is chosen exactly (slots), and must not be coalesced.
_JOB_CONF = {"spark.sql.adaptive.enabled": "false"}


@contextlib.contextmanager
def _session_conf(spark, settings: dict[str, str]):
    saved = {k: spark.conf.get(k, None) for k in settings}
    for k, v in settings.items():
        spark.conf.set(k, v)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                spark.conf.unset(k)
            else:
                spark.conf.set(k, v)


def run_spark(spark, plans: list[PartitionPlan], options: dict) -> list[dict]:
    """One Spark job over every planned segment; returns the stats of each partition."""
    import pickle

    from kcoord.sidecar.partition_io import process_partition

    results: list[dict] = []
    if plans:
        with _session_conf(spark, _JOB_CONF):
            rows = compaction_frame(spark, plans, options).collect()
        results = [pickle.loads(r["result"]) for r in rows]
    done = {(r["topic"], r["partition"]) for r in results}
    for plan in plans:  # not expected (every planned partition has its task); kept as a safety net
        if plan.key not in done:
            results.append(process_partition(plan.partition, _segments_of(plan, []), source_dir=plan.directory,
                                             output=plan.output, topic=plan.topic,
                                             **{**options, **plan.settings}))
    return sorted(results, key=lambda r: (r["topic"] != "__consumer_offsets", r["topic"], r["partition"]))
