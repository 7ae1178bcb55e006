"""What a handler is, and what it returns when the protocol sends nothing back (every API's
route is declared in routes.py)."""
from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kcoord.server.context import RequestContext

# handler(ctx, request, version) -> response object | Deferred | awaitable | NO_RESPONSE
Handler = Callable[["RequestContext", Any, int], Any]


class _NoResponse:
    """Returned by a handler when the protocol sends nothing back (Produce with acks=0)."""

    def __repr__(self) -> str:
        return "NO_RESPONSE"


NO_RESPONSE: Any = _NoResponse()
