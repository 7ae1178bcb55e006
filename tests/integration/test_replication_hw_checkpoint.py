"""replication-offset-checkpoint on real kcoord nodes (in-process Servers, real log
directories and sockets, the replica manager driven by the test's controller as in
test_replication_cluster.py): the high watermarks are written in Kafka's format, and a node
restarted and made leader with a follower that has not fetched yet serves what was committed
at once (its high watermark starts from the file, not from 0)."""
from __future__ import annotations

import asyncio
import os

from test_replication_cluster import TOPIC, Controller, consumer_fetch, latest, produce, until, values_of

from kcoord.protocol.errors import ErrorCode as E
from kcoord.server.app import Server
from kcoord.server.cluster.partition_state import PartitionState
from kcoord.server.config import Config
from kcoord.server.node import replica_manager_for
from kcoord.server.replication.hw_checkpoint import FILE
from kcoord.server.replication.replica_manager import ReplicationSettings

SETTINGS = ReplicationSettings(replica_lag_time_max_ms=60000, replica_fetch_wait_max_ms=100,
                               replica_fetch_backoff_ms=100, replica_high_watermark_checkpoint_interval_ms=100)


async def node(ctl: Controller, tmp_path, nid: int = 1) -> Server:
    srv = Server(Config({"log.dirs": str(tmp_path / f"node{nid}"), "node.id": nid,
                         "listeners": "PLAINTEXT://127.0.0.1:0", "offsets.topic.num.partitions": 1}))
    await srv.start()
    if srv.broker.topics.get(TOPIC) is None:
        srv.broker.create_topic(TOPIC, 1, {})
    rm = replica_manager_for(srv.broker, ctl.alter_isr, SETTINGS)
    srv.broker.replicas = rm
    rm.start()
    ctl.nodes[nid] = srv
    return srv


async def stop(srv: Server) -> None:
    await asyncio.wait_for(asyncio.ensure_future(srv.broker.replicas.stop()), 60)
    await asyncio.wait_for(asyncio.ensure_future(srv.stop()), 60)


def checkpoint(tmp_path, nid: int = 1) -> str:
    path = tmp_path / f"node{nid}" / FILE
    return path.read_text() if path.exists() else ""


async def test_a_restarted_leader_starts_from_the_checkpointed_high_watermark(tmp_path):
    ctl = Controller()
    srv = await node(ctl, tmp_path)
    try:
        ctl.publish(PartitionState(TOPIC, 0, leader=1, leader_epoch=0, isr=(1,), replicas=(1, 2),
                                   controller_epoch=1, zk_version=0))
        for i in range(10):
            assert (await produce(ctl, 1, [b"v%d" % i], acks=1)).error_code == E.NONE
        assert ctl.plog(1).replica.hw == 10
        await until(lambda: checkpoint(tmp_path) == f"0\n1\n{TOPIC} 0 10\n", "the checkpoint of 10")
    finally:
        await stop(srv)
        ctl.nodes.clear()
    assert checkpoint(tmp_path) == f"0\n1\n{TOPIC} 0 10\n"

    # back, and leader in a new epoch with node 2 in its ISR (node 2 never fetches: it is not
    # running): the high watermark is the checkpoint's, consumers read everything at once
    srv = await node(ctl, tmp_path)
    try:
        ctl.publish(PartitionState(TOPIC, 0, leader=1, leader_epoch=1, isr=(1, 2), replicas=(1, 2),
                                   controller_epoch=1, zk_version=1))
        assert ctl.plog(1).replica.hw == 10
        assert await latest(ctl, 1) == (E.NONE, 10)
        got = await consumer_fetch(ctl, 1)
        assert got.error_code == E.NONE and got.high_watermark == 10
        assert values_of(got.records) == [b"v%d" % i for i in range(10)]
        # new records wait for node 2 (the ISR) as before: the high watermark stays
        assert (await produce(ctl, 1, [b"late"], acks=1)).error_code == E.NONE
        assert ctl.plog(1).replica.hw == 10
        # a deleted partition leaves the file
        srv.broker.replicas.stop_replicas([(TOPIC, 0)], delete=True)
        await until(lambda: checkpoint(tmp_path) == "0\n0\n", "the entry to go")
        assert not os.path.exists(tmp_path / "node1" / f"{TOPIC}-0")
    finally:
        await stop(srv)
