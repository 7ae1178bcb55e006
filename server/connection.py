"""One client connection: frames in, responses out, strictly in request order.

Like Kafka's SocketServer, a connection has at most one request being processed; requests
that arrive meanwhile (pipelining) wait in a queue, so a parked JoinGroup holds the
connection's later requests. Synchronous handlers are answered inline, and the responses to
a burst of pipelined requests leave in one write.

Memory stays bounded per connection: reading stops while queued.max.requests requests wait,
and while the client does not read its responses (the transport's write buffer is above its
high-water mark); max.connections and max.connections.per.ip refuse connections beyond them.
"""
from __future__ import annotations

import asyncio
import itertools
import logging
import time
from collections import deque
from typing import TYPE_CHECKING, Any

from kcoord.protocol.framing import FrameDecoder, FrameTooLarge
from kcoord.server.deferred import Deferred
from kcoord.server.dispatch import CloseConnection, Dispatcher
from kcoord.server.session import Session

if TYPE_CHECKING:
    from kcoord.server.connections import Connections
    from kcoord.server.listeners import Listener
    from kcoord.server.security.sasl import ExpiredSession, Reauthentication, SaslAuthenticator

log = logging.getLogger("kcoord.network")

_CLOSE_LINGER_SECONDS = 0.05
_ids = itertools.count(1)


