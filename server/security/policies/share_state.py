"""Who may read and write share state at the share coordinator (InitializeShareGroupState,
ReadShareGroupState, WriteShareGroupState, DeleteShareGroupState): brokers only, CLUSTER_ACTION
on the cluster as Kafka's KafkaApis authorizes them; refused, every partition answers
CLUSTER_AUTHORIZATION_FAILED."""
from __future__ import annotations

from typing import Any

from kcoord.protocol.errors import ErrorCode
from kcoord.server.security.acl import AclOperation
from kcoord.server.security.guard import PASS, Access, Guarded


def _refuse(a: Access, req: Any, version: int, response_class: str) -> Guarded:
    if a.cluster(AclOperation.CLUSTER_ACTION):
        return PASS
    from kcoord.protocol import share_state_messages as m

    cls = getattr(m, response_class)
    Result = getattr(cls, {"ReadShareGroupStateResponse": "ReadStateResult",
                           "WriteShareGroupStateResponse": "WriteStateResult",
                           "InitializeShareGroupStateResponse": "InitializeStateResult",
                           "DeleteShareGroupStateResponse": "DeleteStateResult"}[response_class])
    Part = Result.PartitionResult
    extra = {"state_epoch": -1, "start_offset": -1, "state_batches": []} if response_class.startswith("Read") else {}
    return Guarded(refusal=cls(version=version, results=[Result(topic_id=t.topic_id, partitions=[
        Part(partition=p.partition, error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED, error_message=None, **extra)
        for p in t.partitions]) for t in req.topics]))


def initialize_share_group_state(a: Access, req: Any, version: int) -> Guarded:
    return _refuse(a, req, version, "InitializeShareGroupStateResponse")


def read_share_group_state(a: Access, req: Any, version: int) -> Guarded:
    return _refuse(a, req, version, "ReadShareGroupStateResponse")


def write_share_group_state(a: Access, req: Any, version: int) -> Guarded:
    return _refuse(a, req, version, "WriteShareGroupStateResponse")


def delete_share_group_state(a: Access, req: Any, version: int) -> Guarded:
    return _refuse(a, req, version, "DeleteShareGroupStateResponse")
