"""A follower's connection to a leader: one TCP connection, one request at a time, Kafka's
framing and headers, requests and responses encoded with kafka-python's message classes (the
same ones the server decodes with: protocol/api.py)."""
from __future__ import annotations

import asyncio
import struct
from typing import Any

from kcoord.protocol.api import API_TABLE

_SIZE = struct.Struct(">i")


class BrokerConnectionError(ConnectionError):
    """The leader could not be reached, closed the connection, or sent garbage."""


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
            self._reader, self._writer = await asyncio.wait_for(
                asyncio.open_connection(self.host, self.port), self.timeout_s)
        except (TimeoutError, OSError) as e:
            raise BrokerConnectionError(f"cannot connect to {self.host}:{self.port}: {e!r}") from None

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
