"""The pytest plugin (entry point `pytest11: kcoord`): kcoord as the Kafka of a test suite.

Fixtures
    kcoord_server    session: one kcoord started on free loopback ports in a temporary
                     directory, with its control API on (or the server named by
                     --kcoord-bootstrap / --kcoord-control-url).
    kcoord           each test: that server reset to a new one (no topic, group, offset,
                     producer state or fault of an earlier test; connections closed), then
                     the test's kcoord_error / kcoord_latency markers applied. A Kcoord:
                     .bootstrap, .control (ControlClient), .log_text() (this test's lines),
                     and restart() / kill() / stop() / start() of the server process.
    kcoord_bootstrap, kcoord_control
                     the same test's bootstrap servers and control client alone.
    akcoord          the asyncio variant of `kcoord` (reset awaited; .control is an
                     AsyncControlClient), when pytest-asyncio is installed.
    kcoord_factory   more servers of the test's own (overrides, log_dir), stopped after it.
    kcoord_cluster   a three-node cluster through ZooKeeper (kcoord/testing/cluster.py):
                     .bootstrap, kill(id) / stop(id) / start(id), controller(), state(t, p),
                     move_coordinator(group, id) / move_leader(topic, p, id);
                     kcoord_cluster_factory(nodes, overrides=..) for other sizes;
                     kcoord_cluster_factory(nodes, netns=True): each node in a network
                     namespace of its own, with cut_off(id) / heal(id) (root; skipped
                     otherwise).

Markers
    @pytest.mark.kcoord_error("OffsetCommit", "NOT_COORDINATOR", count=3, group_id="g")
    @pytest.mark.kcoord_latency(200, api="Fetch")

Options
    --kcoord-override NAME=VALUE (repeatable; ini: kcoord_overrides, one per line) for the
    session server; --kcoord-bootstrap HOST:PORT with --kcoord-control-url URL to use a kcoord
    that runs elsewhere (docker compose), reset between tests the same way.
"""
from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kcoord.testing.process import KcoordProcess


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("kcoord", "kcoord: a Kafka-compatible server for tests")
    group.addoption("--kcoord-override", action="append", default=[], metavar="NAME=VALUE",
                    help="a setting of the session's kcoord server (repeatable)")
    group.addoption("--kcoord-bootstrap", default=os.environ.get("KCOORD_BOOTSTRAP"),
                    help="use this running kcoord instead of starting one (with --kcoord-control-url)")
    group.addoption("--kcoord-control-url", default=os.environ.get("KCOORD_CONTROL_URL"),
                    help="the control API of the kcoord named by --kcoord-bootstrap")
    parser.addini("kcoord_overrides", "settings of the session's kcoord server, NAME=VALUE per line",
                  type="linelist", default=[])


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "kcoord_error(api, error, count=1, **filters): answer the next `count` "
                            "matching requests with this error (filters: group_id, client_id, topic, connection)")
    config.addinivalue_line("markers", "kcoord_latency(ms, **filters): delay matching requests (filters: api, "
                            "group_id, client_id, topic, connection)")


def _overrides(config: pytest.Config) -> dict[str, str]:
    out = {}
    for item in [*config.getini("kcoord_overrides"), *config.getoption("kcoord_override")]:
        name, sep, value = item.partition("=")
        if not sep:
            raise pytest.UsageError(f"kcoord override {item!r} is not NAME=VALUE")
        out[name.strip()] = value.strip()
    return out


class _External:
    """A kcoord the suite did not start: its bootstrap and control API only."""

    def __init__(self, bootstrap: str, control_url: str) -> None:
        from kcoord.server.control.client import AsyncControlClient, ControlClient

        self.bootstrap = bootstrap
        self.control_url = control_url
        self.control = ControlClient(control_url)
        self.async_control = AsyncControlClient(control_url)
        self.proc = None

    def alive(self) -> bool:
        return True

    def log_text(self) -> str:
        return ""


