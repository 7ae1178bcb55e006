"""server/replication/partition.py: the leader's high-watermark and ISR rules and the
follower's truncation point, as tables, on a real partition log with explicit times."""
from __future__ import annotations

import pytest

from kcoord.protocol.errors import ErrorCode as E
from kcoord.server.cluster.partition_state import PartitionState
from kcoord.server.replication.partition import (
    FollowerState,
    PartitionReplica,
    leader_epoch_error,
    truncation_point,
)
from kcoord.storage.leader_epoch import LeaderEpochCache
from kcoord.storage.log import PartitionLog

LAG = 30000


def state(isr=(1, 2, 3), epoch=5, leader=1) -> PartitionState:
    return PartitionState("t", 0, leader=leader, leader_epoch=epoch, isr=isr, replicas=(1, 2, 3),
                          controller_epoch=1, zk_version=0)


@pytest.fixture
def leader(tmp_path):
    plog = PartitionLog(str(tmp_path / "t-0"))
    r = PartitionReplica(1, plog, LeaderEpochCache(None), state())
    r.become_leader(state(), now_ms=0)
    yield r
    plog.close()


def append(r: PartitionReplica, n: int) -> None:
    base, _ = r.plog.append_records([(b"k", b"v")] * n, 0, r.leader_epoch)
    r.appended_as_leader(base)


# follower fetch offsets (2, 3) after 10 records -> high watermark, ISR (1, 2, 3)
@pytest.mark.parametrize("fetch2,fetch3,hw", [
    (None, None, 0),  # no follower has fetched: nothing is committed
    (10, None, 0),  # one ISR member unknown
    (10, 4, 4),  # the smallest log end offset over the ISR
    (7, 10, 7),
    (10, 10, 10),
    (12, 10, 10),  # a fetch offset past the log end counts as the log end
])
def test_the_high_watermark_is_the_smallest_log_end_over_the_isr(leader, fetch2, fetch3, hw):
    append(leader, 10)
    for rid, off in ((2, fetch2), (3, fetch3)):
        if off is not None:
            leader.update_follower(rid, off, now_ms=1)
    assert leader.hw == hw


def test_the_high_watermark_never_moves_back_and_an_isr_of_one_commits_at_once(leader):
    append(leader, 10)
    leader.update_follower(2, 10, 1)
    leader.update_follower(3, 10, 1)
    assert leader.hw == 10
    leader.update_follower(3, 5, 2)  # a stale (or truncated) follower: the HW stays
    assert leader.hw == 10
    leader.update_state(state(isr=(1,)))
    append(leader, 2)
    assert leader.hw == 12


# (follower fetch offset, leader log end now, log end at its previous fetch) -> caught up at
@pytest.mark.parametrize("fetch,leo,prev_leo,caught_up", [
    (10, 10, -1, 500),  # reached the log end: caught up now
    (8, 10, 8, 100),  # reached what the leader had at its previous fetch: caught up then
    (7, 10, 8, 0),  # neither
])
def test_when_a_follower_last_caught_up(fetch, leo, prev_leo, caught_up):
    f = FollowerState(2, last_fetch_leader_leo=prev_leo, last_fetch_ms=100)
    f.fetched(fetch, leo, now_ms=500)
    assert f.last_caught_up_ms == caught_up
    assert f.log_end_offset == fetch and f.last_fetch_leader_leo == leo


# (ms since follower 2 / 3 last caught up) -> out of sync at replica.lag.time.max.ms
@pytest.mark.parametrize("lag2,lag3,out", [
    (0, 0, ()),
    (LAG, 0, ()),  # exactly the lag time is still in sync
    (LAG + 1, 0, (2,)),
    (LAG + 1, LAG + 1, (2, 3)),
])
def test_isr_shrink_after_the_lag_time(leader, lag2, lag3, out):
    now = 100_000
    leader.followers[2].last_caught_up_ms = now - lag2
    leader.followers[3].last_caught_up_ms = now - lag3
    assert leader.out_of_sync(now, LAG) == out


def test_isr_members_count_as_caught_up_when_a_leader_starts(tmp_path):
    plog = PartitionLog(str(tmp_path / "t-0"))
    r = PartitionReplica(1, plog, LeaderEpochCache(None), state())
    r.become_leader(state(), now_ms=50_000)
    assert r.out_of_sync(50_000 + LAG, LAG) == ()
    assert r.out_of_sync(50_001 + LAG, LAG) == (2, 3)
    plog.close()


def test_a_follower_rejoins_once_at_the_high_watermark_and_the_epoch_start(leader):
    leader.update_state(state(isr=(1, 2)))
    append(leader, 10)
    leader.update_follower(2, 10, 1)
    assert leader.hw == 10
    leader.update_follower(3, 9, 1)
    assert leader.catching_up() == ()
    leader.update_follower(3, 10, 2)
    assert leader.catching_up() == (3,)


# (hw, isr, min.insync.replicas, is leader) -> replicated(offset 10)
@pytest.mark.parametrize("hw,isr,min_isr,is_leader,answer", [
    (9, (1, 2), 2, True, (False, E.NONE)),  # not every ISR member has it yet
    (10, (1, 2), 2, True, (True, E.NONE)),
    (10, (1,), 2, True, (True, E.NOT_ENOUGH_REPLICAS_AFTER_APPEND)),
    (9, (1, 2), 2, False, (True, E.NOT_LEADER_OR_FOLLOWER)),
])
def test_acks_all_completion(leader, hw, isr, min_isr, is_leader, answer):
    leader.update_state(state(isr=isr))
    leader.hw = hw
    leader.is_leader = is_leader
    assert leader.replicated(10, min_isr) == answer


@pytest.mark.parametrize("given,ours,code", [
    (-1, 5, None), (5, 5, None), (4, 5, E.FENCED_LEADER_EPOCH), (6, 5, E.UNKNOWN_LEADER_EPOCH)])
def test_current_leader_epoch_fencing(leader, given, ours, code):
    leader.update_state(state(epoch=ours))
    assert leader_epoch_error(leader, given) == code


def test_becoming_leader_starts_the_epoch_at_the_log_end(leader):
    append(leader, 3)
    leader.become_follower(state(epoch=6, leader=2))
    assert not leader.is_leader
    leader.become_leader(state(epoch=7), now_ms=0)
    assert leader.cache.entries() == [(5, 0), (7, 3)] and leader.epoch_start_offset == 3


# follower epochs 1@0 3@10 5@20, log end 30, HW 8; (asked, leader's answer) -> (cut at, done)
@pytest.mark.parametrize("asked,leader_epoch,leader_end,expected", [
    (5, 5, 25, (25, True)),  # same epoch: cut where the leader's ends
    (5, 5, 40, (30, True)),  # the leader has more: nothing to cut
    (5, 3, 18, (18, True)),  # the leader's epoch 3 ended at 18, ours at 20
    (5, 4, 18, (20, False)),  # an epoch we never had: cut what later epochs wrote, ask again
    (5, -1, -1, (8, True)),  # the leader knows no such epoch: keep what was committed
])
def test_truncation_point(asked, leader_epoch, leader_end, expected):
    cache = LeaderEpochCache(None, [(1, 0), (3, 10), (5, 20)])
    assert truncation_point(cache, 30, 8, asked, leader_epoch, leader_end) == expected
