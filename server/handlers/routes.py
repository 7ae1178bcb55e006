"""Everything about how each API is served, declared once, one row per API: its handler, its
hand-written fast path (a protocol/fastpath codec for the hottest requests), whether it is
called directly — as (request, version), without building a RequestContext or decoding
the client id —, its authorization policy (server/security/policies/; with the quick check a
direct route's usual case takes) and how virtual brokers route it (server/virtual/routing.py).
The dispatcher (server/dispatch.py) builds its per-(key, version) routes from this table and
ApiVersions advertises exactly the APIs it holds (with protocol/api.py's version ranges).

Functions are named ("module.function"), not imported: handlers under server/handlers/,
policies under server/security/policies/. An API's handler module, and what it imports, loads
at that API's first request (`ROUTES[key]`), and a policy only when an authorizer is
configured, so a server answers its first ApiVersions without loading the code of the
forty-odd APIs it also serves (tests/unit/test_api_table.py resolves every route).

Virtual-broker routing kinds: "group" (answered NOT_COORDINATOR by a node that does not
coordinate the request's groups), "partitioned" (partitions another node leads answered
NOT_LEADER_OR_FOLLOWER), and the rewritten answers "metadata", "find_coordinator",
"describe_cluster", "list_groups"; none: served as usual on any node.
"""
from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, NamedTuple

from kcoord.protocol.api import ApiKey
from kcoord.server.handlers.registry import Handler

if TYPE_CHECKING:
    from kcoord.protocol.fastpath import FastPath
    from kcoord.server.lazy import Lazy
    from kcoord.server.security.guard import AsIs, Policy


class Route(NamedTuple):
    """An API's route with its handler functions loaded (its policy loads on demand:
    `policy()`, `as_is()`)."""

    key: ApiKey
    handler: Handler  # (ctx, request, version) -> answer, once bound (bind)
    fast: FastPath | None = None  # hand-written decoders / encoder
    direct: Callable[..., Any] | None = None  # (request, version) once bound: no RequestContext
    declared: Declared | None = None
    # the handler area whose methods handler and direct are (a class under server/handlers/,
    # built by the composition root, server/node.py)
    area: str | None = None

    def policy(self) -> Policy | None:
        return None if self.declared is None or self.declared.policy is None else _policy(self.declared.policy)

    def as_is(self) -> AsIs | None:
        return None if self.declared is None or self.declared.as_is is None else _policy(self.declared.as_is)


class Declared(NamedTuple):
    """An API's route as declared: "module.function" names (handlers under server/handlers/,
    policies under server/security/policies/), the fast path by its name in protocol/fastpath,
    the virtual-broker routing kind."""

    key: ApiKey
    handler: str
    fast: str | None = None
    direct: str | None = None
    policy: str | None = None
    as_is: str | None = None
    virtual: str | None = None


