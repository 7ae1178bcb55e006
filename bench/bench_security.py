"""Security's costs, each measured against kcoord itself in the same run:

1. Heartbeats over SASL_SSL (TLS + SASL/PLAIN) vs over PLAINTEXT: one server with both
   listeners, 100 members (each its own group) on each, alternating runs. Target: SASL_SSL >= 70%
   of the PLAINTEXT rate. The load generator runs on the same cores: its TLS client encrypts its
   heartbeats before the measured window and counts answers undecrypted. The server's CPU per
   heartbeat is shown too, and TLS's cost to the server alone is measured in process (no
   sockets, no load generator).
2. The ACL check's cost on a durable OffsetCommit: a server without an authorizer vs one with
   StandardAuthorizer and 1,000 ACLs (the committing principal allowed by two of them), 100
   connections committing, alternating runs. Target: at most 5% fewer commits/s. Also, in
   process: the CPU per commit from frame to queued write with and without, the cost of one
   authorization decision (cached and uncached) with 1,000 ACLs, and of a commit's whole check
   on its direct route.
"""
from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import ssl
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _util import ROOT, SyncClient, closed_loop_args, encode_request, stop, table, take_frames, wait_listening
from kafka.protocol.admin import CreateAclsRequest, CreateTopicsRequest
from kafka.protocol.consumer import HeartbeatRequest, JoinGroupRequest, OffsetCommitRequest, SyncGroupRequest
from kafka.protocol.sasl import SaslAuthenticateRequest, SaslHandshakeRequest

from kcoord.protocol.errors import ErrorCode

USER, PASSWORD = "bench", "bench-pw"
JAAS = f'org.apache.kafka.common.security.plain.PlainLoginModule required user_{USER}="{PASSWORD}";'


def make_pki(root: Path) -> tuple[Path, Path]:
    """A CA and a server certificate for 127.0.0.1 (openssl), as the tests make them."""
    def run(*args: str) -> None:
        subprocess.run(["openssl", *args], cwd=root, check=True, capture_output=True)
    run("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout", "ca.key",
        "-out", "ca.pem", "-days", "2", "-subj", "/CN=bench CA")
    run("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout", "server.key",
        "-out", "server.csr", "-subj", "/CN=localhost")
    (root / "ext").write_text("subjectAltName=IP:127.0.0.1\n")
    run("x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
        "-days", "2", "-extfile", "ext", "-out", "server.pem")
    keystore = root / "keystore.pem"
    keystore.write_text((root / "server.key").read_text() + (root / "server.pem").read_text())
    return keystore, root / "ca.pem"


def start_server(port: int, log_dir: Path, overrides: dict[str, str]) -> subprocess.Popen[bytes]:
    """kcoord with PLAINTEXT on `port` (plus whatever `overrides` add), once it answers there."""
    opts = {"listeners": f"PLAINTEXT://127.0.0.1:{port}", "log.dirs": str(log_dir),
            "group.initial.rebalance.delay.ms": "0", "log.level": "WARNING", **overrides}
    args = [sys.executable, "-m", "kcoord.server", "serve"]
    for k, v in opts.items():
        args += ["--override", f"{k}={v}"]
    proc = subprocess.Popen(args, cwd=ROOT)
    try:
        wait_listening(port, proc, timeout=60)
    except RuntimeError:
        stop(proc)
        raise
    return proc


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def frame(req: object, version: int, corr: int = 1) -> bytes:
    return encode_request(req, version, correlation_id=corr)


def join(port: int, group: str) -> tuple[str, int]:
    c = SyncClient(port)
    proto = [JoinGroupRequest.JoinGroupRequestProtocol(name="range", metadata=b"")]

    def req(member: str) -> JoinGroupRequest:
        return JoinGroupRequest(group_id=group, session_timeout_ms=60000, rebalance_timeout_ms=60000,
                                member_id=member, group_instance_id=None, protocol_type="consumer", protocols=proto)
    r = c.call(req(""), 5)
    if r.error_code == ErrorCode.MEMBER_ID_REQUIRED:
        r = c.call(req(r.member_id), 5)
    assert r.error_code == 0, r
    s = c.call(SyncGroupRequest(group_id=group, generation_id=r.generation_id, member_id=r.member_id,
                                group_instance_id=None, protocol_type="consumer", protocol_name="range",
                                assignments=[SyncGroupRequest.SyncGroupRequestAssignment(
                                    member_id=r.member_id, assignment=b"")]), 5)
    assert s.error_code == 0, s
    c.close()
    return r.member_id, r.generation_id


