"""Handler registration: one module per API registers its function here by API key."""
from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from server.context import RequestContext

# handler(ctx, request, version) -> response object | Deferred | awaitable | NO_RESPONSE
Handler = Callable[["RequestContext", Any, int], Any]
HANDLERS: dict[int, Handler] = {}


class _NoResponse:
    """Returned by a handler when the protocol sends nothing back (Produce with acks=0)."""

    def __repr__(self) -> str:
        return "NO_RESPONSE"


NO_RESPONSE: Any = _NoResponse()


def handles(api_key: int) -> Callable[[Handler], Handler]:
    def register(fn: Handler) -> Handler:
        if api_key in HANDLERS:
            raise RuntimeError(f"two handlers for API key {api_key}")
        HANDLERS[api_key] = fn
        return fn

    return register
