"""OffsetForLeaderEpoch v2-v4 (API 23): where a leader epoch ends in this replica's log.

Per partition: (epoch, end offset) from the partition's leader-epoch cache
(storage/leader_epoch.py): the largest epoch at or below the one asked for, and the offset
where the next epoch starts (the log end offset for the latest epoch); -1/-1 for an epoch
above every one known. A follower asks with its replica id (v3+) and is answered by the
leader only; a consumer (replica id -1, KIP-320 validation) likewise. Errors:
UNKNOWN_TOPIC_OR_PARTITION, NOT_LEADER_OR_FOLLOWER (not the leader, or the partition was
stopped), FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH for a current_leader_epoch older / newer
than ours. A single node (no replica manager) leads every partition at epoch 0, its batches
all stamped 0.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kafka.protocol.consumer import OffsetForLeaderEpochResponse

from kcoord.protocol.errors import ErrorCode
from kcoord.server.context import RequestContext
from kcoord.server.data_plane import LEADER_EPOCH, leader_epoch_error, log_of

if TYPE_CHECKING:
    from kcoord.server.topics import TopicRegistry
    from kcoord.storage.log_manager import LogManager

TopicOut = OffsetForLeaderEpochResponse.OffsetForLeaderTopicResult
PartitionOut = TopicOut.EpochEndOffset
UNDEFINED = -1


def _one(topics: TopicRegistry, logs: LogManager, topic_name: str, p: Any) -> PartitionOut:
    def out(code: ErrorCode, epoch: int = UNDEFINED, end: int = UNDEFINED) -> PartitionOut:
        return PartitionOut(error_code=code, partition=p.partition, leader_epoch=epoch, end_offset=end)

    topic = topics.get(topic_name)
    plog = log_of(logs, topic, p.partition) if topic is not None else None
    if plog is None:
        return out(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    replica = plog.replica
    if replica is None:  # a single node
        bad = leader_epoch_error(p.current_leader_epoch)
        if bad is not None:
            return out(bad)
        if p.leader_epoch == LEADER_EPOCH:
            return out(ErrorCode.NONE, LEADER_EPOCH, plog.log_end_offset)
        return out(ErrorCode.NONE)
    bad = leader_epoch_error(p.current_leader_epoch, replica.leader_epoch)
    if bad is not None:
        return out(bad)
    if not replica.is_leader or replica.stopped:
        return out(ErrorCode.NOT_LEADER_OR_FOLLOWER)
    epoch, end = replica.cache.end_offset_for(p.leader_epoch, plog.log_end_offset)
    return out(ErrorCode.NONE, epoch, end)


class OffsetsForLeaderEpochApi:
    """OffsetForLeaderEpoch's handler, built by the composition root (server/node.py) with the
    topic registry and the logs (each replicated log carries its replica)."""

    def __init__(self, topics: TopicRegistry, logs: LogManager) -> None:
        self.topics = topics
        self.logs = logs

    def handle_offsets_for_leader_epoch(self, ctx: RequestContext, req: Any, version: int) -> Any:
        topics = [TopicOut(topic=t.topic, partitions=[_one(self.topics, self.logs, t.topic, p) for p in t.partitions])
                  for t in req.topics]
        return OffsetForLeaderEpochResponse(version=version, throttle_time_ms=0, topics=topics)
