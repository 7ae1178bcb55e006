"""SASL on the wire, as Kafka serves it: SaslHandshake v0-v1, SaslAuthenticate v0-v2, PLAIN and
SCRAM-SHA-256/512 with Kafka's error codes and messages, the failure delay, what may be sent
before authentication, SCRAM credentials through AlterUserScramCredentials /
DescribeUserScramCredentials kept across restarts, and KIP-368 re-authentication.

The client side is kafka-python's SASL mechanisms driven by tests/wire.py; one in-process
server per test module, requests from threads."""
from __future__ import annotations

import asyncio
import logging
import os
import time

import pytest
from kafka.protocol.admin import AlterUserScramCredentialsRequest, DescribeUserScramCredentialsRequest
from kafka.protocol.metadata import MetadataRequest
from kafka.protocol.sasl import SaslAuthenticateRequest
from wire import Closed, SaslFailed, WireClient

from kcoord.protocol.errors import ErrorCode
from kcoord.server.app import Server
from kcoord.server.config import Config
from kcoord.server.security.scram import ScramMechanism, salted_password

PLAIN_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
              'password="admin-secret" user_admin="admin-secret" user_alice="alice-secret";')
SHA256, SHA512 = int(ScramMechanism.SCRAM_SHA_256), int(ScramMechanism.SCRAM_SHA_512)
Upsert = AlterUserScramCredentialsRequest.ScramCredentialUpsertion
Deletion = AlterUserScramCredentialsRequest.ScramCredentialDeletion


def upsert(name: str, mech: int, password: str, iterations: int = 4096) -> Upsert:
    salt = os.urandom(16)
    salted = salted_password(ScramMechanism.from_type(mech) or ScramMechanism.SCRAM_SHA_256, password, salt, iterations)
    return Upsert(name=name, mechanism=mech, iterations=iterations, salt=salt, salted_password=salted)


def settings(tmp_path, **extra: str) -> dict[str, object]:
    return {
        "log.dirs": str(tmp_path / "data"), "offsets.topic.num.partitions": 2, "group.initial.rebalance.delay.ms": 0,
        "listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS,
        "connection.failed.authentication.delay.ms": 300,
        **extra,
    }


class Env:
    def __init__(self, srv: Server) -> None:
        self.srv = srv

    @property
    def plain(self) -> str:
        return f"127.0.0.1:{self.srv.listener('PLAINTEXT').bound_port}"

    @property
    def sasl(self) -> str:
        return f"127.0.0.1:{self.srv.listener('SASL_PLAINTEXT').bound_port}"


async def start(tmp_path, **extra: str) -> Env:
    srv = Server(Config(settings(tmp_path, **extra)))
    await srv.start()
    return Env(srv)


def metadata(c: WireClient) -> object:
    return c.call(MetadataRequest(version=12, topics=None, allow_auto_topic_creation=False,
                                  include_topic_authorized_operations=False), 12)


def alter(bootstrap: str, upsertions=(), deletions=()) -> dict[str, tuple[int, str | None]]:
    with WireClient(bootstrap) as c:
        r = c.call(AlterUserScramCredentialsRequest(deletions=list(deletions), upsertions=list(upsertions)), 0)
    return {x.user: (x.error_code, x.error_message) for x in r.results}


def describe(bootstrap: str, users: list[str] | None) -> dict[str, tuple[int, str | None, list]]:
    with WireClient(bootstrap) as c:
        r = c.call(DescribeUserScramCredentialsRequest(
            users=None if users is None else [DescribeUserScramCredentialsRequest.UserName(name=u) for u in users]), 0)
    return {x.user: (x.error_code, x.error_message, sorted((i.mechanism, i.iterations) for i in x.credential_infos))
            for x in r.results}


def failure(bootstrap: str, *args, **kw) -> tuple[SaslFailed, float, bool]:
    """Authenticate expecting a refusal: (the error, seconds until it came, closed after)."""
    c = WireClient(bootstrap)
    t0 = time.monotonic()
    try:
        c.authenticate(*args, **kw)
    except SaslFailed as e:
        return e, time.monotonic() - t0, c.closed_by_server()
    finally:
        c.close()
    raise AssertionError("authentication succeeded")


@pytest.fixture
async def env(tmp_path):
    e = await start(tmp_path)
    yield e
    await e.srv.stop()


