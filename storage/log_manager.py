"""LogManager: the partition logs under one log directory (Kafka's log.dirs entry).

Owns discovering `topic-N` directories at start-up, creating new ones (with their
`partition.metadata`), looking logs up, forgetting deleted ones, closing them all, and Kafka's
`log-start-offset-checkpoint` (the log start offsets DeleteRecords moved past a segment base).
A partition may be declared instead of created: its directory is made the first time it is
looked up (a new server's 50 empty __consumer_offsets partitions cost no files and no fsyncs at
start-up).
"""
from __future__ import annotations

import errno
import logging
import os
import uuid
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from kcoord.protocol.topics import OFFSETS_TOPIC
from kcoord.storage.files import DEFAULT_SEGMENT_BYTES, OFFSETS_SEGMENT_BYTES
from kcoord.storage.log_dir_failure import LogDirFailureChannel
from kcoord.storage.offset_checkpoint import CheckpointError, read_offset_checkpoint, write_offset_checkpoint
from kcoord.storage.partition_metadata import read_partition_metadata, write_partition_metadata

if TYPE_CHECKING:
    from kcoord.storage.log import PartitionLog

logger = logging.getLogger(__name__)

__all__ = ["LogManager", "parse_partition_dir"]

LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"
# Errors of the device rather than of one request: creating a log that fails with one of these
# takes the directory offline (appends and syncs take it offline on any error).
_DEVICE_ERRORS = {errno.EIO, errno.ENOSPC, errno.EROFS, errno.EDQUOT}


def parse_partition_dir(name: str) -> tuple[str, int] | None:
    """`topic-N` -> (topic, N), split at the last '-'; None for anything else (Kafka's
    `-delete` / `-future` / `-stray` directories, checkpoint files, ...)."""
    topic, sep, part = name.rpartition("-")
    if not sep or not topic or not part.isdigit():
        return None
    return topic, int(part)


