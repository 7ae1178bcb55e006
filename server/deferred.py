"""A response that is not ready yet, without needing an event loop (unit tests drive the
coordinator synchronously). The connection turns it into an awaitable."""
from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine
from typing import Any, Generic, TypeVar

T = TypeVar("T")
log = logging.getLogger("kcoord.dispatch")
_UNSET: Any = object()


class Deferred(Generic[T]):
    # `done` is a plain attribute and a lone callback is kept as is (a second one makes a
    # list): every commit goes through two of these, so they are kept to a few operations.
    __slots__ = ("done", "_value", "_callbacks")

    def __init__(self) -> None:
        self.done = False  # read-only outside this class
        self._value: T = _UNSET
        self._callbacks: Callable[[T], None] | list[Callable[[T], None]] | None = None

    def result(self) -> T:
        if not self.done:
            raise RuntimeError("deferred not completed")
        return self._value

    def complete(self, value: T) -> bool:
        """Complete once; later calls are ignored and return False."""
        if self.done:
            return False
        self.done = True
        self._value = value
        callbacks, self._callbacks = self._callbacks, None
        if type(callbacks) is list:
            for cb in callbacks:
                cb(value)
        elif callbacks is not None:
            callbacks(value)  # type: ignore[operator]
        return True

    def add_callback(self, cb: Callable[[T], None]) -> None:
        if self.done:
            cb(self._value)
            return
        callbacks = self._callbacks
        if callbacks is None:
            self._callbacks = cb
        elif type(callbacks) is list:
            callbacks.append(cb)
        else:
            self._callbacks = [callbacks, cb]  # type: ignore[list-item]


def then(answer: Any, fn: Callable[[Any], Any]) -> Any:
    """fn(answer) now, or a Deferred of it when `answer` is a Deferred still to complete."""
    if not isinstance(answer, Deferred):
        return fn(answer)
    out: Deferred[Any] = Deferred()
    answer.add_callback(lambda v: out.complete(fn(v)))
    return out


def gather(answers: list[Any]) -> Any:
    """The list of answers, or a Deferred of it once every Deferred among them completed."""
    waiting = [a for a in answers if isinstance(a, Deferred) and not a.done]
    if not waiting:
        return [a.result() if isinstance(a, Deferred) else a for a in answers]
    out: Deferred[list[Any]] = Deferred()
    left = len(waiting)

    def one_done(_: Any) -> None:
        nonlocal left
        left -= 1
        if left == 0:
            out.complete([a.result() if isinstance(a, Deferred) else a for a in answers])

    for a in waiting:
        a.add_callback(one_done)
    return out


def of_coroutine(coro: Coroutine[Any, Any, T], what: str) -> Deferred[Any]:
    """A Deferred completed with what `coro` returns, run as a task on the running loop: a
    handler whose answer waits for I/O (a file's fsync, a durable write) still returns a
    Deferred. If `coro` raises, the answer closes the connection (the error logged once, as
    for any handler that fails); if it is cancelled, nothing is answered."""
    out: Deferred[Any] = Deferred()

    def done(task: asyncio.Future[T]) -> None:
        if task.cancelled():
            out.complete(None)
            return
        exc = task.exception()
        if exc is not None:
            from kcoord.server.dispatch import CloseConnection

            log.error("%s failed", what, exc_info=exc)
            out.complete(CloseConnection(f"{what} failed: {exc!r}"))
            return
        out.complete(task.result())

    asyncio.ensure_future(coro).add_done_callback(done)
    return out


async def wait(d: Deferred[T]) -> T:
    """Await a Deferred on the running loop."""
    if d.done:
        return d.result()
    fut: asyncio.Future[T] = asyncio.get_running_loop().create_future()
    d.add_callback(lambda v: fut.done() or fut.set_result(v))
    return await fut
