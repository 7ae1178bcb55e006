"""Who is at the other end of one connection: the listener it came in on, its address, and
the principal it authenticated as (Kafka's channel principal: User:ANONYMOUS until TLS or
SASL says otherwise). Handlers see it through RequestContext.session."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kcoord.server.listeners import Listener

ANONYMOUS = "User:ANONYMOUS"


class Session:
    __slots__ = ("listener", "host", "port", "principal", "mechanism", "reauthenticate", "mute")

    def __init__(self, listener: Listener | None, host: str, port: int = 0) -> None:
        self.listener = listener
        self.host = host
        self.port = port
        self.principal = ANONYMOUS  # "<type>:<name>", as KafkaPrincipal.toString
        self.mechanism: str | None = None  # the SASL mechanism it authenticated with
        # set by the connection on SASL listeners: (SaslHandshake request, version) -> response
        # or None (KIP-368 re-authentication refused: answered ILLEGAL_SASL_STATE)
        self.reauthenticate: Any = None
        # set by the connection: mute(ms) stops reading its requests for that long (a client
        # over its quota, server/quotas/gate.py)
        self.mute: Any = None

    @property
    def advertised(self) -> tuple[str, int] | None:
        return self.listener.advertised if self.listener is not None else None

    def __repr__(self) -> str:
        name = self.listener.name if self.listener is not None else "-"
        return f"Session({self.principal} from {self.host}:{self.port} on {name})"
