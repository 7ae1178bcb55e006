"""A small client of the control API (standard library only), for tests in Python:

    ctl = ControlClient("http://127.0.0.1:9405")
    ctl.inject_error("OffsetCommit", "NOT_COORDINATOR", count=3, group_id="g")
    ctl.add_latency(200, api="Fetch")
    ctl.stall(client_id="my-consumer"); ...; ctl.unstall()
    with ctl.recording():
        ...
        sent = ctl.requests(api="FindCoordinator")
    ctl.reset()

AsyncControlClient has the same methods as coroutines. Every method returns the answer's
JSON; a refused request raises ControlError (its HTTP status and the server's message).
Clients in other languages speak the same HTTP API (docs/testing.md, "From Java, Go or Node tests").
"""
from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Iterator
from typing import Any
from urllib.error import HTTPError, URLError
from urllib.parse import quote, urlencode, urlsplit
from urllib.request import Request, urlopen


class ControlError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"HTTP {status}: {message}")
        self.status = status
        self.message = message


def _seg(s: str) -> str:
    return quote(s, safe="")


def _drop_none(**kw: Any) -> dict[str, Any]:
    return {k: v for k, v in kw.items() if v is not None}


class _Calls:
    """The API's operations as (method, path, body); the transport is the subclass's."""

    def _call(self, method: str, path: str, body: dict[str, Any] | None = None, key: str | None = None,
              wait_s: float = 0.0) -> Any:
        """The answer's JSON (its `key` only, if given); `wait_s`: how long the server may take
        on purpose (a move waits for the new leader), added to the client's timeout."""
        raise NotImplementedError

    def status(self) -> Any:
        return self._call("GET", "/status")

    def reset(self) -> Any:
        """Every topic, group, offset, producer id and fault gone; connections closed."""
        return self._call("POST", "/reset")

    def inject_error(self, api: str | int, error: str | int, count: int = 1, *, group_id: str | None = None,
                     client_id: str | None = None, topic: str | None = None, connection: int | None = None,
                     message: str | None = None) -> Any:
        """Answer the next `count` matching requests of `api` with `error` (-1: all until removed)."""
        return self._call("POST", "/faults/errors", _drop_none(
            api=api, error=error, count=count, group_id=group_id, client_id=client_id, topic=topic,
            connection=connection, message=message))

    def add_latency(self, ms: int, *, api: str | int | None = None, group_id: str | None = None,
                    client_id: str | None = None, topic: str | None = None, connection: int | None = None) -> Any:
        return self._call("POST", "/faults/latency", _drop_none(
            ms=ms, api=api, group_id=group_id, client_id=client_id, topic=topic, connection=connection))

    def faults(self) -> Any:
        return self._call("GET", "/faults", key="faults")

    def remove_fault(self, fault_id: int) -> Any:
        return self._call("DELETE", f"/faults/{fault_id}")

    def clear_faults(self) -> Any:
        return self._call("DELETE", "/faults")

    def connections(self) -> Any:
        return self._call("GET", "/connections", key="connections")

    def close_connections(self, *, client_id: str | None = None, connection: int | None = None) -> Any:
        return self._call("POST", "/connections/close", _drop_none(client_id=client_id, connection=connection))

    def stall(self, client_id: str) -> Any:
        return self._call("POST", "/connections/stall", {"client_id": client_id})

    def unstall(self, client_id: str | None = None) -> Any:
        return self._call("POST", "/connections/unstall", _drop_none(client_id=client_id))

    def start_recording(self, max: int | None = None, apis: list[str] | None = None) -> Any:  # noqa: A002
        return self._call("POST", "/recording", _drop_none(max=max, apis=apis))

    def stop_recording(self) -> Any:
        return self._call("DELETE", "/recording")

    def requests(self, *, api: str | int | None = None, client_id: str | None = None,
                 group_id: str | None = None, connection: int | None = None, since: int | None = None) -> list[Any]:
        q = _drop_none(api=api, client_id=client_id, group_id=group_id, connection=connection, since=since)
        return self._call("GET", "/requests" + (f"?{urlencode(q)}" if q else ""), key="requests")

    def group(self, group_id: str) -> Any:
        return self._call("GET", f"/groups/{_seg(group_id)}")

    def rebalance(self, group_id: str) -> Any:
        return self._call("POST", f"/groups/{_seg(group_id)}/rebalance")

    def expire_member(self, group_id: str, member: str) -> Any:
        return self._call("POST", f"/groups/{_seg(group_id)}/members/{_seg(member)}/expire")

    def load_in_progress(self, ms: int, *, group_id: str | None = None, partition: int | None = None) -> Any:
        return self._call("POST", "/coordinator/load-in-progress",
                          _drop_none(ms=ms, group_id=group_id, partition=partition))

    # virtual brokers (kcoord.virtual.brokers=N)

    def brokers(self) -> Any:
        return self._call("GET", "/brokers", key="brokers")

    def broker_down(self, node_id: int) -> Any:
        return self._call("POST", f"/brokers/{node_id}/down")

    def broker_up(self, node_id: int) -> Any:
        return self._call("POST", f"/brokers/{node_id}/up")

    def move_leader(self, topic: str, partition: int, node_id: int, timeout_ms: int | None = None) -> Any:
        """The partition's leader moves to node_id (virtual brokers: at once; a cluster node:
        a preferred-leader election through the controller, answered once node_id leads)."""
        return self._call("POST", f"/partitions/{_seg(topic)}/{partition}/leader",
                          _drop_none(node=node_id, timeout_ms=timeout_ms), wait_s=_wait(timeout_ms))

    def move_coordinator(self, group_id: str, node_id: int, timeout_ms: int | None = None) -> Any:
        """The group's __consumer_offsets partition moves to node_id (a cluster node: answered
        once node_id has loaded the group)."""
        return self._call("POST", f"/groups/{_seg(group_id)}/coordinator",
                          _drop_none(node=node_id, timeout_ms=timeout_ms), wait_s=_wait(timeout_ms))


