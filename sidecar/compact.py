"""kcoord-compact: one pass of the PySpark job that compacts the partitions of
`__consumer_offsets` and of every topic with cleanup.policy=compact (kcoord's topic registry
says which) in a kcoord log directory, the way Kafka's log cleaner does.

    kcoord-compact /data --in-place --verify          # the server may keep running
    kcoord-compact /data --output /data-compacted     # a compacted copy
    kcoord-compact /data --in-place --master spark://host:7077

In place, only closed segments are read, and the cleaned ones are handed to the partition
directory with Kafka's .cleaned -> .swap protocol (sidecar/handoff.py, storage/swap.py): a
running server swaps them in on its event loop, a stopped one at its next start (or this
tool does it when no server holds the log directory). The Spark side is sidecar/pipeline.py;
`kcoord sidecar` (sidecar/daemon.py) runs passes continuously.
"""
from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field

if __package__ in (None, ""):
    # spark-submit runs this file as a script: make the project importable from its checkout.
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from kcoord.protocol.topics import OFFSETS_TOPIC, TXN_TOPIC
from kcoord.sidecar.compaction import DEFAULT_DELETE_RETENTION_MS, DEFAULT_SEGMENT_BYTES
from kcoord.sidecar.pipeline import PartitionPlan, code_zip, get_spark, run_spark

log = logging.getLogger("kcoord.compact")

__all__ = ["CompactedTopic", "compacted_topics", "default_cleanup_policy", "find_partitions", "get_spark", "main", "parse_args",
           "pass_settings", "plan_pass", "run", "run_pass"]

REGISTRY_FILE = "kcoord-topics.json"
BROKER_CONFIGS_FILE = "kcoord-broker-configs.json"  # dynamic broker configs (server/config_layers.py)
LOG_SEGMENT_BYTES = 1_073_741_824  # log.segment.bytes: other topics' default segment size


# ------------------------------------------------------------------------------ arguments


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="kcoord-compact",
        description="Compact __consumer_offsets and every topic with cleanup.policy=compact like Kafka's "
                    "log cleaner, with Spark.")
    p.add_argument("log_dir", help="the server's log.dirs directory (holds <topic>-N/)")
    out = p.add_mutually_exclusive_group(required=True)
    out.add_argument("--output", "-o", help="write compacted partition directories here")
    out.add_argument("--in-place", action="store_true",
                     help="hand the cleaned segments to the log directory (a running server swaps them in)")
    p.add_argument("--master", default="local[*]", help="Spark master (default local[*])")
    p.add_argument("--delete-retention-ms", type=int, default=DEFAULT_DELETE_RETENTION_MS,
                   help="tombstones live this long after their first cleaning (log.cleaner.delete.retention.ms; "
                        "a topic's delete.retention.ms wins)")
    p.add_argument("--now-ms", type=int, default=None, help="the cleaning time (default: now)")
    p.add_argument("--segment-bytes", type=int, default=None,
                   help="group cleaned __consumer_offsets segments up to this size (default: its "
                        "segment.bytes from kcoord-topics.json, else 104857600)")
    p.add_argument("--log-segment-bytes", type=int, default=LOG_SEGMENT_BYTES,
                   help="the same for other topics without their own segment.bytes (log.segment.bytes)")
    p.add_argument("--log-cleanup-policy", default=None,
                   help="the broker's static log.cleanup.policy (topics without their own cleanup.policy; "
                        "a dynamic value in the log directory wins)")
    p.add_argument("--topics", default=None,
                   help="comma-separated topics to compact (default: __consumer_offsets and every topic "
                        "whose cleanup.policy has compact)")
    p.add_argument("--partitions", default=None,
                   help="comma-separated partition numbers to compact (default: all)")
    p.add_argument("--min-cleanable-ratio", type=float, default=0.0,
                   help="in place: only partitions whose dirty ratio reaches this "
                        "(log.cleaner.min.cleanable.ratio, a topic's min.cleanable.dirty.ratio wins; "
                        "default 0: every partition)")
    p.add_argument("--verify", action="store_true",
                   help="replay input and output through the coordinator's start-up replay "
                        "and fail unless groups and committed offsets are identical")
    p.add_argument("--verify-mode", choices=("auto", "coordinator", "last-value"), default="auto",
                   help="auto: the GroupCoordinator's replay when available, else last value per key")
    p.add_argument("--handoff-timeout", type=float, default=60.0,
                   help="in place: seconds to wait for a running server to swap the segments in")
    p.add_argument("--json", action="store_true", help="also print the per-partition stats as JSON lines")
    return p.parse_args(argv)


