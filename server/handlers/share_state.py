"""InitializeShareGroupState (83), ReadShareGroupState (84), WriteShareGroupState (85) and
DeleteShareGroupState (86), v0: the share coordinator's inter-broker APIs. Another node's
share partitions (server/share/persister.py) read and write their state here when this node
leads the key's __share_group_state partition; every partition is answered by this node's
share coordinator (server/share/coordinator.py): NOT_COORDINATOR when this node does not hold
the key's partition, COORDINATOR_LOAD_IN_PROGRESS while it loads it, FENCED_LEADER_EPOCH /
FENCED_STATE_EPOCH for a stale writer, else the append's code once the write is acknowledged.
A read of a key without state answers start offset -1 and state epoch -1."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kcoord.protocol.errors import ErrorCode
from kcoord.protocol.share_records import StateBatch
from kcoord.protocol.share_state_messages import (
    DeleteShareGroupStateResponse,
    InitializeShareGroupStateResponse,
    ReadShareGroupStateResponse,
    WriteShareGroupStateResponse,
)
from kcoord.server.context import RequestContext
from kcoord.server.deferred import of_coroutine

if TYPE_CHECKING:
    from kcoord.server.lazy import Lazy
    from kcoord.server.share.manager import ShareManager


def _code(code: ErrorCode | None) -> int:
    return int(ErrorCode.NONE if code is None else code)


class ShareStateApis:
    """Built by the composition root (server/node.py) with the share manager, whose
    `persister`'s local side is this node's share coordinator."""

    def __init__(self, share: Lazy[ShareManager]) -> None:
        self.share = share

    def _coordinator(self) -> Any:
        return self.share.get().coordinator

    # ---- InitializeShareGroupState

    def handle_initialize_share_group_state(self, ctx: RequestContext, req: Any, version: int) -> Any:
        return of_coroutine(self._initialize(req, version), "InitializeShareGroupState")

    async def _initialize(self, req: Any, version: int) -> Any:
        coordinator = self._coordinator()
        R = InitializeShareGroupStateResponse.InitializeStateResult
        results = []
        for t in req.topics:
            parts = []
            for p in t.partitions:
                code = await coordinator.initialize((req.group_id, t.topic_id, p.partition), p.state_epoch,
                                                    p.start_offset)
                parts.append(R.PartitionResult(partition=p.partition, error_code=_code(code), error_message=None))
            results.append(R(topic_id=t.topic_id, partitions=parts))
        return InitializeShareGroupStateResponse(version=version, results=results)

    # ---- ReadShareGroupState

    def handle_read_share_group_state(self, ctx: RequestContext, req: Any, version: int) -> Any:
        return of_coroutine(self._read(req, version), "ReadShareGroupState")

    async def _read(self, req: Any, version: int) -> Any:
        coordinator = self._coordinator()
        R = ReadShareGroupStateResponse.ReadStateResult
        P = R.PartitionResult
        results = []
        for t in req.topics:
            parts = []
            for p in t.partitions:
                code, state = await coordinator.read((req.group_id, t.topic_id, p.partition), p.leader_epoch)
                if code is not None or state is None:
                    parts.append(P(partition=p.partition, error_code=_code(code), error_message=None,
                                   state_epoch=-1, start_offset=-1, state_batches=[]))
                    continue
                parts.append(P(partition=p.partition, error_code=0, error_message=None,
                               state_epoch=state.state_epoch, start_offset=state.start_offset, state_batches=[
                                   P.StateBatch(first_offset=b.first_offset, last_offset=b.last_offset,
                                                delivery_state=b.delivery_state, delivery_count=b.delivery_count)
                                   for b in state.batches]))
            results.append(R(topic_id=t.topic_id, partitions=parts))
        return ReadShareGroupStateResponse(version=version, results=results)

    # ---- WriteShareGroupState

    def handle_write_share_group_state(self, ctx: RequestContext, req: Any, version: int) -> Any:
        return of_coroutine(self._write(req, version), "WriteShareGroupState")

    async def _write(self, req: Any, version: int) -> Any:
        coordinator = self._coordinator()
        R = WriteShareGroupStateResponse.WriteStateResult
        results = []
        for t in req.topics:
            parts = []
            for p in t.partitions:
                batches = [StateBatch(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count)
                           for b in p.state_batches]
                if any(b.first_offset > b.last_offset or b.first_offset < 0 for b in batches):
                    code: ErrorCode | None = ErrorCode.INVALID_REQUEST
                else:
                    code = await coordinator.write((req.group_id, t.topic_id, p.partition), p.state_epoch,
                                                   p.leader_epoch, p.start_offset, batches)
                parts.append(R.PartitionResult(partition=p.partition, error_code=_code(code), error_message=None))
            results.append(R(topic_id=t.topic_id, partitions=parts))
        return WriteShareGroupStateResponse(version=version, results=results)

    # ---- DeleteShareGroupState

    def handle_delete_share_group_state(self, ctx: RequestContext, req: Any, version: int) -> Any:
        return of_coroutine(self._delete(req, version), "DeleteShareGroupState")

    async def _delete(self, req: Any, version: int) -> Any:
        coordinator = self._coordinator()
        R = DeleteShareGroupStateResponse.DeleteStateResult
        keys = [(req.group_id, t.topic_id, p.partition) for t in req.topics for p in t.partitions]
        codes = await coordinator.delete(keys)
        return DeleteShareGroupStateResponse(version=version, results=[
            R(topic_id=t.topic_id, partitions=[
                R.PartitionResult(partition=p.partition, error_code=_code(codes[(req.group_id, t.topic_id, p.partition)]),
                                  error_message=None) for p in t.partitions]) for t in req.topics])
