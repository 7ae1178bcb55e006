"""Fetch handler: reads, limits (KIP-74), errors, topic ids, sessionless requests, and long polls
completed by Produce or expired by max_wait_ms on a FakeClock."""
from __future__ import annotations

import uuid

import pytest
from test_produce_helpers import batch, call, data_plane, decode_records, fetch_req, make_broker, produce

from kcoord.protocol.api import ApiKey
from kcoord.protocol.errors import ErrorCode as E
from kcoord.server.deferred import Deferred
from kcoord.server.node import run_topic_retention


@pytest.fixture
async def broker(tmp_path):
    b = await make_broker(tmp_path)
    b.create_topic("t", 2, {})
    yield b
    await b.stop()


def parts_of(resp):
    return [(t, p) for t in resp.responses for p in t.partitions]


async def fill(broker, topic="t", p=0, n=3, size=10):
    for i in range(n):
        await produce(broker, topic, p, batch([bytes([65 + i]) * size]))


async def test_fetch_returns_batches_and_offsets(broker):
    await fill(broker)
    resp = await call(broker, ApiKey.FETCH, fetch_req([("t", 0, 1)]), 12)
    assert resp.error_code == 0 and resp.session_id == 0
    (_, p), = parts_of(resp)
    assert (p.error_code, p.high_watermark, p.last_stable_offset, p.log_start_offset) == (0, 3, 3, 0)
    assert p.preferred_read_replica == -1 and p.aborted_transactions is None
    assert [o for o, _, _ in decode_records(p.records)] == [1, 2]


async def test_fetch_at_log_end_is_empty_and_beyond_is_out_of_range(broker):
    await fill(broker)
    resp = await call(broker, ApiKey.FETCH, fetch_req([("t", 0, 3), ("t", 1, 5)]), 12)
    (_, a), (_, b) = parts_of(resp)
    assert a.error_code == 0 and a.records in (b"", None)
    assert b.error_code == E.OFFSET_OUT_OF_RANGE and b.high_watermark == -1


async def test_unknown_topic_and_partition(broker):
    resp = await call(broker, ApiKey.FETCH, fetch_req([("nope", 0, 0), ("t", 7, 0)]), 12)
    assert [p.error_code for _, p in parts_of(resp)] == [E.UNKNOWN_TOPIC_OR_PARTITION] * 2


async def test_topic_ids_from_v13(broker):
    await fill(broker, n=1)
    tid = broker.topics.get("t").topic_id
    unknown = uuid.uuid4()
    resp = await call(broker, ApiKey.FETCH, fetch_req([(tid, 0, 0), (unknown, 0, 0)], version=13), 13)
    (t1, p1), (t2, p2) = parts_of(resp)
    assert t1.topic_id == tid and p1.error_code == 0 and len(decode_records(p1.records)) == 1
    assert t2.topic_id == unknown and p2.error_code == E.UNKNOWN_TOPIC_ID
    resp = await call(broker, ApiKey.FETCH, fetch_req([(tid, 0, 0)], version=17), 17)
    assert parts_of(resp)[0][1].error_code == 0


async def test_read_committed_reads_everything(broker):
    await fill(broker, n=2)
    resp = await call(broker, ApiKey.FETCH, fetch_req([("t", 0, 0)], isolation_level=1), 12)
    (_, p), = parts_of(resp)
    assert p.last_stable_offset == 2 and p.aborted_transactions == [] and len(decode_records(p.records)) == 2


async def test_first_batch_returned_even_if_larger_than_limits_kip74(broker):
    await fill(broker, n=3, size=1000)
    resp = await call(broker, ApiKey.FETCH, fetch_req([("t", 0, 0)], max_bytes=10, partition_max_bytes=10), 12)
    (_, p), = parts_of(resp)
    assert [o for o, _, _ in decode_records(p.records)] == [0]


async def test_limits_are_hard_after_the_first_non_empty_partition(broker):
    await fill(broker, p=0, n=3, size=1000)
    await fill(broker, p=1, n=3, size=1000)
    one = len(broker.logs.get("t", 0).read(0, 1))
    resp = await call(broker, ApiKey.FETCH,
                      fetch_req([("t", 0, 0), ("t", 1, 0)], max_bytes=2 * one + 10, partition_max_bytes=2**20), 12)
    (_, a), (_, b) = parts_of(resp)
    assert len(decode_records(a.records)) == 2
    assert b.records in (b"", None)  # only 10 bytes left: not even one batch
    resp = await call(broker, ApiKey.FETCH,
                      fetch_req([("t", 0, 0), ("t", 1, 0)], partition_max_bytes=one + 5), 12)
    assert [len(decode_records(p.records)) for _, p in parts_of(resp)] == [1, 1]


async def test_leader_epoch_checks(broker):
    resp = await call(broker, ApiKey.FETCH, fetch_req([("t", 0, 0)], current_leader_epoch=3), 12)
    assert parts_of(resp)[0][1].error_code == E.UNKNOWN_LEADER_EPOCH
    resp = await call(broker, ApiKey.FETCH, fetch_req([("t", 0, 0)], current_leader_epoch=0), 12)
    assert parts_of(resp)[0][1].error_code == 0


