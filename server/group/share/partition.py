"""One share-partition's delivery state (KIP-932): which records of one topic partition are in
flight for one share group, who holds them, how often they were delivered.

Owns the in-flight window [start_offset, end_offset) (Kafka's share-partition start offset,
SPSO, and one past its end offset, SPEO), the state of every record in it (Available,
Acquired, Acknowledged, Archived) kept as runs of contiguous records with equal state (a run
is Kafka's in-flight batch; it splits when its records' states diverge and merges again when
they agree), acquisition locks and delivery counts. Every state change is one row of
TRANSITIONS; nothing else changes a record's state.

Pure: no asyncio, no I/O; time comes from the caller (`now` in milliseconds) and lock expiry
happens when the owner calls expire_locks(now). Persistence is the caller's: snapshot() gives
what Kafka's ShareSnapshot record holds, from_snapshot() rebuilds a partition from it (Acquired
records come back Available, as Kafka persists them, with their delivery counts).

Served by server/share/manager.py (ShareFetch, ShareAcknowledge; docs/share-groups.md).
"""
from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import Enum, IntEnum

from kcoord.protocol.errors import ErrorCode

# Kafka 4.x broker defaults and bounds (ShareGroupConfig)
RECORD_LOCK_DURATION_MS_DEFAULT = 30_000  # group.share.record.lock.duration.ms, 1000..3600000
DELIVERY_COUNT_LIMIT_DEFAULT = 5  # group.share.delivery.count.limit, 2..10
PARTITION_MAX_RECORD_LOCKS_DEFAULT = 2000  # group.share.partition.max.record.locks, 100..10000


class RecordState(IntEnum):
    """Kafka's ids: the ones __share_group_state persists (Acquired is never persisted)."""

    AVAILABLE = 0
    ACQUIRED = 1
    ACKNOWLEDGED = 2
    ARCHIVED = 4


class AckType(IntEnum):
    """AcknowledgeTypes in ShareFetch / ShareAcknowledge."""

    GAP = 0
    ACCEPT = 1
    RELEASE = 2
    REJECT = 3
    RENEW = 4  # KIP-1222: keep the records, extend the lock


class Event(Enum):
    ACQUIRE = "acquire"
    ACCEPT = "accept"
    RELEASE = "release"
    REJECT = "reject"
    GAP = "gap"
    RENEW = "renew"
    LOCK_EXPIRED = "lock-expired"
    MEMBER_GONE = "member-gone"  # the holder left the group: its records go back


_ACK_EVENTS = {
    AckType.GAP: Event.GAP,
    AckType.ACCEPT: Event.ACCEPT,
    AckType.RELEASE: Event.RELEASE,
    AckType.REJECT: Event.REJECT,
    AckType.RENEW: Event.RENEW,
}


class Next(Enum):
    """What a transition leads to, beyond a plain target state."""

    ACQUIRED_BY_CALLER = "acquired"  # Acquired, by the acting member, delivery count + 1, new lock
    LOCK_RENEWED = "renewed"  # stays Acquired by the same member, new lock deadline
    ACKNOWLEDGED = "acknowledged"
    ARCHIVED = "archived"
    BACK = "back"  # Available again, or Archived when the delivery count reached the limit


# (state, event) -> next; a pair missing here is not allowed: for an acknowledgement that is
# INVALID_RECORD_STATE, for acquire / expiry / a departed member the record is left alone.
TRANSITIONS: dict[tuple[RecordState, Event], Next] = {
    (RecordState.AVAILABLE, Event.ACQUIRE): Next.ACQUIRED_BY_CALLER,
    (RecordState.ACQUIRED, Event.ACCEPT): Next.ACKNOWLEDGED,
    (RecordState.ACQUIRED, Event.REJECT): Next.ARCHIVED,
    (RecordState.ACQUIRED, Event.GAP): Next.ARCHIVED,
    (RecordState.ACQUIRED, Event.RELEASE): Next.BACK,
    (RecordState.ACQUIRED, Event.RENEW): Next.LOCK_RENEWED,
    (RecordState.ACQUIRED, Event.LOCK_EXPIRED): Next.BACK,
    (RecordState.ACQUIRED, Event.MEMBER_GONE): Next.BACK,
}

# the acknowledgements (and only they) must come from the member holding the record
_OWNER_ONLY = frozenset({Event.ACCEPT, Event.REJECT, Event.GAP, Event.RELEASE, Event.RENEW})


