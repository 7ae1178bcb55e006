"""SaslHandshake v0-v1 and SaslAuthenticate v0-v2 once a connection is past authentication.

Authentication itself happens before the dispatcher (server/security/sasl.py). Here, as in
Kafka's KafkaApis: SaslHandshake answers ILLEGAL_SASL_STATE (on a PLAINTEXT or SSL listener, or
a SASL connection that may not re-authenticate now), except that on a SASL connection with a
session lifetime (connections.max.reauth.ms) it begins a KIP-368 re-authentication;
SaslAuthenticate answers ILLEGAL_SASL_STATE.
"""
from __future__ import annotations

from typing import Any

from kafka.protocol.sasl import SaslAuthenticateResponse, SaslHandshakeResponse

from kcoord.protocol.errors import ErrorCode
from kcoord.server.context import RequestContext


class SaslApis:
    """The handlers of sasl.py, built by the composition root (server/node.py) with the parts they use."""

    def __init__(self) -> None:
        pass

    def handle_sasl_handshake(self, ctx: RequestContext, req: Any, version: int) -> Any:
        session = ctx.session
        if session is not None and session.reauthenticate is not None:
            response = session.reauthenticate(req.mechanism, version)
            if response is not None:
                return response
        return SaslHandshakeResponse(version=version, error_code=ErrorCode.ILLEGAL_SASL_STATE, mechanisms=[])

    def handle_sasl_authenticate(self, ctx: RequestContext, req: Any, version: int) -> Any:
        return SaslAuthenticateResponse(
            version=version, error_code=ErrorCode.ILLEGAL_SASL_STATE,
            error_message="SaslAuthenticate request received after successful authentication",
            auth_bytes=b"", session_lifetime_ms=0)