class _Conn(asyncio.Protocol):
    """Sends `setup` frames one at a time (the SASL exchange), then keeps one `frame` outstanding."""

    def __init__(self, setup: list[bytes], frame: bytes, counter: list[int], stop_at: float) -> None:
        self.setup = list(setup)
        self.frame = frame
        self.counter = counter
        self.stop_at = stop_at
        self.buf = bytearray()
        self.ready = asyncio.get_running_loop().create_future()
        self.done = asyncio.get_running_loop().create_future()

    def connection_made(self, transport):  # type: ignore[override]
        self.t = transport
        self._next()

    def _next(self) -> None:
        if self.setup:
            self.t.write(self.setup.pop(0))
        else:
            if not self.ready.done():
                self.ready.set_result(None)
            self.t.write(self.frame)

    def data_received(self, data: bytes) -> None:
        self.buf += data
        n = take_frames(self.buf)
        if n:
            self._answered(n)

    def _answered(self, n: int) -> None:
        if not self.ready.done():
            self._next()
            return
        self.counter[0] += n
        if time.monotonic() < self.stop_at:
            self._send(n)
        elif not self.done.done():
            self.done.set_result(None)

    def _send(self, n: int) -> None:
        self.t.write(self.frame * n)

    def connection_lost(self, exc):  # type: ignore[override]
        for f in (self.ready, self.done):
            if not f.done():
                f.set_result(None)


class _TlsConn(_Conn):
    """The same client over TLS, done inline on memory BIOs. The load generator shares the two
    cores with the server, so its own TLS work is kept out of the measured window: once the
    SASL exchange is done, prepare() encrypts the heartbeats it will send ahead of time (a
    TLS 1.3 record depends only on the key, its sequence number and the plaintext, the same
    frame each time), and the answers are counted by their TLS record headers, undecrypted (the
    server writes one record per answer; the plaintext client does not read the answers
    either, it counts frames)."""

    def __init__(self, ctx: ssl.SSLContext, *args: object) -> None:
        super().__init__(*args)  # type: ignore[arg-type]
        self.inc, self.out = ssl.MemoryBIO(), ssl.MemoryBIO()
        self.sslobj = ctx.wrap_bio(self.inc, self.out, server_hostname="127.0.0.1")
        self.handshaken = False
        self.records: list[bytes] = []  # prepared heartbeats, in sequence order
        self.sent = 0
        self.counting = False  # answers counted by record header from here on
        self.want_counting = False

    def connection_made(self, transport):  # type: ignore[override]
        self.t = transport
        self._shake()

    def _shake(self) -> None:
        try:
            self.sslobj.do_handshake()
            self.handshaken = True
        except ssl.SSLWantReadError:
            pass
        if self.out.pending:
            self.t.write(self.out.read())
        if self.handshaken:
            self.raw_t, self.t = self.t, self  # writes from here on are encrypted
            self._next()

    def prepare(self, n: int) -> None:
        """Encrypt the next `n` heartbeats now; then count answers without decrypting them."""
        for _ in range(n):
            self.sslobj.write(self.frame)
            self.records.append(self.out.read())
        self.want_counting = True
        if not self.inc.pending:  # no partly received record to finish decrypting first
            self.counting = True

    def write(self, data: bytes) -> None:  # what _Conn writes through once the handshake is done
        self.sslobj.write(data)
        self.raw_t.write(self.out.read())

    def _send(self, n: int) -> None:
        if self.sent + n <= len(self.records):
            self.raw_t.write(b"".join(self.records[self.sent:self.sent + n]))
            self.sent += n
        else:  # ran out of prepared records (a faster machine than foreseen): encrypt as we go
            if self.sent < len(self.records):
                self.raw_t.write(b"".join(self.records[self.sent:]))
                n -= len(self.records) - self.sent
                self.sent = len(self.records)
            self.write(self.frame * n)

    def close(self) -> None:
        self.raw_t.close()

    def data_received(self, data: bytes) -> None:
        if self.counting:
            self.buf += data
            n = 0
            while len(self.buf) >= 5:
                end = 5 + int.from_bytes(self.buf[3:5], "big")
                if len(self.buf) < end:
                    break
                del self.buf[:end]
                n += 1
            if n:
                self._answered(n)
            return
        self.inc.write(data)
        if not self.handshaken:
            self._shake()
            if not self.handshaken:
                return
        chunks = []
        while True:
            try:
                chunk = self.sslobj.read(16384)
            except ssl.SSLWantReadError:
                break
            if not chunk:
                break
            chunks.append(chunk)
            if not self.inc.pending:  # nothing more arrived: no read that can only fail
                break
        if self.want_counting and not self.inc.pending:
            self.counting = True
        if chunks:
            super().data_received(b"".join(chunks))


