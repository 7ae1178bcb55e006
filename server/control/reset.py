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

import asyncio
import gc
import logging
import os
import time
import uuid
from typing import TYPE_CHECKING

from kcoord.server.clock import SystemClock
from kcoord.server.metrics import Metrics
from kcoord.server.producers import PRODUCER_ID_FILE
from kcoord.server.quotas.store import QUOTAS_FILE
from kcoord.server.topics import DYNAMIC_FILE, REGISTRY_FILE
from kcoord.storage.log_deletion import delete_dir_name
from kcoord.storage.log_manager import parse_partition_dir

if TYPE_CHECKING:
    from kcoord.server.broker import Broker

log = logging.getLogger("kcoord.control")

_CLEANER_CHECKPOINT = "cleaner-offset-checkpoint"  # the compaction sidecar's (sidecar/checkpoint.py)


def reset_broker(broker: Broker) -> dict[str, int]:
    """Empty the broker in place; returns what was dropped. Runs on the event loop, between
    requests, so no request sees half of it."""
    started = time.perf_counter()
    # the parts a new server builds at their first use may not exist (server/broker.py)
    parts = broker.parts
    coordinator, runtime, txn = parts.coordinator.built(), parts.runtime.built(), parts.txn.built()
    dropped = {"topics": sum(1 for t in broker.topics.topics.values() if not t.internal),
               "groups": sum(1 for g in coordinator.groups() if not g.is_dead()) if coordinator is not None else 0,
               "connections": len(broker.connections)}
    for conn in list(broker.connections):
        conn.close()
    broker.stop_background()
    broker.deleter.stop()
    if runtime is not None:
        runtime.stop_tasks()
    # every timer of the old state (sessions, joins, long polls, commit timeouts) becomes a no-op
    broker.clock.close()
    broker.clock = SystemClock()
    for name in set(broker.configs.cluster) | set(broker.configs.node):
        broker.config.apply(name, None)  # dynamic broker configs (AlterConfigs) go with the state
    # the transaction coordinator's marker writes and periodic tasks stop before they can
    # touch the new state; the rest of its stop (waiting for its writes) runs on its own
    if txn is not None:
        for task in list(txn.markers.in_flight):
            task.cancel()
        asyncio.ensure_future(txn.stop())
    # writes staged this loop turn go to the old logs now (their answers go nowhere: the
    # connections are closed); fsync rounds in flight use their own file descriptors
    if runtime is not None:
        runtime.writer.flush()
    if txn is not None:
        txn.runtime.writer.flush()
    assert broker.logs is not None
    broker.logs.discard()
    log_dir = str(broker.log_dir)
    unique = uuid.uuid4().hex  # one id for all: each name has its own topic and partition
    with os.scandir(log_dir) as it:
        entries = list(it)  # before renaming anything in the directory being listed
    for entry in entries:
        tp = parse_partition_dir(entry.name)
        if tp is not None and entry.is_dir():  # set aside the way DeleteTopics does (storage/log_deletion.py)
            os.rename(entry.path, os.path.join(log_dir, delete_dir_name(*tp, unique)))
    for name in (REGISTRY_FILE, PRODUCER_ID_FILE, DYNAMIC_FILE, _CLEANER_CHECKPOINT, QUOTAS_FILE):
        try:
            os.unlink(broker.log_dir / name)
        except FileNotFoundError:
            pass
    broker.quotas.reset()  # client quotas go with the state (their file is removed above)
    broker.metrics = Metrics()
    broker.open_state()
    # a server that is reset many times must not keep every earlier state frozen out of the
    # garbage collector (start-up freezes what it loaded)
    gc.unfreeze()
    broker.start_background(freeze=False)  # its load finishes, then removes the -delete directories
    log.info("Reset: dropped %d topics, %d groups, %d connections in %.1f ms", dropped["topics"],
             dropped["groups"], dropped["connections"], (time.perf_counter() - started) * 1000)
    return dropped
