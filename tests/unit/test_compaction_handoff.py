"""Handing compacted segments to a partition directory (sidecar/handoff.py, storage/swap.py):
a live PartitionLog swaps them in between appends and reads, and a compaction interrupted
at any step of the .cleaned -> .swap -> .log protocol reopens to the same state with no
stray files."""
from __future__ import annotations

import os
import shutil

import pytest

from kcoord.protocol.coordinator_codec import encode_key, encode_value
from kcoord.protocol.coordinator_records import OffsetKey, OffsetValue
from kcoord.sidecar.compaction import (
    Segment,
    compact_partition,
    iter_records,
    iter_segment_batches,
    read_partition_segments,
)
from kcoord.sidecar.handoff import (
    InputChangedError,
    closed_segments,
    commit_swaps,
    fingerprints,
    publish,
    write_cleaned,
)
from kcoord.sidecar.testdata import write_partition
from kcoord.sidecar.verify import replay_state
from kcoord.storage.batch import split_batches
from kcoord.storage.log import PartitionLog
from kcoord.storage.segment import segment_name
from kcoord.storage.swap import SWAP_SUFFIX, complete_swap, pending_swaps, segment_bases

NOW = 1_700_000_000_000


def state(path: str) -> dict:
    plog = PartitionLog(path)
    try:
        _, st = replay_state(((k, v) for _o, k, v in plog.iter_records()), 0, 1, "last-value")
    finally:
        plog.close()
    return st


def check_clean_dir(path: str) -> None:
    """No protocol leftovers; every segment's offsets increase and every CRC is valid."""
    names = os.listdir(path)
    assert not [n for n in names if n.endswith((".cleaned", ".swap", ".deleted", ".tmp"))], names
    for seg in read_partition_segments(path):
        last = seg.base_offset - 1
        for h, body in iter_segment_batches(seg.data):  # checks CRCs and order
            for off, *_ in iter_records(body, h):
                assert off > last
                last = off


def compacted(path: str, segment_bytes: int = 4096):
    """(cleaned groups, inputs read, fingerprints) the way a pass in place computes them."""
    closed, active = closed_segments(path)
    segs = [s for s in read_partition_segments(path) if s.base_offset in closed]
    result = compact_partition(segs + [Segment(active, b"")], now_ms=NOW, segment_bytes=segment_bytes)
    return result.groups, segs, fingerprints(path, closed)


@pytest.fixture
def partition(tmp_path):
    gen = write_partition(str(tmp_path), 0, num_partitions=1, segment_bytes=2048)
    return gen.path


def test_live_log_swaps_in_between_appends_and_reads(partition):
    before = state(partition)
    plog = PartitionLog(partition, segment_bytes=2048)
    try:
        groups, segs, fps = compacted(partition)
        size_before = plog.size_in_bytes
        # The server keeps appending while the compactor works: new records, new segments.
        k = encode_key(OffsetKey("late", "t", 0))
        for i in range(40):
            plog.append_records([(k, encode_value(OffsetValue(i, "", NOW, 0)))], NOW)
        assert publish(partition, groups, segs, fps) == len(groups)
        assert pending_swaps(partition)
        assert plog.adopt_swaps() == len(groups)
        assert not pending_swaps(partition)
        assert plog.size_in_bytes < size_before
        # Reads see the compacted segments, appends go on in the same log.
        plog.append_records([(k, encode_value(OffsetValue(99, "", NOW, 0)))], NOW)
        got = {}
        for _off, key, value in plog.iter_records():
            got[key] = value
        assert got[k] == encode_value(OffsetValue(99, "", NOW, 0))
        assert plog.read(plog.log_start_offset, 1 << 20)
    finally:
        plog.close()
    after = state(partition)
    late = after.pop(next(x for x in after if "late" in repr(x)))
    assert late is not None
    assert after == before
    check_clean_dir(partition)


