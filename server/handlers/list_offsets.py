"""ListOffsets v0-v9.

v1+: per partition one (timestamp, offset[, leader_epoch v4+]):
  -2 EARLIEST: log start offset; -1 LATEST: the last fetchable offset, the log end offset (= high
  watermark: one replica) or, with isolation_level 1 (v2+, read_committed), the last stable
  offset; any other answer at or past the last fetchable offset is -1/-1; -3 MAX_TIMESTAMP (v7+):
  the largest timestamp and the first offset carrying it; -4 EARLIEST_LOCAL (v8+): log start
  offset (no tiered storage); -5 LATEST_TIERED (v9+): -1 (nothing is tiered); a timestamp >= 0:
  the first offset whose record timestamp is >= it (via the time index), or -1/-1 if none.
  A negative timestamp the version does not know: UNSUPPORTED_VERSION. A partition named twice:
  INVALID_REQUEST. current_leader_epoch (v4+) other than -1/0: UNKNOWN_/FENCED_LEADER_EPOCH.
A replicated partition (plog.replica, server/replication/): answered by its leader only
(NOT_LEADER_OR_FOLLOWER elsewhere), current_leader_epoch checked against its epoch, LATEST is
the high watermark (what a consumer may fetch) and each answer carries the epoch of its offset
from the leader-epoch cache.
v0: the old format (Kafka's legacyFetchOffsetsBefore): up to max_num_offsets segment base
  offsets (plus the log end offset), newest first, of segments last modified at or before the
  timestamp; -1 latest, -2 earliest, other negative timestamps UNSUPPORTED_VERSION.
"""
from __future__ import annotations

import logging
import os
from collections import Counter
from typing import TYPE_CHECKING, Any

from kafka.protocol.consumer import ListOffsetsResponse

from kcoord.protocol.errors import ErrorCode
from kcoord.server.context import RequestContext
from kcoord.server.data_plane import LEADER_EPOCH, leader_epoch_error, log_of
from kcoord.storage.log import PartitionLog

if TYPE_CHECKING:
    from kcoord.server.clock import Clock
    from kcoord.server.data_plane import DataPlane
    from kcoord.server.topics import TopicRegistry
    from kcoord.storage.log_manager import LogManager

log = logging.getLogger("kcoord.list_offsets")

TopicOut = ListOffsetsResponse.ListOffsetsTopicResponse
PartitionOut = TopicOut.ListOffsetsPartitionResponse

LATEST = -1
EARLIEST = -2
MAX_TIMESTAMP = -3
EARLIEST_LOCAL = -4
LATEST_TIERED = -5
READ_COMMITTED = 1
# special timestamp -> first ListOffsets version that knows it (Kafka's timestampMinSupportedVersion)
_MIN_VERSION = {EARLIEST: 0, LATEST: 0, MAX_TIMESTAMP: 7, EARLIEST_LOCAL: 8, LATEST_TIERED: 9}


def _lookup(plog: PartitionLog, ts: int, last_fetchable: int) -> tuple[int, int, int]:
    """(timestamp, offset, leader epoch) for one v1+ query."""
    if ts in (EARLIEST, EARLIEST_LOCAL):
        return -1, plog.log_start_offset, LEADER_EPOCH
    if ts == LATEST:
        return -1, last_fetchable, LEADER_EPOCH
    found_ts, offset, epoch = _find(plog, ts)
    if offset >= last_fetchable:  # Kafka: only what the isolation level may fetch
        return -1, -1, -1
    return found_ts, offset, epoch


def _find(plog: PartitionLog, ts: int) -> tuple[int, int, int]:
    if ts == LATEST_TIERED:
        return -1, -1, -1
    if ts == MAX_TIMESTAMP:
        found_ts, offset = plog.max_timestamp()
        return (found_ts, offset, LEADER_EPOCH) if offset >= 0 else (-1, -1, -1)
    found = plog.offset_for_timestamp(ts)
    if found is None:
        return -1, -1, -1
    return found[1], found[0], LEADER_EPOCH


