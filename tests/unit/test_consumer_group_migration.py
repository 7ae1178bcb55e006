"""Online migration between the classic and the consumer group protocol (KIP-848) on a fake
clock, after Kafka's GroupMetadataManagerTest: a consumer-protocol member joining a classic group
with members upgrades it; classic members keep working inside the consumer group (JoinGroup /
SyncGroup / Heartbeat / LeaveGroup answered from its assignment, a rebalance signalled as
REBALANCE_IN_PROGRESS); the last consumer-protocol member leaving downgrades it; every policy of
group.consumer.migration.policy; the log replayed after every write (a crash at any point
between the steps) equals the live state; a failed write undoes a conversion."""
from __future__ import annotations

from typing import Any

import pytest
from test_consumer_group import Client, live_state
from test_group_helpers import ConsumerHarness, E, FakeTopics, done, parked

from kcoord.protocol.consumer_protocol import decode_assignment, encode_assignment, encode_subscription
from kcoord.protocol.coordinator_codec import decode_record, encode_key, encode_value
from kcoord.protocol.coordinator_records import ConsumerGroupMemberMetadataKey, GroupKey
from kcoord.server.clock import FakeClock
from kcoord.server.group.consumer.member import MemberState
from kcoord.server.group.coordinator import GroupCoordinator

G = "cg"  # the group test_consumer_group.Client joins


class Classic:
    """A classic consumer as the clients behave: an eager one (kafka-python, aiokafka) gives
    up everything before it rejoins and sends a v0 subscription; a cooperative one (librdkafka,
    Java with cooperative-sticky) keeps what it owns and reports it in a v1 subscription."""

    def __init__(self, h: ConsumerHarness, topics: tuple[str, ...] = ("t",), *, cooperative: bool = False,
                 protocol: str = "range", session: int = 10000, rebalance: int = 30000,
                 instance: str | None = None) -> None:
        self.h, self.topics, self.cooperative = h, list(topics), cooperative
        self.protocol, self.session, self.rebalance, self.instance = protocol, session, rebalance, instance
        self.member_id = ""
        self.generation = -1
        self.owned: dict[str, set[int]] = {}

    def subscription(self) -> bytes:
        if self.cooperative:
            owned = [(t, sorted(ps)) for t, ps in self.owned.items()]
            return encode_subscription(self.topics, 1, owned=owned)
        return encode_subscription(self.topics, 0)

    def join_request(self) -> Any:
        if not self.cooperative:
            self.owned = {}  # eager: everything is revoked before rejoining
        return self.h.join(G, self.member_id, protocols=[(self.protocol, self.subscription())],
                           session=self.session, rebalance=self.rebalance, instance=self.instance)

    def join(self) -> Any:
        r = done(self.join_request())
        if r.error_code == E.MEMBER_ID_REQUIRED:
            self.member_id = r.member_id
            r = done(self.join_request())
        return self._joined(r)

    def _joined(self, r: Any) -> Any:
        if r.error_code == 0:
            self.member_id, self.generation = r.member_id, r.generation_id
        return r

    def sync(self, assignments: dict[str, bytes] | None = None) -> Any:
        r = done(self.h.sync(G, self.member_id, self.generation, assignments, version=5,
                             ptype="consumer", pname=self.protocol, instance=self.instance))
        if r.error_code == 0:
            self.owned = {}
            for t, ps in decode_assignment(r.assignment) if r.assignment else ():
                self.owned.setdefault(t, set()).update(ps)
        return r

    def beat(self) -> int:
        return done(self.h.heartbeat(G, self.member_id, self.generation, instance=self.instance)).error_code

    def poll(self) -> int:
        """A heartbeat; on REBALANCE_IN_PROGRESS the member rejoins and syncs (inside a
        consumer group the coordinator assigns: nobody leads)."""
        err = self.beat()
        if err == E.REBALANCE_IN_PROGRESS:
            j = self.join()
            assert j.error_code == 0, j
            assert j.leader == "" and j.members == [] and j.protocol_name == self.protocol
            s = self.sync()
            assert s.error_code in (0, E.REBALANCE_IN_PROGRESS), s
        return err

    def partitions(self) -> set[tuple[str, int]]:
        return {(t, p) for t, ps in self.owned.items() for p in ps}


