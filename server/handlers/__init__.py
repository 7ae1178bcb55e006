"""One module per API; their routes are declared in routes.py (imported last)."""
from server.handlers.registry import HANDLERS, NO_RESPONSE, handles

from server.handlers import api_versions, create_topics, fetch, find_coordinator, groups, init_producer_id, list_offsets, metadata, produce  # noqa: E402,F401  isort: skip
from server.handlers import delete_topics  # noqa: E402,F401  isort: skip  (topic lifecycle)
from server.handlers import acls, sasl, scram_credentials  # noqa: E402,F401  isort: skip
from server.handlers.routes import ROUTES, Route  # noqa: E402  isort: skip

__all__ = ["HANDLERS", "NO_RESPONSE", "ROUTES", "Route", "handles"]
