"""ZooKeeper from the asyncio loop: a kazoo client (which runs its own threads) whose calls
are awaited and whose watches and session changes arrive in the loop
(call_soon_threadsafe), so the rest of the cluster layer is single-threaded like the node."""
from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from kazoo.client import KazooClient
from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError, NotEmptyError
from kazoo.protocol.states import KazooState

log = logging.getLogger("kcoord.cluster.zk")

__all__ = ["BadVersionError", "NoNodeError", "NodeExistsError", "NotEmptyError", "Zk"]


class Zk:
    def __init__(self, connect: str, session_timeout_ms: int, connection_timeout_ms: int,
                 loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.connection_timeout = connection_timeout_ms / 1000
        # a chroot (host:port/path), as Kafka's: created at the first connection if missing
        hosts, slash, chroot = connect.partition("/")
        self.chroot = slash + chroot.rstrip("/") if chroot.strip("/") else ""
        self.client = KazooClient(hosts=hosts, timeout=session_timeout_ms / 1000,
                                  connection_retry={"max_tries": -1, "delay": 0.2, "max_delay": 1.0},
                                  logger=logging.getLogger("kcoord.cluster.kazoo"))
        self._state_listeners: list[Callable[[str], None]] = []
        self.client.add_listener(self._on_state)

    def _on_state(self, state: str) -> None:  # kazoo's thread
        self.loop.call_soon_threadsafe(self._dispatch_state, state)

    def _dispatch_state(self, state: str) -> None:
        for fn in list(self._state_listeners):
            fn(state)

    def on_state(self, fn: Callable[[str], None]) -> None:
        """fn(KazooState.CONNECTED | SUSPENDED | LOST), in the loop."""
        self._state_listeners.append(fn)

    @property
    def connected(self) -> bool:
        return self.client.state == KazooState.CONNECTED

    @property
    def session_id(self) -> int | None:
        sid = self.client.client_id
        return sid[0] if sid else None

    async def start(self) -> None:
        """Connect, or raise TimeoutError after zookeeper.connection.timeout.ms."""
        event = self.client.start_async()
        ok = await self.loop.run_in_executor(None, event.wait, self.connection_timeout)
        if not ok or not self.connected:
            await self.stop()
            raise TimeoutError(f"Timed out waiting for connection to ZooKeeper while in state: {self.client.state}")
        if self.chroot:
            await self.ensure_path(self.chroot)
            self.client.chroot = self.chroot

    async def stop(self) -> None:
        """Close the session (its ephemeral znodes go at once)."""
        await self.loop.run_in_executor(None, self._close)

    def _close(self) -> None:
        try:
            self.client.stop()
            self.client.close()
        except Exception:  # noqa: BLE001 - best effort at shutdown
            log.debug("closing the ZooKeeper client", exc_info=True)

    def _wrap(self, async_result: Any) -> asyncio.Future[Any]:
        fut: asyncio.Future[Any] = self.loop.create_future()

        def done(result: Any) -> None:  # kazoo's thread
            self.loop.call_soon_threadsafe(_settle, fut, result)

        async_result.rawlink(done)
        return fut

    def _watch(self, fn: Callable[[Any], None] | None) -> Callable[[Any], None] | None:
        if fn is None:
            return None
        return lambda event: self.loop.call_soon_threadsafe(fn, event)

    # ---- the operations, awaited; watches (one-shot, as ZooKeeper's) are called in the loop

    async def get(self, path: str, watch: Callable[[Any], None] | None = None) -> tuple[bytes, int]:
        """(data, zk version); NoNodeError when absent."""
        data, stat = await self._wrap(self.client.get_async(path, watch=self._watch(watch)))
        return data, stat.version

    async def get_or_none(self, path: str, watch: Callable[[Any], None] | None = None) -> tuple[bytes, int] | None:
        if watch is not None:  # a watch that also fires on creation: exists first
            stat = await self._wrap(self.client.exists_async(path, watch=self._watch(watch)))
            if stat is None:
                return None
        try:
            return await self.get(path)
        except NoNodeError:
            return None

    async def stat(self, path: str) -> Any:
        """The znode's ZnodeStat (ctime, mtime, version...), None when absent."""
        return await self._wrap(self.client.exists_async(path))

    async def children(self, path: str, watch: Callable[[Any], None] | None = None) -> list[str]:
        try:
            return list(await self._wrap(self.client.get_children_async(path, watch=self._watch(watch))))
        except NoNodeError:
            return []

    async def create(self, path: str, data: bytes = b"", ephemeral: bool = False, sequence: bool = False,
                     makepath: bool = False) -> str:
        return str(await self._wrap(self.client.create_async(path, data, ephemeral=ephemeral, sequence=sequence,
                                                             makepath=makepath)))

    async def ensure_path(self, path: str) -> None:
        await self._wrap(self.client.ensure_path_async(path))

    async def set(self, path: str, data: bytes, version: int = -1) -> int:
        stat = await self._wrap(self.client.set_async(path, data, version=version))
        return int(stat.version)

    async def delete(self, path: str, version: int = -1, recursive: bool = False) -> None:
        if recursive:
            await self.loop.run_in_executor(None, lambda: self.client.delete(path, recursive=True))
            return
        await self._wrap(self.client.delete_async(path, version=version))

    async def transaction(self, build: Callable[[Any], None]) -> list[Any]:
        """A multi-op (all or nothing): build(tx) adds check/create/set_data/delete to it.
        Raises BadVersionError / NoNodeError / NodeExistsError of the failed op."""
        tx = self.client.transaction()
        build(tx)
        results = await self._wrap(tx.commit_async())
        for r in results:
            if isinstance(r, Exception) and not _rolled_back(r):
                raise r
        return list(results)


def _rolled_back(e: Exception) -> bool:
    return type(e).__name__ in ("RolledBackError", "RuntimeInconsistency")


def _settle(fut: asyncio.Future[Any], result: Any) -> None:
    if fut.done():
        return
    if result.successful():
        fut.set_result(result.value)
    else:
        fut.set_exception(result.exception)
