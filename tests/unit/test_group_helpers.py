"""Test harness for the group coordinator (used by the other test_group_* modules): a FakeClock,
a fake runtime that replays results and appends them exactly like the real one, and request
builders that go through kafka-python's encode/decode like the handlers' input does."""
from __future__ import annotations

from typing import Any

from kafka.protocol.admin import DeleteGroupsRequest, DescribeGroupsRequest, ListGroupsRequest
from kafka.protocol.consumer import (
    HeartbeatRequest,
    JoinGroupRequest,
    LeaveGroupRequest,
    OffsetCommitRequest,
    OffsetDeleteRequest,
    OffsetFetchRequest,
    SyncGroupRequest,
)

from kcoord.protocol.coordinator_records import CoordinatorRecord
from kcoord.protocol.errors import ErrorCode
from kcoord.server.clock import FakeClock
from kcoord.server.coordinator.changes import Change, InFlight
from kcoord.server.deferred import Deferred
from kcoord.server.group.config import GroupConfig
from kcoord.server.group.coordinator import GroupCoordinator
from kcoord.server.group.result import CoordinatorResult

E = ErrorCode


def wire(req: Any, version: int) -> Any:
    """Encode with the request's version and decode again, as a handler would receive it."""
    return type(req).decode(bytes(req.encode()), version=version)


def sub(*topics: str, version: int = 0) -> bytes:
    """A ConsumerProtocolSubscription (v0 layout) for these topics."""
    out = version.to_bytes(2, "big", signed=True) + len(topics).to_bytes(4, "big")
    for t in topics:
        b = t.encode()
        out += len(b).to_bytes(2, "big") + b
    return out + (-1).to_bytes(4, "big", signed=True)


