"""`kcoord dump PATH... [--json]`: print __consumer_offsets, __transaction_state and
__share_group_state records from segment files.

Owns turning segment files into readable lines, in the spirit of Kafka's
OffsetsMessageFormatter / GroupMetadataMessageFormatter / TransactionLogMessageFormatter.
Read-only and safe next to a running server: it opens files O_RDONLY, never recovers or
truncates, and stops quietly at a batch that is still being written (noting it on stderr).
Records of transactional batches carry their producer id; transaction markers (control
batches) are printed as such.

PATH is a .log segment, a partition directory holding .log files, or a log directory (every
`__consumer_offsets-N`, then every `__transaction_state-N`, then every `__share_group_state-N`
inside, in partition order). A segment's records are decoded by the topic its directory names.
Share-group records (__consumer_offsets key versions 10-15, __share_group_state) are decoded by
protocol/share_records.py; other unknown key versions are listed as skipped.
"""
from __future__ import annotations

import argparse
import base64
import dataclasses
import json
import os
import sys
import time
import uuid
from collections.abc import Iterator
from typing import TextIO

from kcoord.protocol import share_records
from kcoord.protocol.coordinator_codec import CodecError, decode_key, decode_value
from kcoord.protocol.topics import OFFSETS_TOPIC, SHARE_STATE_TOPIC, TXN_TOPIC
from kcoord.protocol.txn_log import TxnCodecError, TxnValue, decode_txn_key, decode_txn_value
from kcoord.storage.batch import BatchHeader, iter_batch_records
from kcoord.storage.segment import scan_batches
from kcoord.storage.transactions import ABORT, COMMIT, control_type

__all__ = ["main", "read_records", "segment_files"]



_DUMPED_TOPICS = (OFFSETS_TOPIC, TXN_TOPIC, SHARE_STATE_TOPIC)  # in this order


def _segment_files(path: str) -> Iterator[str]:
    if os.path.isfile(path):
        yield path
        return
    names = sorted(os.listdir(path))
    logs = [n for n in names if n.endswith(".log")]
    if logs:
        for n in logs:
            yield os.path.join(path, n)
        return
    parts = []
    for n in names:
        topic, _, part = n.rpartition("-")
        if topic in _DUMPED_TOPICS and part.isdigit() and os.path.isdir(os.path.join(path, n)):
            parts.append((_DUMPED_TOPICS.index(topic), int(part), n))
    for _, _, n in sorted(parts):
        yield from _segment_files(os.path.join(path, n))


segment_files = _segment_files


def read_records(path: str, err: TextIO | None = None) -> Iterator[tuple[str, int, bytes | None, bytes | None]]:
    """(segment path, offset, key, value) of every record under `path`, read-only, in log
    order; a torn or still-being-written tail ends that segment (noted on `err`)."""
    for seg in _segment_files(path):
        fd = os.open(seg, os.O_RDONLY)
        try:
            size = os.fstat(fd).st_size
            end = 0
            for h, body in scan_batches(fd, 0, size):
                end = h.position + h.size
                if h.is_control:
                    continue
                for offset, _ts, kb, vb in iter_batch_records(bytes(body)):
                    yield seg, offset, kb, vb
            if end < size and err is not None:
                err.write(f"{seg}: stopped at position {end} of {size}: "
                          "torn, corrupt or still being written\n")
        finally:
            os.close(fd)


def _fmt(v: object) -> str:
    if isinstance(v, bytes):
        return f"<{len(v)} bytes>"
    if isinstance(v, list | tuple):
        return "[" + ", ".join(_fmt(x) for x in v) + "]"
    if isinstance(v, dict):  # consumer-group assignments and topic metadata
        return "{" + ", ".join(f"{repr(k) if isinstance(k, str) else _fmt(k)}: {_fmt(x)}" for k, x in v.items()) + "}"
    if isinstance(v, frozenset | set):
        return "[" + ", ".join(_fmt(x) for x in sorted(v)) + "]"
    if dataclasses.is_dataclass(v):
        fields = ", ".join(f"{f.name}={_fmt(getattr(v, f.name))}" for f in _record_fields(v))
        return f"{type(v).__name__}({fields})"
    return "null" if v is None else str(v)


