"""A follower's connection to a leader: one TCP connection, one request at a time, Kafka's
framing and headers, requests and responses encoded with kafka-python's message classes (the
same ones the server decodes with: protocol/api.py)."""
from __future__ import annotations

import asyncio
import ipaddress
import socket
import struct
import threading
from typing import Any

from kcoord.protocol.api import API_TABLE

_SIZE = struct.Struct(">i")


class BrokerConnectionError(ConnectionError):
    """The leader could not be reached, closed the connection, or sent garbage."""


class BrokerResolutionError(BrokerConnectionError):
    """The leader's host name did not resolve."""


async def resolve(host: str, port: int) -> tuple[int, str]:
    """(family, address) of `host`: a literal at once, a name in a daemon thread of its own.
    Not loop.getaddrinfo: its default-executor thread would hold asyncio.run's exit until a
    slow resolver gives up (10 s and more when the name's resolvers are unreachable), and a
    lookup abandoned on cancellation would log its exception as never retrieved. Here the
    caller's cancellation ends the wait at once; the thread's late answer is dropped."""
    try:
        ip = ipaddress.ip_address(host)
        return (socket.AF_INET6 if ip.version == 6 else socket.AF_INET), host
    except ValueError:
        pass
    loop = asyncio.get_running_loop()
    fut: asyncio.Future[tuple[int, str]] = loop.create_future()

    def deliver(result: Any, error: BaseException | None) -> None:
        if fut.done():
            return  # the caller gave up (cancelled, timed out)
        if error is not None:
            fut.set_exception(error)
        else:
            fut.set_result(result)

    def lookup() -> None:
        result, error = None, None
        try:
            infos = socket.getaddrinfo(host, port, 0, socket.SOCK_STREAM)
            result = (infos[0][0], infos[0][4][0])
        except Exception as e:  # noqa: BLE001 - handed to the caller
            error = BrokerResolutionError(f"cannot resolve {host}: {e}")
        try:
            loop.call_soon_threadsafe(deliver, result, error)
        except RuntimeError:
            pass  # the loop is closed: nobody waits any more

    threading.Thread(target=lookup, name=f"resolve-{host}", daemon=True).start()
    return await fut


class BrokerClient:
    def __init__(self, host: str, port: int, client_id: str, timeout_s: float = 30.0) -> None:
        self.host, self.port = host, port
        self.client_id = client_id.encode()
        self.timeout_s = timeout_s
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._correlation = 0

    async def _connect(self) -> None:
        try:
            _, address = await asyncio.wait_for(resolve(self.host, self.port), self.timeout_s)
        except TimeoutError:
            raise BrokerResolutionError(f"cannot resolve {self.host}: no answer in {self.timeout_s:g} s") from None
        try:
            self._reader, self._writer = await asyncio.wait_for(
                asyncio.open_connection(address, self.port), self.timeout_s)
        except (TimeoutError, OSError) as e:
            raise BrokerConnectionError(f"cannot connect to {self.host}:{self.port}: {e!r}") from None

    @property
    def connected(self) -> bool:
        return self._writer is not None

    async def request(self, request: Any, version: int) -> Any:
        """Send `request` at `version`, return the decoded response."""
        if self._writer is None:
            await self._connect()
        assert self._reader is not None and self._writer is not None
        spec = API_TABLE[request.API_KEY]
        self._correlation = (self._correlation + 1) & 0x7FFFFFFF
        header = struct.pack(">hhih", request.API_KEY, version, self._correlation,
                             len(self.client_id)) + self.client_id
        if spec.request_header_version(version) >= 2:
            header += b"\x00"  # no tagged fields
        payload = header + bytes(request.encode(version=version))
        try:
            self._writer.write(_SIZE.pack(len(payload)) + payload)
            await self._writer.drain()
            size = _SIZE.unpack(await asyncio.wait_for(self._reader.readexactly(4), self.timeout_s))[0]
            frame = await asyncio.wait_for(self._reader.readexactly(size), self.timeout_s)
        except (TimeoutError, OSError, asyncio.IncompleteReadError) as e:
            self.close()
            raise BrokerConnectionError(f"{self.host}:{self.port}: {e!r}") from None
        correlation = _SIZE.unpack_from(frame)[0]
        if correlation != self._correlation:
            self.close()
            raise BrokerConnectionError(f"correlation id {correlation}, expected {self._correlation}")
        pos = 4
        if spec.response_header_version(version) >= 1:
            pos += 1  # empty tagged fields (kcoord writes none)
        try:
            return spec.response.decode(frame[pos:], version=version)
        except Exception as e:  # noqa: BLE001 - a frame that does not decode
            self.close()
            raise BrokerConnectionError(f"undecodable response from {self.host}:{self.port}: {e!r}") from None

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
        self._reader = self._writer = None
