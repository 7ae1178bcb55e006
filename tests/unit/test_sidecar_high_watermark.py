"""The sidecar on a cluster node cleans a replica only below its checkpointed high watermark
(sidecar/compact.py's plan_pass), as Kafka's cleaner stops at the last stable offset: a record
above the high watermark may be truncated by a leader change, so it must not shadow an older
value of its key."""
from __future__ import annotations

import os

from kcoord.sidecar.compact import plan_pass
from kcoord.sidecar.compaction import (
    Segment,
    compact_partition,
    iter_records,
    iter_segment_batches,
    read_partition_segments,
)
from kcoord.storage.log import PartitionLog
from kcoord.storage.offset_checkpoint import write_offset_checkpoint

NOW = 1_700_000_000_000
TOPIC = "changelog"


def replica(tmp_path) -> tuple[str, str, list[int]]:
    """A partition of one key written 200 times over many segments: (log dir, partition dir,
    segment bases)."""
    log_dir = str(tmp_path)
    d = os.path.join(log_dir, f"{TOPIC}-0")
    os.makedirs(d)
    plog = PartitionLog(d, segment_bytes=2048)
    try:
        for i in range(200):
            plog.append_records([(b"key", b"v%03d" % i + b"x" * 60)], NOW)
        bases = [s.base_offset for s in plog.segments]
    finally:
        plog.close()
    assert len(bases) >= 6
    return log_dir, d, bases


def plan(log_dir: str, d: str):
    plans, skipped = plan_pass(log_dir, {(TOPIC, 0): d}, output_dir=None, min_ratio=0.0)
    return (plans[0] if plans else None), skipped


def test_no_checkpoint_every_closed_segment(tmp_path):
    log_dir, d, bases = replica(tmp_path)
    p, _ = plan(log_dir, d)
    assert p.bases == bases[:-1] and p.active_base == bases[-1]


def test_only_segments_that_end_below_the_high_watermark(tmp_path):
    log_dir, d, bases = replica(tmp_path)
    hw = bases[3] + 2  # inside the fourth segment
    write_offset_checkpoint(os.path.join(log_dir, "replication-offset-checkpoint"), {(TOPIC, 0): hw, ("other", 0): 0})
    p, _ = plan(log_dir, d)
    assert p.bases == bases[:3] and p.active_base == bases[3]
    # the cleaned range keeps the key's last value below the high watermark, superseded only above it
    segs = [s for s in read_partition_segments(d) if s.base_offset in p.bases]
    result = compact_partition(segs + [Segment(p.active_base, b"")], now_ms=NOW, segment_bytes=2048)
    kept = [off for g in result.groups for h, body in iter_segment_batches(g.segment.data)
            for off, *_ in iter_records(body, h)]
    assert kept == [bases[3] - 1]
    # at a segment boundary, that segment is the first left alone
    write_offset_checkpoint(os.path.join(log_dir, "replication-offset-checkpoint"), {(TOPIC, 0): bases[2]})
    p, _ = plan(log_dir, d)
    assert p.bases == bases[:2] and p.active_base == bases[2]


def test_nothing_below_the_high_watermark_skips_the_partition(tmp_path):
    log_dir, d, bases = replica(tmp_path)
    write_offset_checkpoint(os.path.join(log_dir, "replication-offset-checkpoint"), {(TOPIC, 0): bases[1] - 1})
    p, skipped = plan(log_dir, d)
    assert p is None and "high watermark" in skipped[(TOPIC, 0)]

