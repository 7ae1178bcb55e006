"""What a coordinator handler hands back to the runtime."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from protocol.coordinator_records import CoordinatorRecord
from protocol.errors import ErrorCode


@dataclass(slots=True)
class CoordinatorResult:
    """records: to append to the group's __consumer_offsets partition before answering.

    With no records, `response` is the answer (a kafka-python response object, or a
    Deferred completed later, e.g. a parked JoinGroup).

    With records, the runtime appends them durably, replays each through
    GroupCoordinator.replay (the only way persisted state changes), then calls
    `on_appended(None)`; if the append fails it calls `on_appended(code)` with the code the
    client should see (already mapped by protocol.errors.coordinator_append_error) and replays
    nothing. `on_appended` returns the response (or a Deferred).

    With records and a `response` Deferred: that Deferred is the answer from the start (the
    client waits on it like a parked request), and the replay of the records, or on failure
    `on_appended`, completes it; what `on_appended` returns is ignored. A leader's SyncGroup
    is answered this way, in the same pass as the followers its record answers.
    """

    records: list[CoordinatorRecord] = field(default_factory=list)
    response: Any = None
    on_appended: Callable[[ErrorCode | None], Any] | None = None
    # True when the records were already replayed as they were made (consumer groups, as
    # Kafka's timeline): the runtime then does not replay them again once durable, and if
    # the append fails (the records never reached the log) it calls `undo` first, which
    # replays the previous value of every key they touched, newest first.
    applied: bool = False
    undo: Callable[[], None] | None = None