# ------------------------------------------------------------------------------ discovery


@dataclass(frozen=True)
class CompactedTopic:
    """A topic the cleaner works on, as kcoord's registry describes it."""

    name: str
    partitions: int | None = None
    configs: dict = field(default_factory=dict)


def default_cleanup_policy(log_dir: str, static: str | None = None) -> str:
    """The broker's log.cleanup.policy, what a topic without its own cleanup.policy has: a
    dynamic value (kcoord-broker-configs.json: this broker's, else the cluster default), else
    the static one (server.properties), else Kafka's default, delete."""
    try:
        with open(os.path.join(log_dir, BROKER_CONFIGS_FILE)) as f:
            data = json.load(f)
        layers = [*(data.get("brokers") or {}).values(), data.get("cluster") or {}]
    except (OSError, ValueError, AttributeError):
        layers = []
    for layer in layers:
        if isinstance(layer, dict) and layer.get("log.cleanup.policy"):
            return str(layer["log.cleanup.policy"])
    return static or "delete"


def compacted_topics(log_dir: str, default_policy: str = "delete") -> dict[str, CompactedTopic]:
    """__consumer_offsets (always) and every topic of the registry whose cleanup.policy (its
    own, else `default_policy`) has `compact` (read at each pass: a policy changed meanwhile
    counts from the next pass)."""
    out = {OFFSETS_TOPIC: CompactedTopic(OFFSETS_TOPIC)}
    try:
        with open(os.path.join(log_dir, REGISTRY_FILE)) as f:
            reg = json.load(f)
    except (OSError, ValueError):
        return out
    topics = reg.get("topics", []) if isinstance(reg, dict) else []
    for t in topics if isinstance(topics, list) else []:
        if not isinstance(t, dict) or not isinstance(t.get("name"), str):
            continue
        configs = t.get("configs") or {}
        policy = {x.strip().lower() for x in str(configs.get("cleanup.policy") or default_policy).split(",")}
        if t["name"] == OFFSETS_TOPIC or "compact" in policy:
            out[t["name"]] = CompactedTopic(t["name"], t.get("partitions"), dict(configs))
    return out


def find_partitions(log_dir: str, only: set[int] | None,
                    topics: dict[str, CompactedTopic] | None = None) -> dict[tuple[str, int], str]:
    """(topic, partition) -> directory of every partition of the compacted topics."""
    topics = compacted_topics(log_dir) if topics is None else topics
    out = {}
    for name in os.listdir(log_dir):
        topic, sep, num = name.rpartition("-")
        path = os.path.join(log_dir, name)
        if (sep and topic in topics and num.isdigit() and os.path.isdir(path)
                and (only is None or int(num) in only)):
            out[(topic, int(num))] = path
    return dict(sorted(out.items(), key=lambda kv: (kv[0][0] != OFFSETS_TOPIC, kv[0])))


def topic_settings(log_dir: str) -> tuple[int | None, int | None]:
    """(partition count, segment.bytes) of __consumer_offsets from kcoord's registry, if any."""
    t = compacted_topics(log_dir)[OFFSETS_TOPIC]
    seg = t.configs.get("segment.bytes")
    return t.partitions, int(seg) if seg else None


