"""The TLS connection's write path (server/security/tls_transport.py): answers are encrypted when
written and sent in one batch per listener once the loop iteration ends; nothing is lost or
reordered by the wait, and a connection closed meanwhile sends its answers before its
close_notify and nothing after it."""
from __future__ import annotations

import asyncio
import ssl
from pathlib import Path

import pytest

from kcoord.server.security.tls_transport import TlsProtocol, WriteBatch
from tests.pki import Pki, make_pki


class Raw(asyncio.Transport):
    """The socket side, in memory: what the TLS protocol sent, one entry per socket write."""

    def __init__(self) -> None:
        super().__init__()
        self.sent: list[bytes] = []
        self.closed = False

    def write(self, data: bytes) -> None:  # type: ignore[override]
        assert not self.closed, "written after close"
        self.sent.append(bytes(data))

    def get_extra_info(self, name: str, default: object = None) -> object:
        return ("127.0.0.1", 40000) if name == "peername" else default

    def is_closing(self) -> bool:
        return self.closed

    def get_write_buffer_size(self) -> int:
        return 0  # every write is taken at once

    def close(self) -> None:
        self.closed = True

    def abort(self) -> None:
        self.closed = True


class Echo(asyncio.Protocol):
    """Answers every chunk with `reply` + the chunk, `times` times."""

    def __init__(self, times: int = 1) -> None:
        self.times = times

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        for i in range(self.times):
            self.transport.write(b"reply-%d:" % i + data)  # type: ignore[attr-defined]


class Client:
    """A TLS client on memory BIOs, shaken hands with `server` through its Raw transport."""

    def __init__(self, pki: Pki, server: TlsProtocol, raw: Raw) -> None:
        self.server, self.raw = server, raw
        self.inc, self.out = ssl.MemoryBIO(), ssl.MemoryBIO()
        ctx = ssl.create_default_context(cafile=str(pki.ca_cert))
        self.tls = ctx.wrap_bio(self.inc, self.out, server_hostname="127.0.0.1")
        for _ in range(10):
            try:
                self.tls.do_handshake()
            except ssl.SSLWantReadError:
                pass
            if self.out.pending:
                server.data_received(self.out.read())
            self.take()
            if server.handshaken and self.tls.version() is not None and not self.out.pending:
                break
        assert server.handshaken

    def send(self, data: bytes) -> None:
        self.tls.write(data)
        self.server.data_received(self.out.read())

    def take(self) -> None:
        for chunk in self.raw.sent:
            self.inc.write(chunk)
        self.raw.sent.clear()

    def read_all(self) -> bytes:
        """Everything decrypted so far."""
        self.take()
        got = b""
        while True:
            try:
                got += self.tls.read(16384)
            except ssl.SSLWantReadError:
                return got


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(Path(tmp_path_factory.mktemp("pki")))


def server_ctx(pki: Pki) -> ssl.SSLContext:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(str(pki.server.keystore))
    return ctx


async def connect(pki: Pki, app: asyncio.Protocol, batch: WriteBatch) -> tuple[TlsProtocol, Raw, Client]:
    tls = TlsProtocol(server_ctx(pki), app, batch=batch)
    raw = Raw()
    tls.connection_made(raw)
    client = Client(pki, tls, raw)
    await asyncio.sleep(0)  # whatever the handshake left queued
    client.read_all()
    return tls, raw, client


async def test_answers_of_one_iteration_leave_together_after_it(pki: Pki) -> None:
    batch = WriteBatch()
    a = await connect(pki, Echo(), batch)
    b = await connect(pki, Echo(), batch)
    a[2].send(b"req-a")
    b[2].send(b"req-b")
    assert a[1].sent == [] and b[1].sent == []  # encrypted, not yet on the socket
    await asyncio.sleep(0)
    assert len(a[1].sent) == 1 and len(b[1].sent) == 1  # one socket write each
    assert a[2].read_all() == b"reply-0:req-a"
    assert b[2].read_all() == b"reply-0:req-b"


async def test_several_answers_go_out_in_one_write_in_order(pki: Pki) -> None:
    tls, raw, client = await connect(pki, Echo(times=3), WriteBatch())
    client.send(b"x")
    client.send(b"y")
    await asyncio.sleep(0)
    assert len(raw.sent) == 1
    assert client.read_all() == b"reply-0:xreply-1:xreply-2:xreply-0:yreply-1:yreply-2:y"


