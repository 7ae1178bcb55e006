"""The group coordinator's delayed operations (Kafka's DelayedJoin, InitialDelayedJoin,
DelayedSync, DelayedHeartbeat) and the purgatory keys they watch. The decisions themselves
live in the coordinator; these classes only route try_complete / on_complete / on_expiration.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from kcoord.server.group.classic.group import ClassicGroup
from kcoord.server.purgatory import DelayedOperation, Purgatory

if TYPE_CHECKING:
    from kcoord.server.group.classic.membership import ClassicMembership


def join_key(group_id: str) -> tuple[str, str]:
    return ("join", group_id)


def sync_key(group_id: str) -> tuple[str, str]:
    return ("sync", group_id)


def member_key(group_id: str, member_id: str) -> tuple[str, str, str]:
    return ("member", group_id, member_id)


class DelayedJoin(DelayedOperation):
    """Completes when every known member rejoined; at the rebalance timeout, completes anyway
    and the members that did not rejoin are dropped."""

    __slots__ = ("coord", "group")

    def __init__(self, coord: ClassicMembership, group: ClassicGroup, timeout_ms: int) -> None:
        super().__init__(timeout_ms)
        self.coord = coord
        self.group = group

    def try_complete(self) -> bool:
        return self.coord._try_complete_join(self.group, self.force_complete)

    def on_complete(self) -> None:
        self.coord._on_complete_join(self.group)


class InitialDelayedJoin(DelayedJoin):
    """The first rebalance of an Empty group waits group.initial.rebalance.delay.ms, re-armed
    while new members keep arriving, never beyond the rebalance timeout."""

    __slots__ = ("purgatory", "configured_delay", "remaining_ms")

    def __init__(
        self,
        coord: ClassicMembership,
        purgatory: Purgatory,
        group: ClassicGroup,
        configured_delay: int,
        delay_ms: int,
        remaining_ms: int,
    ) -> None:
        super().__init__(coord, group, delay_ms)
        self.purgatory = purgatory
        self.configured_delay = configured_delay
        self.remaining_ms = remaining_ms

    def try_complete(self) -> bool:
        return False

    def on_complete(self) -> None:
        g = self.group
        if g.new_member_added and self.remaining_ms != 0:
            g.new_member_added = False
            delay = min(self.configured_delay, self.remaining_ms)
            remaining = max(self.remaining_ms - self.delay_ms, 0)
            self.purgatory.try_complete_else_watch(
                InitialDelayedJoin(self.coord, self.purgatory, g, self.configured_delay, delay, remaining),
                (join_key(g.group_id),),
            )
        else:
            super().on_complete()


class DelayedSync(DelayedOperation):
    """After the join phase, members that do not SyncGroup within the rebalance timeout are
    removed and the group rebalances again."""

    __slots__ = ("coord", "group", "generation_id")

    def __init__(self, coord: ClassicMembership, group: ClassicGroup, generation_id: int, timeout_ms: int) -> None:
        super().__init__(timeout_ms)
        self.coord = coord
        self.group = group
        self.generation_id = generation_id

    def try_complete(self) -> bool:
        return self.coord._try_complete_pending_sync(self.group, self.generation_id, self.force_complete)

    def on_expiration(self) -> None:
        self.coord._on_expire_pending_sync(self.group, self.generation_id)


class DelayedHeartbeat(DelayedOperation):
    """A member's session: completes on any sign of life, expires after the session timeout."""

    __slots__ = ("coord", "group", "member_id", "is_pending")

    def __init__(
        self, coord: ClassicMembership, group: ClassicGroup, member_id: str, is_pending: bool, timeout_ms: int
    ) -> None:
        super().__init__(timeout_ms)
        self.coord = coord
        self.group = group
        self.member_id = member_id
        self.is_pending = is_pending

    def try_complete(self) -> bool:
        return self.coord._try_complete_heartbeat(self.group, self.member_id, self.is_pending, self.force_complete)

    def on_expiration(self) -> None:
        self.coord._on_expire_heartbeat(self.group, self.member_id, self.is_pending)