def _steps(partition: str):
    """The states a pass in place goes through, one per step."""
    groups, segs, fps = compacted(partition)
    written = write_cleaned(partition, groups, {s.base_offset: s.data for s in segs})
    assert len(written) >= 2
    yield "cleaned written"
    # commit_swaps renames one group at a time: a crash may land between two renames.
    path0 = os.path.join(partition, segment_name(written[0]) + ".log")
    os.rename(path0 + ".cleaned", path0 + SWAP_SUFFIX)
    yield "first swap committed"
    commit_swaps(partition, written[1:], fps)
    yield "every swap committed"
    # The log completes the last swap: old segments deleted newest first, then the rename.
    last = next(g for g in groups if g.segment.base_offset == written[-1])
    assert len(last.replaces) >= 2
    for suffix in (".log", ".index", ".timeindex"):
        os.unlink(os.path.join(partition, segment_name(last.replaces[-1]) + suffix))
    yield "completion: newest old segment deleted"
    assert complete_swap(partition, last.segment.base_offset, segment_bases(partition)) == last.replaces[:-1]
    yield "completion: renamed"


@pytest.mark.parametrize("stop_after", range(5))
def test_interrupted_at_each_step_reopens_to_the_same_state(tmp_path, stop_after):
    gen = write_partition(str(tmp_path), 0, num_partitions=1, segment_bytes=2048)
    before = state(gen.path)
    bytes_before = sum(os.path.getsize(os.path.join(gen.path, n)) for n in os.listdir(gen.path) if n.endswith(".log"))
    steps = _steps(gen.path)
    reached = None
    for i, name in enumerate(steps):
        reached = name
        if i == stop_after:
            break
    steps.close()  # the "crash": nothing more happens
    leftovers = [n for n in os.listdir(gen.path) if n.endswith((".cleaned", ".swap"))]
    assert leftovers or reached == "completion: renamed"
    # Restart: the log finishes or drops what it finds, then serves the same state.
    assert state(gen.path) == before, reached
    check_clean_dir(gen.path)
    size = sum(os.path.getsize(os.path.join(gen.path, n)) for n in os.listdir(gen.path) if n.endswith(".log"))
    if reached == "cleaned written":
        assert size == bytes_before  # nothing was committed: the old segments stay
    else:
        assert size < bytes_before


def test_torn_cleaned_file_from_a_killed_compactor_is_deleted(partition):
    before = state(partition)
    groups, segs, _ = compacted(partition)
    torn = os.path.join(partition, segment_name(groups[0].segment.base_offset) + ".log.cleaned")
    with open(torn, "wb") as f:
        f.write(groups[0].segment.data[:100])
    assert state(partition) == before
    check_clean_dir(partition)


def test_swaps_that_do_not_fit_are_refused_and_deleted(partition):
    before = state(partition)
    bases = segment_bases(partition)
    # Corrupt swap: one flipped byte.
    groups, segs, _ = compacted(partition)
    bad = bytearray(groups[0].segment.data)
    bad[-1] ^= 0xFF
    p = os.path.join(partition, segment_name(bases[0]) + ".log.swap")
    with open(p, "wb") as f:
        f.write(bad)
    # A swap that would reach into the active segment (the live log refuses it).
    active = PartitionLog(partition, segment_bytes=2048)
    try:
        whole = b"".join(s.data for s in read_partition_segments(partition))
        p2 = os.path.join(partition, segment_name(bases[0]) + ".log.swap")
        with open(p2, "wb") as f:
            f.write(whole)
        assert active.adopt_swaps() == 0
        assert not pending_swaps(partition)
    finally:
        active.close()
    with open(p, "wb") as f:
        f.write(bad)
    assert state(partition) == before  # start-up refuses the corrupt one too
    check_clean_dir(partition)


def test_changed_inputs_commit_nothing(partition, tmp_path):
    groups, segs, fps = compacted(partition)
    victim = os.path.join(partition, segment_name(segs[1].base_offset) + ".log")
    # A restarted server's recovery rewrote a segment the pass read: same name, new inode.
    shutil.copy(victim, str(tmp_path / "copy"))
    os.replace(str(tmp_path / "copy"), victim)
    with pytest.raises(InputChangedError):
        publish(partition, groups, segs, fps)
    assert not [n for n in os.listdir(partition) if n.endswith((".cleaned", ".swap"))]


