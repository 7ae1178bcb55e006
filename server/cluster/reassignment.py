"""Partition reassignments as Kafka's ZooKeeper-mode controller carries them out (2.4+,
AlterPartitionReassignments / ListPartitionReassignments): the reassignment in progress lives
in the topic's own znode (/brokers/topics/T: `partitions` holds RS = the target replicas then
the original ones, `adding_replicas` AR, `removing_replicas` RR), so a new controller resumes
it from ZooKeeper alone.

For one partition (ORS: original replicas, TRS: target replicas):

| step | when | what the controller writes |
|---|---|---|
| start (U1) | the request | RS = TRS + ORS, AR = TRS - ORS, RR = ORS - TRS in /brokers/topics/T |
| replaced (U3) | a new target drops replicas an earlier one was adding | those replicas leave the ISR (a new leader epoch); they are no longer in RS, so their nodes stop and delete them |
| A1 | not complete | the leader epoch +1: every replica, the new ones included, acts on the new RS |
| wait | | the leader adds each new replica to the ISR once it has caught up (server/replication/) |
| complete (B3-B6) | TRS within the ISR | the leader stays if it is in TRS and live, else the first live TRS replica in the ISR leads; RR leave the ISR (one state write, a new epoch); then RS = TRS, AR = RR = [] |
| cancel | target null | a reassignment to ORS: the adding replicas are dropped (U3), RS = ORS |

A node no longer in a partition's RS stops its replica and deletes its log
(node.py `_tell_replicas`). The rules below are pure; `Reassignments` does the writes, each a
multi-op fenced by /controller_epoch's version and the topic znode's version."""
from __future__ import annotations

import json
import logging
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kcoord.server.cluster import election, znodes
from kcoord.server.cluster.zk import BadVersionError, NoNodeError, NotEmptyError

if TYPE_CHECKING:
    from kcoord.server.cluster.controller import Controller

log = logging.getLogger("kcoord.cluster.reassignment")

TopicPartition = tuple[str, int]
NOT_EXISTS = "The partition does not exist."


def _minus(a: Sequence[int], b: Collection[int]) -> tuple[int, ...]:
    return tuple(x for x in a if x not in b)


@dataclass(frozen=True, slots=True)
class ReplicaAssignment:
    """One partition's RS, AR and RR (Kafka's ReplicaAssignment)."""

    replicas: tuple[int, ...]
    adding: tuple[int, ...] = ()
    removing: tuple[int, ...] = ()

    @property
    def origin(self) -> tuple[int, ...]:
        return _minus(self.replicas, self.adding)

    @property
    def target(self) -> tuple[int, ...]:
        return _minus(self.replicas, self.removing)

    @property
    def reassigning(self) -> bool:
        return bool(self.adding or self.removing)

    def reassign_to(self, target: Sequence[int]) -> ReplicaAssignment:
        """The target first, then the original replicas not in it."""
        full = tuple(dict.fromkeys((*target, *self.origin)))
        return ReplicaAssignment(full, _minus(full, self.origin), _minus(full, target))


def of(topic: znodes.TopicAssignment | None, partition: int) -> ReplicaAssignment:
    """The partition's assignment; empty replicas when the topic or partition does not exist."""
    if topic is None or partition not in topic.replicas:
        return ReplicaAssignment(())
    return ReplicaAssignment(topic.replicas[partition], topic.adding.get(partition, ()),
                             topic.removing.get(partition, ()))


def with_partition(topic: znodes.TopicAssignment, partition: int, ra: ReplicaAssignment) -> znodes.TopicAssignment:
    adding = {p: r for p, r in topic.adding.items() if p != partition}
    removing = {p: r for p, r in topic.removing.items() if p != partition}
    if ra.adding:
        adding[partition] = ra.adding
    if ra.removing:
        removing[partition] = ra.removing
    return znodes.TopicAssignment(topic.name, topic.topic_id, {**topic.replicas, partition: ra.replicas},
                                  dict(sorted(adding.items())), dict(sorted(removing.items())))


def _scala_seq(xs: Sequence[int]) -> str:
    return "ArrayBuffer(" + ", ".join(map(str, xs)) + ")"


def invalid_target(target: Sequence[int], current: ReplicaAssignment, live: Collection[int]) -> str | None:
    """Kafka's validateReplicas: why a target is INVALID_REPLICA_ASSIGNMENT, or None."""
    if not target:
        return "Empty replica list specified in partition reassignment."
    if len(set(target)) != len(target):
        return f"Duplicate replica ids in partition reassignment replica list: {_scala_seq(target)}"
    if any(b < 0 for b in target):
        return f"Invalid broker id in replica list: {_scala_seq(target)}"
    adding = current.reassign_to(target).adding
    if not set(adding) <= set(live):
        return (f"Replica assignment has brokers that are not alive. Replica list: {_scala_seq(adding)}, "
                f"live broker list: Set({', '.join(map(str, sorted(live)))})")
    return None


