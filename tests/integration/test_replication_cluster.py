"""Replication between real kcoord nodes: three in-process Servers in one event loop, each with
its own log directory and listener, their replica managers driven by a test-only stand-in for
the controller that calls `apply` directly (the ZooKeeper controller is issue 23's other half).
Followers copy the leader over real sockets with Kafka's Fetch and OffsetsForLeaderEpoch;
confluent-kafka produces with acks=all and consumes from the leader; raw requests check the
exact error codes."""
from __future__ import annotations

import asyncio
import os
import time
from dataclasses import replace

import pytest
from aiokafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder
from conftest import call
from kafka.protocol.consumer import FetchRequest, ListOffsetsRequest
from kafka.protocol.producer import ProduceRequest

from kcoord.protocol.errors import ErrorCode as E
from kcoord.server.app import Server
from kcoord.server.cluster.partition_state import PartitionState
from kcoord.server.config import Config
from kcoord.server.node import replica_manager_for
from kcoord.server.replication.replica_manager import ReplicationSettings
from kcoord.storage.leader_epoch import CHECKPOINT_FILE, parse_checkpoint

TOPIC = "rep"
SETTINGS = ReplicationSettings(replica_lag_time_max_ms=1500, replica_fetch_wait_max_ms=100,
                               replica_fetch_backoff_ms=100)


class Controller:
    """The test's controller: holds each partition's state, accepts ISR changes that name the
    current version (as the ZooKeeper controller's conditional write does), pushes states."""

    def __init__(self) -> None:
        self.nodes: dict[int, Server] = {}
        self.state: PartitionState | None = None

    async def alter_isr(self, sent: PartitionState, isr: tuple[int, ...]) -> PartitionState | None:
        cur = self.state
        if cur is None or sent.zk_version != cur.zk_version or sent.leader_epoch != cur.leader_epoch:
            return None
        self.state = replace(cur, isr=isr, zk_version=cur.zk_version + 1)
        return self.state

    def endpoints(self) -> dict[int, tuple[str, int]]:
        return {nid: srv.bound[0] for nid, srv in self.nodes.items()}

    def publish(self, state: PartitionState, to: list[int] | None = None) -> None:
        self.state = state
        for nid in to or list(self.nodes):
            self.nodes[nid].broker.replicas.apply([state], self.endpoints())

    def rm(self, nid: int):
        return self.nodes[nid].broker.replicas

    def plog(self, nid: int):
        return self.nodes[nid].broker.logs.get(TOPIC, 0)

    def bootstrap(self, nid: int) -> str:
        host, port = self.nodes[nid].bound[0][:2]
        return f"{host}:{port}"


async def start_cluster(tmp_path) -> Controller:
    ctl = Controller()
    for nid in (1, 2, 3):
        srv = Server(Config({"log.dirs": str(tmp_path / f"node{nid}"), "node.id": nid,
                             "listeners": "PLAINTEXT://127.0.0.1:0", "offsets.topic.num.partitions": 1}))
        await srv.start()
        srv.broker.create_topic(TOPIC, 1, {"min.insync.replicas": "2"})
        rm = replica_manager_for(srv.broker, ctl.alter_isr, SETTINGS)
        srv.broker.replicas = rm
        rm.start()
        ctl.nodes[nid] = srv
    # epoch 0: what this node's single-node Metadata answer tells clients until the cluster's
    # metadata cache reports the controller's epochs
    ctl.publish(PartitionState(TOPIC, 0, leader=1, leader_epoch=0, isr=(1, 2, 3), replicas=(1, 2, 3),
                               controller_epoch=1, zk_version=0))
    return ctl


async def stop_cluster(ctl: Controller) -> None:
    # each stop in a task of its own: awaited in pytest-asyncio's finalizer task itself, some
    # never returned (after threads of asyncio.to_thread had run)
    for srv in ctl.nodes.values():  # every fetcher first: their connections hold the servers' drains
        await asyncio.wait_for(asyncio.ensure_future(srv.broker.replicas.stop()), 60)
    for srv in ctl.nodes.values():
        await asyncio.wait_for(asyncio.ensure_future(srv.stop()), 60)


@pytest.fixture
async def cluster(tmp_path):
    ctl = await start_cluster(tmp_path)
    yield ctl
    await stop_cluster(ctl)


async def until(cond, what: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.02)


def batch(values: list[bytes], *, pid: int = -1, epoch: int = -1, seq: int = -1) -> bytes:
    b = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=0, producer_id=pid,
                                  producer_epoch=epoch, base_sequence=seq, batch_size=2**31 - 1)
    for i, v in enumerate(values):
        b.append(i, int(time.time() * 1000), b"k", v, [])
    return bytes(b.build())


