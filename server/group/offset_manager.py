"""The offset metadata manager: every group's committed offsets, and OffsetCommit (v0-v9),
OffsetFetch (v0-v9), OffsetDelete (v0) and offset retention (KIP-211), as Kafka's
OffsetMetadataManager does them.

Offsets are kept per group id, apart from the groups themselves (server/group/group_manager.py):
a group of any type is asked through the Group interface whether a commit, fetch or delete is
allowed and when its offsets expire. A commit's records are replayed when it is made (the rule
of server/coordinator/result.py), and the runtime keeps what they replaced until they are
durable (or reverted). While a group has commits in flight (`_committing`, a count per group),
its reads of committed offsets ask the runtime (`committed`) for each partition's value last
made durable, as Kafka reads offsets at the last committed offset; OffsetFetch require_stable
reports a partition with a write in flight as UNSTABLE_OFFSET_COMMIT.
"""
from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from kcoord.protocol.coordinator_codec import offset_key
from kcoord.protocol.coordinator_records import CoordinatorRecord, OffsetKey, OffsetValue
from kcoord.protocol.errors import ErrorCode
from kcoord.protocol.fastpath import OffsetCommitResponseData
from kcoord.server.coordinator.changes import CURRENT
from kcoord.server.group.group_manager import GroupMetadataManager, log
from kcoord.server.group.offsets import OffsetStore
from kcoord.server.group.responses import (
    FetchRow,
    commit_response,
    fetch_group,
    fetch_response_multi,
    fetch_response_single,
    offset_delete_response,
)
from kcoord.server.group.result import CoordinatorResult
from kcoord.server.group.txn_offsets import PendingTxnOffsets
from kcoord.server.group.types import Group

_INT64_MAX = 2**63 - 1

# (topic, partition, whether its metadata is over offset.metadata.max.bytes)
_Row = tuple[str, int, bool]

# What an accepted commit does to its member, by group class (the classic protocol counts it
# as a heartbeat); set by the coordinator. Keyed by class, not GroupType: an Enum hashes in
# Python code, and this is looked up on every commit.
CommitHook = Callable[[Any, str], None]


def _java_length(s: str) -> int:
    """String.length() in Java: UTF-16 code units (what offset.metadata.max.bytes bounds)."""
    if s.isascii():
        return len(s)
    return len(s.encode("utf-16-le", "surrogatepass")) // 2


def _too_large(metadata: str | None, max_meta: int) -> bool:
    meta = metadata or ""
    return (len(meta) if meta.isascii() else _java_length(meta)) > max_meta


def _rows(topics: Any, max_meta: int) -> list[_Row]:
    """Every requested partition, in request order, and whether its metadata is refused."""
    return [(t.name, p.partition_index, _too_large(p.committed_metadata, max_meta))
            for t in topics for p in t.partitions]


def _all_error(version: int, topics: Any, code: ErrorCode) -> CoordinatorResult:
    """A commit refused as a whole: every partition answers `code`."""
    return CoordinatorResult(response=commit_response(
        version, [(t.name, p.partition_index, code) for t in topics for p in t.partitions]))


class _CommitAppended:
    """A commit's on_appended: its answer once its records are durable, or the append's error
    (the runtime reverted the records); either way it is no longer in flight. A callable object
    rather than a closure: a commit waiting for its fdatasync keeps fewer objects alive for the
    garbage collector."""

    __slots__ = ("committing", "group_id", "records", "rows", "version")

    def __init__(self, committing: dict[str, int], group_id: str, records: list[CoordinatorRecord],
                 rows: list[_Row] | None, version: int) -> None:
        self.committing = committing
        self.group_id = group_id
        self.records = records
        self.rows = rows  # None when no partition was refused: the records say it all
        self.version = version

    def __call__(self, error: ErrorCode | None) -> Any:
        committing, gid = self.committing, self.group_id
        n = committing.get(gid, 0) - 1
        if n > 0:
            committing[gid] = n
        else:
            committing.pop(gid, None)
        ok = ErrorCode.NONE if error is None else error
        if self.rows is None:
            records = self.records
            if len(records) == 1:  # one partition, the usual commit
                key = records[0].key
                return OffsetCommitResponseData(self.version, [(key.topic, key.partition, ok)])  # type: ignore[union-attr]
            return commit_response(self.version, [(r.key.topic, r.key.partition, ok) for r in records])  # type: ignore[union-attr]
        return commit_response(self.version, [
            (t, p, ErrorCode.OFFSET_METADATA_TOO_LARGE if too_large else ok) for t, p, too_large in self.rows
        ])


