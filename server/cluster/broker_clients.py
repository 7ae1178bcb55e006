"""A cluster node's connections to the other nodes for its own requests to them (transaction
markers, partition verification): one BrokerClient (server/replication/client.py) per node on
its inter-broker endpoint, one request at a time on it, a new connection when the node comes
back on another address or after a failure."""
from __future__ import annotations

import asyncio
from typing import Any

from kcoord.server.replication.client import BrokerClient, BrokerConnectionError

__all__ = ["BrokerClients", "BrokerConnectionError"]


class BrokerClients:
    def __init__(self, client_id: str, timeout_s: float = 30.0) -> None:
        self.client_id = client_id
        self.timeout_s = timeout_s
        self._clients: dict[int, tuple[tuple[str, int], BrokerClient, asyncio.Lock]] = {}
        self.sent: dict[int, int] = {}  # requests sent per node (tests, metrics)

    async def request(self, node: int, endpoint: tuple[str, int], request: Any, version: int) -> Any:
        """The node's answer; raises BrokerConnectionError (the connection is dropped)."""
        held = self._clients.get(node)
        if held is None or held[0] != endpoint:
            if held is not None:
                held[1].close()
            held = self._clients[node] = (endpoint, BrokerClient(*endpoint, self.client_id, self.timeout_s),
                                          asyncio.Lock())
        _, client, lock = held
        try:
            async with lock:
                self.sent[node] = self.sent.get(node, 0) + 1
                return await client.request(request, version)
        except BrokerConnectionError:
            self.drop(node)
            raise

    def drop(self, node: int) -> None:
        held = self._clients.pop(node, None)
        if held is not None:
            held[1].close()

    def close(self) -> None:
        for node in list(self._clients):
            self.drop(node)
