"""Coordinator immigration and emigration (Kafka's scheduleLoadOperation /
scheduleUnloadOperation): a managed runtime over real logs in tmp_path loads and unloads
__consumer_offsets partitions by leader epoch. Requests for a loading partition answer
COORDINATOR_LOAD_IN_PROGRESS, for an unloaded one NOT_COORDINATOR; parked JoinGroups and
appends in flight are answered NOT_COORDINATOR; stale epochs are ignored."""
from __future__ import annotations

import asyncio
from typing import Any

from kafka.protocol.consumer import JoinGroupRequest, OffsetCommitRequest, OffsetFetchRequest
from test_group_helpers import sub, wire

from kcoord.protocol.errors import ErrorCode as E
from kcoord.protocol.partitioner import partition_for
from kcoord.protocol.topics import OFFSETS_TOPIC
from kcoord.server.clock import FakeClock
from kcoord.server.coordinator.runtime import CoordinatorRuntime
from kcoord.server.deferred import Deferred
from kcoord.server.group.config import GroupConfig
from kcoord.server.group.coordinator import GroupCoordinator
from kcoord.server.group.shard import OffsetsRecords
from kcoord.storage.log_manager import LogManager

N = 4
GROUP = next(g for g in (f"g{i}" for i in range(100)) if partition_for(g, N) == 1)
P = 1


def runtime(tmp_path) -> tuple[CoordinatorRuntime, LogManager]:
    logs = LogManager(str(tmp_path))
    for p in range(N):
        logs.create(OFFSETS_TOPIC, p)
    rt = CoordinatorRuntime(
        lambda r: GroupCoordinator(GroupConfig(group_initial_rebalance_delay_ms=0), FakeClock(), N,
                                   background_writer=r.write_background, end_of_turn=r.end_of_turn,
                                   committed=r.committed),
        OffsetsRecords(N), logs, FakeClock(), 5000, 1048588)
    return rt, logs


async def answer(value: Any) -> Any:
    if isinstance(value, Deferred):
        fut = asyncio.get_running_loop().create_future()
        value.add_callback(fut.set_result)
        return await asyncio.wait_for(fut, 10)
    return value


def commit(rt: CoordinatorRuntime, offset: int) -> Any:
    part = OffsetCommitRequest.OffsetCommitRequestTopic.OffsetCommitRequestPartition(
        partition_index=0, committed_offset=offset, committed_leader_epoch=-1, commit_timestamp=-1,
        committed_metadata="")
    req = OffsetCommitRequest(version=8, group_id=GROUP, generation_id_or_member_epoch=-1, member_id="",
                              group_instance_id=None, retention_time_ms=-1,
                              topics=[OffsetCommitRequest.OffsetCommitRequestTopic(name="t", partitions=[part])])
    return rt.submit(rt.shard.offset_commit(wire(req, 8), 8))


def commit_error(resp: Any) -> E:
    return E(resp.topics[0].partitions[0].error_code)


def fetch(rt: CoordinatorRuntime) -> tuple[E, int]:
    req = OffsetFetchRequest(version=7, group_id=GROUP, topics=[
        OffsetFetchRequest.OffsetFetchRequestTopic(name="t", partition_indexes=[0])], require_stable=False)
    resp = rt.submit(rt.shard.offset_fetch(wire(req, 7), 7))
    if resp.error_code:
        return E(resp.error_code), -1
    return E(resp.error_code), resp.topics[0].partitions[0].committed_offset


def join(rt: CoordinatorRuntime, member_id: str = "") -> Any:
    req = JoinGroupRequest(version=5, group_id=GROUP, session_timeout_ms=10000, rebalance_timeout_ms=30000,
                           member_id=member_id, group_instance_id=None, protocol_type="consumer",
                           protocols=[JoinGroupRequest.JoinGroupRequestProtocol(name="range", metadata=sub("t"))],
                           reason=None)
    return rt.submit(rt.shard.join_group(wire(req, 5), 5, "c", "/127.0.0.1"))


async def test_managed_runtime_answers_not_coordinator_until_loaded(tmp_path):
    rt, logs = runtime(tmp_path)
    rt.managed()
    assert fetch(rt)[0] == E.NOT_COORDINATOR
    assert commit_error(await answer(commit(rt, 5))) == E.NOT_COORDINATOR
    load = rt.load(P, 0)
    assert load is not None and rt.state(P) == ("loading", 0)
    assert fetch(rt)[0] == E.COORDINATOR_LOAD_IN_PROGRESS
    await load
    assert rt.state(P) == ("active", 0)
    assert commit_error(await answer(commit(rt, 5))) == E.NONE
    assert fetch(rt) == (E.NONE, 5)
    rt.load(0, 3)  # another partition: this one is untouched
    assert fetch(rt) == (E.NONE, 5)
    logs.close()


async def test_unload_answers_later_requests_not_coordinator(tmp_path):
    rt, logs = runtime(tmp_path)
    await rt.load(P, 2)
    assert commit_error(await answer(commit(rt, 5))) == E.NONE
    assert rt.shard.group(GROUP) is not None
    assert rt.unload(P, 3)
    assert rt.shard.group(GROUP) is None
    assert fetch(rt)[0] == E.NOT_COORDINATOR
    assert (await answer(join(rt))).error_code == E.NOT_COORDINATOR
    assert commit_error(await answer(commit(rt, 6))) == E.NOT_COORDINATOR
    logs.close()