@pytest.fixture(scope="session")
def kcoord_server(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    config = request.config
    bootstrap, control_url = config.getoption("kcoord_bootstrap"), config.getoption("kcoord_control_url")
    if bootstrap or control_url:
        if not (bootstrap and control_url):
            raise pytest.UsageError("--kcoord-bootstrap and --kcoord-control-url go together")
        yield _External(bootstrap, control_url)
        return
    server = KcoordProcess(tmp_path_factory.mktemp("kcoord") / "data", overrides=_overrides(config), control=True)
    server.start()
    yield server
    if server.alive():
        server.stop()


class Kcoord:
    """One test's view of the session's server, freshly reset."""

    def __init__(self, server: Any, control: Any) -> None:
        self.server = server
        self.control = control
        self._log_from = len(server.log_text())

    @property
    def bootstrap(self) -> str:
        return self.server.bootstrap

    @property
    def bootstrap_servers(self) -> str:
        return self.server.bootstrap

    @property
    def port(self) -> int:
        return self.server.port

    @property
    def log_dir(self) -> Path:
        return self.server.log_dir

    @property
    def control_url(self) -> str:
        return self.server.control_url

    @property
    def overrides(self) -> dict[str, str]:
        return getattr(self.server, "overrides", {})

    @property
    def output(self) -> Path | None:
        """The server's log file (the whole session's; log_text() gives this test's part)."""
        return getattr(self.server, "output", None)

    @property
    def proc(self) -> Any:
        """The server's subprocess.Popen (None for a server the suite did not start)."""
        return self.server.proc

    def log_text(self) -> str:
        """What the server logged since this test began."""
        return self.server.log_text()[self._log_from:]

    # the process, for tests about restarts and crashes (the next test gets it back running)
    def start(self, timeout: float = 60.0) -> Kcoord:
        self.server.start(timeout)
        return self

    def stop(self, *args: Any, **kw: Any) -> int:
        return self.server.stop(*args, **kw)

    def kill(self) -> None:
        self.server.kill()

    def restart(self) -> Kcoord:
        self.server.restart()
        return self

    def alive(self) -> bool:
        return self.server.alive()


def _prepare(kcoord_server: Any) -> None:
    if kcoord_server.proc is not None and not kcoord_server.alive():
        kcoord_server.start()  # an earlier test stopped or killed it


def _markers(request: pytest.FixtureRequest) -> list[tuple[str, tuple[Any, ...], dict[str, Any]]]:
    out = []
    for m in request.node.iter_markers("kcoord_error"):
        out.append(("inject_error", m.args, m.kwargs))
    for m in request.node.iter_markers("kcoord_latency"):
        out.append(("add_latency", m.args, m.kwargs))
    return out


@pytest.fixture
def kcoord(kcoord_server: Any, request: pytest.FixtureRequest) -> Kcoord:
    _prepare(kcoord_server)
    control = kcoord_server.control
    control.reset()
    for method, args, kw in _markers(request):
        getattr(control, method)(*args, **kw)
    return Kcoord(kcoord_server, control)


@pytest.fixture
def kcoord_bootstrap(kcoord: Kcoord) -> str:
    return kcoord.bootstrap


@pytest.fixture
def kcoord_control(kcoord: Kcoord) -> Any:
    return kcoord.control


@pytest.fixture
def kcoord_factory(tmp_path: Path) -> Iterator[Any]:
    """make(overrides=None, log_dir=None, control=False) -> a started KcoordProcess of this test."""
    started: list[KcoordProcess] = []

    def make(overrides: dict[str, str] | None = None, log_dir: Path | None = None,
             control: bool = False) -> KcoordProcess:
        srv = KcoordProcess(log_dir or tmp_path / f"data{len(started)}", overrides=overrides, control=control)
        started.append(srv)
        return srv.start()

    yield make
    for srv in started:
        if srv.alive():
            srv.stop()


try:
    import pytest_asyncio
except ImportError:  # pragma: no cover - the asyncio fixture needs pytest-asyncio
    pytest_asyncio = None

if pytest_asyncio is not None:

    @pytest_asyncio.fixture
    async def akcoord(kcoord_server: Any, request: pytest.FixtureRequest) -> Kcoord:
        """`kcoord` for asyncio tests: the reset and markers awaited on the test's loop."""
        _prepare(kcoord_server)
        control = kcoord_server.async_control
        await control.reset()
        for method, args, kw in _markers(request):
            await getattr(control, method)(*args, **kw)
        return Kcoord(kcoord_server, control)


@pytest.fixture(scope="session")
def kcoord_zookeeper(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """One ZooKeeper (Debian's package) for the session's clusters; each cluster gets its
    own chroot in it."""
    from kcoord.server.cluster.zookeeper_server import ZooKeeperServer

    zk = ZooKeeperServer(tmp_path_factory.mktemp("zookeeper")).start()
    yield zk.connect
    zk.stop()


@pytest.fixture
def kcoord_cluster_factory(tmp_path: Path, kcoord_zookeeper: str, request: pytest.FixtureRequest) -> Iterator[Any]:
    """make(nodes=3, overrides=None, session_timeout_ms=6000, racks=None, netns=False) -> a
    started KcoordCluster (kcoord/testing/cluster.py) in its own ZooKeeper chroot; closed after
    the test. Its nodes serve the control API (control=True; not with netns), so
    move_coordinator(group, id) / move_leader(topic, p, id) work. netns=True: every node in a network namespace of its own and a ZooKeeper of the
    cluster's own on the namespaces' bridge (cut_off(id) / heal(id)); the test is skipped
    where namespaces cannot be made (not root, no `ip` or `nft`)."""
    from kcoord.testing.cluster import KcoordCluster

    made: list[KcoordCluster] = []

    def make(nodes: int = 3, **kwargs: Any) -> KcoordCluster:
        chroot = f"/kcoord-{request.node.name[:60]}-{len(made)}".replace("[", "_").replace("]", "_")
        zookeeper: str | None = kcoord_zookeeper + chroot
        if kwargs.get("netns"):
            from kcoord.testing.netns import available

            if (why := available()) is not None:
                pytest.skip(f"network namespaces: {why}")
            zookeeper = None  # the nodes reach only a ZooKeeper on their bridge
        kwargs.setdefault("control", not kwargs.get("netns"))  # move_coordinator / move_leader
        cluster = KcoordCluster(tmp_path / f"cluster{len(made)}", nodes, zookeeper=zookeeper, **kwargs)
        made.append(cluster)
        return cluster.start()

    yield make
    for c in made:
        c.close()


@pytest.fixture
def kcoord_cluster(kcoord_cluster_factory: Any) -> Any:
    """A started three-node cluster (KcoordCluster)."""
    return kcoord_cluster_factory(3)
