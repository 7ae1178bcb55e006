"""The API table: key -> (name, request/response classes, the version range kcoord serves).

These are the wire facts of each API; how the server serves it (handler, hand-written fast
path, direct call) is declared in server/handlers/routes.py. This table is what ApiVersions
advertises (for the APIs that have a route) and what the dispatcher checks versions against.
Advertise exactly what is implemented: clients such as kafka-python guess the broker's
version from these maxima.
"""
from __future__ import annotations

import importlib
from collections.abc import Callable
from enum import IntEnum
from functools import cache
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kafka.protocol.api_message import ApiMessage


class ApiKey(IntEnum):
    PRODUCE = 0
    FETCH = 1
    LIST_OFFSETS = 2
    METADATA = 3
    OFFSET_FOR_LEADER_EPOCH = 23
    OFFSET_COMMIT = 8
    OFFSET_FETCH = 9
    FIND_COORDINATOR = 10
    JOIN_GROUP = 11
    HEARTBEAT = 12
    LEAVE_GROUP = 13
    SYNC_GROUP = 14
    DESCRIBE_GROUPS = 15
    LIST_GROUPS = 16
    SASL_HANDSHAKE = 17
    API_VERSIONS = 18
    CREATE_TOPICS = 19
    DELETE_TOPICS = 20
    DELETE_RECORDS = 21
    CREATE_PARTITIONS = 37
    INIT_PRODUCER_ID = 22
    DESCRIBE_ACLS = 29
    CREATE_ACLS = 30
    DELETE_ACLS = 31
    SASL_AUTHENTICATE = 36
    ADD_PARTITIONS_TO_TXN = 24
    ADD_OFFSETS_TO_TXN = 25
    END_TXN = 26
    WRITE_TXN_MARKERS = 27
    TXN_OFFSET_COMMIT = 28
    DESCRIBE_CONFIGS = 32
    ALTER_CONFIGS = 33
    DESCRIBE_LOG_DIRS = 35
    DELETE_GROUPS = 42
    ELECT_LEADERS = 43
    INCREMENTAL_ALTER_CONFIGS = 44
    ALTER_PARTITION_REASSIGNMENTS = 45
    LIST_PARTITION_REASSIGNMENTS = 46
    OFFSET_DELETE = 47
    DESCRIBE_CLIENT_QUOTAS = 48
    ALTER_CLIENT_QUOTAS = 49
    DESCRIBE_USER_SCRAM_CREDENTIALS = 50
    ALTER_USER_SCRAM_CREDENTIALS = 51
    DESCRIBE_CLUSTER = 60
    DESCRIBE_PRODUCERS = 61
    DESCRIBE_TRANSACTIONS = 65
    LIST_TRANSACTIONS = 66
    CONSUMER_GROUP_HEARTBEAT = 68
    CONSUMER_GROUP_DESCRIBE = 69
    DESCRIBE_TOPIC_PARTITIONS = 75
    SHARE_GROUP_HEARTBEAT = 76
    SHARE_GROUP_DESCRIBE = 77
    SHARE_FETCH = 78
    SHARE_ACKNOWLEDGE = 79
    INITIALIZE_SHARE_GROUP_STATE = 83
    READ_SHARE_GROUP_STATE = 84
    WRITE_SHARE_GROUP_STATE = 85
    DELETE_SHARE_GROUP_STATE = 86
    DESCRIBE_SHARE_GROUP_OFFSETS = 90
    ALTER_SHARE_GROUP_OFFSETS = 91
    DELETE_SHARE_GROUP_OFFSETS = 92


# Kafka 4.0 removed Produce v0-v2 (KIP-896) but still advertises Produce from v0 (KAFKA-18659):
# librdkafka before 2.11.1 (kcat here is 2.0) checks its compression features against Produce
# v0 and sends every batch uncompressed when v0 is not advertised. A v0-v2 request is refused
# all the same (closed connection, as for any version not served): no client picks one, since
# each uses the highest version both sides know.
PRODUCE_API_VERSIONS_RESPONSE_MIN_VERSION = 0