def classic_group(h: ConsumerHarness, members: list[Classic], partitions: int = 6) -> int:
    """The members form a classic group; the leader hands out the partitions of "t" round-robin."""
    pending = []
    for m in members:
        first = done(m.join_request())
        assert first.error_code == E.MEMBER_ID_REQUIRED
        m.member_id = first.member_id
        pending.append(m.join_request())
    for _ in range(20):
        if not any(parked(p) for p in pending):
            break
        h.advance(max(h.config.group_initial_rebalance_delay_ms, 1))
    joined = [m._joined(done(p)) for m, p in zip(members, pending, strict=True)]
    leader = joined[0].leader
    ids = [m.member_id for m in members]
    plan = {mid: [("t", [p for p in range(partitions) if p % len(ids) == i])] for i, mid in enumerate(ids)}
    results = [m.sync({mid: encode_assignment(tps, 0) for mid, tps in plan.items()} if m.member_id == leader else None)
               for m in members]
    assert all(r.error_code == 0 for r in results), results
    assert h.coord.group(G).TYPE == "classic" and h.state(G) == "Stable"
    return joined[0].generation_id


def join_alone(h: ConsumerHarness, k: Classic) -> Any:
    """A member joining a group on its own: the initial rebalance delay runs out."""
    first = done(k.join_request())
    k.member_id = first.member_id
    pending = k.join_request()
    for _ in range(5):
        if not parked(pending):
            break
        h.advance(max(h.config.group_initial_rebalance_delay_ms, 1))
    return k._joined(done(pending))


def owners_disjoint(*clients: Any) -> None:
    owned = [c.partitions() for c in clients]
    assert sum(len(o) for o in owned) == len(set().union(*owned)), owned


def settle(classics: list[Classic], consumers: list[Client], rounds: int = 12) -> None:
    """Everyone heartbeats until nothing changes; no partition is ever owned twice."""
    for _ in range(rounds):
        for c in consumers:
            assert c.beat().error_code == 0, c.last
            owners_disjoint(*classics, *consumers)
        for k in classics:
            assert k.poll() in (0, E.REBALANCE_IN_PROGRESS)
            owners_disjoint(*classics, *consumers)


def full_state(coord: GroupCoordinator) -> dict:
    """What the log says of every group: the consumer groups as live_state, the classic groups
    as their GroupMetadata record would (their in-memory rebalance state aside)."""
    out = live_state(coord)
    for g in coord.groups():
        if g.TYPE != "classic" or g.is_dead():
            continue
        out[g.group_id] = ("classic", g.generation_id, g.protocol_type, g.protocol_name, g.leader_id,
                           {mid: (m.session_timeout_ms, m.rebalance_timeout_ms, bytes(m.assignment))
                            for mid, m in g.members.items()},
                           sorted(coord.committed_offsets(g.group_id)))
    return out


def replayed(h: ConsumerHarness, upto: int | None = None) -> dict:
    """The log (or its first `upto` records), through the codec, loaded into a fresh
    coordinator as start-up does (the last value of each key, in the order of their last
    appearance)."""
    fresh = GroupCoordinator(h.config, FakeClock(h.clock.now_ms()), h.coord.num_partitions)
    fresh.set_topics(h.topics)
    for p in range(fresh.num_partitions):
        fresh.begin_loading(p)
    latest: dict[bytes, bytes | None] = {}
    for r in h.log[:upto]:
        k = encode_key(r.key)
        latest.pop(k, None)
        latest[k] = encode_value(r.value)
    for k, v in latest.items():
        rec = decode_record(k, v)
        if rec is not None:
            fresh.replay(rec)
    for p in range(fresh.num_partitions):
        fresh.end_loading(p)
    return full_state(fresh)


def harness(**cfg: Any) -> ConsumerHarness:
    cfg.setdefault("group_initial_rebalance_delay_ms", 0)
    return ConsumerHarness(FakeTopics(t=6), **cfg)


