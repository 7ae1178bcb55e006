"""The generic delayed-operation purgatory."""
from __future__ import annotations

from kcoord.server.clock import FakeClock
from kcoord.server.purgatory import DelayedOperation, Purgatory


class Op(DelayedOperation):
    def __init__(self, delay: int, ready: list[bool]) -> None:
        super().__init__(delay)
        self.ready = ready
        self.events: list[str] = []

    def try_complete(self) -> bool:
        return self.force_complete() if self.ready[0] else False

    def on_complete(self) -> None:
        self.events.append("complete")

    def on_expiration(self) -> None:
        self.events.append("expire")


def test_completes_immediately_when_ready() -> None:
    clock = FakeClock()
    p = Purgatory(clock)
    op = Op(100, [True])
    assert p.try_complete_else_watch(op, ["k"])
    assert op.events == ["complete"] and p.watched("k") == 0 and clock.pending() == 0


def test_check_and_complete_exactly_once() -> None:
    clock = FakeClock()
    p = Purgatory(clock)
    ready = [False]
    op = Op(100, ready)
    assert not p.try_complete_else_watch(op, ["a", "b"])
    assert p.watched("a") == p.watched("b") == 1 and len(p) == 1
    assert p.check_and_complete("a") == 0
    ready[0] = True
    assert p.check_and_complete("a") == 1
    assert p.check_and_complete("b") == 0
    clock.advance(1000)
    assert op.events == ["complete"]
    assert p.watched("a") == p.watched("b") == 0 and clock.pending() == 0


def test_expiration_runs_on_complete_then_on_expiration() -> None:
    clock = FakeClock()
    p = Purgatory(clock)
    op = Op(100, [False])
    p.try_complete_else_watch(op, ["k"])
    clock.advance(99)
    assert op.events == []
    clock.advance(1)
    assert op.events == ["complete", "expire"] and p.watched("k") == 0
    assert not op.force_complete()


def test_force_complete_cancels_timer_and_unwatches() -> None:
    clock = FakeClock()
    p = Purgatory(clock)
    op = Op(100, [False])
    p.try_complete_else_watch(op, ["k"])
    assert op.force_complete()
    assert p.watched("k") == 0 and clock.pending() == 0
    clock.advance(200)
    assert op.events == ["complete"]


def test_many_watchers_one_key_and_cancel() -> None:
    clock = FakeClock()
    p = Purgatory(clock)
    ready = [False]
    ops = [Op(100, ready) for _ in range(1000)]
    for op in ops:
        p.try_complete_else_watch(op, [("fetch", "topic", 0)])
    assert p.watched(("fetch", "topic", 0)) == 1000
    dropped = p.cancel(("fetch", "topic", 0))
    assert len(dropped) == 1000 and clock.pending() == 0
    assert all(op.events == [] for op in ops)


def test_completion_during_registration_is_noticed() -> None:
    clock = FakeClock()
    p = Purgatory(clock)

    class Flip(Op):
        calls = 0

        def try_complete(self) -> bool:
            self.calls += 1
            return self.force_complete() if self.calls >= 2 else False

    op = Flip(100, [False])
    assert p.try_complete_else_watch(op, ["k"])
    assert op.events == ["complete"] and p.watched("k") == 0 and clock.pending() == 0


def test_extend_later_defers_expiry_without_new_timers() -> None:
    clock = FakeClock()
    p = Purgatory(clock)
    op = Op(100, [False])
    p.try_complete_else_watch(op, ["k"])
    for _ in range(5):
        clock.advance(60)
        p.extend(op, 100)  # like a heartbeat every 60 ms with a 100 ms session
    assert op.events == [] and clock.pending() == 1
    clock.advance(99)
    assert op.events == []
    clock.advance(1)
    assert op.events == ["complete", "expire"] and p.watched("k") == 0


def test_extend_earlier_rearms_the_timer() -> None:
    clock = FakeClock()
    p = Purgatory(clock)
    op = Op(300_000, [False])  # e.g. a new member's 5-minute join timeout
    p.try_complete_else_watch(op, ["k"])
    p.extend(op, 10_000)  # then its 10 s session
    clock.advance(9_999)
    assert op.events == []
    clock.advance(1)
    assert op.events == ["complete", "expire"]


def test_extend_after_completion_is_ignored() -> None:
    clock = FakeClock()
    p = Purgatory(clock)
    ready = [False]
    op = Op(100, ready)
    p.try_complete_else_watch(op, ["k"])
    ready[0] = True
    p.check_and_complete("k")
    p.extend(op, 50)
    clock.advance(1000)
    assert op.events == ["complete"]