async def test_sessionless_fetch_and_unknown_session(broker):
    # epoch -1: no session (tests/unit/test_fetch_sessions.py covers sessions)
    resp = await call(broker, ApiKey.FETCH, fetch_req([("t", 0, 0)], session_id=0, session_epoch=-1), 12)
    assert resp.error_code == 0 and resp.session_id == 0
    resp = await call(broker, ApiKey.FETCH, fetch_req([("t", 0, 0)], session_id=77, session_epoch=3), 12)
    assert resp.error_code == E.FETCH_SESSION_ID_NOT_FOUND and resp.responses == []


async def test_internal_topic_is_fetchable(broker):
    resp = await call(broker, ApiKey.FETCH, fetch_req([("__consumer_offsets", 0, 0)]), 12)
    assert parts_of(resp)[0][1].error_code == 0


# ------------------------------------------------------------------ long polling


async def test_delayed_fetch_completes_when_data_arrives(broker):
    res = await call(broker, ApiKey.FETCH, fetch_req([("t", 0, 0), ("t", 1, 0)], max_wait_ms=500), 12)
    assert isinstance(res, Deferred) and not res.done
    assert data_plane(broker).fetch_purgatory.watched(("t", 1)) == 1
    await produce(broker, "t", 1, batch([b"hello"]))
    assert res.done
    resp = res.result()
    (_, a), (_, b) = parts_of(resp)
    assert a.records in (b"", None) and [v for _, _, v in decode_records(b.records)] == [b"hello"]
    assert b.high_watermark == 1
    assert data_plane(broker).fetch_purgatory.watched(("t", 1)) == 0
    broker.clock.advance(1000)  # the timer was cancelled: nothing fires twice


async def test_delayed_fetch_expires_after_max_wait(broker):
    await fill(broker, n=1)
    res = await call(broker, ApiKey.FETCH, fetch_req([("t", 0, 1)], max_wait_ms=500), 12)
    assert not res.done
    broker.clock.advance(499)
    assert not res.done
    broker.clock.advance(1)
    assert res.done
    (_, p), = parts_of(res.result())
    assert p.error_code == 0 and p.records in (b"", None) and p.high_watermark == 1


async def test_delayed_fetch_waits_for_min_bytes(broker):
    res = await call(broker, ApiKey.FETCH, fetch_req([("t", 0, 0)], max_wait_ms=500, min_bytes=500), 12)
    await produce(broker, "t", 0, batch([b"x" * 100]))
    assert not res.done
    await produce(broker, "t", 0, batch([b"y" * 400]))
    assert res.done
    (_, p), = parts_of(res.result())
    assert len(decode_records(p.records)) == 2


async def test_min_bytes_counts_each_partition_once_across_wakes(broker):
    # An append wakes the fetch for its own partition only; the running total must count a
    # partition that grew twice once (its latest size), and add the other partitions'.
    b1, b2, b3 = batch([b"x" * 300]), batch([b"y" * 10]), batch([b"z" * 200])
    need = len(b1) + len(b2) + len(b3)
    res = await call(broker, ApiKey.FETCH, fetch_req([("t", 0, 0), ("t", 1, 0)], max_wait_ms=500, min_bytes=need), 12)
    await produce(broker, "t", 0, b1)
    await produce(broker, "t", 0, b2)  # counting b1 twice would reach `need` here
    assert not res.done
    await produce(broker, "t", 1, b3)
    assert res.done
    (_, a), (_, b) = parts_of(res.result())
    assert len(decode_records(a.records)) == 2 and len(decode_records(b.records)) == 1


async def test_enough_data_answers_at_once_and_errors_do_not_wait(broker):
    await fill(broker, n=1)
    res = await call(broker, ApiKey.FETCH, fetch_req([("t", 0, 0)], max_wait_ms=500), 12)
    assert not isinstance(res, Deferred)
    res = await call(broker, ApiKey.FETCH, fetch_req([("t", 0, 1), ("nope", 0, 0)], max_wait_ms=500), 12)
    assert not isinstance(res, Deferred)


async def test_fetch_on_an_older_segment_answers_at_once_and_after_retention_is_out_of_range(tmp_path):
    b = await make_broker(tmp_path, **{"log.segment.bytes": 300})
    try:
        b.create_topic("r", 1, {"retention.bytes": "1"})
        for _ in range(3):
            await produce(b, "r", 0, batch([b"x" * 150]))
        assert len(b.logs.get("r", 0).segments) == 3
        # Kafka's case F: the fetch offset is not on the last segment, so it is not parked
        res = await call(b, ApiKey.FETCH, fetch_req([("r", 0, 0)], max_wait_ms=500, min_bytes=10**6), 12)
        assert isinstance(res, Deferred) and res.done
        assert run_topic_retention(b) == 2
        resp = await call(b, ApiKey.FETCH, fetch_req([("r", 0, 0)]), 12)
        (_, p), = parts_of(resp)
        assert p.error_code == E.OFFSET_OUT_OF_RANGE
        resp = await call(b, ApiKey.FETCH, fetch_req([("r", 0, 2)]), 12)
        (_, p), = parts_of(resp)
        assert p.error_code == 0 and p.log_start_offset == 2
    finally:
        await b.stop()


async def test_parked_fetches_can_be_answered_at_once_for_shutdown(broker):
    res = await call(broker, ApiKey.FETCH, fetch_req([("t", 0, 0)], max_wait_ms=30_000), 12)
    dp = data_plane(broker)
    assert not res.done and len(dp.parked) == 1
    assert dp.complete_parked() == 1
    assert res.done and not dp.parked and broker.clock.pending() == 0
    assert parts_of(res.result())[0][1].error_code == 0