class LogManager:
    """Every PartitionLog in `log_dir`, keyed by (topic, partition)."""

    def __init__(self, log_dir: str, *, segment_bytes: int = DEFAULT_SEGMENT_BYTES,
                 offsets_segment_bytes: int = OFFSETS_SEGMENT_BYTES,
                 clock_ms: Callable[[], int] | None = None) -> None:
        self.log_dir = log_dir
        self.clock_ms = clock_ms  # the logs' clock for segment.ms (None: the wall clock)
        # An I/O error in any partition takes the directory offline (storage/log_dir_failure.py).
        self.failures = LogDirFailureChannel([os.path.abspath(log_dir)])
        self.segment_bytes = segment_bytes
        self.offsets_segment_bytes = offsets_segment_bytes
        self.logs: dict[tuple[str, int], PartitionLog] = {}
        self.topic_ids: dict[str, uuid.UUID] = {}
        # (topic, partition) -> (segment bytes, topic id, (segment.ms, segment.jitter.ms)):
        # partitions without a directory yet
        self._declared: dict[tuple[str, int], tuple[int | None, uuid.UUID | None, tuple[int, int] | None]] = {}
        os.makedirs(log_dir, exist_ok=True)
        for name in sorted(os.listdir(log_dir)):
            tp = parse_partition_dir(name)
            path = os.path.join(log_dir, name)
            if tp is None or not os.path.isdir(path):
                continue
            self.logs[tp] = _partition_log(path, segment_bytes=self._segment_bytes(tp[0]), failures=self.failures,
                                           clock_ms=clock_ms)
            try:
                tid = read_partition_metadata(path)
            except ValueError as e:
                logger.warning("%s", e)
                tid = None
            if tid is not None:
                self.topic_ids.setdefault(tp[0], tid)
        logger.info("%s: opened %d partition log(s)", log_dir, len(self.logs))
        self._lso_path = os.path.join(log_dir, LOG_START_OFFSET_CHECKPOINT)
        self._lso_written: dict[tuple[str, int], int] = {}
        self._load_log_start_offsets()

    # ---- log-start-offset-checkpoint

    def _load_log_start_offsets(self) -> None:
        """Apply the checkpoint, delete the segments it puts below a log's start, and rewrite
        it at once if it names partitions that are gone (a deleted topic's entries must not
        reach a topic created later under its name)."""
        try:
            entries = read_offset_checkpoint(self._lso_path)
        except CheckpointError as e:
            logger.warning("%s; log start offsets fall back to the first segments", e)
            entries = {}
        self._lso_written = entries
        for tp, offset in entries.items():
            log = self.logs.get(tp)
            if log is not None:
                log.restore_log_start_offset(offset)
                log.delete_segments_before_start()
        self.checkpoint_log_start_offsets()

    def checkpoint_log_start_offsets(self) -> bool:
        """Write the log start offsets that lie past their log's first segment (Kafka writes
        the same subset) if they differ from the file. Returns whether it wrote."""
        entries = {tp: log.log_start_offset for tp, log in self.logs.items()
                   if log.log_start_offset > log.segments[0].base_offset}
        if entries == self._lso_written:
            return False
        write_offset_checkpoint(self._lso_path, entries)
        self._lso_written = entries
        return True

    def _segment_bytes(self, topic: str) -> int:
        return self.offsets_segment_bytes if topic == OFFSETS_TOPIC else self.segment_bytes

    def get(self, topic: str, partition: int) -> PartitionLog | None:
        """The partition's log; a declared partition's log is created now."""
        log = self.logs.get((topic, partition))
        if log is None and self._declared:
            spec = self._declared.pop((topic, partition), None)
            if spec is not None:
                log = self.create(topic, partition, *spec)
        return log

    def existing(self, topic: str, partition: int) -> PartitionLog | None:
        """The partition's log if it has one on disk (a declared partition has none yet)."""
        return self.logs.get((topic, partition))

    def declare(self, topic: str, partition: int, segment_bytes: int | None = None,
                topic_id: uuid.UUID | None = None, roll_ms: tuple[int, int] | None = None) -> None:
        """A partition whose directory is created by the first get() (see create())."""
        if (topic, partition) not in self.logs:
            self._declared[(topic, partition)] = (segment_bytes, topic_id, roll_ms)

    def create(self, topic: str, partition: int, segment_bytes: int | None = None,
               topic_id: uuid.UUID | None = None, roll_ms: tuple[int, int] | None = None) -> PartitionLog:
        """The log of topic-partition, created (with partition.metadata) if missing; roll_ms is
        (segment.ms, segment.jitter.ms)."""
        log = self.logs.get((topic, partition))
        if log is not None:
            return log
        path = os.path.join(self.log_dir, f"{topic}-{partition}")
        root = os.path.abspath(self.log_dir)
        self.failures.check(root)
        try:
            log = _partition_log(path, segment_bytes=segment_bytes or self._segment_bytes(topic), failures=self.failures,
                                 clock_ms=self.clock_ms)
            if roll_ms is not None:
                log.segment_ms, log.segment_jitter_ms = roll_ms
            if topic_id is not None:
                write_partition_metadata(path, topic_id)
        except OSError as e:
            if e.errno not in _DEVICE_ERRORS:  # e.g. a name the filesystem refuses: this topic's problem
                raise
            raise self.failures.fail(root, f"Error while creating log for {topic}-{partition} in dir {root}", e) from e
        if topic_id is not None:
            self.topic_ids.setdefault(topic, topic_id)
        self.logs[(topic, partition)] = log
        return log

    def remove(self, topic: str, partition: int) -> PartitionLog | None:
        """Forget and close the log of a deleted partition (its directory is the caller's to
        rename and remove). Parked readers holding it see `deleted`."""
        self._declared.pop((topic, partition), None)  # never to be created now
        log = self.logs.pop((topic, partition), None)
        if log is not None:
            log.deleted = True
            log.close()
        if not any(t == topic for t, _ in self.logs):
            self.topic_ids.pop(topic, None)
        return log

    def partitions(self, topic: str) -> list[int]:
        return sorted(p for t, p in self.logs if t == topic)

    def __iter__(self) -> Iterator[tuple[tuple[str, int], PartitionLog]]:
        return iter(self.logs.items())

    def flush(self) -> None:
        for log in self.logs.values():
            log.flush()

    def discard(self) -> list[str]:
        """Close every log's files without flushing them, for logs about to be deleted (a
        reset); returns their directories."""
        paths = []
        for log in self.logs.values():
            for seg in log.segments:
                seg.close()
            paths.append(log.path)
        self.logs.clear()
        self._declared.clear()
        return paths

    def close(self) -> None:
        """Flush and close every log (every one is attempted; the first error is raised)."""
        first: BaseException | None = None
        for log in self.logs.values():
            try:
                log.close()
            except OSError as e:
                first = first or e
        self.logs.clear()
        self._declared.clear()
        if first is not None:
            raise first


def _partition_log(path: str, **kw: object) -> PartitionLog:
    """kcoord.storage.log (and aiokafka's record batches with it) loads with the first partition log:
    a server on an empty directory declares its internal partitions and opens none."""
    from kcoord.storage.log import PartitionLog

    return PartitionLog(path, **kw)  # type: ignore[arg-type]