class KafkaConnection(asyncio.Protocol):
    # muted for a quota's throttle time (KIP-219): no request is read or served until then.
    # Class defaults: a connection that is never muted keeps the instance attributes it had
    # before quotas (the hot path's attribute lookups stay as they were).
    _muted = False
    _muted_until = 0.0
    _mute_timer: asyncio.TimerHandle | None = None

    def __init__(self, connections: Connections, dispatcher: Dispatcher, max_request_bytes: int,
                 max_queued: int = 500, listener: Listener | None = None, hook: Any = None) -> None:
        self._connections = connections  # admits and releases this connection (server/connections.py)
        self._listener = listener
        self.session = Session(listener, "")
        self._dispatcher = dispatcher
        self._decoder = FrameDecoder(max_request_bytes)
        self._max_queued = max_queued
        self._queue: deque[bytes] = deque()
        self._waiting: Deferred[bytes | None] | None = None
        self._transport: asyncio.Transport | None = None
        self._peer = "?"
        self._host = ""
        self._reading_paused = False
        self._writing_paused = False
        self._accepted = False
        self._closed = False
        self._answered = self._on_deferred  # one bound method for every parked request
        # Frames go to the gate instead of the dispatcher while it is set: a SASL connection
        # that is (re-)authenticating, or whose session expired.
        self._gate: SaslAuthenticator | ExpiredSession | None = None
        self._max_request_bytes = max_request_bytes
        self._expiry: asyncio.TimerHandle | None = None
        self._reauth_started = 0.0
        self._lifetime_ms = 0  # of the current SASL session; > 0 allows re-authentication
        self.id = next(_ids)  # names the connection to the control API (server/control/)
        self.client_id: str | None = None  # the last one its requests carried, once the control API saw one
        self._stalled = False
        self.session.mute = self._mute
        # (connection, frame) -> what _answer returns, or None: the control API's interception
        # of this connection's requests; None when it intercepts nothing (one test per request)
        self.hook: Any = hook

    # asyncio.Protocol

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport  # type: ignore[assignment]
        peer = transport.get_extra_info("peername")
        if peer:
            self._host = str(peer[0])
            self._peer = f"{peer[0]}:{peer[1]}"
            self.session.host = self._host
            self.session.port = int(peer[1])
        refused = self._connections.admit(self)
        if refused:
            log.warning("Rejected connection from %s: %s", self._peer, refused)
            self._closed = True
            transport.close()
            return
        self._accepted = True
        listener = self._listener
        if listener is None:
            return
        if listener.sasl is not None:
            self._gate = self._authenticator()
            self._decoder.limit = listener.sasl.max_receive_size
            self.session.reauthenticate = self._reauthenticate
        elif listener.ssl_context is not None:
            self._authenticate_certificate(transport)

    # SASL

    def _authenticator(self, reauth: Reauthentication | None = None) -> SaslAuthenticator:
        from kcoord.server.security.sasl import SaslAuthenticator  # SASL listeners only

        assert self._listener is not None and self._listener.sasl is not None
        return SaslAuthenticator(self._listener.sasl, self.session,
                                 lambda frame: self._dispatcher.handle(frame, self.session),
                                 self._authenticated, reauth)

    def _authenticated(self, principal: str, mechanism: str, lifetime_ms: int) -> None:
        session = self.session
        session.principal = principal
        session.mechanism = mechanism
        self._gate = None
        self._decoder.limit = self._max_request_bytes
        if self._expiry is not None:
            self._expiry.cancel()
            self._expiry = None
        self._lifetime_ms = lifetime_ms
        if lifetime_ms > 0:
            self._expiry = asyncio.get_running_loop().call_later(lifetime_ms / 1000, self._session_expired)

    def _session_expired(self) -> None:
        self._expiry = None
        if not self._closed and self._gate is None:
            from kcoord.server.security.sasl import ExpiredSession

            self._gate = ExpiredSession(self.session, lambda frame: self._dispatcher.handle(frame, self.session))

    def _reauthenticate(self, mechanism: str, version: int) -> object | None:
        """KIP-368: the SaslHandshake of an authenticated connection starts a re-authentication
        when its session has a lifetime, at most once a second; its response, or None."""
        now = time.monotonic()
        if self._listener is None or self._listener.sasl is None or self.session.mechanism is None:
            return None
        if self._lifetime_ms <= 0 or (self._reauth_started and now - self._reauth_started < 1.0):
            return None
        self._reauth_started = now
        from kcoord.server.security.sasl import Reauthentication

        gate = self._authenticator(Reauthentication(self.session.mechanism, self.session.principal))
        response = gate.start_reauthentication(mechanism, version)
        self._gate = gate
        return response

    def _authenticate_certificate(self, transport: asyncio.BaseTransport) -> None:
        """SSL listeners: the principal is the client certificate's subject, mapped through
        ssl.principal.mapping.rules (User:ANONYMOUS without one)."""
        from kcoord.server.security.principal import ssl_principal

        sslobj = transport.get_extra_info("ssl_object")
        try:
            der = sslobj.getpeercert(binary_form=True) if sslobj is not None else None
            self.session.principal = ssl_principal(der, self._listener.principal_mapper)  # type: ignore[union-attr]
        except ValueError as e:  # no mapping rule matched, an unreadable certificate
            log.info("Failed authentication with /%s (%s)", self._peer, e)
            self._closed = True
            transport.close()

    def connection_lost(self, exc: Exception | None) -> None:
        self._closed = True
        self._queue.clear()
        if self._mute_timer is not None:
            self._mute_timer.cancel()
            self._mute_timer = None
        if self._expiry is not None:
            self._expiry.cancel()
            self._expiry = None
        if self._accepted:
            self._connections.release(self)

    def pause_writing(self) -> None:
        # The client is not reading its responses: stop taking requests until it does.
        self._writing_paused = True
        self._update_reading()

    def resume_writing(self) -> None:
        self._writing_paused = False
        self._update_reading()
        self._pump()

    def data_received(self, data: bytes) -> None:
        try:
            frames = self._decoder.feed(data)
        except FrameTooLarge as e:
            authenticating = False
            if self._gate is not None:  # a SASL listener's connection: kcoord.server.security.sasl is loaded
                from kcoord.server.security.sasl import SaslAuthenticator

                authenticating = isinstance(self._gate, SaslAuthenticator)
            if authenticating:
                log.info("Failed authentication with /%s (Failing SASL authentication due to invalid receive "
                         "size %d > sasl.server.max.receive.size=%d)", self._peer, e.size, e.limit)
                self._close("", quiet=True)
            else:
                self._close(f"{e}")
            return
        if not frames:
            return
        if (len(frames) == 1 and not self._queue and self._waiting is None and not self._closed
                and not self._writing_paused):
            # The common case: one request on an idle connection, answered right away.
            result = self._answer(frames[0])
            if type(result) is bytes:
                self._transport.write(result)  # type: ignore[union-attr]
            elif result is not None:
                out: list[bytes] = []
                if self._settle(result, out):
                    self._flush(out)
            return
        self._queue.extend(frames)
        self._pump()

    def eof_received(self) -> bool | None:
        if self._decoder.buffered:
            log.info("Connection from %s closed with %d bytes of a partial request", self._peer,
                     self._decoder.buffered)
        return None

    # request processing

    @property
    def busy(self) -> bool:
        return self._waiting is not None or bool(self._queue)

    @property
    def host(self) -> str:
        return self._host

    def _pump(self, out: list[bytes] | None = None) -> None:
        """Serve queued requests until one parks; their answers (after those in `out`) leave
        in one write."""
        if out is None:
            out = []
        queue = self._queue
        while queue and self._waiting is None and not self._closed and not self._writing_paused and not self._muted:
            if not self._serve(queue.popleft(), out):
                return
        self._flush(out)
        self._update_reading()

    def _answer(self, frame: bytes) -> bytes | Deferred[bytes | None] | CloseConnection | None:
        """The dispatcher's answer to one request; a CloseConnection (returned, not raised)
        when the connection must close after what was answered before it."""
        try:
            gate = self._gate  # authentication comes before anything else sees the request
            if gate is not None:
                return gate.handle(frame)
            hook = self.hook
            if hook is not None:
                return hook(self, frame)
            return self._dispatcher.handle(frame, self.session)
        except CloseConnection as e:
            return e
        except Exception as e:  # noqa: BLE001 - a handler bug must not take the server down
            log.exception("Unexpected error serving %s; closing the connection", self._peer)
            return CloseConnection(f"internal error {e!r}")

    def _serve(self, frame: bytes, out: list[bytes]) -> bool:
        """Answer one request into `out`, or park the connection on its Deferred. False once
        the connection is closed (after writing what `out` held)."""
        result = self._answer(frame)
        if type(result) is bytes:
            out.append(result)
            return True
        return result is None or self._settle(result, out)

    def _settle(self, result: Deferred[bytes | None] | CloseConnection, out: list[bytes]) -> bool:
        """A refusal closes the connection; a Deferred answer goes to `out` if it is already
        there, else the connection waits for it. False once the connection is closed."""
        if isinstance(result, CloseConnection):
            return self._emit(result, out)
        if result.done:  # answered while it was being handled
            return self._emit(result.result(), out)
        self._waiting = result
        result.add_callback(self._answered)
        return True

    def _update_reading(self) -> None:
        transport = self._transport
        if transport is None or self._closed or self._stalled:
            return
        stop = self._writing_paused or len(self._queue) >= self._max_queued or self._muted
        if stop and not self._reading_paused:
            self._reading_paused = True
            transport.pause_reading()
        elif not stop and self._reading_paused:
            self._reading_paused = False
            transport.resume_reading()

    def _emit(self, value: object, out: list[bytes]) -> bool:
        if isinstance(value, CloseConnection):
            if value.final is not None:
                out.append(value.final)
                self._flush(out)
                self._close_after_answer(str(value), quiet=value.quiet)
                return False
            self._flush(out)
            self._close(str(value), quiet=value.quiet)
            return False
        if value is not None:
            out.append(value)  # type: ignore[arg-type]
        return True

    def _on_deferred(self, value: bytes | None) -> None:
        self._waiting = None
        if self._closed:
            return
        if type(value) is bytes and not self._queue:
            # The usual end of a parked request (a durable commit): nothing waits behind it,
            # so reading needs no change either.
            self._transport.write(value)  # type: ignore[union-attr]
            return
        out: list[bytes] = []
        if self._emit(value, out):
            self._pump(out)

    def _flush(self, out: list[bytes]) -> None:
        if out and self._transport is not None and not self._closed:
            self._transport.write(out[0] if len(out) == 1 else b"".join(out))

    def _close(self, reason: str, quiet: bool = False) -> None:
        if self._closed:
            return
        if not quiet:
            log.warning("Closing connection from %s: %s", self._peer, reason)
        self._closed = True
        self._queue.clear()
        if self._transport is not None:
            self._transport.close()

    def _close_after_answer(self, reason: str, quiet: bool = False) -> None:
        """Close shortly after a last answer (a failed authentication's): a client that reads
        the answer and the end of the connection in one go (kafka-python 3 then drops the
        answer) sees the answer first, and nothing it sent meanwhile turns the close into a
        reset that could destroy the answer in flight."""
        transport = self._transport
        self._closed = True
        self._queue.clear()
        if not quiet:
            log.warning("Closing connection from %s: %s", self._peer, reason)
        if transport is None:
            return
        try:
            transport.pause_reading()
        except (RuntimeError, AttributeError):
            pass
        asyncio.get_running_loop().call_later(_CLOSE_LINGER_SECONDS, transport.close)

    def close(self) -> None:
        if self._transport is not None and not self._closed:
            self._closed = True
            self._transport.close()

    # quotas (server/quotas/gate.py)

    def _mute(self, ms: int) -> None:
        """Read and serve no request for `ms` milliseconds (Kafka's throttled channel): the
        answer that set it leaves at once."""
        if self._closed or self._transport is None or ms <= 0:
            return
        until = time.monotonic() + ms / 1000
        if self._muted and self._muted_until >= until:
            return
        self._muted_until = until
        self._arm_unmute()
        if not self._muted:
            self._muted = True
            self._update_reading()

    def _arm_unmute(self) -> None:
        # the loop's clock is the time its iteration began, which can be well before now: the
        # timer is checked against the real clock when it fires
        if self._mute_timer is not None:
            self._mute_timer.cancel()
        delay = max(self._muted_until - time.monotonic(), 0.0)
        self._mute_timer = asyncio.get_running_loop().call_later(delay, self._unmute)

    def _unmute(self) -> None:
        self._mute_timer = None
        if time.monotonic() < self._muted_until - 0.0005:
            self._arm_unmute()
            return
        self._muted = False
        if not self._closed:
            self._update_reading()
            self._pump()

    # the control API (server/control/)

    @property
    def peer(self) -> str:
        return self._peer

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def local_port(self) -> int:
        """The listener port the client connected to."""
        sock = self._transport.get_extra_info("sockname") if self._transport is not None else None
        return int(sock[1]) if sock else 0

    @property
    def stalled(self) -> bool:
        return self._stalled

    def stall(self) -> None:
        """Stop reading requests without closing (a hung broker): the client's requests stay
        unanswered until unstall()."""
        if self._transport is not None and not self._closed and not self._stalled:
            self._stalled = True
            self._transport.pause_reading()

    def unstall(self) -> None:
        if self._stalled:
            self._stalled = False
            if self._transport is not None and not self._closed:
                self._reading_paused = True  # let _update_reading decide from the queue's state
                self._update_reading()
                self._pump()
