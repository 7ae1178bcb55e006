"""Incremental fetch sessions (KIP-227) on a replicated partition: the session path serves a
leader's partition as the sessionless and full paths do (tests/integration/
test_replication_cluster.py's in-process nodes). A consumer's incremental fetch reads below the
high watermark only, its current_leader_epoch is checked against the partition's epoch (not a
single node's 0), and a partition this node no longer leads answers NOT_LEADER_OR_FOLLOWER.
Java's KafkaConsumer uses sessions: after a failover it sends the new epoch in incremental
fetches, which were answered as if the partition were at epoch 0."""
from __future__ import annotations

import asyncio
from dataclasses import replace

from conftest import call
from kafka.protocol.consumer import FetchRequest
from test_replication_cluster import TOPIC, cluster, produce, until, values_of  # noqa: F401 - the fixture

from kcoord.protocol.errors import ErrorCode as E


async def fetch(ctl, nid: int, offset: int, epoch: int, session_id: int, session_epoch: int, wait_ms: int = 0):
    """Fetch v12 of partition 0 in a session (session_epoch 0: a full fetch that opens one); an
    incremental request names the partition again only when `offset` is given."""
    T = FetchRequest.FetchTopic
    topics = [] if offset < 0 else [T(topic=TOPIC, partitions=[T.FetchPartition(
        partition=0, current_leader_epoch=epoch, fetch_offset=offset, last_fetched_epoch=-1, log_start_offset=-1,
        partition_max_bytes=2**20)])]
    req = FetchRequest(version=12, replica_id=-1, max_wait_ms=wait_ms, min_bytes=1, max_bytes=2**20,
                       isolation_level=0, session_id=session_id, session_epoch=session_epoch, topics=topics,
                       forgotten_topics_data=[], rack_id="")
    return await asyncio.to_thread(call, ctl.bootstrap(nid), req, 12)


def part(resp):
    return resp.responses[0].partitions[0] if resp.responses else None


async def test_an_incremental_fetch_reads_below_the_high_watermark_in_the_partitions_epoch(cluster):  # noqa: F811
    ctl = cluster
    assert (await produce(ctl, 1, [b"a", b"b"], acks=-1)).error_code == E.NONE
    full = await fetch(ctl, 1, 0, 0, 0, 0)
    assert full.error_code == E.NONE and full.session_id > 0
    assert values_of(part(full).records) == [b"a", b"b"] and part(full).high_watermark == 2
    sid = full.session_id
    # node 3 stops fetching: an acks=1 record stays above the high watermark
    ctl.rm(3).stop_replicas([(TOPIC, 0)], delete=False)
    assert (await produce(ctl, 1, [b"c"], acks=1)).error_code == E.NONE
    await until(lambda: ctl.plog(2).log_end_offset == 3, "node 2 to copy it")
    inc = await fetch(ctl, 1, 2, 0, sid, 1)
    assert inc.error_code == E.NONE
    p = part(inc)
    assert p is None or (p.error_code == E.NONE and p.high_watermark == 2 and values_of(p.records) == []), p
    # a new epoch with the same leader (the controller's next state): the client sends it
    st = ctl.state
    ctl.publish(replace(st, leader_epoch=st.leader_epoch + 1, isr=(1, 2), zk_version=st.zk_version + 1), to=[1, 2])
    epoch = ctl.state.leader_epoch
    await until(lambda: ctl.plog(1).replica.hw == 3, "the high watermark past c (ISR 1, 2)")
    inc = await fetch(ctl, 1, 2, epoch, sid, 2)
    assert inc.error_code == E.NONE
    assert part(inc).error_code == E.NONE, part(inc)
    assert values_of(part(inc).records) == [b"c"] and part(inc).high_watermark == 3
    assert part(await fetch(ctl, 1, 3, epoch - 1, sid, 3)).error_code == E.FENCED_LEADER_EPOCH
    # node 2 leads now: node 1, a follower, serves a consumer's v11+ fetch as Kafka does
    # (KIP-392), below the high watermark it knows
    ctl.publish(replace(ctl.state, leader=2, leader_epoch=epoch + 1, zk_version=ctl.state.zk_version + 1), to=[1, 2])
    p = part(await fetch(ctl, 1, 3, -1, sid, 4))
    assert p is None or (p.error_code == E.NONE and values_of(p.records) == []), p
