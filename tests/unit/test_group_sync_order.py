"""The order SyncGroup answers leave in when the leader's assignment completes a rebalance
(real broker: dispatcher-level handlers, the coordinator runtime, __consumer_offsets on disk).
Kafka answers every member in one pass once the assignment is stored; the leader's answer is
never behind its followers' (client tests check the leader's on_partitions_assigned as soon as
a follower has its assignment)."""
from __future__ import annotations

import asyncio

import pytest
from kafka.protocol.consumer import JoinGroupRequest, SyncGroupRequest
from test_produce_helpers import call, settle

from kcoord.protocol.api import ApiKey
from kcoord.server.broker import Broker
from kcoord.server.config import Config
from kcoord.server.deferred import Deferred

G = "order-group"


@pytest.fixture
async def broker(tmp_path):
    b = Broker(Config({"log.dirs": str(tmp_path / "data"), "offsets.topic.num.partitions": 1,
                       "group.initial.rebalance.delay.ms": 0}))  # the real clock: timers run on the loop
    await b.start()
    yield b
    await b.stop()


def _join(member_id: str = "") -> JoinGroupRequest:
    return JoinGroupRequest(version=3, group_id=G, session_timeout_ms=30000, rebalance_timeout_ms=30000,
                            member_id=member_id, protocol_type="consumer",
                            protocols=[JoinGroupRequest.JoinGroupRequestProtocol(name="range", metadata=b"m")])


def _sync(member_id: str, generation: int, assignments: dict[str, bytes]) -> SyncGroupRequest:
    A = SyncGroupRequest.SyncGroupRequestAssignment
    return SyncGroupRequest(version=3, group_id=G, generation_id=generation, member_id=member_id,
                            group_instance_id=None, assignments=[A(member_id=m, assignment=a)
                                                                 for m, a in assignments.items()])


async def _stable_membership(broker, n: int) -> tuple[list[str], int, str]:
    """n members joined (the first alone first, so it leads); their ids, generation, leader."""
    first = await settle(await call(broker, ApiKey.JOIN_GROUP, _join(), 3))
    leader = first.member_id
    # the leader's sync of generation 1 settles the first generation
    await settle(await call(broker, ApiKey.SYNC_GROUP, _sync(leader, first.generation_id, {leader: b""}), 3))
    joins = [await call(broker, ApiKey.JOIN_GROUP, _join(), 3) for _ in range(n - 1)]
    rejoin = await call(broker, ApiKey.JOIN_GROUP, _join(leader), 3)
    answers = [await settle(j) for j in [rejoin, *joins]]
    assert all(a.error_code == 0 for a in answers), answers
    assert answers[0].leader == leader
    return [a.member_id for a in answers], answers[0].generation_id, leader


@pytest.mark.parametrize("followers", [1, 3])
async def test_the_leader_is_answered_no_later_than_its_followers(broker, followers):
    ids, generation, leader = await _stable_membership(broker, followers + 1)
    answered: list[str] = []
    waiting = []
    for m in ids[1:]:  # the followers sync first and park
        d = await call(broker, ApiKey.SYNC_GROUP, _sync(m, generation, {}), 3)
        assert isinstance(d, Deferred) and not d.done
        d.add_callback(lambda r, m=m: answered.append(m))
        waiting.append(d)
    lead = await call(broker, ApiKey.SYNC_GROUP,
                      _sync(leader, generation, {m: m.encode() for m in ids}), 3)
    assert isinstance(lead, Deferred)  # waits for the assignment's record to be durable
    lead.add_callback(lambda r: answered.append(leader))
    results = await asyncio.wait_for(asyncio.gather(*(settle(d) for d in [lead, *waiting])), 30)
    assert [r.error_code for r in results] == [0] * (followers + 1)
    assert [r.assignment for r in results] == [m.encode() for m in ids]
    names = {leader: "leader", **{m: f"follower-{i}" for i, m in enumerate(ids[1:])}}
    assert [names[m] for m in answered][0] == "leader", [names[m] for m in answered]