async def produce(ctl: Controller, nid: int, values: list[bytes], acks: int, timeout_ms: int = 10000, **kw):
    T = ProduceRequest.TopicProduceData
    req = ProduceRequest(version=9, transactional_id=None, acks=acks, timeout_ms=timeout_ms, topic_data=[
        T(name=TOPIC, partition_data=[T.PartitionProduceData(index=0, records=batch(values, **kw))])])
    resp = await asyncio.to_thread(call, ctl.bootstrap(nid), req, 9)
    return resp.responses[0].partition_responses[0]


async def consumer_fetch(ctl: Controller, nid: int, offset: int = 0, epoch: int = -1):
    T = FetchRequest.FetchTopic
    req = FetchRequest(version=12, replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=2**20, isolation_level=0,
                       session_id=0, session_epoch=-1, topics=[T(topic=TOPIC, partitions=[T.FetchPartition(
                           partition=0, current_leader_epoch=epoch, fetch_offset=offset, last_fetched_epoch=-1,
                           log_start_offset=-1, partition_max_bytes=2**20)])], forgotten_topics_data=[], rack_id="")
    resp = await asyncio.to_thread(call, ctl.bootstrap(nid), req, 12)
    return resp.responses[0].partitions[0]


def values_of(records: bytes) -> list[bytes]:
    out, pos = [], 0
    while pos < len(records):
        size = int.from_bytes(records[pos + 8:pos + 12], "big") + 12
        out += [r.value for r in DefaultRecordBatch(records[pos:pos + size])]
        pos += size
    return out


def log_bytes(ctl: Controller, nid: int) -> bytes:
    plog = ctl.plog(nid)
    return plog.read(plog.log_start_offset, 2**30) if plog.log_end_offset > plog.log_start_offset else b""


def in_sync(ctl: Controller, *nids: int) -> bool:
    leader = log_bytes(ctl, nids[0])
    return all(log_bytes(ctl, n) == leader for n in nids[1:])


async def latest(ctl: Controller, nid: int) -> tuple[int, int]:
    T = ListOffsetsRequest.ListOffsetsTopic
    req = ListOffsetsRequest(version=7, replica_id=-1, isolation_level=0, topics=[
        T(name=TOPIC, partitions=[T.ListOffsetsPartition(partition_index=0, current_leader_epoch=-1, timestamp=-1)])])
    p = (await asyncio.to_thread(call, ctl.bootstrap(nid), req, 7)).topics[0].partitions[0]
    return p.error_code, p.offset


async def test_acks_all_with_a_real_producer_reaches_every_replica_and_consumers(cluster):
    from confluent_kafka import Consumer, Producer

    ctl = cluster
    n = 300

    def produce_all() -> list:
        p = Producer({"bootstrap.servers": ctl.bootstrap(1), "acks": "all", "enable.idempotence": True,
                      "linger.ms": 5, "message.timeout.ms": 30000})
        errors: list = []
        for i in range(n):
            p.produce(TOPIC, b"v%04d" % i, partition=0, on_delivery=lambda e, m: errors.append(e) if e else None)
            p.poll(0)
        left = p.flush(30)
        return errors + (["undelivered"] * left)

    assert await asyncio.to_thread(produce_all) == []
    leader = ctl.plog(1)
    assert leader.log_end_offset == n
    assert leader.replica.hw == n  # every acknowledged record is on every ISR member
    await until(lambda: all(ctl.plog(i).log_end_offset == n for i in (2, 3)), "followers to copy everything")
    assert in_sync(ctl, 1, 2, 3)  # byte for byte: offsets, epochs and producer fields kept
    await until(lambda: all(ctl.plog(i).replica.hw == n for i in (2, 3)), "followers to learn the HW")
    for i in (1, 2, 3):  # the leader epoch checkpoint: epoch 0 from offset 0, in Kafka's format
        with open(os.path.join(ctl.plog(i).path, CHECKPOINT_FILE)) as f:
            assert f.read() == "0\n1\n0 0\n"
    assert await latest(ctl, 1) == (E.NONE, n)
    assert (await latest(ctl, 2))[0] == E.NOT_LEADER_OR_FOLLOWER

    def consume_all() -> list[bytes]:
        c = Consumer({"bootstrap.servers": ctl.bootstrap(1), "group.id": "g-rep", "auto.offset.reset": "earliest",
                      "enable.auto.commit": False})
        c.subscribe([TOPIC])
        got: list[bytes] = []
        deadline = time.monotonic() + 30
        while len(got) < n and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is not None and not m.error():
                got.append(m.value())
        c.close()
        return got

    assert await asyncio.to_thread(consume_all) == [b"v%04d" % i for i in range(n)]


