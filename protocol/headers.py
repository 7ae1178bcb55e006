"""Request header v0/v1/v2 parsing and response header v0/v1 encoding, by hand with struct.

Request header: api_key int16, api_version int16, correlation_id int32, then (v1+) client_id
as a nullable int16-length string (never compact, even in v2), then (v2) tagged fields.
Response header: correlation_id int32, then (v1) an empty tagged-field section.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass

_HDR = struct.Struct(">hhi")
_CORR = struct.Struct(">i")


class HeaderError(ValueError):
    pass


@dataclass(slots=True)
class RequestHeader:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    size: int  # bytes the header occupied; the body starts here


def read_uvarint(buf: bytes | memoryview, pos: int) -> tuple[int, int]:
    shift = 0
    value = 0
    while True:
        if pos >= len(buf):
            raise HeaderError("truncated varint")
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value, pos
        shift += 7
        if shift > 28:
            raise HeaderError("varint too long")


def skip_tagged_fields(buf: bytes | memoryview, pos: int) -> int:
    count, pos = read_uvarint(buf, pos)
    for _ in range(count):
        _tag, pos = read_uvarint(buf, pos)
        size, pos = read_uvarint(buf, pos)
        pos += size
        if pos > len(buf):
            raise HeaderError("truncated tagged field")
    return pos


def peek_api(frame: bytes) -> tuple[int, int, int]:
    """api_key, api_version, correlation_id: readable for any header version."""
    if len(frame) < 8:
        raise HeaderError(f"request of {len(frame)} bytes is shorter than a header")
    return _HDR.unpack_from(frame, 0)


def read_client_id(frame: bytes, header_version: int) -> tuple[str | None, int]:
    """(client_id, where the body starts) of a request whose first 8 bytes were peeked."""
    if header_version < 1:
        return None, 8
    if len(frame) < 10:
        raise HeaderError("truncated client_id")
    n = (frame[8] << 8) | frame[9]
    pos = 10
    client_id: str | None = None
    if n < 0x8000:  # int16 length; negative (0xFFFF) is a null client_id
        if pos + n > len(frame):
            raise HeaderError("truncated client_id")
        client_id = frame[pos : pos + n].decode("utf-8", "replace")
        pos += n
    if header_version >= 2:
        pos = skip_tagged_fields(frame, pos) if frame[pos : pos + 1] != b"\x00" else pos + 1
    return client_id, pos


def parse_request_header(frame: bytes, header_version: int) -> RequestHeader:
    api_key, api_version, correlation_id = peek_api(frame)
    client_id, pos = read_client_id(frame, header_version)
    return RequestHeader(api_key, api_version, correlation_id, client_id, pos)


def encode_response_header(correlation_id: int, header_version: int) -> bytes:
    if header_version >= 1:
        return _CORR.pack(correlation_id) + b"\x00"
    return _CORR.pack(correlation_id)