async def test_plain_and_scram_authenticate_and_then_serve_requests(env, caplog):
    caplog.set_level(logging.INFO, "kcoord.network")
    assert await asyncio.to_thread(alter, env.plain, [upsert("bob", SHA256, "bob-256"), upsert("carol", SHA512, "c-512")]) \
        == {"bob": (0, None), "carol": (0, None)}

    def run() -> list:
        out = []
        for mech, user, pw in (("PLAIN", "alice", "alice-secret"), ("SCRAM-SHA-256", "bob", "bob-256"),
                               ("SCRAM-SHA-512", "carol", "c-512")):
            for hv, av in ((1, 2), (1, 1), (1, 0), (0, None)):
                with WireClient(env.sasl) as c:
                    c.api_versions()
                    last = c.authenticate(mech, user, pw, handshake_version=hv, auth_version=av or 0)
                    out.append((mech, hv, av, last.session_lifetime_ms if last is not None and av else None,
                                metadata(c).cluster_id is not None,
                                sorted(x.session.principal for x in env.srv.broker.connections
                                       if x.session.listener.name == "SASL_PLAINTEXT")))
        return out
    for mech, hv, av, lifetime, served, principals in await asyncio.to_thread(run):
        assert served, (mech, hv, av)
        assert lifetime in (0, None)  # connections.max.reauth.ms=0: no session lifetime
        assert len(principals) == 1 and principals[0] in ("User:alice", "User:bob", "User:carol")
    assert not [r for r in caplog.records if "Failed authentication" in r.getMessage()]


async def test_wrong_passwords_and_unknown_users_get_kafkas_answers_after_the_delay(env, caplog):
    caplog.set_level(logging.INFO, "kcoord.network")
    await asyncio.to_thread(alter, env.plain, [upsert("bob", SHA256, "right-pw")])
    cases = [
        (("PLAIN", "alice", "nope-pw"), "Authentication failed: Invalid username or password"),
        (("PLAIN", "mallory", "nope-pw"), "Authentication failed: Invalid username or password"),
        (("SCRAM-SHA-256", "bob", "nope-pw"),
         "Authentication failed during authentication due to invalid credentials with SASL mechanism SCRAM-SHA-256"),
        (("SCRAM-SHA-256", "mallory", "nope-pw"),
         "Authentication failed during authentication due to invalid credentials with SASL mechanism SCRAM-SHA-256"),
        (("SCRAM-SHA-512", "bob", "right-pw"),  # bob has no SHA-512 credential
         "Authentication failed during authentication due to invalid credentials with SASL mechanism SCRAM-SHA-512"),
    ]
    for args, message in cases:
        err, waited, closed = await asyncio.to_thread(failure, env.sasl, *args)
        assert (err.code, err.message) == (ErrorCode.SASL_AUTHENTICATION_FAILED, message), args
        assert waited >= 0.3, f"answered after {waited:.3f} s, before connection.failed.authentication.delay.ms"
        assert closed
    lines = [r.getMessage() for r in caplog.records if "Failed authentication" in r.getMessage()]
    assert len(lines) == len(cases)
    assert all("/127.0.0.1:" in ln for ln in lines)
    assert "principal User:mallory" in lines[1] and "principal User:bob" in lines[2]
    assert not any("nope-pw" in r.getMessage() or "right-pw" in r.getMessage() for r in caplog.records)