async def test_high_watermark_isr_shrink_and_acks_all_errors(cluster):
    ctl = cluster
    assert (await produce(ctl, 1, [b"a", b"b"], acks=-1)).error_code == E.NONE
    await until(lambda: ctl.plog(3).log_end_offset == 2, "node 3 to copy")
    ctl.rm(3).stop_replicas([(TOPIC, 0)], delete=False)  # node 3 stops fetching
    # acks=1 is answered at once; the high watermark waits for node 3, consumers read below it
    r = await produce(ctl, 1, [b"c"], acks=1)
    assert r.error_code == E.NONE and r.base_offset == 2
    part = await consumer_fetch(ctl, 1)
    assert part.high_watermark == 2 and values_of(part.records) == [b"a", b"b"]
    assert await latest(ctl, 1) == (E.NONE, 2)
    # after replica.lag.time.max.ms node 3 leaves the ISR (through alter_isr) and the HW moves
    await until(lambda: ctl.state.isr == (1, 2), "the ISR to shrink")
    await until(lambda: ctl.plog(1).replica.hw == 3, "the high watermark to reach the log end")
    part = await consumer_fetch(ctl, 1)
    assert part.high_watermark == 3 and values_of(part.records) == [b"a", b"b", b"c"]
    assert (await produce(ctl, 1, [b"d"], acks=-1)).error_code == E.NONE  # 2 >= min.insync.replicas
    # node 2 stops too: acks=all waits for it, and once the ISR is {1} below min.insync.replicas=2
    # it is answered NOT_ENOUGH_REPLICAS_AFTER_APPEND; then refused before the append
    ctl.rm(2).stop_replicas([(TOPIC, 0)], delete=False)
    r = await produce(ctl, 1, [b"e"], acks=-1)
    assert r.error_code == E.NOT_ENOUGH_REPLICAS_AFTER_APPEND
    assert ctl.state.isr == (1,)
    end = ctl.plog(1).log_end_offset
    assert (await produce(ctl, 1, [b"f"], acks=-1)).error_code == E.NOT_ENOUGH_REPLICAS
    assert ctl.plog(1).log_end_offset == end  # nothing appended
    assert (await produce(ctl, 1, [b"g"], acks=1)).error_code == E.NONE  # acks=1 still served
    # the followers come back (a new state from the controller), catch up and rejoin the ISR
    ctl.publish(replace(ctl.state, leader_epoch=2, zk_version=ctl.state.zk_version + 1))
    await until(lambda: set(ctl.state.isr) == {1, 2, 3}, "the ISR to expand again")
    await until(lambda: in_sync(ctl, 1, 2, 3), "all replicas equal")
    assert (await produce(ctl, 1, [b"h"], acks=-1)).error_code == E.NONE


async def test_acks_all_times_out_while_a_follower_is_in_the_isr_but_silent(cluster):
    ctl = cluster
    ctl.rm(2).stop_replicas([(TOPIC, 0)], delete=False)
    ctl.rm(3).stop_replicas([(TOPIC, 0)], delete=False)
    r = await produce(ctl, 1, [b"x"], acks=-1, timeout_ms=200)  # before the lag time passes
    assert r.error_code == E.REQUEST_TIMED_OUT


