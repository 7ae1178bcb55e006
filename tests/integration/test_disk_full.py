"""A full disk: commits fail with the mapped error code while nothing acknowledged is lost or
corrupted, and the server recovers by itself once space returns. The log directory is a small
tmpfs mounted for the test (CI runs as root; mounting needs it)."""
from __future__ import annotations

import os
import subprocess
import time

import pytest
from conftest import call
from kafka.protocol.admin import CreateTopicsRequest
from kafka.protocol.consumer import OffsetCommitRequest, OffsetFetchRequest

from protocol.errors import ErrorCode

T = OffsetCommitRequest.OffsetCommitRequestTopic
P = T.OffsetCommitRequestPartition


@pytest.fixture
def small_disk(tmp_path):
    if os.geteuid() != 0:
        pytest.fail("mounting a tmpfs needs root (CI runs as root)")
    mnt = tmp_path / "disk"
    mnt.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", str(mnt)], check=True)
    yield mnt
    subprocess.run(["umount", "-l", str(mnt)], check=False)


def commit(bootstrap: str, offset: int, metadata: str = "") -> int:
    r = call(bootstrap, OffsetCommitRequest(
        group_id="full", generation_id_or_member_epoch=-1, member_id="", group_instance_id=None,
        topics=[T(name="t", partitions=[P(partition_index=0, committed_offset=offset,
                                          committed_metadata=metadata)])]), 8)
    return r.topics[0].partitions[0].error_code


def fetched(bootstrap: str) -> int:
    deadline = time.monotonic() + 20
    while True:
        r = call(bootstrap, OffsetFetchRequest(group_id="full", topics=None, require_stable=True), 7)
        if r.error_code == 0:
            return {p.partition_index: p.committed_offset for t in r.topics for p in t.partitions}.get(0, -1)
        assert time.monotonic() < deadline, r
        time.sleep(0.05)


def test_commits_fail_cleanly_on_a_full_disk_and_recover(kcoord_factory, small_disk):
    srv = kcoord_factory({"offsets.topic.num.partitions": "3"}, log_dir=small_disk / "data")
    CT = CreateTopicsRequest.CreatableTopic
    r = call(srv.bootstrap, CreateTopicsRequest(
        topics=[CT(name="t", num_partitions=1, replication_factor=1, assignments=[], configs=[])],
        timeout_ms=5000, validate_only=False), 5)
    assert r.topics[0].error_code == 0
    assert commit(srv.bootstrap, 10) == ErrorCode.NONE

    filler = small_disk / "filler"
    with open(filler, "wb") as f:
        try:
            while True:
                f.write(b"\0" * 65536)
                f.flush()
        except OSError:
            pass
    # Records bigger than what is left in the last page; an early one may still fit.
    acked = 10
    refused = set()
    for i in range(1, 9):
        code = commit(srv.bootstrap, 10 + i, "m" * 3000)
        if code == ErrorCode.NONE:
            acked = 10 + i
        else:
            refused.add(code)
    assert refused, "no commit was refused on a full disk"
    assert refused <= {ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE}, refused
    assert srv.alive()
    assert fetched(srv.bootstrap) == acked  # the last acknowledged offset, never a failed one

    filler.unlink()
    deadline = time.monotonic() + 10
    while commit(srv.bootstrap, 20) != ErrorCode.NONE:
        assert time.monotonic() < deadline, "commits did not recover once space returned"
        time.sleep(0.1)
    assert fetched(srv.bootstrap) == 20
    srv.restart()
    assert fetched(srv.bootstrap) == 20