_TABLE = (
    Declared(ApiKey.PRODUCE, "produce.ProduceApi.handle_produce", policy="data.produce", virtual="partitioned"),
    Declared(ApiKey.FETCH, "fetch.FetchApi.handle_fetch", policy="data.fetch", virtual="partitioned"),
    Declared(ApiKey.LIST_OFFSETS, "list_offsets.ListOffsetsApi.handle_list_offsets",
             policy="data.list_offsets", virtual="partitioned"),
    Declared(ApiKey.OFFSET_FOR_LEADER_EPOCH, "offsets_for_leader_epoch.OffsetsForLeaderEpochApi.handle_offsets_for_leader_epoch",
             policy="data.offsets_for_leader_epoch", virtual="partitioned"),
    Declared(ApiKey.METADATA, "metadata.MetadataApi.handle_metadata", policy="data.metadata", virtual="metadata"),
    Declared(ApiKey.OFFSET_COMMIT, "groups.GroupApis.handle_offset_commit",
             fast="OFFSET_COMMIT", direct="groups.GroupApis.commit_offsets", policy="groups.offset_commit",
             as_is="groups.offset_commit_as_is", virtual="group"),
    Declared(ApiKey.OFFSET_FETCH, "groups.GroupApis.handle_offset_fetch",
             policy="groups.offset_fetch", virtual="group"),
    Declared(ApiKey.FIND_COORDINATOR, "find_coordinator.FindCoordinatorApi.handle_find_coordinator",
             policy="groups.find_coordinator", virtual="find_coordinator"),
    Declared(ApiKey.JOIN_GROUP, "groups.GroupApis.handle_join_group", policy="groups.join_group", virtual="group"),
    Declared(ApiKey.HEARTBEAT, "groups.GroupApis.handle_heartbeat",
             fast="HEARTBEAT", direct="groups.GroupApis.heartbeat_body", policy="groups.heartbeat",
             as_is="groups.heartbeat_as_is", virtual="group"),
    Declared(ApiKey.LEAVE_GROUP, "groups.GroupApis.handle_leave_group", policy="groups.leave_group", virtual="group"),
    Declared(ApiKey.SYNC_GROUP, "groups.GroupApis.handle_sync_group", policy="groups.sync_group", virtual="group"),
    Declared(ApiKey.DESCRIBE_GROUPS, "groups.GroupApis.handle_describe_groups",
             policy="groups.describe_groups", virtual="group"),
    Declared(ApiKey.LIST_GROUPS, "groups.GroupApis.handle_list_groups",
             policy="groups.list_groups", virtual="list_groups"),
    Declared(ApiKey.API_VERSIONS, "api_versions.ApiVersionsApi.handle_api_versions", policy="cluster.api_versions"),
    Declared(ApiKey.CREATE_TOPICS, "create_topics.CreateTopicsApi.handle_create_topics", policy="topics.create_topics"),
    Declared(ApiKey.INIT_PRODUCER_ID, "init_producer_id.InitProducerIdApi.handle_init_producer_id",
             policy="txn.init_producer_id"),
    Declared(ApiKey.DELETE_GROUPS, "groups.GroupApis.handle_delete_groups",
             policy="groups.delete_groups", virtual="group"),
    Declared(ApiKey.OFFSET_DELETE, "groups.GroupApis.handle_offset_delete",
             policy="groups.offset_delete", virtual="group"),
    Declared(ApiKey.CONSUMER_GROUP_HEARTBEAT, "groups.GroupApis.handle_consumer_group_heartbeat",
             fast="CONSUMER_GROUP_HEARTBEAT", policy="groups.consumer_group_heartbeat", virtual="group"),
    Declared(ApiKey.CONSUMER_GROUP_DESCRIBE, "groups.GroupApis.handle_consumer_group_describe",
             policy="groups.consumer_group_describe", virtual="group"),
    # share groups (KIP-932, issue 25)
    Declared(ApiKey.SHARE_GROUP_HEARTBEAT, "share_groups.ShareGroupApis.handle_share_group_heartbeat",
             policy="share_groups.share_group_heartbeat", virtual="group"),
    Declared(ApiKey.SHARE_GROUP_DESCRIBE, "share_groups.ShareGroupApis.handle_share_group_describe",
             policy="share_groups.share_group_describe", virtual="group"),
    Declared(ApiKey.DELETE_TOPICS, "delete_topics.DeleteTopicsApi.handle_delete_topics", policy="topics.delete_topics"),
    Declared(ApiKey.DELETE_RECORDS, "delete_records.DeleteRecordsApi.handle_delete_records", policy="topics.delete_records"),
    Declared(ApiKey.CREATE_PARTITIONS, "create_partitions.CreatePartitionsApi.handle_create_partitions",
             policy="topics.create_partitions"),
    Declared(ApiKey.ADD_PARTITIONS_TO_TXN, "add_partitions_to_txn.AddPartitionsToTxnApi.handle_add_partitions_to_txn",
             policy="txn.add_partitions_to_txn"),
    Declared(ApiKey.ADD_OFFSETS_TO_TXN, "add_offsets_to_txn.AddOffsetsToTxnApi.handle_add_offsets_to_txn",
             policy="txn.add_offsets_to_txn"),
    Declared(ApiKey.END_TXN, "end_txn.EndTxnApi.handle_end_txn", policy="txn.end_txn"),
    Declared(ApiKey.WRITE_TXN_MARKERS, "write_txn_markers.WriteTxnMarkersApi.handle_write_txn_markers",
             policy="txn.write_txn_markers"),
    Declared(ApiKey.TXN_OFFSET_COMMIT, "txn_offset_commit.TxnOffsetCommitApi.handle_txn_offset_commit",
             policy="txn.txn_offset_commit"),
    Declared(ApiKey.DESCRIBE_PRODUCERS, "describe_producers.DescribeProducersApi.handle_describe_producers",
             policy="txn.describe_producers"),
    Declared(ApiKey.DESCRIBE_TRANSACTIONS, "describe_transactions.DescribeTransactionsApi.handle_describe_transactions",
             policy="txn.describe_transactions"),
    Declared(ApiKey.LIST_TRANSACTIONS, "list_transactions.ListTransactionsApi.handle_list_transactions",
             policy="txn.list_transactions"),
    Declared(ApiKey.DESCRIBE_CONFIGS, "describe_configs.DescribeConfigsApi.handle_describe_configs",
             policy="configs.describe_configs"),
    Declared(ApiKey.ALTER_CONFIGS, "alter_configs.AlterConfigsApi.handle_alter_configs", policy="configs.alter_configs"),
    Declared(ApiKey.INCREMENTAL_ALTER_CONFIGS, "incremental_alter_configs.IncrementalAlterConfigsApi.handle_incremental_alter_configs",
             policy="configs.incremental_alter_configs"),
    Declared(ApiKey.DESCRIBE_CLUSTER, "describe_cluster.DescribeClusterApi.handle_describe_cluster",
             policy="topics.describe_cluster", virtual="describe_cluster"),
    Declared(ApiKey.DESCRIBE_TOPIC_PARTITIONS, "describe_topic_partitions.DescribeTopicPartitionsApi.handle_describe_topic_partitions",
             policy="topics.describe_topic_partitions"),
    Declared(ApiKey.DESCRIBE_LOG_DIRS, "describe_log_dirs.DescribeLogDirsApi.handle_describe_log_dirs",
             policy="cluster.describe_log_dirs"),
    Declared(ApiKey.ELECT_LEADERS, "elect_leaders.ElectLeadersApi.handle_elect_leaders", policy="cluster.elect_leaders"),
    Declared(ApiKey.LIST_PARTITION_REASSIGNMENTS, "list_partition_reassignments.ListPartitionReassignmentsApi.handle_list_partition_reassignments",
             policy="cluster.list_partition_reassignments"),
    Declared(ApiKey.ALTER_PARTITION_REASSIGNMENTS, "alter_partition_reassignments.AlterPartitionReassignmentsApi.handle_alter_partition_reassignments",
             policy="cluster.alter_partition_reassignments"),
    Declared(ApiKey.SASL_HANDSHAKE, "sasl.SaslApis.handle_sasl_handshake", policy="cluster.sasl_handshake"),
    Declared(ApiKey.SASL_AUTHENTICATE, "sasl.SaslApis.handle_sasl_authenticate", policy="cluster.sasl_authenticate"),
    Declared(ApiKey.DESCRIBE_ACLS, "acls.AclApis.handle_describe_acls", policy="cluster.describe_acls"),
    Declared(ApiKey.CREATE_ACLS, "acls.AclApis.handle_create_acls", policy="cluster.create_acls"),
    Declared(ApiKey.DELETE_ACLS, "acls.AclApis.handle_delete_acls", policy="cluster.delete_acls"),
    # client quotas (issue 27)
    Declared(ApiKey.DESCRIBE_CLIENT_QUOTAS, "client_quotas.ClientQuotaApis.handle_describe_client_quotas",
             policy="quotas.describe_client_quotas"),
    Declared(ApiKey.ALTER_CLIENT_QUOTAS, "client_quotas.ClientQuotaApis.handle_alter_client_quotas",
             policy="quotas.alter_client_quotas"),
    Declared(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, "scram_credentials.ScramCredentialApis.handle_describe_user_scram_credentials",
             policy="cluster.describe_user_scram_credentials"),
    Declared(ApiKey.ALTER_USER_SCRAM_CREDENTIALS, "scram_credentials.ScramCredentialApis.handle_alter_user_scram_credentials",
             policy="cluster.alter_user_scram_credentials"),
    # share partitions (issue 25, server/share/)
    Declared(ApiKey.SHARE_FETCH, "share_fetch.ShareFetchApis.handle_share_fetch", policy="share_fetch.share_fetch"),
    Declared(ApiKey.SHARE_ACKNOWLEDGE, "share_fetch.ShareFetchApis.handle_share_acknowledge", policy="share_fetch.share_acknowledge"),
    Declared(ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS, "share_offsets.ShareOffsetsApis.handle_describe_share_group_offsets",
             policy="share_fetch.describe_share_group_offsets"),
    Declared(ApiKey.ALTER_SHARE_GROUP_OFFSETS, "share_offsets.ShareOffsetsApis.handle_alter_share_group_offsets",
             policy="share_fetch.alter_share_group_offsets"),
    Declared(ApiKey.DELETE_SHARE_GROUP_OFFSETS, "share_offsets.ShareOffsetsApis.handle_delete_share_group_offsets",
             policy="share_fetch.delete_share_group_offsets"),
    # the share coordinator, between brokers (server/share/coordinator.py, persister.py)
    Declared(ApiKey.INITIALIZE_SHARE_GROUP_STATE, "share_state.ShareStateApis.handle_initialize_share_group_state",
             policy="share_state.initialize_share_group_state"),
    Declared(ApiKey.READ_SHARE_GROUP_STATE, "share_state.ShareStateApis.handle_read_share_group_state",
             policy="share_state.read_share_group_state"),
    Declared(ApiKey.WRITE_SHARE_GROUP_STATE, "share_state.ShareStateApis.handle_write_share_group_state",
             policy="share_state.write_share_group_state"),
    Declared(ApiKey.DELETE_SHARE_GROUP_STATE, "share_state.ShareStateApis.handle_delete_share_group_state",
             policy="share_state.delete_share_group_state"),
)