def _wait(timeout_ms: int | None) -> float:
    return (timeout_ms if timeout_ms is not None else 30_000) / 1000  # the server's default: 30 s


class ControlClient(_Calls):
    def __init__(self, url: str, timeout: float = 30.0) -> None:
        self.url = url.rstrip("/")
        self.timeout = timeout

    def _call(self, method: str, path: str, body: dict[str, Any] | None = None, key: str | None = None,
              wait_s: float = 0.0) -> Any:
        data = json.dumps(body).encode() if body is not None else None
        req = Request(self.url + path, data=data, method=method,
                      headers={"Content-Type": "application/json"} if data is not None else {})
        try:
            with urlopen(req, timeout=self.timeout + wait_s) as resp:
                answer = json.loads(resp.read())
                return answer[key] if key is not None else answer
        except HTTPError as e:
            raise ControlError(e.code, _message(e.read())) from None
        except URLError as e:
            raise ControlError(0, f"cannot reach the control API at {self.url}: {e.reason}") from None

    @contextlib.contextmanager
    def recording(self, max: int | None = None, apis: list[str] | None = None) -> Iterator[ControlClient]:  # noqa: A002
        self.start_recording(max, apis)
        try:
            yield self
        finally:
            self.stop_recording()


class AsyncControlClient(_Calls):
    """The same calls as coroutines, over asyncio streams (no thread, no dependency)."""

    def __init__(self, url: str, timeout: float = 30.0) -> None:
        self.url = url.rstrip("/")
        parts = urlsplit(self.url)
        self._host = parts.hostname or "127.0.0.1"
        self._port = parts.port or 80
        self._prefix = parts.path
        self.timeout = timeout

    async def _call(self, method: str, path: str, body: dict[str, Any] | None = None,  # type: ignore[override]
                    key: str | None = None, wait_s: float = 0.0) -> Any:
        answer = await asyncio.wait_for(self._exchange(method, path, body), self.timeout + wait_s)
        return answer[key] if key is not None else answer

    async def _exchange(self, method: str, path: str, body: dict[str, Any] | None) -> Any:
        data = json.dumps(body).encode() if body is not None else b""
        try:
            reader, writer = await asyncio.open_connection(self._host, self._port)
        except OSError as e:
            raise ControlError(0, f"cannot reach the control API at {self.url}: {e}") from None
        try:
            writer.write(f"{method} {self._prefix}{path} HTTP/1.1\r\nHost: {self._host}\r\n"
                         f"Content-Type: application/json\r\nContent-Length: {len(data)}\r\n"
                         f"Connection: close\r\n\r\n".encode() + data)
            raw = await reader.read()
        finally:
            writer.close()
        head, _, payload = raw.partition(b"\r\n\r\n")
        status = int(head.split(b" ", 2)[1])
        if status != 200:
            raise ControlError(status, _message(payload))
        return json.loads(payload)

    @contextlib.asynccontextmanager
    async def recording(self, max: int | None = None, apis: list[str] | None = None):  # noqa: A002, ANN201
        await self.start_recording(max, apis)
        try:
            yield self
        finally:
            await self.stop_recording()


def _message(payload: bytes) -> str:
    try:
        return str(json.loads(payload).get("error", payload.decode(errors="replace")))
    except (ValueError, AttributeError):
        return payload.decode(errors="replace")
