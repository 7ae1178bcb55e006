"""How each API is served, declared once: its handler, its hand-written fast path (a
protocol/fastpath codec for the hottest requests) and whether it is called directly — as
(broker, request, version), without building a RequestContext or decoding the client id. The
dispatcher (server/dispatch.py) builds its per-(key, version) routes from this table and
ApiVersions advertises exactly the APIs it holds (with protocol/api.py's version ranges).

Handlers and direct calls are named ("module.function" under server/handlers/), not imported:
an API's handler module, and what it imports, loads at that API's first request
(`ROUTES[key]`), so a server answers its first ApiVersions without loading the code of the
forty-odd APIs it also serves (tests/unit/test_api_table.py resolves every route).
"""
from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, NamedTuple

from protocol.api import ApiKey
from server.handlers.registry import Handler

if TYPE_CHECKING:
    from protocol.fastpath import FastPath
    from server.broker import Broker


class Route(NamedTuple):
    """An API's route with its functions loaded."""

    key: ApiKey
    handler: Handler  # (ctx, request, version) -> answer
    fast: FastPath | None = None  # hand-written decoders / encoder
    direct: Callable[[Broker, Any, int], Any] | None = None  # served without a RequestContext


class Declared(NamedTuple):
    """An API's route as declared: "module.function" names under server/handlers/, the fast
    path by its name in protocol/fastpath."""

    key: ApiKey
    handler: str
    fast: str | None = None
    direct: str | None = None


_TABLE = (
    Declared(ApiKey.PRODUCE, "produce.handle_produce"),
    Declared(ApiKey.FETCH, "fetch.handle_fetch"),
    Declared(ApiKey.LIST_OFFSETS, "list_offsets.handle_list_offsets"),
    Declared(ApiKey.METADATA, "metadata.handle_metadata"),
    Declared(ApiKey.OFFSET_COMMIT, "groups.handle_offset_commit", "OFFSET_COMMIT", "groups.commit_offsets"),
    Declared(ApiKey.OFFSET_FETCH, "groups.handle_offset_fetch"),
    Declared(ApiKey.FIND_COORDINATOR, "find_coordinator.handle_find_coordinator"),
    Declared(ApiKey.JOIN_GROUP, "groups.handle_join_group"),
    Declared(ApiKey.HEARTBEAT, "groups.handle_heartbeat", "HEARTBEAT", "groups.heartbeat_body"),
    Declared(ApiKey.LEAVE_GROUP, "groups.handle_leave_group"),
    Declared(ApiKey.SYNC_GROUP, "groups.handle_sync_group"),
    Declared(ApiKey.DESCRIBE_GROUPS, "groups.handle_describe_groups"),
    Declared(ApiKey.LIST_GROUPS, "groups.handle_list_groups"),
    Declared(ApiKey.API_VERSIONS, "api_versions.handle_api_versions"),
    Declared(ApiKey.CREATE_TOPICS, "create_topics.handle_create_topics"),
    Declared(ApiKey.INIT_PRODUCER_ID, "init_producer_id.handle_init_producer_id"),
    Declared(ApiKey.DELETE_GROUPS, "groups.handle_delete_groups"),
    Declared(ApiKey.OFFSET_DELETE, "groups.handle_offset_delete"),
    Declared(ApiKey.CONSUMER_GROUP_HEARTBEAT, "groups.handle_consumer_group_heartbeat", "CONSUMER_GROUP_HEARTBEAT"),
    Declared(ApiKey.CONSUMER_GROUP_DESCRIBE, "groups.handle_consumer_group_describe"),
    Declared(ApiKey.DELETE_TOPICS, "delete_topics.handle_delete_topics"),
    Declared(ApiKey.DELETE_RECORDS, "delete_records.handle_delete_records"),
    Declared(ApiKey.CREATE_PARTITIONS, "create_partitions.handle_create_partitions"),
    # transactions (issue 13)
    Declared(ApiKey.ADD_PARTITIONS_TO_TXN, "add_partitions_to_txn.handle_add_partitions_to_txn"),
    Declared(ApiKey.ADD_OFFSETS_TO_TXN, "add_offsets_to_txn.handle_add_offsets_to_txn"),
    Declared(ApiKey.END_TXN, "end_txn.handle_end_txn"),
    Declared(ApiKey.TXN_OFFSET_COMMIT, "txn_offset_commit.handle_txn_offset_commit"),
    Declared(ApiKey.DESCRIBE_PRODUCERS, "describe_producers.handle_describe_producers"),
    Declared(ApiKey.DESCRIBE_TRANSACTIONS, "describe_transactions.handle_describe_transactions"),
    Declared(ApiKey.LIST_TRANSACTIONS, "list_transactions.handle_list_transactions"),
    # configs and the cluster, as the single broker (issue 12)
    Declared(ApiKey.DESCRIBE_CONFIGS, "describe_configs.handle_describe_configs"),
    Declared(ApiKey.ALTER_CONFIGS, "alter_configs.handle_alter_configs"),
    Declared(ApiKey.INCREMENTAL_ALTER_CONFIGS, "incremental_alter_configs.handle_incremental_alter_configs"),
    Declared(ApiKey.DESCRIBE_CLUSTER, "describe_cluster.handle_describe_cluster"),
    Declared(ApiKey.DESCRIBE_TOPIC_PARTITIONS, "describe_topic_partitions.handle_describe_topic_partitions"),
    Declared(ApiKey.DESCRIBE_LOG_DIRS, "describe_log_dirs.handle_describe_log_dirs"),
    Declared(ApiKey.ELECT_LEADERS, "elect_leaders.handle_elect_leaders"),
    Declared(ApiKey.LIST_PARTITION_REASSIGNMENTS, "list_partition_reassignments.handle_list_partition_reassignments"),
    Declared(ApiKey.ALTER_PARTITION_REASSIGNMENTS,
             "alter_partition_reassignments.handle_alter_partition_reassignments"),
    # security (issue 11)
    Declared(ApiKey.SASL_HANDSHAKE, "sasl.handle_sasl_handshake"),
    Declared(ApiKey.SASL_AUTHENTICATE, "sasl.handle_sasl_authenticate"),
    Declared(ApiKey.DESCRIBE_ACLS, "acls.handle_describe_acls"),
    Declared(ApiKey.CREATE_ACLS, "acls.handle_create_acls"),
    Declared(ApiKey.DELETE_ACLS, "acls.handle_delete_acls"),
    Declared(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, "scram_credentials.handle_describe_user_scram_credentials"),
    Declared(ApiKey.ALTER_USER_SCRAM_CREDENTIALS, "scram_credentials.handle_alter_user_scram_credentials"),
)


