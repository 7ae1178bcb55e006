"""Hand-written encoders for the data plane's responses (Produce v3-v12, Fetch v4-v17): the
answers a busy broker writes most, several times faster than the generic schema-driven classes.
They write exactly the bytes kafka-python's ProduceResponse / FetchResponse write for the same
values (no tagged fields set); tests check both agree on every version.

Handlers answer with ProduceResponseData / FetchResponseData (plain tuples, no message objects),
which the dispatcher encodes with body(); the authorization layer appends the topics it denied
to their `topics` before that.
- Produce: topics = [(name, [(index, error_code, base_offset, log_append_time_ms, log_start_offset,
  record_errors [(batch_index, message | None)], error_message | None)])]
- Fetch: topics = [(name (v4-v12) or uuid.UUID (v13+), [(index, error_code, high_watermark,
  last_stable_offset, log_start_offset, aborted [(producer_id, first_offset)] | None, records)])]
"""
from __future__ import annotations

import struct
from typing import Any

from kcoord.protocol.varint import uvarint

__all__ = ["FetchResponseData", "ProduceResponseData", "encode_fetch_response", "encode_produce_response"]

_i16 = struct.Struct(">h").pack
_i32 = struct.Struct(">i").pack
_PRODUCE_PART = struct.Struct(">ihq")  # index, error, base offset
_q = struct.Struct(">q").pack
_FETCH_PART = struct.Struct(">ihqqq")  # index, error, high watermark, last stable offset, log start
_FETCH_PART_V4 = struct.Struct(">ihqq")  # v4: no log start offset
_ABORTED = struct.Struct(">qq")
_FETCH_HEAD = struct.Struct(">ihi")  # throttle, error, session id
_MINUS_ONE = _i32(-1)


def _string(s: str, flexible: bool) -> bytes:
    b = s.encode()
    return (uvarint(len(b) + 1) if flexible else _i16(len(b))) + b


def _nullable_string(s: str | None, flexible: bool) -> bytes:
    if s is None:
        return b"\x00" if flexible else b"\xff\xff"
    return _string(s, flexible)


def _array_len(n: int, flexible: bool) -> bytes:
    return uvarint(n + 1) if flexible else _i32(n)


def encode_produce_response(version: int, topics: list[tuple[str, list[tuple]]], throttle_ms: int = 0) -> bytes:
    flexible = version >= 9
    out = [_array_len(len(topics), flexible)]
    append = out.append
    for name, parts in topics:
        append(_string(name, flexible))
        append(_array_len(len(parts), flexible))
        for index, error, base, append_time, log_start, record_errors, message in parts:
            append(_PRODUCE_PART.pack(index, error, base))
            append(_q(append_time))  # v2+
            if version >= 5:
                append(_q(log_start))
            if version >= 8:
                append(_array_len(len(record_errors), flexible))
                for batch_index, batch_message in record_errors:
                    append(_i32(batch_index))
                    append(_nullable_string(batch_message, flexible))
                    if flexible:
                        append(b"\x00")
                append(_nullable_string(message, flexible))
            if flexible:
                append(b"\x00")
        if flexible:
            append(b"\x00")
    append(_i32(throttle_ms))
    if flexible:
        append(b"\x00")
    return b"".join(out)


_ZERO_UUID = bytes(16)


def encode_fetch_response(version: int, error_code: int, session_id: int, topics: list[tuple[Any, list[tuple]]],
                          throttle_ms: int = 0) -> bytes:
    flexible = version >= 12
    if version >= 7:
        out = [_FETCH_HEAD.pack(throttle_ms, error_code, session_id)]
    else:
        out = [_i32(throttle_ms)]
    append = out.append
    append(_array_len(len(topics), flexible))
    part = _FETCH_PART.pack
    for topic, parts in topics:
        if version >= 13:
            append(_ZERO_UUID if topic is None else topic.bytes)  # a request's null id is echoed as zeros
        else:
            append(_string(topic, flexible))
        append(_array_len(len(parts), flexible))
        for index, error, hw, lso, log_start, aborted, records, *preferred in parts:
            if version >= 5:
                append(part(index, error, hw, lso, log_start))
            else:
                append(_FETCH_PART_V4.pack(index, error, hw, lso))
            if aborted is None:
                append(b"\x00" if flexible else _MINUS_ONE)
            else:
                append(_array_len(len(aborted), flexible))
                for producer_id, first_offset in aborted:
                    append(_ABORTED.pack(producer_id, first_offset))
                    if flexible:
                        append(b"\x00")
            if version >= 11:
                append(_i32(preferred[0]) if preferred else _MINUS_ONE)  # preferred read replica (KIP-392)
            if records is None:
                append(b"\x00" if flexible else _MINUS_ONE)
            else:
                append(uvarint(len(records) + 1) if flexible else _i32(len(records)))
                append(records)
            if flexible:
                append(b"\x00")
        if flexible:
            append(b"\x00")
    if flexible:
        append(b"\x00")
    return b"".join(out)


class ProduceResponseData:
    """A Produce response as the handler builds it; encode() is its body (the route's general
    encoder calls it, as kafka-python's response objects')."""

    __slots__ = ("version", "topics")

    def __init__(self, version: int, topics: list[tuple[str, list[tuple]]]) -> None:
        self.version = version
        self.topics = topics

    def encode(self, version: int | None = None) -> bytes:
        return encode_produce_response(self.version if version is None else version, self.topics)

    @classmethod
    def decode(cls, data: bytes, version: int) -> Any:
        """kafka-python's object of these bytes (for tests and tools, not the serving path)."""
        from kafka.protocol.producer import ProduceResponse

        return ProduceResponse.decode(data, version=version)


class FetchResponseData:
    """A Fetch response as the handler builds it; encode() is its body."""

    __slots__ = ("version", "error_code", "session_id", "topics")

    def __init__(self, version: int, error_code: int, session_id: int, topics: list[tuple[Any, list[tuple]]]) -> None:
        self.version = version
        self.error_code = error_code
        self.session_id = session_id
        self.topics = topics

    def encode(self, version: int | None = None) -> bytes:
        return encode_fetch_response(self.version if version is None else version, self.error_code,
                                     self.session_id, self.topics)

    @classmethod
    def decode(cls, data: bytes, version: int) -> Any:
        """kafka-python's object of these bytes (for tests and tools, not the serving path)."""
        from kafka.protocol.consumer import FetchResponse

        return FetchResponse.decode(data, version=version)