async def test_a_leader_change_truncates_the_old_leaders_unreplicated_records(cluster):
    ctl = cluster
    pid = 4000
    assert (await produce(ctl, 1, [b"a"], acks=-1, pid=pid, epoch=0, seq=0)).error_code == E.NONE
    await until(lambda: in_sync(ctl, 1, 2, 3), "replicas equal")
    # node 1 is cut off from its followers: its acks=1 writes reach only its own log
    for nid in (2, 3):
        ctl.rm(nid).stop_replicas([(TOPIC, 0)], delete=False)
    assert (await produce(ctl, 1, [b"lost1", b"lost2"], acks=1)).error_code == E.NONE
    assert ctl.plog(1).log_end_offset == 3
    # the controller elects node 2 (epoch 2, ISR 2,3); node 1 hears of it later
    new = PartitionState(TOPIC, 0, leader=2, leader_epoch=2, isr=(2, 3), replicas=(1, 2, 3), controller_epoch=1,
                         zk_version=5)
    ctl.publish(new, to=[2, 3])
    # the new leader continues the idempotent producer's sequence (state from replicated batches)
    assert (await produce(ctl, 2, [b"b"], acks=-1, pid=pid, epoch=0, seq=1)).error_code == E.NONE
    dup = await produce(ctl, 2, [b"b"], acks=-1, pid=pid, epoch=0, seq=1)
    assert dup.error_code == E.NONE and dup.base_offset == 1  # a duplicate, answered with its offset
    assert (await produce(ctl, 2, [b"c"], acks=-1)).error_code == E.NONE
    # node 1 still thinks it leads epoch 0; a client with epoch 2 is told it is behind
    assert (await consumer_fetch(ctl, 1, epoch=2)).error_code == E.UNKNOWN_LEADER_EPOCH
    assert (await consumer_fetch(ctl, 2, epoch=1)).error_code == E.FENCED_LEADER_EPOCH
    ctl.publish(new, to=[1])
    # at once it stops answering as leader
    assert (await produce(ctl, 1, [b"z"], acks=1)).error_code == E.NOT_LEADER_OR_FOLLOWER
    # a follower now: a consumer's v11+ fetch is served (KIP-392), below its high watermark only,
    # never the two records it alone has
    f = await consumer_fetch(ctl, 1)
    assert f.error_code == E.NONE and len(values_of(f.records)) == f.high_watermark
    # it truncates its two unreplicated records (OffsetsForLeaderEpoch) and copies the leader's
    await until(lambda: in_sync(ctl, 2, 1, 3), "node 1 to converge on the new leader's log")
    assert values_of(log_bytes(ctl, 1)) == [b"a", b"b", b"c"]
    with open(os.path.join(ctl.plog(1).path, CHECKPOINT_FILE)) as f:
        assert parse_checkpoint(f.read()) == [(0, 0), (2, 1)]
    # an older state is refused
    stale = replace(new, leader=1, leader_epoch=1)
    assert ctl.rm(1).apply([stale], ctl.endpoints()) == {(TOPIC, 0): E.FENCED_LEADER_EPOCH}


async def test_a_fetch_v15_names_its_follower_in_replica_state(cluster):
    """Fetch v15+ carries the follower's id in the ReplicaState tagged field: the leader counts
    that fetch offset as the follower's log end (here node 3's, sent by hand)."""
    ctl = cluster
    ctl.rm(3).stop_replicas([(TOPIC, 0)], delete=False)
    assert (await produce(ctl, 1, [b"a", b"b"], acks=1)).error_code == E.NONE
    await until(lambda: ctl.plog(1).replica.followers[2].log_end_offset == 2, "node 2 to copy and say so")
    assert ctl.plog(1).replica.hw == 0  # node 3, in the ISR, has fetched nothing
    T = FetchRequest.FetchTopic
    topic_id = ctl.nodes[1].broker.topics.get(TOPIC).topic_id
    req = FetchRequest(version=15, replica_state=FetchRequest.ReplicaState(replica_id=3, replica_epoch=-1),
                       max_wait_ms=0, min_bytes=1, max_bytes=2**20, isolation_level=0, session_id=0,
                       session_epoch=-1, topics=[T(topic_id=topic_id, partitions=[T.FetchPartition(
                           partition=0, current_leader_epoch=0, fetch_offset=2, last_fetched_epoch=-1,
                           log_start_offset=-1, partition_max_bytes=2**20)])], forgotten_topics_data=[], rack_id="")
    part = (await asyncio.to_thread(call, ctl.bootstrap(1), req, 15)).responses[0].partitions[0]
    assert part.error_code == E.NONE and part.high_watermark == 2
    assert ctl.plog(1).replica.hw == 2


async def test_a_parked_acks_all_produce_is_answered_when_leadership_moves(cluster):
    ctl = cluster
    for nid in (2, 3):
        ctl.rm(nid).stop_replicas([(TOPIC, 0)], delete=False)
    answer = asyncio.ensure_future(produce(ctl, 1, [b"x"], acks=-1, timeout_ms=60000))
    await until(lambda: ctl.rm(1).produce_purgatory.watched((TOPIC, 0)) == 1, "the produce to park")
    started = time.monotonic()
    ctl.publish(PartitionState(TOPIC, 0, leader=2, leader_epoch=1, isr=(2, 3), replicas=(1, 2, 3),
                               controller_epoch=1, zk_version=9), to=[1])
    assert (await answer).error_code == E.NOT_LEADER_OR_FOLLOWER
    assert time.monotonic() - started < 30  # answered at the change, not at its 60 s timeout