def completion(ra: ReplicaAssignment, leader: int, isr: Sequence[int],
               live: Collection[int]) -> tuple[int, tuple[int, ...]] | None:
    """Once TRS is within the ISR: (leader, ISR) after the removed replicas go (Kafka's B3-B4,
    ReassignPartitionLeaderElectionStrategy when the leader is not in TRS or is gone). None:
    not complete, or no TRS replica may lead yet."""
    if not set(ra.target) <= set(isr):
        return None
    new_isr = _minus(isr, ra.removing)
    if leader in ra.target and leader in live:
        return leader, new_isr
    chosen = next((r for r in ra.target if r in live and r in isr), None)
    return None if chosen is None else (chosen, new_isr)


LEGACY = "/admin/reassign_partitions"


def decode_legacy(data: bytes) -> dict[TopicPartition, tuple[int, ...]]:
    """/admin/reassign_partitions: {"version":1,"partitions":[{"topic":..,"partition":..,"replicas":[..]}]}."""
    try:
        obj = json.loads(data)
        return {(str(e["topic"]), int(e["partition"])): tuple(int(b) for b in e["replicas"])
                for e in obj.get("partitions", [])}
    except (ValueError, KeyError, TypeError):
        log.error("Ignoring %s: not a reassignment (%r)", LEGACY, data[:200])
        return {}


def encode_legacy(entries: dict[TopicPartition, tuple[int, ...]]) -> bytes:
    return json.dumps({"version": 1, "partitions": [{"topic": t, "partition": p, "replicas": list(r)}
                                                    for (t, p), r in sorted(entries.items())]},
                      separators=(",", ":")).encode()


