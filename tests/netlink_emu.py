"""A faulty network link between test clients and the server, made by the test itself.

Clients run in a network namespace of their own (`ip netns add`); their only way to the
server is a point-to-point link made of two TUN devices, one in their namespace and one in
the test's, with link-local addresses (169.254.x.y: never routed off the machine). The test
process forwards every IP packet between the two devices, delaying each direction by a
latency and dropping a share of the packets at random, or all of them while the link is cut:
the kernel's TCP on both ends sees real delay and real loss (retransmissions, RTO backoff,
connections that time out), as with `tc netem`. Why not netem itself: the kernels of the
machines this project is tested on are built without sch_netem (`tc qdisc add ... netem`
answers "Specified qdisc kind is unknown"); TUN devices and namespaces are there.

The server listens on the test-side address (it is a local address of the machine), so
processes started normally reach it directly and only processes started with `exec_args`
go through the link.
"""
from __future__ import annotations

import fcntl
import heapq
import itertools
import os
import random
import select
import shutil
import struct
import subprocess
import threading
import time
from types import TracebackType

_TUNSETIFF = 0x400454CA
_IFF_TUN, _IFF_NO_PI = 0x0001, 0x1000


class NetnsUnavailable(RuntimeError):
    """Namespaces or TUN devices cannot be made here (not root, no iproute2, a sandbox)."""


def _sh(*args: str) -> None:
    r = subprocess.run(list(args), capture_output=True, text=True, timeout=30)
    if r.returncode != 0:
        raise NetnsUnavailable(f"`{' '.join(args)}` failed: {r.stderr.strip()}")


def _tun(name: str) -> int:
    fd = os.open("/dev/net/tun", os.O_RDWR)
    try:
        fcntl.ioctl(fd, _TUNSETIFF, struct.pack("16sH", name.encode(), _IFF_TUN | _IFF_NO_PI))
    except OSError:
        os.close(fd)
        raise
    return fd


class FaultyLink:
    """A namespace behind an emulated link; use as a context manager.

    latency_s: added to each direction; loss: the share of packets dropped in each direction."""

    _ids = itertools.count()

    def __init__(self, latency_s: float = 0.0, loss: float = 0.0, seed: int = 17) -> None:
        n = f"{os.getpid() % 10000}{next(self._ids)}"
        self.netns = f"kcoord-net-{n}"
        self.dev_client, self.dev_server = f"kcc{n}", f"kcs{n}"
        octet = 10 + (os.getpid() + int(n)) % 240
        self.server_ip, self.client_ip = f"169.254.{octet}.1", f"169.254.{octet}.2"
        self.latency_s = latency_s
        self.loss = loss
        self.cut = False
        self.forwarded = self.dropped = 0
        self._random = random.Random(seed)
        self._fds: tuple[int, int] | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._forward, name="faulty-link", daemon=True)

    # -- setting up and tearing down --

    def __enter__(self) -> FaultyLink:
        if os.geteuid() != 0:
            raise NetnsUnavailable("network namespaces need root")
        if shutil.which("ip") is None:
            raise NetnsUnavailable("iproute2's `ip` is not installed")
        if not os.path.exists("/dev/net/tun"):
            raise NetnsUnavailable("no /dev/net/tun")
        _sh("ip", "netns", "add", self.netns)
        try:
            client, server = _tun(self.dev_client), _tun(self.dev_server)
            self._fds = (client, server)
            ns = ("ip", "netns", "exec", self.netns)
            _sh("ip", "link", "set", self.dev_client, "netns", self.netns)
            _sh(*ns, "ip", "link", "set", "lo", "up")
            _sh(*ns, "ip", "addr", "add", self.client_ip, "peer", self.server_ip, "dev", self.dev_client)
            _sh(*ns, "ip", "link", "set", self.dev_client, "up")
            _sh("ip", "addr", "add", self.server_ip, "peer", self.client_ip, "dev", self.dev_server)
            _sh("ip", "link", "set", self.dev_server, "up")
        except (NetnsUnavailable, OSError) as e:
            self._teardown()
            raise NetnsUnavailable(str(e)) from None
        self._thread.start()
        return self

    def __exit__(self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None) -> None:
        self._stop.set()
        self._thread.join(5)
        self._teardown()

    def _teardown(self) -> None:
        subprocess.run(["ip", "netns", "del", self.netns], capture_output=True, timeout=30)
        if self._fds is not None:
            for fd in self._fds:  # closing a TUN fd deletes its device
                os.close(fd)
            self._fds = None

    def exec_args(self, *argv: str) -> list[str]:
        """argv run inside the namespace: its traffic to server_ip crosses the link."""
        return ["ip", "netns", "exec", self.netns, *argv]

    # -- the link --

    def set(self, *, latency_s: float | None = None, loss: float | None = None, cut: bool | None = None) -> None:
        if latency_s is not None:
            self.latency_s = latency_s
        if loss is not None:
            self.loss = loss
        if cut is not None:
            self.cut = cut

    def _forward(self) -> None:
        assert self._fds is not None
        client, server = self._fds
        peer = {client: server, server: client}
        queue: list[tuple[float, int, int, bytes]] = []  # (due, seq, fd to write, packet)
        seq = itertools.count()
        while not self._stop.is_set():
            now = time.monotonic()
            while queue and queue[0][0] <= now:
                _, _, out, pkt = heapq.heappop(queue)
                try:
                    os.write(out, pkt)
                    self.forwarded += 1
                except OSError:  # the device went away (teardown) or refused the packet
                    self.dropped += 1
            timeout = min(0.05, max(0.0, queue[0][0] - now)) if queue else 0.05
            try:
                ready, _, _ = select.select([client, server], [], [], timeout)
            except (OSError, ValueError):
                return
            for fd in ready:
                try:
                    pkt = os.read(fd, 65536)
                except OSError:
                    continue
                if self.cut or self._random.random() < self.loss:
                    self.dropped += 1
                    continue
                # one latency per direction, FIFO within a direction (no reordering)
                heapq.heappush(queue, (time.monotonic() + self.latency_s, next(seq), peer[fd], pkt))
