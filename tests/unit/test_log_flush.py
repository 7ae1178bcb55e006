"""Kafka's flush semantics for data topics (server/log_flush.py): flush.messages decides
whether a produce is fsynced before its answer, flush.ms whether the scheduler flushes a
partition; the broker defaults log.flush.interval.messages / log.flush.interval.ms apply to
topics without their own."""
from __future__ import annotations

import asyncio

import pytest
from test_produce_helpers import batch, make_broker, produce

from kcoord.server.handlers import NO_RESPONSE
from kcoord.server.log_flush import flush_dirty_logs


@pytest.fixture
async def broker(tmp_path):
    b = await make_broker(tmp_path)
    yield b
    await b.stop()


@pytest.mark.parametrize("acks", [-1, 1])
async def test_flush_messages_1_fsyncs_before_every_acknowledgement(broker, acks):
    broker.create_topic("f1", 1, {"flush.messages": "1"})
    plog = broker.logs.get("f1", 0)
    for i in range(3):
        r = await produce(broker, "f1", 0, batch([b"a", b"b"]), acks=acks)
        assert r.error_code == 0 and r.base_offset == 2 * i
        assert plog.durable_offset == 2 * i + 2  # on disk before the answer
    assert plog.sync_count >= 3


async def test_flush_messages_n_fsyncs_once_n_records_are_unflushed(broker):
    broker.create_topic("f3", 1, {"flush.messages": "3"})
    plog = broker.logs.get("f3", 0)
    await produce(broker, "f3", 0, batch([b"a", b"b"]), acks=-1)
    assert plog.durable_offset == 0 and plog.sync_count == 0
    await produce(broker, "f3", 0, batch([b"c"]), acks=-1)
    assert plog.durable_offset == 3 and plog.sync_count >= 1
    await produce(broker, "f3", 0, batch([b"d"]), acks=-1)
    assert plog.durable_offset == 3


async def test_acks_zero_starts_the_flush_without_waiting(broker):
    broker.create_topic("f1", 1, {"flush.messages": "1"})
    plog = broker.logs.get("f1", 0)
    assert await produce(broker, "f1", 0, batch([b"a"]), acks=0) is NO_RESPONSE
    deadline = asyncio.get_running_loop().time() + 30
    while plog.durable_offset < 1:
        assert asyncio.get_running_loop().time() < deadline
        await asyncio.sleep(0.01)


async def test_the_broker_default_applies_to_topics_without_their_own(tmp_path):
    b = await make_broker(tmp_path, **{"log.flush.interval.messages": "1"})
    try:
        b.create_topic("d", 1, {})
        b.create_topic("own", 1, {"flush.messages": "1000"})
        await produce(b, "d", 0, batch([b"a"]), acks=-1)
        await produce(b, "own", 0, batch([b"a"]), acks=-1)
        assert b.logs.get("d", 0).durable_offset == 1
        assert b.logs.get("own", 0).durable_offset == 0
    finally:
        await b.stop()


async def test_flush_ms_flushes_partitions_whose_records_waited_that_long(broker):
    broker.create_topic("fm", 2, {"flush.ms": "1000"})
    broker.create_topic("never", 1, {})
    await produce(broker, "fm", 0, batch([b"a"]), acks=1)
    await produce(broker, "never", 0, batch([b"a"]), acks=1)
    plog, idle, never = broker.logs.get("fm", 0), broker.logs.get("fm", 1), broker.logs.get("never", 0)
    assert flush_dirty_logs(broker, plog.last_flush_ms + 999) == 0
    assert flush_dirty_logs(broker, plog.last_flush_ms + 1000) == 1  # fm-0; fm-1 has nothing, never-0 no flush.ms
    deadline = asyncio.get_running_loop().time() + 30
    while plog.durable_offset < 1:
        assert asyncio.get_running_loop().time() < deadline
        await asyncio.sleep(0.01)
    assert idle.sync_count == 0 and never.durable_offset == 0


async def test_a_segment_roll_flushes_the_segments_before_it(broker):
    broker.create_topic("r", 1, {"segment.bytes": "400"})
    plog = broker.logs.get("r", 0)
    await produce(broker, "r", 0, batch([b"a" * 300]), acks=1)
    assert plog.durable_offset == 0 and len(plog.segments) == 1
    await produce(broker, "r", 0, batch([b"b" * 300]), acks=1)  # rolls: offset 0 is in a closed segment
    assert len(plog.segments) == 2
    deadline = asyncio.get_running_loop().time() + 30
    while plog.durable_offset < 1:
        assert asyncio.get_running_loop().time() < deadline
        await asyncio.sleep(0.01)
