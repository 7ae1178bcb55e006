"""The durable share state (server/share/state.py), share sessions (server/share/sessions.py)
and what a share fetch learns from the batches it read (server/share/records.py)."""
from __future__ import annotations

import uuid

import pytest
from aiokafka.record.default_records import DefaultRecordBatchBuilder

from kcoord.protocol.errors import ErrorCode
from kcoord.protocol.share_records import ShareSnapshotValue, ShareUpdateValue, StateBatch
from kcoord.server.share import records
from kcoord.server.share.sessions import FINAL_EPOCH, SessionError, ShareSessionCache
from kcoord.server.share.state import (
    ShareStateRecords,
    ShareStateShard,
    combine,
    coordinator_key,
    state_partition,
)

TID = uuid.UUID(int=0x0123456789ABCDEFFEDCBA9876543210)
KEY = ("g", TID, 0)
ACK, ARCH, AVAIL = 2, 4, 0


def test_coordinator_key_is_kafkas():
    # Kafka's "%s:%s:%d" of group, Uuid.toString() and partition, and
    # Utils.abs(key.hashCode()) % 50: computed with kafka-clients 4.3.0's Uuid in jshell
    assert coordinator_key("my-group", TID, 3) == "my-group:ASNFZ4mrze_-3LqYdlQyEA:3"
    assert state_partition("my-group", TID, 3, 50) == 44


def test_combine_newer_overrides_and_drops_below_start():
    old = [StateBatch(0, 9, AVAIL, 1)]
    new = [StateBatch(3, 4, ACK, 1), StateBatch(8, 12, ARCH, 2)]
    assert combine(old, new, 0) == (StateBatch(0, 2, AVAIL, 1), StateBatch(3, 4, ACK, 1),
                                    StateBatch(5, 7, AVAIL, 1), StateBatch(8, 12, ARCH, 2))
    assert combine(old, new, 4) == (StateBatch(4, 4, ACK, 1), StateBatch(5, 7, AVAIL, 1),
                                    StateBatch(8, 12, ARCH, 2))
    # adjacent batches in the same state and count join
    assert combine([StateBatch(0, 1, ACK, 1)], [StateBatch(2, 3, ACK, 1)], 0) == (StateBatch(0, 3, ACK, 1),)


def test_snapshot_then_updates_then_snapshot_every_n():
    shard = ShareStateShard(50, snapshot_every=2)
    fmt = ShareStateRecords(50)

    def write(start, batches):
        recs = shard.records_for(KEY, start, batches, 1000)
        for r in recs:
            k, v = fmt.encode(r)
            shard.replay(fmt.decode(k, v))  # through the bytes
        return recs[0].value

    assert isinstance(write(0, []), ShareSnapshotValue)  # no state yet
    assert isinstance(write(0, [StateBatch(2, 3, ACK, 1)]), ShareUpdateValue)
    assert isinstance(write(0, [StateBatch(5, 5, ARCH, 3)]), ShareUpdateValue)
    snap = write(4, [StateBatch(4, 4, ACK, 1)])
    assert isinstance(snap, ShareSnapshotValue)  # after 2 updates
    assert snap.snapshot_epoch == 1 and snap.start_offset == 4
    assert snap.state_batches == (StateBatch(4, 4, ACK, 1), StateBatch(5, 5, ARCH, 3))
    s = shard.get(KEY)
    assert (s.start_offset, s.batches) == (4, snap.state_batches)


def test_tombstones_forget_the_partition():
    shard = ShareStateShard(50)
    for r in shard.records_for(KEY, 7, [], 0):
        shard.replay(r)
    for r in shard.tombstones(KEY):
        shard.replay(r)
    assert shard.get(KEY) is None


def test_alter_gives_the_next_state_epoch():
    shard = ShareStateShard(50)
    for r in shard.records_for(KEY, 0, [StateBatch(0, 3, ACK, 1)], 0):
        shard.replay(r)
    (r,) = shard.records_for(KEY, 10, [], 5, state_epoch=1, full=True)
    shard.replay(r)
    s = shard.get(KEY)
    assert (s.state_epoch, s.start_offset, s.batches) == (1, 10, ())


def test_session_epochs():
    cache = ShareSessionCache(max_sessions=2)
    s = cache.open("g", "m", [(TID, 0)])
    assert s.epoch == 1
    with pytest.raises(SessionError) as e:
        cache.check("g", "m", 2)
    assert e.value.code == ErrorCode.INVALID_SHARE_SESSION_EPOCH
    with pytest.raises(SessionError) as e:
        cache.check("g", "other", 1)
    assert e.value.code == ErrorCode.SHARE_SESSION_NOT_FOUND
    cache.advance(cache.check("g", "m", 1), add=[(TID, 1)], forget=[(TID, 0)])
    assert s.epoch == 2 and list(s.partitions) == [(TID, 1)]
    assert cache.check("g", "m", FINAL_EPOCH) is s  # the final epoch matches any
    cache.open("g", "m2", [])
    with pytest.raises(SessionError) as e:
        cache.open("g", "m3", [])
    assert e.value.code == ErrorCode.SHARE_SESSION_LIMIT_REACHED
    cache.open("g", "m", [])  # re-opening one's own session is no new session
    assert cache.close("g", "m") is not None and cache.get("g", "m") is None


def _batch(base, n, pid=-1, transactional=False, control=False):
    b = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=transactional, producer_id=pid,
                                  producer_epoch=0 if pid >= 0 else -1, base_sequence=0 if pid >= 0 else -1,
                                  batch_size=1 << 20)
    for i in range(n):
        b.append(i, timestamp=0, key=None, value=b"x", headers=[])
    data = bytearray(b.build())
    data[0:8] = base.to_bytes(8, "big")
    if control:
        data[22] |= 0x20  # attributes' control bit (outside the CRC's reach is not needed here)
    return bytes(data)


def test_batches_and_what_is_never_delivered():
    data = _batch(0, 3) + _batch(3, 2, pid=7, transactional=True) + _batch(5, 1, pid=7, transactional=True,
                                                                           control=True) + _batch(6, 2)
    infos = records.batches(data)
    assert [(b.base, b.last, b.control) for b in infos] == [(0, 2, False), (3, 4, False), (5, 5, True), (6, 7, False)]
    # read_uncommitted: only the marker; read_committed with pid 7 aborted from 3: its batch too
    assert records.undeliverable(infos, None) == [(5, 5)]
    assert records.undeliverable(infos, [(7, 3)]) == [(3, 4), (5, 5)]
