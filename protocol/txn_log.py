"""`__transaction_state` records: TransactionLogKey v0 and TransactionLogValue v0-v1, as bytes.

Owns the layout of Kafka's transaction-coordinator message JSONs
(transaction-coordinator/src/main/resources/common/message/TransactionLog{Key,Value}.json):

    key   v0: int16 version | string transactionalId
    value v0: int16 version | int64 producerId | int16 producerEpoch | int32 transactionTimeoutMs
              | int8 transactionStatus | nullable array of (string topic, array of int32)
              | int64 transactionLastUpdateTimestampMs | int64 transactionStartTimestampMs
    value v1: the same fields as a flexible version (compact strings and arrays, an empty tagged
              section after each partitions entry) followed by the tagged fields
              0 previousProducerId int64 (default -1), 1 nextProducerId int64 (default -1),
              2 clientTransactionVersion int16 (default 0), written in tag order when not default.

We write value v1, what Kafka 4.x writes once transaction.version 1+ is finalized (its default);
both versions are read. The partition list is null for Empty, as Kafka writes it. A tombstone
(null value) is how an expired transactional id leaves the log.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass, field

from kcoord.protocol.varint import uvarint

__all__ = [
    "KEY_VERSION",
    "VALUE_VERSION",
    "TxnCodecError",
    "TxnKey",
    "TxnRecord",
    "TxnValue",
    "decode_txn_key",
    "decode_txn_record",
    "decode_txn_value",
    "encode_txn_key",
    "encode_txn_value",
]

KEY_VERSION = 0
VALUE_VERSION = 1
NO_PRODUCER_ID = -1

_h = struct.Struct(">h")
_i = struct.Struct(">i")
_q = struct.Struct(">q")
_HEAD = struct.Struct(">hqhib")  # version, producerId, producerEpoch, timeout, status


class TxnCodecError(ValueError):
    """Bytes that are not a valid __transaction_state key or value."""


@dataclass(frozen=True, slots=True)
class TxnKey:
    transactional_id: str


@dataclass(slots=True)
class TxnValue:
    """TransactionLogValue. `partitions` maps topic -> sorted partition ids (empty for Empty).

    `last_producer_epoch` is not part of the record: Kafka keeps it in memory only (a retried
    InitProducerId of the previous epoch is answered without a second bump) and reads it back
    as -1 after a restart. It rides along with a live write so that replaying the write sets
    it, and is excluded from equality so a live record equals its decoded bytes."""

    producer_id: int
    producer_epoch: int
    timeout_ms: int
    state: int
    partitions: dict[str, list[int]] = field(default_factory=dict)
    last_update_ms: int = -1
    start_ms: int = -1
    previous_producer_id: int = NO_PRODUCER_ID
    next_producer_id: int = NO_PRODUCER_ID
    client_transaction_version: int = 0
    last_producer_epoch: int = field(default=-1, compare=False, metadata={"memory_only": True})


@dataclass(slots=True)
class TxnRecord:
    """One __transaction_state record; value None is a tombstone."""

    key: TxnKey
    value: TxnValue | None


# ---------------------------------------------------------------------------- encoding


def _str16(s: str) -> bytes:
    b = s.encode()
    if len(b) > 0x7FFF:
        raise TxnCodecError(f"string of {len(b)} bytes does not fit an int16 length")
    return _h.pack(len(b)) + b


def encode_txn_key(key: TxnKey) -> bytes:
    return _h.pack(KEY_VERSION) + _str16(key.transactional_id)


def encode_txn_value(value: TxnValue | None, version: int = VALUE_VERSION) -> bytes | None:
    if value is None:
        return None
    if version not in (0, 1):
        raise TxnCodecError(f"cannot write TransactionLogValue v{version}")
    parts = [_HEAD.pack(version, value.producer_id, value.producer_epoch, value.timeout_ms, value.state)]
    topics = None if value.state == 0 and not value.partitions else sorted(value.partitions.items())
    if version == 0:
        if topics is None:
            parts.append(_i.pack(-1))
        else:
            parts.append(_i.pack(len(topics)))
            for topic, ids in topics:
                parts.append(_str16(topic))
                parts.append(_i.pack(len(ids)))
                parts.extend(_i.pack(p) for p in ids)
        parts.append(_q.pack(value.last_update_ms))
        parts.append(_q.pack(value.start_ms))
        return b"".join(parts)
    if topics is None:
        parts.append(b"\x00")
    else:
        parts.append(uvarint(len(topics) + 1))
        for topic, ids in topics:
            b = topic.encode()
            parts.append(uvarint(len(b) + 1) + b)
            parts.append(uvarint(len(ids) + 1))
            parts.extend(_i.pack(p) for p in ids)
            parts.append(b"\x00")  # the entry's (empty) tagged fields
    parts.append(_q.pack(value.last_update_ms))
    parts.append(_q.pack(value.start_ms))
    tagged = []
    if value.previous_producer_id != NO_PRODUCER_ID:
        tagged.append((0, _q.pack(value.previous_producer_id)))
    if value.next_producer_id != NO_PRODUCER_ID:
        tagged.append((1, _q.pack(value.next_producer_id)))
    if value.client_transaction_version != 0:
        tagged.append((2, _h.pack(value.client_transaction_version)))
    parts.append(uvarint(len(tagged)))
    for tag, data in tagged:
        parts.append(uvarint(tag) + uvarint(len(data)) + data)
    return b"".join(parts)


# ---------------------------------------------------------------------------- decoding


class _Reader:
    __slots__ = ("buf", "pos")

    def __init__(self, buf: bytes, pos: int = 0) -> None:
        self.buf = buf
        self.pos = pos

    def take(self, n: int) -> bytes:
        p = self.pos
        if n < 0 or p + n > len(self.buf):
            raise TxnCodecError(f"field of {n} bytes overruns the record at {p}")
        self.pos = p + n
        return self.buf[p:p + n]

    def unpack(self, s: struct.Struct) -> tuple:
        return s.unpack(self.take(s.size))

    def uvarint(self) -> int:
        out = shift = 0
        while True:
            b = self.take(1)[0]
            out |= (b & 0x7F) << shift
            if not b & 0x80:
                return out
            shift += 7
            if shift > 28:
                raise TxnCodecError("varint longer than 5 bytes")

    def string(self, flexible: bool) -> str:
        n = self.uvarint() - 1 if flexible else self.unpack(_h)[0]
        if n < 0:
            raise TxnCodecError("null in a non-nullable string")
        try:
            return self.take(n).decode()
        except UnicodeDecodeError as e:
            raise TxnCodecError(str(e)) from None

    def array_len(self, flexible: bool, nullable: bool) -> int:
        n = self.uvarint() - 1 if flexible else self.unpack(_i)[0]
        if n < -1 or (n == -1 and not nullable):
            raise TxnCodecError(f"bad array length {n}")
        return n

    def tagged(self) -> dict[int, bytes]:
        out = {}
        for _ in range(self.uvarint()):
            tag = self.uvarint()
            out[tag] = self.take(self.uvarint())
        return out

    def end(self) -> None:
        if self.pos != len(self.buf):
            raise TxnCodecError(f"{len(self.buf) - self.pos} trailing bytes")


def decode_txn_key(b: bytes) -> TxnKey | None:
    """Key bytes -> TxnKey; None for a key version this coordinator does not know (Kafka logs
    and skips those: a leftover of an aborted upgrade)."""
    r = _Reader(bytes(b))
    try:
        (version,) = r.unpack(_h)
    except TxnCodecError:
        raise TxnCodecError("key shorter than its version") from None
    if version != KEY_VERSION:
        return None
    key = TxnKey(r.string(False))
    r.end()
    return key


def decode_txn_value(b: bytes | None) -> TxnValue | None:
    if b is None:
        return None
    r = _Reader(bytes(b))
    try:
        version, pid, epoch, timeout, state = r.unpack(_HEAD)
    except TxnCodecError:
        raise TxnCodecError("TransactionLogValue shorter than its fixed fields") from None
    if version not in (0, 1):
        raise TxnCodecError(f"unknown TransactionLogValue version {version}")
    if not 0 <= state <= 7:
        raise TxnCodecError(f"unknown transaction state id {state}")
    flex = version >= 1
    partitions: dict[str, list[int]] = {}
    n = r.array_len(flex, nullable=True)
    for _ in range(max(n, 0)):
        topic = r.string(flex)
        ids = [r.unpack(_i)[0] for _ in range(r.array_len(flex, nullable=False))]
        if flex:
            r.tagged()
        partitions.setdefault(topic, []).extend(ids)
    (last_update,) = r.unpack(_q)
    (start,) = r.unpack(_q)
    prev = nxt = NO_PRODUCER_ID
    client_tv = 0
    if flex:
        tags = r.tagged()
        try:
            if 0 in tags:
                (prev,) = _q.unpack(tags[0])
            if 1 in tags:
                (nxt,) = _q.unpack(tags[1])
            if 2 in tags:
                (client_tv,) = _h.unpack(tags[2])
        except struct.error as e:
            raise TxnCodecError(f"malformed tagged field: {e}") from None
    r.end()
    if state == 0:
        partitions = {}  # Kafka ignores any partitions stored with Empty
    return TxnValue(pid, epoch, timeout, state, {t: sorted(set(ps)) for t, ps in partitions.items()},
                    last_update, start, prev, nxt, client_tv)


def decode_txn_record(key: bytes | None, value: bytes | None) -> TxnRecord | None:
    """One record -> TxnRecord; None for key versions we skip. Raises TxnCodecError."""
    if key is None:
        raise TxnCodecError("__transaction_state record without a key")
    k = decode_txn_key(key)
    if k is None:
        return None
    return TxnRecord(k, decode_txn_value(value))

