"""A response that is not ready yet, without needing an event loop (unit tests drive the
coordinator synchronously). The connection turns it into an awaitable."""
from __future__ import annotations

from collections.abc import Callable
from typing import Any, Generic, TypeVar

T = TypeVar("T")
_UNSET: Any = object()


class Deferred(Generic[T]):
    __slots__ = ("_value", "_callbacks")

    def __init__(self) -> None:
        self._value: T = _UNSET
        self._callbacks: list[Callable[[T], None]] = []

    @property
    def done(self) -> bool:
        return self._value is not _UNSET

    def result(self) -> T:
        if self._value is _UNSET:
            raise RuntimeError("deferred not completed")
        return self._value

    def complete(self, value: T) -> bool:
        """Complete once; later calls are ignored and return False."""
        if self._value is not _UNSET:
            return False
        self._value = value
        callbacks, self._callbacks = self._callbacks, []
        for cb in callbacks:
            cb(value)
        return True

    def add_callback(self, cb: Callable[[T], None]) -> None:
        if self._value is not _UNSET:
            cb(self._value)
        else:
            self._callbacks.append(cb)