class OffsetMetadataManager:
    def __init__(self, groups: GroupMetadataManager, txn_offsets: PendingTxnOffsets | None = None,
                 committed: Callable[[OffsetKey], Any] | None = None) -> None:
        """committed(key): the record last made durable for a key with a write in flight, or
        changes.CURRENT (the runtime's `committed`; without a runtime every value is committed)."""
        self.groups = groups
        self._committed = committed if committed is not None else (lambda key: CURRENT)
        self.config = groups.config
        self.clock = groups.clock
        self._groups = groups.groups_by_id  # the group table, read on every commit
        self._validate = groups.validate
        self.offsets_by_group: dict[str, OffsetStore] = {}
        # group -> its commits in flight: only then may a partition's stored offset (replayed
        # when the commit was made) differ from the durable one readers must see
        self._committing: dict[str, int] = {}
        self.commit_hooks: dict[type, CommitHook] = {}
        # Offsets written inside open transactions (server/group/txn_offsets.py), given by the
        # composition root: they make OffsetFetch require_stable answer UNSTABLE_OFFSET_COMMIT and keep
        # retention away from their partitions.
        self.txn_offsets = txn_offsets

    # ====================================================================== reading

    def store(self, group_id: str) -> OffsetStore | None:
        """The group's offsets (tests and tools may inspect it; do not mutate)."""
        return self.offsets_by_group.get(group_id)

    def _store_for_write(self, group_id: str) -> OffsetStore:
        s = self.offsets_by_group.get(group_id)
        if s is None:
            s = self.offsets_by_group[group_id] = OffsetStore()
        return s

    def _drop_if_unused(self, group_id: str) -> None:
        s = self.offsets_by_group.get(group_id)
        if s is not None and s.is_unused():
            del self.offsets_by_group[group_id]

    def has_offsets(self, group_id: str) -> bool:
        """Offsets committed or on their way (Kafka keeps such a group)."""
        s = self.offsets_by_group.get(group_id)
        return s is not None and not s.is_unused()

    def count(self, group_id: str) -> int:
        s = self.offsets_by_group.get(group_id)
        return 0 if s is None else len(s)

    def committed(self, group_id: str) -> Iterator[tuple[str, int, OffsetValue]]:
        """(topic, partition, value) of every committed offset of the group (durable: a
        partition with a commit in flight shows the value before it, or none for its first)."""
        s = self.offsets_by_group.get(group_id)
        if s is None:
            return iter(())
        if not self._committing.get(group_id):
            return s.items()
        out = []
        for t, p, v in list(s.items()):
            rec = self._committed(offset_key(group_id, t, p))
            if rec is not CURRENT:
                v = rec.value
            if v is not None:
                out.append((t, p, v))
        return iter(out)

    def _in_flight(self, group_id: str, s: OffsetStore) -> set[tuple[str, int]]:
        """The group's partitions with a commit in flight."""
        if not self._committing.get(group_id):
            return set()
        committed = self._committed
        return {(t, p) for t, p in s.keys() if committed(offset_key(group_id, t, p)) is not CURRENT}

    def pending(self, group_id: str) -> set[tuple[str, int]]:
        """The group's partitions with a commit in flight."""
        s = self.offsets_by_group.get(group_id)
        return set() if s is None else self._in_flight(group_id, s)

    # ====================================================================== replay / loading

    def replay(self, key: OffsetKey, value: OffsetValue | None) -> None:
        group_id = key.group
        if value is None:
            s = self.offsets_by_group.get(group_id)
            if s is not None:
                s.remove(key.topic, key.partition)
                self._drop_if_unused(group_id)
            return
        group = self._groups.get(group_id)
        if group is None or group.dead:  # every group type keeps `dead` as a plain attribute
            self.groups.classic_group_for_offsets(group_id)
        s = self.offsets_by_group.get(group_id)
        if s is None:
            s = self.offsets_by_group[group_id] = OffsetStore()
        s.put(key.topic, key.partition, value)
        if self.txn_offsets is not None:  # a later commit beats earlier transactional offsets
            self.txn_offsets.committed(key)

    def begin_loading(self, partition: int) -> None:
        """Forget the offsets of `partition`'s groups: loading replays them from the log."""
        partition_of = self.groups.partition_of
        for gid in [g for g in self.offsets_by_group if partition_of(g) == partition]:
            del self.offsets_by_group[gid]


    # ====================================================================== OffsetCommit

    def offset_commit(self, req: Any, version: int) -> CoordinatorResult:
        now = self.clock.now_ms()
        group_id = req.group_id
        if version >= 1:
            generation, member_id = req.generation_id_or_member_epoch, req.member_id or ""
        else:
            generation, member_id = -1, ""
        instance_id = req.group_instance_id if version >= 7 else None
        topics = req.topics
        err = self._validate(group_id, "offset_commit")
        if err is not None:
            return _all_error(version, topics, err)
        group = self._groups.get(group_id)
        if group is None:
            if generation >= 0:
                # a commit from an older generation of a group that is gone
                return _all_error(version, topics, ErrorCode.ILLEGAL_GENERATION)
            # not using group management: the group exists only to hold offsets
            log.info("Creating simple consumer group %s via manual offset commit.", group_id)
            group = self.groups.new_classic_group(group_id)
        err = group.validate_offset_commit(member_id, instance_id, generation, False, version)
        if err is not None:
            return _all_error(version, topics, err)
        hook = self.commit_hooks.get(group.__class__)
        if hook is not None:
            hook(group, member_id)
        retention = req.retention_time_ms if 2 <= version <= 4 else -1
        # v2-v4 may ask for a retention: that is the only case with an explicit expire timestamp
        # clamped: a retention near Long.MAX_VALUE must not overflow the int64 on disk
        expire = None if retention == -1 else min(now + retention, _INT64_MAX)
        return self._store_offsets(group_id, topics, version, now, expire)

    def _store_offsets(self, gid: str, topics: Any, version: int, now: int,
                       expire: int | None) -> CoordinatorResult:
        """One record per partition whose metadata is within offset.metadata.max.bytes."""
        max_meta = self.config.offset_metadata_max_bytes
        records: list[CoordinatorRecord] = []
        refused = False
        for t in topics:
            topic = t.name
            for p in t.partitions:
                meta = p.committed_metadata or ""
                if (len(meta) if meta.isascii() else _java_length(meta)) > max_meta:  # _too_large, inline
                    refused = True
                    continue
                ts = p.commit_timestamp if version == 1 and p.commit_timestamp != -1 else now
                epoch = p.committed_leader_epoch if version >= 6 else -1
                value = OffsetValue(p.committed_offset, meta, ts, epoch, expire)
                records.append(CoordinatorRecord(offset_key(gid, topic, p.partition_index), value))
        if not records:
            return _all_error(version, topics, ErrorCode.OFFSET_METADATA_TOO_LARGE)
        store = self.offsets_by_group.get(gid)
        if store is None:
            store = self.offsets_by_group[gid] = OffsetStore()
        # replayed here, through the one replay, with what each record replaces (the runtime's
        # rule, server/coordinator/result.py: it reverts a failed write from `previous`)
        previous = []
        replay = self.replay
        for r in records:
            key = r.key
            previous.append(CoordinatorRecord(key, store.get(key.topic, key.partition)))  # type: ignore[union-attr]
            replay(key, r.value)  # type: ignore[arg-type]
        committing = self._committing
        committing[gid] = committing.get(gid, 0) + 1
        rows = _rows(topics, max_meta) if refused else None
        return CoordinatorResult(records=records, previous=previous,
                                 on_appended=_CommitAppended(committing, gid, records, rows, version))

    # ====================================================================== OffsetFetch

    def offset_fetch(self, req: Any, version: int) -> CoordinatorResult:
        if version >= 8:
            groups = []
            for g in req.groups:
                topics = None if g.topics is None else [(t.name, list(t.partition_indexes)) for t in g.topics]
                if version >= 9:  # a consumer-group member says who it is (KIP-848)
                    group = self._groups.get(g.group_id)
                    err = None if group is None else group.validate_offset_fetch(g.member_id, g.member_epoch)
                    if err is not None:
                        groups.append(fetch_group(g.group_id, err, []))
                        continue
                err, rows = self._fetch_offsets(g.group_id, topics, req.require_stable, version)
                groups.append(fetch_group(g.group_id, err, rows))
            return CoordinatorResult(response=fetch_response_multi(version, groups))
        topics = None if req.topics is None else [(t.name, list(t.partition_indexes)) for t in req.topics]
        require_stable = bool(req.require_stable) if version >= 7 else False
        err, rows = self._fetch_offsets(req.group_id, topics, require_stable, version)
        if version < 2 and err != ErrorCode.NONE:
            # no top-level error before v2: every requested partition carries it
            rows = [(t, p, -1, -1, "", err) for t, parts in (topics or []) for p in parts]
        return CoordinatorResult(response=fetch_response_single(version, err, rows))

    def _fetch_offsets(
        self, group_id: str, topics: list[tuple[str, list[int]]] | None, require_stable: bool, version: int
    ) -> tuple[ErrorCode, list[FetchRow]]:
        err = self._validate(group_id, "offset_fetch")
        if err is not None:
            return err, []
        # v0 used to read ZooKeeper, which reported a partition without an offset as unknown
        missing = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION if version == 0 else ErrorCode.NONE
        group = self._groups.get(group_id)
        store = self.offsets_by_group.get(group_id)
        txn = self.txn_offsets
        txn_pending = (txn.pending_partitions(group_id) if require_stable and txn is not None
                       and txn.has_group(group_id) else None)
        if group is None or group.is_dead() or (store is None and not txn_pending):
            return ErrorCode.NONE, [(t, p, -1, -1, "", missing) for t, parts in (topics or []) for p in parts]
        if store is None:  # only transactional offsets so far
            store = OffsetStore()
        # commits in flight: their partitions read the durable value (a first commit's is none)
        committing = bool(self._committing.get(group_id))
        committed = self._committed
        wanted = store.keys() if topics is None else [(t, p) for t, parts in topics for p in parts]
        rows: list[FetchRow] = []
        for t, p in wanted:
            rec = committed(offset_key(group_id, t, p)) if committing else CURRENT
            if require_stable and (rec is not CURRENT or (txn_pending is not None and (t, p) in txn_pending)):
                rows.append((t, p, -1, -1, "", ErrorCode.UNSTABLE_OFFSET_COMMIT))
                continue
            v = store.get(t, p) if rec is CURRENT else rec.value
            if v is None:
                if topics is None:
                    continue  # a first commit still in flight: not there yet

                rows.append((t, p, -1, -1, "", missing))
            else:
                rows.append((t, p, v.offset, v.leader_epoch, v.metadata, ErrorCode.NONE))
        return ErrorCode.NONE, rows

    # ====================================================================== OffsetDelete

    def offset_delete(self, req: Any, version: int) -> CoordinatorResult:
        group_id = req.group_id
        wanted = [(t.name, p.partition_index) for t in req.topics for p in t.partitions]

        def group_error(code: ErrorCode) -> CoordinatorResult:
            return CoordinatorResult(response=offset_delete_response(version, code, []))

        err = self._validate(group_id, "offset_delete")
        if err is not None:
            return group_error(err)
        group = self._groups.get(group_id)
        if group is None:
            return group_error(ErrorCode.GROUP_ID_NOT_FOUND)
        err = group.validate_offset_delete()
        if err is not None:
            return group_error(err)
        subscribed: list[tuple[str, int]] = []
        if group.is_empty():
            eligible = wanted
        else:
            eligible = []
            for tp in wanted:
                (subscribed if group.is_subscribed_to_topic(tp[0]) else eligible).append(tp)

        store = self.offsets_by_group.get(group_id)
        removed = [tp for tp in dict.fromkeys(eligible) if store is not None and tp in store]
        records = [CoordinatorRecord(OffsetKey(group_id, t, p), None) for t, p in removed]
        died = self._maybe_delete_group(group, len(removed), records)

        def results(code: ErrorCode) -> list[tuple[str, int, ErrorCode]]:
            sub = set(subscribed)
            return [(t, p, ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC if (t, p) in sub else code) for t, p in wanted]

        if not records:
            return CoordinatorResult(response=offset_delete_response(version, ErrorCode.NONE, results(ErrorCode.NONE)))
        log.info("The following offsets of the group %s were deleted: %s. A total of %d offsets were removed.",
                 group_id, removed, len(removed))

        def on_appended(error: ErrorCode | None) -> Any:
            if died:
                if error is None:
                    self.groups.remove_dead(group)
                else:
                    self.groups.revive(group)
            return offset_delete_response(version, ErrorCode.NONE, results(error or ErrorCode.NONE))

        return CoordinatorResult(records=records, on_appended=on_appended)

    def _maybe_delete_group(self, group: Group, n_removed: int, records: list[CoordinatorRecord]) -> bool:
        """An Empty group left without offsets is Dead and gets a tombstone (Kafka's
        cleanupGroupMetadata). Returns whether it died."""
        store = self.offsets_by_group.get(group.group_id)
        txn = self.txn_offsets
        if txn is not None and txn.has_group(group.group_id):
            return False  # its transactional offsets may still commit
        if group.is_empty() and (store is None or (len(store) == n_removed
                                                   and not self._committing.get(group.group_id))):
            log.info("Group %s transitioned to Dead", group.group_id)
            group.mark_dead(self.clock.now_ms(), ErrorCode.COORDINATOR_NOT_AVAILABLE)
            records.extend(group.tombstones())
            return True
        return False

    # ====================================================================== DeleteGroups

    def delete_all_offsets(self, group_id: str, records: list[CoordinatorRecord]) -> int:
        """Tombstones for every committed offset of the group; returns how many."""
        store = self.offsets_by_group.get(group_id)
        if store is None:
            return 0
        keys = store.keys()
        records.extend(CoordinatorRecord(OffsetKey(group_id, t, p), None) for t, p in keys)
        return len(keys)

    # ====================================================================== retention

    def expire_offsets(self) -> CoordinatorResult:
        """Tombstones for expired offsets and for Empty groups left without offsets.

        Unlike every other result, the records may belong to several groups (contiguous per
        group): route each by partition_of(record.key.group).
        """
        start = self.clock.now_ms()
        retention = self.config.offsets_retention_ms
        records: list[CoordinatorRecord] = []
        died: list[Group] = []
        removed = 0
        for group in list(self._groups.values()):
            if group.is_dead() or self.groups.is_group_loading(group.group_id):
                continue
            expired = self._expired_offsets(group, start, retention)
            records.extend(CoordinatorRecord(OffsetKey(group.group_id, t, p), None) for t, p in expired)
            removed += len(expired)
            if self._maybe_delete_group(group, len(expired), records):
                died.append(group)
        if removed > 0:
            log.info("Removed %d expired offsets in %d milliseconds.", removed, self.clock.now_ms() - start)

        def on_appended(error: ErrorCode | None) -> None:
            if error is not None:
                log.error("Failed to append %d tombstones for expired offsets and groups: %s",
                          len(records), error.name)
            for g in died:
                if error is None:
                    self.groups.remove_dead(g)
                else:
                    self.groups.revive(g)

        return CoordinatorResult(records=records, on_appended=on_appended if records else None)

    def _expired_offsets(self, group: Group, now: int, retention_ms: int) -> list[tuple[str, int]]:
        store = self.offsets_by_group.get(group.group_id)
        if store is None:
            return []
        condition = group.offset_expiration()
        if condition is None:
            return []
        pending = self._in_flight(group.group_id, store)
        if self.txn_offsets is not None:
            pending |= self.txn_offsets.pending_partitions(group.group_id)
        return store.expired(now, retention_ms, condition.base_timestamp, condition.keep_topics, pending)

    # ====================================================================== deleted topics

    def on_partitions_deleted(self, partitions: dict[str, set[int]]) -> CoordinatorResult:
        """Tombstones for every group's offsets of deleted partitions (committed, or appended
        and not yet durable: replayed when made, so the store has them, and the tombstone
        follows the commit in the log), and for Empty groups left without offsets (Kafka's
        cleanupGroupMetadata on deleted partitions).

        Records may span several groups (contiguous per group): route each by
        partition_of(record.key.group). The response (with no records) and on_appended's
        answer are the append's error, None when it succeeded."""
        records: list[CoordinatorRecord] = []
        died: list[Group] = []
        removed = 0
        for group_id, store in list(self.offsets_by_group.items()):
            group = self._groups.get(group_id)
            if group is None or group.is_dead():
                continue
            topics = store.topics()
            gone = [(t, p) for t in partitions if t in topics for p in store.partitions(t) if p in partitions[t]]
            if not gone:
                continue
            records.extend(CoordinatorRecord(OffsetKey(group_id, t, p), None) for t, p in gone)
            removed += len(gone)
            committed = sum(1 for tp in gone if tp in store)
            if self._maybe_delete_group(group, committed, records):
                died.append(group)
        if removed:
            log.info("Removed %d offsets of deleted partitions of %s", removed, ", ".join(sorted(partitions)))

        def on_appended(error: ErrorCode | None) -> ErrorCode | None:
            if error is not None:
                log.error("Failed to append %d tombstones for offsets of deleted partitions: %s",
                          len(records), error.name)
            for g in died:
                if error is None:
                    self.groups.remove_dead(g)
                else:
                    self.groups.revive(g)
            return error  # the caller's answer: None once durable

        return CoordinatorResult(records=records, on_appended=on_appended if records else None)
