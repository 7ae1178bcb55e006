"""Fetch sessions (KIP-227) through the Fetch handler, requests and responses encoded and
decoded on the way: creating a session, incremental fetches with and without news, forgotten
partitions, epoch and id errors, eviction, closing, topic ids, and long polls that wake on the
session's partitions only."""
from __future__ import annotations

import uuid

import pytest
from kafka.protocol.consumer import FetchRequest
from test_delete_records import delete_records
from test_delete_topics import delete, ready
from test_produce_helpers import batch, call, data_plane, decode_records, fetch_req, produce

from kcoord.protocol.api import ApiKey
from kcoord.protocol.errors import ErrorCode as E
from kcoord.server.deferred import Deferred
from kcoord.server.node import metrics_page


@pytest.fixture
async def broker(tmp_path):
    b = await ready(tmp_path)
    b.create_topic("t", 4, {})
    yield b
    await b.stop()


def rows(resp):
    """{(topic, partition): partition response}"""
    return {(t.topic or t.topic_id, p.partition_index): p
            for t in resp.responses for p in t.partitions}


def forget(req, topics):
    """Set ForgottenTopicsData: [(topic name or id, [partitions])]."""
    key = "topic_id" if req.API_VERSION >= 13 else "topic"
    req.forgotten_topics_data = [FetchRequest.ForgottenTopic(**{key: t}, partitions=ps) for t, ps in topics]
    return req


async def fetch(broker, parts, sid, epoch, version=12, **kw):
    return await call(broker, ApiKey.FETCH, fetch_req(parts, session_id=sid, session_epoch=epoch, version=version,
                                                      **kw), version)


async def open_session(broker, parts, version=12):
    resp = await fetch(broker, parts, 0, 0, version)
    assert resp.error_code == 0 and resp.session_id != 0
    return resp


async def test_full_fetch_creates_a_session_and_idle_incremental_is_empty(broker):
    await produce(broker, "t", 0, batch([b"a", b"b"]))
    resp = await open_session(broker, [("t", p, 0) for p in range(4)])
    sid = resp.session_id
    assert len(rows(resp)) == 4 and len(decode_records(rows(resp)[("t", 0)].records)) == 2
    assert len(data_plane(broker).fetch_sessions) == 1
    # the consumer moves partition 0 on: nothing is new anywhere
    resp = await fetch(broker, [("t", 0, 2)], sid, 1)
    assert resp.error_code == 0 and resp.session_id == sid and resp.responses == []
    resp = await fetch(broker, [], sid, 2)
    assert resp.responses == []


async def test_incremental_answers_only_partitions_with_news(broker):
    sid = (await open_session(broker, [("t", p, 0) for p in range(4)])).session_id
    await produce(broker, "t", 2, batch([b"x"]))
    resp = await fetch(broker, [], sid, 1)
    (key, p), = rows(resp).items()
    assert key == ("t", 2) and p.high_watermark == 1 and [v for _, _, v in decode_records(p.records)] == [b"x"]
    # not moved on: the same records again (the session keeps the old fetch offset)
    resp = await fetch(broker, [], sid, 2)
    assert list(rows(resp)) == [("t", 2)]
    resp = await fetch(broker, [("t", 2, 1)], sid, 3)
    assert resp.responses == []


async def test_a_changed_log_start_is_news(broker):
    await produce(broker, "t", 1, batch([b"x"]))
    await produce(broker, "t", 1, batch([b"y"]))
    sid = (await open_session(broker, [("t", 1, 2)])).session_id
    assert (await fetch(broker, [], sid, 1)).responses == []
    assert await delete_records(broker, {("t", 1): 1}) == {("t", 1): (0, 1)}
    resp = await fetch(broker, [], sid, 2)
    (p,) = rows(resp).values()
    assert p.log_start_offset == 1 and p.records in (b"", None) and p.high_watermark == 2


async def test_added_altered_and_forgotten_partitions(broker):
    sid = (await open_session(broker, [("t", 0, 0)])).session_id
    await produce(broker, "t", 3, batch([b"three"]))
    resp = await fetch(broker, [("t", 3, 0)], sid, 1)  # added: news (records, and a new hw)
    assert list(rows(resp)) == [("t", 3)]
    resp = await fetch(broker, [], sid, 2)  # still at 0: sent again
    assert list(rows(resp)) == [("t", 3)]
    resp = await call(broker, ApiKey.FETCH, forget(fetch_req([], session_id=sid, session_epoch=3), [("t", [3])]), 12)
    assert resp.responses == [] and resp.session_id == sid
    session = data_plane(broker).fetch_sessions.get(sid)
    assert set(session.parts) == {("t", 0)}
    await produce(broker, "t", 3, batch([b"more"]))  # forgotten: no longer news
    resp = await fetch(broker, [], sid, 4)
    assert resp.responses == []
    assert data_plane(broker).fetch_sessions.watchers.get(("t", 3)) is None


