"""ACLs as Kafka models them: resource types, operations, permission and pattern types (with
Kafka's wire codes), a binding (StandardAcl), and the filters of DescribeAcls / DeleteAcls
(Kafka's ResourcePatternFilter and AccessControlEntryFilter)."""
from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum

WILDCARD = "*"
WILDCARD_PRINCIPAL = "User:*"
CLUSTER_NAME = "kafka-cluster"


class ResourceType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class AclOperation(IntEnum):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14


class AclPermissionType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


def _code(enum: type[IntEnum], value: int) -> IntEnum:
    try:
        return enum(value)
    except ValueError:
        return enum(0)  # UNKNOWN, as Kafka's fromCode


# Operations a resource type has (AclEntry.supportedOperations): authorized_operations fields.
SUPPORTED_OPERATIONS: dict[ResourceType, tuple[AclOperation, ...]] = {
    ResourceType.TOPIC: (AclOperation.READ, AclOperation.WRITE, AclOperation.CREATE, AclOperation.DESCRIBE,
                         AclOperation.DELETE, AclOperation.ALTER, AclOperation.DESCRIBE_CONFIGS,
                         AclOperation.ALTER_CONFIGS),
    ResourceType.GROUP: (AclOperation.READ, AclOperation.DESCRIBE, AclOperation.DELETE,
                         AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS),
    ResourceType.CLUSTER: (AclOperation.CREATE, AclOperation.CLUSTER_ACTION, AclOperation.DESCRIBE_CONFIGS,
                           AclOperation.ALTER_CONFIGS, AclOperation.IDEMPOTENT_WRITE, AclOperation.ALTER,
                           AclOperation.DESCRIBE),
    ResourceType.TRANSACTIONAL_ID: (AclOperation.DESCRIBE, AclOperation.WRITE),
    ResourceType.DELEGATION_TOKEN: (AclOperation.DESCRIBE,),
    ResourceType.USER: (AclOperation.CREATE_TOKENS, AclOperation.DESCRIBE_TOKENS),
}


def bit_field(ops: set[AclOperation] | tuple[AclOperation, ...]) -> int:
    """Kafka's Utils.to32BitField: bit n set for operation code n."""
    out = 0
    for op in ops:
        out |= 1 << int(op)
    return out


@dataclass(frozen=True, slots=True)
class StandardAcl:
    """One ACL (Kafka's StandardAcl / AccessControlEntryRecord without its id)."""

    resource_type: ResourceType
    resource_name: str
    pattern_type: PatternType
    principal: str
    host: str
    operation: AclOperation
    permission: AclPermissionType

    def describe(self) -> str:
        return (f"(principal={self.principal}, host={self.host}, op={self.operation.name}, "
                f"permissionType={self.permission.name}) on {self.resource_type.name}:"
                f"{self.pattern_type.name}:{self.resource_name}")


def validate_new_acl(acl: StandardAcl) -> str | None:
    """Kafka's AclControlManager.validateNewAcl (and a principal that parses): the message of
    the INVALID_REQUEST refusal, or None."""
    if acl.resource_type in (ResourceType.UNKNOWN, ResourceType.ANY):
        return f"Invalid resourceType {acl.resource_type.name}"
    if acl.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
        return f"Invalid patternType {acl.pattern_type.name}"
    if acl.operation in (AclOperation.UNKNOWN, AclOperation.ANY):
        return f"Invalid operation {acl.operation.name}"
    if acl.permission not in (AclPermissionType.DENY, AclPermissionType.ALLOW):
        return f"Invalid permissionType {acl.permission.name}"
    if not acl.resource_name:
        return "Resource name should not be empty"
    if acl.resource_type == ResourceType.CLUSTER and acl.resource_name != CLUSTER_NAME:
        return f"The only valid name for the CLUSTER resource is {CLUSTER_NAME}"
    if ":" not in acl.principal:
        return (f"Could not parse principal from `{acl.principal}` (no colon is present separating the "
                "principal type from the principal name)")
    return None


@dataclass(frozen=True, slots=True)
class AclFilter:
    """Kafka's AclBindingFilter: None / ANY fields match anything; MATCH matches the patterns
    that apply to a name (literal, the wildcard, prefixes)."""

    resource_type: ResourceType
    resource_name: str | None
    pattern_type: PatternType
    principal: str | None
    host: str | None
    operation: AclOperation
    permission: AclPermissionType

    @classmethod
    def of(cls, req: object, pattern_type_default: PatternType = PatternType.LITERAL) -> AclFilter:
        """From a DescribeAcls request or a DeleteAcls filter (v0 has no pattern type: LITERAL)."""
        return cls(
            _code(ResourceType, req.resource_type_filter),  # type: ignore[attr-defined]
            req.resource_name_filter,  # type: ignore[attr-defined]
            _code(PatternType, getattr(req, "pattern_type_filter", int(pattern_type_default))),
            req.principal_filter,  # type: ignore[attr-defined]
            req.host_filter,  # type: ignore[attr-defined]
            _code(AclOperation, req.operation),  # type: ignore[attr-defined]
            _code(AclPermissionType, req.permission_type),  # type: ignore[attr-defined]
        )

    def unknown(self) -> bool:
        return (self.pattern_type == PatternType.UNKNOWN or self.resource_type == ResourceType.UNKNOWN
                or self.operation == AclOperation.UNKNOWN or self.permission == AclPermissionType.UNKNOWN)

    def matches(self, acl: StandardAcl) -> bool:
        if self.resource_type != ResourceType.ANY and self.resource_type != acl.resource_type:
            return False
        pt = self.pattern_type
        if pt not in (PatternType.ANY, PatternType.MATCH) and pt != acl.pattern_type:
            return False
        name = self.resource_name
        if name is not None:
            if pt in (PatternType.ANY, acl.pattern_type):
                if name != acl.resource_name:
                    return False
            elif acl.pattern_type == PatternType.LITERAL:
                if name != acl.resource_name and acl.resource_name != WILDCARD:
                    return False
            elif not name.startswith(acl.resource_name):  # PREFIXED
                return False
        if self.principal is not None and self.principal != acl.principal:
            return False
        if self.host is not None and self.host != acl.host:
            return False
        if self.operation != AclOperation.ANY and self.operation != acl.operation:
            return False
        return self.permission == AclPermissionType.ANY or self.permission == acl.permission


def acl_from_creation(c: object) -> StandardAcl:
    return StandardAcl(
        _code(ResourceType, c.resource_type),  # type: ignore[attr-defined]
        c.resource_name,  # type: ignore[attr-defined]
        _code(PatternType, getattr(c, "resource_pattern_type", int(PatternType.LITERAL))),
        c.principal,  # type: ignore[attr-defined]
        c.host,  # type: ignore[attr-defined]
        _code(AclOperation, c.operation),  # type: ignore[attr-defined]
        _code(AclPermissionType, c.permission_type),  # type: ignore[attr-defined]
    )
