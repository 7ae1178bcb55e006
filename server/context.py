"""What a handler knows about the request it is answering: what is per request and per
connection. The parts a handler uses come through its area's constructor
(server/node.py), never through the context."""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kcoord.server.config import Config
    from kcoord.server.session import Session


@dataclass(slots=True)
class RequestContext:
    api_version: int
    correlation_id: int
    client_id: str | None
    client_host: str
    # the connection's listener and principal; None for requests made in-process without one
    session: Session | None = None

    @property
    def principal(self) -> str:
        return self.session.principal if self.session is not None else "User:ANONYMOUS"

    def advertised_on(self, config: Config) -> tuple[str, int] | None:
        """The host and port this node advertises on the listener the request came in on
        (Metadata, FindCoordinator and DescribeCluster answer with it, as Kafka does); None when
        that listener is not in advertised.listeners. Without a session (in-process callers):
        the first advertised listener of `config`."""
        if self.session is None or self.session.listener is None:
            return config.advertised
        return self.session.advertised