def _record_fields(v: object) -> list[dataclasses.Field]:
    """What a record holds (a field kept only in memory is not in the log)."""
    return [f for f in dataclasses.fields(v) if not f.metadata.get("memory_only")]  # type: ignore[arg-type]


def _jsonable(v: object) -> object:
    if isinstance(v, bytes):
        return base64.b64encode(v).decode()
    if isinstance(v, list | tuple):
        return [_jsonable(x) for x in v]
    if isinstance(v, frozenset | set):
        return sorted(_jsonable(x) for x in v)
    if isinstance(v, dict):  # keys become strings (topic ids, topic names)
        return {str(k): _jsonable(x) for k, x in v.items()}
    if isinstance(v, uuid.UUID):
        return str(v)
    if dataclasses.is_dataclass(v):
        return {f.name: _jsonable(getattr(v, f.name)) for f in _record_fields(v)}
    return v


class _Progress:
    """A progress line on stderr for long dumps (only when it is a terminal) and a summary at
    the end (always, on stderr, so stdout stays the records)."""

    def __init__(self, total_bytes: int, err: TextIO) -> None:
        self.total = total_bytes
        self.err = err
        self.live = err.isatty()
        self.bytes = self.records = self.segments = 0
        self.started = self.shown = time.monotonic()

    def advance(self, nbytes: int, records: int) -> None:
        self.bytes += nbytes
        self.records += records
        if self.live and time.monotonic() - self.shown >= 1.0:
            self.shown = time.monotonic()
            pct = 100 * self.bytes / self.total if self.total else 100
            self.err.write(f"\rdump: {self.bytes / 1e6:,.1f} of {self.total / 1e6:,.1f} MB ({pct:.0f}%), "
                           f"{self.records:,} records")
            self.err.flush()

    def finish(self) -> None:
        if self.live and self.shown != self.started:
            self.err.write("\n")
        self.err.write(f"dump: {self.records:,} records from {self.segments} segment(s), "
                       f"{self.bytes / 1e6:,.1f} MB in {time.monotonic() - self.started:.1f} s\n")


def _dump_file(path: str, as_json: bool, out: TextIO, err: TextIO, progress: _Progress) -> int:
    """Print one segment; returns how many records could not be decoded."""
    bad = 0
    progress.segments += 1
    fd = os.open(path, os.O_RDONLY)
    try:
        size = os.fstat(fd).st_size
        end = 0
        if not as_json:
            out.write(f"# {path}\n")
        decode = {TXN_TOPIC: _decode_txn, SHARE_STATE_TOPIC: _decode_share_state}.get(
            _segment_topic(path), _decode_group)
        for h, body in scan_batches(fd, 0, size):
            end = h.position + h.size
            if h.is_control:
                _dump_marker(h, bytes(body), as_json, out)
                progress.advance(h.size, 1)
                continue
            pid = h.producer_id if h.is_transactional else None
            n = 0
            for offset, ts, kb, vb in iter_batch_records(bytes(body)):
                bad += _dump_record(offset, ts, kb, vb, as_json, out, decode, pid)
                n += 1
            progress.advance(h.size, n)
        if end < size:
            err.write(f"{path}: stopped at position {end} of {size}: "
                      "torn, corrupt or still being written\n")
    finally:
        os.close(fd)
    return bad


def _segment_topic(path: str) -> str:
    return os.path.basename(os.path.dirname(os.path.abspath(path))).rpartition("-")[0]


def _decode_group(kb: bytes, vb: bytes | None) -> tuple[object, object] | None:
    if len(kb) >= 2 and int.from_bytes(kb[:2], "big", signed=True) in share_records.SHARE_GROUP_KEY_VERSIONS:
        try:
            key = share_records.decode_group_key(kb)
            return key, share_records.decode_value(key, vb)
        except share_records.ShareRecordError as e:
            raise CodecError(str(e)) from None
    key = decode_key(kb)
    return None if key is None else (key, decode_value(key, vb))


def _decode_share_state(kb: bytes, vb: bytes | None) -> tuple[object, object] | None:
    try:
        key = share_records.decode_state_key(kb)
        return key, share_records.decode_value(key, vb)
    except share_records.ShareRecordError as e:
        raise CodecError(str(e)) from None


