"""On a cluster node the transaction coordinator's batches in __consumer_offsets
(server/txn/group_log.py: TxnOffsetCommit's transactional offsets and the COMMIT / ABORT
markers) are acknowledged as the group coordinator's own appends: through the group runtime
writer's ReplicaAcks (server/coordinator/acks.py), over real logs in tmp_path and a real
ReplicaManager leading the partition (tests/unit/test_coordinator_acks.py's Cluster).
Offsets wait as offsets.commit.required.acks says, their failures mapped as Kafka's group
coordinator maps them; markers always wait for every ISR member (acks -1, as Kafka's
WriteTxnMarkers appends) and carry the replica manager's codes to the marker writer."""
from __future__ import annotations

import asyncio

import pytest
from test_coordinator_acks import EPOCH, Cluster
from test_coordinator_immigration import GROUP, P, answer, fetch

from kcoord.protocol.coordinator_records import CoordinatorRecord, OffsetKey, OffsetValue
from kcoord.protocol.errors import ErrorCode as E
from kcoord.server.clock import FakeClock
from kcoord.server.config import Config
from kcoord.server.data_plane import DataPlane
from kcoord.server.deferred import Deferred
from kcoord.server.group.txn_offsets import PendingTxnOffsets
from kcoord.server.metrics import Metrics
from kcoord.server.txn.group_log import GroupTxnLog
from kcoord.storage.batch import split_batches

PID, PEPOCH = 7000, 0


def group_log(c: Cluster, tmp_path) -> GroupTxnLog:  # noqa: ANN001
    cfg = Config({"log.dirs": str(tmp_path)})
    return GroupTxnLog(cfg, FakeClock(), Metrics(), c.logs, DataPlane(FakeClock(), tmp_path, cfg), c.rt,
                       c.rt.shard, PendingTxnOffsets())


def offsets(gl: GroupTxnLog, offset: int) -> Deferred:
    return gl.write_offsets(P, PID, PEPOCH, [CoordinatorRecord(OffsetKey(GROUP, "t", 0), OffsetValue(offset))])


async def not_answered(d: Deferred) -> None:
    for _ in range(20):
        await asyncio.sleep(0.005)
    assert not d.done


@pytest.fixture
async def cluster(tmp_path):
    c = Cluster(tmp_path)
    await c.rt.load(P, EPOCH)
    yield c
    c.logs.close()


async def test_offsets_and_their_commit_marker_wait_for_every_in_sync_replica(cluster, tmp_path):
    gl = group_log(cluster, tmp_path)
    written = offsets(gl, 5)
    await cluster.waiting_for_replicas()
    await not_answered(written)  # durable here; ISR member 2 has not fetched it
    cluster.follower_fetched()
    assert await answer(written) is None
    marker = gl.write_marker(P, PID, PEPOCH, True, coordinator_epoch=3)
    await cluster.waiting_for_replicas()
    await not_answered(marker)
    assert fetch(cluster.rt) != (E.NONE, 5)  # not replayed before the ISR has the marker
    cluster.follower_fetched()
    assert await answer(marker) is None
    assert fetch(cluster.rt) == (E.NONE, 5)
    # appended by the leader at its epoch: the followers' epoch caches
    headers = split_batches(cluster.plog.read(0, 1 << 20))
    assert len(headers) == 2 and {h.partition_leader_epoch for h in headers} == {EPOCH}


async def test_markers_wait_for_the_isr_even_with_offsets_acks_1(tmp_path):
    c = Cluster(tmp_path, acks=1)
    await c.rt.load(P, EPOCH)
    gl = group_log(c, tmp_path)
    assert await answer(offsets(gl, 5)) is None  # offsets.commit.required.acks 1: the leader's
    marker = gl.write_marker(P, PID, PEPOCH, True)
    await c.waiting_for_replicas()
    await not_answered(marker)
    c.follower_fetched()
    assert await answer(marker) is None
    assert fetch(c.rt) == (E.NONE, 5)
    c.logs.close()


async def test_an_isr_below_min_insync_replicas_refuses_offsets_and_markers(tmp_path):
    c = Cluster(tmp_path, isr=(1,), min_isr=2)
    await c.rt.load(P, EPOCH)
    gl = group_log(c, tmp_path)
    assert await answer(offsets(gl, 5)) == E.COORDINATOR_NOT_AVAILABLE  # NOT_ENOUGH_REPLICAS, mapped
    assert await answer(gl.write_marker(P, PID, PEPOCH, False)) == E.NOT_ENOUGH_REPLICAS  # the sender retries
    assert c.plog.log_end_offset == 0  # nothing appended
    c.logs.close()


async def test_failures_after_the_append_are_mapped_and_nothing_is_replayed(cluster, tmp_path):
    gl = group_log(cluster, tmp_path)
    written = offsets(gl, 5)
    await cluster.waiting_for_replicas()
    cluster.clock.advance(5000)  # REQUEST_TIMED_OUT in the purgatory
    assert await answer(written) == E.COORDINATOR_NOT_AVAILABLE
    assert not gl.pending.has_pending(GROUP, "t", 0)  # in the log, not acknowledged: not pending
    cluster.follower_fetched()
    marker = gl.write_marker(P, PID, PEPOCH, True)
    await cluster.waiting_for_replicas()
    cluster.become(2, EPOCH + 1, (2,))  # leadership moved while the marker waits
    assert await answer(marker) == E.NOT_LEADER_OR_FOLLOWER
    assert fetch(cluster.rt) != (E.NONE, 5)
    # no longer the leader: refused before appending
    end = cluster.plog.log_end_offset
    assert await answer(offsets(gl, 6)) == E.NOT_COORDINATOR
    assert cluster.plog.log_end_offset == end
