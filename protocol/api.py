"""The API table: key -> (name, request/response classes, the version range kcoord serves).

These are the wire facts of each API; how the server serves it (handler, hand-written fast
path, direct call) is declared in server/handlers/routes.py. This table is what ApiVersions
advertises (for the APIs that have a route) and what the dispatcher checks versions against.
Advertise exactly what is implemented: clients such as kafka-python guess the broker's
version from these maxima.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import IntEnum
from functools import cache
from typing import Any

# the admin schemas' own modules: kafka.protocol.admin's __init__ loads every admin schema
from kafka.protocol.admin.acl import (
    CreateAclsRequest,
    CreateAclsResponse,
    DeleteAclsRequest,
    DeleteAclsResponse,
    DescribeAclsRequest,
    DescribeAclsResponse,
)
from kafka.protocol.admin.cluster import (
    DescribeClusterRequest,
    DescribeClusterResponse,
    DescribeLogDirsRequest,
    DescribeLogDirsResponse,
)
from kafka.protocol.admin.configs import (
    AlterConfigsRequest,
    AlterConfigsResponse,
    DescribeConfigsRequest,
    DescribeConfigsResponse,
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
)
from kafka.protocol.admin.groups import (
    DeleteGroupsRequest,
    DeleteGroupsResponse,
    DescribeGroupsRequest,
    DescribeGroupsResponse,
    ListGroupsRequest,
    ListGroupsResponse,
)
from kafka.protocol.admin.topics import (
    AlterPartitionReassignmentsRequest,
    AlterPartitionReassignmentsResponse,
    CreatePartitionsRequest,
    CreatePartitionsResponse,
    CreateTopicsRequest,
    CreateTopicsResponse,
    DeleteRecordsRequest,
    DeleteRecordsResponse,
    DeleteTopicsRequest,
    DeleteTopicsResponse,
    DescribeTopicPartitionsRequest,
    DescribeTopicPartitionsResponse,
    ElectLeadersRequest,
    ElectLeadersResponse,
    ListPartitionReassignmentsRequest,
    ListPartitionReassignmentsResponse,
)
from kafka.protocol.admin.transactions import (
    DescribeProducersRequest,
    DescribeProducersResponse,
    DescribeTransactionsRequest,
    DescribeTransactionsResponse,
    ListTransactionsRequest,
    ListTransactionsResponse,
)
from kafka.protocol.admin.users import (
    AlterUserScramCredentialsRequest,
    AlterUserScramCredentialsResponse,
    DescribeUserScramCredentialsRequest,
    DescribeUserScramCredentialsResponse,
)
from kafka.protocol.api_message import ApiMessage
from kafka.protocol.consumer import (
    FetchRequest,
    FetchResponse,
    HeartbeatRequest,
    HeartbeatResponse,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    LeaveGroupResponse,
    ListOffsetsRequest,
    ListOffsetsResponse,
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetDeleteRequest,
    OffsetDeleteResponse,
    OffsetFetchRequest,
    OffsetFetchResponse,
    SyncGroupRequest,
    SyncGroupResponse,
)
from kafka.protocol.metadata import (
    ApiVersionsRequest,
    ApiVersionsResponse,
    FindCoordinatorRequest,
    FindCoordinatorResponse,
    MetadataRequest,
    MetadataResponse,
)
from kafka.protocol.producer import (
    InitProducerIdRequest,
    InitProducerIdResponse,
    ProduceRequest,
    ProduceResponse,
)
from kafka.protocol.producer.transaction import (
    AddOffsetsToTxnRequest,
    AddOffsetsToTxnResponse,
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnResponse,
    EndTxnRequest,
    EndTxnResponse,
    TxnOffsetCommitRequest,
    TxnOffsetCommitResponse,
)
from kafka.protocol.sasl import (
    SaslAuthenticateRequest,
    SaslAuthenticateResponse,
    SaslHandshakeRequest,
    SaslHandshakeResponse,
)

from protocol.messages import (
    ConsumerGroupDescribeRequest,
    ConsumerGroupDescribeResponse,
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
)


class ApiKey(IntEnum):
    PRODUCE = 0
    FETCH = 1
    LIST_OFFSETS = 2
    METADATA = 3
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
    DESCRIBE_USER_SCRAM_CREDENTIALS = 50
    ALTER_USER_SCRAM_CREDENTIALS = 51
    DESCRIBE_CLUSTER = 60
    DESCRIBE_PRODUCERS = 61
    DESCRIBE_TRANSACTIONS = 65
    LIST_TRANSACTIONS = 66
    CONSUMER_GROUP_HEARTBEAT = 68
    CONSUMER_GROUP_DESCRIBE = 69
    DESCRIBE_TOPIC_PARTITIONS = 75


# Kafka 4.0 removed Produce v0-v2 (KIP-896) but still advertises Produce from v0 (KAFKA-18659):
# librdkafka before 2.11.1 (kcat here is 2.0) checks its compression features against Produce
# v0 and sends every batch uncompressed when v0 is not advertised. A v0-v2 request is refused
# all the same (closed connection, as for any version not served): no client picks one, since
# each uses the highest version both sides know.
PRODUCE_API_VERSIONS_RESPONSE_MIN_VERSION = 0


@dataclass(frozen=True, slots=True)
class ApiSpec:
    key: ApiKey
    request: type[ApiMessage]
    response: type[ApiMessage]
    min_version: int
    max_version: int
    # header versions by API version, computed once (they are looked up on every request)
    request_headers: tuple[int, ...] = ()
    response_headers: tuple[int, ...] = ()

    @property
    def advertised_min_version(self) -> int:
        """The lowest version ApiVersions advertises: min_version, except for Produce."""
        return PRODUCE_API_VERSIONS_RESPONSE_MIN_VERSION if self.key == ApiKey.PRODUCE else self.min_version

    @property
    def name(self) -> str:
        """Kafka's name of the API (ApiKeys), e.g. OffsetCommit."""
        return self.request.__name__.removesuffix("Request")

    def __post_init__(self) -> None:
        versions = range(self.max_version + 1)
        object.__setattr__(self, "request_headers", tuple(self._request_header(v) for v in versions))
        object.__setattr__(self, "response_headers", tuple(self._response_header(v) for v in versions))

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


