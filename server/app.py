"""Run the server: listeners on uvloop, signal handling, orderly shutdown.

SIGTERM/SIGINT: stop accepting, let requests in flight finish (bounded), flush, exit 0.
A log directory taken offline by an I/O error (storage/log_dir_failure.py) with none left
online: halt with exit code 1 at once, without a shutdown that would flush, as Kafka halts.
"""
from __future__ import annotations

import asyncio
import gc
import logging
import os
import resource
import signal
import sys
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

import uvloop

from kcoord.server.broker import Broker, LogDirLocked
from kcoord.server.config import Config
from kcoord.server.listeners import Listener, listener_specs
from kcoord.server.metrics import start_metrics_server
from kcoord.server.node import (
    configured_listener,
    connection_factory,
    control_plane,
    dispatcher_for,
    metrics_page,
    start_cluster_node,
    virtual_cluster,
)
from kcoord.storage.log_dir_failure import LogDirFailureChannel

log = logging.getLogger("kcoord.server")
GC_YOUNG_THRESHOLD = 10_000  # allocations between young-generation collections (`kcoord serve`)

_DRAIN_SECONDS = 5.0


class KafkaFormatter(logging.Formatter):
    """Kafka's log4j layout: `[2026-01-01 00:00:00,000] INFO message (logger)`."""

    def format(self, record: logging.LogRecord) -> str:
        t = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(record.created))
        msg = f"[{t},{int(record.msecs):03d}] {record.levelname} {record.getMessage()} ({record.name})"
        if record.exc_info:
            msg += "\n" + self.formatException(record.exc_info)
        return msg


def setup_logging(level: str = "INFO") -> None:
    handler = logging.StreamHandler()
    handler.setFormatter(KafkaFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())


def _raise_open_files_limit() -> None:
    """Every connection and every segment (.log, .index, .timeindex) holds a descriptor: use
    the hard limit, as Kafka's docs ask operators to (a soft 1024 runs out quickly)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or soft < hard:
        target = hard if hard != resource.RLIM_INFINITY else max(soft, 1_048_576)
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        except (ValueError, OSError) as e:
            log.warning("Could not raise the open files limit from %d: %s", soft, e)


class Server:
    """A started broker with its listening sockets; usable from tests in-process."""

    def __init__(self, config: Config) -> None:
        self.config = config
        self.broker = Broker(config)
        self.dispatcher = dispatcher_for(self.broker)
        self._servers: list[asyncio.base_events.Server] = []
        self.listeners: list[Listener] = []  # one per configured listener, in configuration order
        self.bound: list[tuple[str, int]] = []
        self.metrics_bound: tuple[str, int] | None = None
        self.control: Any = None  # kcoord.server.control.plane.ControlPlane when kcoord.control.listener is set
        self.control_bound: tuple[str, int] | None = None

    def listener(self, name: str) -> Listener:
        """The bound listener of that name (KeyError if there is none)."""
        for lst in self.listeners:
            if lst.name == name.upper():
                return lst
        raise KeyError(name)

    async def start(self) -> None:
        _raise_open_files_limit()
        for name in sorted(self.config.unknown):
            log.warning("The configuration '%s' was supplied but isn't a known config.", name)
        for name in sorted(self.config.ignored):
            log.debug("The configuration '%s' is a Kafka broker config kcoord does not use; ignored.", name)
        await self.broker.start()
        control_at = self.config["kcoord.control.listener"]
        virtual = self.config["kcoord.virtual.brokers"]
        if control_at or virtual > 1:  # before the Kafka listeners: every connection's first request is seen
            self.control = control_plane(self.broker, self.dispatcher, lambda: self.bound)
        # a cluster node binds its listeners (their addresses register) but serves them only once
        # it has joined: until then it knows neither the cluster's metadata nor its replicas, and
        # a request answered then would be answered as a single node's (Kafka's
        # enableRequestProcessing at the end of its startup)
        joining = bool(self.config["zookeeper.connect"])
        for spec in listener_specs(self.config):
            await self.serve_listener(configured_listener(spec, self.broker), serving=not joining)
        metrics_at = self.config["kcoord.metrics.listener"]
        if metrics_at:
            parts = urlsplit(metrics_at if "//" in metrics_at else "http://" + metrics_at)
            srv = await start_metrics_server(parts.hostname or "127.0.0.1", parts.port or 9404,
                                             metrics_page(self.broker))
            self._servers.append(srv)
            self.metrics_bound = srv.sockets[0].getsockname()[:2]
            log.info("Prometheus metrics on http://%s:%d/metrics", *self.metrics_bound)
        if virtual > 1:
            configured = list(self.listeners)
            bound = {addr for lst in configured for addr in lst.bound}
            servers = [srv for srv in self._servers if any(s.getsockname()[:2] in bound for s in srv.sockets)]
            await self.control.start_virtual(virtual_cluster(self.broker, virtual, self.control.state, configured,
                                                             servers, self.rebind))
        if control_at:  # last: once it answers, every listener is up
            await self._start_control_http(control_at)
        if joining:  # a cluster node (docs/cluster.md); its code is imported only then
            await start_cluster_node(self.broker, list(self.listeners))
            await asyncio.sleep(0)  # the metadata cache's first notification (call_soon) applies the states
            for srv in self._servers:
                if not srv.is_serving():
                    await srv.start_serving()
        self.broker.start_background()
        log.info("kcoord listening on %s", ", ".join(lst.describe() for lst in self.listeners))

    async def serve_listener(self, listener: Listener, serving: bool = True) -> Listener:
        """Bind one listener and serve Kafka connections on it (its `bound` addresses are filled
        in); usable for listeners beyond the configured ones. `serving` False: bound only (not
        listening: connections are refused) until its server's start_serving."""
        loop = asyncio.get_running_loop()
        connection = connection_factory(self.broker, self.dispatcher, listener,
                                        self.control.intercept if self.control is not None else None)
        factory: Callable[[], asyncio.BaseProtocol] = connection
        if listener.ssl_context is not None:  # the TLS handshake first, then the Kafka protocol
            from kcoord.server.security.tls_transport import tls_protocol_factory

            factory = tls_protocol_factory(listener.ssl_context, connection)
        srv = await loop.create_server(
            factory,
            host=listener.host or None,
            port=listener.port,
            reuse_address=True,
            backlog=1024,
            start_serving=serving,
        )
        self._servers.append(srv)
        for sock in srv.sockets:
            addr = sock.getsockname()[:2]
            listener.bound.append(addr)
            self.bound.append(addr)
        self.listeners.append(listener)
        return listener

    async def rebind(self, listener: Listener) -> list[asyncio.base_events.Server]:
        """Serve a listener again (a virtual broker's, server/virtual/), forgetting the addresses
        it had; returns its asyncio servers."""
        for addr in listener.bound:
            if addr in self.bound:
                self.bound.remove(addr)
        listener.bound.clear()
        if listener in self.listeners:
            self.listeners.remove(listener)
        before = len(self._servers)
        await self.serve_listener(listener)
        return self._servers[before:]

    async def _start_control_http(self, url: str) -> None:
        """The control API's HTTP listener (server/control/): imported only when it is on."""
        from kcoord.server.control.api import make_handler
        from kcoord.server.control.http import start_http_server

        parts = urlsplit(url if "//" in url else "http://" + url)
        srv = await start_http_server(parts.hostname or "127.0.0.1", parts.port or 0, make_handler(self.control))
        self._servers.append(srv)
        self.control_bound = srv.sockets[0].getsockname()[:2]
        log.info("Control API on http://%s:%d", *self.control_bound)

    async def stop(self) -> None:
        cluster = self.broker.cluster
        if cluster is not None and self.config["controlled.shutdown.enable"]:
            await cluster.controlled_shutdown(self.config["zookeeper.session.timeout.ms"] / 1000)
        for srv in self._servers:
            srv.close()
        if self.control is not None:
            self.control.shutdown()  # held (stalled) requests would hold the drain below
        # Long polls answer now with what they have instead of holding their connections.
        data_plane = self.broker.parts.data_plane.built()
        if data_plane is not None:
            data_plane.complete_parked()
        replicas = getattr(cluster, "replicas", None)
        if replicas is not None and hasattr(replicas, "stop"):  # fetchers; parked acks=all answer
            try:
                await asyncio.wait_for(replicas.stop(), _DRAIN_SECONDS)
            except TimeoutError:
                log.warning("The replica manager did not stop in %.0f s", _DRAIN_SECONDS)
            except Exception:  # noqa: BLE001 - the logs below must still be flushed and closed
                log.exception("Stopping the replica manager failed")
            log.info("Replica manager stopped")
        deadline = time.monotonic() + _DRAIN_SECONDS
        while any(c.busy for c in self.broker.connections) and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        if cluster is not None:
            await cluster.stop()
            log.info("Left the cluster")
        await self.broker.stop()
        for conn in list(self.broker.connections):
            conn.close()
        for srv in self._servers:
            await srv.wait_closed()
        log.info("kcoord shut down")


