"""kcoord-compact: a PySpark job compacting the __consumer_offsets partitions of a kcoord (or
Kafka) log directory the way Kafka's log cleaner does for cleanup.policy=compact.

    spark-submit sidecar/compact.py /data --output /data-compacted --verify
    kcoord-compact /data --in-place --verify           # the server must be stopped
    kcoord-compact /data --in-place --master spark://host:7077

Spark reads every segment (.log) as a binary file (the `binaryFile` source); the rows are
shuffled by partition inside the JVM so that one task owns each __consumer_offsets partition
(the key map must see the whole partition), and that task parses the batches with
storage/batch.py, compacts (sidecar/compaction.py), writes the new segments with storage's
code, reloads them with storage's PartitionLog, and with --verify replays input and output
through the coordinator's replay (sidecar/verify.py). Executors write the output themselves:
the log directory (and --output) must be on a filesystem every executor sees (local mode, or
a shared volume). The driver prints one summary row per partition and, with --in-place,
swaps the compacted directories in only if every partition succeeded.
"""
from __future__ import annotations

import argparse
import json
import logging
import os
import re
import shutil
import sys
import tempfile
import time
import zipfile

if __package__ in (None, ""):
    # spark-submit runs this file as a script: make the project importable from its checkout.
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from sidecar.compaction import DEFAULT_DELETE_RETENTION_MS, DEFAULT_SEGMENT_BYTES

log = logging.getLogger("kcoord.compact")

OFFSETS_TOPIC = "__consumer_offsets"
_PARTITION_DIR = re.compile(r"^__consumer_offsets-(\d+)$")
_SEGMENT_PATH = re.compile(r"__consumer_offsets-(\d+)/(\d{20})\.log$")
_PACKAGES = ("protocol", "storage", "server", "sidecar")


# ------------------------------------------------------------------------------ arguments


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="kcoord-compact",
        description="Compact __consumer_offsets like Kafka's log cleaner (cleanup.policy=compact), with Spark.")
    p.add_argument("log_dir", help="the server's log.dirs directory (holds __consumer_offsets-N/)")
    out = p.add_mutually_exclusive_group(required=True)
    out.add_argument("--output", "-o", help="write compacted partition directories here")
    out.add_argument("--in-place", action="store_true",
                     help="replace the partitions in log_dir (the server must be stopped)")
    p.add_argument("--master", default="local[*]", help="Spark master (default local[*])")
    p.add_argument("--delete-retention-ms", type=int, default=DEFAULT_DELETE_RETENTION_MS,
                   help="keep tombstones this long (delete.retention.ms, default 86400000)")
    p.add_argument("--tombstone-reference", choices=("cleaning-time", "last-record"),
                   default="cleaning-time",
                   help="a tombstone's age is measured against the cleaning time (default, as "
                        "Kafka) or the partition's newest record timestamp")
    p.add_argument("--now-ms", type=int, default=None, help="the cleaning time (default: now)")
    p.add_argument("--segment-bytes", type=int, default=None,
                   help="group cleaned segments up to this size (default: the topic's "
                        "segment.bytes from kcoord-topics.json, else 104857600)")
    p.add_argument("--partitions", default=None,
                   help="comma-separated partition numbers to compact (default: all)")
    p.add_argument("--verify", action="store_true",
                   help="replay input and output through the coordinator's start-up replay "
                        "and fail unless groups and committed offsets are identical")
    p.add_argument("--verify-mode", choices=("auto", "coordinator", "last-value"), default="auto",
                   help="auto: the GroupCoordinator's replay when available, else last value per key")
    p.add_argument("--server-address", action="append", default=[],
                   help="with --in-place: refuse if a server accepts connections here (host:port); repeatable")
    p.add_argument("--json", action="store_true", help="also print the per-partition stats as JSON lines")
    return p.parse_args(argv)


# ------------------------------------------------------------------------------ discovery


def find_partitions(log_dir: str, only: set[int] | None) -> dict[int, str]:
    out = {}
    for name in os.listdir(log_dir):
        m = _PARTITION_DIR.match(name)
        path = os.path.join(log_dir, name)
        if m and os.path.isdir(path) and (only is None or int(m.group(1)) in only):
            out[int(m.group(1))] = path
    return dict(sorted(out.items()))


