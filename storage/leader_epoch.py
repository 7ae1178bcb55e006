"""A partition's leader epochs: which epoch wrote which offsets (Kafka's LeaderEpochFileCache),
kept in `leader-epoch-checkpoint` in the partition directory, in Kafka's checkpoint format:

    0            <- version
    2            <- number of entries
    0 0          <- epoch, start offset (the first offset that epoch's leader wrote)
    3 120

Entries are strictly increasing in both epoch and start offset. A follower (and a leader after
a crash) answers "where does epoch E end?" from it (OffsetsForLeaderEpoch), which is how a
follower finds the point its log diverged from the leader's.
"""
from __future__ import annotations

import os
from bisect import bisect_right
from collections.abc import Iterable

CHECKPOINT_FILE = "leader-epoch-checkpoint"
VERSION = 0
UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1


class CorruptCheckpointError(ValueError):
    """A leader-epoch-checkpoint that does not parse."""


def parse_checkpoint(text: str) -> list[tuple[int, int]]:
    lines = [ln for ln in text.splitlines() if ln.strip()]
    if len(lines) < 2:
        raise CorruptCheckpointError("missing version or size line")
    try:
        version, size = int(lines[0]), int(lines[1])
        entries = []
        for ln in lines[2:]:
            epoch, offset = ln.split()
            entries.append((int(epoch), int(offset)))
    except ValueError as e:
        raise CorruptCheckpointError(f"malformed line: {e}") from None
    if version != VERSION:
        raise CorruptCheckpointError(f"unknown version {version}")
    if size != len(entries):
        raise CorruptCheckpointError(f"expected {size} entries, found {len(entries)}")
    return entries


def format_checkpoint(entries: Iterable[tuple[int, int]]) -> str:
    entries = list(entries)
    return "".join([f"{VERSION}\n", f"{len(entries)}\n"] + [f"{e} {o}\n" for e, o in entries])


class LeaderEpochCache:
    """(epoch, start offset) pairs of one partition; `path` None keeps it in memory only
    (the model in tests). Every change is written through before the method returns."""

    def __init__(self, path: str | None = None, entries: Iterable[tuple[int, int]] = ()) -> None:
        self.path = path
        self._epochs: list[int] = []
        self._starts: list[int] = []
        for e, o in entries:
            self._epochs.append(e)
            self._starts.append(o)

    @classmethod
    def open(cls, partition_dir: str) -> LeaderEpochCache:
        """The cache of a partition directory; empty when it has no checkpoint yet."""
        path = os.path.join(partition_dir, CHECKPOINT_FILE)
        try:
            with open(path) as f:
                entries = parse_checkpoint(f.read())
        except FileNotFoundError:
            entries = []
        return cls(path, entries)

    @property
    def exists(self) -> bool:
        return self.path is not None and os.path.exists(self.path)

    # ------------------------------------------------------------------ reading

    def entries(self) -> list[tuple[int, int]]:
        return list(zip(self._epochs, self._starts, strict=True))

    @property
    def latest_epoch(self) -> int:
        return self._epochs[-1] if self._epochs else UNDEFINED_EPOCH

    def start_offset_of(self, epoch: int) -> int | None:
        i = bisect_right(self._epochs, epoch) - 1
        return self._starts[i] if i >= 0 and self._epochs[i] == epoch else None

    def epoch_for_offset(self, offset: int) -> int:
        """The epoch that wrote `offset` (the last entry starting at or below it)."""
        i = bisect_right(self._starts, offset) - 1
        return self._epochs[i] if i >= 0 else UNDEFINED_EPOCH

    def end_offset_for(self, requested: int, log_end_offset: int) -> tuple[int, int]:
        """(epoch, end offset) for OffsetsForLeaderEpoch: the largest epoch at or below
        `requested` and the offset where the next higher epoch starts (the log end for the
        latest epoch); (-1, -1) for an undefined epoch or one above every entry."""
        if requested == UNDEFINED_EPOCH or not self._epochs:
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if requested == self._epochs[-1]:
            return requested, log_end_offset
        higher = bisect_right(self._epochs, requested)
        if higher >= len(self._epochs):
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if higher == 0:  # below the earliest epoch we know
            return requested, self._starts[0]
        return self._epochs[higher - 1], self._starts[higher]

    # ------------------------------------------------------------------ changing

    def assign(self, epoch: int, start_offset: int) -> bool:
        """`epoch` starts at `start_offset` (a leader's first append, or a replicated batch of a
        new epoch). Entries it contradicts (an epoch at or above it, or a start at or after
        it) are dropped first. Returns whether anything changed."""
        if epoch < 0:
            return False
        if self._epochs and self._epochs[-1] == epoch and self._starts[-1] <= start_offset:
            return False
        while self._epochs and (self._epochs[-1] >= epoch or self._starts[-1] >= start_offset):
            self._epochs.pop()
            self._starts.pop()
        self._epochs.append(epoch)
        self._starts.append(start_offset)
        self._flush()
        return True

    def truncate_from_end(self, end_offset: int) -> None:
        """The log was cut to end at `end_offset`: entries starting at or after it go."""
        n = len(self._starts)
        while self._starts and self._starts[-1] >= end_offset:
            self._epochs.pop()
            self._starts.pop()
        if len(self._starts) != n:
            self._flush()

    def truncate_from_start(self, start_offset: int) -> None:
        """The log now starts at `start_offset`: entries wholly below it go, and the one
        covering it starts there."""
        i = bisect_right(self._starts, start_offset) - 1
        if i < 0 or (i == 0 and self._starts[0] == start_offset):
            return
        self._epochs = self._epochs[i:]
        self._starts = [start_offset] + self._starts[i + 1:]
        self._flush()

    def clear(self) -> None:
        if self._epochs:
            self._epochs.clear()
            self._starts.clear()
            self._flush()

    def _flush(self) -> None:
        """Write the checkpoint atomically (temp file, fsync, rename, directory fsync)."""
        if self.path is None:
            return
        tmp = self.path + ".tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            os.write(fd, format_checkpoint(self.entries()).encode())
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, self.path)
        dfd = os.open(os.path.dirname(self.path) or ".", os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)

    def __repr__(self) -> str:
        return f"LeaderEpochCache({self.entries()})"
