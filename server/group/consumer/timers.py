"""The timers of consumer-group members (Kafka's session, rebalance, and a classic member's join
and sync timeouts): each fences its member when it fires, unless the member moved on meanwhile.

Timers is the keyed one-shot timer underneath, on the coordinator's clock; MemberTimers names
the member's timers and what firing does (`expire`, the protocol's fencing, given at
construction). A conversion to a classic group only cancels them (cancel_member_timers), which
needs no more than the Timers.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kcoord.server.group.consumer.group import ConsumerGroup

# (group id, member id, reason, the member epoch it is for or None) -> None
Expire = Callable[[str, str, str, "int | None"], None]

SESSION_EXPIRED = "the member session expired."


class Timers:
    """Keyed one-shot timers on the coordinator's clock; rescheduling a key only moves its
    deadline (the armed timer re-arms itself), so a heartbeat costs no timer churn."""

    def __init__(self, clock: Any) -> None:
        self.clock = clock
        self._deadlines: dict[tuple, tuple[int, Callable[[], None]]] = {}
        self._armed: dict[tuple, int] = {}

    def schedule(self, key: tuple, delay_ms: int, fn: Callable[[], None]) -> None:
        deadline = self.clock.now_ms() + delay_ms
        self._deadlines[key] = (deadline, fn)
        armed = self._armed.get(key)
        if armed is None or armed > deadline:
            self._arm(key, deadline)

    def _arm(self, key: tuple, deadline: int) -> None:
        self._armed[key] = deadline
        self.clock.call_later(deadline - self.clock.now_ms(), lambda: self._fire(key, deadline))

    def _fire(self, key: tuple, armed_for: int) -> None:
        if self._armed.get(key) != armed_for:
            return  # superseded by an earlier re-arm
        del self._armed[key]
        entry = self._deadlines.get(key)
        if entry is None:
            return
        deadline, fn = entry
        now = self.clock.now_ms()
        if deadline > now:
            self._arm(key, deadline)
            return
        del self._deadlines[key]
        fn()

    def cancel(self, key: tuple) -> None:
        self._deadlines.pop(key, None)

    def __contains__(self, key: tuple) -> bool:
        return key in self._deadlines


def cancel_member_timers(timers: Timers, gid: str, member_id: str, keep_session: bool = False) -> None:
    """Kafka's cancelTimers: the session, rebalance, and a classic member's join and sync
    timeouts. A session timer left behind fences nothing once the group is another type."""
    if not keep_session:
        timers.cancel(("session", gid, member_id))
    timers.cancel(("rebalance", gid, member_id))
    timers.cancel(("join", gid, member_id))
    timers.cancel(("sync", gid, member_id))


class MemberTimers:
    """A member's timers by kind ("session", "rebalance", "join", "sync"), each fencing it."""

    def __init__(self, timers: Timers, groups: dict[str, Any], session_timeout_ms: Callable[[str], int],
                 expire: Expire) -> None:
        self.timers = timers
        self._groups = groups
        # group id -> its consumer.session.timeout.ms, else group.consumer.session.timeout.ms
        self.session_timeout_ms = session_timeout_ms
        self.expire = expire

    def session(self, gid: str, member_id: str, timeout_ms: int | None = None) -> None:
        """(Re)start the member's session: `timeout_ms`, else the group's session timeout.
        (A keep-alive does the same inline: protocol.py keepalive.)"""
        expire = self.expire
        self.timers.schedule(("session", gid, member_id),
                             self.session_timeout_ms(gid) if timeout_ms is None else timeout_ms,
                             lambda: expire(gid, member_id, SESSION_EXPIRED, None))

    def restart_session(self, gid: str, member_id: str) -> None:
        """(Re)start the member's session: a classic member's own session timeout, else
        group.consumer.session.timeout.ms."""
        group = self._groups.get(gid)
        member = group.members.get(member_id) if isinstance(group, ConsumerGroup) else None
        classic = None if member is None else member.classic
        self.session(gid, member_id, None if classic is None else classic.session_timeout_ms)

    def schedule_once(self, kind: str, gid: str, member_id: str, timeout_ms: int, reason: str) -> None:
        """A timer that fences the member when it fires, unless one of its kind is armed."""
        if (kind, gid, member_id) not in self.timers:
            self.schedule(kind, gid, member_id, timeout_ms, reason)

    def schedule(self, kind: str, gid: str, member_id: str, timeout_ms: int, reason: str,
                 epoch: int | None = None) -> None:
        """A timer that fences the member when it fires (only at `epoch`, when given)."""
        expire = self.expire
        self.timers.schedule((kind, gid, member_id), max(timeout_ms, 0),
                             lambda: expire(gid, member_id, reason, epoch))

    def rebalance(self, gid: str, member_id: str, epoch: int, timeout_ms: int) -> None:
        """The member must revoke what it was told to within its rebalance timeout."""
        self.schedule("rebalance", gid, member_id, timeout_ms,
                      f"it failed to transition from epoch {epoch} within {timeout_ms}ms.", epoch)

    def cancel(self, kind: str, gid: str, member_id: str) -> None:
        self.timers.cancel((kind, gid, member_id))

    def cancel_all(self, gid: str, member_id: str, keep_session: bool = False) -> None:
        cancel_member_timers(self.timers, gid, member_id, keep_session)
