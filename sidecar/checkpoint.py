"""Kafka's `cleaner-offset-checkpoint` (in the log directory) and the dirty ratio it gives.

The file says, per partition, the first offset not yet cleaned: everything below it was
cleaned by an earlier pass. Its format is Kafka's: a version line (0), an entry count, then
`topic partition offset` lines (storage/offset_checkpoint.py). The dirty ratio is Kafka's cleanable ratio: bytes of closed
segments at or above that offset over bytes of every closed segment; a partition is worth a
pass when it reaches log.cleaner.min.cleanable.ratio (min.cleanable.dirty.ratio, 0.5).
"""
from __future__ import annotations

import logging
import os

from kcoord.storage.offset_checkpoint import CheckpointError, read_offset_checkpoint, write_offset_checkpoint
from kcoord.storage.segment import segment_name

log = logging.getLogger("kcoord.compact")

__all__ = ["CHECKPOINT_FILE", "dirty_ratio", "read_checkpoint", "write_checkpoint"]

CHECKPOINT_FILE = "cleaner-offset-checkpoint"


def read_checkpoint(log_dir: str) -> dict[tuple[str, int], int]:
    path = os.path.join(log_dir, CHECKPOINT_FILE)
    try:
        return read_offset_checkpoint(path)
    except CheckpointError as e:
        log.warning("%s: every partition counts as dirty", e)
        return {}


def write_checkpoint(log_dir: str, updates: dict[tuple[str, int], int]) -> None:
    """Merge `updates` into the file, atomically (write, fsync, rename, fsync directory)."""
    entries = read_checkpoint(log_dir)
    entries.update(updates)
    write_offset_checkpoint(os.path.join(log_dir, CHECKPOINT_FILE), entries)


def dirty_ratio(partition_dir: str, closed_bases: list[int], first_dirty: int) -> float:
    """Dirty bytes / all bytes of the closed segments (0.0 when there are none)."""
    clean = dirty = 0
    for b in closed_bases:
        size = os.path.getsize(os.path.join(partition_dir, segment_name(b) + ".log"))
        if b >= first_dirty:
            dirty += size
        else:
            clean += size
    total = clean + dirty
    return dirty / total if total else 0.0
