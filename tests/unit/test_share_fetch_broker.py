"""ShareFetch / ShareAcknowledge through their handlers on a real Broker over tmp_path (fake
clock): read_committed and read_uncommitted share groups over transactions (aborted records
and markers are never handed out), the long poll woken by a produce, lock expiry on the clock,
on_member_left, and a restart that keeps what was acknowledged."""
from __future__ import annotations

import asyncio

import pytest
from test_produce_helpers import batch, call, make_broker, produce
from txn_client import TxnClient

from kcoord.protocol.api import ApiKey
from kcoord.protocol.share_messages import ShareAcknowledgeRequest, ShareFetchRequest
from kcoord.server.broker import Broker
from kcoord.server.config import Config

ACCEPT = 1
CONFIGS = {
    "rc": {"share.isolation.level": "read_committed", "share.auto.offset.reset": "earliest"},
    "ru": {"share.auto.offset.reset": "earliest"},
}


def configs(group: str) -> dict[str, str]:
    return CONFIGS.get(group.split("-")[0], {})


@pytest.fixture
async def broker(tmp_path):
    b = await make_broker(tmp_path)
    b.create_topic("t", 1, {})
    b.parts.share.get().group_config = configs
    yield b
    await b.stop()


def fetch_req(topic_id, group, member, epoch, max_wait_ms=0, acks=()):
    P = ShareFetchRequest.FetchTopic.FetchPartition
    return ShareFetchRequest(
        version=2, group_id=group, member_id=member, share_session_epoch=epoch, max_wait_ms=max_wait_ms, min_bytes=1,
        max_bytes=1 << 20, max_records=100, batch_size=100, share_acquire_mode=0, is_renew_ack=False,
        topics=[ShareFetchRequest.FetchTopic(topic_id=topic_id, partitions=[P(partition_index=0, acknowledgement_batches=[
            P.AcknowledgementBatch(first_offset=f, last_offset=t, acknowledge_types=[ty]) for f, t, ty in acks])])],
        forgotten_topics_data=[])


async def share_fetch(b, group, member, epoch, **kw):
    resp = await call(b, ApiKey.SHARE_FETCH, fetch_req(b.topics.get("t").topic_id, group, member, epoch, **kw), 2)
    assert resp.error_code == 0, resp
    return {o for t in resp.responses for p in t.partitions for a in p.acquired_records
            for o in range(a.first_offset, a.last_offset + 1)}


async def transactions(b):
    """0-2 committed (marker at 3), 4-5 aborted (marker at 6), 7 plain."""
    c = TxnClient(b)
    r = await c.init("tx")
    pid, epoch = r.producer_id, r.producer_epoch
    await c.add("tx", pid, epoch, {"t": [0]})
    assert (await c.produce("tx", "t", 0, [b"c0", b"c1", b"c2"], pid, epoch)).error_code == 0
    await c.end("tx", pid, epoch, commit=True)
    await c.add("tx", pid, epoch, {"t": [0]})
    assert (await c.produce("tx", "t", 0, [b"a0", b"a1"], pid, epoch)).error_code == 0
    await c.end("tx", pid, epoch, commit=False)
    assert (await produce(b, "t", 0, batch([b"plain"]))).error_code == 0


async def test_read_committed_skips_aborted_records_and_markers(broker):
    await transactions(broker)
    assert await share_fetch(broker, "rc-g", "m", 0) == {0, 1, 2, 7}
    assert await share_fetch(broker, "ru-g", "m", 0) == {0, 1, 2, 4, 5, 7}


async def test_long_poll_is_woken_by_a_produce(broker):
    assert await share_fetch(broker, "ru-lp", "m", 0) == set()  # the partition starts (empty)
    waiting = asyncio.ensure_future(share_fetch(broker, "ru-lp", "m", 1, max_wait_ms=30000))
    await asyncio.sleep(0.05)
    assert not waiting.done()
    assert (await produce(broker, "t", 0, batch([b"x", b"y"]))).error_code == 0
    assert await asyncio.wait_for(waiting, 10) == {0, 1}


