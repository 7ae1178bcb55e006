"""TxnOffsetCommit on the group side (Kafka's OffsetMetadataManager.commitTransactionalOffset):
which group accepts the commit and the offset records to write, transactionally, for it.

Validation is the group's validate_offset_commit with transactional=True (Kafka's
ClassicGroup.validateOffsetCommit with isTransactional): a Dead group is COORDINATOR_NOT_AVAILABLE;
generation -1 on an Empty group (or a group that does not exist, which is created to hold the
offsets) is accepted; a request naming a member (v3+) must name a current member of the current
generation (UNKNOWN_MEMBER_ID / FENCED_INSTANCE_ID / ILLEGAL_GENERATION); unlike OffsetCommit a
group without member fields in the request is accepted in any state, and CompletingRebalance
is not refused. Partitions whose metadata is
over offset.metadata.max.bytes answer OFFSET_METADATA_TOO_LARGE and write nothing.
"""
from __future__ import annotations

from typing import Any

from kcoord.protocol.coordinator_codec import offset_key
from kcoord.protocol.coordinator_records import CoordinatorRecord, OffsetValue
from kcoord.protocol.errors import ErrorCode
from kcoord.server.group.group_manager import GroupMetadataManager

# (topic, partition, error)
Row = tuple[str, int, ErrorCode]


def _java_length(s: str) -> int:
    return len(s) if s.isascii() else len(s.encode("utf-16-le", "surrogatepass")) // 2


def validate_txn_offset_commit(groups: GroupMetadataManager, req: Any, version: int) -> ErrorCode | None:
    """The group-level error of a TxnOffsetCommit, None if it may be written. Creates the
    (simple, Empty) group that will hold the offsets when there is none, as Kafka does."""
    group_id = req.group_id
    if not group_id:
        return ErrorCode.INVALID_GROUP_ID
    err = groups.validate(group_id, "offset_commit")
    if err is not None:
        return err
    generation = req.generation_id if version >= 3 else -1
    member_id = (req.member_id or "") if version >= 3 else ""
    instance_id = req.group_instance_id if version >= 3 else None
    group = groups.group(group_id)
    if group is None:
        if generation >= 0:
            return ErrorCode.ILLEGAL_GENERATION
        groups.new_classic_group(group_id)  # a simple group, to hold the offsets
        return None
    return group.validate_offset_commit(member_id, instance_id, generation, True, version)


def txn_offset_records(req: Any, version: int, now_ms: int, max_metadata: int) -> tuple[list[Row], list[CoordinatorRecord]]:
    """Each requested partition's answer and the records of those that are written."""
    rows: list[Row] = []
    records: list[CoordinatorRecord] = []
    for t in req.topics:
        for p in t.partitions:
            meta = p.committed_metadata or ""
            if _java_length(meta) > max_metadata:
                rows.append((t.name, p.partition_index, ErrorCode.OFFSET_METADATA_TOO_LARGE))
                continue
            epoch = p.committed_leader_epoch if version >= 2 else -1
            value = OffsetValue(p.committed_offset, meta, now_ms, epoch, None)
            records.append(CoordinatorRecord(offset_key(req.group_id, t.name, p.partition_index), value))
            rows.append((t.name, p.partition_index, ErrorCode.NONE))
    return rows, records
