"""The share coordinator on the one rule for state changes (server/coordinator/result.py): a
write of share-partition state is replayed when it is made and reverted by the runtime if it
never becomes durable, and a read answers only durable state (it waits for the writes of its
key in flight). The real runtime over a real __share_group_state log in tmp_path; the
fdatasync really fails (the partition's active segment descriptor is swapped for /dev/null's:
write(2) succeeds, fdatasync(2) returns EINVAL, and the log directory goes offline, so those
tests leave their logs unclosed: closing flushes, which an offline directory refuses)."""
from __future__ import annotations

import asyncio
import os
import uuid

from kcoord.protocol.errors import ErrorCode
from kcoord.protocol.share_records import StateBatch
from kcoord.protocol.topics import SHARE_STATE_TOPIC
from kcoord.server.clock import SystemClock
from kcoord.server.share.coordinator import ShareCoordinator
from kcoord.server.share.state import ShareStateRecords, ShareStateRuntime, ShareStateShard, state_partition
from kcoord.storage.log_manager import LogManager

N = 3
TOPIC_ID = uuid.UUID(int=7)
KEY = ("g", TOPIC_ID, 0)
AVAILABLE, ACKNOWLEDGED = 0, 2


def coordinator(tmp_path, snapshot_every: int = 500) -> tuple[ShareCoordinator, LogManager]:
    logs = LogManager(str(tmp_path))
    for p in range(N):
        logs.create(SHARE_STATE_TOPIC, p)
    shard = ShareStateShard(N, snapshot_every)
    runtime = ShareStateRuntime(lambda _rt: shard, ShareStateRecords(N), logs, SystemClock(), 5000, 1048588)
    return ShareCoordinator(shard, runtime, SystemClock()), logs


def break_fdatasync(logs: LogManager) -> None:
    plog = logs.get(SHARE_STATE_TOPIC, state_partition(*KEY, N))
    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, plog.active.fd)
    os.close(null)


async def test_a_failed_write_leaves_the_state_as_it_was(tmp_path):
    coord, logs = coordinator(tmp_path)
    assert await coord.initialize(KEY, 1, 10, leader_epoch=3) is None
    assert await coord.write(KEY, 1, 3, -1, [StateBatch(10, 14, ACKNOWLEDGED, 1)]) is None  # an update
    before = coord.shard.get(KEY)
    assert before.start_offset == 10 and before.batches == (StateBatch(10, 14, ACKNOWLEDGED, 1),)
    break_fdatasync(logs)
    code = await coord.write(KEY, 1, 3, 12, [StateBatch(15, 19, ACKNOWLEDGED, 1)])
    assert code == ErrorCode.NOT_COORDINATOR  # KAFKA_STORAGE_ERROR, as Kafka's coordinator maps it
    assert coord.shard.get(KEY) == before


async def test_a_failed_first_write_leaves_no_state(tmp_path):
    coord, logs = coordinator(tmp_path)
    break_fdatasync(logs)
    assert await coord.initialize(KEY, 0, 5) == ErrorCode.NOT_COORDINATOR
    assert coord.shard.get(KEY) is None and coord.shard.states == {}


async def test_a_failed_delete_keeps_the_state(tmp_path):
    coord, logs = coordinator(tmp_path)
    assert await coord.initialize(KEY, 1, 10) is None
    before = coord.shard.get(KEY)
    break_fdatasync(logs)
    assert await coord.delete([KEY]) == {KEY: ErrorCode.NOT_COORDINATOR}
    assert coord.shard.get(KEY) == before


async def test_a_write_is_in_the_state_at_once_and_a_read_waits_until_it_is_durable(tmp_path):
    coord, logs = coordinator(tmp_path)
    assert await coord.initialize(KEY, 1, 10) is None
    writing = asyncio.ensure_future(coord.write(KEY, 1, -1, -1, [StateBatch(10, 11, ACKNOWLEDGED, 1)]))
    await asyncio.sleep(0)  # the write is made (replayed), its append not yet durable
    assert coord.shard.get(KEY).batches == (StateBatch(10, 11, ACKNOWLEDGED, 1),)
    code, state = await coord.read(KEY)
    assert writing.done() and writing.result() is None  # the read answered only after the write
    assert code is None and state.batches == (StateBatch(10, 11, ACKNOWLEDGED, 1),)
    logs.close()


async def test_a_read_beside_a_failing_write_answers_the_durable_state(tmp_path):
    coord, logs = coordinator(tmp_path)
    assert await coord.initialize(KEY, 1, 10) is None
    durable = coord.shard.get(KEY)
    break_fdatasync(logs)
    writing = asyncio.ensure_future(coord.write(KEY, 1, -1, -1, [StateBatch(10, 11, ACKNOWLEDGED, 1)]))
    await asyncio.sleep(0)
    code, state = await coord.read(KEY)
    assert writing.result() == ErrorCode.NOT_COORDINATOR
    # the node's log directory went offline with the fdatasync: a read may be refused, but it
    # never answers the state of the write that failed
    assert state is None or state == durable
    assert coord.shard.get(KEY) == durable


async def test_writes_after_a_failed_one_on_the_same_key_are_reverted_too(tmp_path):
    """Two writes of one key in flight, the first fails: the second was made on top of it and
    cannot stand either (the same log, so it fails too); the state is the durable one."""
    coord, logs = coordinator(tmp_path, snapshot_every=1)  # the second write is a snapshot
    assert await coord.initialize(KEY, 1, 10) is None
    durable = coord.shard.get(KEY)
    break_fdatasync(logs)
    first = asyncio.ensure_future(coord.write(KEY, 1, -1, -1, [StateBatch(10, 11, ACKNOWLEDGED, 1)]))
    await asyncio.sleep(0)
    second = asyncio.ensure_future(coord.write(KEY, 1, -1, 12, [StateBatch(12, 13, AVAILABLE, 2)]))
    assert await first == ErrorCode.NOT_COORDINATOR and await second == ErrorCode.NOT_COORDINATOR
    assert coord.shard.get(KEY) == durable