class Reassignments:
    """The controller's reassignment work (docs/cluster.md, "Reassignments and configs")."""

    def __init__(self, controller: Controller) -> None:
        self.controller = controller
        self.zk = controller.zk
        self.cache = controller.cache

    # ---- the API (on the controller)

    async def alter(self, requests: dict[TopicPartition, tuple[int, ...] | None],
                    legacy: bool = False) -> dict[TopicPartition, tuple[str, str | None]]:
        """Kafka's processApiPartitionReassignment: per partition (error code name, message)."""
        out: dict[TopicPartition, tuple[str, str | None]] = {}
        if not legacy:  # the latest reassignment wins over one asked through /admin/reassign_partitions
            await self._drop_legacy(lambda tp, _r: tp in requests)
        for (topic, p), target in requests.items():
            current = of(self.cache.topics.get(topic), p)
            if target is not None:
                problem = invalid_target(target, current, self.cache.live)
                if problem is not None:
                    out[(topic, p)] = ("INVALID_REPLICA_ASSIGNMENT", problem)
                    continue
            elif not current.reassigning:
                out[(topic, p)] = ("NO_REASSIGNMENT_IN_PROGRESS", "No partition reassignment is in progress.")
                continue
            if topic in self.cache.deleting or not current.replicas:
                out[(topic, p)] = ("UNKNOWN_TOPIC_OR_PARTITION", NOT_EXISTS)
                continue
            try:
                out[(topic, p)] = await self._start(topic, p, target)
            except BadVersionError:
                if not await self.controller._still_controller():
                    out[(topic, p)] = ("NOT_CONTROLLER", "This is not the correct controller for this cluster.")
                else:  # the topic changed meanwhile (CreatePartitions): once more from the newer znode
                    try:
                        out[(topic, p)] = await self._start(topic, p, target)
                    except BadVersionError:
                        out[(topic, p)] = ("REASSIGNMENT_IN_PROGRESS", "The topic changed meanwhile; try again.")
        return out

    async def _start(self, topic: str, p: int, target: tuple[int, ...] | None) -> tuple[str, str | None]:
        got = await self.zk.get_or_none(znodes.topic_path(topic))
        if got is None:
            return "UNKNOWN_TOPIC_OR_PARTITION", NOT_EXISTS
        assignment = znodes.decode_topic(topic, got[0])
        current = of(assignment, p)
        if not current.replicas:
            return "UNKNOWN_TOPIC_OR_PARTITION", NOT_EXISTS
        new = current.reassign_to(target if target is not None else current.origin)
        if new != current:  # U1, then U3
            await self._write_topic(with_partition(assignment, p, new), got[1])
            log.info("Reassigning %s-%d: %s -> replicas %s, adding %s, removing %s", topic, p, list(current.replicas),
                     list(new.replicas), list(new.adding), list(new.removing))
            unneeded = _minus(current.replicas, new.replicas)
            if unneeded:
                await self._leave_isr(topic, p, unneeded)
        st = self.cache.state(topic, p)
        if st is None:
            return "NONE", None
        try:
            if completion(new, st.leader, st.isr, self.cache.live) is None:
                await self.controller._write(st, st.leader, st.isr)  # A1: the new RS, in a new epoch
            else:
                await self.maybe_complete(topic, p)
        except BadVersionError:
            self.controller.poke()  # the next pass decides from the newer state
        return "NONE", None

    # ---- the controller's passes

    async def maybe_complete(self, topic: str, p: int) -> None:
        """B3-B6 once the target replicas are all in the ISR."""
        got = await self.zk.get_or_none(znodes.topic_path(topic))
        if got is None:
            return
        assignment = znodes.decode_topic(topic, got[0])
        ra = of(assignment, p)
        st = self.cache.state(topic, p)
        if not ra.reassigning or st is None:
            return
        decided = completion(ra, st.leader, st.isr, self.cache.live)
        if decided is None:
            return
        leader, isr = decided
        if (leader, isr) != (st.leader, tuple(st.isr)):
            await self.controller._write(st, leader, isr)
        done = ReplicaAssignment(ra.target)
        await self._write_topic(with_partition(assignment, p, done), got[1])
        log.info("Reassignment of %s-%d complete: replicas %s", topic, p, list(done.replicas))
        await self._drop_legacy(lambda tp, r: tp == (topic, p) and r == done.replicas)

    async def _leave_isr(self, topic: str, p: int, replicas: Sequence[int]) -> None:
        """Kafka's OfflineReplica for replicas dropped from RS: out of the ISR (the last member
        kept); a dropped leader leaves the partition leaderless until the next pass elects."""
        st = self.cache.state(topic, p)
        if st is None:
            return
        leader, isr = st.leader, tuple(st.isr)
        for r in replicas:
            leader, isr = election.without_replica(leader, isr, r)
        if (leader, isr) != (st.leader, tuple(st.isr)):
            try:
                await self.controller._write(st, leader, isr)
            except BadVersionError:
                self.controller.poke()

    async def _write_topic(self, assignment: znodes.TopicAssignment, version: int) -> None:
        path = znodes.topic_path(assignment.name)
        data = znodes.encode_topic(assignment)
        try:
            await self.zk.transaction(lambda tx: (self.controller._fenced(tx), tx.set_data(path, data, version)))
        except NoNodeError:
            return  # deleted meanwhile: nothing left to reassign
        self.cache.put_topic(assignment)

    # ---- /admin/reassign_partitions (the legacy path, still read by Kafka 3.x's controller)

    async def watch_legacy(self) -> None:
        """Read the znode (with a watch that reads it again) and start what it asks."""
        if not self.controller.active:
            return

        def fired(_event: Any) -> None:
            if self.controller.active:
                self.controller.spawn(self.watch_legacy())

        got = await self.zk.get_or_none(LEGACY, watch=fired)
        if got is None:
            return
        if not got[0].strip():  # an empty one (nodes before this one created it at start-up): no request
            try:
                await self.zk.transaction(lambda tx: (self.controller._fenced(tx), tx.delete(LEGACY, got[1])))
            except (BadVersionError, NoNodeError, NotEmptyError):
                pass
            return
        wanted = decode_legacy(got[0])
        todo = {tp: r for tp, r in wanted.items()
                if of(self.cache.topics.get(tp[0]), tp[1]).target != r or not of(self.cache.topics.get(tp[0]),
                                                                                 tp[1]).reassigning}
        if not todo:
            return
        results = await self.alter(dict(todo), legacy=True)
        failed = {tp for tp, (code, _m) in results.items() if code != "NONE"}
        for tp in sorted(failed):
            log.error("Reassignment of %s-%d from %s failed: %s %s", tp[0], tp[1], LEGACY, *results[tp])
        # those already complete (nothing to move) and the failed ones leave the znode
        await self._drop_legacy(lambda tp, r: tp in failed or (tp in todo and not of(
            self.cache.topics.get(tp[0]), tp[1]).reassigning and of(self.cache.topics.get(tp[0]), tp[1]).replicas == r))

    async def _drop_legacy(self, drop: Any) -> None:
        got = await self.zk.get_or_none(LEGACY)
        if got is None:
            return
        entries = decode_legacy(got[0])
        kept = {tp: r for tp, r in entries.items() if not drop(tp, r)}
        if kept == entries:
            return
        try:
            if kept:
                await self.zk.transaction(lambda tx: (self.controller._fenced(tx),
                                                      tx.set_data(LEGACY, encode_legacy(kept), got[1])))
            else:
                await self.zk.transaction(lambda tx: (self.controller._fenced(tx), tx.delete(LEGACY, got[1])))
                log.info("No more partitions to reassign from %s: deleted it", LEGACY)
        except (BadVersionError, NoNodeError, NotEmptyError):
            self.controller.poke()

    # ---- ListPartitionReassignments

    def listing(self, wanted: list[TopicPartition] | None) -> dict[TopicPartition, ReplicaAssignment]:
        """The partitions being reassigned (of `wanted`, else all); others are left out."""
        if wanted is None:
            wanted = [(t.name, p) for t in self.cache.topics.values() for p in sorted(set(t.adding) | set(t.removing))]
        out = {}
        for topic, p in wanted:
            ra = of(self.cache.topics.get(topic), p)
            if ra.reassigning:
                out[(topic, p)] = ra
        return out


def reassigning(cache: Any) -> list[TopicPartition]:
    """Every partition with a reassignment in progress, in the cache's view."""
    return sorted((t.name, p) for t in cache.topics.values() for p in set(t.adding) | set(t.removing))
