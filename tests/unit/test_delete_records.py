"""DeleteRecords on a real Broker over tmp_path: the log start offset moves (and what follows
it: ListOffsets, Fetch, Produce answers, long polls, timestamp lookups), whole segments below
it are deleted, Kafka's refusals, and log-start-offset-checkpoint across restarts."""
from __future__ import annotations

import os

import pytest
from kafka.protocol.admin import DeleteRecordsRequest
from test_delete_topics import delete, ready
from test_produce_helpers import NOW, batch, call, decode_records, fetch_req, list_offsets_req, produce

from kcoord.protocol.api import ApiKey
from kcoord.protocol.errors import ErrorCode as E
from kcoord.server.broker import Broker
from kcoord.server.config import Config
from kcoord.server.deferred import Deferred
from kcoord.storage.log_manager import LOG_START_OFFSET_CHECKPOINT

T = DeleteRecordsRequest.DeleteRecordsTopic


@pytest.fixture
async def broker(tmp_path):
    b = await ready(tmp_path)
    b.create_topic("t", 2, {"segment.bytes": "300"})  # ~3 one-record batches per segment
    for i in range(10):
        assert (await produce(b, "t", 0, batch([b"value-%02d" % i + b"x" * 40], ts=NOW + i))).error_code == 0
    yield b
    await b.stop()


async def delete_records(broker, parts: dict[tuple[str, int], int], version=2):
    by_topic: dict[str, list] = {}
    for (t, p), o in parts.items():
        by_topic.setdefault(t, []).append(T.DeleteRecordsPartition(partition_index=p, offset=o))
    req = DeleteRecordsRequest(version=version, timeout_ms=5000,
                               topics=[T(name=t, partitions=ps) for t, ps in by_topic.items()])
    resp = await call(broker, ApiKey.DELETE_RECORDS, req, version)
    return {(t.name, p.partition_index): (p.error_code, p.low_watermark) for t in resp.topics for p in t.partitions}


async def earliest(broker, topic="t", p=0):
    resp = await call(broker, ApiKey.LIST_OFFSETS, list_offsets_req([(topic, p, -2)]), 7)
    part = resp.topics[0].partitions[0]
    assert part.error_code == 0
    return part.offset


def checkpoint(broker) -> str:
    path = os.path.join(broker.log_dir, LOG_START_OFFSET_CHECKPOINT)
    return open(path).read() if os.path.exists(path) else ""


async def reopen(broker) -> Broker:
    await broker.stop()
    b = Broker(Config({"log.dirs": str(broker.log_dir), "offsets.topic.num.partitions": 1}))
    b.clock = broker.clock
    await b.start()
    await b.deleter.finish_all()
    return b


@pytest.mark.parametrize("version", [0, 1, 2])
async def test_the_log_start_moves_and_everything_follows_it(broker, version):
    plog = broker.logs.get("t", 0)
    segments_before = len(plog.segments)
    assert segments_before >= 3
    assert await delete_records(broker, {("t", 0): 7}, version) == {("t", 0): (0, 7)}
    assert plog.log_start_offset == 7 and await earliest(broker) == 7
    assert plog.segments[0].base_offset <= 7 < plog.segments[0].next_offset  # the segment holding 7 stays
    assert len(plog.segments) < segments_before  # whole segments below 7 are gone
    assert not os.path.exists(os.path.join(plog.path, f"{0:020d}.log"))
    assert checkpoint(broker) == "0\n1\nt 0 7\n"
    below = await call(broker, ApiKey.FETCH, fetch_req([("t", 0, 6)]), 12)
    assert below.responses[0].partitions[0].error_code == E.OFFSET_OUT_OF_RANGE
    at = (await call(broker, ApiKey.FETCH, fetch_req([("t", 0, 7)]), 12)).responses[0].partitions[0]
    assert at.error_code == 0 and at.log_start_offset == 7
    assert [o for o, _, _ in decode_records(at.records)][0] == 7
    assert (await produce(broker, "t", 0, batch([b"new"]))).log_start_offset == 7


