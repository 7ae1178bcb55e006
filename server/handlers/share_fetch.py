"""ShareFetch (78) v1-v2 and ShareAcknowledge (79) v1-v2 (KIP-932; v2: KIP-1222's RENEW,
IsRenewAck, ShareAcquireMode, AcquisitionLockTimeoutMs in ShareAcknowledge).

Order of a ShareFetch: the share session (server/share/sessions.py: epoch 0 opens, -1 closes,
else must match), then the acknowledgements (each partition all or nothing, durable before the
answer), then acquiring from the session's partitions (long polling up to max_wait_ms for
min_bytes). A request that is a renewal only (IsRenewAck) acquires nothing. Closing a session
(epoch -1) releases what the member still holds, as Kafka does.

Partitions are not checked against the member's assignment: Kafka serves a share fetch for any
partition of an existing topic (the assignment tells the client what to ask for). Errors per
partition: UNKNOWN_TOPIC_ID, UNKNOWN_TOPIC_OR_PARTITION; per acknowledgement: INVALID_REQUEST,
INVALID_RECORD_STATE, or the code of a failed write.
"""
from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any

from kcoord.protocol.errors import ErrorCode
from kcoord.protocol.share_messages import ShareAcknowledgeResponse, ShareFetchResponse
from kcoord.server.context import RequestContext
from kcoord.server.deferred import of_coroutine
from kcoord.server.group.share.partition import AckBatch, AckError, validate_ack_batches
from kcoord.server.share.manager import PartitionResult, ShareManager, fetch
from kcoord.server.share.sessions import FINAL_EPOCH, INITIAL_EPOCH, SessionError

if TYPE_CHECKING:
    from kcoord.server.lazy import Lazy

_FP = ShareFetchResponse.ShareFetchableTopicResponse.PartitionData
_AP = ShareAcknowledgeResponse.ShareAcknowledgeTopicResponse.PartitionData


def _acks(topics: Any) -> tuple[dict[tuple[uuid.UUID, int], list[AckBatch]], dict[tuple[uuid.UUID, int], PartitionResult]]:
    """The request's acknowledgements by partition; partitions with malformed batches are
    answered INVALID_REQUEST without touching their state."""
    acks, bad = {}, {}
    for t in topics or ():
        for p in t.partitions or ():
            batches = [AckBatch(b.first_offset, b.last_offset, tuple(b.acknowledge_types or ()))
                       for b in p.acknowledgement_batches or ()]
            if not batches:
                continue
            tp = (t.topic_id, p.partition_index)
            try:
                validate_ack_batches(batches)
            except AckError as e:
                bad[tp] = PartitionResult(ack_error=e.code, ack_message=str(e), acked=True)
                continue
            acks[tp] = batches
    return acks, bad


def _fetch_response(version: int, node: int, error: ErrorCode, message: str | None, lock_ms: int,
                    results: dict[tuple[uuid.UUID, int], PartitionResult]) -> Any:
    by_topic: dict[uuid.UUID, list[Any]] = {}
    for (tid, p), r in results.items():
        by_topic.setdefault(tid, []).append(_FP(
            partition_index=p, error_code=r.error, error_message=r.message, acknowledge_error_code=r.ack_error,
            acknowledge_error_message=r.ack_message,
            current_leader=_FP.LeaderIdAndEpoch(leader_id=node, leader_epoch=0), records=r.records,
            acquired_records=[_FP.AcquiredRecords(first_offset=a.first_offset, last_offset=a.last_offset,
                                                  delivery_count=a.delivery_count) for a in r.acquired]))
    return ShareFetchResponse(
        version=version, throttle_time_ms=0, error_code=error, error_message=message,
        acquisition_lock_timeout_ms=lock_ms, node_endpoints=[],
        responses=[ShareFetchResponse.ShareFetchableTopicResponse(topic_id=t, partitions=ps)
                   for t, ps in by_topic.items()])


def _error(version: int, code: ErrorCode, message: str | None = None) -> Any:
    return _fetch_response(version, -1, code, message, 0, {})


