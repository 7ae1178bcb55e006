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
from kcoord.server.data_plane import data_plane, partition_log

if TYPE_CHECKING:
    from kcoord.server.broker import Broker

_Topic = DescribeProducersResponse.TopicResponse
_Partition = _Topic.PartitionResponse
_Producer = _Partition.ProducerState


def handle_describe_producers(broker: Broker, ctx: RequestContext, req: Any, version: int) -> Any:
    dp = data_plane(broker)
    now = broker.clock.now_ms()
    topics = []
    for t in req.topics:
        topic = broker.topics.get(t.name)
        parts = []
        for p in t.partition_indexes:
            plog = partition_log(broker, topic, p) if topic is not None else None
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
