"""How each API is served, declared once: its handler, its hand-written fast path (a
protocol/fastpath codec for the hottest requests) and whether it is called directly — as
(broker, request, version), without building a RequestContext or decoding the client id. The
dispatcher (server/dispatch.py) builds its per-(key, version) routes from this table and
ApiVersions advertises exactly the APIs it holds (with protocol/api.py's version ranges).
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from protocol import fastpath
from protocol.api import ApiKey
from server.handlers import (
    add_offsets_to_txn,
    add_partitions_to_txn,
    alter_configs,
    alter_partition_reassignments,
    api_versions,
    create_partitions,
    create_topics,
    delete_records,
    delete_topics,
    describe_cluster,
    describe_configs,
    describe_log_dirs,
    describe_producers,
    describe_topic_partitions,
    describe_transactions,
    elect_leaders,
    end_txn,
    fetch,
    find_coordinator,
    groups,
    incremental_alter_configs,
    init_producer_id,
    list_offsets,
    list_partition_reassignments,
    list_transactions,
    metadata,
    produce,
    txn_offset_commit,
)
from server.handlers.registry import HANDLERS, Handler

if TYPE_CHECKING:
    from server.broker import Broker


@dataclass(frozen=True, slots=True)
class Route:
    key: ApiKey
    handler: Handler  # (ctx, request, version) -> answer
    fast: fastpath.FastPath | None = None  # hand-written decoders / encoder
    direct: Callable[[Broker, Any, int], Any] | None = None  # served without a RequestContext


_TABLE = (
    Route(ApiKey.PRODUCE, produce.handle_produce),
    Route(ApiKey.FETCH, fetch.handle_fetch),
    Route(ApiKey.LIST_OFFSETS, list_offsets.handle_list_offsets),
    Route(ApiKey.METADATA, metadata.handle_metadata),
    Route(ApiKey.OFFSET_COMMIT, groups.handle_offset_commit, fastpath.OFFSET_COMMIT, groups.commit_offsets),
    Route(ApiKey.OFFSET_FETCH, groups.handle_offset_fetch),
    Route(ApiKey.FIND_COORDINATOR, find_coordinator.handle_find_coordinator),
    Route(ApiKey.JOIN_GROUP, groups.handle_join_group),
    Route(ApiKey.HEARTBEAT, groups.handle_heartbeat, fastpath.HEARTBEAT, groups.heartbeat_body),
    Route(ApiKey.LEAVE_GROUP, groups.handle_leave_group),
    Route(ApiKey.SYNC_GROUP, groups.handle_sync_group),
    Route(ApiKey.DESCRIBE_GROUPS, groups.handle_describe_groups),
    Route(ApiKey.LIST_GROUPS, groups.handle_list_groups),
    Route(ApiKey.API_VERSIONS, api_versions.handle_api_versions),
    Route(ApiKey.CREATE_TOPICS, create_topics.handle_create_topics),
    Route(ApiKey.INIT_PRODUCER_ID, init_producer_id.handle_init_producer_id),
    Route(ApiKey.DELETE_GROUPS, groups.handle_delete_groups),
    Route(ApiKey.OFFSET_DELETE, groups.handle_offset_delete),
    Route(ApiKey.CONSUMER_GROUP_HEARTBEAT, groups.handle_consumer_group_heartbeat, fastpath.CONSUMER_GROUP_HEARTBEAT),
    Route(ApiKey.CONSUMER_GROUP_DESCRIBE, groups.handle_consumer_group_describe),
    Route(ApiKey.DELETE_TOPICS, delete_topics.handle_delete_topics),
    Route(ApiKey.DELETE_RECORDS, delete_records.handle_delete_records),
    Route(ApiKey.CREATE_PARTITIONS, create_partitions.handle_create_partitions),
    # transactions (issue 13)
    Route(ApiKey.ADD_PARTITIONS_TO_TXN, add_partitions_to_txn.handle_add_partitions_to_txn),
    Route(ApiKey.ADD_OFFSETS_TO_TXN, add_offsets_to_txn.handle_add_offsets_to_txn),
    Route(ApiKey.END_TXN, end_txn.handle_end_txn),
    Route(ApiKey.TXN_OFFSET_COMMIT, txn_offset_commit.handle_txn_offset_commit),
    Route(ApiKey.DESCRIBE_PRODUCERS, describe_producers.handle_describe_producers),
    Route(ApiKey.DESCRIBE_TRANSACTIONS, describe_transactions.handle_describe_transactions),
    Route(ApiKey.LIST_TRANSACTIONS, list_transactions.handle_list_transactions),
    # configs and the cluster, as the single broker (issue 12)
    Route(ApiKey.DESCRIBE_CONFIGS, describe_configs.handle_describe_configs),
    Route(ApiKey.ALTER_CONFIGS, alter_configs.handle_alter_configs),
    Route(ApiKey.INCREMENTAL_ALTER_CONFIGS, incremental_alter_configs.handle_incremental_alter_configs),
    Route(ApiKey.DESCRIBE_CLUSTER, describe_cluster.handle_describe_cluster),
    Route(ApiKey.DESCRIBE_TOPIC_PARTITIONS, describe_topic_partitions.handle_describe_topic_partitions),
    Route(ApiKey.DESCRIBE_LOG_DIRS, describe_log_dirs.handle_describe_log_dirs),
    Route(ApiKey.ELECT_LEADERS, elect_leaders.handle_elect_leaders),
    Route(ApiKey.LIST_PARTITION_REASSIGNMENTS, list_partition_reassignments.handle_list_partition_reassignments),
    Route(ApiKey.ALTER_PARTITION_REASSIGNMENTS, alter_partition_reassignments.handle_alter_partition_reassignments),
)


def _build() -> dict[int, Route]:
    routes: dict[int, Route] = {}
    for r in _TABLE:
        if r.key in routes or r.key in HANDLERS:
            raise RuntimeError(f"two routes for API key {r.key!r}")
        routes[r.key] = r
    for key, handler in HANDLERS.items():  # declared with registry.handles
        routes[key] = Route(ApiKey(key), handler)
    for key, r in routes.items():
        HANDLERS[key] = r.handler
    return routes


ROUTES: dict[int, Route] = _build()
