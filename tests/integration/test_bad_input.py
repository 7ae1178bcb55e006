"""Bad input on raw sockets: each case gets what Apache Kafka gives it (an error code where the
protocol has one, otherwise the connection is closed), leaves the server healthy for other
clients, and produces exactly one line in the server's log, naming the peer.

Kafka's behaviour, for reference (SocketServer / KafkaApis / RequestContext):
- a size prefix above socket.request.max.bytes, or negative: InvalidReceiveException, close;
- a frame shorter than a request header, an unknown API key, an unsupported version of any API
  but ApiVersions, a body that does not parse: InvalidRequestException, close;
- ApiVersions of a version the broker does not know: a v0 body with UNSUPPORTED_VERSION (35)
  and the broker's ranges, response header v0, and the connection stays open (KIP-511);
- a connection closed in the middle of a frame: the partial frame is dropped.
"""
from __future__ import annotations

import random
import socket
import struct
import time
from collections.abc import Iterator

import pytest
from conftest import KcoordProcess
from kafka.admin import KafkaAdminClient
from kafka.protocol.metadata import ApiVersionsResponse, MetadataRequest, MetadataResponse

pytestmark = pytest.mark.integration

MAX_REQUEST = 1024
API_VERSIONS, METADATA, CREATE_TOPICS = 18, 3, 19
UNSUPPORTED_VERSION = 35
# What kcoord advertises (protocol/api.py), as DESIGN.md lists it.
EXPECTED_RANGES = {
    0: (0, 12), 1: (4, 17), 2: (0, 9), 3: (0, 12), 8: (0, 9), 9: (0, 9), 10: (0, 6), 11: (0, 9),
    12: (0, 4), 13: (0, 5), 14: (0, 5), 15: (0, 5), 16: (0, 5), 18: (0, 4), 19: (0, 7), 22: (0, 5),
    42: (0, 2), 47: (0, 0),
    # admin: configs and cluster (issue 12)
    32: (0, 4), 33: (0, 2), 35: (0, 4), 43: (0, 2), 44: (0, 1), 45: (0, 0), 46: (0, 0), 60: (0, 1), 75: (0, 0),
}
EXPECTED_RANGES[20] = (0, 6)  # DeleteTopics
EXPECTED_RANGES[21] = (0, 2)  # DeleteRecords
EXPECTED_RANGES[37] = (0, 3)  # CreatePartitions
# security (issue 16): SaslHandshake, SaslAuthenticate, Describe/Create/DeleteAcls, the SCRAM credential APIs
EXPECTED_RANGES.update({17: (0, 1), 36: (0, 2), 29: (0, 3), 30: (0, 3), 31: (0, 3), 50: (0, 0), 51: (0, 0)})
EXPECTED_RANGES[68] = (0, 1)  # ConsumerGroupHeartbeat
EXPECTED_RANGES[69] = (0, 1)  # ConsumerGroupDescribe
EXPECTED_RANGES.update({76: (1, 1), 77: (1, 1)})  # ShareGroupHeartbeat, ShareGroupDescribe (issue 25)
# ShareFetch, ShareAcknowledge, Describe/Alter/DeleteShareGroupOffsets (issue 25)
EXPECTED_RANGES.update({78: (1, 2), 79: (1, 2), 90: (0, 1), 91: (0, 0), 92: (0, 0)})
EXPECTED_RANGES.update({48: (0, 1), 49: (0, 1)})  # DescribeClientQuotas, AlterClientQuotas (issue 27)
# transactions (issue 11)
EXPECTED_RANGES.update({24: (0, 5), 25: (0, 4), 26: (0, 5), 28: (0, 5), 61: (0, 0), 65: (0, 0), 66: (0, 1)})
EXPECTED_RANGES[23] = (2, 4)  # OffsetForLeaderEpoch (issue 23: replication)
EXPECTED_RANGES[27] = (1, 2)  # WriteTxnMarkers (between cluster nodes; Kafka's brokers advertise it too)
# Initialize/Read/Write/DeleteShareGroupState (between cluster nodes: a share partition's leader and
# its share coordinator)
EXPECTED_RANGES.update({83: (0, 0), 84: (0, 0), 85: (0, 0), 86: (0, 0)})


@pytest.fixture(scope="module")
def srv(tmp_path_factory) -> Iterator[KcoordProcess]:
    s = KcoordProcess(tmp_path_factory.mktemp("bad-input") / "data",
                      overrides={"socket.request.max.bytes": str(MAX_REQUEST)}).start()
    yield s
    s.stop()


