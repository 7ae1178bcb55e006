"""The control API costs the Kafka listeners one attribute test per request while nothing is
injected: a connection's hook is unset after its first request (which taught the control API
its client id), set on every connection while a fault or recording is active, unset again
once the last one goes. In-process server, real sockets."""
from __future__ import annotations

import asyncio
import struct

import pytest

from kcoord.server.app import Server
from kcoord.server.config import Config
from kcoord.server.control.plane import ControlPlane


def api_versions(correlation: int, client_id: bytes) -> bytes:
    payload = struct.pack(">hhih", 18, 0, correlation, len(client_id)) + client_id
    return struct.pack(">i", len(payload)) + payload


async def ask(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, correlation: int, client_id: bytes) -> int:
    writer.write(api_versions(correlation, client_id))
    size = struct.unpack(">i", await reader.readexactly(4))[0]
    body = await reader.readexactly(size)
    return struct.unpack(">i", body[:4])[0]


async def test_connections_are_hooked_only_while_something_is_injected(tmp_path, unused_tcp_port_factory):
    port, control_port = unused_tcp_port_factory(), unused_tcp_port_factory()
    server = Server(Config({"listeners": f"PLAINTEXT://127.0.0.1:{port}", "log.dirs": str(tmp_path / "d"),
                            "kcoord.control.listener": f"http://127.0.0.1:{control_port}"}))
    await server.start()
    try:
        plane: ControlPlane = server.control
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        await asyncio.sleep(0)
        (conn,) = server.broker.connections
        assert conn.hook is plane.intercept  # its first request is looked at
        assert await ask(reader, writer, 1, b"hooked-client") == 1
        assert conn.hook is None and conn.client_id == "hooked-client"
        assert await ask(reader, writer, 2, b"hooked-client") == 2 and conn.hook is None

        rule = plane.inject_error({"api": "Metadata", "error": "LEADER_NOT_AVAILABLE", "count": 1})
        assert conn.hook is plane.intercept
        plane.remove_fault(rule["id"])
        assert conn.hook is None
        plane.record({"max": 10})
        assert conn.hook is plane.intercept
        assert await ask(reader, writer, 3, b"hooked-client") == 3
        assert [r["header"]["correlation_id"] for r in plane.requests({})["requests"]] == [3]
        plane.stop_recording()
        assert conn.hook is None

        stalled = plane.stall({"client_id": "hooked-client"})
        assert stalled["stalled"] == [conn.id] and conn.stalled
        writer.write(api_versions(4, b"hooked-client"))
        with pytest.raises(asyncio.TimeoutError):  # not answered while stalled
            await asyncio.wait_for(reader.readexactly(4), 0.5)
        plane.unstall("hooked-client")
        size = struct.unpack(">i", await asyncio.wait_for(reader.readexactly(4), 10))[0]
        assert struct.unpack(">i", (await reader.readexactly(size))[:4])[0] == 4
        assert conn.hook is None and not conn.stalled
        writer.close()
    finally:
        await server.stop()
