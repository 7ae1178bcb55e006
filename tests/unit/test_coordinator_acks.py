"""A cluster node's coordinator writes wait for the in-sync replicas (server/coordinator/acks.py,
offsets.commit.required.acks): a group runtime over real logs in tmp_path and a real
ReplicaManager (server/replication/) leading the group's __consumer_offsets partition with
followers that do not fetch until the test says so. A commit or a group write is answered
only once every ISR member has it; the replica manager's failures reach the client as Kafka's
group coordinator maps them (NOT_ENOUGH_REPLICAS, NOT_ENOUGH_REPLICAS_AFTER_APPEND,
REQUEST_TIMED_OUT -> COORDINATOR_NOT_AVAILABLE; NOT_LEADER_OR_FOLLOWER -> NOT_COORDINATOR),
and what was not acknowledged is not replayed."""
from __future__ import annotations

import asyncio
from typing import Any

import pytest
from kafka.protocol.consumer import SyncGroupRequest
from test_coordinator_immigration import GROUP, P, answer, commit, commit_error, fetch, join, runtime
from test_group_helpers import wire

from kcoord.protocol.errors import ErrorCode as E
from kcoord.protocol.errors import coordinator_append_error
from kcoord.protocol.topics import OFFSETS_TOPIC
from kcoord.server.clock import FakeClock
from kcoord.server.cluster.partition_state import PartitionState
from kcoord.server.coordinator.acks import ReplicaAcks
from kcoord.server.deferred import Deferred
from kcoord.server.replication.replica_manager import DataHooks, ReplicaManager
from kcoord.storage.batch import split_batches

EPOCH = 4


class Cluster:
    """The runtime, and the replica manager of node 1 leading partition P."""

    def __init__(self, tmp_path: Any, acks: int = -1, min_isr: int = 2, isr: tuple[int, ...] = (1, 2)) -> None:
        self.rt, self.logs = runtime(tmp_path)
        self.clock = FakeClock()

        async def alter_isr(state: PartitionState, new_isr: tuple[int, ...]) -> PartitionState | None:
            return None  # no controller here: the test changes states with apply()

        hooks = DataHooks(log_for=lambda t, p: self.logs.get(t, p), woken=lambda t, p: None,
                          truncated=lambda t, p: None, replicated=lambda *a: None)
        self.manager = ReplicaManager(1, self.clock, alter_isr, hooks)
        self.state = PartitionState(OFFSETS_TOPIC, P, 1, EPOCH, isr, (1, 2, 3), 1, 0)
        assert not self.manager.apply([self.state], {})
        self.replica = self.manager.get(OFFSETS_TOPIC, P)
        self.rt.replicate(ReplicaAcks(self.manager, acks, lambda topic: min_isr))

    @property
    def plog(self) -> Any:
        return self.logs.get(OFFSETS_TOPIC, P)

    async def waiting_for_replicas(self) -> None:
        """Until the append is durable here and parked on the in-sync replicas."""
        for _ in range(2000):
            if self.manager.produce_purgatory.watched((OFFSETS_TOPIC, P)):
                return
            await asyncio.sleep(0.001)
        raise AssertionError("the append never waited for the replicas")

    def follower_fetched(self, broker: int = 2) -> None:
        self.manager.follower_fetched(self.replica, broker, self.plog.log_end_offset)

    def become(self, leader: int, epoch: int, isr: tuple[int, ...]) -> None:
        self.state = PartitionState(OFFSETS_TOPIC, P, leader, epoch, isr, (1, 2, 3), 1, self.state.zk_version + 1)
        self.manager.apply([self.state], {})


@pytest.fixture
async def cluster(tmp_path):
    c = Cluster(tmp_path)
    await c.rt.load(P, EPOCH)
    yield c
    c.logs.close()


async def test_a_commit_is_answered_once_every_in_sync_replica_has_it(cluster):
    pending = commit(cluster.rt, 5)
    await cluster.waiting_for_replicas()
    for _ in range(20):
        await asyncio.sleep(0.005)
    assert isinstance(pending, Deferred) and not pending.done  # durable here; ISR member 2 has not fetched it
    assert fetch(cluster.rt) != (E.NONE, 5)  # not replayed before it is acknowledged
    cluster.follower_fetched()
    assert commit_error(await answer(pending)) == E.NONE
    assert fetch(cluster.rt) == (E.NONE, 5)
    # appended by the leader at its epoch: the batches carry it (followers' epoch caches)
    headers = split_batches(cluster.plog.read(0, 1 << 20))
    assert headers and {h.partition_leader_epoch for h in headers} == {EPOCH}


async def test_an_isr_below_min_insync_replicas_refuses_the_append(tmp_path):
    c = Cluster(tmp_path, isr=(1,), min_isr=2)
    await c.rt.load(P, EPOCH)
    # NOT_ENOUGH_REPLICAS, as the group coordinator maps it
    assert commit_error(await answer(commit(c.rt, 5))) == E.COORDINATOR_NOT_AVAILABLE
    assert c.plog.log_end_offset == 0  # nothing appended
    assert fetch(c.rt) != (E.NONE, 5)
    c.logs.close()