def _decode_txn(kb: bytes, vb: bytes | None) -> tuple[object, object] | None:
    try:
        key = decode_txn_key(kb)
        if key is None:
            return None
        value = decode_txn_value(vb)
    except TxnCodecError as e:
        raise CodecError(str(e)) from None
    return key, value


def _dump_marker(h: BatchHeader, body: bytes, as_json: bool, out: TextIO) -> None:
    kind = {COMMIT: "COMMIT", ABORT: "ABORT"}.get(control_type(body), "UNKNOWN")  # type: ignore[arg-type]
    if as_json:
        out.write(json.dumps({"offset": h.base_offset, "timestamp": h.max_timestamp, "marker": kind,
                              "producer_id": h.producer_id, "producer_epoch": h.producer_epoch}) + "\n")
    else:
        out.write(f"offset={h.base_offset} timestamp={h.max_timestamp} marker={kind} producer_id={h.producer_id} "
                  f"producer_epoch={h.producer_epoch}\n")


def _dump_record(offset: int, ts: int, kb: bytes | None, vb: bytes | None, as_json: bool,
                 out: TextIO, decode=_decode_group, producer_id: int | None = None) -> int:  # noqa: ANN001
    try:
        if kb is None:
            raise CodecError("record without a key")
        key_version = int.from_bytes(kb[:2], "big", signed=True)
        decoded = decode(kb, vb)
        if decoded is None:
            if as_json:
                out.write(json.dumps({"offset": offset, "timestamp": ts, "key_version": key_version,
                                      "skipped": "unknown key version"}) + "\n")
            else:
                out.write(f"offset={offset} key_version={key_version}: unknown key version, skipped\n")
            return 0
        key, value = decoded
    except CodecError as e:
        if as_json:
            out.write(json.dumps({"offset": offset, "timestamp": ts, "error": str(e)}) + "\n")
        else:
            out.write(f"offset={offset} undecodable record: {e}\n")
        return 1
    state = _txn_state_name(value)
    if as_json:
        value_version = None if vb is None else int.from_bytes(vb[:2], "big", signed=True)
        line = {
            "offset": offset,
            "timestamp": ts,
            "key": {"type": type(key).__name__, "version": key_version, "data": _jsonable(key)},
            "value": None if value is None else
            {"type": type(value).__name__, "version": value_version, "data": _jsonable(value)},
        }
        if state is not None:
            line["value"]["state"] = state  # type: ignore[index]
        if producer_id is not None:
            line["producer_id"] = producer_id
        out.write(json.dumps(line) + "\n")
    else:
        txn = "" if producer_id is None else f" transactional producer_id={producer_id}"
        named = "" if state is None else f" ({state})"
        out.write(f"offset={offset} timestamp={ts}{txn} key={_fmt(key)} value={_fmt(value)}{named}\n")
    return 0


def _txn_state_name(value: object) -> str | None:
    """The name of a TransactionLogValue's state (its records store the id)."""
    if not isinstance(value, TxnValue):
        return None
    return _TXN_STATES.get(value.state, f"unknown state {value.state}")


# TransactionLogValue.transactionStatus -> Kafka's name (server/txn/state.py's TxnState ids)
_TXN_STATES = {0: "Empty", 1: "Ongoing", 2: "PrepareCommit", 3: "PrepareAbort", 4: "CompleteCommit",
               5: "CompleteAbort", 6: "Dead", 7: "PrepareEpochFence"}


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="kcoord dump", description=__doc__.splitlines()[0])
    p.add_argument("paths", nargs="+", metavar="PATH", help="log dir, partition dir or .log file")
    p.add_argument("--json", action="store_true", help="one JSON object per line")
    args = p.parse_args(argv)
    status = 0
    out, err = sys.stdout, sys.stderr
    files: list[str] = []
    for path in args.paths:
        if not os.path.exists(path):
            err.write(f"{path}: no such file or directory\n")
            status = 1
            continue
        files.extend(_segment_files(path))
    progress = _Progress(sum(os.path.getsize(f) for f in files if os.path.exists(f)), err)
    for f in files:
        try:
            if _dump_file(f, args.json, out, err, progress):
                status = 1
        except OSError as e:  # e.g. a segment deleted by retention while we read
            err.write(f"{f}: {e}\n")
            status = 1
    progress.finish()
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
