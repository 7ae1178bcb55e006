"""Walks a member from its current assignment to its target (Kafka's CurrentAssignmentBuilder).

The rule that keeps one partition from being owned by two members at once: a member first
gives up (revokes) what its target no longer holds, and only gets a partition once no other
member holds it at any epoch (the group's partition epochs). A member with partitions to
revoke stays at its epoch (UNREVOKED_PARTITIONS) until its heartbeat no longer lists them; a
member waiting for partitions others still hold gets the new epoch with what it can have
(UNRELEASED_PARTITIONS).
"""
from __future__ import annotations

from collections.abc import Callable, Iterable
from uuid import UUID

from kcoord.protocol.coordinator_records import Assignment
from kcoord.protocol.errors import ErrorCode
from kcoord.server.group.consumer.member import ConsumerGroupMember, MemberState

# (topic id, partition) -> the epoch of the member owning it, -1 if none
PartitionEpoch = Callable[[UUID, int], int]
# what the member says it owns: (topic id, partitions), or None (not sent this time)
Owned = Iterable[tuple[UUID, Iterable[int]]] | None


class FencedMemberEpoch(Exception):
    code = ErrorCode.FENCED_MEMBER_EPOCH


def _owns_any(owned: Owned, revoking: Assignment) -> bool:
    if owned is None:
        return True  # not told: assume it still owns them
    for topic_id, partitions in owned:
        pending = revoking.get(topic_id)
        if pending and any(p in pending for p in partitions):
            return True
    return False


def owns_exactly(owned: Owned, assigned: Assignment) -> bool:
    """Whether the member says it owns exactly `assigned` (False when it did not say)."""
    if owned is None:
        return False
    said = {topic_id: frozenset(ps) for topic_id, ps in owned if ps}
    return said == {topic_id: frozenset(ps) for topic_id, ps in assigned.items() if ps}


def reconcile(member: ConsumerGroupMember, target_epoch: int, target: Assignment,
              partition_epoch: PartitionEpoch, owned: Owned) -> ConsumerGroupMember:
    """The member's next step towards `target` (itself when there is none)."""
    state = member.state
    if state is MemberState.STABLE:
        if member.member_epoch != target_epoch:
            return _next(member, member.member_epoch, target_epoch, target, partition_epoch, owned)
        return member
    if state is MemberState.UNREVOKED_PARTITIONS:
        if _owns_any(owned, member.pending_revocation):
            return member  # still revoking
        return _next(member, member.member_epoch + 1, target_epoch, target, partition_epoch, owned)
    if state is MemberState.UNRELEASED_PARTITIONS:
        return _next(member, member.member_epoch, target_epoch, target, partition_epoch, owned)
    # UNKNOWN: only a member that owns nothing may go on
    if owned is None or any(True for _ in owned):
        raise FencedMemberEpoch("The consumer group member is in a unknown state.")
    return _next(member, target_epoch, target_epoch, target, partition_epoch, owned)


def _next(member: ConsumerGroupMember, epoch: int, target_epoch: int, target: Assignment,
          partition_epoch: PartitionEpoch, owned: Owned) -> ConsumerGroupMember:
    assigned: Assignment = {}
    revoking: Assignment = {}
    pending: Assignment = {}
    unreleased = False
    current = member.assigned
    for topic_id in set(target) | set(current):
        want = target.get(topic_id, frozenset())
        have = current.get(topic_id, frozenset())
        keep = have & want
        if keep:
            assigned[topic_id] = keep
        if have - keep:
            revoking[topic_id] = have - keep
        free = set()
        for p in want - keep:
            if partition_epoch(topic_id, p) == -1:
                free.add(p)
            else:
                unreleased = True  # another member still holds it
        if free:
            pending[topic_id] = frozenset(free)
    if revoking and _owns_any(owned, revoking):
        return member.with_epoch(epoch, MemberState.UNREVOKED_PARTITIONS, assigned, revoking)
    for topic_id, ps in pending.items():
        assigned[topic_id] = assigned.get(topic_id, frozenset()) | ps
    state = MemberState.UNRELEASED_PARTITIONS if unreleased else MemberState.STABLE
    return member.with_epoch(target_epoch, state, assigned, {})
