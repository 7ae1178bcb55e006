"""How compacted segments replace old ones in a partition directory: Kafka's
`.cleaned` -> `.swap` -> `.log` protocol, shared by the compactor (which publishes) and the
log (which completes swaps, live or at start-up).

The compactor (sidecar/handoff.py), for each group of old segments it cleaned:
  1. writes the new segment as `<base>.log.cleaned` and fsyncs it;
  2. renames it to `<base>.log.swap` and fsyncs the directory: from here on the swap is
     committed, and whoever completes it next gets the same result.
The log completes a swap (on the event-loop thread while serving, or while opening):
  3. the old segments it replaces are those whose base offset lies in
     [swap base, swap next offset): the cleaner keeps each group's last batch, so the new
     segment spans exactly the old group's offsets. Their files are deleted, newest first,
     so that an interrupted completion still either has `<base>.log` or nothing in range;
  4. the directory is fsynced, `.swap` is renamed to `.log`, and the directory fsynced again.
At start-up, `.cleaned` files (a pass that did not commit) are deleted and every `.swap` is
completed before the segments are opened. A `.swap` that does not fit the log (corrupt, empty,
or overlapping a segment it would not replace) is deleted with a warning: the old segments
still hold everything it had.
"""
from __future__ import annotations

import logging
import os
import re

from kcoord.storage.batch import CorruptBatchError
from kcoord.storage.files import fsync_dir
from kcoord.storage.segment import scan_batches, segment_name

logger = logging.getLogger(__name__)

__all__ = ["CLEANED_SUFFIX", "SWAP_SUFFIX", "complete_swap", "fsync_dir", "pending_swaps",
           "remove_cleaned", "remove_swaps_below", "segment_bases", "swap_range"]

CLEANED_SUFFIX = ".cleaned"
SWAP_SUFFIX = ".swap"
_SEGMENT_FILE = re.compile(r"^(\d{20})\.log$")
_SWAP_FILE = re.compile(r"^(\d{20})\.log\.swap$")
_CLEANED_FILE = re.compile(r"^\d{20}\.(log|index|timeindex|txnindex)(\.swap)?\.cleaned$")
SEGMENT_SUFFIXES = (".log", ".index", ".timeindex", ".txnindex")


def segment_bases(path: str) -> list[int]:
    """Base offsets of the `.log` segments in a partition directory, ascending."""
    return sorted(int(m.group(1)) for name in os.listdir(path) if (m := _SEGMENT_FILE.match(name)))


def pending_swaps(path: str) -> list[int]:
    """Base offsets of the committed `.swap` segments waiting to be completed, ascending."""
    return sorted(int(m.group(1)) for name in os.listdir(path) if (m := _SWAP_FILE.match(name)))


def remove_swaps_below(path: str, offset: int) -> list[int]:
    """Delete the committed swaps that start below `offset`, the log's new first segment
    after retention or DeleteRecords deleted the segments they would replace."""
    gone = [b for b in pending_swaps(path) if b < offset]
    for b in gone:
        try:
            os.unlink(os.path.join(path, segment_name(b) + ".log" + SWAP_SUFFIX))
        except FileNotFoundError:
            continue
    if gone:
        fsync_dir(path)
        logger.info("%s: deleted %d compacted segment(s) whose segments were deleted meanwhile", path, len(gone))
    return gone


def remove_cleaned(path: str) -> list[str]:
    """Delete the `.cleaned` files of a pass that never committed; returns their names."""
    removed = []
    for name in os.listdir(path):
        if _CLEANED_FILE.match(name):
            try:
                os.unlink(os.path.join(path, name))
            except FileNotFoundError:
                continue  # the compactor renamed it meanwhile: it is a .swap now
            removed.append(name)
    return removed


def swap_range(swap_path: str, base: int) -> tuple[int, int] | None:
    """(base, next offset) of a swap file whose batches are all valid, else None."""
    fd = os.open(swap_path, os.O_RDONLY)
    try:
        size = os.fstat(fd).st_size
        end = pos = 0
        expected = base
        for h, _ in scan_batches(fd, 0, size, verify_crc=True):
            if h.base_offset < expected or h.last_offset_delta < 0:
                return None
            expected = h.next_offset
            pos = h.position + h.size
            end = expected
        return (base, end) if pos == size and end > base else None
    except (CorruptBatchError, OSError, ValueError):
        return None
    finally:
        os.close(fd)


def _delete_segment_files(path: str, base: int) -> None:
    stem = os.path.join(path, segment_name(base))
    for suffix in SEGMENT_SUFFIXES:
        try:
            os.unlink(stem + suffix)
        except FileNotFoundError:
            pass


def complete_swap(path: str, base: int, bases: list[int], limit: int | None = None) -> list[int] | None:
    """Complete the `.swap` of `base` against the segments `bases` of the directory (steps 3
    and 4 above); a swap reaching `limit` (the active segment's base) is refused. Live (limit
    given), a swap must replace a segment that starts at its base: retention or DeleteRecords
    may have deleted what it replaces meanwhile, and it must not bring those offsets back.
    Returns the replaced base offsets, or None if the swap was refused (and deleted)."""
    swap_path = os.path.join(path, segment_name(base) + ".log" + SWAP_SUFFIX)
    rng = swap_range(swap_path, base)
    replaced = [b for b in bases if rng is not None and base <= b < rng[1]]
    why = ("invalid or no batches" if rng is None
           else f"offsets [{base}, {rng[1]}) reach the active segment at {limit}"
           if limit is not None and rng[1] > limit
           else f"offsets [{base}, {rng[1]}) vs segments {replaced}" if replaced and replaced[0] != base
           else f"offsets [{base}, {rng[1]}) replace no segment of the log (deleted meanwhile)"
           if limit is not None and not replaced
           else None)
    if why:
        logger.warning("%s: deleting swap file %s that does not fit the log: %s", path,
                       os.path.basename(swap_path), why)
        os.unlink(swap_path)
        fsync_dir(path)
        return None
    for b in reversed(replaced):
        _delete_segment_files(path, b)
    fsync_dir(path)
    for suffix in (".index", ".timeindex", ".txnindex"):  # rebuilt for the new segment
        try:
            os.unlink(os.path.join(path, segment_name(base) + suffix))
        except FileNotFoundError:
            pass
    os.rename(swap_path, os.path.join(path, segment_name(base) + ".log"))
    fsync_dir(path)
    return replaced