class ApiSpec:
    """One API's wire facts. The version range and name are static (ApiVersions advertises them
    without loading anything); the request/response classes and the header versions derived
    from them are loaded at the first use: building a kafka-python class from its JSON schema
    costs about a millisecond, and a server that starts answers ApiVersions long before it
    sees most of the APIs it serves (tests/unit/test_api_table.py checks the static facts
    against the classes)."""

    __slots__ = ("key", "name", "module", "min_version", "max_version", "request", "response", "request_headers",
                 "response_headers")
    _ON_DEMAND = frozenset(("request", "response", "request_headers", "response_headers"))

    key: ApiKey
    name: str  # Kafka's name of the API (ApiKeys), e.g. OffsetCommit
    module: str  # the module holding <name>Request and <name>Response
    min_version: int
    max_version: int
    request: type[ApiMessage]
    response: type[ApiMessage]
    # header versions by API version, computed once (they are looked up on every request)
    request_headers: tuple[int, ...]
    response_headers: tuple[int, ...]

    def __init__(self, key: ApiKey, name: str, module: str, min_version: int, max_version: int) -> None:
        self.key = key
        self.name = name
        self.module = module
        self.min_version = min_version
        self.max_version = max_version

    def __getattr__(self, attr: str) -> Any:
        # called only for an attribute not set yet: the classes and what derives from them
        if attr not in ApiSpec._ON_DEMAND:
            raise AttributeError(attr)
        module = importlib.import_module(self.module)
        self.request = getattr(module, self.name + "Request")
        self.response = getattr(module, self.name + "Response")
        versions = range(self.max_version + 1)
        self.request_headers = tuple(self._request_header(v) for v in versions)
        self.response_headers = tuple(self._response_header(v) for v in versions)
        return getattr(self, attr)

    def __repr__(self) -> str:
        return f"ApiSpec({self.key.name}, {self.min_version}-{self.max_version})"

    @property
    def advertised_min_version(self) -> int:
        """The lowest version ApiVersions advertises: min_version, except for Produce."""
        return PRODUCE_API_VERSIONS_RESPONSE_MIN_VERSION if self.key == ApiKey.PRODUCE else self.min_version

    def decode(self, frame: bytes, pos: int, version: int) -> Any:
        """The request body at frame[pos:]. Raises ValueError for a body that does not decode,
        including one whose fields claim more bytes than the frame holds (kafka-python's
        compiled decoders read past the end silently; Kafka refuses such a request)."""
        request, end = _generic_decoder(self.request, version)(memoryview(frame), pos)
        if end > len(frame):
            raise ValueError(f"request body needs {end - pos} bytes, the frame has {len(frame) - pos}")
        _check_non_null(request, _non_null_plan(self.request, version))
        return request

    def encode(self, response: Any, version: int) -> bytes:
        return response.encode(version=version)

    def is_flexible(self, version: int) -> bool:
        return bool(self.request.flexible_version_q(version))

    def request_header_version(self, version: int) -> int:
        return self.request_headers[version]

    def response_header_version(self, version: int) -> int:
        return self.response_headers[version]

    def _request_header(self, version: int) -> int:
        # v2 (tagged fields) for flexible versions; v1 otherwise.
        return 2 if self.is_flexible(version) else 1

    def _response_header(self, version: int) -> int:
        # ApiVersions always answers with header v0 so that a client that does not know our
        # flexible versions can still read the answer (KIP-511).
        if self.key == ApiKey.API_VERSIONS:
            return 0
        return 1 if self.is_flexible(version) else 0


@cache
def _generic_decoder(cls: type[ApiMessage], version: int) -> Callable[[memoryview, int], tuple[Any, int]]:
    flexible = bool(cls.flexible_version_q(version))
    return cls._struct.compiled_decode_from(version, compact=flexible, tagged=flexible, data_class=cls[None])


# (attribute, nullable in this version, plan of its fields or None, is an array)
_Plan = tuple[tuple[str, bool, "_Plan | None", bool], ...]


@cache
def _non_null_plan(cls: type[ApiMessage], version: int) -> _Plan:
    """What a decoded request of this version must not hold as null. kafka-python's decoders
    accept a null (length -1) for any string or array; Kafka refuses a null where the schema
    does not allow one ("non-nullable field was serialized as null")."""
    return _build_plan(cls._struct, version)


def _build_plan(struct: Any, version: int) -> _Plan:
    plan = []
    for attr, field in struct.fields.items():
        if not field.for_version_q(version) or getattr(field, "_tag", None) is not None:
            continue
        if field._type_str in ("uuid", "bool") or field._type_str.startswith(("int", "uint", "float")):
            continue  # never null on the wire (a zero uuid decodes as None)
        nested = field.is_struct_array() or field.is_struct()
        sub = _build_plan(field, version) if nested else None
        nullable = bool(field.nullable_for_version_q(version)) if hasattr(field, "nullable_for_version_q") else False
        plan.append((attr, nullable, sub or None, bool(field.is_array())))
    return tuple(plan)


def _check_non_null(obj: Any, plan: _Plan) -> None:
    for attr, nullable, sub, is_array in plan:
        value = getattr(obj, attr, None)
        if value is None:
            if not nullable:
                raise ValueError(f"non-nullable field {attr} was serialized as null")
            continue
        if sub is not None:
            for item in value if is_array else (value,):
                _check_non_null(item, sub)
        elif is_array and not nullable and any(x is None for x in value):
            raise ValueError(f"null element in {attr}")


_KP = "kafka.protocol."