async def test_forgetting_every_partition_closes_the_session(broker):
    sid = (await open_session(broker, [("t", 0, 0)])).session_id
    resp = await call(broker, ApiKey.FETCH, forget(fetch_req([], session_id=sid, session_epoch=1), [("t", [0])]), 12)
    assert resp.error_code == 0 and resp.session_id == 0
    assert data_plane(broker).fetch_sessions.get(sid) is None


async def test_epoch_and_id_errors(broker):
    sid = (await open_session(broker, [("t", 0, 0)])).session_id
    resp = await fetch(broker, [], sid, 5)
    assert (resp.error_code, resp.session_id, resp.responses) == (E.INVALID_FETCH_SESSION_EPOCH, 0, [])
    resp = await fetch(broker, [], sid, 1)
    assert resp.error_code == 0
    resp = await fetch(broker, [], sid, 1)  # a duplicate of the last request
    assert resp.error_code == E.INVALID_FETCH_SESSION_EPOCH
    resp = await fetch(broker, [], sid + 1, 1)
    assert (resp.error_code, resp.session_id) == (E.FETCH_SESSION_ID_NOT_FOUND, 0)
    resp = await fetch(broker, [], 0, 1)
    assert resp.error_code == E.FETCH_SESSION_ID_NOT_FOUND


async def test_topic_id_sessions_and_versions_do_not_mix(broker):
    tid = broker.topics.get("t").topic_id
    sid = (await open_session(broker, [(tid, 0, 0)], version=13)).session_id
    resp = await fetch(broker, [], sid, 1, version=12)
    assert resp.error_code == E.FETCH_SESSION_TOPIC_ID_ERROR
    sid12 = (await open_session(broker, [("t", 0, 0)])).session_id
    resp = await fetch(broker, [], sid12, 1, version=13)
    assert resp.error_code == E.FETCH_SESSION_TOPIC_ID_ERROR
    resp = await fetch(broker, [], sid, 1, version=13)
    assert resp.error_code == 0 and resp.responses == []


async def test_deleted_topic_answers_unknown_topic_id_in_the_session(broker):
    broker.create_topic("gone", 1, {})
    tid = broker.topics.get("gone").topic_id
    unknown = uuid.uuid4()
    resp = await open_session(broker, [(tid, 0, 0), (unknown, 0, 0)], version=13)
    sid = resp.session_id
    assert rows(resp)[(unknown, 0)].error_code == E.UNKNOWN_TOPIC_ID
    resp = await fetch(broker, [], sid, 1, version=13)  # an error is always news
    assert {k: p.error_code for k, p in rows(resp).items()} == {(unknown, 0): E.UNKNOWN_TOPIC_ID}
    assert (await delete(broker, "gone"))[0] == [("gone", 0)]
    resp = await fetch(broker, [], sid, 2, version=13)
    assert {k: p.error_code for k, p in rows(resp).items()} == {(unknown, 0): E.UNKNOWN_TOPIC_ID,
                                                                 (tid, 0): E.UNKNOWN_TOPIC_ID}


async def test_a_parked_session_fetch_answers_when_its_topic_is_deleted(broker):
    broker.create_topic("gone", 1, {})
    sid = (await open_session(broker, [("gone", 0, 0), ("t", 0, 0)])).session_id
    res = await fetch(broker, [], sid, 1, max_wait_ms=5000)
    assert not res.done
    await delete(broker, "gone")
    assert res.done
    assert {k: p.error_code for k, p in rows(res.result()).items()} == {("gone", 0): E.UNKNOWN_TOPIC_OR_PARTITION}


async def test_closing_and_sessionless_requests(broker):
    sid = (await open_session(broker, [("t", 0, 0)])).session_id
    resp = await fetch(broker, [("t", 0, 0)], sid, -1)  # close: answered as a sessionless full fetch
    assert resp.error_code == 0 and resp.session_id == 0 and len(rows(resp)) == 1
    assert data_plane(broker).fetch_sessions.get(sid) is None
    resp = await fetch(broker, [("t", 0, 0)], 0, -1)
    assert resp.session_id == 0 and len(data_plane(broker).fetch_sessions) == 0
    sid = (await open_session(broker, [("t", 0, 0)])).session_id
    resp = await fetch(broker, [("t", 0, 0)], sid, 0)  # a full request naming a session closes it, opens another
    assert resp.session_id not in (0, sid) and data_plane(broker).fetch_sessions.get(sid) is None


