"""Listeners with Kafka's names and semantics: several at once, named listeners mapped through
listener.security.protocol.map, advertised.listeners per listener, and Metadata /
FindCoordinator answering with the endpoint of the listener the client connected to."""
from __future__ import annotations

import subprocess
import sys

import pytest
from conftest import ROOT, call, free_port
from kafka.protocol.metadata import FindCoordinatorRequest, MetadataRequest

from kcoord.protocol.errors import ErrorCode
from kcoord.server.app import Server
from kcoord.server.config import Config
from kcoord.server.listeners import SecurityProtocol


def _metadata(bootstrap: str, version: int = 12, topics: list[str] | None = None):
    wanted = None if topics is None else [MetadataRequest.MetadataRequestTopic(name=t) for t in topics]
    return call(bootstrap, MetadataRequest(version=version, topics=wanted, allow_auto_topic_creation=False,
                                           include_topic_authorized_operations=False), version)


def _coordinator(bootstrap: str, version: int):
    return call(bootstrap, FindCoordinatorRequest(version=version, key="g", key_type=0, coordinator_keys=["g"]),
                version)


async def _server(tmp_path, **overrides: str) -> Server:
    srv = Server(Config({"log.dirs": str(tmp_path / "data"), "group.initial.rebalance.delay.ms": 0,
                         "offsets.topic.num.partitions": 2, **overrides}))
    await srv.start()
    return srv


async def test_each_client_is_answered_with_the_endpoint_of_its_listener(tmp_path):
    p1, p2 = free_port(), free_port()
    srv = await _server(
        tmp_path,
        listeners=f"PLAINTEXT://127.0.0.1:{p1},INTERNAL://127.0.0.1:{p2},EXTRA://127.0.0.1:0",
        **{"listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,INTERNAL:PLAINTEXT,EXTRA:PLAINTEXT",
           "advertised.listeners": f"PLAINTEXT://public.example:19092,INTERNAL://127.0.0.1:{p2},"
                                   "EXTRA://127.0.0.1:0"})
    try:
        assert [lst.name for lst in srv.listeners] == ["PLAINTEXT", "INTERNAL", "EXTRA"]
        assert all(lst.protocol == SecurityProtocol.PLAINTEXT for lst in srv.listeners)
        extra = srv.listener("extra")
        assert extra.bound_port not in (0, p1, p2)  # port 0: any free port, advertised as bound
        expected = {f"127.0.0.1:{p1}": ("public.example", 19092), f"127.0.0.1:{p2}": ("127.0.0.1", p2),
                    f"127.0.0.1:{extra.bound_port}": ("127.0.0.1", extra.bound_port)}
        for bootstrap, (host, port) in expected.items():
            for v in (0, 1, 9, 12):
                md = await _run(_metadata, bootstrap, v)
                assert [(b.host, b.port) for b in md.brokers] == [(host, port)], (bootstrap, v)
            old = await _run(_coordinator, bootstrap, 2)
            assert (old.error_code, old.host, old.port) == (0, host, port)
            new = await _run(_coordinator, bootstrap, 4)
            c = new.coordinators[0]
            assert (c.error_code, c.host, c.port) == (0, host, port)
    finally:
        await srv.stop()


async def test_a_listener_missing_from_advertised_listeners_is_not_advertised(tmp_path):
    """Kafka leaves the broker out of the metadata of clients on a listener it does not
    advertise: no brokers, partitions without a leader (LISTENER_NOT_FOUND from Metadata v6,
    LEADER_NOT_AVAILABLE before), FindCoordinator COORDINATOR_NOT_AVAILABLE."""
    srv = await _server(tmp_path, listeners="PLAINTEXT://127.0.0.1:0,HIDDEN://127.0.0.1:0",
                        **{"listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,HIDDEN:PLAINTEXT",
                           "advertised.listeners": "PLAINTEXT://127.0.0.1:0"})
    try:
        srv.broker.create_topic("t", 2, {})
        hidden = f"127.0.0.1:{srv.listener('HIDDEN').bound_port}"
        shown = f"127.0.0.1:{srv.listener('PLAINTEXT').bound_port}"
        md = await _run(_metadata, hidden, 12, ["t"])
        assert md.brokers == []
        assert {p.error_code for p in md.topics[0].partitions} == {ErrorCode.LISTENER_NOT_FOUND}
        assert {p.leader_id for p in md.topics[0].partitions} == {-1}
        md5 = await _run(_metadata, hidden, 5, ["t"])
        assert {p.error_code for p in md5.topics[0].partitions} == {ErrorCode.LEADER_NOT_AVAILABLE}
        assert (await _run(_coordinator, hidden, 3)).error_code == ErrorCode.COORDINATOR_NOT_AVAILABLE
        assert (await _run(_coordinator, hidden, 4)).coordinators[0].error_code == ErrorCode.COORDINATOR_NOT_AVAILABLE
        ok = await _run(_metadata, shown, 12, ["t"])
        assert [b.port for b in ok.brokers] == [srv.listener("PLAINTEXT").bound_port]
        assert {p.error_code for p in ok.topics[0].partitions} == {0}
    finally:
        await srv.stop()


async def _run(fn, *args):
    import asyncio

    return await asyncio.to_thread(fn, *args)


@pytest.mark.parametrize("overrides, message", [
    ({"listeners": "INTERNAL://127.0.0.1:{p}"}, "No security protocol defined for listener INTERNAL"),
    ({"listeners": "PLAINTEXT://127.0.0.1:{p},PLAINTEXT://127.0.0.1:{q}"}, "Each listener must have a different name"),
    ({"listeners": "PLAINTEXT://127.0.0.1:{p},SSL://127.0.0.1:{p}"}, "Each listener must have a different port"),
    ({"advertised.listeners": "SSL://example:1"}, "advertised.listeners listener names must be equal to or a subset"),
    ({"advertised.listeners": "PLAINTEXT://0.0.0.0:{p}"}, "cannot use the nonroutable meta-address 0.0.0.0"),
    ({"listener.security.protocol.map": "PLAINTEXT:TLS"}, "is not a security protocol"),
    ({"listeners": "PLAINTEXT:/127.0.0.1"}, "Unable to parse PLAINTEXT:/127.0.0.1 to a broker endpoint"),
])
def test_a_bad_listener_configuration_is_refused_at_start_up(tmp_path, overrides, message):
    p, q = free_port(), free_port()
    opts = {"listeners": f"PLAINTEXT://127.0.0.1:{p}", "log.dirs": str(tmp_path / "d"),
            **{k: v.format(p=p, q=q) for k, v in overrides.items()}}
    args = [sys.executable, "-m", "kcoord.server", "serve"]
    for k, v in opts.items():
        args += ["--override", f"{k}={v}"]
    r = subprocess.run(args, cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert r.returncode == 2, r.stderr
    assert message in r.stderr
