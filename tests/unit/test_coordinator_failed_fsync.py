"""One rule for every kind of group (server/coordinator/result.py): a write's records are
replayed when it is made, answered once durable, and a write whose fdatasync fails leaves the
group exactly as it was before the write: classic groups, consumer groups and committed
offsets alike. The group coordinator runs on its real runtime over real logs in tmp_path; the
fdatasync really fails (the partition's active segment descriptor is swapped for /dev/null's:
write(2) succeeds, fdatasync(2) returns EINVAL, and the log directory goes offline)."""
from __future__ import annotations

import asyncio
import os
from typing import Any

from test_group_helpers import ConsumerHarness, E, FakeTopics, Harness, done, parked

from kcoord.protocol.topics import OFFSETS_TOPIC
from kcoord.server.coordinator.runtime import CoordinatorRuntime
from kcoord.server.deferred import Deferred
from kcoord.server.group.coordinator import GroupCoordinator
from kcoord.server.group.shard import OffsetsRecords
from kcoord.storage.log_manager import LogManager

G = "g"


class OnDisk(ConsumerHarness):
    """The test harness's requests, answered by the real runtime over one __consumer_offsets
    partition in tmp_path."""

    def __init__(self, tmp_path: Any) -> None:
        super().__init__(FakeTopics(t=4), num_partitions=1, group_initial_rebalance_delay_ms=0)
        self.logs = LogManager(str(tmp_path))
        self.logs.create(OFFSETS_TOPIC, 0)
        self.rt = CoordinatorRuntime(
            lambda r: GroupCoordinator(self.config, self.clock, 1, background_writer=r.write_background,
                                       end_of_turn=r.end_of_turn, topics=self.topics, committed=r.committed),
            OffsetsRecords(1), self.logs, self.clock, 5000, 1048588)
        self.coord = self.rt.shard

    def run(self, result: Any) -> Any:
        return self.rt.submit(result)

    def advance(self, ms: int) -> None:
        self.clock.advance(ms)

    def break_fdatasync(self) -> None:
        plog = self.logs.get(OFFSETS_TOPIC, 0)
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, plog.active.fd)
        os.close(null)


async def answer(x: Any) -> Any:
    for _ in range(1000):
        if not isinstance(x, Deferred):
            return x
        if x.done:
            return x.result()
        await asyncio.sleep(0.005)
    raise AssertionError("never answered")


def consumer_group(h: OnDisk) -> tuple:
    g = h.coord.group(G)
    members = {mid: (m.member_epoch, m.state, dict(m.assigned), dict(m.pending_revocation))
               for mid, m in g.members.items()}
    return (type(g).__name__, g.group_epoch, g.assignment_epoch, dict(g.target_assignment),
            dict(g.subscription_metadata), members, str(g.state_name()))


async def test_a_failed_fdatasync_leaves_a_consumer_group_as_it_was(tmp_path):
    h = OnDisk(tmp_path)
    first = await answer(h.cg_join(G, "a", topics=["t"]))
    assert first.error_code == 0 and first.member_epoch == 1
    before = consumer_group(h)
    h.break_fdatasync()
    second = await answer(h.cg_join(G, "b", topics=["t"]))  # a new member: a new group epoch
    assert second.error_code == E.NOT_COORDINATOR  # KAFKA_STORAGE_ERROR, as Kafka's coordinator maps it
    assert consumer_group(h) == before  # b is not a member, the epochs did not move


async def test_a_failed_fdatasync_leaves_committed_offsets_as_they_were(tmp_path):
    h = OnDisk(tmp_path)
    assert (await answer(h.commit(G, {("t", 0): 5}))).topics[0].partitions[0].error_code == 0
    h.break_fdatasync()
    r = await answer(h.commit(G, {("t", 0): 6, ("t", 1): 7}))
    assert {p.error_code for p in r.topics[0].partitions} == {E.NOT_COORDINATOR}
    assert {(t, p): v.offset for t, p, v in h.coord.committed_offsets(G)} == {("t", 0): 5}
    assert h.coord.offset_manager.pending(G) == set()


async def test_a_failed_fdatasync_leaves_a_classic_group_and_its_offsets_as_they_were(tmp_path):
    h = OnDisk(tmp_path)
    parked = h.join(G, version=3)
    h.advance(0)  # group.initial.rebalance.delay.ms=0
    joined = await answer(parked)
    assert joined.error_code == 0
    synced = await answer(h.sync(G, joined.member_id, joined.generation_id, {joined.member_id: b"A"}))
    assert synced.error_code == 0 and h.state(G) == "Stable"
    await answer(h.leave(G, (joined.member_id, None)))
    assert h.state(G) == "Empty"
    assert (await answer(h.commit(G, {("t", 0): 5}))).topics[0].partitions[0].error_code == 0
    group = h.coord.group(G)
    h.break_fdatasync()
    r = await answer(h.delete(G))  # the group's and its offsets' tombstones
    assert r.results[0].error_code == E.NOT_COORDINATOR
    assert h.coord.group(G) is group and h.state(G) == "Empty"  # the same group, alive
    assert {(t, p): v.offset for t, p, v in h.coord.committed_offsets(G)} == {("t", 0): 5}


# ---------------------------------------------------------------- nothing acknowledged early
# The records are replayed when the write is made; what they let a client observe waits.


def test_sync_group_answers_wait_until_the_assignment_is_durable() -> None:
    h = Harness(group_initial_rebalance_delay_ms=0)
    first = h.join_known(G, version=5)
    second = h.join_known(G, version=5)
    h.advance(0)
    a, b = done(first), done(second)
    leader, follower = (a, b) if a.member_id == a.leader else (b, a)
    gen = leader.generation_id
    waiting = h.sync(G, follower.member_id, gen)
    assert parked(waiting)
    h.hold = True  # the leader's assignment is written, not yet durable
    h.sync(G, leader.member_id, gen, {leader.member_id: b"L", follower.member_id: b"F"})
    leaders = h.held[-1][0].response  # the leader's answer, a Deferred from the start
    assert parked(leaders) and parked(waiting)
    assert h.state(G) == "CompletingRebalance"
    h.release()
    assert done(leaders).assignment == b"L" and done(waiting).assignment == b"F"
    assert h.state(G) == "Stable"


def test_offset_fetch_reads_the_durable_offset_while_a_commit_is_in_flight() -> None:
    h = Harness()
    done(h.commit(G, {("t", 0): 1}))
    h.hold = True
    h.commit(G, {("t", 0): 2, ("t", 1): 3})  # replayed, not yet durable
    assert h.offsets(G) == {("t", 0): 1}
    assert {(t, p): v.offset for t, p, v in h.coord.committed_offsets(G)} == {("t", 0): 1}
    h.release()
    assert h.offsets(G) == {("t", 0): 2, ("t", 1): 3}


def test_a_failed_write_puts_a_commit_in_flight_and_the_ones_made_on_top_of_it_back() -> None:
    h = Harness()
    done(h.commit(G, {("t", 0): 1}))
    h.hold = True
    h.commit(G, {("t", 0): 2})
    h.commit(G, {("t", 0): 3})  # made on top of the first
    (first, change), (_second, later) = h.held
    h.held.clear()
    h.hold = False
    change.revert()  # the first write failed: both are reverted, the later one first
    first.on_appended(E.NOT_COORDINATOR)
    assert {(t, p): v.offset for t, p, v in h.coord.committed_offsets(G)} == {("t", 0): 1}
    later.settle()  # the later write reached the log after all: it is replayed again
    assert {(t, p): v.offset for t, p, v in h.coord.committed_offsets(G)} == {("t", 0): 3}
