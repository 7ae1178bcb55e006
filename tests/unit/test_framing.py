import struct

import pytest

from kcoord.protocol.framing import FrameDecoder, FrameTooLarge, frame
from kcoord.protocol.headers import HeaderError, encode_response_header, parse_request_header


def test_whole_frame():
    d = FrameDecoder()
    assert d.feed(frame(b"hello")) == [b"hello"]
    assert d.buffered == 0


def test_byte_by_byte():
    d = FrameDecoder()
    data = frame(b"abc") + frame(b"")
    got = []
    for i in range(len(data)):
        got += d.feed(data[i : i + 1])
    assert got == [b"abc", b""]


def test_two_frames_in_one_chunk_and_a_partial_third():
    d = FrameDecoder()
    third = frame(b"third!")
    assert d.feed(frame(b"one") + frame(b"two") + third[:5]) == [b"one", b"two"]
    assert d.feed(third[5:]) == [b"third!"]


def test_oversized_frame_refused_before_buffering():
    d = FrameDecoder(max_frame_bytes=10)
    with pytest.raises(FrameTooLarge):
        d.feed(struct.pack(">i", 11))
    with pytest.raises(FrameTooLarge):
        FrameDecoder().feed(struct.pack(">i", -1))


def _header(api_key, version, corr, client_id):
    b = struct.pack(">hhi", api_key, version, corr)
    if client_id is None:
        return b + struct.pack(">h", -1)
    raw = client_id.encode()
    return b + struct.pack(">h", len(raw)) + raw


def test_header_v0():
    h = parse_request_header(struct.pack(">hhi", 18, 0, 7) + b"body", 0)
    assert (h.api_key, h.api_version, h.correlation_id, h.client_id, h.size) == (18, 0, 7, None, 8)


def test_header_v1_null_and_present_client_id():
    h = parse_request_header(_header(3, 1, 9, None) + b"x", 1)
    assert h.client_id is None and h.size == 10
    h = parse_request_header(_header(3, 1, 9, "cli") + b"x", 1)
    assert h.client_id == "cli" and h.size == 13


def test_header_v2_skips_unknown_tagged_fields():
    tagged = bytes([2, 5, 3]) + b"abc" + bytes([200, 1, 1]) + b"z"  # tag 5 (3 bytes), tag 200 (1 byte)
    buf = _header(18, 3, 1, "c") + tagged + b"BODY"
    h = parse_request_header(buf, 2)
    assert buf[h.size :] == b"BODY"


def test_header_v2_truncated_tagged_field():
    with pytest.raises(HeaderError):
        parse_request_header(_header(18, 3, 1, "c") + bytes([1, 5, 9]) + b"ab", 2)


def test_response_headers():
    assert encode_response_header(5, 0) == b"\x00\x00\x00\x05"
    assert encode_response_header(5, 1) == b"\x00\x00\x00\x05\x00"
