"""Durable OffsetCommit throughput into one __consumer_offsets partition from 100
connections: kcoord vs a bare uvloop server that appends the same request bytes to a file and
fdatasyncs them with group commit before answering (the ceiling), in the same run.
Target: kcoord >= 50% of the ceiling.

All connections commit for one group (standalone commits, generation -1), so every write
lands in the same partition and shares its fdatasyncs.
"""
from __future__ import annotations

import shutil
import tempfile

from _commits import commit_request
from _util import closed_loop_args, compare, create_topic, encode_request, start_bare, start_kcoord, stop

GROUP = "bench-commit"
TOPIC = "bench-commit-topic"


def commit_frame(partition: int, offset: int) -> bytes:
    return encode_request(commit_request(GROUP, TOPIC, partition, offset), 8, correlation_id=partition)


def main() -> None:
    ap = closed_loop_args()
    args = ap.parse_args()
    frames = [commit_frame(i, 1000 + i) for i in range(args.connections)]

    proc, port, _ = start_kcoord()
    workdir = tempfile.mkdtemp(prefix="bare-commit-")
    bare, bare_port = start_bare("append", workdir)
    try:
        create_topic(port, TOPIC, args.connections)
        compare("OffsetCommit v8, durable, one __consumer_offsets partition", "commits", port, bare_port,
                "bare uvloop append+fdatasync (ceiling)", frames, args.seconds, args.rounds)
    finally:
        stop(proc)
        stop(bare)
        shutil.rmtree(workdir, ignore_errors=True)

if __name__ == "__main__":
    main()
