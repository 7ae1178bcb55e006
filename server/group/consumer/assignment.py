"""The target assignment (step 2 of a heartbeat): when a group's epoch is ahead of its target
assignment epoch, the assignor computes a new target assignment, once per event-loop turn and
group. The requests that need it (ConsumerGroupHeartbeats, a classic member's JoinGroup) wait
for the end of the turn and are answered together, so a thousand members joining cost a handful
of assignor runs, not a thousand (the role of Kafka's group.consumer.assignment.interval.ms,
KIP-1263). One write holds, in the order they were applied, what the waiting requests changed,
the new target assignment and each member's reconciliation; every answer waits for it."""
from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from kcoord.protocol.coordinator_records import (
    ConsumerGroupTargetAssignmentMemberKey,
    ConsumerGroupTargetAssignmentMemberValue,
    ConsumerGroupTargetAssignmentMetadataKey,
    ConsumerGroupTargetAssignmentMetadataValue,
    CoordinatorRecord,
)
from kcoord.protocol.errors import ErrorCode
from kcoord.server.deferred import Deferred
from kcoord.server.group.consumer import assignors
from kcoord.server.group.consumer.group import ConsumerGroup
from kcoord.server.group.consumer.reconcile import FencedMemberEpoch
from kcoord.server.group.consumer.writes import ConsumerGroupWrites, ErrorAnswer
from kcoord.server.group.group_manager import GroupMetadataManager
from kcoord.server.group.result import CoordinatorResult

log = logging.getLogger("kcoord.group")

# A waiting answer: (group, records, undo) -> (response, what to do once it is durable)
Answer = Callable[[ConsumerGroup, list[CoordinatorRecord], list[CoordinatorRecord]],
                  tuple[Any, Callable[[], None] | None]]


class _Waiter:
    """A request that waits for its group's next target assignment (end of the turn)."""

    __slots__ = ("member_id", "records", "undo", "answer", "error", "deferred")

    def __init__(self, member_id: str, records: list[CoordinatorRecord], undo: list[CoordinatorRecord],
                 answer: Answer, error: ErrorAnswer) -> None:
        self.member_id = member_id
        self.records = records
        self.undo = undo
        self.answer = answer
        self.error = error
        self.deferred: Deferred = Deferred()

    def fail(self, code: ErrorCode) -> None:
        self.deferred.complete(self.error(code, None))


class TargetAssignment:
    """`assignor_names`: group.consumer.assignors, the first the default."""

    def __init__(self, manager: GroupMetadataManager, writes: ConsumerGroupWrites, assignor_names: list[str]) -> None:
        self.manager = manager
        self._groups = manager.groups_by_id
        self.writes = writes
        self.assignor_names = assignor_names

    def answer_after(self, group: ConsumerGroup, member_id: str, records: list[CoordinatorRecord],
                     undo: list[CoordinatorRecord], answer: Answer, error: ErrorAnswer) -> CoordinatorResult:
        """Answer now, or once the group's new target assignment is computed when the group
        epoch is ahead of it: the assignment runs once at the end of this turn for every
        request of the group that needs it."""
        if group.group_epoch > group.assignment_epoch:
            w = _Waiter(member_id, records, undo, answer, error)
            group.awaiting_assignment.append(w)
            self.schedule(group)
            return CoordinatorResult(response=w.deferred)
        try:
            response, after = answer(group, records, undo)
        except FencedMemberEpoch as e:
            self.writes.revert(undo)
            return CoordinatorResult(response=error(ErrorCode.FENCED_MEMBER_EPOCH, str(e)))
        return self.writes.result(records, undo, response, error, after)

    def schedule(self, group: ConsumerGroup) -> None:
        """A new target assignment for the group at the end of this turn."""
        if not group.assignment_scheduled:
            group.assignment_scheduled = True
            self.manager.at_end_of_turn(lambda: self._assign(group))

    def _assign(self, group: ConsumerGroup) -> None:
        """End of the turn: one new target assignment, then every waiting request answered."""
        group.assignment_scheduled = False
        waiting, group.awaiting_assignment = group.awaiting_assignment, []
        if group.dead or self._groups.get(group.group_id) is not group:
            for w in waiting:  # deleted or unloaded meanwhile: the log is the truth now
                w.fail(ErrorCode.NOT_COORDINATOR)
            return
        records: list[CoordinatorRecord] = [r for w in waiting for r in w.records]
        undo: list[CoordinatorRecord] = [r for w in waiting for r in w.undo]
        if group.group_epoch > group.assignment_epoch:
            try:
                self._update(group, records, undo)
            except assignors.PartitionAssignorError as e:
                log.error("[GroupId %s] Failed to compute a new target assignment for epoch %d: %s.",
                          group.group_id, group.group_epoch, e)
                # as Kafka, the heartbeats fail and what they changed is dropped
                self.writes.revert(undo)
                for w in waiting:
                    w.fail(ErrorCode.UNKNOWN_SERVER_ERROR)
                return
        answers: list[tuple[_Waiter, Any, Callable[[], None] | None]] = []
        for w in waiting:
            if w.member_id not in group.members:
                answers.append((w, w.error(ErrorCode.UNKNOWN_MEMBER_ID, None), None))
                continue
            try:
                response, after = w.answer(group, records, undo)
            except FencedMemberEpoch as e:
                response, after = w.error(ErrorCode.FENCED_MEMBER_EPOCH, str(e)), None
            answers.append((w, response, after))
        if not records:
            for w, response, after in answers:
                if after is not None:
                    after()
                w.deferred.complete(response)
            return

        def on_appended(error: ErrorCode | None) -> None:
            for w, response, after in answers:
                if error is None and after is not None:
                    after()
                w.deferred.complete(response if error is None else w.error(error, None))

        self.manager.emit(CoordinatorResult(records=records, on_appended=on_appended, previous=undo))

    def _update(self, group: ConsumerGroup, records: list[CoordinatorRecord], undo: list[CoordinatorRecord]) -> None:
        """The assignor's new target assignment, as the records of what changed."""
        name = group.preferred_assignor() or self.assignor_names[0]
        ids = {m.topic_id: m for m in group.subscription_metadata.values()}
        by_name = group.subscription_metadata
        members: dict[str, assignors.MemberSpec] = {}
        topic_sets = set()
        for mid, m in group.members.items():
            topics = frozenset(by_name[n].topic_id for n in group.member_topics(m) if n in by_name)
            topic_sets.add(topics)
            members[mid] = assignors.MemberSpec(topics, m.instance_id, group.target_assignment.get(mid, {}))
        spec = assignors.GroupSpec(members, {t: m.num_partitions for t, m in ids.items()},
                                   homogeneous=len(topic_sets) <= 1)
        new = assignors.ASSIGNORS[name](spec)
        gid = group.group_id
        out = []
        for mid in group.members:
            a = new.get(mid, {})
            if group.target_assignment.get(mid) != a:
                out.append(CoordinatorRecord(ConsumerGroupTargetAssignmentMemberKey(gid, mid),
                                             ConsumerGroupTargetAssignmentMemberValue(a)))
        out.append(CoordinatorRecord(ConsumerGroupTargetAssignmentMetadataKey(gid),
                                     ConsumerGroupTargetAssignmentMetadataValue(group.group_epoch)))
        self.writes.apply(records, undo, out)
        log.info("[GroupId %s] Computed a new target assignment for epoch %d with '%s' assignor.",
                 gid, group.group_epoch, name)