async def test_high_watermark_and_out_of_range_offsets(broker):
    assert await delete_records(broker, {("t", 0): 11}) == {("t", 0): (E.OFFSET_OUT_OF_RANGE, -1)}
    assert await delete_records(broker, {("t", 0): -2}) == {("t", 0): (E.OFFSET_OUT_OF_RANGE, -1)}
    assert broker.logs.get("t", 0).log_start_offset == 0
    assert await delete_records(broker, {("t", 0): 4}) == {("t", 0): (0, 4)}
    assert await delete_records(broker, {("t", 0): 2}) == {("t", 0): (0, 4)}  # never backwards
    assert await delete_records(broker, {("t", 0): -1}) == {("t", 0): (0, 10)}  # -1: the high watermark
    assert await earliest(broker) == 10
    assert await delete_records(broker, {("t", 1): -1}) == {("t", 1): (0, 0)}  # empty partition


async def test_refusals(broker):
    broker.create_topic("compacted", 1, {"cleanup.policy": "compact"})
    broker.create_topic("both", 1, {"cleanup.policy": "compact,delete"})
    await produce(broker, "both", 0, batch([b"a"]))
    got = await delete_records(broker, {("nope", 0): 1, ("t", 5): 1, ("compacted", 0): 0, ("both", 0): 1,
                                        ("__consumer_offsets", 0): 0})
    assert got == {("nope", 0): (E.UNKNOWN_TOPIC_OR_PARTITION, -1), ("t", 5): (E.UNKNOWN_TOPIC_OR_PARTITION, -1),
                   ("compacted", 0): (E.POLICY_VIOLATION, -1), ("both", 0): (0, 1),
                   ("__consumer_offsets", 0): (E.INVALID_TOPIC_EXCEPTION, -1)}


async def test_a_long_poll_at_the_end_stays_parked_when_the_start_reaches_it(broker):
    """A long poll waits at the log end; DeleteRecords up to the end leaves its offset valid
    (= the new start), so it keeps waiting, and the next append answers it."""
    parked = await call(broker, ApiKey.FETCH, fetch_req([("t", 0, 10)], max_wait_ms=60000), 12)
    assert isinstance(parked, Deferred) and not parked.done
    assert await delete_records(broker, {("t", 0): -1}) == {("t", 0): (0, 10)}
    assert not parked.done
    await produce(broker, "t", 0, batch([b"after"]))
    assert parked.done
    p = parked.result().responses[0].partitions[0]
    assert (p.error_code, p.log_start_offset) == (0, 10)
    assert [v for _, _, v in decode_records(p.records)] == [b"after"]


async def test_timestamp_lookups_start_at_the_log_start(broker):
    await delete_records(broker, {("t", 0): 6})
    resp = await call(broker, ApiKey.LIST_OFFSETS, list_offsets_req([("t", 0, NOW)]), 7)
    assert resp.topics[0].partitions[0].offset == 6


async def test_kept_across_restarts(broker):
    await delete_records(broker, {("t", 0): 5})
    b = await reopen(broker)
    try:
        assert b.logs.get("t", 0).log_start_offset == 5 and await earliest(b) == 5
        assert checkpoint(b) == "0\n1\nt 0 5\n"
    finally:
        await b.stop()


async def test_segments_left_by_a_crash_after_the_checkpoint_are_deleted_at_start_up(broker):
    plog = broker.logs.get("t", 0)
    n = len(plog.segments)
    await broker.stop()
    with open(os.path.join(broker.log_dir, LOG_START_OFFSET_CHECKPOINT), "w") as f:
        f.write("0\n1\nt 0 8\n")  # written, then the process died before deleting segments
    b = await reopen(broker)
    try:
        log = b.logs.get("t", 0)
        assert log.log_start_offset == 8 and len(log.segments) < n
        assert log.segments[0].base_offset <= 8
    finally:
        await b.stop()


async def test_a_deleted_topic_leaves_no_checkpoint_entry(broker):
    await delete_records(broker, {("t", 0): 5})
    assert checkpoint(broker) == "0\n1\nt 0 5\n"
    assert (await delete(broker, "t"))[0] == [("t", 0)]
    assert checkpoint(broker) == "0\n0\n"
    broker.create_topic("t", 1, {})
    await produce(broker, "t", 0, batch([b"a"]))
    b = await reopen(broker)
    try:
        assert b.logs.get("t", 0).log_start_offset == 0
    finally:
        await b.stop()


async def test_a_stale_entry_is_dropped_at_start_up(broker):
    await broker.stop()
    with open(os.path.join(broker.log_dir, LOG_START_OFFSET_CHECKPOINT), "w") as f:
        f.write("0\n2\ngone 0 9\nt 1 0\n")
    b = await reopen(broker)
    try:
        assert checkpoint(b) == "0\n0\n"
    finally:
        await b.stop()
