"""ListPartitionReassignments v0: a single broker never moves replicas, so no reassignment is
ever in progress; topics that do not exist are left out, as Kafka's controller does."""
from __future__ import annotations

from typing import Any

from kafka.protocol.admin.topics import ListPartitionReassignmentsResponse

from kcoord.protocol.errors import ErrorCode
from kcoord.server.context import RequestContext


class ListPartitionReassignmentsApi:
    """The handlers of list_partition_reassignments.py, built by the composition root (server/node.py) with the parts they use."""

    def __init__(self) -> None:
        pass

    def handle_list_partition_reassignments(self, ctx: RequestContext, req: Any, version: int) -> Any:
        return ListPartitionReassignmentsResponse(version=version, throttle_time_ms=0, error_code=ErrorCode.NONE,
                                                  error_message=None, topics=[])