def _function(name: str) -> tuple[Any, str]:
    """"module.Area.method" -> (the function, "Area")."""
    module, area, fn = name.split(".")
    return getattr(getattr(importlib.import_module("kcoord.server.handlers." + module), area), fn), area


def _policy(name: str) -> Any:
    module, _, fn = name.rpartition(".")
    return getattr(importlib.import_module("kcoord.server.security.policies." + module), fn)


def _load(d: Declared) -> Route:
    fast = None
    if d.fast is not None:
        from kcoord.protocol import fastpath

        fast = getattr(fastpath, d.fast)
    handler, area = _function(d.handler)
    direct = None
    if d.direct is not None:
        direct, direct_area = _function(d.direct)
        if direct_area != area:
            raise RuntimeError(f"{d.key!r}: the direct call and the handler belong to different areas")
    return Route(d.key, handler, fast, direct, d, area)


def bind(route: Route, areas: Mapping[str, Lazy[Any]]) -> Route:
    """The route with its handler (and direct call) bound to its area's object: `areas`, the
    handler areas the composition root built with the parts they use (server/node.py)."""
    apis = areas[route.area].get()  # type: ignore[index]
    return route._replace(handler=route.handler.__get__(apis),
                          direct=None if route.direct is None else route.direct.__get__(apis))