@dataclass(frozen=True)
class Run:
    """Records first..last (inclusive) in one state."""

    first: int
    last: int
    state: RecordState
    delivery_count: int
    member: str | None = None  # the holder while Acquired
    lock_deadline: int | None = None  # ms; while Acquired

    def same_as(self, other: Run) -> bool:
        return (self.state, self.delivery_count, self.member, self.lock_deadline) == (
            other.state, other.delivery_count, other.member, other.lock_deadline)

    def cut(self, first: int, last: int) -> Run:
        return Run(first, last, self.state, self.delivery_count, self.member, self.lock_deadline)


@dataclass(frozen=True)
class Acquired:
    """One range handed to a member (ShareFetch's AcquiredRecords)."""

    first_offset: int
    last_offset: int
    delivery_count: int


@dataclass(frozen=True)
class AckBatch:
    """One AcknowledgementBatch: one type for the whole range, or one per offset."""

    first_offset: int
    last_offset: int
    types: tuple[int, ...]


@dataclass(frozen=True)
class StateBatch:
    """A persisted range (ShareSnapshot / ShareUpdate StateBatches)."""

    first_offset: int
    last_offset: int
    delivery_state: int
    delivery_count: int


@dataclass(frozen=True)
class Snapshot:
    start_offset: int
    state_batches: tuple[StateBatch, ...]


class AckError(Exception):
    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code


def validate_ack_batches(batches: Sequence[AckBatch]) -> None:
    """The request-level checks Kafka makes before any partition sees the batches: each range
    well formed, one type or one per offset, known types, ranges ascending and not overlapping.
    Raises AckError(INVALID_REQUEST)."""
    prev_last = None
    for b in batches:
        if b.first_offset < 0 or b.last_offset < b.first_offset:
            raise AckError(ErrorCode.INVALID_REQUEST, f"bad range {b.first_offset}-{b.last_offset}")
        if len(b.types) not in (1, b.last_offset - b.first_offset + 1):
            raise AckError(ErrorCode.INVALID_REQUEST, "acknowledge types must be one or one per offset")
        for t in b.types:
            if t not in AckType._value2member_map_:
                raise AckError(ErrorCode.INVALID_REQUEST, f"invalid acknowledge type {t}")
        if prev_last is not None and b.first_offset <= prev_last:
            raise AckError(ErrorCode.INVALID_REQUEST, "acknowledgement batches overlap or are out of order")
        prev_last = b.last_offset


