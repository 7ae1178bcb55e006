"""One module per API; their routes are declared in routes.py, which imports each handler
module at its API's first request (not here: a new server answers ApiVersions without them)."""
from kcoord.server.handlers.registry import NO_RESPONSE
from kcoord.server.handlers.routes import HANDLERS, ROUTES, Route

__all__ = ["HANDLERS", "NO_RESPONSE", "ROUTES", "Route"]
