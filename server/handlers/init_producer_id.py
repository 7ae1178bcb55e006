"""InitProducerId v0-v5 for idempotent producers (no transactions).

- transactional_id null: a new producer id at epoch 0; v3+ with the producer id and epoch the
  client holds (KIP-360 re-init after a fatal sequence error): the same id with the epoch
  bumped, or a new id when the epoch would overflow or the pair is not the latest we issued
  (server/producers.py). Ids are allocated in blocks persisted to the log directory.
- Exactly one of producer_id / producer_epoch set to -1: INVALID_REQUEST (as Kafka).
- transactional_id "": INVALID_REQUEST; any other transactional id: COORDINATOR_NOT_AVAILABLE,
  what Kafka answers while no transaction coordinator is available (kcoord has none; a
  transactional producer retries until its max.block.ms and then fails initTransactions()).
"""
from __future__ import annotations

import logging
from typing import Any

from kafka.protocol.producer import InitProducerIdResponse

from protocol.errors import ErrorCode
from server.context import RequestContext
from server.data_plane import data_plane

log = logging.getLogger("kcoord.producers")


def _error(version: int, code: ErrorCode) -> Any:
    return InitProducerIdResponse(version=version, throttle_time_ms=0, error_code=code, producer_id=-1,
                                  producer_epoch=-1)


def handle_init_producer_id(ctx: RequestContext, req: Any, version: int) -> Any:
    pid = req.producer_id if version >= 3 else -1
    epoch = req.producer_epoch if version >= 3 else -1
    if (pid == -1) != (epoch == -1):
        return _error(version, ErrorCode.INVALID_REQUEST)
    if req.transactional_id is not None:
        if req.transactional_id == "":
            return _error(version, ErrorCode.INVALID_REQUEST)
        log.warning("Client %s asked for transactional id %r: kcoord has no transaction coordinator",
                    ctx.client_id, req.transactional_id)
        return _error(version, ErrorCode.COORDINATOR_NOT_AVAILABLE)
    try:
        new_pid, new_epoch = data_plane(ctx.broker).producer_ids.init_producer(pid, epoch)
    except OSError as e:
        log.error("Persisting the producer id block failed: %r", e)
        return _error(version, ErrorCode.UNKNOWN_SERVER_ERROR)
    return InitProducerIdResponse(version=version, throttle_time_ms=0, error_code=ErrorCode.NONE,
                                  producer_id=new_pid, producer_epoch=new_epoch)
