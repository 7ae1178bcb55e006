"""The compactor's side of handing cleaned segments to a partition directory that a server
may be serving from (the protocol itself is in storage/swap.py):

- planning: only closed segments are read (never the active one, which the server appends
  to), and a partition whose previous swaps are not completed yet is skipped;
- `write_cleaned`: each cleaned group that changed becomes `<base>.log.cleaned`, fsynced;
- `commit_swaps`: after checking that the inputs are still the files that were read (same
  inode and size: a restarted server's recovery could have cut them), rename every
  `.cleaned` to `.swap` and fsync the directory. Each rename commits one group;
- `finish`: a running server (it holds `<log.dirs>/.lock`) completes the swaps itself, on its
  event loop, within kcoord.compaction.handoff.check.ms; without a server the compactor takes
  the lock and completes them with storage's own recovery (opening the PartitionLog).

Only one compactor may work on a log directory at a time: `CleanerLock` (an flock on
`<log.dirs>/.kcoord-cleaner.lock`) is held for a whole pass, or by `kcoord sidecar` for its life.
"""
from __future__ import annotations

import errno
import fcntl
import os
import sys
import time
from collections.abc import Iterable

from kcoord.sidecar.compaction import CleanedGroup, Segment
from kcoord.storage.log import PartitionLog
from kcoord.storage.segment import segment_name
from kcoord.storage.swap import CLEANED_SUFFIX, SWAP_SUFFIX, fsync_dir, pending_swaps, segment_bases

__all__ = ["CleanerLock", "DirectoryInUseError", "InputChangedError", "LogDirLock", "closed_segments",
           "commit_swaps", "finish", "fingerprints", "publish", "write_cleaned"]

LOCK_FILE = ".lock"  # Kafka's log-directory lock, held by a running server
CLEANER_LOCK_FILE = ".kcoord-cleaner.lock"


class DirectoryInUseError(RuntimeError):
    """A lock on the log directory is held by someone else."""


class InputChangedError(RuntimeError):
    """A segment changed between reading it and committing its replacement."""


class _FileLock:
    path_name = ""
    what = ""

    def __init__(self, log_dir: str) -> None:
        self.path = os.path.join(log_dir, self.path_name)
        self.fd = -1

    def acquire(self) -> None:
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as e:
            os.close(fd)
            if e.errno in (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK):
                raise DirectoryInUseError(f"{self.path} is locked: {self.what}") from None
            raise
        self.fd = fd

    def try_acquire(self) -> bool:
        try:
            self.acquire()
        except DirectoryInUseError:
            return False
        return True

    def release(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def __enter__(self):
        self.acquire()
        return self

    def __exit__(self, *exc) -> None:
        self.release()


class LogDirLock(_FileLock):
    """The server's lock (flock on `.lock`, as kcoord's Broker takes it)."""

    path_name = LOCK_FILE
    what = "a kcoord server uses the log directory"


class CleanerLock(_FileLock):
    """One compactor per log directory."""

    path_name = CLEANER_LOCK_FILE
    what = "another compactor (kcoord compact or kcoord sidecar) works on this log directory"

    @classmethod
    def acquire_or_report(cls, log_dir: str, prog: str) -> CleanerLock | None:
        """The lock, held; or None after saying on stderr who holds it."""
        lock = cls(log_dir)
        try:
            lock.acquire()
        except DirectoryInUseError as e:
            print(f"{prog}: {e}", file=sys.stderr)
            return None
        return lock


def closed_segments(partition_dir: str) -> tuple[list[int], int | None]:
    """(base offsets of the closed segments, base offset of the active one) right now."""
    bases = segment_bases(partition_dir)
    return bases[:-1], (bases[-1] if bases else None)


def _segment_path(partition_dir: str, base: int) -> str:
    return os.path.join(partition_dir, segment_name(base) + ".log")


def fingerprints(partition_dir: str, bases: Iterable[int]) -> dict[int, tuple[int, int]]:
    out = {}
    for b in bases:
        st = os.stat(_segment_path(partition_dir, b))
        out[b] = (st.st_ino, st.st_size)
    return out


def write_cleaned(partition_dir: str, groups: list[CleanedGroup],
                  inputs: dict[int, bytes | bytearray | memoryview]) -> list[int]:
    """Step 1: `<base>.log.cleaned` for every group whose output differs from its input;
    returns their base offsets."""
    written = []
    for g in groups:
        if not g.segment.data:
            continue  # only empty input segments: nothing to replace them with
        if len(g.replaces) == 1 and bytes(inputs.get(g.replaces[0], b"")) == g.segment.data:
            continue  # unchanged
        path = _segment_path(partition_dir, g.segment.base_offset) + CLEANED_SUFFIX
        with open(path, "wb") as f:
            f.write(g.segment.data)
            f.flush()
            os.fsync(f.fileno())
        written.append(g.segment.base_offset)
    return written


def commit_swaps(partition_dir: str, written: list[int], inputs: dict[int, tuple[int, int]]) -> None:
    """Step 2: check the inputs are unchanged, then rename each `.cleaned` to `.swap`."""
    now = fingerprints(partition_dir, [b for b in inputs if os.path.exists(_segment_path(partition_dir, b))])
    if now != inputs:
        raise InputChangedError(f"{partition_dir}: segments changed while compacting "
                                f"({sorted(set(inputs) ^ set(now)) or 'sizes differ'}); nothing swapped")
    fsync_dir(partition_dir)
    for base in written:
        path = _segment_path(partition_dir, base)
        os.rename(path + CLEANED_SUFFIX, path + SWAP_SUFFIX)
    fsync_dir(partition_dir)


def publish(partition_dir: str, groups: list[CleanedGroup], segments: list[Segment],
            inputs: dict[int, tuple[int, int]]) -> int:
    """Steps 1 and 2; returns how many swaps were committed. Leaves no `.cleaned` file behind."""
    if pending_swaps(partition_dir):
        raise InputChangedError(f"{partition_dir}: an earlier pass's swaps are not completed yet")
    data = {s.base_offset: s.data for s in segments}
    written: list[int] = []
    try:
        written = write_cleaned(partition_dir, groups, data)
        commit_swaps(partition_dir, written, inputs)
    except BaseException:
        for base in written:
            try:
                os.unlink(_segment_path(partition_dir, base) + CLEANED_SUFFIX)
            except FileNotFoundError:
                pass
        raise
    return len(written)


def finish(log_dir: str, partition_dirs: list[str], timeout_s: float = 60.0) -> str:
    """See the swaps committed in `partition_dirs` through; says who completed them."""
    if not partition_dirs:
        return "nothing to swap"
    lock = LogDirLock(log_dir)
    if lock.try_acquire():
        try:  # no server: storage's recovery completes the swaps
            for d in partition_dirs:
                if pending_swaps(d):
                    PartitionLog(d).close()
        finally:
            lock.release()
        return f"swapped in by the compactor ({len(partition_dirs)} partition(s); no server running)"
    waiting = list(partition_dirs)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        waiting = [d for d in waiting if pending_swaps(d)]
        if not waiting:
            return f"swapped in by the running server ({len(partition_dirs)} partition(s))"
        time.sleep(0.05)
    return (f"handed to the running server; {len(waiting)} partition(s) not swapped in yet "
            "(the server completes them, or its next start-up does)")
