"""Generated __consumer_offsets log directories for the compactor's tests and benchmark.

Written with storage's PartitionLog.append_records and the coordinator codec, i.e. exactly the
bytes a kcoord server writes: many commits of the same keys, GroupMetadata records, tombstones
old (past delete.retention.ms) and recent, several segments.
"""
from __future__ import annotations

import os
import random
from dataclasses import dataclass, field

from kcoord.protocol.coordinator_codec import encode_key, encode_value
from kcoord.protocol.coordinator_records import GroupKey, GroupValue, MemberValue, OffsetKey, OffsetValue
from kcoord.protocol.partitioner import partition_for
from kcoord.storage.log import PartitionLog

__all__ = ["GeneratedPartition", "groups_for_partition", "write_partition"]

DAY_MS = 86_400_000


@dataclass
class GeneratedPartition:
    path: str
    partition: int
    now_ms: int
    old_tombstones: set = field(default_factory=set)  # key bytes whose last record is an old tombstone
    new_tombstones: set = field(default_factory=set)  # key bytes whose last record is a recent tombstone
    records: int = 0
    log_end_offset: int = 0


def groups_for_partition(partition: int, num_partitions: int, n: int, prefix: str = "group") -> list[str]:
    out, i = [], 0
    while len(out) < n:
        name = f"{prefix}-{i}"
        if partition_for(name, num_partitions) == partition:
            out.append(name)
        i += 1
    return out


def _group_value(group: str, generation: int, ts: int) -> GroupValue:
    members = [MemberValue(f"{group}-m{j}-{generation}", None, "client", "/127.0.0.1", 300000, 45000,
                           b"\x00\x01sub", b"\x00\x01assign") for j in range(2)]
    return GroupValue("consumer", generation, "range", members[0].member_id, ts, members)


def write_partition(log_dir: str, partition: int, *, num_partitions: int = 50, groups: int = 3,
                    topics: int = 2, partitions_per_topic: int = 4, rounds: int = 6,
                    segment_bytes: int = 4096, now_ms: int = 1_700_000_000_000,
                    records_per_batch: int = 4, active_tail: bool = True,
                    seed: int = 0) -> GeneratedPartition:
    """One partition directory: `rounds` rounds of commits for every key (3 days ago .. now),
    a group record per round, old tombstones (2 days ago) for one key per group and one whole
    deleted group, recent tombstones (1 hour ago) for another key per group, and (active_tail)
    a last batch of commits left in the active segment."""
    rnd = random.Random(seed)
    path = os.path.join(log_dir, f"__consumer_offsets-{partition}")
    plog = PartitionLog(path, segment_bytes=segment_bytes)
    gen = GeneratedPartition(path, partition, now_ms)
    names = groups_for_partition(partition, num_partitions, groups + 1)
    doomed = names[-1]  # this whole group is deleted (old tombstones)
    names = names[:-1]
    keys = {g: [OffsetKey(g, f"topic-{t}", q) for t in range(topics) for q in range(partitions_per_topic)]
            for g in names + [doomed]}

    def append(recs, ts):
        for i in range(0, len(recs), records_per_batch):
            chunk = recs[i:i + records_per_batch]
            plog.append_records(chunk, ts)
            gen.records += len(chunk)

    start = now_ms - 3 * DAY_MS
    step = (2 * DAY_MS - 3_600_000) // max(1, rounds)
    for r in range(rounds):
        ts = start + r * step
        for g in names + [doomed]:
            append([(encode_key(GroupKey(g)), encode_value(_group_value(g, r + 1, ts)))], ts)
            recs = [(encode_key(k), encode_value(OffsetValue(r * 100 + rnd.randrange(100), "", ts, r)))
                    for k in keys[g]]
            append(recs, ts)
    # Old tombstones: 2 days ago (> delete.retention.ms 1 day).
    old_ts = now_ms - 2 * DAY_MS
    dead = [encode_key(k) for k in keys[doomed]] + [encode_key(GroupKey(doomed))]
    dead += [encode_key(keys[g][0]) for g in names]
    append([(k, None) for k in dead], old_ts)
    gen.old_tombstones.update(dead)
    # More commits (not touching the tombstoned keys), then recent tombstones (1 hour ago).
    recent_ts = now_ms - 3_600_000
    recs = [(encode_key(k), encode_value(OffsetValue(10_000 + i, "meta", recent_ts - 1000, 7)))
            for g in names for i, k in enumerate(keys[g][2:])]
    append(recs, recent_ts - 1000)
    recent = [encode_key(keys[g][1]) for g in names]
    append([(k, None) for k in recent], recent_ts)
    gen.new_tombstones.update(recent)
    if active_tail:
        plog.roll()
        # The active segment: a commit of a key that also lives in the cleaned range.
        tail = [(encode_key(k), encode_value(OffsetValue(99_999, "", now_ms - 1000, 9)))
                for g in names for k in keys[g][2:3]]
        append(tail, now_ms - 1000)
    gen.log_end_offset = plog.log_end_offset
    plog.close()
    return gen


def transactional_batch(records: list[tuple[bytes, bytes | None]], producer_id: int, ts: int) -> bytearray:
    """A transactional data batch (as a TxnOffsetCommit writes it), base offset 0."""
    from aiokafka.record.default_records import DefaultRecordBatchBuilder

    b = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=1, producer_id=producer_id,
                                  producer_epoch=0, base_sequence=0, batch_size=2**31 - 1)
    for i, (k, v) in enumerate(records):
        b.append(i, ts, k, v, [])
    return b.build()


def control_batch(producer_id: int, commit: bool, ts: int) -> bytearray:
    """A transaction marker batch (COMMIT or ABORT) of `producer_id`, base offset 0."""
    import struct

    from aiokafka.record.util import calc_crc32c

    buf = transactional_batch([(struct.pack(">hh", 0, 1 if commit else 0), struct.pack(">hi", 0, 0))],
                              producer_id, ts)
    buf[22] |= 0x20  # attributes (int16 at 21): the control bit
    struct.pack_into(">I", buf, 17, calc_crc32c(bytes(buf[21:])))
    return buf