# The versions kcoord serves (see DESIGN.md: what Java 3.9 and librdkafka 2.16 send), with the
# module of each API's classes: kafka-python's submodule itself, not its package (whose
# __init__ builds every class of its siblings).
API_TABLE: dict[int, ApiSpec] = {
    s.key: s
    for s in (
        ApiSpec(ApiKey.PRODUCE, "Produce", _KP + "producer.produce", 3, 12),
        ApiSpec(ApiKey.FETCH, "Fetch", _KP + "consumer.fetch", 4, 17),
        ApiSpec(ApiKey.LIST_OFFSETS, "ListOffsets", _KP + "consumer.offsets", 0, 9),
        ApiSpec(ApiKey.OFFSET_FOR_LEADER_EPOCH, "OffsetForLeaderEpoch", _KP + "consumer.offsets", 2, 4),
        ApiSpec(ApiKey.METADATA, "Metadata", _KP + "metadata.metadata", 0, 12),
        ApiSpec(ApiKey.OFFSET_COMMIT, "OffsetCommit", _KP + "consumer.group", 0, 9),
        ApiSpec(ApiKey.OFFSET_FETCH, "OffsetFetch", _KP + "consumer.group", 0, 9),
        ApiSpec(ApiKey.FIND_COORDINATOR, "FindCoordinator", _KP + "metadata.find_coordinator", 0, 6),
        ApiSpec(ApiKey.JOIN_GROUP, "JoinGroup", _KP + "consumer.group", 0, 9),
        ApiSpec(ApiKey.HEARTBEAT, "Heartbeat", _KP + "consumer.group", 0, 4),
        ApiSpec(ApiKey.LEAVE_GROUP, "LeaveGroup", _KP + "consumer.group", 0, 5),
        ApiSpec(ApiKey.SYNC_GROUP, "SyncGroup", _KP + "consumer.group", 0, 5),
        ApiSpec(ApiKey.DESCRIBE_GROUPS, "DescribeGroups", _KP + "admin.groups", 0, 5),
        ApiSpec(ApiKey.LIST_GROUPS, "ListGroups", _KP + "admin.groups", 0, 5),
        ApiSpec(ApiKey.API_VERSIONS, "ApiVersions", _KP + "metadata.api_versions", 0, 4),
        ApiSpec(ApiKey.CREATE_TOPICS, "CreateTopics", _KP + "admin.topics", 0, 7),
        ApiSpec(ApiKey.DELETE_TOPICS, "DeleteTopics", _KP + "admin.topics", 0, 6),
        ApiSpec(ApiKey.DELETE_RECORDS, "DeleteRecords", _KP + "admin.topics", 0, 2),
        ApiSpec(ApiKey.CREATE_PARTITIONS, "CreatePartitions", _KP + "admin.topics", 0, 3),
        ApiSpec(ApiKey.INIT_PRODUCER_ID, "InitProducerId", _KP + "producer.transaction", 0, 5),
        ApiSpec(ApiKey.ADD_PARTITIONS_TO_TXN, "AddPartitionsToTxn", _KP + "producer.transaction", 0, 5),
        ApiSpec(ApiKey.ADD_OFFSETS_TO_TXN, "AddOffsetsToTxn", _KP + "producer.transaction", 0, 4),
        ApiSpec(ApiKey.END_TXN, "EndTxn", _KP + "producer.transaction", 0, 5),
        # between brokers: a transaction coordinator's markers to partition leaders on other nodes
        ApiSpec(ApiKey.WRITE_TXN_MARKERS, "WriteTxnMarkers", _KP + "producer.transaction", 1, 2),
        ApiSpec(ApiKey.TXN_OFFSET_COMMIT, "TxnOffsetCommit", _KP + "producer.transaction", 0, 5),
        ApiSpec(ApiKey.DESCRIBE_PRODUCERS, "DescribeProducers", _KP + "admin.transactions", 0, 0),
        ApiSpec(ApiKey.DESCRIBE_TRANSACTIONS, "DescribeTransactions", _KP + "admin.transactions", 0, 0),
        ApiSpec(ApiKey.LIST_TRANSACTIONS, "ListTransactions", _KP + "admin.transactions", 0, 1),
        ApiSpec(ApiKey.DELETE_GROUPS, "DeleteGroups", _KP + "admin.groups", 0, 2),
        ApiSpec(ApiKey.OFFSET_DELETE, "OffsetDelete", _KP + "consumer.group", 0, 0),
        ApiSpec(ApiKey.SASL_HANDSHAKE, "SaslHandshake", _KP + "sasl", 0, 1),
        ApiSpec(ApiKey.SASL_AUTHENTICATE, "SaslAuthenticate", _KP + "sasl", 0, 2),
        ApiSpec(ApiKey.DESCRIBE_CLIENT_QUOTAS, "DescribeClientQuotas", _KP + "admin.client_quotas", 0, 1),
        ApiSpec(ApiKey.ALTER_CLIENT_QUOTAS, "AlterClientQuotas", _KP + "admin.client_quotas", 0, 1),
        ApiSpec(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, "DescribeUserScramCredentials", _KP + "admin.users", 0, 0),
        ApiSpec(ApiKey.ALTER_USER_SCRAM_CREDENTIALS, "AlterUserScramCredentials", _KP + "admin.users", 0, 0),
        # v0 of the ACL APIs is v1 without the pattern type fields: kafka-python's classes (Kafka
        # 4's schemas, 1-3) read and write it all the same
        ApiSpec(ApiKey.DESCRIBE_ACLS, "DescribeAcls", _KP + "admin.acl", 0, 3),
        ApiSpec(ApiKey.CREATE_ACLS, "CreateAcls", _KP + "admin.acl", 0, 3),
        ApiSpec(ApiKey.DELETE_ACLS, "DeleteAcls", _KP + "admin.acl", 0, 3),
        ApiSpec(ApiKey.DESCRIBE_CONFIGS, "DescribeConfigs", _KP + "admin.configs", 0, 4),
        ApiSpec(ApiKey.ALTER_CONFIGS, "AlterConfigs", _KP + "admin.configs", 0, 2),
        ApiSpec(ApiKey.INCREMENTAL_ALTER_CONFIGS, "IncrementalAlterConfigs", _KP + "admin.configs", 0, 1),
        ApiSpec(ApiKey.DESCRIBE_LOG_DIRS, "DescribeLogDirs", _KP + "admin.cluster", 0, 4),
        ApiSpec(ApiKey.ELECT_LEADERS, "ElectLeaders", _KP + "admin.topics", 0, 2),
        ApiSpec(ApiKey.ALTER_PARTITION_REASSIGNMENTS, "AlterPartitionReassignments", _KP + "admin.topics", 0, 0),
        ApiSpec(ApiKey.LIST_PARTITION_REASSIGNMENTS, "ListPartitionReassignments", _KP + "admin.topics", 0, 0),
        ApiSpec(ApiKey.DESCRIBE_CLUSTER, "DescribeCluster", _KP + "admin.cluster", 0, 1),
        ApiSpec(ApiKey.DESCRIBE_TOPIC_PARTITIONS, "DescribeTopicPartitions", _KP + "admin.topics", 0, 0),
        ApiSpec(ApiKey.CONSUMER_GROUP_HEARTBEAT, "ConsumerGroupHeartbeat", "kcoord.protocol.messages", 0, 1),
        ApiSpec(ApiKey.CONSUMER_GROUP_DESCRIBE, "ConsumerGroupDescribe", "kcoord.protocol.messages", 0, 1),
        ApiSpec(ApiKey.SHARE_GROUP_HEARTBEAT, "ShareGroupHeartbeat", "kcoord.protocol.share_messages", 1, 1),
        ApiSpec(ApiKey.SHARE_GROUP_DESCRIBE, "ShareGroupDescribe", "kcoord.protocol.share_messages", 1, 1),
        # share partitions (KIP-932), Kafka 4.3's versions (server/share/)
        ApiSpec(ApiKey.SHARE_FETCH, "ShareFetch", "kcoord.protocol.share_messages", 1, 2),
        ApiSpec(ApiKey.SHARE_ACKNOWLEDGE, "ShareAcknowledge", "kcoord.protocol.share_messages", 1, 2),
        ApiSpec(ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS, "DescribeShareGroupOffsets", "kcoord.protocol.share_messages", 0, 1),
        ApiSpec(ApiKey.ALTER_SHARE_GROUP_OFFSETS, "AlterShareGroupOffsets", "kcoord.protocol.share_messages", 0, 0),
        ApiSpec(ApiKey.DELETE_SHARE_GROUP_OFFSETS, "DeleteShareGroupOffsets", "kcoord.protocol.share_messages", 0, 0),
        # between brokers: a share partition's leader reads and writes its state at the share
        # coordinator (the __share_group_state partition's leader), server/share/persister.py
        ApiSpec(ApiKey.INITIALIZE_SHARE_GROUP_STATE, "InitializeShareGroupState",
                "kcoord.protocol.share_state_messages", 0, 0),
        ApiSpec(ApiKey.READ_SHARE_GROUP_STATE, "ReadShareGroupState", "kcoord.protocol.share_state_messages", 0, 0),
        ApiSpec(ApiKey.WRITE_SHARE_GROUP_STATE, "WriteShareGroupState", "kcoord.protocol.share_state_messages", 0, 0),
        ApiSpec(ApiKey.DELETE_SHARE_GROUP_STATE, "DeleteShareGroupState", "kcoord.protocol.share_state_messages", 0, 0),
    )
}
