"""Cluster nodes in-process against a real ZooKeeper (no Kafka listeners): the leader-side
ISR change fenced by the state znode's version, the controller's epoch fencing, and session
loss fencing a leader."""
from __future__ import annotations

import asyncio
import time
import uuid

import pytest

from kcoord.server.cluster.builder import controller_settings
from kcoord.server.cluster.node import ClusterNode
from kcoord.server.cluster.zk import Zk
from kcoord.server.cluster.znodes import BrokerInfo
from kcoord.server.config import Config

pytestmark = pytest.mark.integration


async def until(cond, timeout: float = 30.0, what: str = "condition"):
    deadline = time.monotonic() + timeout
    while True:
        value = cond()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.05)


async def node(connect: str, broker_id: int, session_ms: int = 4000) -> ClusterNode:
    cfg = Config({"node.id": broker_id, "offsets.topic.replication.factor": 5, "auto.leader.rebalance.enable": False})
    zk = Zk(connect, session_ms, 20000, asyncio.get_running_loop())
    n = ClusterNode(zk, broker_id, BrokerInfo(broker_id, {"PLAINTEXT": ("127.0.0.1", 9000 + broker_id)}),
                    None, controller_settings(cfg, lambda t: {}), session_ms)
    await n.start("test-cluster")
    return n


@pytest.fixture
def connect(kcoord_zookeeper: str) -> str:
    return f"{kcoord_zookeeper}/nodes-{uuid.uuid4().hex[:8]}"


async def test_a_leaders_isr_change_is_fenced_by_the_state_znodes_version(connect):
    a, b = await node(connect, 1), await node(connect, 2)
    try:
        await until(lambda: a.controller_id in (1, 2) and b.controller_id == a.controller_id and a.cache.live == {1, 2},
                    what="a controller")
        await a.create_topic("t", 1, 2, {0: (1, 2)}, {})
        st = await until(lambda: a.cache.state("t", 0), what="the partition's state")
        assert (st.leader, st.isr) == (1, (1, 2)) and a.leads("t", 0) and not b.leads("t", 0)
        shrunk = await a.alter_isr(st, (1,))
        assert shrunk is not None and shrunk.isr == (1,) and shrunk.zk_version == st.zk_version + 1
        assert shrunk.leader_epoch == st.leader_epoch
        await until(lambda: b.cache.state("t", 0) == shrunk, what="the other node to see the change")
        assert await a.alter_isr(st, (1, 2)) is None  # the version it names is gone
        assert await b.alter_isr(shrunk, (2,)) is None  # not the leader
        grown = await a.alter_isr(shrunk, (1, 2))
        assert grown is not None and grown.isr == (1, 2)
    finally:
        await a.stop()
        await b.stop()


async def test_a_leader_that_loses_its_session_stops_leading_and_another_is_elected(connect):
    a, b = await node(connect, 1), await node(connect, 2)
    try:
        await until(lambda: a.controller_id in (1, 2) and a.cache.live == {1, 2}, what="a controller")
        await a.create_topic("t", 1, 2, {0: (1, 2)}, {})
        await until(lambda: a.leads("t", 0), what="node 1 to lead")
        a.zk.client.stop()  # node 1's session ends: it stops leading as soon as it hears of it
        await until(lambda: not a.leads("t", 0), timeout=5, what="node 1 to stop leading")
        st = await until(lambda: b.cache.state("t", 0) if b.cache.state("t", 0) and
                         b.cache.state("t", 0).leader == 2 else None, timeout=40, what="node 2 to be elected")
        assert st.isr == (2,) and b.leads("t", 0) and b.controller_id == 2
    finally:
        await a.stop()
        await b.stop()


async def test_a_deposed_controller_cannot_write(connect):
    a = await node(connect, 1)
    try:
        await until(lambda: a.controller is not None, what="node 1 to be controller")
        old = a.controller
        # another controller (broker 9, its own session) takes office as its election would:
        # /controller is its, and the epoch moves on, in one multi-op
        other = Zk(connect, 10000, 20000, asyncio.get_running_loop())
        await other.start()
        data, stat = await other.get("/controller_epoch")

        def takeover(tx):
            tx.delete("/controller")
            tx.create("/controller", b'{"version":1,"brokerid":9,"timestamp":"0"}', ephemeral=True)
            tx.set_data("/controller_epoch", str(int(data) + 1).encode(), stat)

        await other.transaction(takeover)
        await a.create_topic("late", 1, 1, {0: (1,)}, {})
        await asyncio.sleep(1.0)
        assert await a.zk.get_or_none("/brokers/topics/late/partitions/0/state") is None
        assert not old.active and a.controller is None and a.controller_id == 9  # it stood down
        await other.stop()
    finally:
        await a.stop()