async def _closed_loop(port: int, frames: list[bytes], seconds: float, tls: ssl.SSLContext | None,
                       setup: list[bytes], pid: int | None = None) -> tuple[float, float]:
    loop = asyncio.get_running_loop()
    counter = [0]
    stop_at = time.monotonic() + 3600
    conns = []
    for f in frames:
        if tls is None:
            _, proto = await loop.create_connection(lambda f=f: _Conn(setup, f, counter, stop_at), "127.0.0.1", port)
        else:
            _, proto = await loop.create_connection(lambda f=f: _TlsConn(tls, setup, f, counter, stop_at),
                                                    "127.0.0.1", port)
        conns.append(proto)
    await asyncio.gather(*(c.ready for c in conns))
    if tls is not None:  # enough for 400 heartbeats/s per connection (40,000/s in all); past that, live
        for c in conns:
            c.prepare(int((seconds + 1.5) * 400))
    await asyncio.sleep(1.0)  # warm-up
    start_count, start = counter[0], time.monotonic()
    cpu0 = cpu_seconds(pid) if pid else 0.0
    await asyncio.sleep(seconds)
    answered = counter[0] - start_count
    cpu = (cpu_seconds(pid) - cpu0) / answered * 1e6 if pid and answered else 0.0
    rate = answered / (time.monotonic() - start)
    for c in conns:
        c.stop_at = 0
    await asyncio.wait([c.done for c in conns], timeout=10)
    for c in conns:
        c.t.close()
    return rate, cpu


def closed_loop(port: int, frames: list[bytes], seconds: float, tls: ssl.SSLContext | None = None,
                setup: list[bytes] | None = None, pid: int | None = None) -> float:
    return closed_loop_cpu(port, frames, seconds, tls, setup, pid)[0]


def closed_loop_cpu(port: int, frames: list[bytes], seconds: float, tls: ssl.SSLContext | None = None,
                    setup: list[bytes] | None = None, pid: int | None = None) -> tuple[float, float]:
    """(requests answered per second, the server's CPU µs per answered request in that window)."""
    import uvloop

    return uvloop.run(_closed_loop(port, frames, seconds, tls, setup or [], pid))


def sasl_setup() -> list[bytes]:
    token = f"\0{USER}\0{PASSWORD}".encode()
    return [frame(SaslHandshakeRequest(mechanism="PLAIN"), 1, 900),
            frame(SaslAuthenticateRequest(auth_bytes=token), 2, 901)]


