"""FindCoordinator v0-v6 (v4+: batched keys).

A group key maps to the leader of __consumer_offsets partition
abs(javaHash(group)) % offsets.topic.num.partitions, a transactional id (key type 1) to the
leader of __transaction_state partition abs(javaHash(id)) % transaction.state.log.num.partitions:
both are always this node. The first transaction key creates __transaction_state (Kafka creates
it on that first lookup too).
"""
from __future__ import annotations

from typing import Any

from kafka.protocol.metadata import FindCoordinatorResponse

from kcoord.protocol.errors import ErrorCode
from kcoord.server.context import RequestContext

GROUP = 0
TRANSACTION = 1


def _lookup(ctx: RequestContext, key: str, key_type: int) -> tuple[ErrorCode, str | None]:
    if key_type == TRANSACTION:
        try:
            ctx.broker.txn.ensure_topic()
        except OSError as e:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, f"cannot create __transaction_state: {e}"
        return ErrorCode.NONE, None
    if key_type != GROUP:
        return ErrorCode.INVALID_REQUEST, f"Unknown coordinator type {key_type}"
    if ctx.advertised is None:  # Kafka: the coordinator has no endpoint on this listener
        return ErrorCode.COORDINATOR_NOT_AVAILABLE, "The coordinator is not available."
    return ErrorCode.NONE, None


def _cluster_lookup(ctx: RequestContext, key: str, key_type: int) -> tuple[ErrorCode, str | None, int, str, int]:
    """On a cluster node: the leader of the key's __consumer_offsets partition (groups only;
    transactions stay with the node asked until the coordinators follow partition leadership)."""
    from kcoord.protocol.partitioner import partition_for
    from kcoord.protocol.topics import OFFSETS_TOPIC
    from kcoord.server.cluster import answers

    node = ctx.broker.cluster
    if key_type != GROUP:
        err, msg = _lookup(ctx, key, key_type)
        host, port = ctx.advertised or ("", -1)
        return err, msg, ctx.broker.config.node_id, host, port
    topic = node.topic(OFFSETS_TOPIC)
    found = None if topic is None else answers.coordinator(
        node, OFFSETS_TOPIC, partition_for(key, topic.partitions), answers.listener_name(ctx))
    if found is None:
        return ErrorCode.COORDINATOR_NOT_AVAILABLE, "The coordinator is not available.", -1, "", -1
    return ErrorCode.NONE, None, *found


def handle_find_coordinator(ctx: RequestContext, req: Any, version: int) -> Any:
    host, port = ctx.advertised or ("", -1)  # the listener the client came in on
    node = ctx.broker.config.node_id
    key_type = req.key_type if version >= 1 else GROUP
    if ctx.broker.cluster is not None:
        keys = req.coordinator_keys if version >= 4 else [req.key]
        found = [(key, *_cluster_lookup(ctx, key, key_type)) for key in keys]
        if version >= 4:
            return FindCoordinatorResponse(version=version, throttle_time_ms=0, coordinators=[
                FindCoordinatorResponse.Coordinator(key=k, node_id=n, host=h, port=p, error_code=e, error_message=m)
                for k, e, m, n, h, p in found])
        _, e, m, n, h, p = found[0]
        return FindCoordinatorResponse(version=version, throttle_time_ms=0, error_code=e, error_message=m,
                                       node_id=n, host=h, port=p)
    if version >= 4:
        coordinators = []
        for key in req.coordinator_keys:
            err, msg = _lookup(ctx, key, key_type)
            ok = err == ErrorCode.NONE
            coordinators.append(
                FindCoordinatorResponse.Coordinator(
                    key=key,
                    node_id=node if ok else -1,
                    host=host if ok else "",
                    port=port if ok else -1,
                    error_code=err,
                    error_message=msg,
                )
            )
        return FindCoordinatorResponse(version=version, throttle_time_ms=0, coordinators=coordinators)
    err, msg = _lookup(ctx, req.key, key_type)
    ok = err == ErrorCode.NONE
    return FindCoordinatorResponse(
        version=version,
        throttle_time_ms=0,
        error_code=err,
        error_message=msg,
        node_id=node if ok else -1,
        host=host if ok else "",
        port=port if ok else -1,
    )