class ShareFetchApis:
    """ShareFetch and ShareAcknowledge, built by the composition root (server/node.py) with
    the node's id and the share-partition manager (built at the first share request)."""

    def __init__(self, node_id: int, share: Lazy[ShareManager]) -> None:
        self.node_id = node_id
        self.share = share


    def handle_share_fetch(self, ctx: RequestContext, req: Any, version: int) -> Any:
        return of_coroutine(self._share_fetch(ctx, req, version), "ShareFetch")

    async def _share_fetch(self, ctx: RequestContext, req: Any, version: int) -> Any:
        if not req.group_id or not req.member_id:
            return _error(version, ErrorCode.INVALID_REQUEST, "group id and member id are required")
        mgr = self.share.get()
        await mgr.ready()
        group, member, epoch = req.group_id, req.member_id, req.share_session_epoch
        acks, bad = _acks(req.topics)
        wanted = [(t.topic_id, p.partition_index) for t in req.topics or () for p in t.partitions or ()]
        forgotten = [(t.topic_id, p) for t in req.forgotten_topics_data or () for p in t.partitions or ()]
        try:
            if epoch == INITIAL_EPOCH:
                if acks or bad:
                    return _error(version, ErrorCode.INVALID_REQUEST, "a new share session carries no acknowledgements")
                session = mgr.sessions.open(group, member, wanted)
            else:
                session = mgr.sessions.check(group, member, epoch)
                if epoch == FINAL_EPOCH and any(tp not in acks and tp not in bad for tp in wanted):
                    return _error(version, ErrorCode.INVALID_REQUEST, "the final share fetch fetches nothing")
        except SessionError as e:
            return _error(version, e.code, str(e))
        results: dict[tuple[uuid.UUID, int], PartitionResult] = dict(bad)
        if acks:
            results.update(await mgr.acknowledge(group, member, acks, allow_renew=version >= 2))
        lock_ms = mgr.lock_duration_ms(group)
        if epoch == FINAL_EPOCH:
            mgr.sessions.close(group, member)
            mgr.release_member(group, member, session.partitions)
            return _fetch_response(version, self.node_id, ErrorCode.NONE, None, lock_ms, results)
        if epoch != INITIAL_EPOCH:
            mgr.sessions.advance(session, wanted, forgotten)
        if version >= 2 and getattr(req, "is_renew_ack", False):
            return _fetch_response(version, self.node_id, ErrorCode.NONE, None, lock_ms, results)
        parts = await mgr.prepare(group, list(session.partitions))
        got = await fetch(mgr, group, member, parts, max_wait_ms=req.max_wait_ms, min_bytes=req.min_bytes,
                          max_bytes=req.max_bytes, max_records=req.max_records,
                          mode=getattr(req, "share_acquire_mode", 0) if version >= 2 else 0)
        for tp, r in got.items():
            prior = results.get(tp)
            if prior is not None:
                r.ack_error, r.ack_message, r.acked = prior.ack_error, prior.ack_message, True
            results[tp] = r
        if epoch != INITIAL_EPOCH:  # incremental: only what has something to say
            results = {tp: r for tp, r in results.items() if r.acquired or r.acked or r.error != ErrorCode.NONE}
        return _fetch_response(version, self.node_id, ErrorCode.NONE, None, lock_ms, results)

    def handle_share_acknowledge(self, ctx: RequestContext, req: Any, version: int) -> Any:
        return of_coroutine(self._share_acknowledge(ctx, req, version), "ShareAcknowledge")

    async def _share_acknowledge(self, ctx: RequestContext, req: Any, version: int) -> Any:
        def answer(code: ErrorCode, message: str | None, results: dict, lock_ms: int = 0) -> Any:
            by_topic: dict[uuid.UUID, list[Any]] = {}
            for (tid, p), r in results.items():
                by_topic.setdefault(tid, []).append(_AP(
                    partition_index=p, error_code=r.ack_error, error_message=r.ack_message,
                    current_leader=_AP.LeaderIdAndEpoch(leader_id=self.node_id, leader_epoch=0)))
            kw = {"acquisition_lock_timeout_ms": lock_ms} if version >= 2 else {}
            return ShareAcknowledgeResponse(
                version=version, throttle_time_ms=0, error_code=code, error_message=message, node_endpoints=[],
                responses=[ShareAcknowledgeResponse.ShareAcknowledgeTopicResponse(topic_id=t, partitions=ps)
                           for t, ps in by_topic.items()], **kw)

        if not req.group_id or not req.member_id:
            return answer(ErrorCode.INVALID_REQUEST, "group id and member id are required", {})
        mgr = self.share.get()
        await mgr.ready()
        group, member, epoch = req.group_id, req.member_id, req.share_session_epoch
        if epoch == INITIAL_EPOCH:
            return answer(ErrorCode.INVALID_SHARE_SESSION_EPOCH, "ShareAcknowledge cannot open a share session", {})
        try:
            session = mgr.sessions.check(group, member, epoch)
        except SessionError as e:
            return answer(e.code, str(e), {})
        acks, bad = _acks(req.topics)
        results = dict(bad)
        if acks:
            results.update(await mgr.acknowledge(group, member, acks, allow_renew=version >= 2))
        if epoch == FINAL_EPOCH:
            mgr.sessions.close(group, member)
            mgr.release_member(group, member, session.partitions)
        else:
            mgr.sessions.advance(session)
        return answer(ErrorCode.NONE, None, results, mgr.lock_duration_ms(group))