async def test_replicas_that_never_fetch_time_the_commit_out(cluster):
    pending = commit(cluster.rt, 5)
    await cluster.waiting_for_replicas()
    cluster.clock.advance(5000)  # offsets.commit.timeout.ms: REQUEST_TIMED_OUT
    assert commit_error(await answer(pending)) == E.COORDINATOR_NOT_AVAILABLE
    assert fetch(cluster.rt) != (E.NONE, 5)  # in the log, not acknowledged: not in memory


async def test_an_isr_shrinking_below_min_insync_replicas_after_the_append(cluster):
    pending = commit(cluster.rt, 5)
    await cluster.waiting_for_replicas()
    cluster.become(1, EPOCH + 1, (1,))  # the controller took 2 out: the high watermark moves alone
    # NOT_ENOUGH_REPLICAS_AFTER_APPEND, mapped
    assert commit_error(await answer(pending)) == E.COORDINATOR_NOT_AVAILABLE


async def test_leadership_moving_while_the_commit_waits_answers_not_coordinator(cluster):
    pending = commit(cluster.rt, 5)
    await cluster.waiting_for_replicas()
    cluster.become(2, EPOCH + 1, (2,))  # NOT_LEADER_OR_FOLLOWER for what was waiting
    assert commit_error(await answer(pending)) == E.NOT_COORDINATOR
    assert fetch(cluster.rt) != (E.NONE, 5)
    # and a later write to a partition this node follows is refused before appending
    end = cluster.plog.log_end_offset
    assert commit_error(await answer(commit(cluster.rt, 6))) == E.NOT_COORDINATOR
    assert cluster.plog.log_end_offset == end


async def test_a_group_write_waits_for_the_replicas_too(cluster):
    first = await answer(join(cluster.rt))
    assert first.error_code == E.MEMBER_ID_REQUIRED
    joined = join(cluster.rt, first.member_id)
    if isinstance(joined, Deferred) and not joined.done:
        cluster.rt.shard.clock.advance(0)  # group.initial.rebalance.delay.ms=0
    joined = await answer(joined)
    assert joined.error_code == E.NONE, joined
    req = SyncGroupRequest(version=3, group_id=GROUP, generation_id=joined.generation_id,
                           member_id=joined.member_id, group_instance_id=None,
                           assignments=[SyncGroupRequest.SyncGroupRequestAssignment(
                               member_id=joined.member_id, assignment=b"x")])
    synced = cluster.rt.submit(cluster.rt.shard.sync_group(wire(req, 3), 3))
    await cluster.waiting_for_replicas()
    assert isinstance(synced, Deferred) and not synced.done  # the group record is not acknowledged yet
    cluster.follower_fetched()
    assert (await answer(synced)).error_code == E.NONE


async def test_acks_1_answers_once_durable_here(tmp_path):
    c = Cluster(tmp_path, acks=1)
    await c.rt.load(P, EPOCH)
    assert commit_error(await answer(commit(c.rt, 5))) == E.NONE  # no follower fetched
    assert fetch(c.rt) == (E.NONE, 5)
    c.logs.close()


async def test_acks_the_replica_manager_does_not_take_are_refused(tmp_path):
    c = Cluster(tmp_path, acks=2)  # valid for the setting (<= the replication factor), not for appends
    await c.rt.load(P, EPOCH)
    assert commit_error(await answer(commit(c.rt, 5))) == E.INVALID_REQUIRED_ACKS
    c.logs.close()


def test_replication_failures_map_as_kafkas_group_coordinator_maps_them():
    assert {code: coordinator_append_error(code) for code in (
        E.NOT_ENOUGH_REPLICAS, E.NOT_ENOUGH_REPLICAS_AFTER_APPEND, E.REQUEST_TIMED_OUT, E.UNKNOWN_TOPIC_OR_PARTITION,
        E.NOT_LEADER_OR_FOLLOWER, E.KAFKA_STORAGE_ERROR, E.INVALID_REQUIRED_ACKS)} == {
        E.NOT_ENOUGH_REPLICAS: E.COORDINATOR_NOT_AVAILABLE,
        E.NOT_ENOUGH_REPLICAS_AFTER_APPEND: E.COORDINATOR_NOT_AVAILABLE,
        E.REQUEST_TIMED_OUT: E.COORDINATOR_NOT_AVAILABLE,
        E.UNKNOWN_TOPIC_OR_PARTITION: E.COORDINATOR_NOT_AVAILABLE,
        E.NOT_LEADER_OR_FOLLOWER: E.NOT_COORDINATOR,
        E.KAFKA_STORAGE_ERROR: E.NOT_COORDINATOR,
        E.INVALID_REQUIRED_ACKS: E.INVALID_REQUIRED_ACKS,
    }
