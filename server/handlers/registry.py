"""What a handler is, and the old way of declaring one (`@handles`), kept importable for code
written against it: routes.py takes such handlers in as plain routes (their modules must be
imported before routes.py, so they load at every start: declare new APIs in routes.py's table,
which loads a handler at its API's first request)."""
from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from server.context import RequestContext

# handler(ctx, request, version) -> response object | Deferred | awaitable | NO_RESPONSE
Handler = Callable[["RequestContext", Any, int], Any]

# API key -> handler declared with `@handles` (routes.HANDLERS has every served API's)
DECLARED: dict[int, Handler] = {}


class _NoResponse:
    """Returned by a handler when the protocol sends nothing back (Produce with acks=0)."""

    def __repr__(self) -> str:
        return "NO_RESPONSE"


NO_RESPONSE: Any = _NoResponse()


def handles(api_key: int) -> Callable[[Handler], Handler]:
    """Declare a plain route (a handler, no fast path, no direct call) from the handler's
    module; routes.py picks it up (the module must be imported before routes.py)."""

    def register(fn: Handler) -> Handler:
        if api_key in DECLARED:
            raise RuntimeError(f"two handlers for API key {api_key}")
        DECLARED[api_key] = fn
        return fn

    return register
