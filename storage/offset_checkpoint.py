"""Kafka's OffsetCheckpointFile format, used by `log-start-offset-checkpoint` (the broker) and
`cleaner-offset-checkpoint` (the compactor) in the log directory: a version line (0), an
entry count, then one `topic partition offset` line per entry. Written atomically: a `.tmp`
file, fsync, rename, fsync of the directory.
"""
from __future__ import annotations

import os

from kcoord.storage.files import fsync_dir

__all__ = ["CheckpointError", "read_offset_checkpoint", "write_offset_checkpoint"]


class CheckpointError(ValueError):
    """The file exists but is not a version-0 offset checkpoint."""


def read_offset_checkpoint(path: str) -> dict[tuple[str, int], int]:
    """The entries of the file ({} if there is none); CheckpointError if it is malformed."""
    try:
        with open(path) as f:
            lines = f.read().splitlines()
    except FileNotFoundError:
        return {}
    try:
        if lines[0].strip() != "0":
            raise CheckpointError(f"{path}: unknown version {lines[0]!r}")
        count = int(lines[1])
        out = {}
        for line in lines[2:2 + count]:
            topic, partition, offset = line.split()
            out[(topic, int(partition))] = int(offset)
    except (IndexError, ValueError) as e:
        raise CheckpointError(f"{path}: malformed ({e})") from None
    if len(out) != count:
        raise CheckpointError(f"{path}: {len(out)} entries, the header says {count}")
    return out


def write_offset_checkpoint(path: str, entries: dict[tuple[str, int], int]) -> None:
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write(f"0\n{len(entries)}\n")
        for (topic, partition), offset in sorted(entries.items()):
            f.write(f"{topic} {partition} {offset}\n")
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    fsync_dir(os.path.dirname(path) or ".")
