"""Durable security state (SCRAM credentials, ACLs) as Kafka keeps it: change records
(UserScramCredentialRecord, AccessControlEntryRecord and their removals) replayed into the
in-memory state. kcoord keeps them in one JSON file per kind in the log directory, replaced
atomically (write, fsync, rename, fsync the directory; mode 0600).

A change is made durable before it is applied or answered: `commit(records)` writes the
current state's records followed by the new ones (a file that replays to the new state), and
only then replays the new records into memory. Start-up loading replays the file through the
same `replay` function. Changes are serialized by `lock` (validation reads the state, so a
handler holds the lock from validation to commit, as Kafka's controller runs one at a time).
"""
from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, Generic, TypeVar

from kcoord.server.topics import atomic_write

log = logging.getLogger("kcoord.security")

S = TypeVar("S")
Record = dict[str, Any]


class StateFileError(ValueError):
    """The file exists but cannot be replayed: the server refuses to start rather than run
    without the credentials or ACLs it holds."""


class RecordStore(Generic[S]):
    def __init__(self, path: Path, state: S, replay: Callable[[S, Record], None],
                 snapshot: Callable[[S], Iterable[Record]]) -> None:
        self.path = path
        self.state = state
        self._replay = replay
        self._snapshot = snapshot
        self.lock = asyncio.Lock()

    def load(self) -> int:
        """Replay the file (if any); returns the number of records replayed."""
        if not self.path.exists():
            return 0
        try:
            data = json.loads(self.path.read_bytes())
            records = data["records"]
            for rec in records:
                self._replay(self.state, rec)
        except (OSError, ValueError, KeyError, TypeError) as e:
            raise StateFileError(f"Could not load {self.path}: {e!r}") from None
        return len(records)

    def _encode(self, records: list[Record]) -> bytes:
        payload = {"version": 1, "records": list(self._snapshot(self.state)) + records}
        return json.dumps(payload, separators=(",", ":")).encode()

    async def commit(self, records: list[Record]) -> None:
        """Make `records` durable (the write and fsyncs off the event loop), then apply them.
        Raises OSError, with nothing applied, when the file cannot be written."""
        if not records:
            return
        data = self._encode(records)
        await asyncio.to_thread(atomic_write, self.path, data, 0o600)
        for rec in records:
            self._replay(self.state, rec)

    def commit_now(self, records: list[Record]) -> None:
        """The same, synchronously (command-line tools working on a stopped server's files)."""
        if records:
            atomic_write(self.path, self._encode(records), 0o600)
            for rec in records:
                self._replay(self.state, rec)
