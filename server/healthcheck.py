"""The container's health check: one real ApiVersions exchange with the server, what every Kafka
client sends first (a listening socket alone is not health).

    python3 -m kcoord.server.healthcheck [HOST:PORT] [--tls]

Exit 0 when the server answered ApiVersions v0 without error and listed ApiVersions among its
APIs, 1 otherwise (the reason on stderr). HOST:PORT defaults to $KCOORD_HEALTHCHECK_ADDRESS or
127.0.0.1:9092; --tls (or $KCOORD_HEALTHCHECK_TLS=1) speaks TLS without verifying the
certificate (ApiVersions needs no SASL authentication first, so a SASL_SSL listener answers it).
Standard library only: it starts in milliseconds.
"""
from __future__ import annotations

import os
import socket
import struct
import sys

API_VERSIONS = 18
CORRELATION_ID = 0x6B636F6F


def request() -> bytes:
    client_id = b"kcoord-healthcheck"
    body = struct.pack(">hhih", API_VERSIONS, 0, CORRELATION_ID, len(client_id)) + client_id
    return struct.pack(">i", len(body)) + body


def read_exactly(sock: socket.socket, n: int) -> bytes:
    out = b""
    while len(out) < n:
        chunk = sock.recv(n - len(out))
        if not chunk:
            raise ConnectionError("the server closed the connection")
        out += chunk
    return out


def check(host: str, port: int, tls: bool = False, timeout: float = 5.0) -> None:
    """Raises (OSError, ValueError) unless the server answers ApiVersions."""
    with socket.create_connection((host, port), timeout) as raw:
        sock = raw
        if tls:
            import ssl

            ctx = ssl.create_default_context()
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
            sock = ctx.wrap_socket(raw, server_hostname=host)
        sock.sendall(request())
        (size,) = struct.unpack(">i", read_exactly(sock, 4))
        if not 10 <= size <= 1 << 20:
            raise ValueError(f"an answer of {size} bytes is not ApiVersions v0")
        payload = read_exactly(sock, size)
        correlation, error, count = struct.unpack(">ihi", payload[:10])
        if correlation != CORRELATION_ID:
            raise ValueError(f"correlation id {correlation} answered, {CORRELATION_ID} sent")
        if error != 0:
            raise ValueError(f"ApiVersions answered error code {error}")
        keys = {struct.unpack(">h", payload[10 + 6 * i: 12 + 6 * i])[0] for i in range(count)}
        if API_VERSIONS not in keys:
            raise ValueError("ApiVersions is not among the APIs the server lists")


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    tls = "--tls" in args or os.environ.get("KCOORD_HEALTHCHECK_TLS") == "1"
    args = [a for a in args if a != "--tls"]
    address = args[0] if args else os.environ.get("KCOORD_HEALTHCHECK_ADDRESS", "127.0.0.1:9092")
    host, _, port = address.rpartition(":")
    try:
        check(host or "127.0.0.1", int(port), tls)
    except (OSError, ValueError) as e:
        print(f"unhealthy: {address}: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
