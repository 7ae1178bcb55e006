"""SASL/PLAIN (RFC 4616) as Kafka's PlainSaslServer: `[authzid] NUL authcid NUL passwd`,
checked in constant time against the configured users; Kafka's messages, which it sends to
the client."""
from __future__ import annotations

import hmac


class PlainAuthenticationFailed(Exception):
    """The message is sent to the client (Kafka's SaslAuthenticationException)."""


class PlainServer:
    def __init__(self, users: dict[str, str]) -> None:
        self._users = users
        self.complete = False
        self.authorization_id: str | None = None
        self.attempted_user: str | None = None  # for the log line of a failure

    def evaluate(self, token: bytes) -> bytes:
        parts = token.decode("utf-8", "replace").split("\x00", 3)
        if len(parts) != 3:
            raise PlainAuthenticationFailed(f"Invalid SASL/PLAIN response: expected 3 tokens, got {min(len(parts), 4)}")
        authzid, user, password = parts
        self.attempted_user = user or None
        if not user:
            raise PlainAuthenticationFailed("Authentication failed: username not specified")
        if not password:
            raise PlainAuthenticationFailed("Authentication failed: password not specified")
        expected = self._users.get(user)
        if expected is None or not hmac.compare_digest(expected.encode(), password.encode()):
            raise PlainAuthenticationFailed("Authentication failed: Invalid username or password")
        if authzid and authzid != user:
            raise PlainAuthenticationFailed(
                "Authentication failed: Client requested an authorization id that is different from username")
        self.authorization_id = user
        self.complete = True
        return b""