async def test_a_close_in_the_same_iteration_sends_the_answers_then_close_notify(pki: Pki) -> None:
    tls, raw, client = await connect(pki, Echo(), WriteBatch())
    client.send(b"last")
    tls.close()
    assert raw.closed
    await asyncio.sleep(0)  # the batch finds the connection closed: nothing written after close
    client.take()
    assert client.tls.read(16384) == b"reply-0:last"
    assert client.tls.read(16384) == b""  # the close_notify (without it: SSLWantReadError)


async def test_the_write_buffer_size_counts_what_waits_for_the_batch(pki: Pki) -> None:
    tls, raw, client = await connect(pki, Echo(), WriteBatch())
    app_transport = tls.app.transport  # type: ignore[attr-defined]
    client.send(b"q")
    assert app_transport.get_write_buffer_size() > 0
    await asyncio.sleep(0)
    assert app_transport.get_write_buffer_size() == 0


class WriteThenAbort(asyncio.Protocol):
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.transport.write(b"never sent")  # type: ignore[attr-defined]
        self.transport.abort()  # type: ignore[attr-defined]


async def test_an_abort_drops_what_waits_and_the_batch_writes_nothing_after_it(
        pki: Pki, caplog: pytest.LogCaptureFixture) -> None:
    batch = WriteBatch()
    tls, raw, client = await connect(pki, WriteThenAbort(), batch)
    other = await connect(pki, Echo(), batch)
    client.send(b"q")
    other[2].send(b"r")
    await asyncio.sleep(0)
    assert raw.closed and raw.sent == []
    assert other[2].read_all() == b"reply-0:r"  # the batch's other connection is served
    assert not [r for r in caplog.records if r.levelname == "ERROR"]


def close_notify(client: Client) -> bytes:
    """The client's close_notify alert, as it goes on the wire."""
    try:
        client.tls.unwrap()
    except ssl.SSLWantReadError:  # waits for the server's own close_notify
        pass
    return client.out.read()


@pytest.mark.parametrize("version", [ssl.TLSVersion.TLSv1_2, ssl.TLSVersion.TLSv1_3], ids=["TLSv1.2", "TLSv1.3"])
async def test_the_clients_close_notify_is_answered_with_close_notify_and_a_close(
        pki: Pki, version: ssl.TLSVersion) -> None:
    """OpenSSL's read returns 0 bytes (not SSLZeroReturnError) for close_notify; without an answer
    a client that waits for it (aiokafka, librdkafka) hangs until its own timeout."""
    ctx = server_ctx(pki)
    ctx.maximum_version = ctx.minimum_version = version
    tls = TlsProtocol(ctx, Echo(), batch=WriteBatch())
    raw = Raw()
    tls.connection_made(raw)
    client = Client(pki, tls, raw)
    await asyncio.sleep(0)
    client.read_all()
    assert client.tls.version() == {ssl.TLSVersion.TLSv1_2: "TLSv1.2", ssl.TLSVersion.TLSv1_3: "TLSv1.3"}[version]
    tls.data_received(close_notify(client))
    assert raw.closed and tls.closed
    client.take()
    client.tls.unwrap()  # completes: the server's close_notify arrived (else SSLWantReadError)


async def test_answers_waiting_for_the_batch_go_out_before_the_close_notify(pki: Pki) -> None:
    tls, raw, client = await connect(pki, Echo(), WriteBatch())
    client.send(b"last")  # answered into the batch, not yet on the socket
    assert raw.sent == []
    tls.data_received(close_notify(client))
    assert raw.closed
    await asyncio.sleep(0)  # the batch writes nothing after the close
    client.take()
    assert client.tls.read(16384) == b"reply-0:last"
    client.tls.unwrap()


async def test_a_request_and_the_close_notify_in_one_segment_are_both_read(pki: Pki) -> None:
    tls, raw, client = await connect(pki, Echo(), WriteBatch())
    client.tls.write(b"final")
    tls.data_received(client.out.read() + close_notify(client))
    assert raw.closed
    client.take()
    assert client.tls.read(16384) == b"reply-0:final"
    client.tls.unwrap()


async def test_a_fin_without_close_notify_closes_at_once(pki: Pki) -> None:
    tls, raw, client = await connect(pki, Echo(), WriteBatch())
    assert not tls.eof_received()  # falsy: asyncio closes the socket now
    assert not raw.sent
