"""Kafka's `partition.metadata` file: which topic id a partition directory belongs to.

Owns its text format, `version: 0\\ntopic_id: <id>`, where the id is the topic's 16-byte UUID
in unpadded URL-safe base64 (Kafka's Uuid.toString), and writing it atomically.
"""
from __future__ import annotations

import base64
import os
import re
import uuid

__all__ = [
    "FILE_NAME",
    "PartitionMetadataError",
    "read_partition_metadata",
    "topic_id_from_str",
    "topic_id_to_str",
    "write_partition_metadata",
]

FILE_NAME = "partition.metadata"
VERSION = 0
_WS = re.compile(r"\s+")


class PartitionMetadataError(ValueError):
    """The file is present but malformed, or names the zero topic id."""


def topic_id_to_str(topic_id: uuid.UUID) -> str:
    return base64.urlsafe_b64encode(topic_id.bytes).rstrip(b"=").decode()


def topic_id_from_str(s: str) -> uuid.UUID:
    try:
        raw = base64.urlsafe_b64decode(s + "=" * (-len(s) % 4))
        return uuid.UUID(bytes=raw)
    except ValueError as e:
        raise PartitionMetadataError(f"bad topic id {s!r}: {e}") from None


def read_partition_metadata(dir_path: str) -> uuid.UUID | None:
    """The topic id recorded in dir_path/partition.metadata, or None if there is no file."""
    try:
        with open(os.path.join(dir_path, FILE_NAME), encoding="utf-8") as f:
            lines = f.read().splitlines()
    except FileNotFoundError:
        return None
    if len(lines) < 2:
        raise PartitionMetadataError(f"{dir_path}: truncated {FILE_NAME}")
    version = _WS.split(lines[0].strip())
    if len(version) != 2 or version[0] != "version:" or not version[1].isdigit():
        raise PartitionMetadataError(f"{dir_path}: malformed line {lines[0]!r}")
    # Like Kafka, accept newer versions as long as the topic_id line reads the same.
    topic = _WS.split(lines[1].strip())
    if len(topic) != 2 or topic[0] != "topic_id:":
        raise PartitionMetadataError(f"{dir_path}: malformed line {lines[1]!r}")
    tid = topic_id_from_str(topic[1])
    if tid.int == 0:
        raise PartitionMetadataError(f"{dir_path}: zero topic id")
    return tid


def write_partition_metadata(dir_path: str, topic_id: uuid.UUID) -> None:
    """Write the file durably: temp file, fsync, rename, fsync the directory."""
    path = os.path.join(dir_path, FILE_NAME)
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(f"version: {VERSION}\ntopic_id: {topic_id_to_str(topic_id)}")
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    fd = os.open(dir_path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