# ---------------------------------------------------------------- upgrade


def test_a_consumer_member_upgrades_a_classic_group_and_the_classic_members_keep_working() -> None:
    h = harness()
    a, b = Classic(h), Classic(h, cooperative=True)
    gen = classic_group(h, [a, b])
    done(h.commit(G, {("t", 0): 11, ("t", 1): 12}, member_id=a.member_id, generation=gen))
    n = len(h.log)
    c = Client(h, "c")
    r = c.join()
    assert r.error_code == 0 and c.owned == {}  # everything is still owned by the classic members
    g = h.coord.group(G)
    assert g.TYPE == "consumer"
    # Kafka's records: the classic group's tombstone, then the consumer group as it stood
    written = h.log[n:]
    assert written[0].key == GroupKey(G) and written[0].value is None
    assert [type(r.key).__name__ for r in written[1:3]] == ["ConsumerGroupMemberMetadataKey"] * 2
    for k in (a, b):
        m = g.members[k.member_id]
        assert m.uses_classic_protocol() and m.classic.session_timeout_ms == 10000
        assert m.member_epoch == gen and m.state is MemberState.STABLE
        assert {h.topics.name_of(t): set(ps) for t, ps in m.assigned.items()} == k.owned
    assert g.group_epoch == gen + 1 and g.members["c"].state is MemberState.UNRELEASED_PARTITIONS
    assert full_state(h.coord) == replayed(h)
    # the classic members learn of the rebalance from their heartbeat, rejoin, sync
    settle([a, b], [c])
    assert len(c.partitions()) == 2 and len(a.partitions()) == 2 and len(b.partitions()) == 2
    assert a.generation == b.generation == c.epoch == g.group_epoch
    assert g.state_name() == "Stable"
    assert h.offsets(G) == {("t", 0): 11, ("t", 1): 12}
    # a classic member commits with its generation, which is its member epoch
    assert done(h.commit(G, {("t", 2): 5}, member_id=a.member_id, generation=a.generation)).topics[0] \
        .partitions[0].error_code == 0
    assert done(h.commit(G, {("t", 2): 5}, member_id=a.member_id, generation=a.generation - 1)).topics[0] \
        .partitions[0].error_code == E.ILLEGAL_GENERATION
    assert full_state(h.coord) == replayed(h)


@pytest.mark.parametrize("policy,converts", [("bidirectional", True), ("upgrade", True), ("downgrade", False),
                                             ("disabled", False)])
def test_upgrade_follows_the_migration_policy(policy: str, converts: bool) -> None:
    h = harness(group_consumer_migration_policy=policy)
    classic_group(h, [Classic(h)])
    r = done(h.cg_join(G, "c"))
    if converts:
        assert r.error_code == 0 and h.coord.group(G).TYPE == "consumer"
    else:
        assert r.error_code == E.GROUP_ID_NOT_FOUND and h.coord.group(G).TYPE == "classic"


def test_no_upgrade_of_a_group_not_using_the_consumer_protocol_or_above_the_consumer_max_size() -> None:
    h = harness()
    k = Classic(h)
    k.join_request = lambda: h.join(G, k.member_id, ptype="connect", protocols=[("v1", b"x")])  # type: ignore
    assert join_alone(h, k).error_code == 0
    assert done(h.cg_join(G, "c")).error_code == E.GROUP_ID_NOT_FOUND
    h2 = harness(group_consumer_max_size=1)
    classic_group(h2, [Classic(h2), Classic(h2)])
    assert done(h2.cg_join(G, "c")).error_code == E.GROUP_ID_NOT_FOUND


