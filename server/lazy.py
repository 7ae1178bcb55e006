"""A part built at its first use: a named factory the composition root (server/node.py) holds,
for the parts a new server does not build before its first ApiVersions (the group
coordinator, the transaction coordinator, the data plane, the handler areas that use them)."""
from __future__ import annotations

from collections.abc import Callable
from typing import Generic, TypeVar

T = TypeVar("T")


class Lazy(Generic[T]):
    __slots__ = ("name", "_factory", "_value")

    def __init__(self, name: str, factory: Callable[[], T]) -> None:
        self.name = name
        self._factory = factory
        self._value: T | None = None

    def get(self) -> T:
        """The part, built now if it was not yet."""
        value = self._value
        if value is None:
            value = self._value = self._factory()
        return value

    def built(self) -> T | None:
        """The part if it was built, else None; builds nothing."""
        return self._value

    def __repr__(self) -> str:
        return f"Lazy({self.name}, {'built' if self._value is not None else 'not built'})"