def topic_settings(log_dir: str) -> tuple[int | None, int | None]:
    """(partition count, segment.bytes) of __consumer_offsets from kcoord's registry, if any."""
    try:
        with open(os.path.join(log_dir, "kcoord-topics.json")) as f:
            reg = json.load(f)
    except (OSError, ValueError):
        return None, None
    topics = reg.get("topics", []) if isinstance(reg, dict) else []
    for t in topics if isinstance(topics, list) else []:
        if isinstance(t, dict) and t.get("name") == OFFSETS_TOPIC:
            seg = (t.get("configs") or {}).get("segment.bytes")
            return t.get("partitions"), int(seg) if seg else None
    return None, None


# ------------------------------------------------------------------------------ spark


def _code_zip(tmpdir: str) -> str:
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


def _task(rows, options: dict, targets: dict, sources: dict):
    """Executor side: rows of (partition, base_offset, content) -> stats dicts."""
    from sidecar.compaction import Segment
    from sidecar.partition_io import process_partition

    logging.getLogger("storage").setLevel(logging.ERROR)
    by_partition: dict[int, list] = {}
    for r in rows:
        by_partition.setdefault(r["partition"], []).append(Segment(r["base_offset"], bytes(r["content"])))
    for p, segs in sorted(by_partition.items()):
        yield process_partition(p, segs, source_dir=sources[p], target_dir=targets[p], **options)
        segs.clear()


def run_spark(spark, partitions: dict[int, str], targets: dict[int, str], options: dict) -> list[dict]:
    """One Spark job over every segment of `partitions`; returns the stats of each partition."""
    from pyspark.sql import functions as F

    paths = []
    for d in partitions.values():
        for name in sorted(os.listdir(d)):
            if re.fullmatch(r"\d{20}\.log", name):
                paths.append("file://" + os.path.abspath(os.path.join(d, name)))
    results: list[dict] = []
    with_segments = set()
    if paths:
        df = (spark.read.format("binaryFile").load(paths)
              .select(F.col("path"), F.col("content")))
        df = (df.withColumn("partition", F.regexp_extract("path", _SEGMENT_PATH.pattern, 1).cast("int"))
                .withColumn("base_offset", F.regexp_extract("path", _SEGMENT_PATH.pattern, 2).cast("long"))
                .select("partition", "base_offset", "content")
                .repartition(max(1, len(partitions)), "partition"))
        sources = dict(partitions)
        tg = dict(targets)
        results = df.rdd.mapPartitions(lambda rows: _task(rows, options, tg, sources)).collect()
        with_segments = {r["partition"] for r in results}
    # Partitions without any segment file: write the empty log the server would create.
    from sidecar.partition_io import process_partition

    for p in partitions:
        if p not in with_segments:
            results.append(process_partition(p, [], source_dir=partitions[p], target_dir=targets[p], **options))
    return sorted(results, key=lambda r: r["partition"])


# ------------------------------------------------------------------------------ report


def format_table(results: list[dict]) -> str:
    cols = ("partition", "segs in>out", "records in", "records out", "bytes in", "bytes out",
            "superseded", "tombs dropped", "tombs kept", "log start..end", "verify", "secs")
    rows = []
    tot = dict.fromkeys(("records_in", "records_out", "bytes_in", "bytes_out", "superseded_dropped",
                         "tombstones_dropped", "tombstones_kept"), 0)
    for r in results:
        for k in tot:
            tot[k] += r.get(k, 0)
        rows.append((str(r["partition"]), f"{r['segments_in']}>{r['segments_out']}", str(r["records_in"]),
                     str(r["records_out"]), str(r["bytes_in"]), str(r["bytes_out"]),
                     str(r["superseded_dropped"]), str(r["tombstones_dropped"]), str(r["tombstones_kept"]),
                     f"{r['log_start_offset']}..{r['log_end_offset']}",
                     "ERROR" if r["extra"].get("error") else r["verified"], f"{r['seconds']:.2f}"))
    rows.append(("total", "", str(tot["records_in"]), str(tot["records_out"]), str(tot["bytes_in"]),
                 str(tot["bytes_out"]), str(tot["superseded_dropped"]), str(tot["tombstones_dropped"]),
                 str(tot["tombstones_kept"]), "", "", ""))
    widths = [max(len(c), *(len(row[i]) for row in rows)) for i, c in enumerate(cols)]
    line = lambda vals: "  ".join(v.rjust(w) for v, w in zip(vals, widths, strict=True))  # noqa: E731
    out = [line(cols), line(tuple("-" * w for w in widths))]
    out += [line(r) for r in rows]
    for r in results:
        if r["extra"].get("error"):
            out.append(f"partition {r['partition']}: {r['extra']['error']}")
    return "\n".join(out)


