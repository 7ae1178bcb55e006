"""Kafka's `replication-offset-checkpoint`: the high watermark of every partition a node hosts,
in the log directory, in the offset-checkpoint format (storage/offset_checkpoint.py: a version
line `0`, the entry count, then `topic partition offset` lines). The replica manager writes it
every `replica.high.watermark.checkpoint.interval.ms` (5000) when a value changed, and when it
stops; a replica created at start-up takes its high watermark from it (capped at its log end
offset), so a node that becomes leader right after a restart serves what was committed
without waiting for its followers' first fetches. A partition deleted here leaves the file at
the next write; one not hosted yet since start-up keeps its entry."""
from __future__ import annotations

import logging
import os
from collections.abc import Mapping

from kcoord.storage.offset_checkpoint import CheckpointError, read_offset_checkpoint, write_offset_checkpoint

log = logging.getLogger("kcoord.replication")

FILE = "replication-offset-checkpoint"

TopicPartition = tuple[str, int]


class HighWatermarkCheckpoint:
    def __init__(self, log_dir: str) -> None:
        self.path = os.path.join(str(log_dir), FILE)
        try:
            self._read = read_offset_checkpoint(self.path)
        except (CheckpointError, OSError) as e:  # Kafka logs it and starts from 0
            log.error("Ignoring %s: %s", self.path, e)
            self._read = {}
        self._written: dict[TopicPartition, int] = dict(self._read)

    def initial(self, key: TopicPartition) -> int:
        """The high watermark the file had for the partition at start-up (0 when none)."""
        return self._read.get(key, 0)

    def forget(self, key: TopicPartition) -> None:
        """The partition's log was deleted: its start-up entry no longer counts."""
        self._read.pop(key, None)

    def write(self, current: Mapping[TopicPartition, int]) -> bool:
        """The hosted partitions' high watermarks, with the start-up entries of those not
        hosted yet; written only when something changed. Returns whether it wrote."""
        entries = {**self._read, **current}
        if entries == self._written:
            return False
        write_offset_checkpoint(self.path, entries)
        self._written = entries
        return True