async def test_a_parked_join_is_answered_not_coordinator(tmp_path):
    rt, logs = runtime(tmp_path)
    await rt.load(P, 0)
    a = await answer(join(rt))
    b = await answer(join(rt))
    ja = join(rt, a.member_id)
    await asyncio.sleep(0.05)
    ja = await answer(ja) if not isinstance(ja, Deferred) or ja.done else ja
    # a Stable group of one member; a second member's join parks until a rebalance that waits
    # for the first member to rejoin
    if not isinstance(ja, Deferred):
        assert ja.error_code == E.NONE
    jb = join(rt, b.member_id)
    assert isinstance(jb, Deferred) and not jb.done
    assert rt.unload(P, 1)
    assert (await answer(jb)).error_code == E.NOT_COORDINATOR
    logs.close()


async def test_an_append_in_flight_fails_not_coordinator_and_is_not_replayed(tmp_path):
    rt, logs = runtime(tmp_path)
    await rt.load(P, 0)
    pending = commit(rt, 7)  # staged: appended at the end of this loop turn
    assert isinstance(pending, Deferred) and not pending.done
    assert rt.unload(P, 1)
    assert commit_error(await answer(pending)) == E.NOT_COORDINATOR  # NOT_LEADER_OR_FOLLOWER, mapped
    assert rt.shard.offset_manager.count(GROUP) == 0
    # appended, then unloaded while waiting for its fdatasync
    await rt.load(P, 2)
    pending = commit(rt, 8)
    while logs.get(OFFSETS_TOPIC, P).log_end_offset == 0:
        await asyncio.sleep(0)
    waiting = not pending.done  # appended, its fdatasync not yet seen
    assert rt.unload(P, 3)
    resp = await answer(pending)
    if waiting:
        assert commit_error(resp) == E.NOT_COORDINATOR
    assert rt.shard.offset_manager.count(GROUP) == 0
    logs.close()


async def test_stale_epochs_are_ignored(tmp_path):
    rt, logs = runtime(tmp_path)
    await rt.load(P, 5)
    assert rt.load(P, 4) is None and rt.load(P, 5) is None  # older, same: nothing
    assert not rt.unload(P, 5) and not rt.unload(P, 4)  # not newer than the loaded epoch
    assert rt.state(P) == ("active", 5)
    assert commit_error(await answer(commit(rt, 1))) == E.NONE
    assert rt.load(P, 6) is None and rt.state(P) == ("active", 6)  # still leader: the epoch moves
    assert rt.unload(P, 7) and rt.state(P) == ("unloaded", 7)
    assert rt.load(P, 6) is None and rt.state(P) == ("unloaded", 7)  # a load older than the unload
    assert fetch(rt)[0] == E.NOT_COORDINATOR
    logs.close()


async def test_reload_after_unload_replays_the_log(tmp_path):
    rt, logs = runtime(tmp_path)
    await rt.load(P, 0)
    for o in (1, 2, 3):
        assert commit_error(await answer(commit(rt, o))) == E.NONE
    assert rt.unload(P, 1)
    assert fetch(rt)[0] == E.NOT_COORDINATOR
    load = rt.load(P, 2)
    assert fetch(rt)[0] == E.COORDINATOR_LOAD_IN_PROGRESS
    await load
    assert fetch(rt) == (E.NONE, 3)
    logs.close()


async def test_unload_during_a_load_stops_it(tmp_path):
    rt, logs = runtime(tmp_path)
    await rt.load(P, 0)
    for o in range(3):
        assert commit_error(await answer(commit(rt, o))) == E.NONE
    rt.unload(P, 1)
    load = rt.load(P, 2)
    assert rt.unload(P, 3)
    await asyncio.gather(load, return_exceptions=True)
    assert load.cancelled() or load.done()
    assert fetch(rt)[0] == E.NOT_COORDINATOR and rt.shard.offset_manager.count(GROUP) == 0
    logs.close()


async def test_single_node_runtime_loads_everything_as_before(tmp_path):
    rt, logs = runtime(tmp_path)
    await rt.load_all()
    assert commit_error(await answer(commit(rt, 4))) == E.NONE
    assert fetch(rt) == (E.NONE, 4)
    logs.close()


async def test_a_single_node_runtime_reports_its_partitions_loading_then_active(tmp_path):
    rt, logs = runtime(tmp_path)
    rt.begin_loading_all()
    assert rt.state(P) == ("loading", -1)
    await rt.load_all()
    assert rt.state(P) == ("active", -1)
    logs.close()


def test_the_transaction_coordinator_unloads_a_partition_and_loads_it_again() -> None:
    from txn_helpers import TxnHarness

    h = TxnHarness()
    assert h.init("t") == (E.NONE, 1000, 0)
    p = h.coord.partition_of("t")
    other = next(t for t in (f"x{i}" for i in range(100)) if h.coord.partition_of(t) != p)
    h.coord.unload(p)
    assert h.coord.get("t") is None
    assert h.init("t") == (E.NOT_COORDINATOR, -1, -1)
    assert h.coord.describe("t")[0] == E.NOT_COORDINATOR
    assert h.init(other)[0] == E.NONE  # another partition is untouched
    h.coord.begin_loading(p)
    assert h.init("t")[0] == E.COORDINATOR_LOAD_IN_PROGRESS
    for r in h.decoded_log():
        if h.coord.partition_of(r.key.transactional_id) == p:
            h.coord.replay(r)
    h.coord.end_loading(p)
    assert h.init("t") == (E.NONE, 1000, 1)  # replayed: the same producer id, the next epoch
