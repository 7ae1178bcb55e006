"""The ceilings the benchmarks compare kcoord with: bare uvloop servers that do the minimum
for the same request frames.

    echo MODE:    parse frames, answer each with a fixed 7-byte body (a Heartbeat v4 answer)
    append MODE:  append each request's bytes to a file, fdatasync with group commit (one sync
                  in a thread at a time, covering everything written before it started), then
                  answer — what a durable OffsetCommit must at least cost.
"""
from __future__ import annotations

import asyncio
import os
import sys

import uvloop

BODY = b"\x00\x00\x00\x00\x00\x00\x00"  # throttle_time_ms=0, error_code=0, no tagged fields


def _answer(frame: bytes) -> bytes:
    corr = frame[4:8]
    payload = corr + b"\x00" + BODY
    return len(payload).to_bytes(4, "big") + payload


class Echo(asyncio.Protocol):
    def connection_made(self, transport):  # type: ignore[override]
        self.t = transport
        self.buf = bytearray()

    def data_received(self, data: bytes) -> None:
        self.buf += data
        out = []
        while len(self.buf) >= 4:
            size = int.from_bytes(self.buf[:4], "big")
            if len(self.buf) < 4 + size:
                break
            frame = bytes(self.buf[4 : 4 + size])
            del self.buf[: 4 + size]
            out.append(_answer(frame))
        if out:
            self.t.write(b"".join(out))


class GroupSync:
    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.written = 0
        self.durable = 0
        self.running = False
        self.waiters: list[tuple[int, asyncio.Future[None]]] = []

    def append(self, data: bytes) -> int:
        os.write(self.fd, data)
        self.written += len(data)
        return self.written

    async def wait(self, upto: int) -> None:
        fut = asyncio.get_running_loop().create_future()
        self.waiters.append((upto, fut))
        if not self.running:
            self.running = True  # set now: a round task starts only on the next loop turn
            asyncio.ensure_future(self._round())
        await fut

    async def _round(self) -> None:
        while any(u > self.durable for u, _ in self.waiters):
            covers = self.written
            await asyncio.get_running_loop().run_in_executor(None, os.fdatasync, self.fd)
            self.durable = covers
            still = []
            for u, f in self.waiters:
                if u <= self.durable:
                    f.set_result(None)
                else:
                    still.append((u, f))
            self.waiters = still
        self.running = False


class Append(asyncio.Protocol):
    sync: GroupSync

    def connection_made(self, transport):  # type: ignore[override]
        self.t = transport
        self.buf = bytearray()

    def data_received(self, data: bytes) -> None:
        self.buf += data
        while len(self.buf) >= 4:
            size = int.from_bytes(self.buf[:4], "big")
            if len(self.buf) < 4 + size:
                break
            frame = bytes(self.buf[4 : 4 + size])
            del self.buf[: 4 + size]
            upto = self.sync.append(frame)
            asyncio.ensure_future(self._reply(upto, frame))

    async def _reply(self, upto: int, frame: bytes) -> None:
        await self.sync.wait(upto)
        self.t.write(_answer(frame))


async def main(mode: str, port: int, workdir: str | None) -> None:
    loop = asyncio.get_running_loop()
    if mode == "echo":
        server = await loop.create_server(Echo, "127.0.0.1", port)
    else:
        assert workdir
        fd = os.open(os.path.join(workdir, "bare.log"), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        Append.sync = GroupSync(fd)
        server = await loop.create_server(Append, "127.0.0.1", port)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    uvloop.run(main(sys.argv[1], int(sys.argv[2]), sys.argv[3] if len(sys.argv) > 3 else None))