def _spec(key: ApiKey, req: type[ApiMessage], resp: type[ApiMessage], lo: int, hi: int) -> ApiSpec:
    return ApiSpec(key, req, resp, lo, hi)


# The versions kcoord serves (see DESIGN.md: what Java 3.9 and librdkafka 2.16 send).
API_TABLE: dict[int, ApiSpec] = {
    s.key: s
    for s in (
        _spec(ApiKey.PRODUCE, ProduceRequest, ProduceResponse, 3, 12),
        _spec(ApiKey.FETCH, FetchRequest, FetchResponse, 4, 17),
        _spec(ApiKey.LIST_OFFSETS, ListOffsetsRequest, ListOffsetsResponse, 0, 9),
        _spec(ApiKey.METADATA, MetadataRequest, MetadataResponse, 0, 12),
        _spec(ApiKey.OFFSET_COMMIT, OffsetCommitRequest, OffsetCommitResponse, 0, 9),
        _spec(ApiKey.OFFSET_FETCH, OffsetFetchRequest, OffsetFetchResponse, 0, 9),
        _spec(ApiKey.FIND_COORDINATOR, FindCoordinatorRequest, FindCoordinatorResponse, 0, 6),
        _spec(ApiKey.JOIN_GROUP, JoinGroupRequest, JoinGroupResponse, 0, 9),
        _spec(ApiKey.HEARTBEAT, HeartbeatRequest, HeartbeatResponse, 0, 4),
        _spec(ApiKey.LEAVE_GROUP, LeaveGroupRequest, LeaveGroupResponse, 0, 5),
        _spec(ApiKey.SYNC_GROUP, SyncGroupRequest, SyncGroupResponse, 0, 5),
        _spec(ApiKey.DESCRIBE_GROUPS, DescribeGroupsRequest, DescribeGroupsResponse, 0, 5),
        _spec(ApiKey.LIST_GROUPS, ListGroupsRequest, ListGroupsResponse, 0, 5),
        _spec(ApiKey.API_VERSIONS, ApiVersionsRequest, ApiVersionsResponse, 0, 4),
        _spec(ApiKey.CREATE_TOPICS, CreateTopicsRequest, CreateTopicsResponse, 0, 7),
        _spec(ApiKey.DELETE_TOPICS, DeleteTopicsRequest, DeleteTopicsResponse, 0, 6),
        _spec(ApiKey.DELETE_RECORDS, DeleteRecordsRequest, DeleteRecordsResponse, 0, 2),
        _spec(ApiKey.CREATE_PARTITIONS, CreatePartitionsRequest, CreatePartitionsResponse, 0, 3),
        _spec(ApiKey.INIT_PRODUCER_ID, InitProducerIdRequest, InitProducerIdResponse, 0, 5),
        _spec(ApiKey.ADD_PARTITIONS_TO_TXN, AddPartitionsToTxnRequest, AddPartitionsToTxnResponse, 0, 5),
        _spec(ApiKey.ADD_OFFSETS_TO_TXN, AddOffsetsToTxnRequest, AddOffsetsToTxnResponse, 0, 4),
        _spec(ApiKey.END_TXN, EndTxnRequest, EndTxnResponse, 0, 5),
        _spec(ApiKey.TXN_OFFSET_COMMIT, TxnOffsetCommitRequest, TxnOffsetCommitResponse, 0, 5),
        _spec(ApiKey.DESCRIBE_PRODUCERS, DescribeProducersRequest, DescribeProducersResponse, 0, 0),
        _spec(ApiKey.DESCRIBE_TRANSACTIONS, DescribeTransactionsRequest, DescribeTransactionsResponse, 0, 0),
        _spec(ApiKey.LIST_TRANSACTIONS, ListTransactionsRequest, ListTransactionsResponse, 0, 1),
        _spec(ApiKey.DELETE_GROUPS, DeleteGroupsRequest, DeleteGroupsResponse, 0, 2),
        _spec(ApiKey.OFFSET_DELETE, OffsetDeleteRequest, OffsetDeleteResponse, 0, 0),
        _spec(ApiKey.SASL_HANDSHAKE, SaslHandshakeRequest, SaslHandshakeResponse, 0, 1),
        _spec(ApiKey.SASL_AUTHENTICATE, SaslAuthenticateRequest, SaslAuthenticateResponse, 0, 2),
        _spec(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, DescribeUserScramCredentialsRequest,
              DescribeUserScramCredentialsResponse, 0, 0),
        _spec(ApiKey.ALTER_USER_SCRAM_CREDENTIALS, AlterUserScramCredentialsRequest,
              AlterUserScramCredentialsResponse, 0, 0),
        # v0 of the ACL APIs is v1 without the pattern type fields: kafka-python's classes (Kafka
        # 4's schemas, 1-3) read and write it all the same
        _spec(ApiKey.DESCRIBE_ACLS, DescribeAclsRequest, DescribeAclsResponse, 0, 3),
        _spec(ApiKey.CREATE_ACLS, CreateAclsRequest, CreateAclsResponse, 0, 3),
        _spec(ApiKey.DELETE_ACLS, DeleteAclsRequest, DeleteAclsResponse, 0, 3),
        _spec(ApiKey.DESCRIBE_CONFIGS, DescribeConfigsRequest, DescribeConfigsResponse, 0, 4),
        _spec(ApiKey.ALTER_CONFIGS, AlterConfigsRequest, AlterConfigsResponse, 0, 2),
        _spec(ApiKey.INCREMENTAL_ALTER_CONFIGS, IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse, 0, 1),
        _spec(ApiKey.DESCRIBE_LOG_DIRS, DescribeLogDirsRequest, DescribeLogDirsResponse, 0, 4),
        _spec(ApiKey.ELECT_LEADERS, ElectLeadersRequest, ElectLeadersResponse, 0, 2),
        _spec(ApiKey.ALTER_PARTITION_REASSIGNMENTS, AlterPartitionReassignmentsRequest,
              AlterPartitionReassignmentsResponse, 0, 0),
        _spec(ApiKey.LIST_PARTITION_REASSIGNMENTS, ListPartitionReassignmentsRequest,
              ListPartitionReassignmentsResponse, 0, 0),
        _spec(ApiKey.DESCRIBE_CLUSTER, DescribeClusterRequest, DescribeClusterResponse, 0, 1),
        _spec(ApiKey.DESCRIBE_TOPIC_PARTITIONS, DescribeTopicPartitionsRequest, DescribeTopicPartitionsResponse, 0, 0),
        _spec(ApiKey.CONSUMER_GROUP_HEARTBEAT, ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse, 0, 1),
        _spec(ApiKey.CONSUMER_GROUP_DESCRIBE, ConsumerGroupDescribeRequest, ConsumerGroupDescribeResponse, 0, 1),
    )
}
