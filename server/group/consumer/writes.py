"""How a consumer-group step changes state (the rule of server/coordinator/result.py): its
records are replayed as the step makes them, so its own later steps and the next request see
them; the answer waits until they are durable. `undo` collects, per record, the record of what
memory held before it: the result hands it to the runtime as `previous`, which reverts the
step with it if the records never reach the log."""
from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from kcoord.protocol.coordinator_records import CoordinatorRecord, GroupKey
from kcoord.protocol.errors import ErrorCode
from kcoord.server.group.consumer.records import ConsumerGroupRecords
from kcoord.server.group.group_manager import GroupMetadataManager
from kcoord.server.group.result import CoordinatorResult

log = logging.getLogger("kcoord.group")

# The answer when the append fails: (error, message) -> response
ErrorAnswer = Callable[[ErrorCode, str | None], Any]


class ConsumerGroupWrites:
    """`replay` replays a record of any kind (a conversion writes classic group records too);
    `classic_record` reads a classic group back as its record."""

    def __init__(self, manager: GroupMetadataManager, records: ConsumerGroupRecords,
                 replay: Callable[[CoordinatorRecord], None],
                 classic_record: Callable[[GroupKey], CoordinatorRecord]) -> None:
        self.manager = manager
        self._consumer_record = records.current_record
        self._replay = replay
        self._classic_record = classic_record

    def current_record(self, key: Any) -> CoordinatorRecord:
        if type(key) is GroupKey:
            return self._classic_record(key)
        return self._consumer_record(key)

    def apply(self, records: list[CoordinatorRecord], undo: list[CoordinatorRecord],
              new: list[CoordinatorRecord]) -> None:
        """Apply `new` now (replayed as made), add it to `records`, and what it replaced to `undo`."""
        for r in new:
            undo.append(self.current_record(r.key))
            self._replay(r)
            records.append(r)

    def revert(self, undo: list[CoordinatorRecord]) -> None:
        """Put back what a step applied and then dropped without writing (its answer had to wait
        for another and that failed; nothing reached the runtime)."""
        for r in reversed(undo):
            self._replay(r)

    def result(self, records: list[CoordinatorRecord], undo: list[CoordinatorRecord], response: Any,
               error: ErrorAnswer, after: Callable[[], None] | None = None) -> CoordinatorResult:
        """The answer once `records` (already applied) are durable; `after` runs then (timers
        that only a durable change may start); a failed append answers with `error`."""
        if not records:
            if after is not None:
                after()
            return CoordinatorResult(response=response)

        def on_appended(code: ErrorCode | None) -> Any:
            if code is not None:
                return error(code, None)
            if after is not None:
                after()
            return response

        return CoordinatorResult(records=records, on_appended=on_appended, previous=undo)

    def emit(self, records: list[CoordinatorRecord], undo: list[CoordinatorRecord]) -> None:
        """Write what nobody asked for (a session expired, a regex resolved) in the background."""
        if not records:
            return

        def on_appended(error: ErrorCode | None) -> None:
            if error is not None:
                log.warning("Failed to write %d consumer group records: %s", len(records), error.name)

        self.manager.emit(CoordinatorResult(records=records, on_appended=on_appended, previous=undo))
