"""ListPartitionReassignments v0: a single broker never moves replicas, so no reassignment is
ever in progress; topics that do not exist are left out, as Kafka's controller does."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kafka.protocol.admin.topics import ListPartitionReassignmentsResponse

from kcoord.protocol.errors import ErrorCode
from kcoord.server.context import RequestContext

if TYPE_CHECKING:
    from kcoord.server.broker import Broker


def handle_list_partition_reassignments(broker: Broker, ctx: RequestContext, req: Any, version: int) -> Any:
    return ListPartitionReassignmentsResponse(version=version, throttle_time_ms=0, error_code=ErrorCode.NONE,
                                              error_message=None, topics=[])
