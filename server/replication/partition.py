"""One hosted partition's replica: its role (leader or follower), leader epoch, ISR and high
watermark, and on the leader what each follower has fetched (Kafka's Partition and Replica).

Pure bookkeeping over the partition's log and leader-epoch cache: no I/O but theirs, no clock
(every time is passed in), so the rules below are tested as tables (tests/unit/
test_replication_partition.py). The replica manager (replica_manager.py) drives it.

Rules on the leader, as Kafka's:
- a follower's log end offset is the fetch offset of its latest Fetch (it has everything
  below it); it was caught up at that fetch if the offset reached the leader's log end, or at
  its previous fetch if the offset reached the log end the leader had then;
- high watermark = the smallest log end offset over the ISR (the leader's own included), and
  it never moves back;
- an ISR member not caught up for replica.lag.time.max.ms is out of sync (shrink);
- a replica outside the ISR whose log end offset reached the high watermark and the start of
  the current epoch is back in sync (expand);
- an acks=all append of offsets below O is done when the high watermark reaches O:
  NOT_ENOUGH_REPLICAS_AFTER_APPEND if the ISR is then smaller than min.insync.replicas.
On a follower the high watermark is the leader's, capped at its own log end offset.
"""
from __future__ import annotations

from dataclasses import dataclass

from kcoord.protocol.errors import ErrorCode
from kcoord.server.cluster.partition_state import PartitionState
from kcoord.storage.leader_epoch import LeaderEpochCache
from kcoord.storage.log import PartitionLog

NO_EPOCH = -1


@dataclass(slots=True)
class FollowerState:
    """What the leader knows of one follower (Kafka's Replica)."""

    broker_id: int
    log_end_offset: int = -1  # unknown until its first fetch
    last_caught_up_ms: int = 0
    last_fetch_leader_leo: int = -1
    last_fetch_ms: int = 0

    def fetched(self, fetch_offset: int, leader_leo: int, now_ms: int) -> None:
        if fetch_offset >= leader_leo:
            self.last_caught_up_ms = max(self.last_caught_up_ms, now_ms)
        elif fetch_offset >= self.last_fetch_leader_leo >= 0:
            self.last_caught_up_ms = max(self.last_caught_up_ms, self.last_fetch_ms)
        self.log_end_offset = fetch_offset
        self.last_fetch_leader_leo = leader_leo
        self.last_fetch_ms = now_ms


