"""The Spark side of a compaction pass: read the planned segments, compact each partition in
one task, write its output (sidecar/partition_io.py), return per-partition stats.

Spark reads every planned segment (.log) as a binary file (the `binaryFile` source); the rows
are shuffled by partition inside the JVM so that one task owns each __consumer_offsets
partition (the key map must see the whole partition), and that task parses the batches,
compacts (sidecar/compaction.py) and writes (a new directory, or `.cleaned`/`.swap` files
beside the live segments). Executors write the output themselves: the log directory must be
on a filesystem every executor sees (local mode, or a shared volume).
"""
from __future__ import annotations

import logging
import os
import re
import sys
import zipfile
from dataclasses import dataclass, field

from sidecar.partition_io import Output

__all__ = ["PartitionPlan", "code_zip", "get_spark", "run_spark"]

_SEGMENT_PATH = re.compile(r"__consumer_offsets-(\d+)/(\d{20})\.log$")
_PACKAGES = ("protocol", "storage", "server", "sidecar")


@dataclass(frozen=True)
class PartitionPlan:
    """What one pass does with one partition."""

    partition: int
    directory: str
    bases: list[int]  # segments to read, oldest first
    output: Output
    # The active segment's base offset when it is not read (in place: the server appends to
    # it); compaction then gets an empty stand-in for it. None: `bases` ends with the active one.
    active_base: int | None = None
    extra: dict = field(default_factory=dict)

    def paths(self) -> list[str]:
        from storage.segment import segment_name

        return [os.path.join(self.directory, segment_name(b) + ".log") for b in self.bases]


def code_zip(tmpdir: str) -> str:
    """The project's packages as a zip for the executors (spark.addPyFile)."""
    import importlib

    path = os.path.join(tmpdir, "kcoord_code.zip")
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        for pkg in _PACKAGES:
            root = os.path.dirname(importlib.import_module(pkg).__file__)
            base = os.path.dirname(root)
            for dirpath, dirnames, files in os.walk(root):
                dirnames[:] = [d for d in dirnames if d != "__pycache__"]
                for fn in files:
                    if fn.endswith(".py"):
                        full = os.path.join(dirpath, fn)
                        z.write(full, os.path.relpath(full, base))
    return path


def get_spark(master: str = "local[*]", app_name: str = "kcoord-compact"):
    """A SparkSession (reused if one is active). Executors default to this interpreter."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    return (SparkSession.builder.master(master).appName(app_name)
            .config("spark.ui.enabled", "false")
            .config("spark.ui.showConsoleProgress", "false")
            .config("spark.sql.shuffle.partitions", "8")
            .config("spark.driver.memory", os.environ.get("KCOORD_COMPACT_DRIVER_MEMORY", "2g"))
            .getOrCreate())


def _segments_of(plan: PartitionPlan, segs: list) -> list:
    from sidecar.compaction import Segment

    segs = sorted(segs, key=lambda s: s.base_offset)
    if plan.active_base is not None:
        segs.append(Segment(plan.active_base, b""))
    return segs


def _task(rows, options: dict, plans: dict[int, PartitionPlan]):
    """Executor side: rows of (partition, base_offset, content) -> stats dicts."""
    from sidecar.compaction import Segment
    from sidecar.partition_io import process_partition

    logging.getLogger("storage").setLevel(logging.ERROR)
    by_partition: dict[int, list] = {}
    for r in rows:
        by_partition.setdefault(r["partition"], []).append(Segment(r["base_offset"], bytes(r["content"])))
    for p, segs in sorted(by_partition.items()):
        plan = plans[p]
        yield process_partition(p, _segments_of(plan, segs), source_dir=plan.directory,
                                output=plan.output, **options)
        segs.clear()


def run_spark(spark, plans: list[PartitionPlan], options: dict) -> list[dict]:
    """One Spark job over every planned segment; returns the stats of each partition."""
    from pyspark.sql import functions as F

    from sidecar.partition_io import process_partition

    by_partition = {p.partition: p for p in plans}
    paths = ["file://" + os.path.abspath(path) for p in plans for path in p.paths()]
    results: list[dict] = []
    if paths:
        df = (spark.read.format("binaryFile").load(paths)
              .select(F.col("path"), F.col("content")))
        df = (df.withColumn("partition", F.regexp_extract("path", _SEGMENT_PATH.pattern, 1).cast("int"))
                .withColumn("base_offset", F.regexp_extract("path", _SEGMENT_PATH.pattern, 2).cast("long"))
                .select("partition", "base_offset", "content")
                .repartition(max(1, len(plans)), "partition"))
        results = df.rdd.mapPartitions(lambda rows: _task(rows, options, by_partition)).collect()
    done = {r["partition"] for r in results}
    for plan in plans:  # nothing to read (an empty log): still write what the output needs
        if plan.partition not in done:
            results.append(process_partition(plan.partition, _segments_of(plan, []),
                                             source_dir=plan.directory, output=plan.output, **options))
    return sorted(results, key=lambda r: r["partition"])