def bench_heartbeats(args: argparse.Namespace, work: Path) -> None:
    keystore, ca = make_pki(work)
    plain_port, sasl_ssl_port = free_port(), free_port()
    proc = start_server(plain_port, work / "hb-data", {
        "listeners": f"PLAINTEXT://127.0.0.1:{plain_port},SASL_SSL://127.0.0.1:{sasl_ssl_port}",
        "sasl.enabled.mechanisms": "PLAIN", "listener.name.sasl_ssl.plain.sasl.jaas.config": JAAS,
        "ssl.keystore.type": "PEM", "ssl.keystore.location": str(keystore),
    })
    try:
        frames = []
        for i in range(args.connections):
            group = f"bench-sec-hb-{i}"
            member, gen = join(plain_port, group)
            frames.append(frame(HeartbeatRequest(group_id=group, generation_id=gen, member_id=member,
                                                 group_instance_id=None), 4, i))
        tls = ssl.create_default_context(cafile=str(ca))
        plain, secure, plain_cpu, secure_cpu = [], [], [], []
        for _ in range(args.rounds):
            for rates, cpus, port, ctx, setup in ((plain, plain_cpu, plain_port, None, None),
                                                   (secure, secure_cpu, sasl_ssl_port, tls, sasl_setup())):
                # the server's CPU per heartbeat in the measured window: unlike the rate, hardly
                # moved by other load on the machine
                rate, cpu = closed_loop_cpu(port, frames, args.seconds, ctx, setup, proc.pid)
                rates.append(rate)
                cpus.append(cpu)
        p, s = sorted(plain)[args.rounds // 2], sorted(secure)[args.rounds // 2]
        pc, sc = sorted(plain_cpu)[args.rounds // 2], sorted(secure_cpu)[args.rounds // 2]
        print(f"Heartbeat v4 on one server: {args.connections} connections per listener, one request outstanding "
              f"each, {args.rounds} alternating runs of {args.seconds:g} s, medians")
        print(table(["listener", "heartbeats/s", "% of PLAINTEXT", "server CPU µs/heartbeat", "samples"], [
            ["PLAINTEXT", p, 100.0, pc, " ".join(f"{x:,.0f}" for x in plain)],
            ["SASL_SSL (TLS 1.3, SASL/PLAIN)", s, 100.0 * s / p, sc, " ".join(f"{x:,.0f}" for x in secure)],
        ]))
        print(f"target: SASL_SSL >= 70% of PLAINTEXT -> {'met' if s >= 0.7 * p else 'NOT met'}")
    finally:
        stop(proc)


def tls_cpu(work: Path, n: int = 30000) -> None:
    """The server's CPU per heartbeat in process, without sockets: the same connection code fed
    plaintext frames, then TLS records made by an in-memory client. What TLS itself costs the
    server, free of the load generator and of other load on the machine."""
    sys.path.insert(0, str(ROOT))
    from kcoord.server.broker import Broker
    from kcoord.server.config import Config
    from kcoord.server.connection import KafkaConnection
    from kcoord.server.node import dispatcher_for
    from kcoord.server.security.tls_transport import TlsProtocol

    class Raw(asyncio.Transport):
        def __init__(self) -> None:
            super().__init__()
            self.out: list[bytes] = []

        def write(self, data: bytes) -> None:  # type: ignore[override]
            self.out.append(data)

        def get_extra_info(self, name: str, default: object = None) -> object:
            return ("127.0.0.1", 5555) if name == "peername" else default

        def is_closing(self) -> bool:
            return False

        def pause_reading(self) -> None:
            pass

        def resume_reading(self) -> None:
            pass

        def close(self) -> None:
            pass

    async def run() -> tuple[float, float]:
        work.mkdir(parents=True, exist_ok=True)
        keystore, ca = make_pki(work)
        broker = Broker(Config({"log.dirs": str(work / "tls-data"), "offsets.topic.num.partitions": 4,
                                "listeners": "PLAINTEXT://127.0.0.1:0", "log.level": "WARNING"}))
        await broker.start()
        broker.start_background()
        await asyncio.wait_for(broker._background[0], 60)  # noqa: SLF001
        disp = dispatcher_for(broker)
        req = frame(HeartbeatRequest(group_id="g", generation_id=1, member_id="m", group_instance_id=None), 4)
        raw = Raw()
        conn = KafkaConnection(broker.connections, disp, 100 << 20, 500, None)
        conn.connection_made(raw)
        for _ in range(1000):
            conn.data_received(req)
        t0 = time.thread_time()
        for _ in range(n):
            conn.data_received(req)
            raw.out.clear()
        plain = (time.thread_time() - t0) / n * 1e6
        sctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        sctx.load_cert_chain(str(keystore))
        raw2 = Raw()
        tls = TlsProtocol(sctx, KafkaConnection(broker.connections, disp, 100 << 20, 500, None))
        tls.connection_made(raw2)
        inc, out = ssl.MemoryBIO(), ssl.MemoryBIO()
        client = ssl.create_default_context(cafile=str(ca)).wrap_bio(inc, out, server_hostname="127.0.0.1")
        for _ in range(10):  # the handshake, through the server's protocol
            try:
                client.do_handshake()
            except ssl.SSLWantReadError:
                pass
            if out.pending:
                tls.data_received(out.read())
            for x in raw2.out:
                inc.write(x)
            raw2.out.clear()
        records = []
        for _ in range(n + 1000):
            client.write(req)
            records.append(out.read())
        for r in records[:1000]:
            tls.data_received(r)
            tls.batch.send()
        raw2.out.clear()
        t0 = time.thread_time()
        for r in records[1000:]:
            tls.data_received(r)
            tls.batch.send()  # as the loop would after this iteration (here one answer per iteration)
            raw2.out.clear()
        secure = (time.thread_time() - t0) / n * 1e6
        await broker.stop()
        return plain, secure

    plain, secure = asyncio.run(run())
    print(f"\nThe server's CPU per heartbeat in process (no sockets), {n:,} heartbeats")
    print(table(["connection", "CPU µs/heartbeat", "% of plaintext's rate"], [
        ["plaintext", plain, 100.0], ["TLS 1.3 (TLS_AES_256_GCM_SHA384)", secure, 100.0 * plain / secure]]))


def commit_frame(group: str, topic: str, partition: int) -> bytes:
    T = OffsetCommitRequest.OffsetCommitRequestTopic
    P = T.OffsetCommitRequestPartition
    return frame(OffsetCommitRequest(group_id=group, generation_id_or_member_epoch=-1, member_id="",
                                     group_instance_id=None, topics=[T(name=topic, partitions=[
                                         P(partition_index=partition, committed_offset=1000 + partition,
                                           committed_leader_epoch=-1, committed_metadata="")])]), 8, partition)


def acls(n: int) -> list[CreateAclsRequest.AclCreation]:
    """n ACLs: three allow User:ANONYMOUS (the PLAINTEXT principal) to make the topic and commit; the rest are other
    principals' literal and prefixed ACLs on other groups and topics."""
    C = CreateAclsRequest.AclCreation
    out = [C(resource_type=3, resource_name="bench-commit", resource_pattern_type=3, principal="User:ANONYMOUS",
             host="*", operation=3, permission_type=3),
           C(resource_type=2, resource_name="bench-commit-", resource_pattern_type=4, principal="User:ANONYMOUS",
             host="*", operation=3, permission_type=3),
           C(resource_type=2, resource_name="bench-commit-", resource_pattern_type=4, principal="User:ANONYMOUS",
             host="*", operation=5, permission_type=3)]  # CREATE: the set-up makes the topic
    for i in range(n - len(out)):
        rtype, pattern = (2, 3) if i % 3 == 0 else (3, 4) if i % 3 == 1 else (2, 4)
        out.append(C(resource_type=rtype, resource_name=f"other-{i % 97}-{i}", resource_pattern_type=pattern,
                     principal=f"User:u{i % 50}", host="*", operation=3 + i % 6, permission_type=3 if i % 7 else 2))
    return out


def write_acls(log_dir: Path, n: int) -> None:
    """The ACLs go into the server's ACL file before it starts, through the authorizer's own
    store (the same records CreateAcls from a super user would write)."""
    sys.path.insert(0, str(ROOT))
    from kcoord.server.security.acl import acl_from_creation
    from kcoord.server.security.authorizer import Authorizer

    log_dir.mkdir(parents=True, exist_ok=True)
    a = Authorizer(log_dir)
    records, results = a.create([acl_from_creation(c) for c in acls(n)])
    assert all(code == 0 for code, _ in results)
    a.store.commit_now(records)


def bench_acl_commits(args: argparse.Namespace, work: Path) -> None:
    topic, group = "bench-commit-topic", "bench-commit"
    write_acls(work / "acl", args.acls)
    open_port, authz_port = free_port(), free_port()
    plain = start_server(open_port, work / "open", {})
    authz = start_server(authz_port, work / "acl", {
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer"})
    ports = {"without an authorizer": open_port, f"StandardAuthorizer, {args.acls:,} ACLs": authz_port}
    try:
        for name, port in ports.items():
            c = SyncClient(port)
            CT = CreateTopicsRequest.CreatableTopic
            r = c.call(CreateTopicsRequest(topics=[CT(name=topic, num_partitions=args.connections,
                                                      replication_factor=1, assignments=[], configs=[])],
                                           timeout_ms=5000, validate_only=False), 5)
            assert r.topics[0].error_code == 0, (name, r)
            c.close()
        frames = [commit_frame(group, topic, i) for i in range(args.connections)]
        samples: dict[str, list[float]] = {n: [] for n in ports}
        for _ in range(args.rounds):
            for name, port in ports.items():
                samples[name].append(closed_loop(port, frames, args.seconds))
        med = {n: sorted(v)[args.rounds // 2] for n, v in samples.items()}
        base = med["without an authorizer"]
        print(f"\nOffsetCommit v8, durable, one group and topic, {args.connections} connections, {args.rounds} "
              f"alternating runs of {args.seconds:g} s, medians")
        print(table(["server", "commits/s", "% of no authorizer", "samples"], [
            [n, med[n], 100.0 * med[n] / base, " ".join(f"{x:,.0f}" for x in samples[n])] for n in ports]))
        cost = 100.0 * (1 - med[f"StandardAuthorizer, {args.acls:,} ACLs"] / base)
        print(f"target: the ACL checks cost at most 5% of the commit rate -> "
              f"{'met' if cost <= 5.0 else 'NOT met'} ({cost:.1f}%)")
    finally:
        stop(plain)
        stop(authz)
    dispatch_cpu(args.acls, work / "dispatch")
    decision_cost(args.acls, work / "inproc")


def dispatch_cpu(n_acls: int, work: Path, rounds: int = 5, batches: int = 40, per_batch: int = 100) -> None:
    """CPU time (this process's, so other load hardly moves it) to take an OffsetCommit from its
    frame to the durable write it queues, without and with the authorizer, in process."""
    sys.path.insert(0, str(ROOT))
    from kcoord.server.broker import Broker
    from kcoord.server.config import Config
    from kcoord.server.node import dispatcher_for
    from kcoord.server.session import Session

    async def one(authorizing: bool, d: Path) -> float:
        cfg = {"log.dirs": str(d), "offsets.topic.num.partitions": 4, "listeners": "PLAINTEXT://127.0.0.1:0",
               "log.level": "WARNING"}
        if authorizing:
            write_acls(d, n_acls)
            cfg["authorizer.class.name"] = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
        b = Broker(Config(cfg))
        await b.start()
        b.start_background()
        await asyncio.wait_for(b._background[0], 60)  # noqa: SLF001
        b.create_topic("bench-commit-topic", per_batch, {})
        disp, s = dispatcher_for(b), Session(None, "127.0.0.1")
        frames = [commit_frame("bench-commit", "bench-commit-topic", i)[4:] for i in range(per_batch)]
        used = 0.0
        for i in range(batches + 2):
            c0 = time.thread_time()
            outs = [disp.handle(f, s) for f in frames]
            if i >= 2:  # warm
                used += time.thread_time() - c0
            while not all(getattr(o, "done", True) for o in outs):
                await asyncio.sleep(0.001)
        await b.stop()
        return used / (batches * per_batch) * 1e6

    samples: dict[bool, list[float]] = {False: [], True: []}
    for r in range(rounds):
        for authorizing in (False, True):
            d = work / f"dispatch-{r}-{authorizing}"
            d.mkdir(parents=True)
            samples[authorizing].append(asyncio.run(one(authorizing, d)))
    base, authz = sorted(samples[False])[rounds // 2], sorted(samples[True])[rounds // 2]
    print(f"\nOffsetCommit from frame to queued durable write, CPU µs each, in process, {rounds} alternating runs of "
          f"{batches * per_batch:,} commits, medians")
    print(table(["server", "CPU µs/commit", "% of no authorizer", "samples"], [
        ["without an authorizer", base, 100.0, " ".join(f"{x:.1f}" for x in samples[False])],
        [f"StandardAuthorizer, {n_acls:,} ACLs", authz, 100.0 * authz / base,
         " ".join(f"{x:.1f}" for x in samples[True])]]))


def decision_cost(n: int, work: Path) -> None:
    sys.path.insert(0, str(ROOT))
    from kcoord.server.security.acl import AclOperation, ResourceType, acl_from_creation
    from kcoord.server.security.authorizer import Authorizer

    work.mkdir(parents=True, exist_ok=True)
    a = Authorizer(work)
    records, _ = a.create([acl_from_creation(c) for c in acls(n)])
    asyncio.run(a.commit(records))
    reps = 200_000
    t0 = time.thread_time()
    for _ in range(reps):
        a.authorize("User:ANONYMOUS", "127.0.0.1", AclOperation.READ, ResourceType.GROUP, "bench-commit")
    cached = (time.thread_time() - t0) / reps * 1e6
    names = [f"bench-commit-topic-{i}" for i in range(20_000)]
    t0 = time.thread_time()
    for name in names:
        a._decide("User:ANONYMOUS", "127.0.0.1", AclOperation.READ, ResourceType.TOPIC, name)  # noqa: SLF001
    uncached = (time.thread_time() - t0) / len(names) * 1e6
    route = commit_route_cost(a)
    print(f"\nOne authorization decision with {n:,} ACLs, in process (CPU time)")
    print(table(["decision", "CPU µs each"], [["cached (the same principal, host, operation, resource)", cached],
                                         ["uncached (a topic name not seen before)", uncached],
                                         ["a one-topic OffsetCommit's whole check on its direct route", route]]))


def commit_route_cost(a: object, reps: int = 200_000) -> float:
    """What authorizing adds to a commit's direct route (guarded_direct around a handler that
    does nothing), the usual allowed commit, CPU time: the fastest of 5 runs."""
    from types import SimpleNamespace

    from kafka.protocol.consumer import OffsetCommitRequest

    from kcoord.protocol.api import ApiKey
    from kcoord.server.handlers.routes import ROUTES
    from kcoord.server.security.guard import guarded_direct
    from kcoord.server.session import Session

    T = OffsetCommitRequest.OffsetCommitRequestTopic
    req = OffsetCommitRequest(version=8, group_id="bench-commit", generation_id_or_member_epoch=-1, member_id="",
                              group_instance_id=None, topics=[T(name="bench-commit-topic", partitions=[])])
    broker = SimpleNamespace(security=SimpleNamespace(authorizer=a))
    session = Session(None, "127.0.0.1")

    def nothing(req: object, version: int) -> None:
        return None
    commit = ROUTES[ApiKey.OFFSET_COMMIT]
    route = guarded_direct(ApiKey.OFFSET_COMMIT, nothing, lambda: session, commit.policy(), broker.security,
                           None, commit.as_is())  # type: ignore[arg-type]
    best = float("inf")
    for _ in range(5):
        t0 = time.thread_time()
        for _ in range(reps):
            route(req, 8)
        t1 = time.thread_time()
        for _ in range(reps):
            nothing(req, 8)
        best = min(best, ((t1 - t0) - (time.thread_time() - t1)) / reps * 1e6)
    return best


def main() -> None:
    ap = closed_loop_args()
    ap.add_argument("--acls", type=int, default=1000)
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-security-"))
    try:
        bench_heartbeats(args, work)
        tls_cpu(work / "tls")
        bench_acl_commits(args, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    main()