class Harness:
    def __init__(self, config: GroupConfig | None = None, num_partitions: int = 50, **cfg: Any) -> None:
        self.clock = FakeClock()
        self.config = config or GroupConfig(**cfg)
        self.coord = GroupCoordinator(self.config, self.clock, num_partitions,
                                      committed=lambda key: self.in_flight.committed(key))
        self.in_flight: InFlight[CoordinatorRecord] = InFlight(self.coord.replay)
        self.log: list[CoordinatorRecord] = []
        self.fail_next: ErrorCode | None = None
        self.hold = False
        self.held: list[tuple[CoordinatorResult, Change]] = []
        self._bg: list[tuple[CoordinatorResult, Change]] = []
        self.coord.set_background_writer(self._background)

    # ---- runtime ------------------------------------------------------------------------

    def _replay(self, result: CoordinatorResult) -> Change:
        """As the runtime: the records are replayed as the write is made (unless the shard
        replayed them as it made them), and what they replaced is kept to revert them."""
        previous = result.previous
        if previous is None:
            previous = []
            for r in result.records:
                previous.append(self.coord.current_record(r.key))
                self.coord.replay(r)
        return self.in_flight.begin(result.records, previous)

    def _background(self, result: CoordinatorResult) -> None:
        if result.records:
            self._bg.append((result, self._replay(result)))

    def run(self, result: CoordinatorResult) -> Any:
        out = self._process(result)
        self.flush()
        return out

    def _process(self, result: CoordinatorResult, change: Change | None = None) -> Any:
        if not result.records:
            return result.response
        if change is None:
            change = self._replay(result)
        if self.hold:
            self.held.append((result, change))
            return None
        assert result.on_appended is not None
        # a Deferred response is the answer itself, which on_appended completes
        parked = result.response if isinstance(result.response, Deferred) else None
        if self.fail_next is not None:
            err, self.fail_next = self.fail_next, None
            # as the runtime's writer fails a batch: the background writes staged after this one
            # fail with it, and what they replayed is reverted newest first
            failed = [(result, change), *self._bg]
            self._bg.clear()  # the list the coordinator's background writer appends to
            for _r, c in reversed(failed):
                c.revert()
            answer = result.on_appended(err)
            for r, _c in failed[1:]:
                if r.on_appended is not None:
                    r.on_appended(err)
            return parked if parked is not None else answer
        self.log.extend(result.records)
        change.settle()
        answer = result.on_appended(None)
        return parked if parked is not None else answer

    def release(self) -> list[Any]:
        held, self.held, self.hold = self.held, [], False
        out = [self._process(r, c) for r, c in held]
        self.flush()
        return out

    def flush(self) -> None:
        """Background writes, and what waits for the end of the event-loop turn."""
        while True:
            self.coord.run_end_of_turn()
            if not self._bg:
                return
            while self._bg:
                self._process(*self._bg.pop(0))

    def advance(self, ms: int) -> None:
        self.clock.advance(ms)
        self.flush()

    # ---- requests ------------------------------------------------------------------------

    def join(
        self,
        group: str,
        member_id: str = "",
        *,
        version: int = 5,
        instance: str | None = None,
        protocols: list[tuple[str, bytes]] | None = None,
        session: int = 10000,
        rebalance: int = 30000,
        ptype: str = "consumer",
        client_id: str = "client",
        reason: str | None = None,
    ) -> Any:
        protocols = protocols if protocols is not None else [("range", sub("t"))]
        req = JoinGroupRequest(
            version=version, group_id=group, session_timeout_ms=session, rebalance_timeout_ms=rebalance,
            member_id=member_id, group_instance_id=instance, protocol_type=ptype,
            protocols=[JoinGroupRequest.JoinGroupRequestProtocol(name=n, metadata=m) for n, m in protocols],
            reason=reason,
        )
        return self.run(self.coord.join_group(wire(req, version), version, client_id, "/127.0.0.1"))

    def join_known(self, group: str, **kw: Any) -> Any:
        """A v4+ dynamic member's two-step join (MEMBER_ID_REQUIRED, then with the id)."""
        first = done(self.join(group, **kw))
        assert first.error_code == E.MEMBER_ID_REQUIRED, first
        return self.join(group, first.member_id, **kw)

    def sync(
        self,
        group: str,
        member_id: str,
        generation: int,
        assignments: dict[str, bytes] | None = None,
        *,
        version: int = 3,
        instance: str | None = None,
        ptype: str | None = None,
        pname: str | None = None,
    ) -> Any:
        req = SyncGroupRequest(
            version=version, group_id=group, generation_id=generation, member_id=member_id,
            group_instance_id=instance, protocol_type=ptype, protocol_name=pname,
            assignments=[SyncGroupRequest.SyncGroupRequestAssignment(member_id=m, assignment=a)
                         for m, a in (assignments or {}).items()],
        )
        return self.run(self.coord.sync_group(wire(req, version), version))

    def heartbeat(self, group: str, member_id: str, generation: int, *, version: int = 3,
                  instance: str | None = None) -> Any:
        req = HeartbeatRequest(version=version, group_id=group, generation_id=generation, member_id=member_id,
                               group_instance_id=instance)
        return self.run(self.coord.heartbeat(wire(req, version), version))

    def leave(self, group: str, *members: tuple[str, str | None], version: int = 3) -> Any:
        if version >= 3:
            req = LeaveGroupRequest(version=version, group_id=group, members=[
                LeaveGroupRequest.MemberIdentity(member_id=m, group_instance_id=i) for m, i in members])
        else:
            req = LeaveGroupRequest(version=version, group_id=group, member_id=members[0][0])
        return self.run(self.coord.leave_group(wire(req, version), version))

    def commit(
        self,
        group: str,
        offsets: dict[tuple[str, int], int],
        *,
        member_id: str = "",
        generation: int = -1,
        version: int = 8,
        instance: str | None = None,
        metadata: str | None = "",
        retention: int = -1,
        commit_ts: int = -1,
        epoch: int = -1,
    ) -> Any:
        topics: dict[str, list] = {}
        for (t, p), o in offsets.items():
            topics.setdefault(t, []).append(
                OffsetCommitRequest.OffsetCommitRequestTopic.OffsetCommitRequestPartition(
                    partition_index=p, committed_offset=o, committed_leader_epoch=epoch,
                    commit_timestamp=commit_ts, committed_metadata=metadata))
        req = OffsetCommitRequest(
            version=version, group_id=group, generation_id_or_member_epoch=generation, member_id=member_id,
            group_instance_id=instance, retention_time_ms=retention,
            topics=[OffsetCommitRequest.OffsetCommitRequestTopic(name=t, partitions=ps) for t, ps in topics.items()],
        )
        return self.run(self.coord.offset_commit(wire(req, version), version))

    def fetch(self, group: str, partitions: dict[str, list[int]] | None = None, *, version: int = 7,
              require_stable: bool = False) -> Any:
        if version >= 8:
            req = OffsetFetchRequest(version=version, require_stable=require_stable, groups=[
                OffsetFetchRequest.OffsetFetchRequestGroup(
                    group_id=group,
                    topics=None if partitions is None else [
                        OffsetFetchRequest.OffsetFetchRequestGroup.OffsetFetchRequestTopics(
                            name=t, partition_indexes=ps) for t, ps in partitions.items()])])
        else:
            req = OffsetFetchRequest(
                version=version, group_id=group, require_stable=require_stable,
                topics=None if partitions is None else [
                    OffsetFetchRequest.OffsetFetchRequestTopic(name=t, partition_indexes=ps)
                    for t, ps in partitions.items()])
        return self.run(self.coord.offset_fetch(wire(req, version), version))

    def offset_delete(self, group: str, partitions: dict[str, list[int]]) -> Any:
        T = OffsetDeleteRequest.OffsetDeleteRequestTopic
        req = OffsetDeleteRequest(version=0, group_id=group, topics=[
            T(name=t, partitions=[T.OffsetDeleteRequestPartition(partition_index=p) for p in ps])
            for t, ps in partitions.items()])
        return self.run(self.coord.offset_delete(wire(req, 0), 0))

    def describe(self, *groups: str, version: int = 5, ops: bool = False) -> Any:
        req = DescribeGroupsRequest(version=version, groups=list(groups), include_authorized_operations=ops)
        return self.run(self.coord.describe_groups(wire(req, version), version))

    def list(self, *, version: int = 5, states: list[str] | None = None, types: list[str] | None = None) -> Any:
        req = ListGroupsRequest(version=version, states_filter=states or [], types_filter=types or [])
        return self.run(self.coord.list_groups(wire(req, version), version))

    def delete(self, *groups: str, version: int = 2) -> Any:
        req = DeleteGroupsRequest(version=version, groups_names=list(groups))
        return self.run(self.coord.delete_groups(wire(req, version), version))

    # ---- compound steps --------------------------------------------------------------------

    def offsets(self, group: str) -> dict[tuple[str, int], int]:
        r = done(self.fetch(group, None, version=7))
        return {(t.name, p.partition_index): p.committed_offset for t in r.topics for p in t.partitions}

    def state(self, group: str) -> str:
        g = self.coord.group(group)
        return "Dead" if g is None else str(g.state)


