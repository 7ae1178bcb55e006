"""Deleting partition directories crash-safely, Kafka's way: a partition directory is first
renamed to `<topic>-<partition>.<uniqueid>-delete` (the rename is atomic and, once the log
directory is fsynced, durable), and only then are its files removed. A directory with that
suffix is never opened as a log (kcoord.storage.log_manager.parse_partition_dir refuses it), so a
crash at any point leaves either the intact partition or a `-delete` directory that the next
start-up removes.
"""
from __future__ import annotations

import logging
import os
import re
import shutil
import uuid

from kcoord.storage.files import fsync_dir

logger = logging.getLogger(__name__)

__all__ = ["DELETE_DIR_SUFFIX", "delete_dir_name", "is_delete_dir", "remove_delete_dirs", "rename_for_delete"]

DELETE_DIR_SUFFIX = "-delete"
_DELETE_DIR = re.compile(r"^.+-\d+\.[0-9a-f]{32}-delete$")
_MAX_NAME = 255  # a file name's limit on common file systems


def delete_dir_name(topic: str, partition: int, unique: str | None = None) -> str:
    """Kafka's LocalLog.logDeleteDirName: the topic part is shortened if the name would
    exceed 255 characters. `unique` (32 hex digits) stands in for a new random id when many
    partitions are set aside at once (their names differ by topic and partition already)."""
    suffix = f".{unique or uuid.uuid4().hex}{DELETE_DIR_SUFFIX}"
    keep = min(len(topic), _MAX_NAME - (len(suffix) + 1 + len(str(partition))))
    return f"{topic[:keep]}-{partition}{suffix}"


def is_delete_dir(name: str) -> bool:
    return bool(_DELETE_DIR.match(name))


def rename_for_delete(log_dir: str, topic: str, partition: int) -> str | None:
    """Rename `<topic>-<partition>` to its `-delete` name; returns the new name, or None if
    the directory is not there (already renamed). The caller fsyncs log_dir once after all
    renames (fsync_dir)."""
    src = os.path.join(log_dir, f"{topic}-{partition}")
    if not os.path.isdir(src):
        return None
    name = delete_dir_name(topic, partition)
    os.rename(src, os.path.join(log_dir, name))
    return name


def remove_delete_dirs(log_dir: str, names: list[str] | None = None) -> list[str]:
    """Remove the given `-delete` directories (every one in log_dir when names is None), then
    fsync log_dir. Returns the names removed."""
    if names is None:
        names = sorted(n for n in os.listdir(log_dir) if is_delete_dir(n))
    removed = []
    for name in names:
        path = os.path.join(log_dir, name)
        if not os.path.isdir(path):
            continue
        shutil.rmtree(path)
        removed.append(name)
    if removed:
        fsync_dir(log_dir)
        logger.info("%s: deleted %d partition director%s: %s", log_dir, len(removed),
                    "y" if len(removed) == 1 else "ies", ", ".join(removed[:5]))
    return removed
