"""Reset: back to a new server without a restart. Every topic, group, committed offset and
producer id goes, every client connection is closed, and the server carries on as if it had
just started on an empty log directory (the cluster id stays: it is the directory's).

The partition directories are renamed aside the way DeleteTopics does
(`<topic>-<n>.<id>-delete`, storage/log_deletion.py, which start-up skips and removes) and
removed once the new state has loaded (TopicDeleter.finish_all), so a reset costs renames, not the deletion of every file. Nothing from
before can leak into the new state: the old coordinator, writer, data plane and clock are
dropped whole (the old clock's timers no longer fire, connections are closed) and new ones
built from the emptied directory; dynamic broker configs revert to the static ones.
"""
from __future__ import annotations

import logging
import os
import uuid
from typing import TYPE_CHECKING

from kcoord.server.producers import PRODUCER_ID_FILE
from kcoord.server.quotas.store import QUOTAS_FILE
from kcoord.server.topics import DYNAMIC_FILE, REGISTRY_FILE
from kcoord.storage.log_deletion import delete_dir_name
from kcoord.storage.log_manager import parse_partition_dir

if TYPE_CHECKING:
    from pathlib import Path

log = logging.getLogger("kcoord.control")

_CLEANER_CHECKPOINT = "cleaner-offset-checkpoint"  # the compaction sidecar's (sidecar/checkpoint.py)


def empty_log_dir(log_dir: Path) -> None:
    """Set aside every partition directory the way DeleteTopics does (storage/log_deletion.py)
    and remove the node's state files: the directory is a new server's."""
    unique = uuid.uuid4().hex  # one id for all: each name has its own topic and partition
    with os.scandir(log_dir) as it:
        entries = list(it)  # before renaming anything in the directory being listed
    for entry in entries:
        tp = parse_partition_dir(entry.name)
        if tp is not None and entry.is_dir():
            os.rename(entry.path, os.path.join(log_dir, delete_dir_name(*tp, unique)))
    for name in (REGISTRY_FILE, PRODUCER_ID_FILE, DYNAMIC_FILE, _CLEANER_CHECKPOINT, QUOTAS_FILE):
        try:
            os.unlink(log_dir / name)
        except FileNotFoundError:
            pass
