"""Deleting a topic, crash-safely, in persisted steps (DeleteTopics' work once validated).

1. The registry write that moves the topic to its `deleting` list (server/topics.py): the
   commit point. From here the topic is gone: Metadata, Produce, Fetch, ListOffsets and
   OffsetCommit answer it as unknown, and its name cannot be created again until step 5.
2. Its logs are closed and forgotten, long polls on them answered, its idempotent producer
   state and log-start-offset-checkpoint entries dropped, and each partition directory renamed `<topic>-<p>.<uniqueid>-delete`
   (storage/log_deletion.py), then the log directory fsynced.
3. Once __consumer_offsets is loaded: tombstones for every group's committed offsets of its
   partitions, and for Empty groups left without offsets (Kafka's cleanupGroupMetadata),
   appended durably through the coordinator runtime like any coordinator write.
4. The `-delete` directories are removed (in a worker thread) and the log directory fsynced.
5. The registry forgets the deletion: the name is free.

A crash anywhere is finished at the next start-up: directories of a deleting topic still
under their own name are renamed before the logs are opened (recover_files), and once
loading is done every deletion still listed, and every `-delete` directory, is finished
(finish_all), so nothing of the old topic remains and a topic created later under the name
starts empty. `KCOORD_CRASH_AT=delete-topic:<step>` (server/crash_points.py) stops the
server between steps for the tests that prove it.
"""
from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from kcoord.protocol.errors import ErrorCode, KafkaError
from kcoord.server.crash_points import crash_point
from kcoord.server.deferred import Deferred
from kcoord.server.share.cleanup import after_topic_deleted
from kcoord.server.topics import PendingDeletion, Topic
from kcoord.storage.files import fsync_dir
from kcoord.storage.log_deletion import remove_delete_dirs, rename_for_delete
from kcoord.storage.partition_metadata import read_partition_metadata

if TYPE_CHECKING:
    from pathlib import Path

    from kcoord.protocol.coordinator_records import CoordinatorRecord
    from kcoord.server.coordinator.runtime import CoordinatorRuntime
    from kcoord.server.data_plane import DataPlane
    from kcoord.server.group.coordinator import GroupCoordinator
    from kcoord.server.lazy import Lazy
    from kcoord.server.topics import TopicRegistry
    from kcoord.storage.log_manager import LogManager

log = logging.getLogger("kcoord.topics")

RETRY_SECONDS = 5.0  # a failed step 3 or 4 is tried again after this long


