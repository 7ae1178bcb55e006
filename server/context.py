"""What a handler knows about the request it is answering."""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kcoord.server.broker import Broker
    from kcoord.server.session import Session


@dataclass(slots=True)
class RequestContext:
    broker: Broker
    api_version: int
    correlation_id: int
    client_id: str | None
    client_host: str
    # the connection's listener and principal; None for requests made in-process without one
    session: Session | None = None

    @property
    def principal(self) -> str:
        return self.session.principal if self.session is not None else "User:ANONYMOUS"

    @property
    def advertised(self) -> tuple[str, int] | None:
        """The host and port this broker advertises on the listener the request came in on
        (Metadata, FindCoordinator and DescribeCluster answer with it, as Kafka does); None when
        that listener is not in advertised.listeners. Without a session: the first advertised
        listener."""
        if self.session is None or self.session.listener is None:
            return self.broker.config.advertised
        return self.session.advertised
