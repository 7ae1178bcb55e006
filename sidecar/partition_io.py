"""Writing a compacted partition directory with storage's own code, checking it reloads, and the
per-partition work one Spark task does (compact, write, reload, verify).

The .log files are written here (and fsynced); the .index / .timeindex files are produced by
opening the directory with storage's PartitionLog, which scans every batch (CRC included),
rebuilds the indexes exactly as the server does and seals the non-active segments. If that
recovery would cut anything, the output is refused.
"""
from __future__ import annotations

import os
import re
import shutil
import time
from dataclasses import dataclass

from kcoord.sidecar.compaction import (
    DEFAULT_DELETE_RETENTION_MS,
    DEFAULT_SEGMENT_BYTES,
    PartitionStats,
    Segment,
    compact_partition,
    iter_records,
    iter_segment_batches,
)
from kcoord.sidecar.verify import diff_states, replay_state
from kcoord.storage.log import PartitionLog
from kcoord.storage.segment import segment_name
from kcoord.storage.swap import fsync_dir
from kcoord.storage.transactions import uncommitted_batches

__all__ = ["DirectoryOutput", "OutputCheckError", "SwapOutput", "fsync_dir", "process_partition",
           "write_partition_dir"]

# Files that belong to segments we rewrite (the indexes are rebuilt) or Kafka's cleaner/recovery
# temporaries; everything else in a partition directory (partition.metadata,
# leader-epoch-checkpoint, producer-state *.snapshot) is copied as is.
_SEGMENT_FILE = re.compile(r"^\d{20}\.(log|index|timeindex|txnindex)$")
_TEMP_SUFFIXES = (".cleaned", ".swap", ".deleted", ".tmp")


class OutputCheckError(RuntimeError):
    """The written directory does not reload as exactly what was written."""


def write_partition_dir(target: str, segments: list[Segment], source_dir: str | None = None,
                        expected_log_end: int | None = None) -> None:
    """Write `segments` (oldest first, the last one active) as a Kafka partition directory.

    `target` must not exist yet (a stale one from a failed attempt is removed). Non-segment
    files of `source_dir` are copied; the active segment's .txnindex too (it is untouched).
    """
    if os.path.lexists(target):
        shutil.rmtree(target)
    os.makedirs(target)
    if source_dir is not None:
        active_txn = segment_name(segments[-1].base_offset) + ".txnindex" if segments else None
        for name in os.listdir(source_dir):
            src = os.path.join(source_dir, name)
            if not os.path.isfile(src) or name.endswith(_TEMP_SUFFIXES):
                continue
            if _SEGMENT_FILE.match(name) and name != active_txn:
                continue
            shutil.copy2(src, os.path.join(target, name))
            fsync_dir(os.path.join(target, name))
    for seg in segments:
        path = os.path.join(target, segment_name(seg.base_offset) + ".log")
        with open(path, "wb") as f:
            f.write(seg.data)
            f.flush()
            os.fsync(f.fileno())
    # Reload with the server's storage: rebuilds and writes the indexes, and must cut nothing.
    plog = PartitionLog(target)
    try:
        got = [(s.base_offset, s.size) for s in plog.segments]
        want = [(s.base_offset, len(s.data)) for s in segments] or [(0, 0)]
        if got != want:
            raise OutputCheckError(f"{target}: reloaded segments {got} differ from written {want}")
        if expected_log_end is not None and plog.log_end_offset != expected_log_end:
            raise OutputCheckError(f"{target}: log end offset {plog.log_end_offset} after reload, "
                                   f"expected {expected_log_end}")
    finally:
        plog.close()
    for name in os.listdir(target):
        if name.endswith((".index", ".timeindex")):
            fsync_dir(os.path.join(target, name))
    fsync_dir(target)


def input_records(segments: list[Segment]):
    """(key, value) of every record that counts (as the server's loading sees it: no control
    batches, no uncommitted transactions), in offset order."""
    segments = sorted(segments, key=lambda s: s.base_offset)
    batches = [hb for seg in segments for hb in iter_segment_batches(seg.data, f"segment {seg.base_offset}")]
    hidden = uncommitted_batches(batches)
    for h, body in batches:
        if h.is_control or h.base_offset in hidden:
            continue
        for _o, _t, key, value, _h in iter_records(body, h):
            yield key, value


def output_records(path: str):
    """(key, value) of a partition directory through the server's loading path."""
    plog = PartitionLog(path)
    try:
        for _offset, key, value in plog.iter_records():
            yield key, value
    finally:
        plog.close()


@dataclass(frozen=True, slots=True)
class DirectoryOutput:
    """Write the whole compacted partition as a new directory (`--output`)."""

    target_dir: str


@dataclass(frozen=True, slots=True)
class SwapOutput:
    """Hand the cleaned segments to the live partition directory (sidecar/handoff.py): the
    server, running or not, swaps them in. `inputs` fingerprints the segments read."""

    partition_dir: str
    inputs: dict[int, tuple[int, int]]


Output = DirectoryOutput | SwapOutput


def process_partition(partition: int, segments: list[Segment], *, source_dir: str | None,
                      output: Output, now_ms: int,
                      delete_retention_ms: int = DEFAULT_DELETE_RETENTION_MS,
                      segment_bytes: int = DEFAULT_SEGMENT_BYTES,
                      verify: bool = False, verify_mode: str = "auto",
                      num_partitions: int = 50,
                      key_map: dict[bytes, int] | None = None,
                      topic: str = "__consumer_offsets") -> dict:
    """Everything one Spark task does for one partition: compact, verify (replay input and
    output through the coordinator's replay), write. Returns the stats as a dict, with
    `error` set (and no exception) when compaction, the checks or the writing failed."""
    from kcoord.sidecar.handoff import publish

    started = time.monotonic()
    verified = "error"
    try:
        result = compact_partition(segments, now_ms=now_ms, delete_retention_ms=delete_retention_ms,
                                   segment_bytes=segment_bytes, partition=partition, key_map=key_map)
        st = result.stats
        if verify:
            mode, before = replay_state(input_records(segments), partition, num_partitions, verify_mode)
            _, after = replay_state(input_records(result.segments), partition, num_partitions, mode)
            diffs = diff_states(before, after)
            if diffs:
                verified = f"FAILED ({mode})"
                raise OutputCheckError("verify: " + "; ".join(diffs))
            st.verified = f"ok ({mode}, {len(before)} {'groups' if mode == 'coordinator' else 'keys'})"
        if isinstance(output, DirectoryOutput):
            write_partition_dir(output.target_dir, result.segments, source_dir,
                                expected_log_end=st.log_end_offset)
            st.extra["target_dir"] = output.target_dir
        else:
            st.extra["swaps"] = publish(output.partition_dir, result.groups, segments, output.inputs)
    except Exception as e:  # noqa: BLE001 - reported per partition, the driver aborts
        st = PartitionStats(partition=partition, segments_in=len(segments))
        st.extra["error"] = f"{type(e).__name__}: {e}"
        st.verified = verified
    st.topic = topic
    st.seconds = time.monotonic() - started
    return st.as_dict()