class TopicDeleter:
    def __init__(self, topics: TopicRegistry, log_dir: Path, data_plane: Lazy[DataPlane],
                 coordinator: Lazy[GroupCoordinator], runtime: Lazy[CoordinatorRuntime[CoordinatorRecord]],
                 share_state: Callable[[], Any]) -> None:
        self.topics = topics
        self._share_state = share_state  # the share manager when share state exists (server/share/cleanup.py)
        self.log_dir = log_dir
        self.logs: LogManager | None = None  # set by the root once the logs are open
        self._data_plane = data_plane
        self._coordinator = coordinator
        self._runtime = runtime
        self.loaded = asyncio.Event()  # set once __consumer_offsets is loaded (step 3 may run)
        self._finishing: dict[object, asyncio.Future[bool]] = {}
        self._dirs_lock = asyncio.Lock()
        self._retry: asyncio.TimerHandle | None = None

    # ---------------------------------------------------------------- steps 1 and 2

    def delete(self, topic: Topic) -> PendingDeletion:
        """Steps 1 and 2, now. Raises OSError if the registry cannot be written (then nothing
        changed)."""
        logs = self.logs
        pending = self.topics.begin_delete(topic)
        log.info("Deleting topic %s with %d partitions, id %s", topic.name, topic.partitions, topic.topic_id)
        crash_point("delete-topic:registered")
        assert logs is not None
        dp = self._data_plane.get()
        for p in range(pending.partitions):
            try:
                logs.remove(pending.name, p)
            except OSError as e:  # a flush failed: the files are deleted anyway
                log.warning("Closing the log of %s-%d failed: %s", pending.name, p, e)
            dp.appended(pending.name, p)  # parked long polls on it answer now
        dp.producers.drop_topic(pending.name)
        dp.txns.forget(pending.name)  # its open transactions' markers are skipped (server/txn/markers.py)
        try:
            logs.checkpoint_log_start_offsets()  # its entries must not outlive it
            self._rename(pending)
        except OSError as e:  # retried by the next start-up's recover_files
            log.error("Renaming the partition directories of deleted topic %s failed: %s", pending.name, e)
        return pending

    def _rename(self, pending: PendingDeletion) -> None:
        log_dir = str(self.log_dir)
        renamed = 0
        for p in range(pending.partitions):
            path = os.path.join(log_dir, f"{pending.name}-{p}")
            if not os.path.isdir(path) or not _belongs(path, pending):
                continue
            rename_for_delete(log_dir, pending.name, p)
            renamed += 1
            if renamed == 1:
                crash_point("delete-topic:renamed-first")
        if renamed:
            fsync_dir(log_dir)
        crash_point("delete-topic:renamed")

    def recover_files(self) -> None:
        """At start-up, before the logs are opened: step 2's renames a crash interrupted."""
        for pending in list(self.topics.deleting.values()):
            log.info("Resuming the deletion of topic %s (id %s)", pending.name, pending.topic_id)
            self._rename(pending)

    # ---------------------------------------------------------------- steps 3 to 5

    async def finish(self, pending: PendingDeletion) -> bool:
        """Steps 3-5 for one deletion; True when done, False when it failed (a retry is
        scheduled). Concurrent callers share one run."""
        running = self._finishing.get(pending.topic_id)
        if running is None:
            running = self._finishing[pending.topic_id] = asyncio.ensure_future(self._finish(pending))
            running.add_done_callback(lambda _: self._finishing.pop(pending.topic_id, None))
        return await asyncio.shield(running)

    async def _finish(self, pending: PendingDeletion) -> bool:
        await self.loaded.wait()
        try:
            await self._tombstones(pending)
            await after_topic_deleted(self._share_state, pending.topic_id)  # its share partitions' state
            crash_point("delete-topic:tombstoned")
            await self._remove_dirs()
            crash_point("delete-topic:removed")
            self.topics.end_delete(pending.topic_id)
        except (KafkaError, OSError) as e:
            log.error("Finishing the deletion of topic %s failed (retried in %.0f s): %s", pending.name,
                      RETRY_SECONDS, e)
            self._schedule_retry()
            return False
        log.info("Deleted topic %s (id %s)", pending.name, pending.topic_id)
        return True

    async def _tombstones(self, pending: PendingDeletion) -> None:
        """Through the coordinator runtime like any coordinator write: durable, then replayed."""
        result = self._coordinator.get().on_partitions_deleted({pending.name: set(range(pending.partitions))})
        answer = self._runtime.get().submit(result)  # on_appended answers the append's error
        if isinstance(answer, Deferred):
            fut: asyncio.Future[ErrorCode | None] = asyncio.get_running_loop().create_future()
            answer.add_callback(lambda code: fut.done() or fut.set_result(code))
            answer = await fut
        if answer is not None:
            raise KafkaError(answer, f"writing {len(result.records)} offset tombstones failed: {answer.name}")

    async def _remove_dirs(self) -> None:
        """Every `-delete` directory (this deletion's and any a crash left behind)."""
        async with self._dirs_lock:
            await asyncio.to_thread(remove_delete_dirs, str(self.log_dir))

    def delete_topic(self, topic: Topic) -> Deferred[None]:
        """Delete a topic: completes once nothing of it remains, or, while __consumer_offsets
        is still loading, once it is gone from the registry and its files renamed (the rest
        follows the load). Raises OSError if the registry cannot be written, in which case
        nothing changed."""
        pending = self.delete(topic)
        done: Deferred[None] = Deferred()
        if not self.loaded.is_set():
            done.complete(None)
        else:
            asyncio.ensure_future(self.finish(pending)).add_done_callback(lambda _: done.complete(None))
        return done

    async def finish_all_after(self, loading: asyncio.Future[None]) -> None:
        """Topic deletions write offset tombstones from the loaded groups: finish the ones
        listed (a crash or a delete during loading left them) once loading is done."""
        await loading
        await self.finish_all()

    async def finish_all(self) -> None:
        """After loading (and on retries): finish every deletion still listed, and remove
        `-delete` directories even when none is."""
        self.loaded.set()
        pending = list(self.topics.deleting.values())
        if not pending:
            try:
                await self._remove_dirs()
            except OSError as e:
                log.error("Removing deleted partition directories failed: %s", e)
            return
        for d in pending:
            await self.finish(d)

    def _schedule_retry(self) -> None:
        if self._retry is None:
            def retry() -> None:
                self._retry = None
                asyncio.ensure_future(self.finish_all())
            self._retry = asyncio.get_running_loop().call_later(RETRY_SECONDS, retry)

    def stop(self) -> None:
        if self._retry is not None:
            self._retry.cancel()
            self._retry = None


def _belongs(path: str, pending: PendingDeletion) -> bool:
    """A directory under the deleted topic's name is the deleted topic's unless its
    partition.metadata names another topic id (no topic of that name can be created while
    the deletion is listed, so a directory without the file is the deleted topic's too: it
    was created, then the process died before writing the file)."""
    try:
        tid = read_partition_metadata(path)
    except ValueError:
        return True
    return tid is None or tid == pending.topic_id
