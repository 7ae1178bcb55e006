"""The share coordinator (Kafka's ShareCoordinatorService over its shards): the node that
leads a __share_group_state partition owns the state of the share partitions whose key
("group:topicId:partition") hashes to it, and answers reads and writes of it, from this node's
share partitions (server/share/persister.py, directly) and from other nodes' (the
InitializeShareGroupState / ReadShareGroupState / WriteShareGroupState / DeleteShareGroupState
handlers, server/handlers/share_state.py).

- A partition this node does not hold (another node leads it, or it was unloaded) answers
  NOT_COORDINATOR, one being loaded COORDINATOR_LOAD_IN_PROGRESS (the runtime's state, moved by
  server/cluster/coordinators.py as leadership moves; on one node every partition is held).
- Writes are the runtime's, by its one rule (server/coordinator/result.py): replayed when made,
  appended, acknowledged as the runtime's acks say (on a cluster, by every in-sync replica,
  server/coordinator/acks.py), only then answered; a failed append is reverted and answers the
  runtime's mapped code. A read waits for the writes of its key in flight: it answers only
  durable state.
- Fencing, as Kafka's shard: a write or read carrying a leader epoch older than the one stored
  for the share partition answers FENCED_LEADER_EPOCH (a data partition's former leader cannot
  overwrite what its successor wrote); a read with a newer leader epoch records it first. An
  initialization with a state epoch older than the stored one answers FENCED_STATE_EPOCH.
"""
from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import Any

from kcoord.protocol.errors import ErrorCode
from kcoord.protocol.share_records import StateBatch
from kcoord.server.share.state import Key, PersistedState, ShareStateShard, StateRecord, state_partition


class ShareCoordinator:
    def __init__(self, shard: ShareStateShard, runtime: Any, clock: Any) -> None:
        self.shard = shard
        self.runtime = runtime
        self.clock = clock
        self._writing: dict[Key, asyncio.Future[ErrorCode | None]] = {}  # key -> its last write in flight

    def partition_of(self, key: Key) -> int:
        return state_partition(key[0], key[1], key[2], self.shard.num_partitions)

    def refused(self, key: Key) -> ErrorCode | None:
        """NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS for a key this node cannot answer now."""
        p = self.partition_of(key)
        state = self.runtime.state(p)[0]
        if state == "unloaded":
            return ErrorCode.NOT_COORDINATOR
        if state == "loading" or p in self.shard.loading:
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        return None

    def append(self, records: list[StateRecord]) -> asyncio.Future[ErrorCode | None]:
        """The runtime's write (replayed now, reverted if it never becomes durable): None once
        durable, else the mapped code. Every write of share state goes through here, so that a
        read waits for the writes of its key in flight."""
        fut = self.runtime.write(records)
        keys = {(r.key.group, r.key.topic_id, r.key.partition) for r in records}
        writing = self._writing
        for k in keys:
            writing[k] = fut

        def settled(f: asyncio.Future[ErrorCode | None]) -> None:
            for k in keys:
                if writing.get(k) is f:
                    del writing[k]

        fut.add_done_callback(settled)
        return fut

    async def _durable(self, key: Key) -> PersistedState | None:
        """The key's state once no write of it is in flight: what a read answers is durable (a
        write's records are in the state from the moment it is made; one of a partition's
        writes settles only after those made before it, so its last suffices)."""
        while (fut := self._writing.get(key)) is not None:
            await asyncio.wait([fut])  # never cancels the write's future
        return self.shard.get(key)

    async def read(self, key: Key, leader_epoch: int = -1) -> tuple[ErrorCode | None, PersistedState | None]:
        """The key's durable state (None: none stored)."""
        code = self.refused(key)
        if code is not None:
            return code, None
        s = await self._durable(key)
        code = self.refused(key)  # unloaded while it waited
        if code is not None:
            return code, None
        if s is None:
            return None, None
        if leader_epoch >= 0 and leader_epoch < s.leader_epoch:
            return ErrorCode.FENCED_LEADER_EPOCH, None
        if leader_epoch > s.leader_epoch:  # the data partition's new leader: recorded before it reads
            code = await self.append(self.shard.records_for(key, -1, (), self.clock.now_ms(),
                                                            leader_epoch=leader_epoch))
            if code is not None:
                return code, None
            s = await self._durable(key)
        return None, s

    async def initialize(self, key: Key, state_epoch: int, start_offset: int,
                         leader_epoch: int = -1) -> ErrorCode | None:
        """A snapshot at `start_offset` with no batches (a new share partition's start, or
        AlterShareGroupOffsets' new start with the next state epoch)."""
        code = self.refused(key)
        if code is not None:
            return code
        old = self.shard.get(key)
        if old is not None and state_epoch < old.state_epoch:
            return ErrorCode.FENCED_STATE_EPOCH
        return await self.append(self.shard.records_for(key, start_offset, (), self.clock.now_ms(),
                                                        state_epoch=state_epoch, full=True,
                                                        leader_epoch=leader_epoch))

    async def write(self, key: Key, state_epoch: int, leader_epoch: int, start_offset: int,
                    batches: Iterable[StateBatch]) -> ErrorCode | None:
        """The changed ranges and the start offset, as an update (or a snapshot, at the
        snapshot cadence or when the key has no state)."""
        code = self.refused(key)
        if code is not None:
            return code
        old = self.shard.get(key)
        if old is not None:
            if leader_epoch >= 0 and leader_epoch < old.leader_epoch:
                return ErrorCode.FENCED_LEADER_EPOCH
            if state_epoch >= 0 and state_epoch < old.state_epoch:
                return ErrorCode.FENCED_STATE_EPOCH
        return await self.append(self.shard.records_for(key, start_offset, tuple(batches), self.clock.now_ms(),
                                                        leader_epoch=leader_epoch))

    async def delete(self, keys: Iterable[Key]) -> dict[Key, ErrorCode | None]:
        """Tombstones for every key that has state (Kafka's DeleteShareGroupState)."""
        out: dict[Key, ErrorCode | None] = {}
        records = []
        for key in keys:
            code = out[key] = self.refused(key)
            if code is None and self.shard.get(key) is not None:
                records += self.shard.tombstones(key)
        if records:
            code = await self.append(records)
            for key, c in out.items():
                if c is None:
                    out[key] = code
        return out
