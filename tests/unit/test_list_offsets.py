"""ListOffsets handler (earliest, latest, by timestamp, max timestamp, v0) and topic retention."""
from __future__ import annotations

import pytest
from test_produce_helpers import NOW, batch, call, list_offsets_req, make_broker, produce

from kcoord.protocol.api import ApiKey
from kcoord.protocol.errors import ErrorCode as E
from kcoord.server.node import run_topic_retention


@pytest.fixture
async def broker(tmp_path):
    b = await make_broker(tmp_path)
    b.create_topic("t", 2, {})
    yield b
    await b.stop()


async def lo(broker, parts, version=7, **kw):
    resp = await call(broker, ApiKey.LIST_OFFSETS, list_offsets_req(parts, version=version, **kw), version)
    return [p for t in resp.topics for p in t.partitions]


async def fill_timestamps(broker):
    # offsets 0..5 with timestamps NOW+0,1 | NOW+100,101 | NOW+50,51 (out of order batch)
    await produce(broker, "t", 0, batch([b"a", b"b"], ts=NOW))
    await produce(broker, "t", 0, batch([b"c", b"d"], ts=NOW + 100))
    await produce(broker, "t", 0, batch([b"e", b"f"], ts=NOW + 50))


async def test_earliest_and_latest(broker):
    await fill_timestamps(broker)
    e, lt = await lo(broker, [("t", 0, -2), ("t", 1, -1)], version=4)
    assert (e.error_code, e.offset, e.timestamp, e.leader_epoch) == (0, 0, -1, 0)
    assert (lt.error_code, lt.offset) == (0, 0)
    (lt,) = await lo(broker, [("t", 0, -1)], version=1)
    assert lt.offset == 6


async def test_by_timestamp_finds_first_offset_with_timestamp_at_or_after(broker):
    await fill_timestamps(broker)
    cases = {NOW - 10: (0, NOW), NOW: (0, NOW), NOW + 1: (1, NOW + 1), NOW + 2: (2, NOW + 100),
             NOW + 101: (3, NOW + 101), NOW + 102: (-1, -1)}
    for ts, want in cases.items():
        (p,) = await lo(broker, [("t", 0, ts)])
        assert (p.error_code, p.offset, p.timestamp) == (0, *want), ts


async def test_max_timestamp_needs_v7(broker):
    await fill_timestamps(broker)
    (p,) = await lo(broker, [("t", 0, -3)], version=7)
    assert (p.offset, p.timestamp) == (3, NOW + 101)
    (p,) = await lo(broker, [("t", 0, -3)], version=6)
    assert p.error_code == E.UNSUPPORTED_VERSION
    (p,) = await lo(broker, [("t", 1, -3)], version=7)
    assert (p.error_code, p.offset, p.timestamp) == (0, -1, -1)


async def test_tiered_and_local_special_timestamps(broker):
    await fill_timestamps(broker)
    (p,) = await lo(broker, [("t", 0, -4)], version=8)
    assert (p.error_code, p.offset) == (0, 0)
    (p,) = await lo(broker, [("t", 0, -5)], version=9)
    assert (p.error_code, p.offset, p.leader_epoch) == (0, -1, -1)
    (p,) = await lo(broker, [("t", 0, -5)], version=8)
    assert p.error_code == E.UNSUPPORTED_VERSION
    (p,) = await lo(broker, [("t", 0, -9)], version=9)
    assert p.error_code == E.UNSUPPORTED_VERSION


async def test_errors(broker):
    ps = await lo(broker, [("nope", 0, -1), ("t", 5, -1)])
    assert [p.error_code for p in ps] == [E.UNKNOWN_TOPIC_OR_PARTITION] * 2
    ps = await lo(broker, [("t", 0, -1), ("t", 0, -2)])
    assert [p.error_code for p in ps] == [E.INVALID_REQUEST] * 2
    (p,) = await lo(broker, [("t", 0, -1)], version=4, current_leader_epoch=2)
    assert p.error_code == E.UNKNOWN_LEADER_EPOCH
    (p,) = await lo(broker, [("t", 0, -1)], version=4, current_leader_epoch=0)
    assert p.error_code == 0


async def test_v0_old_style_offsets(broker):
    await fill_timestamps(broker)
    (p,) = await lo(broker, [("t", 0, -1)], version=0, max_num_offsets=10)
    assert p.error_code == 0 and p.old_style_offsets == [6, 0]
    (p,) = await lo(broker, [("t", 0, -2)], version=0, max_num_offsets=10)
    assert p.old_style_offsets == [0]
    (p,) = await lo(broker, [("t", 0, -1)], version=0, max_num_offsets=1)
    assert p.old_style_offsets == [6]
    (p,) = await lo(broker, [("t", 0, -3)], version=0)
    assert p.error_code == E.UNSUPPORTED_VERSION
    (p,) = await lo(broker, [("t", 1, -1)], version=0, max_num_offsets=5)
    assert p.old_style_offsets == [0]  # empty log: just its only segment's base
    (p,) = await lo(broker, [("nope", 0, -1)], version=0)
    assert p.error_code == E.UNKNOWN_TOPIC_OR_PARTITION


async def test_log_append_time_topic_is_searched_by_append_time(broker):
    broker.create_topic("lat", 1, {"message.timestamp.type": "LogAppendTime"})
    await produce(broker, "lat", 0, batch([b"a"], ts=5))
    broker.clock.advance(1000)
    await produce(broker, "lat", 0, batch([b"b"], ts=5))
    (p,) = await lo(broker, [("lat", 0, NOW + 1)])
    assert (p.offset, p.timestamp) == (1, NOW + 1000)


# ------------------------------------------------------------------ retention


async def test_retention_by_bytes_and_time_with_topic_over_broker_defaults(tmp_path):
    b = await make_broker(tmp_path, **{"log.segment.bytes": 300, "log.retention.bytes": 500})
    try:
        b.create_topic("sized", 1, {})
        b.create_topic("timed", 1, {"retention.ms": "60000", "retention.bytes": "-1"})
        b.create_topic("kept", 1, {"retention.bytes": "-1", "retention.ms": "-1"})
        b.create_topic("compacted", 1, {"cleanup.policy": "compact"})
        for name in ("sized", "timed", "kept", "compacted"):
            for _ in range(5):
                assert (await produce(b, name, 0, batch([b"x" * 150], keys=[b"k"]))).error_code == 0
            assert len(b.logs.get(name, 0).segments) == 5
        # "sized": 5 x 222 bytes; like Kafka, whole segments go while the rest stays >= 500
        assert run_topic_retention(b) == 2
        assert b.logs.get("sized", 0).log_start_offset == 2
        assert len(b.logs.get("timed", 0).segments) == 5
        b.clock.advance(60_001)
        run_topic_retention(b)
        assert b.logs.get("timed", 0).log_start_offset == 4  # all but the active segment
        assert len(b.logs.get("kept", 0).segments) == 5
        assert len(b.logs.get("compacted", 0).segments) == 5
        (p,) = await lo(b, [("sized", 0, -2)])
        assert p.offset == 2
    finally:
        await b.stop()
