"""TLS for a Kafka connection, in the connection's own terms: a raw-socket protocol that runs
the handshake and then hands decrypted bytes to the Kafka protocol, and a transport the Kafka
protocol writes plaintext to.

Why not create_server(ssl=...): a Kafka connection is strictly request/response with small
messages, so the general machinery (asyncio's or uvloop's SSLProtocol: flow-control state
machine, buffer juggling, an extra protocol hop each way) costs as much per heartbeat as the
heartbeat itself. Here each request is one OpenSSL read and each response one OpenSSL write. It
also lets a failed handshake be answered with its TLS alert (unknown CA, certificate required)
and logged once with the client's address, as Kafka does.

Why the socket writes wait for the end of the loop iteration (WriteBatch): OpenSSL's record
path is long, and run between two socket sends (the loopback send runs the receiver's TCP path
too) it starts cold every time. Measured with 100 busy connections, a send per answer made a
TLS heartbeat cost the server ~50 µs of CPU against ~10 µs in process; encrypting every answer
of the iteration first and sending them afterwards halved it (bench/bench_security.py).
"""
from __future__ import annotations

import asyncio
import logging
import ssl
from collections.abc import Callable
from typing import Any

log = logging.getLogger("kcoord.network")

# One TLS record carries at most 16 KiB of plaintext, so one read never returns more. Reads go
# into one preallocated buffer (the event loop is single-threaded and the bytes are copied out at
# once): asking OpenSSL for a fresh large bytes object per read costs an mmap and munmap each.
_RECORD = 16384
_BUFFER = bytearray(_RECORD)
_VIEW = memoryview(_BUFFER)
_WantRead = ssl.SSLWantReadError
_ZeroReturn = ssl.SSLZeroReturnError


class WriteBatch:
    """The TLS connections of one listener with encrypted answers not yet sent: sent together
    once the event loop has run this iteration's callbacks (one call_soon per iteration)."""

    def __init__(self) -> None:
        self._waiting: list[TlsProtocol] = []

    def add(self, tls: TlsProtocol) -> None:
        tls.queued = True
        self._waiting.append(tls)
        if len(self._waiting) == 1:
            tls.loop.call_soon(self.send)

    def send(self) -> None:
        waiting, self._waiting = self._waiting, []
        for tls in waiting:
            tls.queued = False
            if tls.closed:
                continue
            try:
                tls.flush()
            except Exception:  # noqa: BLE001 - one connection's failure must not keep the others' answers
                log.exception("Sending to /%s failed; closing the connection", tls.peer)
                tls.abort()


class TlsTransport(asyncio.Transport):
    """What the Kafka protocol writes to: plaintext in, TLS records out on the socket."""

    def __init__(self, tls: TlsProtocol) -> None:
        super().__init__()
        self._tls = tls

    def write(self, data: bytes | bytearray | memoryview) -> None:
        tls = self._tls
        if tls.closed:
            return
        tls.sslobj.write(data)  # encrypted now, in order with anything written later
        if not tls.queued:
            tls.batch.add(tls)

    def writelines(self, list_of_data: Any) -> None:
        self.write(b"".join(list_of_data))

    def close(self) -> None:
        self._tls.close()

    def abort(self) -> None:
        self._tls.abort()

    def is_closing(self) -> bool:
        return self._tls.closed

    def pause_reading(self) -> None:
        self._tls.raw.pause_reading()  # type: ignore[attr-defined]

    def resume_reading(self) -> None:
        self._tls.raw.resume_reading()  # type: ignore[attr-defined]

    def is_reading(self) -> bool:
        return self._tls.raw.is_reading()  # type: ignore[attr-defined]

    def get_write_buffer_size(self) -> int:
        return self._tls.raw.get_write_buffer_size() + self._tls.outgoing.pending  # type: ignore[attr-defined]

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        self._tls.raw.set_write_buffer_limits(high, low)  # type: ignore[attr-defined]

    def can_write_eof(self) -> bool:
        return False

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        if name == "ssl_object":
            return self._tls.sslobj
        if name == "sslcontext":
            return self._tls.ctx
        if name == "cipher":
            return self._tls.sslobj.cipher()
        if name == "peercert":
            return self._tls.sslobj.getpeercert()
        return self._tls.raw.get_extra_info(name, default)