def done(x: Any) -> Any:
    """The response of a result that must be complete now; it must also encode, and decode
    back to the same version."""
    if isinstance(x, Deferred):
        assert x.done, "response is still parked"
        x = x.result()
    assert x is not None
    encoded = bytes(x.encode())
    type(x).decode(encoded, version=x.API_VERSION)
    return x


def parked(x: Any) -> bool:
    return isinstance(x, Deferred) and not x.done


def stable_group(h: Harness, group: str, n: int, **kw: Any) -> tuple[list[str], int, str]:
    """n members join (v4+ dynamic ones in two steps), the initial delay runs out, everyone
    syncs; returns (member ids in join order, generation, leader)."""
    two_step = kw.get("version", 5) >= 4 and kw.get("instance") is None
    pending = [h.join_known(group, **kw) if two_step else h.join(group, **kw) for _ in range(n)]
    # the initial delay is re-armed while members keep arriving
    for _ in range(20):
        if not any(parked(p) for p in pending):
            break
        h.advance(h.config.group_initial_rebalance_delay_ms)
    resps = [done(p) for p in pending]
    assert all(r.error_code == 0 for r in resps), resps
    gen = resps[0].generation_id
    leader = resps[0].leader
    ids = [r.member_id for r in resps]
    syncs = [h.sync(group, m, gen, {x: x.encode() for x in ids} if m == leader else None) for m in ids]
    assert all(done(s).error_code == 0 for s in syncs)
    return ids, gen, leader


