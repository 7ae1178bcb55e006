"""Requests as received, so a test can assert on what its client sent: API, version, client
id, the header and the decoded body. Kept in a ring of at most `limit` entries (the oldest
go first); bodies are turned into JSON only when read."""
from __future__ import annotations

import itertools
import time
from collections import deque
from dataclasses import dataclass
from typing import Any

from kcoord.protocol.api import API_TABLE, ApiKey
from kcoord.server.security.redact import redacted


@dataclass(slots=True)
class Recorded:
    seq: int
    at_ms: int
    connection: int
    client_host: str
    api: ApiKey
    version: int
    correlation_id: int
    client_id: str | None
    header_version: int
    request: Any  # kafka-python's decoded request, or None if the body did not decode

    def to_json(self) -> dict[str, Any]:
        return {
            "seq": self.seq,
            "time_ms": self.at_ms,
            "connection": self.connection,
            "client_host": self.client_host,
            "api": API_TABLE[self.api].name,
            "api_key": int(self.api),
            "api_version": self.version,
            "client_id": self.client_id,
            "header": {"request_api_key": int(self.api), "request_api_version": self.version,
                       "correlation_id": self.correlation_id, "client_id": self.client_id,
                       "header_version": self.header_version},
            # secrets (SASL tokens, SCRAM and config passwords) read "[hidden]"
            "body": redacted(self.api, self.request.to_dict()) if self.request is not None else None,
        }


class Recorder:
    def __init__(self, limit: int, apis: frozenset[ApiKey] | None = None) -> None:
        self.limit = limit
        self.apis = apis  # None: every API
        self.entries: deque[Recorded] = deque(maxlen=limit)
        self._seq = itertools.count(1)
        self.dropped = 0

    def wants(self, api: ApiKey) -> bool:
        return self.apis is None or api in self.apis

    def add(self, connection: int, client_host: str, api: ApiKey, version: int, correlation_id: int,
            client_id: str | None, header_version: int, request: Any) -> None:
        if len(self.entries) == self.limit:
            self.dropped += 1
        self.entries.append(Recorded(next(self._seq), time.time_ns() // 1_000_000, connection, client_host, api,
                                     version, correlation_id, client_id, header_version, request))

    def select(self, api: ApiKey | None = None, client_id: str | None = None, connection: int | None = None,
               since: int = 0) -> list[Recorded]:
        return [r for r in self.entries
                if r.seq > since and (api is None or r.api == api)
                and (client_id is None or r.client_id == client_id)
                and (connection is None or r.connection == connection)]