def handler_of(areas: Mapping[str, Lazy[Any]], key: int) -> Handler:
    """The handler of API `key` bound to its area among `areas` (in-process callers and tests)."""
    return bind(ROUTES[key], areas).handler


class Routes(Mapping[int, Route]):
    """API key -> Route of every served API. Which keys it holds, and what each declares, is
    known without importing anything; a route's functions load at its first lookup."""

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

    def declared(self, key: int) -> Declared | None:
        """What the API declares, with nothing loaded (None for an API not served)."""
        return self._declared.get(key)

    def __contains__(self, key: object) -> bool:
        return key in self._declared

    def __iter__(self) -> Iterator[int]:
        return iter(self._declared)

    def __len__(self) -> int:
        return len(self._declared)


class _View(Mapping[int, Any]):
    """API key -> one loaded part of every served API's route (a Mapping over ROUTES)."""

    def __init__(self, part: Callable[[int], Any], has: Callable[[Declared], bool] = lambda d: True) -> None:
        self._part = part
        self._has = has

    def __getitem__(self, key: int) -> Any:
        d = ROUTES.declared(key)
        if d is None or not self._has(d):
            raise KeyError(key)
        return self._part(key)

    def __contains__(self, key: object) -> bool:
        d = ROUTES.declared(key)  # type: ignore[arg-type]
        return d is not None and self._has(d)

    def __iter__(self) -> Iterator[int]:
        return (k for k in ROUTES if self._has(ROUTES.declared(k)))  # type: ignore[arg-type]

    def __len__(self) -> int:
        return sum(1 for _ in self)


ROUTES = Routes(_TABLE)
HANDLERS: Mapping[int, Handler] = _View(lambda k: ROUTES[k].handler)
POLICIES: Mapping[int, Policy] = _View(lambda k: ROUTES[k].policy(), lambda d: d.policy is not None)
ALLOWED_AS_IS: Mapping[int, AsIs] = _View(lambda k: ROUTES[k].as_is(), lambda d: d.as_is is not None)