def test_harness_round_trip() -> None:
    h = Harness()
    ids, gen, leader = stable_group(h, "g", 3)
    assert gen == 1 and leader == ids[0] and h.state("g") == "Stable"
    assert len(h.log) == 1


# ---- consumer groups (KIP-848) ----------------------------------------------------------------


class FakeTopics:
    """The broker's topics as the coordinator reads them (server/group/consumer/protocol.TopicSource)."""

    def __init__(self, **topics: int) -> None:
        import uuid as _uuid

        self._uuid = _uuid
        self.changes = 0
        self.by_name: dict[str, Any] = {}
        for name, n in topics.items():
            self.create(name, n)

    def create(self, name: str, partitions: int) -> None:
        from kcoord.protocol.coordinator_records import TopicMetadata

        old = self.by_name.get(name)
        tid = old.topic_id if old is not None else self._uuid.uuid5(self._uuid.NAMESPACE_OID, name)
        self.by_name[name] = TopicMetadata(tid, name, partitions)
        self.changes += 1

    def delete(self, name: str) -> None:
        del self.by_name[name]
        self.changes += 1

    def metadata(self, name: str) -> Any:
        return self.by_name.get(name)

    def names(self) -> list[str]:
        return list(self.by_name)

    def name_of(self, topic_id: Any) -> str | None:
        return next((m.name for m in self.by_name.values() if m.topic_id == topic_id), None)

    def id(self, name: str) -> Any:
        return self.by_name[name].topic_id


class ConsumerHarness(Harness):
    """Harness with topics, and ConsumerGroupHeartbeat / ConsumerGroupDescribe builders."""

    def __init__(self, topics: FakeTopics | None = None, **cfg: Any) -> None:
        super().__init__(**cfg)
        self.topics = topics or FakeTopics(t=6)
        self.coord.set_topics(self.topics)

    def cg_heartbeat(self, group: str, member_id: str, epoch: int, *, topics: list[str] | None = None,
                     regex: str | None = None, owned: dict[str, set[int]] | None | bool = None,
                     rebalance: int = -1, instance: str | None = None, assignor: str | None = None,
                     rack: str | None = None, version: int = 1) -> Any:
        from kcoord.protocol.messages import ConsumerGroupHeartbeatRequest as R

        if owned is True:
            owned = {}
        parts = None if owned is None or owned is False else [
            R.TopicPartitions(topic_id=self.topics.id(t), partitions=sorted(ps)) for t, ps in owned.items()]
        req = R(version=version, group_id=group, member_id=member_id, member_epoch=epoch, instance_id=instance,
                rack_id=rack, rebalance_timeout_ms=rebalance, subscribed_topic_names=topics,
                subscribed_topic_regex=regex, server_assignor=assignor, topic_partitions=parts)
        return self.run(self.coord.consumer_group_heartbeat(wire(req, version), version, "client", "/127.0.0.1"))

    def cg_join(self, group: str, member_id: str, topics: list[str] | None = None, **kw: Any) -> Any:
        kw.setdefault("rebalance", 30000)
        return self.cg_heartbeat(group, member_id, 0, topics=topics if topics is not None or "regex" in kw
                                 else ["t"], owned={}, **kw)

    def cg_describe(self, *groups: str, version: int = 1) -> Any:
        from kcoord.protocol.messages import ConsumerGroupDescribeRequest as D

        req = D(version=version, group_ids=list(groups), include_authorized_operations=False)
        return self.run(self.coord.consumer_group_describe(wire(req, version), version))

    def owned(self, response: Any) -> dict[str, set[int]] | None:
        """The assignment of a heartbeat answer by topic name (None when it carried none)."""
        if response.assignment is None:
            return None
        return {self.topics.name_of(tp.topic_id): set(tp.partitions) for tp in response.assignment.topic_partitions}
