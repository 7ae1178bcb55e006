"""InitProducerId v0-v5.

- transactional_id null: a new producer id at epoch 0; v3+ with the producer id and epoch the
  client holds (KIP-360 re-init after a fatal sequence error): the same id with the epoch
  bumped, or a new id when the epoch would overflow or the pair is not the latest we issued
  (server/producers.py). Ids are allocated in blocks persisted to the log directory.
- Exactly one of producer_id / producer_epoch set to -1: INVALID_REQUEST (as Kafka).
- transactional_id "": INVALID_REQUEST; any other transactional id goes to the transaction
  coordinator (server/txn/coordinator.py: fencing, epoch bumps, INVALID_TRANSACTION_TIMEOUT,
  CONCURRENT_TRANSACTIONS), answered once its record is durable. PRODUCER_FENCED is
  INVALID_PRODUCER_EPOCH before v4, as Kafka answers clients that predate it.
"""
from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from kafka.protocol.producer import InitProducerIdResponse

from kcoord.protocol.errors import ErrorCode, fenced_for_version
from kcoord.server.context import RequestContext
from kcoord.server.deferred import then
from kcoord.server.txn.settling import after_completion

if TYPE_CHECKING:
    from kcoord.server.data_plane import DataPlane
    from kcoord.server.lazy import Lazy
    from kcoord.server.txn.service import TxnService

log = logging.getLogger("kcoord.producers")


def _error(version: int, code: ErrorCode) -> Any:
    return InitProducerIdResponse(version=version, throttle_time_ms=0, error_code=code, producer_id=-1,
                                  producer_epoch=-1)


class InitProducerIdApi:
    """InitProducerId's handler, built by the composition root (server/node.py): the transaction coordinator and the data plane (producer ids), each built at its first use."""

    def __init__(self, txn: Lazy[TxnService], data_plane: Lazy[DataPlane]) -> None:
        self.txn = txn
        self.data_plane = data_plane

    def handle_init_producer_id(self, ctx: RequestContext, req: Any, version: int) -> Any:
        pid = req.producer_id if version >= 3 else -1
        epoch = req.producer_epoch if version >= 3 else -1
        if (pid == -1) != (epoch == -1):
            return _error(version, ErrorCode.INVALID_REQUEST)
        if req.transactional_id is not None:
            if req.transactional_id == "":
                return _error(version, ErrorCode.INVALID_REQUEST)
            return self._transactional(ctx, req, version, pid, epoch)
        try:
            new_pid, new_epoch = self.data_plane.get().producer_ids.init_producer(pid, epoch)
        except OSError as e:
            log.error("Persisting the producer id block failed: %r", e)
            return _error(version, ErrorCode.UNKNOWN_SERVER_ERROR)
        return InitProducerIdResponse(version=version, throttle_time_ms=0, error_code=ErrorCode.NONE,
                                      producer_id=new_pid, producer_epoch=new_epoch)

    def _transactional(self, ctx: RequestContext, req: Any, version: int, pid: int, epoch: int) -> Any:
        txn = self.txn.get()
        try:
            txn.ensure_topic()
        except OSError as e:
            log.error("Creating __transaction_state failed: %r", e)
            return _error(version, ErrorCode.COORDINATOR_NOT_AVAILABLE)
        expected = None if pid == -1 else (pid, epoch)

        def respond(answer: tuple[ErrorCode, int, int]) -> Any:
            code, new_pid, new_epoch = answer
            return InitProducerIdResponse(version=version, throttle_time_ms=0,
                                          error_code=fenced_for_version(code, version, 4),
                                          producer_id=new_pid, producer_epoch=new_epoch)

        def serve() -> Any:
            result = txn.coordinator.init_producer_id(req.transactional_id, req.transaction_timeout_ms, expected)
            return then(txn.runtime.submit(result), respond)

        return after_completion(txn.coordinator, req.transactional_id, serve)