async def test_lock_expiry_and_member_left(broker):
    assert (await produce(broker, "t", 0, batch([b"x", b"y", b"z"]))).error_code == 0
    assert await share_fetch(broker, "ru-l", "a", 0) == {0, 1, 2}
    assert await share_fetch(broker, "ru-l", "b", 0) == set()
    broker.clock.advance(30_001)  # past group.share.record.lock.duration.ms
    await asyncio.sleep(0)
    assert await share_fetch(broker, "ru-l", "b", 1) == {0, 1, 2}
    broker.parts.share.get().on_member_left("ru-l", "b")
    assert broker.parts.share.get().sessions.get("ru-l", "b") is None
    assert await share_fetch(broker, "ru-l", "a", 1) == {0, 1, 2}


async def test_restart_keeps_acknowledgements(broker, tmp_path):
    assert (await produce(broker, "t", 0, batch([b"v%d" % i for i in range(6)]))).error_code == 0
    assert await share_fetch(broker, "ru-r", "a", 0) == set(range(6))
    P = ShareAcknowledgeRequest.AcknowledgeTopic.AcknowledgePartition
    ack = ShareAcknowledgeRequest(version=2, group_id="ru-r", member_id="a", share_session_epoch=1, is_renew_ack=False,
                                  topics=[ShareAcknowledgeRequest.AcknowledgeTopic(
                                      topic_id=broker.topics.get("t").topic_id, partitions=[P(
                                          partition_index=0, acknowledgement_batches=[
                                              P.AcknowledgementBatch(first_offset=0, last_offset=2,
                                                                     acknowledge_types=[ACCEPT])])])])
    resp = await call(broker, ApiKey.SHARE_ACKNOWLEDGE, ack, 2)
    assert resp.error_code == 0 and resp.responses[0].partitions[0].error_code == 0
    assert resp.acquisition_lock_timeout_ms == 30_000
    await broker.stop()
    b = Broker(Config({"log.dirs": str(tmp_path / "data"), "offsets.topic.num.partitions": 1}))
    b.clock = broker.clock
    await b.start()
    try:
        b.parts.share.get().group_config = configs
        assert await share_fetch(b, "ru-r", "c", 0) == {3, 4, 5}
    finally:
        await b.stop()


async def test_pruning_keeps_the_state_and_drops_older_records(broker, tmp_path):
    from kcoord.server.share.manager import prune
    from kcoord.server.share.state import state_partition

    assert (await produce(broker, "t", 0, batch([b"v%d" % i for i in range(20)]))).error_code == 0
    tid = broker.topics.get("t").topic_id
    assert await share_fetch(broker, "ru-p", "a", 0) == set(range(20))
    P = ShareAcknowledgeRequest.AcknowledgeTopic.AcknowledgePartition
    for epoch, off in enumerate((0, 2, 4, 6, 8, 10), start=1):  # one ShareUpdate each
        ack = ShareAcknowledgeRequest(version=2, group_id="ru-p", member_id="a", share_session_epoch=epoch,
                                      is_renew_ack=False, topics=[ShareAcknowledgeRequest.AcknowledgeTopic(
                                          topic_id=tid, partitions=[P(partition_index=0, acknowledgement_batches=[
                                              P.AcknowledgementBatch(first_offset=off, last_offset=off,
                                                                     acknowledge_types=[ACCEPT])])])])
        assert (await call(broker, ApiKey.SHARE_ACKNOWLEDGE, ack, 2)).responses[0].partitions[0].error_code == 0
    plog = broker.logs.existing("__share_group_state", state_partition("ru-p", tid, 0, 50))
    before = plog.log_end_offset
    assert before == 7  # the first snapshot and six updates
    assert await prune(broker.parts.share.get(), min_records=1) == 1
    assert plog.log_start_offset == before and plog.log_end_offset == before + 1  # one snapshot
    await broker.stop()
    b = Broker(Config({"log.dirs": str(tmp_path / "data"), "offsets.topic.num.partitions": 1}))
    b.clock = broker.clock
    await b.start()
    try:
        b.parts.share.get().group_config = configs
        assert await share_fetch(b, "ru-p", "c", 0) == set(range(20)) - {0, 2, 4, 6, 8, 10}
    finally:
        await b.stop()
