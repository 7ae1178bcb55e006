"""`kcoord sidecar`: Kafka's log cleaner as a long-running process beside the server.

One SparkSession stays up; every log.cleaner.backoff.ms the sidecar plans a pass over the
__consumer_offsets partitions, then one over the __transaction_state partitions, whose dirty
ratio (sidecar/checkpoint.py) reaches log.cleaner.min.cleanable.ratio, runs them, and hands
the cleaned segments to the server
(sidecar/handoff.py). It holds the cleaner lock for its whole life, so a `kcoord compact`
started meanwhile is refused instead of racing it. SIGTERM / SIGINT end it after the current pass.
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

from sidecar.compact import (
    COMPACTED_TOPICS,
    OFFSETS_TOPIC,
    TXN_TOPIC,
    VERIFY_MODES,
    find_partitions,
    format_table,
    plan_pass,
    run_pass,
    topic_settings,
)
from sidecar.handoff import CleanerLock
from sidecar.pipeline import code_zip, get_spark
from storage.swap import remove_cleaned

log = logging.getLogger("kcoord.sidecar")

__all__ = ["serve"]


# The topics' settings when the registry has none: (partition count, segment.bytes) setting names.
_DEFAULTS = {OFFSETS_TOPIC: ("offsets.topic.num.partitions", "offsets.topic.segment.bytes"),
             TXN_TOPIC: ("transaction.state.log.num.partitions", "transaction.state.log.segment.bytes")}


def _one_pass(spark, config, log_dir: str, topic: str, ratio: float, stop: threading.Event, done: int,
              out) -> int:
    """Clean the topic's partitions that need it; 1 if a pass ran, else 0."""
    partitions = find_partitions(log_dir, None, topic)
    for d in partitions.values():
        remove_cleaned(d)  # a killed compactor's leftovers: we hold the cleaner lock
    registry_partitions, registry_segment_bytes = topic_settings(log_dir, topic)
    plans, _ = plan_pass(log_dir, partitions, output_dir=None, min_ratio=ratio, topic=topic)
    if not plans:
        return 0
    count_setting, segment_setting = _DEFAULTS[topic]
    options = dict(now_ms=int(time.time() * 1000),
                   delete_retention_ms=config["log.cleaner.delete.retention.ms"],
                   segment_bytes=registry_segment_bytes or config[segment_setting],
                   verify=False, verify_mode=VERIFY_MODES[topic],
                   num_partitions=registry_partitions or config[count_setting])
    started = time.monotonic()
    try:
        results, note = run_pass(spark, log_dir, plans, options, out=out)
    except Exception as e:  # noqa: BLE001 - a failed pass is retried after the backoff
        if stop.is_set():
            print("kcoord sidecar: pass cancelled", file=out, flush=True)
        else:
            log.error("Compaction pass over %s failed: %s", topic, e)
        return 0
    print(f"pass {done + 1}: {len(plans)} {topic} partition(s) in {time.monotonic() - started:.2f} s; "
          f"segments {note}\n{format_table(results)}", file=out, flush=True)
    return 1


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
            for topic in COMPACTED_TOPICS:  # each topic in its own pass (partition numbers repeat)
                if stop.is_set() or (max_passes is not None and passes >= max_passes):
                    break
                passes += _one_pass(spark, config, log_dir, topic, ratio, stop, passes, out)
            if max_passes is not None and passes >= max_passes:
                break
            stop.wait(backoff_s)
    finally:
        spark.stop()
        shutil.rmtree(tmp, ignore_errors=True)
        lock.release()
    return 0
