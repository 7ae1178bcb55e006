"""What a control request can be refused with beyond a malformed request (faults.BadRule,
HTTP 400): something that does not exist (404), or an operation the node cannot carry out now
or at all (its own status: 409 for a state that forbids it, 504 for a wait that ran out). The
HTTP layer (api.py) turns each into its status and `{"error": message}`; nothing changed."""
from __future__ import annotations


class NotFound(LookupError):
    """A control request about something that does not exist (HTTP 404)."""


class Refused(Exception):
    """A control request the node refuses: `status` is the HTTP status (409, 504)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