def _function(name: str) -> Any:
    module, _, fn = name.rpartition(".")
    return getattr(importlib.import_module("server.handlers." + module), fn)


def _load(d: Declared) -> Route:
    fast = None
    if d.fast is not None:
        from protocol import fastpath

        fast = getattr(fastpath, d.fast)
    return Route(d.key, _function(d.handler), fast, None if d.direct is None else _function(d.direct))


class Routes(Mapping[int, Route]):
    """API key -> Route of every served API. Which keys it holds is known without importing
    anything; a route's functions load at its first lookup."""

    def __init__(self, declared: tuple[Declared, ...]) -> None:
        self._declared: dict[int, Declared] = {}
        self._loaded: dict[int, Route] = {}
        for d in declared:
            if d.key in self._declared:
                raise RuntimeError(f"two routes for API key {d.key!r}")
            self._declared[d.key] = d

    def __getitem__(self, key: int) -> Route:
        route = self._loaded.get(key)
        if route is None:
            route = self._loaded[key] = _load(self._declared[key])
        return route

    def __contains__(self, key: object) -> bool:
        return key in self._declared

    def __iter__(self) -> Iterator[int]:
        return iter(self._declared)

    def __len__(self) -> int:
        return len(self._declared)


class Handlers(Mapping[int, Handler]):
    """API key -> handler of every served API (the handler of ROUTES[key])."""

    def __getitem__(self, key: int) -> Handler:
        return ROUTES[key].handler

    def __contains__(self, key: object) -> bool:
        return key in ROUTES

    def __iter__(self) -> Iterator[int]:
        return iter(ROUTES)

    def __len__(self) -> int:
        return len(ROUTES)


ROUTES = Routes(_TABLE)
HANDLERS = Handlers()