class TlsProtocol(asyncio.Protocol):
    """The raw socket's protocol: handshake, then decrypt into the Kafka protocol `app`."""

    def __init__(self, ctx: ssl.SSLContext, app: asyncio.Protocol, handshake_timeout: float = 60.0,
                 batch: WriteBatch | None = None) -> None:
        self.ctx = ctx
        self.app = app
        self.batch = batch if batch is not None else WriteBatch()
        self.queued = False  # in `batch`, waiting to send
        self.loop: asyncio.AbstractEventLoop = None  # type: ignore[assignment]
        self.incoming = ssl.MemoryBIO()
        self.outgoing = ssl.MemoryBIO()
        self.sslobj = ctx.wrap_bio(self.incoming, self.outgoing, server_side=True)
        self.raw: asyncio.Transport = None  # type: ignore[assignment]
        self.peer = "?"
        self.handshaken = False
        self.closed = False
        self._timeout = handshake_timeout
        self._timer: asyncio.TimerHandle | None = None
        self._app_transport: TlsTransport | None = None

    # raw side

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.raw = transport  # type: ignore[assignment]
        self.loop = asyncio.get_running_loop()
        peer = transport.get_extra_info("peername")
        if peer:
            self.peer = f"{peer[0]}:{peer[1]}"
        self._timer = self.loop.call_later(self._timeout, self._handshake_timed_out)

    def data_received(self, data: bytes) -> None:
        if self.closed:
            return
        self.incoming.write(data)
        if not self.handshaken:
            if not self._handshake():
                return
        parts: list[bytes] = []
        notified = False  # the client's close_notify was read
        failure: ssl.SSLError | None = None
        while True:
            try:
                n = self.sslobj.read(_RECORD, _BUFFER)
            except _WantRead:
                break
            except _ZeroReturn:
                notified = True
                break
            except ssl.SSLError as e:
                failure = e
                break
            if not n:  # OpenSSL's read gives 0 bytes, not SSLZeroReturnError, for close_notify
                notified = True
                break
            parts.append(_VIEW[:n].tobytes())
            if not self.incoming.pending:  # the usual case: one record, one read
                break
        if self.outgoing.pending and not self.queued and failure is None:  # OpenSSL's own answer (a key update)
            self.flush()
        if parts:
            self.app.data_received(parts[0] if len(parts) == 1 else b"".join(parts))
        if failure is not None:
            if not self.closed:
                log.info("TLS error on the connection from /%s: %s", self.peer, failure.reason or failure)
                self.abort()
        elif notified:
            self.close()  # what waits in the batch, our close_notify, then the socket (Kafka's answer)

    def _handshake(self) -> bool:
        try:
            self.sslobj.do_handshake()
        except _WantRead:
            self.flush()
            return False
        except ssl.SSLError as e:
            self.flush()  # the alert that says why (unknown CA, certificate required, ...)
            # Kafka's Selector: "Failed authentication with /127.0.0.1 (SSL handshake failed)"
            log.info("Failed authentication with /%s (SSL handshake failed: %s)", self.peer, e.reason or e)
            self.abort(graceful=True)
            return False
        self.handshaken = True
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self.flush()  # the server's last flight, session tickets
        self._app_transport = TlsTransport(self)
        self.app.connection_made(self._app_transport)
        return not self.closed

    def _handshake_timed_out(self) -> None:
        self._timer = None
        if not self.handshaken and not self.closed:
            log.info("TLS handshake with /%s timed out", self.peer)
            self.abort()

    def flush(self) -> None:
        """What OpenSSL has written (answers, alerts, handshake flights) onto the socket."""
        if self.outgoing.pending and self.raw is not None:
            self.raw.write(self.outgoing.read())

    def eof_received(self) -> bool | None:
        if self.handshaken:
            self.app.eof_received()
        return None

    def pause_writing(self) -> None:
        if self.handshaken:
            self.app.pause_writing()

    def resume_writing(self) -> None:
        if self.handshaken:
            self.app.resume_writing()

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self.handshaken:
            self.app.connection_lost(exc)
        elif exc is not None and not isinstance(exc, ConnectionError | OSError):
            log.debug("TLS connection from /%s lost before its handshake: %r", self.peer, exc)

    # closing

    def close(self) -> None:
        """close_notify, then the socket (after what was written)."""
        if self.closed:
            return
        self.closed = True
        try:
            self.sslobj.unwrap()
        except (ssl.SSLError, ValueError, OSError):
            pass  # the client's close_notify never comes: not waited for
        self.flush()
        self.raw.close()

    def abort(self, graceful: bool = False) -> None:
        self.closed = True
        if graceful:
            self.raw.close()  # what was written (the alert) still goes out
        else:
            self.raw.abort()


def tls_protocol_factory(ctx: ssl.SSLContext,
                         app_factory: Callable[[], asyncio.Protocol]) -> Callable[[], asyncio.Protocol]:
    """For loop.create_server: the TLS handshake first, then `app_factory`'s protocol; the
    listener's connections send their answers in one batch per loop iteration."""
    batch = WriteBatch()
    return lambda: TlsProtocol(ctx, app_factory(), batch=batch)
