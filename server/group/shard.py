"""What the coordinator runtime (server/coordinator/) needs to know of the group coordinator
beyond the GroupCoordinator itself: how its records sit in __consumer_offsets (the partition
of a group, the codec, the codes a failed append answers with) and its periodic task, the
expiry of committed offsets (offsets.retention.check.interval.ms)."""
from __future__ import annotations

import logging
from functools import lru_cache

from kcoord.protocol.coordinator_codec import CodecError, decode_record, encode_key, encode_value
from kcoord.protocol.coordinator_records import CoordinatorRecord
from kcoord.protocol.errors import ErrorCode, KafkaError, coordinator_append_error
from kcoord.protocol.partitioner import partition_for
from kcoord.protocol.topics import OFFSETS_TOPIC
from kcoord.server.coordinator.runtime import CoordinatorRuntime
from kcoord.server.group.coordinator import GroupCoordinator
from kcoord.server.metrics import Metrics

log = logging.getLogger("kcoord.coordinator")


class OffsetsRecords:
    """Group-coordinator records in __consumer_offsets: each in its group's partition."""

    topic = OFFSETS_TOPIC
    timeout_config = "offsets.commit.timeout.ms"
    decode_errors = (CodecError,)

    def __init__(self, num_partitions: int) -> None:
        self._partition_of = lru_cache(maxsize=65536)(lambda g: partition_for(g, num_partitions))

    def partition_of(self, record: CoordinatorRecord) -> int:
        return self._partition_of(record.key.group)

    @staticmethod
    def encode(record: CoordinatorRecord) -> tuple[bytes, bytes | None]:
        v = record.value
        return encode_key(record.key), None if v is None else encode_value(v)

    decode = staticmethod(decode_record)

    @staticmethod
    def append_error(code: ErrorCode) -> ErrorCode:
        return coordinator_append_error(code)


async def expire_offsets(runtime: CoordinatorRuntime[CoordinatorRecord], coordinator: GroupCoordinator,
                         metrics: Metrics) -> None:
    """Write the tombstones of offsets past offsets.retention.minutes (the retention task)."""
    result = coordinator.expire_offsets()
    if result.records:
        try:
            await runtime.append(result.records)
        except Exception as e:  # noqa: BLE001 - retried at the next interval
            log.error("Writing expired-offset tombstones failed: %r", e)
            if result.on_appended is not None:
                result.on_appended(e.code if isinstance(e, KafkaError) else ErrorCode.UNKNOWN_SERVER_ERROR)
        else:
            if result.on_appended is not None:
                result.on_appended(None)
            metrics.records_applied(result.records, expired=True)
