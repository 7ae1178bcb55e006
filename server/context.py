"""What a handler knows about the request it is answering."""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from server.broker import Broker


@dataclass(slots=True)
class RequestContext:
    broker: Broker
    api_version: int
    correlation_id: int
    client_id: str | None
    client_host: str