def legacy_offsets_before(plog: PartitionLog, timestamp: int, max_num: int, now_ms: int) -> list[int]:
    """Kafka's legacyFetchOffsetsBefore over our segments (their files' mtimes)."""
    pairs = []
    for seg in plog.segments:
        try:
            mtime = int(os.stat(seg.log_path).st_mtime * 1000)
        except OSError:
            mtime = 0
        pairs.append((max(seg.base_offset, plog.log_start_offset), mtime))
    if plog.active.size > 0:
        pairs.append((plog.log_end_offset, now_ms))
    if timestamp == LATEST:
        start = len(pairs) - 1
    elif timestamp == EARLIEST:
        start = 0
    else:
        start = len(pairs) - 1
        while start >= 0 and pairs[start][1] > timestamp:
            start -= 1
    n = max(0, min(max_num, start + 1))
    return sorted((pairs[start - j][0] for j in range(n)), reverse=True)


class ListOffsetsApi:
    """ListOffsets' handler, built by the composition root (server/node.py) with the topic
    registry, the logs, the data plane (last stable offsets) and the clock."""

    def __init__(self, topics: TopicRegistry, logs: LogManager, data_plane: DataPlane, clock: Clock) -> None:
        self.topics = topics
        self.logs = logs
        self.data_plane = data_plane
        self.clock = clock

    def handle_list_offsets(self, ctx: RequestContext, req: Any, version: int) -> Any:
        counts = Counter((t.name, p.partition_index) for t in req.topics for p in t.partitions)
        topics_out = []
        for t in req.topics:
            topic = self.topics.get(t.name)
            parts_out = []
            for p in t.partitions:
                idx = p.partition_index
                plog = log_of(self.logs, topic, idx) if topic is not None else None

                def error(code: ErrorCode, idx: int = idx) -> Any:
                    if version == 0:
                        return PartitionOut(partition_index=idx, error_code=code, old_style_offsets=[])
                    return PartitionOut(partition_index=idx, error_code=code, timestamp=-1, offset=-1, leader_epoch=-1)

                ts = p.timestamp
                if version == 0:
                    if ts < EARLIEST:
                        parts_out.append(error(ErrorCode.UNSUPPORTED_VERSION))
                    elif plog is None:
                        parts_out.append(error(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))
                    else:
                        offsets = legacy_offsets_before(plog, ts, p.max_num_offsets, self.clock.now_ms())
                        parts_out.append(PartitionOut(partition_index=idx, error_code=ErrorCode.NONE,
                                                      old_style_offsets=offsets))
                    continue
                if counts[(t.name, idx)] > 1:
                    parts_out.append(error(ErrorCode.INVALID_REQUEST))
                    continue
                if ts < 0 and (ts not in _MIN_VERSION or version < _MIN_VERSION[ts]):
                    parts_out.append(error(ErrorCode.UNSUPPORTED_VERSION))
                    continue
                if plog is None:
                    parts_out.append(error(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))
                    continue
                replica = plog.replica
                if version >= 4:
                    bad = leader_epoch_error(p.current_leader_epoch,
                                             LEADER_EPOCH if replica is None else replica.leader_epoch)
                    if bad is not None:
                        parts_out.append(error(bad))
                        continue
                if replica is not None and (not replica.is_leader or replica.stopped):
                    parts_out.append(error(ErrorCode.NOT_LEADER_OR_FOLLOWER))
                    continue
                try:
                    last = plog.log_end_offset
                    if version >= 2 and req.isolation_level == READ_COMMITTED:
                        last = self.data_plane.txns.lso(t.name, idx, plog)
                    if replica is not None:
                        last = min(last, replica.hw)
                    found_ts, offset, epoch = _lookup(plog, ts, last)
                    if replica is not None and offset >= 0:
                        epoch = replica.cache.latest_epoch if ts == LATEST else replica.cache.epoch_for_offset(offset)
                except OSError:
                    parts_out.append(error(ErrorCode.KAFKA_STORAGE_ERROR))
                    continue
                except Exception:  # noqa: BLE001 - e.g. a batch whose codec this install lacks
                    log.exception("ListOffsets for %s-%d at timestamp %d failed", t.name, idx, ts)
                    parts_out.append(error(ErrorCode.UNKNOWN_SERVER_ERROR))
                    continue
                parts_out.append(PartitionOut(partition_index=idx, error_code=ErrorCode.NONE, timestamp=found_ts,
                                              offset=offset, leader_epoch=epoch))
            topics_out.append(TopicOut(name=t.name, partitions=parts_out))
        return ListOffsetsResponse(version=version, throttle_time_ms=0, topics=topics_out)