async def _serve(config: Config) -> int:
    server = Server(config)
    # Before the listeners open: a SIGTERM that arrives as soon as a client can connect must
    # stop the server cleanly, not kill it with the default action.
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    try:
        await server.start()
    except (LogDirLocked, OSError, ValueError) as e:
        log.error("Could not start: %s", e)
        return 1
    finally:
        gc.enable()  # `kcoord serve` starts with it off (server/cli.py)
        # Every request allocates a few short-lived objects (a durable commit about fifteen,
        # alive until its fdatasync): a young-generation collection every 700 allocations,
        # Python's default, costs a commit about 0.6 us of the event loop's CPU; every 10,000
        # costs a tenth of that. What survives is collected by the older generations as before.
        gc.set_threshold(GC_YOUNG_THRESHOLD, *gc.get_threshold()[1:])
    assert server.broker.logs is not None
    failures = server.broker.logs.failures
    failures.add_listener(lambda _dir: _halt_if_no_log_dir_left(loop, failures))
    await stop.wait()
    log.info("Shutting down")
    await server.stop()
    return 0


def _halt_if_no_log_dir_left(loop: asyncio.AbstractEventLoop, failures: LogDirFailureChannel) -> None:
    """Kafka's LogManager: with no log directory left online the broker halts (exit code 1,
    no orderly shutdown: a flush could now report written what the disk lost). The halt waits
    for the end of the loop turn that found the failure, so the requests waiting on the failed
    writes are answered with their error first; none of them is acknowledged."""
    if failures.online:
        return
    log.critical("Shutdown broker because all log dirs in %s have failed", ", ".join(sorted(failures.offline)))

    def halt() -> None:
        logging.shutdown()
        os._exit(1)

    loop.call_soon(halt)


def serve(config: Config) -> int:
    """Run the server until SIGTERM / SIGINT; once it has stopped in order (every log flushed
    and closed, "kcoord shut down" logged) the process exits at once: a call still waiting in a
    worker thread (a ZooKeeper request or reconnection, a name lookup) holds nothing that must
    reach the disk, and must not hold the exit (asyncio's own shutdown would wait for it)."""
    setup_logging(config["log.level"])
    loop = uvloop.new_event_loop()
    asyncio.set_event_loop(loop)
    rc = loop.run_until_complete(_serve(config))
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(rc)
