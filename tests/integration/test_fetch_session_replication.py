"""Incremental fetch sessions (KIP-227) on a replicated partition, on three in-process nodes
(the stand-in controller of test_replication_cluster.py): a session's incremental fetch is
checked as a full fetch is, against the partition's leader epoch, reads only below the high
watermark, and is refused by a node that no longer leads. Java consumers fetch this way; the
Jepsen-style test (test_jepsen.py) found them stalled on UNKNOWN_LEADER_EPOCH once a
partition's leader epoch passed 0."""
from __future__ import annotations

import asyncio
from dataclasses import replace

from conftest import call
from kafka.protocol.consumer import FetchRequest
from test_replication_cluster import TOPIC, cluster, produce, until, values_of  # noqa: F401 - the fixture

from kcoord.protocol.errors import ErrorCode as E


async def session_fetch(ctl, nid: int, session_id: int, session_epoch: int, offset: int | None, epoch: int = -1):
    """One Fetch v12 of the session (offset None: the partition is not named, as in an
    incremental fetch that changes nothing); returns (session error, session id, partitions)."""
    T = FetchRequest.FetchTopic
    topics = [] if offset is None else [T(topic=TOPIC, partitions=[T.FetchPartition(
        partition=0, current_leader_epoch=epoch, fetch_offset=offset, last_fetched_epoch=-1,
        log_start_offset=-1, partition_max_bytes=2**20)])]
    req = FetchRequest(version=12, replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=2**20, isolation_level=0,
                       session_id=session_id, session_epoch=session_epoch, topics=topics, forgotten_topics_data=[],
                       rack_id="")
    r = await asyncio.to_thread(call, ctl.bootstrap(nid), req, 12)
    return r.error_code, r.session_id, [p for t in r.responses for p in t.partitions]


async def test_an_incremental_fetch_is_checked_against_the_replicas_epoch_and_high_watermark(cluster):  # noqa: F811
    ctl = cluster
    ctl.publish(replace(ctl.state, leader_epoch=2, zk_version=ctl.state.zk_version + 1))
    assert (await produce(ctl, 1, [b"a", b"b"], acks=-1)).error_code == E.NONE
    err, sid, parts = await session_fetch(ctl, 1, 0, 0, 0, epoch=2)  # full: creates the session
    assert err == E.NONE and sid != 0 and parts[0].error_code == E.NONE
    assert values_of(parts[0].records) == [b"a", b"b"]
    # the followers stop: a record beyond the high watermark
    for nid in (2, 3):
        ctl.rm(nid).stop_replicas([(TOPIC, 0)], delete=False)
    assert (await produce(ctl, 1, [b"c"], acks=1)).error_code == E.NONE
    assert ctl.plog(1).log_end_offset == 3 and ctl.plog(1).replica.hw == 2
    # incremental, at the leader's epoch: served (it was UNKNOWN_LEADER_EPOCH: checked against 0)
    err, _, parts = await session_fetch(ctl, 1, sid, 1, 2, epoch=2)
    assert err == E.NONE and [(p.error_code, values_of(p.records)) for p in parts] in ([], [(E.NONE, [])])
    # without an epoch: nothing above the high watermark (it read the unreplicated "c")
    err, _, parts = await session_fetch(ctl, 1, sid, 2, 2, epoch=-1)
    assert err == E.NONE and all(values_of(p.records) == [] for p in parts)
    err, _, parts = await session_fetch(ctl, 1, sid, 3, None)
    assert err == E.NONE and all(values_of(p.records) == [] for p in parts)
    # an older epoch is fenced, as in a full fetch
    err, _, parts = await session_fetch(ctl, 1, sid, 4, 2, epoch=1)
    assert [p.error_code for p in parts] == [E.FENCED_LEADER_EPOCH]
    # leadership moves away: the old leader, a follower now, serves a consumer's v11+ fetch as
    # Kafka does (KIP-392), below its high watermark only (nothing: "c" is above it)
    ctl.publish(replace(ctl.state, leader=2, leader_epoch=3, isr=(2, 3), zk_version=ctl.state.zk_version + 1),
                to=[1])
    err, _, parts = await session_fetch(ctl, 1, sid, 5, 2, epoch=-1)
    assert [(p.error_code, values_of(p.records)) for p in parts] == [(E.NONE, [])]
    # the records the new leader has are not served here
    err, _, parts = await session_fetch(ctl, 1, sid, 6, None)
    assert all(values_of(p.records) == [] for p in parts)
