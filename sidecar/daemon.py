"""`kcoord sidecar`: Kafka's log cleaner as a long-running process beside the server.

One SparkSession stays up; every log.cleaner.backoff.ms the sidecar plans a pass over the
partitions of __consumer_offsets and of every topic whose cleanup.policy has `compact` (read
from the topic registry at each pass) whose dirty ratio (sidecar/checkpoint.py) reaches
log.cleaner.min.cleanable.ratio (a topic's min.cleanable.dirty.ratio wins), runs it, and
hands the cleaned segments to the server (sidecar/handoff.py). It holds the cleaner lock for its whole life, so a `kcoord compact`
started meanwhile is refused instead of racing it. SIGTERM / SIGINT end it after the current pass.
Before its first look it cleans a small generated partition in a scratch directory: the JVM's
and the Python workers' start-up is paid then, not by the first pass over real data (Kafka's
cleaner, inside the broker, has none; a client test that waits for compaction gets a first
pass as quick as the next).
"""
from __future__ import annotations

import contextlib
import logging
import os
import shutil
import signal
import sys
import tempfile
import threading
import time

from kcoord.sidecar.compact import (
    compacted_topics,
    default_cleanup_policy,
    find_partitions,
    format_table,
    pass_settings,
    plan_pass,
    run_pass,
)
from kcoord.sidecar.handoff import CleanerLock
from kcoord.sidecar.pipeline import code_zip, get_spark, run_spark
from kcoord.storage.swap import remove_cleaned

log = logging.getLogger("kcoord.sidecar")

__all__ = ["serve"]


def serve(config, master: str = "local[*]", *, max_passes: int | None = None, out=sys.stdout) -> int:
    """Run until signalled (or `max_passes` passes that found work, for tests)."""
    log_dir = os.path.abspath(str(config.log_dir))
    os.makedirs(log_dir, exist_ok=True)
    lock = CleanerLock.acquire_or_report(log_dir, "kcoord sidecar")
    if lock is None:
        return 2
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    backoff_s = config["log.cleaner.backoff.ms"] / 1000
    ratio = config["log.cleaner.min.cleanable.ratio"]
    tmp = tempfile.mkdtemp(prefix="kcoord-sidecar-")
    spark = get_spark(master, "kcoord-sidecar")
    spark.sparkContext.setLogLevel("ERROR")
    spark.sparkContext.addPyFile(code_zip(tmp))
    started = time.monotonic()
    warm_up(spark, tmp)
    print(f"kcoord sidecar: warmed up in {time.monotonic() - started:.1f} s", file=out, flush=True)
    print(f"kcoord sidecar: cleaning {log_dir} on {master} every {backoff_s:g} s when the dirty "
          f"ratio reaches {ratio}", file=out, flush=True)
    # A signal cancels the running pass: what its tasks already committed stays committed,
    # the rest is never swapped in (storage/swap.py).
    def cancel_on_stop() -> None:
        stop.wait()
        with contextlib.suppress(Exception):  # the session may be stopping already
            spark.sparkContext.cancelAllJobs()

    threading.Thread(target=cancel_on_stop, daemon=True).start()
    passes = 0
    try:
        while not stop.is_set():
            topics = compacted_topics(log_dir, default_cleanup_policy(log_dir, config.given.get("log.cleanup.policy")))
            partitions = find_partitions(log_dir, None, topics)
            for d in partitions.values():
                remove_cleaned(d)  # a killed compactor's leftovers: we hold the cleaner lock
            settings = {name: pass_settings(t, offsets_segment_bytes=config["offsets.topic.segment.bytes"],
                                            log_segment_bytes=config["log.segment.bytes"],
                                            delete_retention_ms=config["log.cleaner.delete.retention.ms"],
                                            min_ratio=ratio)
                        for name, t in topics.items()}
            plans, _ = plan_pass(log_dir, partitions, output_dir=None, min_ratio=ratio, settings=settings)
            if plans:
                options = dict(now_ms=int(time.time() * 1000),
                               delete_retention_ms=config["log.cleaner.delete.retention.ms"],
                               segment_bytes=config["offsets.topic.segment.bytes"],
                               verify=False, verify_mode="auto",
                               num_partitions=topics["__consumer_offsets"].partitions
                               or config["offsets.topic.num.partitions"])
                started = time.monotonic()
                try:
                    results, note = run_pass(spark, log_dir, plans, options, out=out)
                except Exception as e:  # noqa: BLE001 - a failed pass is retried after the backoff
                    if stop.is_set():
                        print("kcoord sidecar: pass cancelled", file=out, flush=True)
                        break
                    log.error("Compaction pass failed: %s", e)
                    stop.wait(backoff_s)
                    continue
                print(f"pass {passes + 1}: {len(plans)} partition(s) in {time.monotonic() - started:.2f} s; "
                      f"segments {note}\n{format_table(results)}", file=out, flush=True)
                passes += 1
                if max_passes is not None and passes >= max_passes:
                    break
            stop.wait(backoff_s)
    finally:
        spark.stop()
        shutil.rmtree(tmp, ignore_errors=True)
        lock.release()
    return 0


def warm_up(spark, tmp: str) -> None:
    """One pass, written to a scratch directory, over a small generated partition."""
    from kcoord.sidecar.testdata import write_partition

    log_dir, output = os.path.join(tmp, "warm-up", "log"), os.path.join(tmp, "warm-up", "out")
    gen = write_partition(log_dir, 0, groups=1, topics=1, partitions_per_topic=2, rounds=2)
    plans, _ = plan_pass(log_dir, {("__consumer_offsets", 0): gen.path}, output_dir=output)
    run_spark(spark, plans, dict(now_ms=gen.now_ms, delete_retention_ms=86_400_000, segment_bytes=1 << 20,
                                 verify=False, verify_mode="auto", num_partitions=50))
    shutil.rmtree(os.path.dirname(log_dir), ignore_errors=True)
