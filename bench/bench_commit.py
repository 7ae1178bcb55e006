"""Durable OffsetCommit throughput into one __consumer_offsets partition from 100
connections: kcoord vs a bare uvloop server that appends the same request bytes to a file and
fdatasyncs them with group commit before answering (the ceiling), in the same run.
Target: kcoord >= 50% of the ceiling.

All connections commit for one group (standalone commits, generation -1), so every write
lands in the same partition and shares its fdatasyncs.
"""
from __future__ import annotations

import argparse
import shutil
import tempfile

from _util import SyncClient, compare, encode_request, start_bare, start_kcoord, stop
from kafka.protocol.admin import CreateTopicsRequest
from kafka.protocol.consumer import OffsetCommitRequest

GROUP = "bench-commit"
TOPIC = "bench-commit-topic"


def commit_frame(partition: int, offset: int) -> bytes:
    T = OffsetCommitRequest.OffsetCommitRequestTopic
    P = T.OffsetCommitRequestPartition
    req = OffsetCommitRequest(
        group_id=GROUP, generation_id_or_member_epoch=-1, member_id="", group_instance_id=None,
        topics=[T(name=TOPIC, partitions=[P(partition_index=partition, committed_offset=offset,
                                            committed_leader_epoch=-1, committed_metadata="")])],
    )
    return encode_request(req, 8, correlation_id=partition)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--connections", type=int, default=100)
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    frames = [commit_frame(i, 1000 + i) for i in range(args.connections)]

    proc, port, _ = start_kcoord()
    workdir = tempfile.mkdtemp(prefix="bare-commit-")
    bare, bare_port = start_bare("append", workdir)
    try:
        c = SyncClient(port)
        CT = CreateTopicsRequest.CreatableTopic
        r = c.call(CreateTopicsRequest(topics=[CT(name=TOPIC, num_partitions=args.connections,
                                                  replication_factor=1, assignments=[], configs=[])],
                                       timeout_ms=5000, validate_only=False), 5)
        assert r.topics[0].error_code == 0, r
        c.close()
        compare("OffsetCommit v8, durable, one __consumer_offsets partition", "commits", port, bare_port,
                "bare uvloop append+fdatasync (ceiling)", frames, args.seconds, args.rounds)
    finally:
        stop(proc)
        stop(bare)
        shutil.rmtree(workdir, ignore_errors=True)

if __name__ == "__main__":
    main()
