"""Server CPU per Fetch when nothing changed: an incremental fetch of an idle fetch session
(KIP-227) against a full (sessionless) fetch of the same N partitions, N = 10, 100, 1000, all at
their log end (max_wait_ms=0, so each is answered at once with nothing new; "parked 1 ms": the
same incremental fetch with max_wait_ms=1, parked in the fetch purgatory until it expires, as a
consumer's idle fetches are). The ceiling, in
the same run: an ApiVersions round trip, the least a request costs the server. Target: the idle
incremental fetch costs at most 3x an ApiVersions round trip, whatever N.

One connection sends one request at a time; the server's CPU time (all its threads) over the
requests is divided by their count.
"""
from __future__ import annotations

import socket
import struct

from _util import create_topic, encode_request, process_cpu_s, start_kcoord, stop, table
from kafka.protocol.consumer import FetchRequest, HeartbeatRequest
from kafka.protocol.metadata import ApiVersionsRequest

VERSION = 12
SIZES = (10, 100, 1000)


def fetch_req(topic: str, n: int, session_id: int, epoch: int, max_wait_ms: int = 0) -> FetchRequest:
    T = FetchRequest.FetchTopic
    P = T.FetchPartition
    parts = [P(partition=p, current_leader_epoch=-1, fetch_offset=0, last_fetched_epoch=-1, log_start_offset=-1,
               partition_max_bytes=1 << 20) for p in range(n)]
    return FetchRequest(version=VERSION, replica_id=-1, max_wait_ms=max_wait_ms, min_bytes=1, max_bytes=50 << 20,
                        isolation_level=0, session_id=session_id, session_epoch=epoch,
                        topics=[T(topic=topic, partitions=parts)] if parts else [], forgotten_topics_data=[],
                        rack_id="")


class Conn:
    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port))
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def round_trip(self, frame: bytes) -> bytes:
        self.sock.sendall(frame)
        size = struct.unpack(">i", self._read(4))[0]
        return self._read(size)

    def _read(self, n: int) -> bytes:
        buf = bytearray()
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise ConnectionError("closed")
            buf += chunk
        return bytes(buf)


def cpu_per_request(pid: int, conn: Conn, frames: list[bytes]) -> float:
    """Server CPU microseconds per request over `frames`, sent one at a time."""
    before = process_cpu_s(pid)
    for f in frames:
        conn.round_trip(f)
    return (process_cpu_s(pid) - before) / len(frames) * 1e6


def session_id_of(body: bytes) -> int:
    # response header v1: correlation id + tagged fields; then throttle, error code, session id
    _, error, sid = struct.unpack(">ihi", body[5:15])
    assert error == 0, error
    return sid


def main() -> None:
    proc, port, _ = start_kcoord()
    try:
        conn = Conn(port)
        api = [encode_request(ApiVersionsRequest(version=3, client_software_name="bench",
                                                 client_software_version="1"), 3, i) for i in range(3000)]
        cpu_per_request(proc.pid, conn, api[:300])  # warm-up
        api_us = cpu_per_request(proc.pid, conn, api)
        hb = [encode_request(HeartbeatRequest(group_id="no-such-group", generation_id=1, member_id="m",
                                              group_instance_id=None), 4, i) for i in range(3000)]
        cpu_per_request(proc.pid, conn, hb[:300])
        ceiling = cpu_per_request(proc.pid, conn, hb)
        rows = []
        for n in SIZES:
            topic = f"idle-{n}"
            create_topic(port, topic, n)
            full = [encode_request(fetch_req(topic, n, 0, -1), VERSION, i) for i in range(max(100, 30000 // n))]
            cpu_per_request(proc.pid, conn, full[:20])
            full_us = cpu_per_request(proc.pid, conn, full)
            sid = session_id_of(conn.round_trip(encode_request(fetch_req(topic, n, 0, 0), VERSION)))
            count = 3000
            incremental = [encode_request(fetch_req(topic, 0, sid, e), VERSION, e) for e in range(1, count + 1)]
            cpu_per_request(proc.pid, conn, incremental[:300])
            inc_us = cpu_per_request(proc.pid, conn, incremental[300:])
            parked = [encode_request(fetch_req(topic, 0, sid, e, max_wait_ms=1), VERSION, e)
                      for e in range(count + 1, count + 1001)]
            parked_us = cpu_per_request(proc.pid, conn, parked)
            rows.append([n, full_us, inc_us, parked_us, full_us / inc_us, inc_us / ceiling])
        print("Server CPU per request (µs), one connection, idle partitions at their log end")
        print(table(["partitions", "full fetch", "idle incremental", "parked 1 ms", "full / incremental",
                     "incremental / Heartbeat"], rows))
        print(f"ceiling: Heartbeat v4 round trip = {ceiling:.1f} µs of server CPU "
              f"(ApiVersions v3: {api_us:.1f} µs)")
        worst = max(r[5] for r in rows)
        print(f"target: idle incremental <= 3x Heartbeat at every N -> {'met' if worst <= 3 else 'NOT met'}")
    finally:
        stop(proc)


if __name__ == "__main__":
    main()
