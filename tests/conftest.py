"""Shared fixtures: the real kcoord server (through kcoord's pytest plugin), clients, helpers."""
from __future__ import annotations

import os
import socket
import struct
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from kcoord.protocol.api import API_TABLE

# The servers come from kcoord's own pytest plugin (kcoord/testing/plugin.py), which this suite
# uses as any project would: `kcoord` is the session's server reset for each test (restart(),
# kill() and the like act on it; the next test gets it back running), `kcoord_factory` starts
# a test's own servers with their settings. KcoordProcess and free_port are re-exported for
# the tests that import them from here.
from kcoord.testing.process import KcoordProcess, free_port  # noqa: F401

ROOT = Path(__file__).resolve().parent.parent


def pytest_configure(config):
    if not config.pluginmanager.hasplugin("kcoord"):
        raise pytest.UsageError("kcoord's pytest plugin is not installed in this venv: run `make setup` "
                                "(pip install -e .), which registers its pytest11 entry point")


def call(bootstrap: str, request, version: int):
    """One request on a fresh connection, the way any client frames it (header v1/v2)."""
    spec = API_TABLE[request.API_KEY]
    header = struct.pack(">hhih", request.API_KEY, version, 7, 4) + b"test"
    if spec.request_header_version(version) >= 2:
        header += b"\x00"
    payload = header + bytes(request.encode(version=version))
    host, port = bootstrap.split(":")
    with socket.create_connection((host, int(port)), timeout=10) as s:
        s.sendall(struct.pack(">i", len(payload)) + payload)
        size = struct.unpack(">i", _read(s, 4))[0]
        body = _read(s, size)[4 + spec.response_header_version(version):]
    return spec.response.decode(body, version=version)


def _read(s: socket.socket, n: int) -> bytes:
    buf = b""
    while len(buf) < n:
        chunk = s.recv(n - len(buf))
        assert chunk, "connection closed"
        buf += chunk
    return buf


def committed(bootstrap: str, group: str, topic: str) -> dict[int, int]:
    """partition -> committed offset of `group` on `topic`, through kafka-python's admin client."""
    from kafka.admin import KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=15000)
    try:
        got = admin.list_group_offsets({group: None})[group]
        return {tp.partition: om.offset for tp, om in got.items() if tp.topic == topic}
    finally:
        admin.close()


def removals(srv: KcoordProcess, group: str) -> tuple[int, int]:
    """(members of `group` that left with a LeaveGroup, members removed when their session
    expired), from the server's log. What proves a take-over followed a LeaveGroup, however
    slow the machine made it."""
    text = srv.log_text()
    return (text.count(f"has left group {group} through explicit"), text.count(f"in group {group} has failed"))


def unique(prefix: str) -> str:
    """A name no other test (or earlier run on the same server) uses."""
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def members() -> Iterator[list]:
    """Background client processes a test starts (tests/clientlib.py); whatever is still
    running at the end is SIGKILLed."""
    started: list = []
    yield started
    for m in started:
        if m.alive():
            m.kill()


def pytest_collection_modifyitems(config, items):  # noqa: ARG001
    # Every test gets a hard ceiling so a client that retries forever cannot hang CI.
    for item in items:
        if item.get_closest_marker("timeout") is None:
            item.add_marker(pytest.mark.timeout(int(os.environ.get("KCOORD_TEST_TIMEOUT", "180"))))


# ---- the client compatibility matrix of docs/compatibility.md (scripts/compat_matrix.py) ----
#
# A test marked `@pytest.mark.compat(client, *features)` backs those cells of the matrix. The
# markers travel with each test's reports (user_properties, so they survive xdist too); at the
# end of a session that ran at least one such test, .cache/compat-results.json records every
# (client, features, outcome), which scripts/compat_matrix.py turns into docs/compatibility.md's table.

COMPAT_RESULTS = ROOT / ".cache" / "compat-results.json"
_compat_outcomes: dict[str, dict] = {}


def pytest_itemcollected(item):
    cells = [[m.args[0], list(m.args[1:])] for m in item.iter_markers("compat") if m.args]
    if cells:
        item.user_properties.append(("compat", cells))


def pytest_runtest_logreport(report):
    cells = next((v for k, v in report.user_properties if k == "compat"), None)
    if cells is None:
        return
    entry = _compat_outcomes.setdefault(report.nodeid, {"cells": cells, "outcome": None})
    if report.failed:
        entry["outcome"] = "failed"
    elif report.skipped and entry["outcome"] != "failed":
        entry["outcome"] = "skipped"
    elif report.when == "call" and report.passed and entry["outcome"] is None:
        entry["outcome"] = "passed"


def pytest_sessionfinish(session, exitstatus):
    ran = {nodeid: e for nodeid, e in _compat_outcomes.items() if e["outcome"] in ("passed", "failed")}
    if not ran:
        return
    import json
    from datetime import UTC, datetime

    args = " ".join(str(a) for a in session.config.invocation_params.args)
    results = [{"nodeid": nodeid, "client": client, "features": features, "outcome": e["outcome"]}
               for nodeid, e in sorted(ran.items()) for client, features in e["cells"]]
    COMPAT_RESULTS.parent.mkdir(parents=True, exist_ok=True)
    tmp = COMPAT_RESULTS.with_suffix(".tmp")
    tmp.write_text(json.dumps({
        "generated": datetime.now(UTC).isoformat(timespec="seconds"),
        "command": f"python -m pytest {args}".strip(),
        "exitstatus": int(exitstatus),
        "results": results,
    }, indent=1) + "\n")
    tmp.replace(COMPAT_RESULTS)
