"""One classic group: state, generation, protocol type and chosen protocol, leader, members
(dynamic, static by group.instance.id, pending per KIP-394) and members still owing a
SyncGroup. Its committed offsets live in the offset metadata manager, as in Kafka 4.x.

Mirrors Kafka's ClassicGroup (GroupMetadata in 3.x). Bookkeeping that Kafka keeps
incrementally (members awaiting join, protocol support counts) is kept incrementally here
too, so a rebalance of n members is O(n), not O(n^2).
"""
from __future__ import annotations

import logging
import struct
import uuid

from kcoord.protocol.coordinator_records import CoordinatorRecord, GroupKey
from kcoord.protocol.errors import ErrorCode
from kcoord.server.group.classic.member import JoinCallback, JoinResult, MemberMetadata, Protocols, SyncResult
from kcoord.server.group.classic.state import GroupState, can_rebalance, check_transition
from kcoord.server.group.types import GroupType, OffsetExpiration

CONSUMER_PROTOCOL_TYPE = "consumer"

log = logging.getLogger("kcoord.group")


class ClassicGroup:
    TYPE = GroupType.CLASSIC

    __slots__ = (
        "group_id",
        "state",
        "current_state_timestamp",
        "previous_state_timestamp",
        "protocol_type",
        "protocol_name",
        "generation_id",
        "leader_id",
        "members",
        "static_members",
        "pending_members",
        "num_awaiting_join",
        "supported_protocols",
        "pending_sync_members",
        "subscribed_topics",
        "new_member_added",
        "dead",
    )

    def __init__(self, group_id: str, now_ms: int, state: GroupState = GroupState.EMPTY) -> None:
        self.group_id = group_id
        self.state = state
        self.dead = state is GroupState.DEAD  # kept with the state: read on every replayed commit
        self.current_state_timestamp: int | None = now_ms
        self.previous_state_timestamp: int | None = None
        self.protocol_type: str | None = None
        self.protocol_name: str | None = None
        self.generation_id = 0
        self.leader_id: str | None = None
        # insertion ordered: the first member is the default leader
        self.members: dict[str, MemberMetadata] = {}
        self.static_members: dict[str, str] = {}  # group.instance.id -> member id
        self.pending_members: set[str] = set()
        self.num_awaiting_join = 0
        self.supported_protocols: dict[str, int] = {}
        self.pending_sync_members: set[str] = set()
        # consumer groups: union of the members' subscriptions; None = unknown (treat as all)
        self.subscribed_topics: set[str] | None = None
        self.new_member_added = False

    # ---- state -------------------------------------------------------------------------

    def is_(self, state: GroupState) -> bool:
        return self.state is state

    def transition_to(self, target: GroupState, now_ms: int) -> None:
        self.state = check_transition(self.group_id, self.state, target)
        self.dead = target is GroupState.DEAD
        self.previous_state_timestamp = self.current_state_timestamp
        self.current_state_timestamp = now_ms

    def can_rebalance(self) -> bool:
        return can_rebalance(self.state)

    # ---- members -----------------------------------------------------------------------

    def has(self, member_id: str) -> bool:
        return member_id in self.members

    def get(self, member_id: str) -> MemberMetadata:
        return self.members[member_id]

    def size(self) -> int:
        return len(self.members)

    def is_leader(self, member_id: str) -> bool:
        return self.leader_id == member_id

    def is_consumer_group(self) -> bool:
        return self.protocol_type == CONSUMER_PROTOCOL_TYPE

    def add(self, member: MemberMetadata, callback: JoinCallback | None = None) -> None:
        if member.group_instance_id is not None:
            if member.group_instance_id in self.static_members:
                raise ValueError(
                    f"Static member with groupInstanceId={member.group_instance_id} cannot be added "
                    f"to group {self.group_id} since it is already a member"
                )
            self.static_members[member.group_instance_id] = member.member_id
        if not self.members:
            self.protocol_type = member.protocol_type
        if self.leader_id is None:
            self.leader_id = member.member_id
        self.members[member.member_id] = member
        self._inc_protocols(member)
        member.awaiting_join = callback
        if callback is not None:
            self.num_awaiting_join += 1
        self.pending_members.discard(member.member_id)

    def remove(self, member_id: str) -> MemberMetadata | None:
        member = self.members.pop(member_id, None)
        if member is not None:
            self._dec_protocols(member)
            if member.awaiting_join is not None:
                self.num_awaiting_join -= 1
            if member.group_instance_id is not None:
                self.static_members.pop(member.group_instance_id, None)
        if self.leader_id == member_id:
            self.leader_id = next(iter(self.members), None)
        self.pending_members.discard(member_id)
        self.pending_sync_members.discard(member_id)
        return member

    def update_member(
        self,
        member: MemberMetadata,
        protocols: Protocols,
        rebalance_timeout_ms: int,
        session_timeout_ms: int,
        callback: JoinCallback | None,
    ) -> None:
        self._dec_protocols(member)
        member.protocols = protocols
        self._inc_protocols(member)
        member.rebalance_timeout_ms = rebalance_timeout_ms
        member.session_timeout_ms = session_timeout_ms
        if callback is not None and member.awaiting_join is None:
            self.num_awaiting_join += 1
        elif callback is None and member.awaiting_join is not None:
            self.num_awaiting_join -= 1
        member.awaiting_join = callback

    def maybe_invoke_join(self, member: MemberMetadata, result: JoinResult) -> bool:
        cb = member.awaiting_join
        if cb is None:
            return False
        member.awaiting_join = None
        self.num_awaiting_join -= 1
        cb(result)
        return True

    def maybe_invoke_sync(self, member: MemberMetadata, result: SyncResult) -> bool:
        cb = member.awaiting_sync
        if cb is None:
            return False
        member.awaiting_sync = None
        cb(result)
        return True

    def replace_static_member(self, instance_id: str, old_id: str, new_id: str) -> MemberMetadata:
        """Give a static member a new member id, fencing whoever still waits on the old one."""
        member = self.members[old_id]
        if member.awaiting_join is not None:
            self.maybe_invoke_join(member, JoinResult(old_id, ErrorCode.FENCED_INSTANCE_ID))
        self.maybe_invoke_sync(member, SyncResult(ErrorCode.FENCED_INSTANCE_ID))
        member.member_id = new_id
        # keep the member's position: member order is the default leader order and the order
        # written to the log, so a reverted replacement must look exactly like before (O(n),
        # but only on a static member's restart)
        self.members = {(new_id if k == old_id else k): v for k, v in self.members.items()}
        if self.leader_id == old_id:
            self.leader_id = new_id
        if old_id in self.pending_sync_members:
            self.pending_sync_members.discard(old_id)
            self.pending_sync_members.add(new_id)
        self.static_members[instance_id] = new_id
        return member

    def current_static_member_id(self, instance_id: str) -> str | None:
        return self.static_members.get(instance_id)

    def has_all_members_joined(self) -> bool:
        return len(self.members) == self.num_awaiting_join and not self.pending_members

    def not_yet_rejoined_members(self) -> list[MemberMetadata]:
        return [m for m in self.members.values() if m.awaiting_join is None]

    def maybe_elect_new_joined_leader(self) -> bool:
        """Keep the leader if it rejoined, else pick any member that did. False if none did."""
        if self.leader_id is None:
            return False
        leader = self.members.get(self.leader_id)
        if leader is not None and leader.awaiting_join is not None:
            return True
        for mid, m in self.members.items():
            if m.awaiting_join is not None:
                self.leader_id = mid
                return True
        return False

    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    @staticmethod
    def generate_member_id(client_id: str, group_instance_id: str | None) -> str:
        prefix = client_id if group_instance_id is None else group_instance_id
        return f"{prefix}-{uuid.uuid4()}"

    # ---- protocols ---------------------------------------------------------------------

    def _inc_protocols(self, member: MemberMetadata) -> None:
        sp = self.supported_protocols
        for name in member.protocol_names():
            sp[name] = sp.get(name, 0) + 1

    def _dec_protocols(self, member: MemberMetadata) -> None:
        sp = self.supported_protocols
        for name in member.protocol_names():
            n = sp.get(name, 0) - 1
            if n > 0:
                sp[name] = n
            else:
                sp.pop(name, None)

    def candidate_protocols(self) -> set[str]:
        n = len(self.members)
        return {p for p, c in self.supported_protocols.items() if c == n}

    def supports_protocols(self, protocol_type: str, names: set[str]) -> bool:
        if self.state is GroupState.EMPTY:
            return bool(protocol_type) and bool(names)
        n = len(self.members)
        return self.protocol_type == protocol_type and any(
            self.supported_protocols.get(p, 0) == n for p in names
        )

    def select_protocol(self) -> str:
        """Each member votes for its most preferred protocol that all members support."""
        if not self.members:
            raise ValueError("Cannot select protocol for empty group")
        candidates = self.candidate_protocols()
        votes: dict[str, int] = {}
        for m in self.members.values():
            p = m.vote(candidates)
            votes[p] = votes.get(p, 0) + 1
        # max() keeps the first maximum; Scala's maxBy over a hash map has no defined tie order
        return max(votes.items(), key=lambda kv: kv[1])[0]

    def init_next_generation(self, now_ms: int) -> None:
        self.generation_id += 1
        if self.members:
            self.protocol_name = self.select_protocol()
            self.subscribed_topics = self.compute_subscribed_topics()
            self.transition_to(GroupState.COMPLETING_REBALANCE, now_ms)
        else:
            self.protocol_name = None
            self.subscribed_topics = self.compute_subscribed_topics()
            self.transition_to(GroupState.EMPTY, now_ms)
        self.pending_sync_members.clear()

    def current_member_metadata(self) -> list[tuple[str, str | None, bytes]]:
        if self.state in (GroupState.DEAD, GroupState.PREPARING_REBALANCE):
            raise ValueError(f"Cannot obtain member metadata for group in state {self.state}")
        proto = self.protocol_name or ""
        return [(mid, m.group_instance_id, m.metadata(proto)) for mid, m in self.members.items()]

    # ---- subscriptions -----------------------------------------------------------------

    def compute_subscribed_topics(self) -> set[str] | None:
        if self.protocol_type != CONSUMER_PROTOCOL_TYPE:
            return None
        if not self.members:
            return set()
        if self.protocol_name is None:
            return None
        topics: set[str] = set()
        for m in self.members.values():
            parsed = parse_subscription_topics(m.metadata(self.protocol_name))
            if parsed is None:
                return None
            topics.update(parsed)
        return topics

    def is_subscribed_to_topic(self, topic: str) -> bool:
        return True if self.subscribed_topics is None else topic in self.subscribed_topics

    # ---- the Group interface (server/group/types.py) --------------------------------------

    def state_name(self) -> str:
        return self.state.value

    def listed_protocol_type(self) -> str:
        return self.protocol_type or ""

    def is_empty(self) -> bool:
        return self.state is GroupState.EMPTY

    def is_dead(self) -> bool:
        return self.dead

    def num_members(self) -> int:
        return len(self.members)

    def has_member(self, member_id: str) -> bool:
        return member_id in self.members

    def validate_member(self, member_id: str, instance_id: str | None) -> ErrorCode | None:
        """UNKNOWN_MEMBER_ID or FENCED_INSTANCE_ID (a static member's old id), else None."""
        if instance_id is not None:
            current = self.static_members.get(instance_id)
            if current is None:
                return ErrorCode.UNKNOWN_MEMBER_ID
            if current != member_id:
                log.info("Request memberId=%s for static member with groupInstanceId=%s is fenced by "
                         "current memberId=%s", member_id, instance_id, current)
                return ErrorCode.FENCED_INSTANCE_ID
            return None
        if member_id not in self.members:
            return ErrorCode.UNKNOWN_MEMBER_ID
        return None

    def validate_offset_commit(self, member_id: str, instance_id: str | None, generation: int,
                               transactional: bool = False, version: int = 0) -> ErrorCode | None:
        state = self.state
        if state is GroupState.DEAD:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if generation < 0 and state is GroupState.EMPTY:
            # admin client or a consumer without group management
            return None
        if generation >= 0 or member_id or instance_id is not None:
            if instance_id is not None or member_id not in self.members:
                err = self.validate_member(member_id, instance_id)
                if err is not None:
                    return err
            if generation != self.generation_id:
                return ErrorCode.ILLEGAL_GENERATION
        elif not transactional and state is not GroupState.EMPTY:
            # a group with members only takes commits from them
            return ErrorCode.UNKNOWN_MEMBER_ID
        if not transactional and state is GroupState.COMPLETING_REBALANCE:
            # the member knows the new generation but has no assignment yet (a transactional
            # commit is not refused: Kafka does not enforce the group state for those)
            return ErrorCode.REBALANCE_IN_PROGRESS
        return None

    def validate_offset_fetch(self, member_id: str | None = None, member_epoch: int = -1) -> ErrorCode | None:
        return None  # classic groups let anyone read their offsets

    def validate_offset_delete(self) -> ErrorCode | None:
        if self.state is GroupState.DEAD:
            return ErrorCode.GROUP_ID_NOT_FOUND
        if self.state is GroupState.EMPTY or self.is_consumer_group():
            return None  # a live consumer group: only the topics it does not consume
        return ErrorCode.NON_EMPTY_GROUP

    def validate_delete_group(self) -> ErrorCode | None:
        if self.state is GroupState.DEAD:
            return ErrorCode.GROUP_ID_NOT_FOUND
        if self.state is GroupState.EMPTY:
            return None
        return ErrorCode.NON_EMPTY_GROUP

    def offset_expiration(self) -> OffsetExpiration | None:
        if self.protocol_type is None:
            # standalone (simple) consumers: age by commit time
            return OffsetExpiration(None)
        if self.state is GroupState.EMPTY:
            # KIP-211: the retention clock starts when the group became Empty (commit time for
            # groups loaded from the old schema without a state timestamp)
            return OffsetExpiration(self.current_state_timestamp)
        if self.is_consumer_group() and self.subscribed_topics is not None and self.state is GroupState.STABLE:
            # a live consumer group keeps what it consumes; other topics' offsets age by commit time
            return OffsetExpiration(None, self.subscribed_topics)
        return None

    def tombstones(self) -> list[CoordinatorRecord]:
        return [CoordinatorRecord(GroupKey(self.group_id), None)]

    def mark_dead(self, now_ms: int, error: ErrorCode) -> None:
        """Dead is final: answer everything parked on the group (Kafka's onGroupUnloaded)."""
        previous = self.state
        self.transition_to(GroupState.DEAD, now_ms)
        for m in list(self.members.values()):
            if previous is GroupState.PREPARING_REBALANCE:
                self.maybe_invoke_join(m, JoinResult(m.member_id, error))
            self.maybe_invoke_sync(m, SyncResult(error))
        self.pending_sync_members.clear()

    def revive(self) -> None:
        """Undo a Dead marking whose tombstone failed to append. The only way out of Dead and
        deliberately outside the transition table: Kafka removes the group from its cache
        before appending and never needs it; we keep the log and memory in step instead."""
        if self.state is GroupState.DEAD:
            self.state = GroupState.EMPTY
            self.dead = False
            # retention keeps counting from when the group really became Empty
            self.current_state_timestamp = self.previous_state_timestamp

    def __repr__(self) -> str:
        return (
            f"ClassicGroup(groupId={self.group_id}, generation={self.generation_id}, "
            f"protocolType={self.protocol_type}, currentState={self.state}, "
            f"members={list(self.members)})"
        )


GroupMetadata = ClassicGroup  # the 3.x name, kept for code written against it


_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")


def parse_subscription_topics(data: bytes) -> list[str] | None:
    """Topics of a ConsumerProtocolSubscription, read with the v0 layout that prefixes every
    version (version int16, topics [string]); None if the bytes do not follow it."""
    try:
        (version,) = _I16.unpack_from(data, 0)
        if version < 0:
            return None
        (n,) = _I32.unpack_from(data, 2)
        if n < 0:
            return None
        pos = 6
        topics = []
        for _ in range(n):
            (ln,) = _I16.unpack_from(data, pos)
            pos += 2
            if ln < 0 or pos + ln > len(data):
                return None
            topics.append(bytes(data[pos : pos + ln]).decode("utf-8"))
            pos += ln
        return topics
    except (struct.error, UnicodeDecodeError):
        return None
