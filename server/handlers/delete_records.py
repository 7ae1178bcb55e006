"""DeleteRecords v0-v2: move partitions' log start offsets (Kafka's
Partition.deleteRecordsOnLeader and UnifiedLog.maybeIncrementLogStartOffset).

Per partition: an internal topic is refused (INVALID_TOPIC_EXCEPTION), an unknown partition
answers UNKNOWN_TOPIC_OR_PARTITION, a topic whose cleanup.policy lacks `delete` answers
POLICY_VIOLATION; offset -1 means the high watermark; a negative offset or one past the high
watermark is OFFSET_OUT_OF_RANGE; an offset below the current start changes nothing. The
answer's low watermark is the log start offset afterwards.

The new log start offsets are written to `log-start-offset-checkpoint` (atomically, fsynced)
before the answer, then the whole segments below them are deleted: a crash after the
checkpoint deletes them at the next start-up. ListOffsets EARLIEST, Fetch and Produce answers
report the new start; fetches below it get OFFSET_OUT_OF_RANGE, and long polls below it answer
at once. Idempotent producers whose last batch is now below the start, and aborted
transactions that ended below it, are forgotten (as retention does).
"""
from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from kafka.protocol.admin.topics import DeleteRecordsResponse

from kcoord.protocol.errors import ErrorCode
from kcoord.server.context import RequestContext
from kcoord.server.data_plane import cleanup_policy_of, log_of
from kcoord.storage.log import OffsetOutOfRangeError

if TYPE_CHECKING:
    from kcoord.server.config_layers import BrokerConfigs
    from kcoord.server.data_plane import DataPlane
    from kcoord.server.lazy import Lazy
    from kcoord.server.topics import TopicRegistry
    from kcoord.storage.log_manager import LogManager

log = logging.getLogger("kcoord.delete_records")

TopicOut = DeleteRecordsResponse.DeleteRecordsTopicResult
PartitionOut = TopicOut.DeleteRecordsPartitionResult
HIGH_WATERMARK = -1


class DeleteRecordsApi:
    """The handlers of delete_records.py, built by the composition root (server/node.py) with the parts they use."""

    def __init__(self, data_plane: Lazy[DataPlane], logs: LogManager, configs: BrokerConfigs, topics: TopicRegistry) -> None:
        self.data_plane = data_plane
        self.logs = logs
        self.configs = configs
        self.topics = topics

    def handle_delete_records(self, ctx: RequestContext, req: Any, version: int) -> Any:
        dp = self.data_plane.get()
        rows: list[list[list[Any]]] = []  # per topic, per partition: [index, low watermark, error]
        moved = []  # (topic, partition, log, previous start) whose start moved
        for t in req.topics:
            topic = self.topics.get(t.name)
            out = []
            for p in t.partitions:
                row = [p.partition_index, -1, ErrorCode.NONE]
                out.append(row)
                if topic is not None and topic.internal:
                    row[2] = ErrorCode.INVALID_TOPIC_EXCEPTION
                    continue
                plog = log_of(self.logs, topic, p.partition_index) if topic is not None else None
                if plog is None:
                    row[2] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                    continue
                if "delete" not in cleanup_policy_of(self.configs, topic):
                    row[2] = ErrorCode.POLICY_VIOLATION
                    continue
                offset = plog.log_end_offset if p.offset == HIGH_WATERMARK else p.offset
                if offset < 0:
                    row[2] = ErrorCode.OFFSET_OUT_OF_RANGE
                    continue
                before = plog.log_start_offset
                try:
                    row[1] = plog.increment_log_start_offset(offset)
                except OffsetOutOfRangeError as e:
                    log.info("DeleteRecords refused: %s", e)
                    row[2] = ErrorCode.OFFSET_OUT_OF_RANGE
                    continue
                if row[1] > before:
                    moved.append((t.name, p.partition_index, plog, before))
            rows.append(out)
        if moved:
            try:
                self.logs.checkpoint_log_start_offsets()
            except OSError as e:  # not durable: nothing moves
                log.error("Writing log-start-offset-checkpoint failed: %s", e)
                for _, _, plog, before in moved:
                    plog.undo_log_start_offset(before)
                failed = {(name, index) for name, index, _, _ in moved}
                for t, out in zip(req.topics, rows, strict=True):
                    for row in out:
                        if (t.name, row[0]) in failed:
                            row[1], row[2] = -1, ErrorCode.KAFKA_STORAGE_ERROR
                moved = []
            for name, index, plog, _ in moved:
                log.info("Log start offset of %s-%d moved to %d by DeleteRecords", name, index, plog.log_start_offset)
                try:
                    plog.delete_segments_before_start()
                except OSError as e:  # retried by the next start-up (the checkpoint is written)
                    log.error("Deleting segments of %s-%d below its log start failed: %s", name, index, e)
                # the producers' sequences stay (Kafka keeps its producer state map when the
                # log start moves; they expire by producer.id.expiration.ms): a marker written
                # after this finds its producer with its last sequence (server/producers.py)
                txns = dp.txns.loaded(name, index)
                if txns is not None:  # aborted transactions ended below the start: no fetch reaches them
                    txns.evict_before(plog.log_start_offset)
                dp.appended(name, index)  # long polls below the new start answer now
        return DeleteRecordsResponse(version=version, throttle_time_ms=0, topics=[
            TopicOut(name=t.name, partitions=[PartitionOut(partition_index=i, low_watermark=lw, error_code=err)
                                              for i, lw, err in out])
            for t, out in zip(req.topics, rows, strict=True)])
