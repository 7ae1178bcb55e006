"""Reset: back to a new server without a restart. Every topic, group, committed offset and
producer id goes, every client connection is closed, and the server carries on as if it had
just started on an empty log directory (the cluster id stays: it is the directory's).

The partition directories are renamed aside the way Kafka deletes a topic
(`<topic>-<n>.<id>-delete`, which start-up skips) and removed by a thread, so a reset costs
renames, not the deletion of every file. Nothing from before can leak into the new state: the
old coordinator, writer and data plane are dropped whole (their timers and parked requests
cancelled, connections closed) and new ones built from the emptied directory.
"""
from __future__ import annotations

import gc
import logging
import os
import shutil
import threading
import time
import uuid
from pathlib import Path
from typing import TYPE_CHECKING

from server.metrics import Metrics
from server.producers import PRODUCER_ID_FILE
from server.topics import REGISTRY_FILE
from storage.log_manager import parse_partition_dir

if TYPE_CHECKING:
    from server.broker import Broker

log = logging.getLogger("kcoord.control")

DELETED_SUFFIX = "-delete"
_CLEANER_CHECKPOINT = "cleaner-offset-checkpoint"  # the compaction sidecar's (sidecar/checkpoint.py)


def reset_broker(broker: Broker) -> dict[str, int]:
    """Empty the broker in place; returns what was dropped. Runs on the event loop, between
    requests, so no request sees half of it."""
    started = time.perf_counter()
    dropped = {"topics": sum(1 for t in broker.topics.topics.values() if not t.internal),
               "groups": len(broker.coordinator.groups()), "connections": len(broker.connections)}
    for conn in list(broker.connections):
        conn.close()
    broker.stop_background()
    broker.runtime.stop_retention()
    for purgatory in (broker.coordinator._heartbeats, broker.coordinator._rebalances,
                      broker.data_plane.fetch_purgatory):
        for key in list(purgatory._watchers):
            purgatory.cancel(key)
    # writes staged this loop turn go to the old logs now (their answers go nowhere: the
    # connections are closed); fsync rounds in flight use their own file descriptors
    broker.runtime.writer.flush()
    assert broker.logs is not None
    trash = [_set_aside(Path(p)) for p in broker.logs.discard()]
    trash += [_set_aside(broker.log_dir / name) for name in os.listdir(broker.log_dir)
              if parse_partition_dir(name) is not None and (broker.log_dir / name).is_dir()]
    for name in (REGISTRY_FILE, PRODUCER_ID_FILE, _CLEANER_CHECKPOINT):
        try:
            os.unlink(broker.log_dir / name)
        except FileNotFoundError:
            pass
    broker.metrics = Metrics()
    broker.open_state()
    # a server that is reset many times must not keep every earlier state frozen out of the
    # garbage collector (start-up freezes what it loaded)
    gc.unfreeze()
    broker.start_background(freeze=False)
    _delete_later(sorted({p for p in trash if p is not None} | set(_leftovers(broker.log_dir))))
    log.info("Reset: dropped %d topics, %d groups, %d connections in %.1f ms", dropped["topics"],
             dropped["groups"], dropped["connections"], (time.perf_counter() - started) * 1000)
    return dropped


def _set_aside(path: Path) -> Path | None:
    """Rename a partition directory the way Kafka marks a deleted one."""
    if not path.exists():
        return None
    target = path.with_name(f"{path.name}.{uuid.uuid4().hex}{DELETED_SUFFIX}")
    os.rename(path, target)
    return target


def _leftovers(log_dir: Path) -> list[Path]:
    """Directories set aside by an earlier reset whose deletion did not finish."""
    return [log_dir / n for n in os.listdir(log_dir) if n.endswith(DELETED_SUFFIX)]


def _delete_later(paths: list[Path]) -> None:
    if not paths:
        return

    def run() -> None:
        for p in paths:
            shutil.rmtree(p, ignore_errors=True)

    threading.Thread(target=run, name="kcoord-reset-delete", daemon=True).start()
