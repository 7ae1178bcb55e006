"""Followers fetch in an incremental fetch session (KIP-227), as Kafka's replica fetchers do
(tests/integration/test_replication_cluster.py's three in-process nodes, real sockets): each
follower opens a session on the leader with its first fetch and then sends incremental ones;
an idle partition the followers do not name stays in the ISR well past replica.lag.time.max.ms
(the leader counts an incremental fetch as a fetch of every partition of the session);
acks=all goes on being answered; a session the leader lost is opened again with a full fetch."""
from __future__ import annotations

import asyncio
import time

from test_replication_cluster import SETTINGS, cluster, produce, until  # noqa: F401 - the fixture

from kcoord.protocol.errors import ErrorCode as E


def session_of(ctl, nid: int, leader: int = 1):
    return ctl.rm(nid).fetchers.fetchers[leader].session


def leader_sessions(ctl, leader: int = 1):
    return ctl.nodes[leader].broker.parts.data_plane.get().fetch_sessions


async def test_followers_fetch_incrementally_and_stay_in_the_isr(cluster):  # noqa: F811 - the fixture
    ctl = cluster
    for nid in (2, 3):
        await until(lambda nid=nid: 1 in ctl.rm(nid).fetchers.fetchers and session_of(ctl, nid).epoch > 1,
                    f"node {nid}'s fetch session with the leader")
    cache = leader_sessions(ctl)
    ids = {session_of(ctl, nid).session_id for nid in (2, 3)}
    assert 0 not in ids and len(ids) == 2
    assert all(cache.get(sid) is not None and cache.get(sid).privileged for sid in ids)
    served = cache.incremental_fetches
    # idle for three times replica.lag.time.max.ms: the followers' fetches name no partition,
    # and the ISR keeps both of them
    idle_until = time.monotonic() + 3 * SETTINGS.replica_lag_time_max_ms / 1000
    while time.monotonic() < idle_until:
        assert ctl.state.isr == (1, 2, 3), f"the ISR shrank to {ctl.state.isr} while the followers fetched"
        await asyncio.sleep(0.1)
    assert cache.incremental_fetches > served
    assert {session_of(ctl, nid).session_id for nid in (2, 3)} == ids  # the same sessions all along
    p = await produce(ctl, 1, [b"a", b"b"], acks=-1)
    assert (p.error_code, p.base_offset) == (E.NONE, 0)
    await until(lambda: all(ctl.plog(nid).log_end_offset == 2 for nid in (2, 3)), "both followers copy the records")
    # the leader loses node 2's session: node 2 opens a new one with a full fetch and goes on
    lost = session_of(ctl, 2).session_id
    cache.remove(lost)
    await until(lambda: session_of(ctl, 2).session_id not in (0, lost) and session_of(ctl, 2).epoch > 1,
                "node 2's new fetch session")
    p = await produce(ctl, 1, [b"c"], acks=-1)
    assert (p.error_code, p.base_offset) == (E.NONE, 2)
    await until(lambda: all(ctl.plog(nid).log_end_offset == 3 for nid in (2, 3)), "both followers copy the record")
    assert ctl.state.isr == (1, 2, 3)
