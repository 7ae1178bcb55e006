"""storage/leader_epoch.py: Kafka's leader-epoch-checkpoint format and LeaderEpochFileCache's
answers (what OffsetsForLeaderEpoch and a follower's truncation rely on)."""
from __future__ import annotations

import os

import pytest

from kcoord.storage.leader_epoch import (
    CHECKPOINT_FILE,
    CorruptCheckpointError,
    LeaderEpochCache,
    format_checkpoint,
    parse_checkpoint,
)


def test_the_checkpoint_is_kafkas_text_format():
    assert format_checkpoint([(0, 0), (3, 120)]) == "0\n2\n0 0\n3 120\n"
    assert format_checkpoint([]) == "0\n0\n"
    assert parse_checkpoint("0\n2\n0 0\n3 120\n") == [(0, 0), (3, 120)]


@pytest.mark.parametrize("text", ["", "0\n", "1\n0\n", "0\n2\n0 0\n", "0\n1\nx 0\n", "0\n1\n0\n"])
def test_a_checkpoint_that_does_not_parse_is_refused(text):
    with pytest.raises(CorruptCheckpointError):
        parse_checkpoint(text)


def test_changes_are_written_through_and_read_back(tmp_path):
    cache = LeaderEpochCache.open(str(tmp_path))
    assert not cache.exists and cache.latest_epoch == -1
    cache.assign(0, 0)
    cache.assign(2, 10)
    cache.assign(2, 15)  # same epoch later: nothing to change
    assert (tmp_path / CHECKPOINT_FILE).read_text() == "0\n2\n0 0\n2 10\n"
    assert LeaderEpochCache.open(str(tmp_path)).entries() == [(0, 0), (2, 10)]
    assert not os.path.exists(str(tmp_path / CHECKPOINT_FILE) + ".tmp")


# (requested epoch, log end offset) -> (epoch, end offset), over epochs 1@0, 3@10, 5@20
@pytest.mark.parametrize("requested,expected", [
    (5, (5, 30)),  # the latest epoch ends at the log end
    (3, (3, 20)),  # ends where the next epoch starts
    (4, (3, 20)),  # an epoch we never had: the largest below it, ending where 5 starts
    (1, (1, 10)),
    (0, (0, 0)),  # below the earliest: the earliest's start
    (6, (-1, -1)),  # above every epoch
    (-1, (-1, -1)),
])
def test_end_offset_for(requested, expected):
    cache = LeaderEpochCache(None, [(1, 0), (3, 10), (5, 20)])
    assert cache.end_offset_for(requested, 30) == expected


def test_an_empty_cache_knows_no_epoch():
    assert LeaderEpochCache(None).end_offset_for(0, 10) == (-1, -1)


def test_assign_drops_entries_it_contradicts():
    cache = LeaderEpochCache(None, [(1, 0), (3, 10), (5, 20)])
    cache.assign(4, 15)  # a new leader's epoch 4 starting at 15: epoch 5 (and its start) go
    assert cache.entries() == [(1, 0), (3, 10), (4, 15)]
    cache.assign(6, 12)  # starts before 4's start: 4 goes too
    assert cache.entries() == [(1, 0), (3, 10), (6, 12)]
    assert not cache.assign(-1, 30)


def test_truncation_from_the_end_and_the_start():
    cache = LeaderEpochCache(None, [(1, 0), (3, 10), (5, 20)])
    cache.truncate_from_end(20)
    assert cache.entries() == [(1, 0), (3, 10)]
    cache.truncate_from_start(12)
    assert cache.entries() == [(3, 12)]
    assert cache.epoch_for_offset(11) == -1 and cache.epoch_for_offset(40) == 3
    assert cache.start_offset_of(3) == 12 and cache.start_offset_of(1) is None
