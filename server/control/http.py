"""A small JSON-over-HTTP/1.1 server on the event loop, for the control API.

One request per connection (every answer says `Connection: close`), a JSON body of at most
1 MiB, JSON answers. What is not a well-formed request gets a 400 with a message; a route
raising BadRequest (or faults.BadRule) a 400, NotFound a 404. It shares the loop with the
Kafka listeners and never touches their connections.
"""
from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

log = logging.getLogger("kcoord.control")

MAX_HEAD = 16 * 1024
MAX_BODY = 1 << 20

# (method, path segments, query, JSON body or None) -> JSON-able answer
Handler = Callable[[str, list[str], dict[str, str], Any], Awaitable[tuple[int, Any]]]


class HttpError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


_REASONS = {200: "OK", 400: "Bad Request", 404: "Not Found", 405: "Method Not Allowed",
            409: "Conflict", 413: "Content Too Large", 500: "Internal Server Error",
            504: "Gateway Timeout"}


class _Conn(asyncio.Protocol):
    def __init__(self, handler: Handler) -> None:
        self.handler = handler
        self.buf = bytearray()
        self.transport: asyncio.Transport | None = None
        self.started = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        if self.started:
            return
        self.buf += data
        head_end = self.buf.find(b"\r\n\r\n")
        if head_end > MAX_HEAD or (head_end < 0 and len(self.buf) > MAX_HEAD):
            self._reply(400, {"error": f"request head larger than {MAX_HEAD} bytes"})
            return
        if head_end < 0:
            return
        try:
            method, target, length = _head(bytes(self.buf[:head_end]))
        except HttpError as e:
            self._reply(e.status, {"error": str(e)})
            return
        if len(self.buf) - head_end - 4 < length:
            return
        self.started = True
        body = bytes(self.buf[head_end + 4:head_end + 4 + length])
        asyncio.ensure_future(self._serve(method, target, body))

    def eof_received(self) -> bool | None:
        if not self.started and self.buf:
            self._reply(400, {"error": "incomplete request"})
        return None

    async def _serve(self, method: str, target: str, raw: bytes) -> None:
        try:
            parts = urlsplit(target)
            segments = [unquote(s) for s in parts.path.split("/") if s]
            query = dict(parse_qsl(parts.query, keep_blank_values=True))
            body: Any = None
            if raw.strip():
                try:
                    body = json.loads(raw)
                except (ValueError, UnicodeDecodeError) as e:
                    raise HttpError(400, f"the body is not JSON: {e}") from None
            status, answer = await self.handler(method, segments, query, body)
        except HttpError as e:
            status, answer = e.status, {"error": str(e)}
        except Exception as e:  # noqa: BLE001 - a bug answers 500 and is logged; the server goes on
            log.exception("Control API request %s %s failed", method, target)
            status, answer = 500, {"error": f"internal error: {e!r}"}
        self._reply(status, answer)

    def _reply(self, status: int, answer: Any) -> None:
        self.started = True
        if self.transport is None or self.transport.is_closing():
            return
        body = (json.dumps(answer, default=str) + "\n").encode()
        head = (f"HTTP/1.1 {status} {_REASONS.get(status, 'Error')}\r\nContent-Type: application/json\r\n"
                f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n").encode()
        self.transport.write(head + body)
        self.transport.close()


def _head(head: bytes) -> tuple[str, str, int]:
    try:
        text = head.decode("latin-1")
    except UnicodeDecodeError:  # pragma: no cover - latin-1 decodes anything
        raise HttpError(400, "undecodable request head") from None
    lines = text.split("\r\n")
    parts = lines[0].split(" ")
    if len(parts) != 3 or not parts[2].startswith("HTTP/1.") or not parts[1].startswith("/"):
        raise HttpError(400, f"not an HTTP/1.x request line: {lines[0][:100]!r}")
    length = 0
    for line in lines[1:]:
        name, sep, value = line.partition(":")
        if not sep:
            raise HttpError(400, f"malformed header line {line[:100]!r}")
        name = name.strip().lower()
        if name == "content-length":
            try:
                length = int(value.strip())
            except ValueError:
                raise HttpError(400, f"bad Content-Length {value.strip()!r}") from None
            if length < 0:
                raise HttpError(400, "negative Content-Length")
            if length > MAX_BODY:
                raise HttpError(413, f"a control request body is at most {MAX_BODY} bytes")
        elif name == "transfer-encoding" and value.strip().lower() != "identity":
            raise HttpError(400, "send the body with a Content-Length (no chunked encoding)")
    return parts[0].upper(), parts[1], length


async def start_http_server(host: str, port: int, handler: Handler) -> asyncio.base_events.Server:
    loop = asyncio.get_running_loop()
    return await loop.create_server(lambda: _Conn(handler), host=host, port=port, reuse_address=True)