class SharePartition:
    def __init__(self, start_offset: int = 0, *,
                 lock_duration_ms: int = RECORD_LOCK_DURATION_MS_DEFAULT,
                 delivery_count_limit: int = DELIVERY_COUNT_LIMIT_DEFAULT,
                 max_record_locks: int = PARTITION_MAX_RECORD_LOCKS_DEFAULT) -> None:
        self.start_offset = start_offset
        self.end_offset = start_offset  # exclusive
        self.lock_duration_ms = lock_duration_ms
        self.delivery_count_limit = delivery_count_limit
        self.max_record_locks = max_record_locks
        self.runs: list[Run] = []  # ascending, contiguous from start_offset to end_offset - 1

    # ------------------------------------------------------------------ reading

    def state_of(self, offset: int) -> Run | None:
        for r in self.runs:
            if r.first <= offset <= r.last:
                return r
        return None

    def in_flight(self) -> int:
        return self.end_offset - self.start_offset

    def next_fetch_offset(self) -> int:
        """Where the next fetch should read: the first Available record, else the window end."""
        for r in self.runs:
            if r.state is RecordState.AVAILABLE:
                return r.first
        return self.end_offset

    def acquired_by(self, member: str) -> list[tuple[int, int]]:
        return [(r.first, r.last) for r in self.runs
                if r.state is RecordState.ACQUIRED and r.member == member]

    # ------------------------------------------------------------------ the transitions

    def _apply(self, run: Run, event: Event, member: str | None, now: int) -> Run | None:
        """The run after `event`, or None when the table has no row for it."""
        nxt = TRANSITIONS.get((run.state, event))
        if nxt is None:
            return None
        if event in _OWNER_ONLY and run.member != member:
            return None
        if nxt is Next.ACQUIRED_BY_CALLER:
            return Run(run.first, run.last, RecordState.ACQUIRED, run.delivery_count + 1, member,
                       now + self.lock_duration_ms)
        if nxt is Next.LOCK_RENEWED:
            return Run(run.first, run.last, RecordState.ACQUIRED, run.delivery_count, member,
                       now + self.lock_duration_ms)
        if nxt is Next.ACKNOWLEDGED:
            return Run(run.first, run.last, RecordState.ACKNOWLEDGED, run.delivery_count)
        if nxt is Next.ARCHIVED:
            return Run(run.first, run.last, RecordState.ARCHIVED, run.delivery_count)
        # BACK: Available, unless it was delivered as often as allowed, or fell below the start
        if run.delivery_count >= self.delivery_count_limit or run.last < self.start_offset:
            return Run(run.first, run.last, RecordState.ARCHIVED, run.delivery_count)
        return Run(run.first, run.last, RecordState.AVAILABLE, run.delivery_count)

    def _split_at(self, offset: int) -> None:
        """Make `offset` the first record of a run (if it is inside the window)."""
        for i, r in enumerate(self.runs):
            if r.first < offset <= r.last:
                self.runs[i:i + 1] = [r.cut(r.first, offset - 1), r.cut(offset, r.last)]
                return

    def _coalesce(self) -> None:
        out: list[Run] = []
        for r in self.runs:
            if out and out[-1].same_as(r) and out[-1].last + 1 == r.first:
                out[-1] = out[-1].cut(out[-1].first, r.last)
            else:
                out.append(r)
        self.runs = out

    def _advance(self) -> None:
        """Move the start past the Acknowledged / Archived prefix and forget it."""
        done = (RecordState.ACKNOWLEDGED, RecordState.ARCHIVED)
        while self.runs and self.runs[0].state in done:
            self.start_offset = self.runs.pop(0).last + 1
        if not self.runs:
            self.start_offset = self.end_offset

    def _transition_range(self, first: int, last: int, event: Event, member: str | None,
                          now: int, *, strict: bool) -> list[Run]:
        """Apply `event` to every record in [first, last]. strict: every record must allow it
        (else AckError, nothing changed); not strict: records without a row are left alone.
        Returns the changed runs."""
        self._split_at(first)
        self._split_at(last + 1)
        new_runs, changed = [], []
        for r in self.runs:
            if r.last < first or r.first > last:
                new_runs.append(r)
                continue
            after = self._apply(r, event, member, now)
            if after is None:
                if strict:
                    self._coalesce()
                    raise AckError(ErrorCode.INVALID_RECORD_STATE,
                                   f"records {r.first}-{r.last} are {r.state.name}"
                                   + ("" if r.member in (None, member) else " by another member"))
                new_runs.append(r)
            else:
                new_runs.append(after)
                changed.append(after)
        self.runs = new_runs
        return changed

    # ------------------------------------------------------------------ operations

    def acquire(self, member: str, log_batches: Iterable[tuple[int, int]], max_records: int,
                now: int) -> list[Acquired]:
        """Acquire for `member` what a fetch read: `log_batches` are the (base offset, last
        offset) of the log's batches from next_fetch_offset() on. Available records inside the
        window are re-acquired; records past the window end join it in whole batches (offsets
        between batches, absent from the log, join too: the client acknowledges them as GAP)
        while fewer than max_records were acquired and the window holds fewer than
        max_record_locks records."""
        if max_records <= 0:
            return []
        got: list[Acquired] = []
        count = 0
        batches = sorted(log_batches)
        if not batches:
            return []
        # 1. inside the window: Available runs the read covers
        lo, hi = max(batches[0][0], self.start_offset), min(batches[-1][1], self.end_offset - 1)
        if lo <= hi:
            for r in list(self.runs):
                if count >= max_records:
                    break
                if r.last < lo or r.first > hi or r.state is not RecordState.AVAILABLE:
                    continue
                a, b = max(r.first, lo), min(r.last, hi)
                for after in self._transition_range(a, b, Event.ACQUIRE, member, now, strict=False):
                    got.append(Acquired(after.first, after.last, after.delivery_count))
                    count += after.last - after.first + 1
        # 2. past the window end: new records, whole batches
        new_last = None
        if not self.runs and batches[-1][1] >= self.end_offset and batches[0][0] > self.end_offset:
            # nothing in flight and the log starts later (retention): the window moves up
            self.start_offset = self.end_offset = max(self.end_offset, batches[0][0])
        for base, last in batches:
            if last < self.end_offset or (new_last is not None and last <= new_last):
                continue
            window = (new_last + 1 if new_last is not None else self.end_offset) - self.start_offset
            if count >= max_records or window >= self.max_record_locks:
                break
            count += last - max(base, new_last + 1 if new_last is not None else self.end_offset) + 1
            new_last = last
        if new_last is not None:
            first = self.end_offset
            run = Run(first, new_last, RecordState.ACQUIRED, 1, member, now + self.lock_duration_ms)
            self.runs.append(run)
            self.end_offset = new_last + 1
            got.append(Acquired(first, new_last, 1))
        self._coalesce()
        return _merge_acquired(got)

    def acknowledge(self, member: str, batches: Sequence[AckBatch], now: int) -> list[Run]:
        """Apply one request's acknowledgements for this partition, all or nothing. Raises
        AckError: INVALID_REQUEST for malformed, overlapping or past-the-window ranges,
        INVALID_RECORD_STATE for a record that is not Acquired by `member`. Returns the runs that
        changed (what a ShareUpdate must persist)."""
        validate_ack_batches(batches)
        saved = (list(self.runs), self.start_offset, self.end_offset)
        changed: list[Run] = []
        try:
            for b in batches:
                if b.last_offset < self.start_offset:
                    continue  # already done and forgotten (Kafka skips these)
                if b.last_offset >= self.end_offset:
                    raise AckError(ErrorCode.INVALID_REQUEST,
                                   f"offset {b.last_offset} is past the acquired records")
                first = max(b.first_offset, self.start_offset)
                if len(b.types) == 1:
                    changed += self._transition_range(first, b.last_offset, _ACK_EVENTS[AckType(b.types[0])],
                                                      member, now, strict=True)
                else:
                    for off in range(first, b.last_offset + 1):
                        t = AckType(b.types[off - b.first_offset])
                        changed += self._transition_range(off, off, _ACK_EVENTS[t], member, now, strict=True)
        except AckError:
            self.runs, self.start_offset, self.end_offset = saved
            raise
        self._coalesce()
        self._advance()
        return changed

    def expire_locks(self, now: int) -> list[Run]:
        """Acquired records whose lock deadline passed go back (Available, or Archived at the
        delivery-count limit)."""
        changed: list[Run] = []
        for r in list(self.runs):
            if r.state is RecordState.ACQUIRED and r.lock_deadline is not None and r.lock_deadline <= now:
                changed += self._transition_range(r.first, r.last, Event.LOCK_EXPIRED, None, now, strict=False)
        self._coalesce()
        self._advance()
        return changed

    def release_member(self, member: str, now: int) -> list[Run]:
        """The member left: everything it holds goes back, without counting a delivery."""
        changed: list[Run] = []
        for first, last in self.acquired_by(member):
            changed += self._transition_range(first, last, Event.MEMBER_GONE, None, now, strict=False)
        self._coalesce()
        self._advance()
        return changed

    def archive_acquired(self, member: str, first: int, last: int, now: int) -> list[Run]:
        """Records `member` just acquired that are never delivered (control batches, aborted
        transactions under read_committed): Archived at once, as if acknowledged GAP."""
        changed = self._transition_range(max(first, self.start_offset), min(last, self.end_offset - 1),
                                         Event.GAP, member, now, strict=False)
        self._coalesce()
        self._advance()
        return changed

    def next_lock_deadline(self) -> int | None:
        deadlines = [r.lock_deadline for r in self.runs if r.lock_deadline is not None]
        return min(deadlines) if deadlines else None

    # ------------------------------------------------------------------ persistence

    def snapshot(self) -> Snapshot:
        """What ShareSnapshot persists: the start offset and the window's runs; Acquired is
        written as Available (a lock does not survive a restart), with its delivery count."""
        out: list[StateBatch] = []
        for r in self.runs:
            state = RecordState.AVAILABLE if r.state is RecordState.ACQUIRED else r.state
            b = StateBatch(r.first, r.last, int(state), r.delivery_count)
            if out and (out[-1].delivery_state, out[-1].delivery_count) == (b.delivery_state, b.delivery_count) \
                    and out[-1].last_offset + 1 == b.first_offset:
                out[-1] = StateBatch(out[-1].first_offset, b.last_offset, b.delivery_state, b.delivery_count)
            else:
                out.append(b)
        return Snapshot(self.start_offset, tuple(out))

    @classmethod
    def from_snapshot(cls, snap: Snapshot, **config: int) -> SharePartition:
        p = cls(snap.start_offset, **config)
        for b in sorted(snap.state_batches, key=lambda b: b.first_offset):
            first = max(b.first_offset, p.start_offset, p.end_offset)
            if b.last_offset < first:
                continue
            state = RecordState(b.delivery_state)
            if state is RecordState.ACQUIRED:
                state = RecordState.AVAILABLE
            if first > p.end_offset:  # a hole in the persisted window: its records are unknown
                p.runs.append(Run(p.end_offset, first - 1, RecordState.AVAILABLE, 0))
            p.runs.append(Run(first, b.last_offset, state, b.delivery_count))
            p.end_offset = b.last_offset + 1
        p._coalesce()
        p._advance()
        return p


def _merge_acquired(got: list[Acquired]) -> list[Acquired]:
    out: list[Acquired] = []
    for a in sorted(got, key=lambda a: a.first_offset):
        if out and out[-1].last_offset + 1 == a.first_offset and out[-1].delivery_count == a.delivery_count:
            out[-1] = Acquired(out[-1].first_offset, a.last_offset, a.delivery_count)
        else:
            out.append(a)
    return out