# ---- raw protocol helpers ----


def header(api_key: int, version: int, correlation_id: int, client_id: str | None = "raw",
           flexible: bool = False) -> bytes:
    out = struct.pack(">hhi", api_key, version, correlation_id)
    if client_id is None:
        out += struct.pack(">h", -1)
    else:
        cid = client_id.encode()
        out += struct.pack(">h", len(cid)) + cid
    if flexible:
        out += b"\x00"  # no tagged fields
    return out


def framed(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


def api_versions_v0(correlation_id: int, client_id: str = "raw") -> bytes:
    return framed(header(API_VERSIONS, 0, correlation_id, client_id))


def metadata_request(correlation_id: int, version: int) -> bytes:
    req = MetadataRequest(version=version, topics=None, allow_auto_topic_creation=False,
                          include_cluster_authorized_operations=False,
                          include_topic_authorized_operations=False)
    return framed(header(METADATA, version, correlation_id, flexible=version >= 9) + req.encode())


def connect(srv: KcoordProcess) -> socket.socket:
    s = socket.create_connection(("127.0.0.1", srv.port), timeout=5)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return s


def recv_exact(s: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = s.recv(n - len(buf))
        if not chunk:
            raise ConnectionError(f"connection closed after {len(buf)} of {n} bytes")
        buf += chunk
    return bytes(buf)


def read_response(s: socket.socket) -> bytes:
    (size,) = struct.unpack(">i", recv_exact(s, 4))
    return recv_exact(s, size)


def assert_closed(s: socket.socket, within: float = 5.0) -> None:
    """The server closed the connection without answering."""
    s.settimeout(within)
    try:
        data = s.recv(65536)
    except ConnectionResetError:
        return
    except TimeoutError:
        pytest.fail(f"connection still open after {within}s")
    assert data == b"", f"expected the connection to be closed, got {data[:64]!r}"


def check_api_versions(s: socket.socket, correlation_id: int) -> None:
    s.sendall(api_versions_v0(correlation_id))
    body = read_response(s)
    assert struct.unpack_from(">i", body)[0] == correlation_id
    resp = ApiVersionsResponse.decode(body[4:], version=0)
    assert resp.error_code == 0


def assert_healthy(srv: KcoordProcess) -> None:
    """A fresh raw connection and a real client both still get answers."""
    assert srv.alive(), srv.log_text()[-3000:]
    with connect(srv) as s:
        check_api_versions(s, 4242)
    admin = KafkaAdminClient(bootstrap_servers=srv.bootstrap, request_timeout_ms=5000,
                             bootstrap_timeout_ms=5000)
    try:
        assert "__consumer_offsets" in admin.list_topics()
    finally:
        admin.close()


class LogWatch:
    """Server log lines (one per record: lines starting with '[') that name one peer."""

    def __init__(self, srv: KcoordProcess, s: socket.socket) -> None:
        self.srv = srv
        self.peer = f"127.0.0.1:{s.getsockname()[1]}"
        self.start = len(srv.log_text())

    def lines(self) -> list[str]:
        new = self.srv.log_text()[self.start:]
        return [ln for ln in new.splitlines() if ln.startswith("[") and self.peer in ln]

    def exactly_one(self, *needles: str, wait: float = 30.0) -> str:
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline and not self.lines():
            time.sleep(0.02)
        time.sleep(0.2)  # a second line would follow at once
        found = self.lines()
        assert len(found) == 1, f"want exactly one log line about {self.peer}, got {found}\n" + \
            self.srv.log_text()[self.start:][-3000:]
        for needle in needles:
            assert needle in found[0], (needle, found[0])
        return found[0]

    def none(self, wait: float = 0.5) -> None:
        time.sleep(wait)
        assert self.lines() == [], self.lines()


# ---- cases ----


def test_oversized_frame_closes_connection(srv):
    with connect(srv) as s:
        watch = LogWatch(srv, s)
        s.sendall(struct.pack(">i", MAX_REQUEST + 1) + b"\x00" * 64)
        assert_closed(s)
        watch.exactly_one(str(MAX_REQUEST + 1), "socket.request.max.bytes")
    assert_healthy(srv)


def test_frame_of_exactly_the_limit_is_served(srv):
    """socket.request.max.bytes is inclusive, as in Kafka (`size > max` is refused)."""
    filler = "c" * (MAX_REQUEST - 10)  # header: 2+2+4 bytes, then a 2-byte length
    frame = api_versions_v0(7, client_id=filler)
    assert len(frame) == 4 + MAX_REQUEST
    with connect(srv) as s:
        watch = LogWatch(srv, s)
        s.sendall(frame)
        body = read_response(s)
        assert struct.unpack_from(">i", body)[0] == 7
        assert ApiVersionsResponse.decode(body[4:], version=0).error_code == 0
        watch.none()


@pytest.mark.parametrize("size", [-1, -(2**31)])
def test_negative_size_closes_connection(srv, size):
    with connect(srv) as s:
        watch = LogWatch(srv, s)
        s.sendall(struct.pack(">i", size) + b"\x00" * 16)
        assert_closed(s)
        watch.exactly_one(str(size))
    assert_healthy(srv)


def test_truncated_frame_then_close(srv):
    s = connect(srv)
    watch = LogWatch(srv, s)
    frame = api_versions_v0(1)
    s.sendall(frame[:9])  # the size and half the header
    time.sleep(0.1)
    s.close()
    watch.exactly_one("partial")
    assert_healthy(srv)


def test_truncated_frame_gets_no_answer_and_completes_later(srv):
    """A frame split across writes is only served once whole (Kafka buffers the partial frame)."""
    with connect(srv) as s:
        frame = api_versions_v0(31)
        s.sendall(frame[:6])
        s.settimeout(0.3)
        with pytest.raises(TimeoutError):
            s.recv(1)
        s.settimeout(5)
        s.sendall(frame[6:])
        body = read_response(s)
        assert struct.unpack_from(">i", body)[0] == 31


def test_http_request_on_the_kafka_port(srv):
    """`GET / HTTP/1.1` read as a size is 1195725856: far above the limit, closed."""
    with connect(srv) as s:
        watch = LogWatch(srv, s)
        s.sendall(b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n")
        assert_closed(s)
        watch.exactly_one("1195725856")
    assert_healthy(srv)


@pytest.mark.parametrize("payload", [b"", b"\x00", b"\x00\x12\x00", b"\xde\xad\xbe\xef\x00\x01\x02"],
                         ids=["empty", "1-byte", "3-bytes", "7-bytes"])
def test_frame_shorter_than_a_header_closes_connection(srv, payload):
    with connect(srv) as s:
        watch = LogWatch(srv, s)
        s.sendall(framed(payload))
        assert_closed(s)
        watch.exactly_one()
    assert_healthy(srv)


def test_random_garbage_closes_connection(srv):
    rnd = random.Random(20240611)
    for _ in range(5):
        junk = bytes(rnd.getrandbits(8) for _ in range(300))
        with connect(srv) as s:
            watch = LogWatch(srv, s)
            s.sendall(junk)
            assert_closed(s)
            watch.exactly_one()
    assert_healthy(srv)


def test_unknown_api_key_closes_connection(srv):
    with connect(srv) as s:
        watch = LogWatch(srv, s)
        s.sendall(framed(header(999, 0, 5) + b"\x00" * 8))
        assert_closed(s)
        watch.exactly_one("999")
    assert_healthy(srv)


def test_api_key_kafka_has_but_kcoord_does_not_serve_closes_connection(srv):
    """LeaderAndIsr (4), an inter-broker API, is not advertised by kcoord: a client that sends
    it anyway is cut off."""
    with connect(srv) as s:
        watch = LogWatch(srv, s)
        s.sendall(framed(header(4, 1, 6) + b"\x00\x00\x00\x00\x00\x00\x00\x00"))
        assert_closed(s)
        watch.exactly_one("unknown API key 4")
    assert_healthy(srv)


@pytest.mark.parametrize("version", [99, 13, -1])
def test_unsupported_metadata_version_closes_connection(srv, version):
    with connect(srv) as s:
        watch = LogWatch(srv, s)
        s.sendall(framed(header(METADATA, version, 9) + b"\xff\xff\xff\xff"))
        assert_closed(s)
        watch.exactly_one("METADATA", str(version))
    assert_healthy(srv)


@pytest.mark.parametrize("version", [99, 5, 32767])
def test_unsupported_api_versions_version_gets_v0_error_with_ranges(srv, version):
    with connect(srv) as s:
        watch = LogWatch(srv, s)
        # A future ApiVersions would be flexible: header v2, unknown body. Only the header's
        # first 8 bytes must be read to answer it.
        s.sendall(framed(header(API_VERSIONS, version, 77, flexible=True) + b"\x03\x01\x02\x03\x00"))
        body = read_response(s)
        # Response header v0: just the correlation id, no tagged-field byte.
        assert struct.unpack_from(">i", body)[0] == 77
        resp = ApiVersionsResponse.decode(body[4:], version=0)
        assert resp.error_code == UNSUPPORTED_VERSION
        ranges = {k.api_key: (k.min_version, k.max_version) for k in resp.api_keys}
        assert ranges == EXPECTED_RANGES
        # The body is exactly a v0 body: int16 error, int32 count, 6 bytes per key.
        assert len(body) == 4 + 2 + 4 + 6 * len(EXPECTED_RANGES)
        # The connection stays open: the client retries with a version we know.
        check_api_versions(s, 78)
        watch.none()


UNDECODABLE = {
    # Metadata v1: an array of 5 topic names, then nothing.
    "metadata-v1-missing-array": (METADATA, 1, False, b"\x00\x00\x00\x05"),
    # Metadata v1: one topic name claiming 30000 bytes, only 12 present. Kafka's reader throws
    # (BufferUnderflowException); a lenient decoder reads "zz-truncated" and auto-creates it.
    "metadata-v1-string-past-end": (METADATA, 1, False, b"\x00\x00\x00\x01\x75\x30zz-truncated"),
    # Metadata v12 (flexible): a compact array length varint that never ends.
    "metadata-v12-endless-varint": (METADATA, 12, True, b"\xff\xff\xff\xff\xff\xff"),
    # CreateTopics v7: three bytes of nonsense.
    "createtopics-v7-nonsense": (CREATE_TOPICS, 7, True, b"\xff\xff\xff"),
    # CreateTopics v3: an array of 2 topics, then one byte.
    "createtopics-v3-truncated": (CREATE_TOPICS, 3, False, b"\x00\x00\x00\x02\x00"),
}


@pytest.mark.parametrize("case", sorted(UNDECODABLE))
def test_undecodable_body_closes_connection(srv, case):
    api_key, version, flexible, body = UNDECODABLE[case]
    with connect(srv) as s:
        watch = LogWatch(srv, s)
        s.sendall(framed(header(api_key, version, 11, flexible=flexible) + body))
        assert_closed(s)
        watch.exactly_one()
    assert_healthy(srv)
    if case == "metadata-v1-string-past-end":
        admin = KafkaAdminClient(bootstrap_servers=srv.bootstrap, request_timeout_ms=5000,
                                 bootstrap_timeout_ms=5000)
        try:
            assert "zz-truncated" not in admin.list_topics(), "a malformed request created a topic"
        finally:
            admin.close()


def test_bad_request_after_good_ones_still_answers_the_good_ones(srv):
    """Responses already due go out before the connection is closed for a bad request."""
    with connect(srv) as s:
        watch = LogWatch(srv, s)
        s.sendall(api_versions_v0(1) + metadata_request(2, 1) + framed(header(999, 0, 3)))
        assert struct.unpack_from(">i", read_response(s))[0] == 1
        assert struct.unpack_from(">i", read_response(s))[0] == 2
        assert_closed(s)
        watch.exactly_one("999")


def test_pipelined_requests_answered_in_order(srv):
    """50 ApiVersions and Metadata requests (every version) written in one send come back in
    request order, each decodable with its own version."""
    sent: list[tuple[int, int, int]] = []  # (correlation id, api key, version)
    payload = bytearray()
    for i in range(50):
        corr = 1000 + i
        if i % 2 == 0:
            version = (i // 2) % 5
            # ApiVersions v3+ is flexible; v0 framing works for every version's empty-ish body.
            if version >= 3:
                body = b"\x04raw\x021\x00"  # client_software_name "raw", version "1", no tags
                payload += framed(header(API_VERSIONS, version, corr, flexible=True) + body)
            else:
                payload += framed(header(API_VERSIONS, version, corr))
            sent.append((corr, API_VERSIONS, version))
        else:
            version = (i // 2) % 13
            payload += metadata_request(corr, version)
            sent.append((corr, METADATA, version))
    with connect(srv) as s:
        watch = LogWatch(srv, s)
        s.sendall(payload)
        got = []
        for _corr, api_key, version in sent:
            body = read_response(s)
            got.append(struct.unpack_from(">i", body)[0])
            if api_key == API_VERSIONS:
                resp = ApiVersionsResponse.decode(body[4:], version=version)
                assert resp.error_code == 0
            else:
                offset = 5 if version >= 9 else 4  # response header v1 has a tagged-field byte
                resp = MetadataResponse.decode(body[offset:], version=version)
                assert [b.node_id for b in resp.brokers] == [1]
                assert any(t.name == "__consumer_offsets" for t in resp.topics)
        assert got == [c for c, _, _ in sent]
        watch.none()
