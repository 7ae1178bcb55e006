"""The node's open client connections and their limits: max.connections and
max.connections.per.ip refuse a connection beyond them, as Kafka's SocketServer does.

A set of the connections (the control API, shutdown and metrics iterate it), which each
connection joins when it is accepted (`admit`) and leaves when it closes (`release`); the
composition root hands it to every connection, and nothing else of the node."""
from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kcoord.server.config import Config
    from kcoord.server.connection import KafkaConnection


class Connections(set["KafkaConnection"]):
    def __init__(self, config: Config) -> None:
        super().__init__()
        self._config = config  # read at each admit: AlterConfigs changes the limits at once
        self._per_ip: dict[str, int] = {}

    def admit(self, conn: KafkaConnection) -> str | None:
        """Count a new connection, or say why it is refused."""
        limit = self._config["max.connections"]
        if len(self) >= limit:
            return f"the broker has the configured maximum of {limit} connections"
        n = self._per_ip.get(conn.host, 0)
        per_ip = self._config["max.connections.per.ip"]
        if n >= per_ip:
            return f"{conn.host} has the configured maximum of {per_ip} connections"
        self._per_ip[conn.host] = n + 1
        self.add(conn)
        return None

    def release(self, conn: KafkaConnection) -> None:
        if conn in self:
            self.discard(conn)
            n = self._per_ip.get(conn.host, 1) - 1
            if n > 0:
                self._per_ip[conn.host] = n
            else:
                self._per_ip.pop(conn.host, None)