def test_upgrade_answers_members_parked_in_a_rebalance_and_keeps_their_last_assignment() -> None:
    h = harness()
    a, b = Classic(h), Classic(h)
    gen = classic_group(h, [a, b])
    owned_before = (a.partitions(), b.partitions())
    parked_join = a.join_request()  # the rejoin of a starts a rebalance; b has not rejoined yet
    assert parked(parked_join) and h.state(G) == "PreparingRebalance"
    Client(h, "c").join()
    assert done(parked_join).error_code == E.REBALANCE_IN_PROGRESS
    g = h.coord.group(G)
    assert {k.member_id for k in (a, b)} < set(g.members)
    # a revoked everything before its rejoin, but the coordinator only knows the last
    # assignment: both keep it until they rejoin the consumer group
    assert {(h.topics.name_of(t), p) for t, ps in g.members[b.member_id].assigned.items() for p in ps} \
        == owned_before[1]
    assert g.members[a.member_id].member_epoch == gen


def test_a_malformed_classic_assignment_refuses_the_upgrade() -> None:
    h = harness()
    k = Classic(h)
    assert join_alone(h, k).error_code == 0
    # not a ConsumerProtocolAssignment
    assert done(h.sync(G, k.member_id, k.generation, {k.member_id: b"\x00"})).error_code == 0
    assert done(h.cg_join(G, "c")).error_code == E.GROUP_ID_NOT_FOUND
    assert h.coord.group(G).TYPE == "classic" and h.state(G) == "Stable"


def test_a_failed_write_undoes_the_upgrade() -> None:
    h = harness()
    a = Classic(h)
    classic_group(h, [a])
    before = full_state(h.coord)
    h.fail_next = E.NOT_ENOUGH_REPLICAS
    assert done(h.cg_join(G, "c")).error_code == E.NOT_ENOUGH_REPLICAS
    assert h.coord.group(G).TYPE == "classic" and full_state(h.coord) == before
    assert a.beat() == 0  # the classic member goes on as if nothing happened
    assert done(h.cg_join(G, "c")).error_code == 0


# ---------------------------------------------------------------- classic members inside a consumer group


def upgraded(h: ConsumerHarness, n_classic: int = 2, **kw: Any) -> tuple[list[Classic], Client]:
    classics = [Classic(h, **kw) for _ in range(n_classic)]
    classic_group(h, classics)
    c = Client(h, "c")
    c.join()
    settle(classics, [c])
    return classics, c


def test_a_classic_member_joins_a_consumer_group() -> None:
    h = harness()
    (a, b), c = upgraded(h)
    d = Classic(h)
    j = d.join()  # MEMBER_ID_REQUIRED first, then in
    assert j.error_code == 0 and len(j.member_id) == 22  # Kafka's Uuid, as consumer-protocol ids
    assert d.sync().error_code == 0
    settle([a, b, d], [c])
    assert sorted(len(x.partitions()) for x in (a, b, c, d)) == [1, 1, 2, 2]
    desc = done(h.cg_describe(G)).groups[0]
    assert sorted(m.member_type for m in desc.members) == [0, 0, 0, 1]  # 0: classic, 1: consumer
    assert done(h.describe(G)).groups[0].error_code == E.GROUP_ID_NOT_FOUND
    rows = {x.group_id: (x.group_type, x.protocol_type) for x in done(h.list()).groups}
    assert rows[G] == ("consumer", "consumer")


