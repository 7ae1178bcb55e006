"""One client connection: frames in, responses out, strictly in request order.

Like Kafka's SocketServer, a connection has at most one request being processed; requests
that arrive meanwhile (pipelining) wait in a queue, so a parked JoinGroup holds the
connection's later requests. Synchronous handlers are answered inline, and the responses to
a burst of pipelined requests leave in one write.
"""
from __future__ import annotations

import asyncio
import logging
from collections import deque
from typing import TYPE_CHECKING

from protocol.framing import FrameDecoder, FrameTooLarge
from server.deferred import Deferred
from server.dispatch import CloseConnection, Dispatcher

if TYPE_CHECKING:
    from server.broker import Broker

log = logging.getLogger("kcoord.network")

_MAX_QUEUED = 1000  # stop reading when this many requests wait behind a parked one


class KafkaConnection(asyncio.Protocol):
    def __init__(self, broker: Broker, dispatcher: Dispatcher, max_request_bytes: int) -> None:
        self._broker = broker
        self._dispatcher = dispatcher
        self._decoder = FrameDecoder(max_request_bytes)
        self._queue: deque[bytes] = deque()
        self._waiting: Deferred[bytes | None] | None = None
        self._transport: asyncio.Transport | None = None
        self._peer = "?"
        self._host = ""
        self._reading_paused = False
        self._closed = False

    # asyncio.Protocol

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport  # type: ignore[assignment]
        peer = transport.get_extra_info("peername")
        if peer:
            self._host = str(peer[0])
            self._peer = f"{peer[0]}:{peer[1]}"
        self._broker.connections.add(self)

    def connection_lost(self, exc: Exception | None) -> None:
        self._closed = True
        self._queue.clear()
        self._broker.connections.discard(self)

    def data_received(self, data: bytes) -> None:
        try:
            frames = self._decoder.feed(data)
        except FrameTooLarge as e:
            self._close(f"{e}")
            return
        if frames:
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

    def _pump(self) -> None:
        out: list[bytes] = []
        transport = self._transport
        while self._queue and self._waiting is None and not self._closed:
            frame = self._queue.popleft()
            try:
                result = self._dispatcher.handle(frame, self._host)
            except CloseConnection as e:
                self._flush(out)
                self._close(str(e))
                return
            except Exception as e:  # noqa: BLE001 - a handler bug must not take the server down
                log.exception("Unexpected error serving %s; closing the connection", self._peer)
                self._flush(out)
                self._close(f"internal error {e!r}")
                return
            if result is None:
                continue
            if isinstance(result, Deferred):
                if result.done:
                    if not self._emit(result.result(), out):
                        return
                    continue
                self._waiting = result
                result.add_callback(self._on_deferred)
                break
            out.append(result)
        self._flush(out)
        if transport is not None:
            if len(self._queue) > _MAX_QUEUED and not self._reading_paused:
                self._reading_paused = True
                transport.pause_reading()
            elif self._reading_paused and len(self._queue) < _MAX_QUEUED // 2:
                self._reading_paused = False
                transport.resume_reading()

    def _emit(self, value: object, out: list[bytes]) -> bool:
        if isinstance(value, CloseConnection):
            self._flush(out)
            self._close(str(value))
            return False
        if value is not None:
            out.append(value)  # type: ignore[arg-type]
        return True

    def _on_deferred(self, value: bytes | None) -> None:
        self._waiting = None
        if self._closed:
            return
        out: list[bytes] = []
        if self._emit(value, out):
            self._flush(out)
            self._pump()

    def _flush(self, out: list[bytes]) -> None:
        if out and self._transport is not None and not self._closed:
            self._transport.write(out[0] if len(out) == 1 else b"".join(out))

    def _close(self, reason: str) -> None:
        if self._closed:
            return
        log.warning("Closing connection from %s: %s", self._peer, reason)
        self._closed = True
        self._queue.clear()
        if self._transport is not None:
            self._transport.close()

    def close(self) -> None:
        if self._transport is not None and not self._closed:
            self._closed = True
            self._transport.close()