async def test_a_full_shard_evicts_by_kafkas_rules(tmp_path):
    # 8 slots: one session in each of the cache's 8 shards; new sessions go to the shards in turn
    b = await ready(tmp_path, **{"max.incremental.fetch.session.cache.slots": 8,
                                 "kcoord.min.incremental.fetch.session.eviction.ms": 1000})
    try:
        b.create_topic("t", 4, {})
        cache = data_plane(b).fetch_sessions
        first = [(await open_session(b, [("t", 0, 0)])).session_id for _ in range(8)]
        assert sorted(cache.shard_of(s).num for s in first) == list(range(8))
        # shard of first[0] is full, nothing in it stale, its session young: no session
        resp = await fetch(b, [("t", p, 0) for p in range(4)], 0, 0)
        assert resp.session_id == 0 and len(cache) == 8
        b.clock.advance(600)
        assert (await fetch(b, [], first[1], 1)).error_code == 0  # used: not stale at 1200
        b.clock.advance(600)
        # shard of first[1]: nothing stale; first[1] was used before it was older than the
        # eviction time, so it is not evictable by a non-follower yet
        resp = await fetch(b, [("t", p, 0) for p in range(4)], 0, 0)
        assert resp.session_id == 0 and cache.get(first[1]) is not None
        # shard of first[2]: idle 1200 ms > 1000, stale: evicted
        third = (await open_session(b, [("t", 1, 0)])).session_id
        assert cache.shard_of(third) is cache.shard_of(first[2])
        assert cache.get(first[2]) is None and cache.evictions == 1
        assert (await fetch(b, [], first[2], 1)).error_code == E.FETCH_SESSION_ID_NOT_FOUND
        # first[4], used now that it is older than the eviction time, is evictable by a bigger
        # session in its shard (first[3]'s shard takes the next one: stale, evicted)
        assert (await fetch(b, [], first[4], 1)).error_code == 0
        await open_session(b, [("t", 0, 0)])
        assert cache.get(first[3]) is None and cache.evictions == 2
        bigger = (await open_session(b, [("t", p, 0) for p in range(4)])).session_id
        assert cache.get(first[4]) is None and cache.shard_of(bigger) is cache.shard_of(first[4])
        assert cache.evictions == 3
    finally:
        await b.stop()


async def test_idle_incremental_parks_and_wakes_on_its_partitions_only(broker):
    sid = (await open_session(broker, [("t", p, 0) for p in range(4)])).session_id
    dp = data_plane(broker)
    res = await fetch(broker, [], sid, 1, max_wait_ms=500)
    assert isinstance(res, Deferred) and not res.done
    # one watch key for the whole session, none per partition
    assert dp.fetch_purgatory.watched(("fetch-session", sid)) == 1
    assert all(dp.fetch_purgatory.watched(("t", p)) == 0 for p in range(4))
    broker.create_topic("other", 1, {})
    await produce(broker, "other", 0, batch([b"elsewhere"]))
    assert not res.done
    await produce(broker, "t", 1, batch([b"here"]))
    assert res.done
    resp = res.result()
    assert list(rows(resp)) == [("t", 1)] and resp.session_id == sid
    assert dp.fetch_purgatory.watched(("fetch-session", sid)) == 0 and not dp.parked


async def test_parked_incremental_expires_empty(broker):
    sid = (await open_session(broker, [("t", 0, 0)])).session_id
    res = await fetch(broker, [], sid, 1, max_wait_ms=500)
    assert not res.done
    broker.clock.advance(500)
    assert res.done and res.result().responses == [] and res.result().session_id == sid


async def test_parked_incremental_superseded_answers_the_epoch_error(broker):
    sid = (await open_session(broker, [("t", 0, 0)])).session_id
    res = await fetch(broker, [], sid, 1, max_wait_ms=500)
    assert not res.done
    resp = await fetch(broker, [], sid, 2)
    assert resp.error_code == 0
    assert res.done and res.result().error_code == E.INVALID_FETCH_SESSION_EPOCH


async def test_parked_incremental_waits_for_min_bytes(broker):
    sid = (await open_session(broker, [("t", 0, 0), ("t", 1, 0)])).session_id
    b1, b2 = batch([b"x" * 300]), batch([b"y" * 300])
    res = await fetch(broker, [], sid, 1, max_wait_ms=500, min_bytes=len(b1) + len(b2))
    await produce(broker, "t", 0, b1)
    assert not res.done
    await produce(broker, "t", 1, b2)
    assert res.done and set(rows(res.result())) == {("t", 0), ("t", 1)}


async def test_metrics_name_the_sessions(broker):
    sid = (await open_session(broker, [("t", 0, 0), ("t", 1, 0)])).session_id
    await fetch(broker, [], sid, 1)
    text = metrics_page(broker)().decode()
    assert "kcoord_fetch_sessions 1.0" in text
    assert "kcoord_fetch_session_partitions_cached 2.0" in text
    assert "kcoord_fetch_session_incremental_fetches_total 1.0" in text


async def test_an_idle_incremental_fetch_reads_no_partition(broker):
    broker.create_topic("wide", 50, {})
    for p in range(50):
        await produce(broker, "wide", p, batch([b"r"]))
    sid = (await open_session(broker, [("wide", p, 1) for p in range(50)])).session_id
    assert (await fetch(broker, [], sid, 1)).responses == []  # the session's first answer is settled
    reads = []

    def counted(plog, index):
        real = plog.read

        def read(*a, **k):
            reads.append(index)
            return real(*a, **k)
        return read

    for p in range(50):
        plog = broker.logs.get("wide", p)
        plog.read = counted(plog, p)
    for epoch in range(2, 12):
        assert (await fetch(broker, [], sid, epoch)).responses == []
    assert reads == []
    await produce(broker, "wide", 17, batch([b"new"]))
    resp = await fetch(broker, [], sid, 12)
    assert list(rows(resp)) == [("wide", 17)] and reads == [17]
