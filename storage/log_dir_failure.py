"""Log directories taken offline by an I/O error (Kafka's LogDirFailureChannel).

A failed write, segment creation or fdatasync in a log directory takes the whole directory
offline: after a failed fdatasync the kernel may already have dropped the dirty pages it could
not write, so nothing written there since the last good sync can be trusted, and retrying the
sync would report success for data that is gone. From then on every operation on a partition
of that directory fails with LogDirOfflineError (an OSError: answered KAFKA_STORAGE_ERROR, as
Kafka answers a partition in an offline directory), nobody waiting for durability there is
told it is durable, and the error is logged once, with the directory's path. Whoever owns
the process decides what an offline directory means: kcoord keeps every partition in one
directory, so it halts (server/app.py), as Kafka halts when no log directory is left.
"""
from __future__ import annotations

import logging
from collections.abc import Callable, Iterable

logger = logging.getLogger("kcoord.logdir")

__all__ = ["LogDirFailureChannel", "LogDirOfflineError"]


class LogDirOfflineError(OSError):
    """An operation on a log directory that an I/O error took offline (Kafka's
    KafkaStorageException)."""


class LogDirFailureChannel:
    """Which log directories are online; told of each failure, it tells its listeners once
    per directory."""

    def __init__(self, log_dirs: Iterable[str]) -> None:
        self.online: set[str] = set(log_dirs)
        self.offline: dict[str, str] = {}  # directory -> the first error seen there
        self._listeners: list[Callable[[str], None]] = []

    def add_listener(self, listener: Callable[[str], None]) -> None:
        """`listener(log_dir)` runs (on the thread reporting the failure) each time a directory
        goes offline."""
        self._listeners.append(listener)

    def fail(self, log_dir: str, message: str, error: BaseException) -> LogDirOfflineError:
        """Take `log_dir` offline because of `error`; returns the error for the caller to raise.
        Logged once per directory: later failures there are consequences of the first."""
        if log_dir not in self.offline:
            self.offline[log_dir] = f"{message}: {error!r}"
            self.online.discard(log_dir)
            logger.error("%s. Log directory %s is now offline", message, log_dir, exc_info=error)
            for listener in self._listeners:
                listener(log_dir)
        return self.error(log_dir)

    def is_offline(self, log_dir: str) -> bool:
        return log_dir in self.offline

    def error(self, log_dir: str) -> LogDirOfflineError:
        return LogDirOfflineError(f"Log directory {log_dir} is offline ({self.offline.get(log_dir, '?')})")

    def check(self, log_dir: str) -> None:
        """Raise LogDirOfflineError if `log_dir` is offline."""
        if log_dir in self.offline:
            raise self.error(log_dir)
