"""FindCoordinator v0-v6 (v4+: batched keys).

A group key maps to the leader of __consumer_offsets partition
abs(javaHash(group)) % offsets.topic.num.partitions, a transactional id (key type 1) to the
leader of __transaction_state partition abs(javaHash(id)) % transaction.state.log.num.partitions,
a share-partition key (key type 2, v6+, "group:topicId:partition" as Kafka's share coordinator
keys) to the leader of __share_group_state partition abs(javaHash(key)) %
share.coordinator.state.topic.num.partitions (a malformed key: INVALID_REQUEST).
On one node both are this node, and the first transaction key creates __transaction_state
(Kafka creates it on that first lookup too); on a cluster node both are the partition's
leader in the cluster's metadata. There, as on a ZooKeeper-mode Kafka broker, the first
lookup of a group (a transactional id) finds no __consumer_offsets (__transaction_state): the
node writes the topic to ZooKeeper (server/cluster/node.py create_internal_topic_soon, once as
many brokers are registered as its replication factor) and answers COORDINATOR_NOT_AVAILABLE
until the controller has elected the partition's leader.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from kafka.protocol.metadata import FindCoordinatorResponse

from kcoord.protocol.errors import ErrorCode
from kcoord.server.context import RequestContext

if TYPE_CHECKING:
    from kcoord.server.config import Config
    from kcoord.server.lazy import Lazy
    from kcoord.server.txn.service import TxnService

GROUP = 0
TRANSACTION = 1
SHARE = 2


def share_key_ok(key: str) -> bool:
    """Kafka's check of a share coordinator key: group:topicId:partition, the partition a number."""
    parts = key.rsplit(":", 2)
    return len(parts) == 3 and all(parts) and parts[2].lstrip("-").isdigit() and len(parts[1]) == 22


class FindCoordinatorApi:
    """Built by the composition root (server/node.py): the node's configuration (its id, the
    advertised listener of in-process requests) and the transaction coordinator, built at the
    first transaction key (which creates __transaction_state)."""

    def __init__(self, config: Config, txn: Lazy[TxnService], cluster: Callable[[], Any],
                 share: Lazy[Any] | None = None) -> None:
        self.config = config
        self.share = share  # the share manager: a cluster node creates __share_group_state through it
        self.cluster = cluster  # the node's ClusterNode on a cluster node, else None (server/cluster/)
        self.node_id = config.node_id
        self.txn = txn

    def _lookup(self, ctx: RequestContext, key: str, key_type: int) -> tuple[ErrorCode, str | None]:
        if key_type == TRANSACTION:
            try:
                self.txn.get().ensure_topic()
            except OSError as e:
                return ErrorCode.COORDINATOR_NOT_AVAILABLE, f"cannot create __transaction_state: {e}"
            return ErrorCode.NONE, None
        if key_type == SHARE:
            if not share_key_ok(key):
                return ErrorCode.INVALID_REQUEST, f"Invalid coordinator key {key}"
            return ErrorCode.NONE, None
        if key_type != GROUP:
            return ErrorCode.INVALID_REQUEST, f"Unknown coordinator type {key_type}"
        if ctx.advertised_on(self.config) is None:  # Kafka: the coordinator has no endpoint on this listener
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, "The coordinator is not available."
        return ErrorCode.NONE, None

    def _cluster_lookup(self, ctx: RequestContext, key: str, key_type: int) -> tuple[ErrorCode, str | None, int, str, int]:
        """On a cluster node: the leader of the key's partition of __consumer_offsets (a group)
        or __transaction_state (a transactional id) or __share_group_state (a share-partition key),
        which this lookup creates when it does not exist; COORDINATOR_NOT_AVAILABLE until then and
        while the partition has no leader."""
        from kcoord.protocol.partitioner import partition_for
        from kcoord.protocol.topics import OFFSETS_TOPIC, SHARE_STATE_TOPIC, TXN_TOPIC
        from kcoord.server.cluster import answers

        node = self.cluster()
        if key_type not in (GROUP, TRANSACTION, SHARE):
            return ErrorCode.INVALID_REQUEST, f"Unknown coordinator type {key_type}", -1, "", -1
        if key_type == SHARE and not share_key_ok(key):
            return ErrorCode.INVALID_REQUEST, f"Invalid coordinator key {key}", -1, "", -1
        name = {GROUP: OFFSETS_TOPIC, TRANSACTION: TXN_TOPIC, SHARE: SHARE_STATE_TOPIC}[key_type]
        topic = node.topic(name)
        if topic is None:
            node.create_internal_topic_soon(name)
        found = None if topic is None else answers.coordinator(
            node, name, partition_for(key, topic.partitions), answers.listener_name(ctx))
        if found is None:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, "The coordinator is not available.", -1, "", -1
        return ErrorCode.NONE, None, *found

    def handle_find_coordinator(self, ctx: RequestContext, req: Any, version: int) -> Any:
        host, port = ctx.advertised_on(self.config) or ("", -1)  # the listener the client came in on
        node = self.node_id
        key_type = req.key_type if version >= 1 else GROUP
        if self.cluster() is not None:
            keys = req.coordinator_keys if version >= 4 else [req.key]
            found = [(key, *self._cluster_lookup(ctx, key, key_type)) for key in keys]
            if version >= 4:
                return FindCoordinatorResponse(version=version, throttle_time_ms=0, coordinators=[
                    FindCoordinatorResponse.Coordinator(key=k, node_id=n, host=h, port=p, error_code=e,
                                                        error_message=m)
                    for k, e, m, n, h, p in found])
            _, e, m, n, h, p = found[0]
            return FindCoordinatorResponse(version=version, throttle_time_ms=0, error_code=e, error_message=m,
                                           node_id=n, host=h, port=p)
        if version >= 4:
            coordinators = []
            for key in req.coordinator_keys:
                err, msg = self._lookup(ctx, key, key_type)
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
        err, msg = self._lookup(ctx, req.key, key_type)
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
