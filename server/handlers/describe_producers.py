"""DescribeProducers v0 (KIP-664, `kafka-transactions.sh describe-producers`): the active
producers of each partition as its leader knows them (Kafka's activeProducerState): producer
id and epoch, last sequence, last timestamp, the coordinator epoch of its last marker (-1 when
it wrote none) and the first offset of its open transaction (-1 when none is open).
UNKNOWN_TOPIC_OR_PARTITION for partitions that do not exist.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kafka.protocol.admin.transactions import DescribeProducersResponse

from kcoord.protocol.errors import ErrorCode
from kcoord.server.context import RequestContext
from kcoord.server.data_plane import log_of

if TYPE_CHECKING:
    from kcoord.server.clock import Clock
    from kcoord.server.data_plane import DataPlane
    from kcoord.server.lazy import Lazy
    from kcoord.server.topics import TopicRegistry
    from kcoord.storage.log_manager import LogManager

_Topic = DescribeProducersResponse.TopicResponse
_Partition = _Topic.PartitionResponse
_Producer = _Partition.ProducerState


class DescribeProducersApi:
    """DescribeProducers' handler, built by the composition root (server/node.py) with the parts it uses."""

    def __init__(self, data_plane: Lazy[DataPlane], logs: LogManager, topics: TopicRegistry, clock: Clock) -> None:
        self.data_plane = data_plane
        self.logs = logs
        self.topics = topics
        self.clock = clock

    def handle_describe_producers(self, ctx: RequestContext, req: Any, version: int) -> Any:
        dp = self.data_plane.get()
        now = self.clock.now_ms()
        topics = []
        for t in req.topics:
            topic = self.topics.get(t.name)
            parts = []
            for p in t.partition_indexes:
                plog = log_of(self.logs, topic, p) if topic is not None else None
                if plog is None:
                    parts.append(_Partition(partition_index=p, error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                            error_message=None, active_producers=[]))
                    continue
                producers = dp.producers.get(t.name, p, plog, now)
                txns = dp.txns.get(t.name, p, plog)
                parts.append(_Partition(partition_index=p, error_code=ErrorCode.NONE, error_message=None, active_producers=[
                    _Producer(producer_id=pid, producer_epoch=e.epoch, last_sequence=e.last_seq,
                              last_timestamp=e.last_timestamp, coordinator_epoch=e.coordinator_epoch,
                              current_txn_start_offset=txns.ongoing.get(pid, -1))
                    for pid, e in sorted(producers.entries.items())]))
            topics.append(_Topic(name=t.name, partitions=parts))
        return DescribeProducersResponse(version=version, throttle_time_ms=0, topics=topics)