# ------------------------------------------------------------------------------ main


def run(args: argparse.Namespace, spark=None, out=sys.stdout) -> int:
    """The whole job; returns the exit status (0 ok, 1 a partition failed, 2 refused)."""
    from sidecar import inplace

    log_dir = os.path.abspath(args.log_dir)
    if not os.path.isdir(log_dir):
        print(f"kcoord-compact: {log_dir} is not a directory", file=sys.stderr)
        return 2
    only = {int(x) for x in args.partitions.split(",")} if args.partitions else None
    registry_partitions, registry_segment_bytes = topic_settings(log_dir)
    segment_bytes = args.segment_bytes or registry_segment_bytes or DEFAULT_SEGMENT_BYTES
    now_ms = args.now_ms if args.now_ms is not None else int(time.time() * 1000)

    lock = None
    if args.in_place:
        lock = inplace.LogDirLock(log_dir)
        try:
            lock.acquire()
            note = inplace.recover_interrupted_swaps(log_dir)
            if note:
                print(f"recovered an interrupted swap: {note}", file=out)
        except inplace.DirectoryInUseError as e:
            print(f"kcoord-compact: {e}", file=sys.stderr)
            return 2
    try:
        partitions = find_partitions(log_dir, only)
        if not partitions:
            print(f"kcoord-compact: no {OFFSETS_TOPIC}-N directories in {log_dir}", file=sys.stderr)
            return 2
        num_partitions = registry_partitions or (max(partitions) + 1)
        if args.in_place:
            try:
                inplace.check_not_in_use(log_dir, list(partitions.values()), args.server_address)
            except inplace.DirectoryInUseError as e:
                print(f"kcoord-compact: {e}", file=sys.stderr)
                return 2
            targets = {p: inplace.staging_name(d) for p, d in partitions.items()}
        else:
            out_dir = os.path.abspath(args.output)
            if os.path.realpath(out_dir) == os.path.realpath(log_dir):
                print("kcoord-compact: --output must differ from the log directory (use --in-place)",
                      file=sys.stderr)
                return 2
            os.makedirs(out_dir, exist_ok=True)
            targets = {p: os.path.join(out_dir, os.path.basename(d)) for p, d in partitions.items()}
        options = dict(now_ms=now_ms, delete_retention_ms=args.delete_retention_ms,
                       segment_bytes=segment_bytes, tombstone_reference=args.tombstone_reference,
                       verify=args.verify, verify_mode=args.verify_mode, num_partitions=num_partitions)

        own_spark = spark is None
        tmp = tempfile.mkdtemp(prefix="kcoord-compact-")
        started = time.monotonic()
        try:
            if own_spark:
                spark = get_spark(args.master)
                spark.sparkContext.setLogLevel("ERROR")
            spark.sparkContext.addPyFile(_code_zip(tmp))
            results = run_spark(spark, partitions, targets, options)
        finally:
            if own_spark and spark is not None:
                spark.stop()
            shutil.rmtree(tmp, ignore_errors=True)
        elapsed = time.monotonic() - started

        print(format_table(results), file=out)
        if args.json:
            for r in results:
                print(json.dumps(r, sort_keys=True), file=out)
        failed = [r for r in results if r["extra"].get("error")]
        if failed:
            if args.in_place:
                for t in targets.values():
                    shutil.rmtree(t, ignore_errors=True)
                print("kcoord-compact: nothing was replaced (a partition failed)", file=out)
            return 1
        if args.in_place:
            # Last look right before touching the live directories.
            try:
                inplace.check_not_in_use(log_dir, list(partitions.values()), args.server_address)
            except inplace.DirectoryInUseError as e:
                for t in targets.values():
                    shutil.rmtree(t, ignore_errors=True)
                print(f"kcoord-compact: {e}", file=sys.stderr)
                return 2
            methods = {inplace.swap_in(partitions[p], targets[p]) for p in partitions}
            print(f"swapped {len(partitions)} partition(s) in place ({', '.join(sorted(methods))})", file=out)
        total_in = sum(r["bytes_in"] for r in results)
        print(f"compacted {len(results)} partition(s), {total_in / 1e6:.2f} MB in {elapsed:.2f} s", file=out)
        return 0
    finally:
        if lock is not None:
            lock.release()


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    return run(parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