async def test_only_apiversions_and_sasl_before_authentication(env):
    def run() -> dict[str, object]:
        out: dict[str, object] = {}
        with WireClient(env.sasl) as c:  # Metadata first: closed without an answer
            try:
                metadata(c)
                out["metadata"] = "answered"
            except Closed:
                out["metadata"] = "closed"
        with WireClient(env.sasl) as c:  # an unsupported mechanism: answered, then closed
            hs = c.handshake("GSSAPI")
            out["gssapi"] = (hs.error_code, sorted(hs.mechanisms), c.closed_by_server())
        with WireClient(env.sasl) as c:  # SaslAuthenticate before SaslHandshake: closed
            try:
                c.call(SaslAuthenticateRequest(version=1, auth_bytes=b"\0alice\0alice-secret"), 1)
                out["early_auth"] = "answered"
            except Closed:
                out["early_auth"] = "closed"
        with WireClient(env.sasl) as c:  # a frame beyond sasl.server.max.receive.size: closed
            c.send_raw(b"\0" * 600_000)
            out["huge"] = c.closed_by_server()
        with WireClient(env.sasl) as c:  # after a v1 handshake, anything but SaslAuthenticate fails
            c.handshake("PLAIN")
            try:
                metadata(c)
                out["between"] = "answered"
            except Closed:
                out["between"] = "closed"
        with WireClient(env.sasl) as c:  # after authentication: SASL requests are ILLEGAL_SASL_STATE
            c.authenticate("PLAIN", "alice", "alice-secret")
            again = c.call(SaslAuthenticateRequest(version=2, auth_bytes=b"x"), 2)
            hs = c.handshake("PLAIN")
            out["after"] = (again.error_code, again.error_message, hs.error_code)
        with WireClient(env.plain) as c:  # and on a PLAINTEXT listener
            out["plaintext"] = c.handshake("PLAIN").error_code
        return out
    got = await asyncio.to_thread(run)
    assert got["metadata"] == "closed"
    assert got["gssapi"] == (ErrorCode.UNSUPPORTED_SASL_MECHANISM, ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"], True)
    assert got["early_auth"] == "closed"
    assert got["huge"] is True
    assert got["between"] == "closed"
    assert got["after"] == (ErrorCode.ILLEGAL_SASL_STATE,
                            "SaslAuthenticate request received after successful authentication",
                            ErrorCode.ILLEGAL_SASL_STATE)
    assert got["plaintext"] == ErrorCode.ILLEGAL_SASL_STATE


async def test_scram_credentials_are_validated_described_and_kept_across_restarts(tmp_path):
    e = await start(tmp_path)
    try:
        got = await asyncio.to_thread(alter, e.plain, [
            upsert("u1", SHA256, "p1"), upsert("u1", SHA512, "p1"),  # the same user twice
            upsert("u2", SHA512, "p2", iterations=8192), upsert("u3", SHA256, "p3", iterations=1000),
            upsert("u4", SHA256, "p4", iterations=20000), upsert("", SHA256, "p"), upsert("u5", 9, "p5"),
        ], [Deletion(name="ghost", mechanism=SHA256)])
        assert got == {
            "u1": (ErrorCode.DUPLICATE_RESOURCE, "A user credential cannot be altered twice in the same request"),
            "u2": (0, None),
            "u3": (ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too few iterations"),
            "u4": (ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too many iterations"),
            "": (ErrorCode.UNACCEPTABLE_CREDENTIAL, "Username must not be empty"),
            "u5": (ErrorCode.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism"),
            "ghost": (ErrorCode.RESOURCE_NOT_FOUND, "Attempt to delete a user credential that does not exist"),
        }
        await asyncio.to_thread(alter, e.plain, [upsert("u6", SHA256, "u6-Pa55word")])
        assert await asyncio.to_thread(describe, e.plain, ["u2", "u6", "nobody", "u6"]) == {
            "u2": (0, None, [(SHA512, 8192)]),
            "u6": (ErrorCode.DUPLICATE_RESOURCE,
                   "Cannot describe SCRAM credentials for the same user twice in a single request: u6", []),
            "nobody": (ErrorCode.RESOURCE_NOT_FOUND, "Attempt to describe a user credential that does not exist: nobody", []),
        }
    finally:
        await e.srv.stop()
    stored = (tmp_path / "data" / "kcoord-scram-credentials.json")
    assert oct(stored.stat().st_mode & 0o777) == "0o600"
    assert "u6-Pa55word" not in stored.read_text()  # keys derived from it, never the password
    e = await start(tmp_path)  # the same log directory
    try:
        assert await asyncio.to_thread(describe, e.plain, None) == {"u2": (0, None, [(SHA512, 8192)]),
                                                                      "u6": (0, None, [(SHA256, 4096)])}

        def auth() -> str:
            with WireClient(e.sasl) as c:
                c.authenticate("SCRAM-SHA-256", "u6", "u6-Pa55word")
                return metadata(c).cluster_id
        assert await asyncio.to_thread(auth)
        assert await asyncio.to_thread(alter, e.plain, [], [Deletion(name="u6", mechanism=SHA256)]) == {"u6": (0, None)}
        err, _, _ = await asyncio.to_thread(failure, e.sasl, "SCRAM-SHA-256", "u6", "u6-Pa55word")
        assert err.code == ErrorCode.SASL_AUTHENTICATION_FAILED
    finally:
        await e.srv.stop()


async def test_reauthentication_kip_368(tmp_path, caplog):
    caplog.set_level(logging.INFO, "kcoord.network")
    e = await start(tmp_path, **{"connections.max.reauth.ms": 1500,
                                 "listener.name.sasl_plaintext.scram-sha-256.connections.max.reauth.ms": 60000})
    try:
        await asyncio.to_thread(alter, e.plain, [upsert("bob", SHA256, "bob-pw")])

        def run() -> dict[str, object]:
            out: dict[str, object] = {}
            c = WireClient(e.sasl)
            first = c.authenticate("PLAIN", "alice", "alice-secret", auth_version=1)
            out["lifetime"] = first.session_lifetime_ms
            again = c.authenticate("PLAIN", "alice", "alice-secret", auth_version=2)  # re-authentication
            out["reauth_lifetime"] = again.session_lifetime_ms
            # at most one re-authentication a second: this SaslHandshake is answered as any other
            out["too_soon"] = c.handshake("PLAIN").error_code
            metadata(c)
            time.sleep(1.7)  # the session expires without re-authentication
            try:
                metadata(c)
                out["expired"] = "answered"
            except Closed:
                out["expired"] = "closed"
            c.close()
            # as Kafka's SocketServer: a SaslHandshake that comes after the session expired still
            # begins a re-authentication (only other requests are refused), and it goes on
            c = WireClient(e.sasl)
            c.authenticate("PLAIN", "alice", "alice-secret", auth_version=1)
            time.sleep(1.7)
            out["late_reauth"] = c.authenticate("PLAIN", "alice", "alice-secret", auth_version=2).session_lifetime_ms
            out["after_late_reauth"] = bool(metadata(c).cluster_id)
            c.close()
            c = WireClient(e.sasl)  # re-authenticating as someone else is refused
            c.authenticate("PLAIN", "alice", "alice-secret")
            try:
                c.authenticate("PLAIN", "admin", "admin-secret")
                out["switch"] = "accepted"
            except SaslFailed as err:
                out["switch"] = (err.code, err.message, c.closed_by_server())
            c.close()
            c = WireClient(e.sasl)  # the mechanism's own connections.max.reauth.ms
            out["scram_lifetime"] = c.authenticate("SCRAM-SHA-256", "bob", "bob-pw").session_lifetime_ms
            c.close()
            return out
        got = await asyncio.to_thread(run)
        assert got["lifetime"] == 1500 and got["reauth_lifetime"] == 1500
        assert got["too_soon"] == ErrorCode.ILLEGAL_SASL_STATE
        assert got["expired"] == "closed"
        assert got["late_reauth"] == 1500 and got["after_late_reauth"]
        assert got["switch"] == (ErrorCode.SASL_AUTHENTICATION_FAILED,
                                 "Cannot change principals during re-authentication from User.alice: User.admin", True)
        assert got["scram_lifetime"] == 60000
        assert any("Disconnecting expired channel" in r.getMessage() for r in caplog.records)
    finally:
        await e.srv.stop()


@pytest.mark.parametrize("extra, message", [
    ({"sasl.enabled.mechanisms": "GSSAPI"}, "SASL mechanism GSSAPI is not supported by kcoord"),
    ({"listener.name.sasl_plaintext.plain.sasl.jaas.config": ""}, "SASL/PLAIN needs its users"),
    ({"listener.name.sasl_plaintext.plain.sasl.jaas.config": "PlainLoginModule required user_a=\"x\""},
     "the entry must end with ';'"),
])
async def test_unusable_sasl_settings_stop_the_start_up(tmp_path, extra, message):
    cfg = settings(tmp_path, **extra)
    if not cfg["listener.name.sasl_plaintext.plain.sasl.jaas.config"]:
        del cfg["listener.name.sasl_plaintext.plain.sasl.jaas.config"]
    srv = Server(Config(cfg))
    with pytest.raises(ValueError, match=message):
        await srv.start()
    await srv.broker.stop()


async def test_kcoord_scram_makes_the_first_users_of_a_stopped_server(tmp_path):
    """`kcoord scram --add-scram 'SCRAM-SHA-256=[name=..,password=..]'` (kafka-storage.sh's syntax)
    writes credentials the server then authenticates; it refuses beside a running server."""
    import subprocess
    import sys

    from conftest import ROOT

    def scram(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "kcoord.server", "scram", "--override", f"log.dirs={tmp_path / 'data'}",
                               *args], cwd=ROOT, capture_output=True, text=True, timeout=60)
    made = scram("--add-scram", "SCRAM-SHA-512=[name=root,password=r00t-Secret,iterations=8192]", "--list")
    assert made.returncode == 0, made.stderr
    assert made.stdout.splitlines() == ["root\tSCRAM-SHA-512\titerations=8192"]
    assert "r00t-Secret" not in (tmp_path / "data" / "kcoord-scram-credentials.json").read_text()
    e = await start(tmp_path)
    try:
        def auth() -> str:
            with WireClient(e.sasl) as c:
                c.authenticate("SCRAM-SHA-512", "root", "r00t-Secret")
                return metadata(c).cluster_id
        assert await asyncio.to_thread(auth)
        busy = await asyncio.to_thread(scram, "--add-scram", "SCRAM-SHA-256=[name=x,password=y]")
        assert busy.returncode == 1 and "a server is using" in busy.stderr
    finally:
        await e.srv.stop()
