"""The compactor's check: replay a partition's input and its compacted output through the same
replay the server uses at start-up, and compare what comes out.

When `kcoord.server.group.coordinator.GroupCoordinator` is importable, each side is replayed into a
fresh coordinator exactly as the coordinator runtime's _load_partition does (begin_loading,
decode, replay, end_loading; undecodable records skipped) with a frozen FakeClock, and the resulting
groups (state, generation, protocol, leader, members, committed offsets) are compared.
Otherwise the check falls back to the decoded last-value-per-key state (OffsetKey ->
OffsetValue, GroupKey -> GroupValue, tombstones removing the key), which is what a
per-key replay must agree on anyway. Other compacted topics (mode "records") compare the
last value of each raw key, which is all compaction promises a reader of such a topic.
"""
from __future__ import annotations

import enum
import logging
from array import array
from collections.abc import Iterable, Iterator

from kcoord.protocol.coordinator_codec import CodecError, decode_record

log = logging.getLogger("kcoord.compact.verify")

__all__ = ["VerifyError", "coordinator_available", "diff_states", "replay_state"]

_FROZEN_NOW_MS = 1_700_000_000_000


class VerifyError(AssertionError):
    """Input and output replay to different groups / offsets."""


def coordinator_available() -> bool:
    try:
        import kcoord.server.group.coordinator  # noqa: F401
    except ImportError:
        return False
    return True


def _decoded(records: Iterable[tuple[bytes | None, bytes | None]]) -> Iterator:
    for key, value in records:
        if key is None:
            continue
        try:
            rec = decode_record(key, value)
        except CodecError:
            continue  # the loader logs and skips these too
        if rec is not None:
            yield rec


def _snap(obj, depth: int = 0):
    """A comparable, plain-data picture of coordinator state (objects with __slots__)."""
    if depth > 8:
        return repr(obj)
    if obj is None or isinstance(obj, (bool, int, float, str, bytes)):
        return obj
    if isinstance(obj, enum.Enum):
        return obj.name
    if isinstance(obj, (bytearray, memoryview)):
        return bytes(obj)
    if isinstance(obj, array):
        return tuple(obj)
    if isinstance(obj, dict):
        return tuple(sorted(((repr(k), _snap(v, depth + 1)) for k, v in obj.items()), key=lambda kv: kv[0]))
    if isinstance(obj, (set, frozenset)):
        return tuple(sorted(repr(_snap(v, depth + 1)) for v in obj))
    if isinstance(obj, (list, tuple)):
        return tuple(_snap(v, depth + 1) for v in obj)
    if callable(obj):
        return "<callable>"
    slots = []
    for cls in type(obj).__mro__:
        slots += [s for s in getattr(cls, "__slots__", ()) if s not in slots]
    if slots:
        return (type(obj).__name__,) + tuple(
            (s, _snap(getattr(obj, s, None), depth + 1)) for s in slots if not s.startswith("_"))
    if hasattr(obj, "__dict__"):
        return (type(obj).__name__,) + tuple(
            (k, _snap(v, depth + 1)) for k, v in sorted(vars(obj).items()) if not k.startswith("_"))
    return repr(obj)


def _coordinator_state(records, partition: int, num_partitions: int):
    from kcoord.server.clock import FakeClock
    from kcoord.server.group.config import GroupConfig
    from kcoord.server.group.coordinator import GroupCoordinator

    coord = GroupCoordinator(GroupConfig(), FakeClock(_FROZEN_NOW_MS), num_partitions)
    coord.begin_loading(partition)
    for rec in _decoded(records):
        coord.replay(rec)
    coord.end_loading(partition)
    groups = {}
    for g in coord.groups():
        offsets = tuple(sorted((t, p, _snap(v)) for t, p, v in coord.committed_offsets(g.group_id)))
        groups[g.group_id] = (_snap(g), offsets)
    return groups


def _last_value_state(records):
    state = {}
    for rec in _decoded(records):
        if rec.value is None:
            state.pop(rec.key, None)
        else:
            state[rec.key] = rec.value
    return state


def _transaction_state(records, partition: int, num_partitions: int):
    """A __transaction_state partition replayed as the coordinator runtime loads it: the latest
    record of each transactional id into a TransactionCoordinator (undecodable records skipped)."""
    from kcoord.protocol.txn_log import TxnCodecError, decode_txn_record
    from kcoord.server.clock import FakeClock
    from kcoord.server.coordinator.changes import CURRENT
    from kcoord.server.txn.coordinator import TransactionCoordinator
    from kcoord.server.txn.metadata import TxnConfig

    # nothing is written here, so nothing is ever in flight: every id's state is durable
    coord = TransactionCoordinator(TxnConfig(), FakeClock(_FROZEN_NOW_MS), num_partitions, lambda: -1,
                                   lambda key: CURRENT)
    coord.active = True
    coord.begin_loading(partition)
    for key, value in records:
        if key is None:
            continue
        try:
            rec = decode_txn_record(key, value)
        except TxnCodecError:
            continue
        if rec is not None:
            coord.replay(rec)
    coord.end_loading(partition)  # prepared transactions' markers queue up: nothing runs them here
    return {m.transactional_id: m.snapshot() for m in coord.transactions()}


def _records_state(records):
    state: dict[bytes, bytes] = {}
    for key, value in records:
        if key is None:
            continue
        if value is None:
            state.pop(key, None)
        else:
            state[key] = value
    return state


def replay_state(records: Iterable[tuple[bytes | None, bytes | None]], partition: int,
                 num_partitions: int, mode: str = "auto") -> tuple[str, dict]:
    """(mode used, state) after replaying (key, value) records of one partition in order.
    mode: "auto" (coordinator if available), "coordinator" or "last-value" for
    __consumer_offsets; "transactions" (replayed into the transaction coordinator) for
    __transaction_state; "records" (last value per raw key) for any compacted topic."""
    if mode == "records":
        return mode, _records_state(records)
    if mode == "auto":
        mode = "coordinator" if coordinator_available() else "last-value"
    if mode == "coordinator":
        return mode, _coordinator_state(records, partition, num_partitions)
    if mode == "transactions":
        return mode, _transaction_state(records, partition, num_partitions)
    if mode == "last-value":
        return mode, _last_value_state(records)
    raise ValueError(f"unknown verify mode {mode!r}")


def diff_states(a: dict, b: dict, limit: int = 5) -> list[str]:
    """Human-readable differences (at most `limit`), empty when equal."""
    out = []
    for k in sorted(set(a) | set(b), key=repr):
        if a.get(k) != b.get(k):
            out.append(f"{k!r}: input={a.get(k)!r} output={b.get(k)!r}")
            if len(out) >= limit:
                break
    return out
