"""What the storage modules share about files and sizes without loading the record-batch
code (aiokafka's): durable directory entries and Kafka's default segment sizes. A server
starting on an empty directory needs these, and nothing that reads or writes batches."""
from __future__ import annotations

import os

DEFAULT_SEGMENT_BYTES = 1073741824  # segment.bytes
DEFAULT_SEGMENT_MS = 604800000  # segment.ms (log.roll.hours = 168)
OFFSETS_SEGMENT_BYTES = 104857600  # offsets.topic.segment.bytes


def fsync_dir(path: str) -> None:
    """fsync a directory (its entries), or any file, by path."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