def test_classic_errors_inside_a_consumer_group() -> None:
    h = harness()
    (a, b), c = upgraded(h)
    g = h.coord.group(G)
    # SyncGroup / Heartbeat: unknown member, a consumer-protocol member, a wrong generation
    assert done(h.sync(G, "ghost", a.generation)).error_code == E.UNKNOWN_MEMBER_ID
    assert done(h.sync(G, "c", c.epoch)).error_code == E.UNKNOWN_MEMBER_ID
    assert done(h.sync(G, a.member_id, a.generation + 1)).error_code == E.ILLEGAL_GENERATION
    assert done(h.sync(G, a.member_id, a.generation, version=5, ptype="consumer", pname="roundrobin")) \
        .error_code == E.INCONSISTENT_GROUP_PROTOCOL
    assert done(h.sync(G, a.member_id, a.generation, version=5, ptype="connect")).error_code \
        == E.INCONSISTENT_GROUP_PROTOCOL
    assert done(h.heartbeat(G, "ghost", 1)).error_code == E.UNKNOWN_MEMBER_ID
    assert done(h.heartbeat(G, "c", c.epoch)).error_code == E.UNKNOWN_MEMBER_ID
    assert done(h.heartbeat(G, a.member_id, a.generation - 1)).error_code == E.ILLEGAL_GENERATION
    assert a.beat() == 0
    # JoinGroup: a protocol the classic members do not all support, another protocol type
    other = Classic(h, protocol="roundrobin")
    assert done(other.join_request()).error_code == E.INCONSISTENT_GROUP_PROTOCOL
    assert done(h.join(G, "", ptype="connect", protocols=[("range", b"")])).error_code == \
        E.INCONSISTENT_GROUP_PROTOCOL
    assert done(h.join(G, "x", session=1)).error_code == E.INVALID_SESSION_TIMEOUT
    # LeaveGroup: a consumer-protocol member cannot leave with it
    resp = done(h.leave(G, ("c", None), (a.member_id, None), ("ghost", None)))
    assert [m.error_code for m in resp.members] == [E.UNKNOWN_MEMBER_ID, 0, E.UNKNOWN_MEMBER_ID]
    assert a.member_id not in g.members and "c" in g.members


def test_static_classic_member_inside_a_consumer_group() -> None:
    h = harness()
    (a,), c = upgraded(h, 1)
    s = Classic(h, instance="i-1")
    assert s.join().error_code == 0 and s.sync().error_code in (0, E.REBALANCE_IN_PROGRESS)
    settle([a, s], [c])
    g = h.coord.group(G)
    assert g.static_member("i-1").member_id == s.member_id
    assert done(h.heartbeat(G, "other-id", s.generation, instance="i-1")).error_code == E.FENCED_INSTANCE_ID
    # it restarts with a new member id and takes its own place back
    old = s.member_id
    s.member_id = ""
    assert s.join().error_code == 0 and s.member_id != old
    assert old not in g.members and g.static_member("i-1").member_id == s.member_id
    # administrative removal by instance id
    resp = done(h.leave(G, ("", "i-1")))
    assert resp.members[0].error_code == 0 and g.static_member("i-1") is None


def test_a_classic_member_is_fenced_at_its_own_session_timeout() -> None:
    h = harness()
    (a, b), c = upgraded(h)
    g = h.coord.group(G)
    epoch = g.group_epoch
    for _ in range(4):  # 4 x 3 s: a and c keep their sessions, b (10 s session) does not
        h.advance(3000)
        assert a.beat() in (0, E.REBALANCE_IN_PROGRESS)
        c.beat()
    assert b.member_id not in g.members and a.member_id in g.members and g.group_epoch == epoch + 1
    assert b.beat() == E.UNKNOWN_MEMBER_ID


def test_a_classic_member_that_does_not_rejoin_is_fenced_after_its_rebalance_timeout() -> None:
    h = harness()
    (a, b), c = upgraded(h, rebalance=20000)
    g = h.coord.group(G)
    Client(h, "d").join()  # a new epoch: the classic members are told to rejoin
    assert a.beat() == E.REBALANCE_IN_PROGRESS and b.beat() == E.REBALANCE_IN_PROGRESS
    for _ in range(5):  # both keep heartbeating, only b rejoins
        h.advance(4500)
        b.poll()
        a.beat()
        c.beat()
    assert a.member_id not in g.members and b.member_id in g.members


def test_a_classic_member_picks_up_released_partitions_by_rejoining() -> None:
    """A classic member waiting for partitions that others still own heartbeats quietly; once
    they are released, REBALANCE_IN_PROGRESS makes it rejoin and pick them up."""
    h = harness()
    (a,), c = upgraded(h, 1)
    d = Classic(h)
    assert d.join().error_code == 0
    g = h.coord.group(G)
    assert g.members[d.member_id].state is MemberState.UNRELEASED_PARTITIONS
    assert d.sync().error_code == 0 and d.partitions() == set()
    assert d.beat() == 0  # nothing released yet: no reason to rejoin
    a.poll()  # a rejoins (eager: gives everything up) and gets what it keeps
    for _ in range(3):
        c.beat()  # c revokes what d gets
    assert d.beat() == E.REBALANCE_IN_PROGRESS
    assert d.join().error_code == 0 and d.sync().error_code == 0
    assert len(d.partitions()) == 2 and g.members[d.member_id].state is MemberState.STABLE
    owners_disjoint(a, c, d)