class PartitionReplica:
    """This node's replica of one partition (set as plog.replica while hosted)."""

    def __init__(self, broker_id: int, plog: PartitionLog, cache: LeaderEpochCache, state: PartitionState) -> None:
        self.broker_id = broker_id
        self.plog = plog
        self.cache = cache
        self.state = state
        self.topic, self.partition = state.topic, state.partition
        self.is_leader = False
        self.hw = 0
        self.epoch_start_offset = 0  # the log end when this node became leader in this epoch
        self.followers: dict[int, FollowerState] = {}
        self.isr_change_pending = False  # an alter_isr in flight: one at a time
        self.stopped = False  # stop_replicas: answers as no longer hosted

    # ------------------------------------------------------------------ state

    @property
    def leader_epoch(self) -> int:
        return self.state.leader_epoch

    @property
    def isr(self) -> tuple[int, ...]:
        return self.state.isr

    @property
    def log_end_offset(self) -> int:
        return self.plog.log_end_offset

    def become_leader(self, state: PartitionState, now_ms: int) -> None:
        """Kafka's makeLeader: the new epoch starts at our log end; followers start over,
        the ISR members counted as caught up now (they have a lag period to fetch)."""
        new_epoch = not self.is_leader or state.leader_epoch != self.state.leader_epoch
        self.state = state
        self.is_leader = True
        if new_epoch:
            self.epoch_start_offset = self.plog.log_end_offset
            self.cache.assign(state.leader_epoch, self.epoch_start_offset)
            self.followers = {}
        for rid in state.replicas:
            if rid != self.broker_id and rid not in self.followers:
                self.followers[rid] = FollowerState(rid, last_caught_up_ms=now_ms if rid in state.isr else 0)
        for rid in list(self.followers):
            if rid not in state.replicas:
                del self.followers[rid]
        self.hw = min(self.hw, self.plog.log_end_offset)
        self.maybe_increment_hw()

    def become_follower(self, state: PartitionState) -> None:
        self.state = state
        self.is_leader = False
        self.followers = {}
        self.isr_change_pending = False
        self.hw = min(self.hw, self.plog.log_end_offset)

    def update_state(self, state: PartitionState) -> None:
        """A newer version of the same epoch (an ISR change accepted, or the assignment changed
        by a reassignment): the leader tracks every assigned replica, as Kafka's
        updateAssignmentAndIsr."""
        self.state = state
        if self.is_leader:
            for rid in state.replicas:
                if rid != self.broker_id and rid not in self.followers:
                    self.followers[rid] = FollowerState(rid)
            for rid in [r for r in self.followers if r not in state.replicas]:
                del self.followers[rid]
        self.maybe_increment_hw()

    # ------------------------------------------------------------------ leader

    def appended_as_leader(self, base_offset: int) -> bool:
        """Our own append at `base_offset` (stamped with our epoch); True if the high
        watermark moved (an ISR of one)."""
        self.cache.assign(self.state.leader_epoch, base_offset)
        return self.maybe_increment_hw()

    def update_follower(self, replica_id: int, fetch_offset: int, now_ms: int) -> bool:
        """A follower's Fetch at `fetch_offset`; True if the high watermark moved."""
        f = self.followers.get(replica_id)
        if f is None:
            return False
        f.fetched(min(fetch_offset, self.plog.log_end_offset), self.plog.log_end_offset, now_ms)
        return self.maybe_increment_hw()

    def maybe_increment_hw(self) -> bool:
        if not self.is_leader:
            return False
        new = self.plog.log_end_offset
        for rid in self.state.isr:
            if rid == self.broker_id:
                continue
            f = self.followers.get(rid)
            new = min(new, f.log_end_offset if f is not None else -1)
        if new > self.hw:
            self.hw = new
            return True
        return False

    def out_of_sync(self, now_ms: int, lag_ms: int) -> tuple[int, ...]:
        """ISR followers not caught up within lag_ms (Kafka's getOutOfSyncReplicas)."""
        out = []
        for rid in self.state.isr:
            if rid == self.broker_id:
                continue
            f = self.followers.get(rid)
            if f is None or now_ms - f.last_caught_up_ms > lag_ms:
                out.append(rid)
        return tuple(out)

    def catching_up(self) -> tuple[int, ...]:
        """Replicas outside the ISR that may join it now (Kafka's isFollowerInSync)."""
        out = []
        for rid, f in self.followers.items():
            if rid in self.state.isr:
                continue
            if f.log_end_offset >= self.hw and f.log_end_offset >= self.epoch_start_offset:
                out.append(rid)
        return tuple(out)

    def replicated(self, required_offset: int, min_isr: int) -> tuple[bool, ErrorCode]:
        """Kafka's checkEnoughReplicasReachOffset for an acks=all append ending below
        `required_offset`: (done, error)."""
        if not self.is_leader or self.stopped:
            return True, ErrorCode.NOT_LEADER_OR_FOLLOWER
        if self.hw < required_offset:
            return False, ErrorCode.NONE
        if len(self.state.isr) < min_isr:
            return True, ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND
        return True, ErrorCode.NONE

    # ------------------------------------------------------------------ follower

    def follower_high_watermark(self, leader_hw: int) -> None:
        self.hw = max(self.hw, min(leader_hw, self.plog.log_end_offset))

    def truncated(self, end_offset: int) -> None:
        self.cache.truncate_from_end(end_offset)
        self.hw = min(self.hw, end_offset)

    def __repr__(self) -> str:
        role = "leader" if self.is_leader else "follower"
        return (f"PartitionReplica({self.topic}-{self.partition} {role} epoch={self.leader_epoch} "
                f"isr={self.isr} hw={self.hw} leo={self.log_end_offset})")


def leader_epoch_error(replica: PartitionReplica, current_leader_epoch: int) -> ErrorCode | None:
    """A request's current_leader_epoch against this replica's (-1: not given)."""
    if current_leader_epoch == NO_EPOCH or current_leader_epoch == replica.leader_epoch:
        return None
    if current_leader_epoch > replica.leader_epoch:
        return ErrorCode.UNKNOWN_LEADER_EPOCH
    return ErrorCode.FENCED_LEADER_EPOCH


def truncation_point(cache: LeaderEpochCache, log_end_offset: int, high_watermark: int,
                     requested_epoch: int, leader_epoch: int, leader_end_offset: int) -> tuple[int, bool]:
    """Where a follower cuts its log after the leader answered OffsetsForLeaderEpoch for
    `requested_epoch` (our latest) with (leader_epoch, leader_end_offset); KIP-101/KIP-279.
    Returns (offset to truncate to, done); not done: ask again for our (new) latest epoch."""
    if leader_epoch == NO_EPOCH or leader_end_offset < 0:
        # the leader knows no epoch at or below ours: keep only what was committed
        return min(high_watermark, log_end_offset), True
    if leader_epoch == requested_epoch:
        return min(leader_end_offset, log_end_offset), True
    ours, our_end = cache.end_offset_for(leader_epoch, log_end_offset)
    if ours == leader_epoch:
        return min(leader_end_offset, our_end, log_end_offset), True
    # we never had the leader's epoch: cut back to where our epochs below it end, ask again
    return min(our_end if our_end >= 0 else 0, log_end_offset), False
