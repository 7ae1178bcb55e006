"""Offsets retention (KIP-211) in the running server: an offset committed with an explicit
retention (OffsetCommit v2-v4 retention_time_ms) is removed by the periodic task, which writes
a tombstone to __consumer_offsets and logs Kafka's line; the group, left without offsets, dies.
"""
from __future__ import annotations

import re
import subprocess
import sys
import time

from conftest import ROOT, call
from kafka.protocol.admin import CreateTopicsRequest
from kafka.protocol.consumer import OffsetCommitRequest, OffsetFetchRequest


def committed(bootstrap: str, group: str) -> list[tuple[str, int, int]]:
    r = call(bootstrap, OffsetFetchRequest(group_id=group, topics=None, require_stable=False), 7)
    assert r.error_code == 0
    return [(t.name, p.partition_index, p.committed_offset) for t in r.topics for p in t.partitions]


def test_expired_offsets_are_tombstoned_and_logged(kcoord_factory):
    srv = kcoord_factory({"offsets.retention.check.interval.ms": "200"})
    CT = CreateTopicsRequest.CreatableTopic
    r = call(srv.bootstrap, CreateTopicsRequest(
        topics=[CT(name="ret", num_partitions=2, replication_factor=1, assignments=[], configs=[])],
        timeout_ms=5000, validate_only=False), 5)
    assert r.topics[0].error_code == 0
    T = OffsetCommitRequest.OffsetCommitRequestTopic
    P = T.OffsetCommitRequestPartition

    def commit(group: str, retention_ms: int) -> None:
        req = OffsetCommitRequest(group_id=group, generation_id_or_member_epoch=-1, member_id="",
                                  retention_time_ms=retention_ms,
                                  topics=[T(name="ret", partitions=[P(partition_index=0, committed_offset=42,
                                                                      committed_metadata="")])])
        resp = call(srv.bootstrap, req, 2)
        assert [p.error_code for t in resp.topics for p in t.partitions] == [0]

    commit("short-lived", 300)
    commit("kept", -1)  # broker default retention: a week
    assert committed(srv.bootstrap, "short-lived") == [("ret", 0, 42)]

    deadline = time.monotonic() + 60
    while committed(srv.bootstrap, "short-lived") and time.monotonic() < deadline:
        time.sleep(0.1)
    assert committed(srv.bootstrap, "short-lived") == []
    assert committed(srv.bootstrap, "kept") == [("ret", 0, 42)]
    assert re.search(r"Removed [1-9]\d* expired offsets in \d+ milliseconds\.", srv.log_text())

    # The tombstone is in the log: the state rebuilt offline agrees.
    out = subprocess.run([sys.executable, "-m", "kcoord.server", "offsets", "--log-dir", str(srv.log_dir)],
                         cwd=ROOT, capture_output=True, text=True, timeout=60, check=True).stdout
    groups = {line.split()[0] for line in out.splitlines()[1:]}
    assert groups == {"kept"}
    dump = subprocess.run([sys.executable, "-m", "kcoord.server", "dump", str(srv.log_dir), "--json"],
                          cwd=ROOT, capture_output=True, text=True, timeout=60, check=True).stdout
    assert '"value": null' in dump  # the offset's tombstone

    # ... and so does the server after a restart.
    srv.restart()
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            assert committed(srv.bootstrap, "kept") == [("ret", 0, 42)]
            break
        except AssertionError:
            time.sleep(0.1)
    assert committed(srv.bootstrap, "short-lived") == []
