"""What the runtime keeps of each write in flight (server/coordinator/changes.py): a key's
committed value while writes of it are in flight, exact reverts (later writes on the same keys
first), and the table of keys staying small once writes are durable."""
from __future__ import annotations

import random
from dataclasses import dataclass

import pytest

from kcoord.server.coordinator.changes import CURRENT, InFlight


@dataclass(frozen=True)
class Rec:
    key: str
    value: int | None


class Shard:
    """A key-value shard replayed by records, as the runtime drives one."""

    def __init__(self) -> None:
        self.state: dict[str, int] = {}
        self.in_flight: InFlight[Rec] = InFlight(self.replay)

    def replay(self, r: Rec) -> None:
        if r.value is None:
            self.state.pop(r.key, None)
        else:
            self.state[r.key] = r.value

    def write(self, *pairs: tuple[str, int | None]):
        records = [Rec(k, v) for k, v in pairs]
        previous = []
        for r in records:  # as the runtime: what each replaced, then replayed
            previous.append(Rec(r.key, self.state.get(r.key)))
            self.replay(r)
        return self.in_flight.begin(records, previous)


def committed(s: Shard, key: str):
    rec = s.in_flight.committed(key)
    return "current" if rec is CURRENT else rec.value


def test_a_key_reads_its_durable_value_until_its_writes_settle():
    s = Shard()
    a = s.write(("k", 1))
    assert committed(s, "k") is None and s.state == {"k": 1}  # a first write: nothing durable yet
    b = s.write(("k", 2))
    a.settle()
    assert committed(s, "k") == 1  # a is durable, b still in flight
    b.settle()
    assert committed(s, "k") == "current" and s.state == {"k": 2}
    c = s.write(("k", 3))  # the key's entry is idle, not gone: written again
    assert committed(s, "k") == 2
    c.settle()
    assert committed(s, "k") == "current"


def test_a_failed_write_is_reverted_with_later_writes_on_its_keys_first():
    s = Shard()
    s.write(("k", 1)).settle()
    a = s.write(("k", 2), ("j", 5))
    b = s.write(("k", 3))
    other = s.write(("x", 9))
    a.revert()
    a.failed()
    assert s.state == {"k": 1, "x": 9}  # b was made on top of a: taken back too; x untouched
    b.failed()  # its own failure follows
    assert committed(s, "k") == "current" and committed(s, "j") == "current"
    assert committed(s, "x") is None
    other.settle()
    assert committed(s, "x") == "current"


def test_a_write_taken_back_that_lands_after_all_is_replayed_again():
    s = Shard()
    a = s.write(("k", 1))
    b = s.write(("k", 2))
    a.revert()
    a.failed()
    assert "k" not in s.state
    b.settle()  # b reached the log after all
    assert s.state == {"k": 2}


def test_durable_keys_do_not_pile_up():
    s = Shard()
    for i in range(5000):
        s.write((f"k{i}", i)).settle()
    assert len(s.in_flight.keys) <= 2048 and not s.in_flight.writes
    pending = s.write(("k7", 70))
    assert committed(s, "k7") == 7 and committed(s, "k8") == "current"
    pending.settle()


def test_a_revert_takes_back_writes_made_on_top_of_the_writes_it_takes_back():
    """a (k), then b (k and j) on top of it, then c (j only) on top of b: a's revert must take
    back c before b, though c never touched k."""
    s = Shard()
    a = s.write(("k", 1))
    b = s.write(("k", 2), ("j", 2))
    c = s.write(("j", 3))
    a.revert()
    a.failed()
    assert s.state == {}
    b.failed()
    c.failed()
    assert committed(s, "k") == "current" and committed(s, "j") == "current"


@pytest.mark.parametrize("seed", [7, 11, 23, 42])
def test_random_writes_match_a_model(seed):
    """Writes in flight settle or fail (the oldest first, as one log's do); the committed
    value of every key is always the state replayed from the durable writes alone."""
    rnd = random.Random(seed)
    s = Shard()
    durable: dict[str, int] = {}
    flight: list[tuple[object, list[tuple[str, int | None]]]] = []
    for _ in range(3000):
        if flight and rnd.random() < 0.45:
            change, pairs = flight.pop(0)
            if rnd.random() < 0.8:
                change.settle()
                for k, v in pairs:
                    if v is None:
                        durable.pop(k, None)
                    else:
                        durable[k] = v
            else:  # a failed append fails every later write of the partition too
                change.revert()
                change.failed()
                for later, _ in flight:
                    later.revert()
                    later.failed()
                flight.clear()
                assert s.state == durable
        else:
            pairs = [(f"k{rnd.randrange(8)}", rnd.choice([None, rnd.randrange(100)]))
                     for _ in range(rnd.randrange(1, 3))]
            flight.append((s.write(*pairs), pairs))
        for k in (f"k{i}" for i in range(8)):
            got = committed(s, k)
            assert (s.state.get(k) if got == "current" else got) == durable.get(k)