def pass_settings(topic: CompactedTopic, *, offsets_segment_bytes: int, log_segment_bytes: int,
                  delete_retention_ms: int, min_ratio: float) -> dict:
    """A topic's own pass settings: its configs over the broker's defaults (Kafka's
    segment.bytes, delete.retention.ms and min.cleanable.dirty.ratio), and how --verify
    compares (the coordinators' replays for __consumer_offsets and __transaction_state, the last
    value per key else)."""
    c = topic.configs
    offsets = topic.name == OFFSETS_TOPIC
    out = {"segment_bytes": int(c.get("segment.bytes") or (offsets_segment_bytes if offsets else log_segment_bytes)),
           "delete_retention_ms": int(c.get("delete.retention.ms") or delete_retention_ms),
           "min_ratio": float(c.get("min.cleanable.dirty.ratio") or min_ratio)}
    if not offsets:
        # __transaction_state is checked through the transaction coordinator's own replay
        out["verify_mode"] = "transactions" if topic.name == TXN_TOPIC else "records"
    return out


# ------------------------------------------------------------------------------ planning


def replica_high_watermarks(log_dir: str) -> dict[tuple[str, int], int]:
    """A cluster node's replicas' high watermarks as it last checkpointed them (Kafka's
    replication-offset-checkpoint, server/replication/hw_checkpoint.py; written every few
    seconds, so at most the real ones); {} on a single node or when unreadable."""
    from kcoord.storage.offset_checkpoint import CheckpointError, read_offset_checkpoint

    try:
        return read_offset_checkpoint(os.path.join(log_dir, "replication-offset-checkpoint"))
    except (CheckpointError, OSError, ValueError):
        return {}


def below_high_watermark(closed: list[int], active: int | None, hw: int | None) -> tuple[list[int], int | None]:
    """The closed segments that end at or below a replica's high watermark, and the base of the
    first segment left alone (the pass's stand-in for the active one). Kafka's cleaner stops at
    the last stable offset, at most the high watermark: a record above it may still be
    truncated by a leader change, so it must not shadow an older value of its key."""
    if hw is None or active is None:
        return closed, active
    bases = [*closed, active]
    n = 0
    while n < len(closed) and bases[n + 1] <= hw:
        n += 1
    return closed[:n], bases[n]


def plan_pass(log_dir: str, partitions: dict[tuple[str, int], str], *, output_dir: str | None,
              min_ratio: float = 0.0, settings: dict[str, dict] | None = None,
              ) -> tuple[list[PartitionPlan], dict[tuple[str, int], str]]:
    """What this pass does per partition, and why the others are skipped. `settings`: per
    topic, pass options over the pass's (pass_settings; its min_ratio replaces min_ratio)."""
    from kcoord.sidecar.checkpoint import dirty_ratio, read_checkpoint
    from kcoord.sidecar.handoff import closed_segments, fingerprints
    from kcoord.sidecar.partition_io import DirectoryOutput, SwapOutput
    from kcoord.storage.swap import pending_swaps, segment_bases

    plans: list[PartitionPlan] = []
    skipped: dict[tuple[str, int], str] = {}
    checkpoint = read_checkpoint(log_dir)
    high_watermarks = replica_high_watermarks(log_dir)
    for (topic, p), d in partitions.items():
        options = dict((settings or {}).get(topic, {}))
        need = options.pop("min_ratio", min_ratio)
        if output_dir is not None:
            plans.append(PartitionPlan(p, d, segment_bases(d),
                                       DirectoryOutput(os.path.join(output_dir, os.path.basename(d))),
                                       topic=topic, settings=options))
            continue
        if pending_swaps(d):
            skipped[(topic, p)] = "the previous pass's segments are not swapped in yet"
            continue
        closed, active = closed_segments(d)
        if not closed:
            skipped[(topic, p)] = "only the active segment (nothing to clean)"
            continue
        closed, active = below_high_watermark(closed, active, high_watermarks.get((topic, p)))
        if not closed:
            skipped[(topic, p)] = "no closed segment below the high watermark"
            continue
        ratio = dirty_ratio(d, closed, checkpoint.get((topic, p), 0))
        if ratio < need:
            skipped[(topic, p)] = f"dirty ratio {ratio:.2f} below {need}"
            continue
        plans.append(PartitionPlan(p, d, closed, SwapOutput(d, fingerprints(d, closed)), active_base=active,
                                   topic=topic, settings=options))
    return plans, skipped