# ---------------------------------------------------------------- downgrade


def test_the_last_consumer_member_leaving_downgrades_the_group() -> None:
    h = harness()
    (a, b), c = upgraded(h)
    done(h.commit(G, {("t", 3): 33}, member_id="c", generation=c.epoch, version=9))
    epoch = h.coord.group(G).group_epoch
    n = len(h.log)
    r = done(h.cg_heartbeat(G, "c", -1))
    assert r.error_code == 0 and r.member_epoch == -1
    g = h.coord.group(G)
    assert g.TYPE == "classic" and g.generation_id == epoch and g.protocol_name == "range"
    assert h.state(G) == "PreparingRebalance" and set(g.members) == {a.member_id, b.member_id}
    # the consumer group's tombstones, then the classic group's record
    written = h.log[n:]
    assert written[-1].key == GroupKey(G) and written[-1].value.generation == epoch
    assert all(r.value is None for r in written[:-1])
    # each member's assignment in the record is its target, as a ConsumerProtocolAssignment
    by_member = {m.member_id: decode_assignment(m.assignment) for m in written[-1].value.members}
    for k in (a, b):
        assert {("t", p) for _, ps in by_member[k.member_id] for p in ps} == k.partitions()
    assert full_state(h.coord) == replayed(h)
    # the classic members rejoin as in any classic rebalance: heartbeat, join, the leader assigns
    assert a.beat() == E.REBALANCE_IN_PROGRESS and b.beat() == E.REBALANCE_IN_PROGRESS
    ja, jb = a.join_request(), b.join_request()
    ja, jb = a._joined(done(ja)), b._joined(done(jb))
    assert ja.error_code == jb.error_code == 0 and ja.generation_id == epoch + 1
    leader = a if ja.leader == a.member_id else b
    plan = {a.member_id: encode_assignment([("t", [0, 1, 2])]), b.member_id: encode_assignment([("t", [3, 4, 5])])}
    for k in sorted((a, b), key=lambda k: k is not leader):
        assert k.sync(plan if k is leader else None).error_code == 0
    assert h.state(G) == "Stable" and done(h.describe(G)).groups[0].group_state == "Stable"
    assert done(h.cg_describe(G)).groups[0].error_code == E.GROUP_ID_NOT_FOUND
    assert h.offsets(G)[("t", 3)] == 33
    assert full_state(h.coord) == replayed(h)


@pytest.mark.parametrize("policy,converts", [("bidirectional", True), ("upgrade", False), ("downgrade", True),
                                             ("disabled", False)])
def test_downgrade_follows_the_migration_policy(policy: str, converts: bool) -> None:
    h = harness()
    (a, b), c = upgraded(h)
    h.coord.migration.policy = type(h.coord.migration.policy)(policy)
    done(h.cg_heartbeat(G, "c", -1))
    g = h.coord.group(G)
    assert g.TYPE == ("classic" if converts else "consumer")
    assert set(g.members) == {a.member_id, b.member_id}
    if not converts:  # the classic members stay in the consumer group and rebalance there
        settle([a, b], [])
        assert len(a.partitions() | b.partitions()) == 6
    assert full_state(h.coord) == replayed(h)


def test_no_downgrade_above_the_classic_max_size() -> None:
    h = harness()
    (a, b), c = upgraded(h)
    h.coord.config.group_max_size = 1
    done(h.cg_heartbeat(G, "c", -1))
    assert h.coord.group(G).TYPE == "consumer"


