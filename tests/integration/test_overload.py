"""Overload: connection limits with Kafka's names, and a client that never reads its responses
cannot make the server buffer without bound while others keep being served."""
from __future__ import annotations

import resource
import socket
import struct
import time

from conftest import KcoordProcess


def api_versions(correlation_id: int) -> bytes:
    payload = struct.pack(">hhih", 18, 0, correlation_id, 3) + b"ovl"
    return struct.pack(">i", len(payload)) + payload


def answered(s: socket.socket, correlation_id: int = 1) -> bool:
    s.sendall(api_versions(correlation_id))
    s.settimeout(30)  # a refused connection is closed at once; an answer may be slow on a busy machine
    try:
        head = s.recv(8)
    except OSError:
        return False
    return len(head) == 8 and struct.unpack(">i", head[4:8])[0] == correlation_id


def rss_mb(srv: KcoordProcess) -> float:
    for line in open(f"/proc/{srv.proc.pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


def test_max_connections_per_ip(kcoord_factory):
    srv = kcoord_factory({"max.connections.per.ip": "3"})
    held = [socket.create_connection(("127.0.0.1", srv.port)) for _ in range(3)]
    assert all(answered(s) for s in held)
    extra = socket.create_connection(("127.0.0.1", srv.port))
    assert not answered(extra)  # closed at once
    assert "Rejected connection from 127.0.0.1" in srv.log_text()
    held.pop().close()
    # A free slot once the server has seen the close (when, depends on the machine's load).
    deadline = time.monotonic() + 30
    while True:
        again = socket.create_connection(("127.0.0.1", srv.port))
        if answered(again):
            break
        again.close()
        assert time.monotonic() < deadline, "the closed connection's slot never came back"
        time.sleep(0.1)
    for s in [*held, extra, again]:
        s.close()


def test_max_connections(kcoord_factory):
    srv = kcoord_factory({"max.connections": "2"})
    a, b = (socket.create_connection(("127.0.0.1", srv.port)) for _ in range(2))
    assert answered(a) and answered(b)
    c = socket.create_connection(("127.0.0.1", srv.port))
    assert not answered(c)
    for s in (a, b, c):
        s.close()


def test_a_client_that_never_reads_is_throttled_not_buffered(kcoord_factory):
    srv = kcoord_factory({"queued.max.requests": "100"})
    base = rss_mb(srv)
    hog = socket.create_connection(("127.0.0.1", srv.port))
    hog.setblocking(False)
    chunk = b"".join(api_versions(i) for i in range(1000))  # 17 KB of requests, 122 KB of answers
    sent = 0
    last_progress = time.monotonic()
    deadline = last_progress + 15
    while time.monotonic() < deadline and time.monotonic() - last_progress < 1.0:
        try:
            sent += hog.send(chunk)
            last_progress = time.monotonic()
        except BlockingIOError:
            time.sleep(0.01)
    # The server stopped reading us (kernel socket buffers hold a few MB); had it kept reading
    # and answering into memory, 15 s of this would be gigabytes of answers.
    assert time.monotonic() - last_progress >= 1.0, "the server kept reading a client that never reads"
    assert sent < 50_000_000, sent
    healthy = socket.create_connection(("127.0.0.1", srv.port))
    assert answered(healthy, 7), "another client must still be served"
    assert rss_mb(srv) - base < 60, f"RSS grew from {base:.0f} to {rss_mb(srv):.0f} MB"
    hog.close()
    healthy.close()
    assert srv.alive()


def test_five_thousand_concurrent_connections(kcoord):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(hard, 20000)), hard))
    base = rss_mb(kcoord)
    conns = []
    try:
        for _ in range(5000):
            conns.append(socket.create_connection(("127.0.0.1", kcoord.port), timeout=60))
        for i, s in enumerate(conns):
            s.sendall(api_versions(i))
        for i, s in enumerate(conns):
            head = s.recv(8)
            assert len(head) == 8 and struct.unpack(">i", head[4:8])[0] == i, i
        assert kcoord.alive()
        assert rss_mb(kcoord) - base < 200, f"RSS grew from {base:.0f} to {rss_mb(kcoord):.0f} MB"
    finally:
        for s in conns:
            s.close()
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
