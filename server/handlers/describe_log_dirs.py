"""DescribeLogDirs v0-v4: the log directory (absolute path) with the size of each partition
asked for (all when the topic list is null), its offset lag (0: the only replica is the
leader, whose high watermark is its log end) and, v4, the file system's total and usable bytes."""
from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from kafka.protocol.admin.cluster import DescribeLogDirsResponse

from kcoord.protocol.errors import ErrorCode, error_code_of
from kcoord.server.context import RequestContext

if TYPE_CHECKING:
    from pathlib import Path

    from kcoord.storage.log_manager import LogManager

Result = DescribeLogDirsResponse.DescribeLogDirsResult
TopicOut = Result.DescribeLogDirsTopic
PartitionOut = TopicOut.DescribeLogDirsPartition
_LONG_MAX = 2**63 - 1


class DescribeLogDirsApi:
    """The handlers of describe_log_dirs.py, built by the composition root (server/node.py) with the parts they use."""

    def __init__(self, logs: LogManager, log_dir: Path) -> None:
        self.logs = logs
        self.log_dir = log_dir

    def handle_describe_log_dirs(self, ctx: RequestContext, req: Any, version: int) -> Any:
        path = os.path.abspath(self.log_dir)
        wanted = None if req.topics is None else {(t.topic, p) for t in req.topics for p in t.partitions}
        try:
            st = os.statvfs(path)
            topics: dict[str, list[Any]] = {}
            for (topic, p), plog in sorted(self.logs or ()):
                if wanted is not None and (topic, p) not in wanted:
                    continue
                topics.setdefault(topic, []).append(PartitionOut(
                    partition_index=p, partition_size=plog.size_in_bytes, offset_lag=0, is_future_key=False))
            result = Result(error_code=ErrorCode.NONE, log_dir=path,
                            topics=[TopicOut(name=t, partitions=ps) for t, ps in topics.items()],
                            total_bytes=min(st.f_blocks * st.f_frsize, _LONG_MAX),
                            usable_bytes=min(st.f_bavail * st.f_frsize, _LONG_MAX))
        except OSError as e:  # the directory is unreadable: Kafka reports it offline
            result = Result(error_code=error_code_of(e), log_dir=path, topics=[], total_bytes=-1, usable_bytes=-1)
        return DescribeLogDirsResponse(version=version, throttle_time_ms=0, error_code=ErrorCode.NONE, results=[result])