def test_the_last_consumer_member_expiring_downgrades_the_group() -> None:
    h = harness(group_consumer_session_timeout_ms=45000)
    (a, b), c = upgraded(h)
    for _ in range(16):  # 16 x 3 s: the classic members heartbeat, c is silent
        h.advance(3000)
        a.beat()
        b.beat()
    assert h.coord.group(G).TYPE == "classic"
    assert full_state(h.coord) == replayed(h)


def test_a_static_classic_member_replacing_the_last_consumer_member_downgrades_without_rebalance() -> None:
    h = harness()
    classics = [Classic(h)]
    classic_group(h, classics)
    c = Client(h, "c", instance="i-9")
    c.join()
    settle(classics, [c])
    assert done(h.cg_heartbeat(G, "c", -2, instance="i-9")).error_code == 0  # leaves for a while
    s = Classic(h, instance="i-9")  # ... and comes back as a classic consumer
    j = s.join()
    assert j.error_code == 0
    g = h.coord.group(G)
    assert g.TYPE == "classic" and h.state(G) == "Stable" and s.member_id in g.members and "c" not in g.members
    assert s.sync().error_code == 0 and len(s.partitions()) == 3
    assert full_state(h.coord) == replayed(h)


def test_a_failed_write_undoes_the_downgrade() -> None:
    h = harness()
    (a, b), c = upgraded(h)
    before = full_state(h.coord)
    h.fail_next = E.NOT_ENOUGH_REPLICAS
    assert done(h.cg_heartbeat(G, "c", -1)).error_code == E.NOT_ENOUGH_REPLICAS
    assert h.coord.group(G).TYPE == "consumer" and full_state(h.coord) == before
    assert done(h.cg_heartbeat(G, "c", -1)).error_code == 0
    assert h.coord.group(G).TYPE == "classic"


# ---------------------------------------------------------------- both ways, and a crash anywhere


def test_migration_both_ways_twice_replays_to_the_live_state_after_every_write() -> None:
    """A crash after any write (between the steps of a migration: after the conversion, before
    the classic members rejoined, after some of them did, ...) loads what was live then."""
    h = harness()
    a, b = Classic(h), Classic(h, cooperative=True)
    classic_group(h, [a, b])
    checkpoints: list[tuple[int, dict]] = []

    def check() -> None:
        checkpoints.append((len(h.log), full_state(h.coord)))

    for round_ in range(2):
        c = Client(h, f"c{round_}")
        c.join()
        check()
        for _ in range(6):
            c.beat()
            check()
            for k in (a, b):
                k.poll()
                check()
        owners_disjoint(a, b, c)
        done(h.commit(G, {("t", round_): 100 + round_}, member_id=c.member_id, generation=c.epoch, version=9))
        check()
        done(h.cg_heartbeat(G, c.member_id, -1))
        check()
        assert h.coord.group(G).TYPE == "classic"
        # the classic rebalance after the downgrade
        assert a.beat() == E.REBALANCE_IN_PROGRESS
        ja, jb = a.join_request(), b.join_request()
        ja, jb = a._joined(done(ja)), b._joined(done(jb))
        leader = a if ja.leader == a.member_id else b
        plan = {a.member_id: encode_assignment([("t", [0, 2, 4])]), b.member_id: encode_assignment([("t", [1, 3, 5])])}
        for k in sorted((a, b), key=lambda k: k is not leader):
            k.sync(plan if k is leader else None)
        check()
    assert h.offsets(G) == {("t", 0): 100, ("t", 1): 101}
    seen = set()
    for upto, state in checkpoints:
        if upto in seen:
            continue
        seen.add(upto)
        assert replayed(h, upto) == state, upto


def test_classic_member_records_carry_their_classic_metadata() -> None:
    h = harness()
    (a, b), c = upgraded(h)
    recs = [r for r in h.log if type(r.key) is ConsumerGroupMemberMetadataKey and r.key.member_id == a.member_id
            and r.value is not None]
    v = recs[-1].value
    assert v.classic is not None and v.classic.session_timeout_ms == 10000
    assert v.classic.protocols[0][0] == "range" and v.subscribed_topic_names == ("t",)
    assert decode_record(encode_key(recs[-1].key), encode_value(v)).value == v