# ------------------------------------------------------------------------------ progress


class _Progress(threading.Thread):
    """Prints the running Spark stage's finished/total tasks every few seconds (long passes)."""

    def __init__(self, spark, out, every_s: float = 5.0) -> None:
        super().__init__(daemon=True)
        self.tracker = spark.sparkContext.statusTracker()
        self.out, self.every_s = out, every_s
        self.done = threading.Event()
        self.started = time.monotonic()

    def run(self) -> None:
        while not self.done.wait(self.every_s):
            for sid in self.tracker.getActiveStageIds():
                info = self.tracker.getStageInfo(sid)
                if info is not None:
                    print(f"  ... {time.monotonic() - self.started:.0f} s: stage {sid} "
                          f"{info.numCompletedTasks}/{info.numTasks} tasks done", file=self.out, flush=True)


# ------------------------------------------------------------------------------ report


def format_table(results: list[dict]) -> str:
    cols = ("topic-partition", "segs in>out", "records in", "records out", "bytes in", "bytes out",
            "superseded", "tombs dropped", "tombs kept", "log start..end", "verify", "secs")
    rows = []
    tot = dict.fromkeys(("records_in", "records_out", "bytes_in", "bytes_out", "superseded_dropped",
                         "tombstones_dropped", "tombstones_kept"), 0)
    for r in results:
        for k in tot:
            tot[k] += r.get(k, 0)
        rows.append((_label(r), f"{r['segments_in']}>{r['segments_out']}", str(r["records_in"]),
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
            out.append(f"{_label(r)}: {r['extra']['error']}")
    return "\n".join(out)


def _label(r: dict) -> str:
    return f"{r.get('topic', OFFSETS_TOPIC)}-{r['partition']}"


# ------------------------------------------------------------------------------ one pass


def run_pass(spark, log_dir: str, plans: list[PartitionPlan], options: dict, *, out=sys.stdout,
             handoff_timeout: float = 60.0) -> tuple[list[dict], str]:
    """Run the planned pass on `spark`; in place, also see the swaps through. Returns the
    per-partition stats and what happened to the swaps."""
    from kcoord.sidecar.checkpoint import write_checkpoint
    from kcoord.sidecar.handoff import finish
    from kcoord.sidecar.partition_io import SwapOutput

    progress = _Progress(spark, out)
    progress.start()
    try:
        results = run_spark(spark, plans, options)
    finally:
        progress.done.set()
    swapped = [pl for pl in plans if isinstance(pl.output, SwapOutput)]
    note = ""
    if swapped:
        published = {(r["topic"], r["partition"]) for r in results if r["extra"].get("swaps")}
        note = finish(log_dir, [pl.directory for pl in swapped if pl.key in published], handoff_timeout)
        failed = {(r["topic"], r["partition"]) for r in results if r["extra"].get("error")}
        # Kafka's cleaner checkpoint: where the next dirty range starts (the dirty ratio).
        write_checkpoint(log_dir, {pl.key: pl.active_base for pl in swapped if pl.key not in failed})
    return results, note


def run(args: argparse.Namespace, spark=None, out=sys.stdout) -> int:
    """The whole job; returns the exit status (0 ok, 1 a partition failed, 2 refused)."""
    from kcoord.sidecar.handoff import CleanerLock
    from kcoord.storage.swap import remove_cleaned

    log_dir = os.path.abspath(args.log_dir)
    if not os.path.isdir(log_dir):
        print(f"kcoord-compact: {log_dir} is not a directory", file=sys.stderr)
        return 2
    only = {int(x) for x in args.partitions.split(",")} if args.partitions else None
    topics = compacted_topics(log_dir, default_cleanup_policy(log_dir, args.log_cleanup_policy))
    if args.topics:
        wanted = {t.strip() for t in args.topics.split(",") if t.strip()}
        topics = {name: t for name, t in topics.items() if name in wanted}
    registry_partitions, registry_segment_bytes = topic_settings(log_dir)
    now_ms = args.now_ms if args.now_ms is not None else int(time.time() * 1000)
    partitions = find_partitions(log_dir, only, topics)
    if not partitions:
        print(f"kcoord-compact: no partition directories of {', '.join(sorted(topics)) or 'compacted topics'} "
              f"in {log_dir}", file=sys.stderr)
        return 2
    settings = {name: pass_settings(t, offsets_segment_bytes=args.segment_bytes or registry_segment_bytes
                                    or DEFAULT_SEGMENT_BYTES, log_segment_bytes=args.log_segment_bytes,
                                    delete_retention_ms=args.delete_retention_ms,
                                    min_ratio=args.min_cleanable_ratio)
                for name, t in topics.items()}
    if args.segment_bytes and OFFSETS_TOPIC in settings:  # given explicitly: over the registry's
        settings[OFFSETS_TOPIC]["segment_bytes"] = args.segment_bytes
    output_dir = None
    if args.output:
        output_dir = os.path.abspath(args.output)
        if os.path.realpath(output_dir) == os.path.realpath(log_dir):
            print("kcoord-compact: --output must differ from the log directory (use --in-place)",
                  file=sys.stderr)
            return 2
        os.makedirs(output_dir, exist_ok=True)
    lock = CleanerLock.acquire_or_report(log_dir, "kcoord-compact")
    if lock is None:
        return 2
    own_spark = spark is None
    tmp = tempfile.mkdtemp(prefix="kcoord-compact-")
    try:
        for d in partitions.values():
            remove_cleaned(d)  # a killed compactor's leftovers: we hold the cleaner lock
        plans, skipped = plan_pass(log_dir, partitions, output_dir=output_dir,
                                   min_ratio=args.min_cleanable_ratio, settings=settings)
        for (topic, p), why in skipped.items():
            print(f"{topic}-{p}: skipped, {why}", file=out)
        offsets_parts = [p for t, p in partitions if t == OFFSETS_TOPIC]
        options = dict(now_ms=now_ms, delete_retention_ms=args.delete_retention_ms,
                       segment_bytes=DEFAULT_SEGMENT_BYTES, verify=args.verify, verify_mode=args.verify_mode,
                       num_partitions=registry_partitions or (max(offsets_parts, default=49) + 1))
        started = time.monotonic()
        if own_spark:
            spark = get_spark(args.master)
            spark.sparkContext.setLogLevel("ERROR")
        spark.sparkContext.addPyFile(code_zip(tmp))
        results, note = run_pass(spark, log_dir, plans, options, out=out, handoff_timeout=args.handoff_timeout)
        elapsed = time.monotonic() - started
    finally:
        if own_spark and spark is not None:
            spark.stop()
        shutil.rmtree(tmp, ignore_errors=True)
        lock.release()

    print(format_table(results), file=out)
    if args.json:
        for r in results:
            print(json.dumps(r, sort_keys=True), file=out)
    if note:
        print(f"segments: {note}", file=out)
    total_in = sum(r["bytes_in"] for r in results)
    print(f"compacted {len(results)} partition(s), {total_in / 1e6:.2f} MB in {elapsed:.2f} s", file=out)
    return 1 if any(r["extra"].get("error") for r in results) else 0


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    return run(parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