def test_a_swap_whose_segments_retention_deleted_is_dropped_not_resurrected(partition):
    """compact,delete topics: retention (or DeleteRecords) may delete the segments a committed
    swap replaces before the server adopts it; the swap must not bring their offsets back."""
    plog = PartitionLog(partition, segment_bytes=2048)
    try:
        groups, segs, fps = compacted(partition)
        commit_swaps(partition, write_cleaned(partition, groups, segs), fps)
        assert pending_swaps(partition)
        first_swap = pending_swaps(partition)[0]
        deleted = plog.apply_retention(NOW, -1, 1)  # size retention: keep only the active segment
        assert deleted and plog.segments[0].base_offset > first_swap
        assert not [b for b in pending_swaps(partition) if b < plog.segments[0].base_offset]
        start = plog.log_start_offset
        plog.adopt_swaps()
        assert plog.log_start_offset == start
    finally:
        plog.close()
    check_clean_dir(partition)


def test_live_adoption_refuses_a_swap_that_replaces_no_segment(partition):
    plog = PartitionLog(partition, segment_bytes=2048)
    try:
        groups, segs, fps = compacted(partition)
        commit_swaps(partition, write_cleaned(partition, groups, segs), fps)
        swaps = pending_swaps(partition)
        # as if the segments vanished without the swap being noticed (no remove_swaps_below)
        for seg in list(plog.segments[:-1]):
            if seg.base_offset in swaps:
                seg.close()
                for ext in (".log", ".index", ".timeindex"):
                    p = os.path.join(partition, segment_name(seg.base_offset) + ext)
                    if os.path.exists(p):
                        os.unlink(p)
        plog.segments = [s for s in plog.segments if s.base_offset not in swaps or s is plog.active]
        plog._bases = [s.base_offset for s in plog.segments]
        start = plog.log_start_offset
        assert plog.adopt_swaps() == 0
        assert plog.log_start_offset == start and not pending_swaps(partition)
    finally:
        plog.close()


def test_a_read_passes_over_segments_compaction_left_with_only_an_empty_batch(tmp_path):
    """One key written 300 times: each cleaned segment but the last closed one keeps only its
    last batch, empty (the key's last value in the cleaned range is in the last one). A read
    from any offset returns those empty batches and goes on to the batch holding that value;
    before, it returned one empty batch per read (a consumer given nothing but empty batches
    grows its fetch size instead, and librdkafka gives up after ten)."""
    path = str(tmp_path / "changelog-0")
    os.makedirs(path)
    plog = PartitionLog(path, segment_bytes=2048)
    try:
        for i in range(300):
            plog.append_records([(b"key", b"v%03d" % i + b"x" * 60)], NOW)
        groups, segs, fps = compacted(path, segment_bytes=2048)
        assert publish(path, groups, segs, fps) == len(groups)
        assert plog.adopt_swaps() == len(groups)
        closed = plog.segments[:-1]
        assert len(closed) >= 3
        survivor = closed[-1].next_offset - 1
        for offset in (0, 1, closed[1].base_offset, survivor - 1):
            headers = split_batches(plog.read(offset, 1 << 20))
            assert len(headers) == sum(1 for seg in closed if seg.next_offset > offset)
            assert all(h.record_count == 0 for h in headers[:-1])
            assert headers[-1].record_count == 1 and headers[-1].last_offset == survivor
        # max_bytes: the first batch holding a record is returned whole (KIP-74)
        headers = split_batches(plog.read(0, 1))
        assert len(headers) == len(closed) and headers[-1].last_offset == survivor
        assert split_batches(plog.read(survivor + 1, 1 << 20))[0].base_offset == survivor + 1
        assert plog.read(plog.log_end_offset, 1 << 20) == b""
    finally:
        plog.close()
