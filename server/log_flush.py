"""When a data partition is fsynced: Kafka's flush.messages / flush.ms (and their broker
defaults log.flush.interval.messages / log.flush.interval.ms, checked every
log.flush.scheduler.interval.ms).

Kafka's defaults never force a flush: an acknowledged record of a data topic sits in the page
cache (which survives a process kill) and reaches the disk when the kernel writes it back, at a
segment roll or at a clean shutdown. flush.messages=N flushes once N or more records are
unflushed, before the produce is answered (flush.messages=1: before every acknowledgement);
flush.ms=T flushes a partition whose unflushed records have waited T ms, checked by a task
every log.flush.scheduler.interval.ms. A segment roll starts a flush of the segments before the
new one, not waited for (as Kafka's roll schedules one).

kcoord's own state (__consumer_offsets, __transaction_state, share state) is not governed by
this: its writes are fsynced before they are answered (server/coordinator/writer.py), and
transaction markers written to data partitions are too.
"""
from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from kcoord.server.config_catalogue import LONG_MAX
from kcoord.storage.flusher import group_commit

if TYPE_CHECKING:
    from kcoord.server.config_layers import BrokerConfigs
    from kcoord.server.topics import TopicRegistry
    from kcoord.storage.log import PartitionLog
    from kcoord.storage.log_manager import LogManager

log = logging.getLogger("kcoord.flush")


def needs_flush(values: dict[str, Any], plog: PartitionLog) -> bool:
    """Kafka's UnifiedLog.append: flush once flush.messages records are unflushed (`values`:
    the topic's effective configs, BrokerConfigs.topic_values)."""
    limit = values["flush.messages"]
    return limit < LONG_MAX and plog.log_end_offset - plog.durable_offset >= limit


def flush_rolled(plog: PartitionLog) -> None:
    """A segment rolled: flush everything before the new active segment, without waiting
    (Kafka's UnifiedLog.roll schedules the same flush)."""
    upto = plog.active.base_offset - 1
    if upto >= plog.durable_offset:
        group_commit(plog).when_durable(upto, lambda exc, p=plog: _report(p, exc))


def _report(plog: PartitionLog, exc: BaseException | None) -> None:
    if exc is not None and not isinstance(exc, OSError):  # an OSError was logged by the failure channel
        log.error("Scheduled flush of %s failed: %r", plog.name, exc)


class _LogState(Protocol):
    logs: LogManager | None
    topics: TopicRegistry
    configs: BrokerConfigs


def flush_dirty_logs(state: _LogState, now_ms: int) -> int:
    """flush_dirty over the logs, topics and configs `state` holds (a node's Parts)."""
    return 0 if state.logs is None else flush_dirty(state.logs, state.topics, state.configs, now_ms)


def flush_dirty(logs: LogManager, topics: TopicRegistry, configs: BrokerConfigs, now_ms: int) -> int:
    """LogManager.flushDirtyLogs: start a flush of every data partition whose unflushed
    records are flush.ms old or older (measured from its last flush). Returns how many."""
    started = 0
    for (name, _), plog in list(logs):
        if plog.deleted or plog.durable_offset >= plog.log_end_offset:
            continue
        topic = topics.get(name)
        if topic is None or topic.internal:  # kcoord's own state is fsynced before every answer
            continue
        flush_ms = configs.topic_values(topic)["flush.ms"]
        if flush_ms >= LONG_MAX or now_ms - plog.last_flush_ms < flush_ms:
            continue
        try:
            group_commit(plog).when_durable(plog.log_end_offset - 1, lambda exc, p=plog: _report(p, exc))
        except ValueError:  # the log moved meanwhile; the next pass sees it again
            continue
        started += 1
    return started


async def log_flush_loop(logs: LogManager, topics: TopicRegistry, configs: BrokerConfigs,
                         now_ms: Callable[[], int]) -> None:
    """Check every log.flush.scheduler.interval.ms (never when that is Long.MAX, Kafka's
    default); the interval is read again after each pass, so a dynamic change applies."""
    while True:
        interval = configs.value("log.flush.scheduler.interval.ms")
        if interval is None or interval >= LONG_MAX:
            await asyncio.sleep(60.0)  # nothing scheduled; look again for a dynamic change
            continue
        await asyncio.sleep(max(interval, 1) / 1000.0)
        try:
            flush_dirty(logs, topics, configs, now_ms())
        except Exception:  # noqa: BLE001 - retried at the next interval
            log.exception("Scheduled log flush failed")
