"""Record-level validation of a produced batch (Kafka's LogValidator.validateRecord, KIP-467).

Each record is checked in turn: on a compacted topic it needs a key; otherwise, for CreateTime
topics with message.timestamp.before/after.max.ms set, its timestamp must lie in
[now - before, now + after]. Every failing record is reported with its index in the batch
(the produce response's record_errors), and the partition's error says why, in Kafka's words:
INVALID_TIMESTAMP if any record had a bad timestamp, else INVALID_RECORD.
"""
from __future__ import annotations

from dataclasses import dataclass

from aiokafka.record.default_records import DefaultRecordBatch

from kcoord.protocol.errors import ErrorCode

_LONG_MAX = 2**63 - 1


@dataclass(slots=True)
class RecordErrors:
    code: ErrorCode
    message: str
    errors: list[tuple[int, str]]  # (batch index, message)


def validate_records(data: bytes, topic_partition: str, *, compacted: bool, create_time: bool,
                     before_max_ms: int = _LONG_MAX, after_max_ms: int = _LONG_MAX,
                     now: int = 0) -> RecordErrors | None:
    """None when every record of the (one) batch in `data` is acceptable. Raises what the
    record decoder raises for records that do not decode (the caller maps it)."""
    check_ts = create_time and (before_max_ms < _LONG_MAX or after_max_ms < _LONG_MAX)
    if not (compacted or check_ts):
        return None
    errors: list[tuple[int, str]] = []
    bad_timestamp = False
    for i, r in enumerate(DefaultRecordBatch(data)):
        if compacted and r.key is None:
            errors.append((i, f"Compacted topic cannot accept message without key in topic partition "
                              f"{topic_partition}"))
        elif check_ts and (r.timestamp < now - before_max_ms or r.timestamp > now + after_max_ms):
            bad_timestamp = True
            errors.append((i, f"Timestamp {r.timestamp} of message with offset {r.offset} is out of range. "
                              f"The timestamp should be within [{now - before_max_ms}, {now + after_max_ms}]"))
    if not errors:
        return None
    if bad_timestamp:
        return RecordErrors(ErrorCode.INVALID_TIMESTAMP,
                            "One or more records have been rejected due to invalid timestamp", errors)
    shown = ", ".join(f"RecordError(batchIndex={i}, message='{m}')" for i, m in errors[:3])
    return RecordErrors(ErrorCode.INVALID_RECORD,
                        f"One or more records have been rejected due to {len(errors)} record errors in total, "
                        f"and only showing the first three errors at most: [{shown}]", errors)
