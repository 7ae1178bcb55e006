"""Transactions in a log the way Kafka's group loader and log cleaner see them.

A transactional data batch (attribute bit 4) belongs to its producer's open transaction; the
next control batch (bit 5) of the same producer ends it with a marker record whose key is
(version int16, type int16): type 1 COMMIT makes its records count, type 0 ABORT discards
them. A transaction with no marker yet is still open: its records do not count yet either.
kcoord never writes transactions itself, but a real Kafka's __consumer_offsets holds them
(TxnOffsetCommit), so loading and compaction must agree on which records count.
"""
from __future__ import annotations

import struct
from collections.abc import Iterable

from kcoord.storage.batch import ATTR_CONTROL, ATTR_TRANSACTIONAL, BatchHeader

__all__ = ["ABORT", "COMMIT", "control_type", "transaction_outcomes", "uncommitted_batches"]

ABORT = 0
COMMIT = 1
_CONTROL_KEY = struct.Struct(">hh")


def control_type(batch: bytes | memoryview) -> int | None:
    """The marker type (ABORT / COMMIT) of a control batch, None if unreadable."""
    from aiokafka.record.default_records import DefaultRecordBatch

    try:
        for r in DefaultRecordBatch(batch):
            if r.key is not None and len(r.key) >= 4:
                return _CONTROL_KEY.unpack_from(r.key)[1]
    except Exception:  # noqa: BLE001 - a marker we cannot read counts as unknown
        return None
    return None


def transaction_outcomes(batches: Iterable[tuple[BatchHeader, bytes | memoryview]]) -> tuple[set[int], set[int]]:
    """(aborted, open): base offsets of the transactional data batches whose records do not
    count, because an ABORT marker (or an unreadable one) ended their transaction, or because
    no marker has yet at the end of `batches` (given in offset order)."""
    open_by_producer: dict[int, list[int]] = {}
    aborted: set[int] = set()
    for h, body in batches:
        if not h.attributes & ATTR_TRANSACTIONAL:
            continue
        if h.attributes & ATTR_CONTROL:
            pending = open_by_producer.pop(h.producer_id, [])
            if control_type(body) != COMMIT:
                aborted.update(pending)
            continue
        open_by_producer.setdefault(h.producer_id, []).append(h.base_offset)
    return aborted, {b for pending in open_by_producer.values() for b in pending}


def uncommitted_batches(batches: Iterable[tuple[BatchHeader, bytes | memoryview]]) -> set[int]:
    """Base offsets of the transactional data batches that are aborted or still open."""
    aborted, still_open = transaction_outcomes(batches)
    return aborted | still_open
