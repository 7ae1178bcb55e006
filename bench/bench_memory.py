"""Memory for committed offsets: write N offset records for many groups into
__consumer_offsets segments, start kcoord on them, wait until it has loaded them, and read its
RSS. The ceiling printed beside it is the RSS of the same server with an empty log.
Target: 1,000,000 committed offsets in at most 400 MB RSS.
"""
from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time

from _util import SyncClient, rss_mb, start_kcoord, stop, table
from kafka.protocol.consumer import OffsetFetchRequest

from kcoord.protocol.coordinator_codec import encode_key, encode_value
from kcoord.protocol.coordinator_records import OffsetKey, OffsetValue
from kcoord.protocol.errors import ErrorCode
from kcoord.protocol.partitioner import partition_for
from kcoord.storage.log import PartitionLog

PARTITIONS = 50


def write_offsets(log_dir: str, groups: int, per_group: int) -> None:
    logs = {p: PartitionLog(os.path.join(log_dir, f"__consumer_offsets-{p}")) for p in range(PARTITIONS)}
    now = int(time.time() * 1000)
    for g in range(groups):
        group = f"group-{g}"
        plog = logs[partition_for(group, PARTITIONS)]
        batch = []
        for i in range(per_group):
            key = encode_key(OffsetKey(group, f"topic-{i // 100}", i % 100))
            batch.append((key, encode_value(OffsetValue(offset=i * 7, metadata="", commit_timestamp=now))))
            if len(batch) == 500:
                plog.append_records(batch, now)
                batch = []
        if batch:
            plog.append_records(batch, now)
    for plog in logs.values():
        plog.close()


def wait_loaded(port: int, group: str, timeout: float = 120.0) -> None:
    c = SyncClient(port)
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            r = c.call(OffsetFetchRequest(group_id=group, topics=None, require_stable=False), 7)
            if r.error_code != ErrorCode.COORDINATOR_LOAD_IN_PROGRESS:
                return
            time.sleep(0.2)
    finally:
        c.close()
    raise TimeoutError("offsets did not load")


def measure(groups: int, per_group: int) -> tuple[float, float]:
    d = tempfile.mkdtemp(prefix="kcoord-mem-")
    try:
        if groups:
            write_offsets(d, groups, per_group)
        t0 = time.monotonic()
        proc, port, _ = start_kcoord(log_dir=d)
        try:
            # partitions load in order: the group of the highest partition loads last
            last = max(range(max(groups, 1)), key=lambda g: partition_for(f"group-{g}", PARTITIONS))
            wait_loaded(port, f"group-{last}")
            load_s = time.monotonic() - t0
            time.sleep(0.5)
            return rss_mb(proc.pid), load_s
        finally:
            stop(proc)
    finally:
        shutil.rmtree(d, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--offsets", type=int, default=1_000_000)
    ap.add_argument("--per-group", type=int, default=1000)
    args = ap.parse_args()
    groups = args.offsets // args.per_group
    empty_rss, _ = measure(0, 0)
    full_rss, load_s = measure(groups, args.per_group)
    print(f"{args.offsets:,} committed offsets ({groups:,} groups x {args.per_group:,} partitions)")
    print(table(["server", "RSS MB", "start+load s"], [
        ["kcoord, empty log (baseline)", empty_rss, "-"],
        [f"kcoord, {args.offsets:,} offsets", full_rss, load_s],
    ]))
    print(f"bytes per offset above baseline: {(full_rss - empty_rss) * 1024 * 1024 / args.offsets:,.0f}")
    print(f"target: <= 400 MB RSS -> {'met' if full_rss <= 400 else 'NOT met'}")


if __name__ == "__main__":
    main()
