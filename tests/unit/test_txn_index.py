"""`.txnindex` files in Kafka's layout (storage/txn_index.py) and the partition's aborted
transactions a read_committed fetch collects (server/partition_txns.py)."""
from __future__ import annotations

import struct

from kcoord.server.partition_txns import PartitionTxns
from kcoord.storage.log import PartitionLog
from kcoord.storage.txn_batches import build_marker, build_transactional_batch
from kcoord.storage.txn_index import (
    AbortedTxn,
    decode_entries,
    encode_entries,
    read_entries,
    sync_txn_index,
    txn_index_path,
)


def test_entry_layout_is_kafkas() -> None:
    e = AbortedTxn(producer_id=7, first_offset=10, last_offset=20, last_stable_offset=21)
    assert encode_entries([e]) == struct.pack(">hqqqq", 0, 7, 10, 20, 21)
    assert decode_entries(encode_entries([e, e]) + b"\x00\x01") == [e, e]  # a torn tail is ignored
    assert decode_entries(struct.pack(">hqqqq", 1, 7, 10, 20, 21)) == []  # an unknown version stops it


def test_sync_writes_only_what_differs(tmp_path) -> None:
    path = str(tmp_path / "00000000000000000000.txnindex")
    assert not sync_txn_index(path, [])  # no entries: no file
    e = AbortedTxn(1, 0, 3, 4)
    assert sync_txn_index(path, [e]) and read_entries(path) == [e]
    assert not sync_txn_index(path, [e])
    assert sync_txn_index(path, []) and read_entries(path) is None


def test_collect_follows_kafkas_rule() -> None:
    t = PartitionTxns("t", 0)
    for pid, first in ((1, 0), (2, 3), (3, 12)):
        t.on_data(pid, first)
    t.on_marker(None, 1, False, 5)  # LSO after it: 3 (producer 2 still open)
    t.on_marker(None, 2, False, 10)  # LSO after it: 12
    t.on_marker(None, 3, False, 20)  # LSO after it: 21
    assert [(e.producer_id, e.last_stable_offset) for e in t.aborted] == [(1, 3), (2, 12), (3, 21)]
    assert [e.producer_id for e in t.collect_aborted(0, 4)] == [1, 2]  # stops at the entry whose LSO reaches 4
    assert [e.producer_id for e in t.collect_aborted(6, 13)] == [2, 3]
    assert [e.producer_id for e in t.collect_aborted(11, 12)] == []  # producer 3 starts at 12
    assert t.collect_aborted(21, 30) == []


def test_load_rebuilds_state_and_index_files_from_the_log(tmp_path) -> None:
    plog = PartitionLog(str(tmp_path / "t-0"), segment_bytes=300)
    kv = [(b"k", b"v" * 50)]
    plog.append_batches(build_transactional_batch(kv, 1, 0, 1))  # 0: producer 1
    plog.append_batches(build_transactional_batch(kv, 2, 0, 1))  # 1: producer 2
    plog.append_batches(build_marker(1, 0, False, 0, 2))  # 2: abort 1
    plog.append_batches(build_transactional_batch(kv, 3, 0, 1))  # 3: producer 3, left open
    plog.append_batches(build_marker(2, 0, True, 0, 3))  # 4: commit 2
    live = PartitionTxns("t", 0)
    live.load(plog)
    assert live.ongoing == {3: 3} and live.lso(plog) == 3
    assert [(e.producer_id, e.first_offset, e.last_offset, e.last_stable_offset) for e in live.aborted] == [(1, 0, 2, 1)]
    on_disk = {seg.base_offset: read_entries(txn_index_path(plog.path, seg.base_offset)) for seg in plog.segments}
    assert [e for es in on_disk.values() if es for e in es] == live.aborted
    assert len(plog.segments) > 1  # the marker's segment holds the entry, not the first one
    assert on_disk[plog.segments[0].base_offset] is None
    plog.close()
