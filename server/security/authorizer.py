"""The ACL authorizer, as Kafka's StandardAuthorizer decides.

Enabled by authorizer.class.name (Kafka's org.apache.kafka.metadata.authorizer.StandardAuthorizer,
the ZooKeeper-era kafka.security.authorizer.AclAuthorizer, or `kcoord`). For an action
(principal, client host, operation, resource type, resource name):

- a principal listed in super.users (`User:admin;User:ops`) may do anything;
- the ACLs that apply are the resource's LITERAL ACLs, the wildcard `*` LITERAL ACLs and every
  PREFIXED ACL whose name starts the resource's name; of those, the ones for the principal (or
  `User:*`) and the host (or `*`) whose operation is the action's, or ALL; an ALLOW for READ,
  WRITE, DELETE or ALTER also allows DESCRIBE, an ALLOW for ALTER_CONFIGS also DESCRIBE_CONFIGS;
- any DENY wins; else any ALLOW allows; else, when the resource has no ACL at all,
  allow.everyone.if.no.acl.found (false) decides; otherwise denied.

ACLs are kept durably as Kafka's AccessControlEntryRecord / RemoveAccessControlEntryRecord in
`<log.dirs>/kcoord-acls.json` (server/security/store.py). Denials are logged as Kafka's
authorizer logger does. Decisions are cached until the ACLs change, so a check on a hot path
costs a dictionary lookup.
"""
from __future__ import annotations

import logging
import uuid
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from kcoord.protocol.errors import ErrorCode
from kcoord.server.security.acl import (
    SUPPORTED_OPERATIONS,
    WILDCARD,
    WILDCARD_PRINCIPAL,
    AclFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
    StandardAcl,
    bit_field,
    validate_new_acl,
)
from kcoord.server.security.store import Record, RecordStore

audit = logging.getLogger("kcoord.authorizer")

ACLS_FILE = "kcoord-acls.json"
AUTHORIZER_CLASSES = ("org.apache.kafka.metadata.authorizer.StandardAuthorizer",
                      "kafka.security.authorizer.AclAuthorizer", "kcoord")
MAX_RECORDS_PER_USER_OP = 10000  # Kafka's limit on one CreateAcls / DeleteAcls
_CACHE_LIMIT = 200_000

_IMPLIES_DESCRIBE = frozenset({AclOperation.DESCRIBE, AclOperation.READ, AclOperation.WRITE, AclOperation.DELETE,
                               AclOperation.ALTER})
_IMPLIES_DESCRIBE_CONFIGS = frozenset({AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS})

AclState = dict[str, StandardAcl]  # id -> ACL


def _record(acl_id: str, acl: StandardAcl) -> Record:
    return {"type": "AccessControlEntryRecord", "id": acl_id, "resource_type": int(acl.resource_type),
            "resource_name": acl.resource_name, "pattern_type": int(acl.pattern_type), "principal": acl.principal,
            "host": acl.host, "operation": int(acl.operation), "permission_type": int(acl.permission)}


def replay(state: AclState, rec: Record) -> None:
    kind = rec["type"]
    if kind == "AccessControlEntryRecord":
        state[rec["id"]] = StandardAcl(ResourceType(rec["resource_type"]), rec["resource_name"],
                                       PatternType(rec["pattern_type"]), rec["principal"], rec["host"],
                                       AclOperation(rec["operation"]), AclPermissionType(rec["permission_type"]))
    elif kind == "RemoveAccessControlEntryRecord":
        state.pop(rec["id"], None)
    else:
        raise ValueError(f"unknown record type {kind!r}")


def snapshot(state: AclState) -> list[Record]:
    return [_record(i, acl) for i, acl in state.items()]


def parse_super_users(value: str) -> frozenset[str]:
    out = set()
    for v in value.split(";"):
        v = v.strip()
        if v:
            if ":" not in v:
                raise ValueError(f"super.users: expected a string in format principalType:principalName but got {v}")
            out.add(v)
    return frozenset(out)


def _result(acl: StandardAcl, principal: str, host: str, op: AclOperation) -> bool | None:
    """Kafka's StandardAuthorizerData.findResult: True (allow), False (deny) or None (no match)."""
    if acl.principal != principal and acl.principal != WILDCARD_PRINCIPAL:
        return None
    if acl.host != WILDCARD and acl.host != host:
        return None
    if acl.operation != AclOperation.ALL:
        if acl.permission == AclPermissionType.ALLOW:
            if op == AclOperation.DESCRIBE:
                if acl.operation not in _IMPLIES_DESCRIBE:
                    return None
            elif op == AclOperation.DESCRIBE_CONFIGS:
                if acl.operation not in _IMPLIES_DESCRIBE_CONFIGS:
                    return None
            elif op != acl.operation:
                return None
        elif op != acl.operation:
            return None
    return acl.permission == AclPermissionType.ALLOW


class Authorizer:
    def __init__(self, log_dir: Path, super_users: str = "", allow_everyone_if_no_acl_found: bool = False) -> None:
        self.store: RecordStore[AclState] = RecordStore(log_dir / ACLS_FILE, {}, replay, snapshot)
        self.super_users = parse_super_users(super_users)
        self.allow_everyone = allow_everyone_if_no_acl_found
        # resource type -> (LITERAL name -> ACLs, PREFIXED name -> ACLs)
        self._index: dict[ResourceType, tuple[dict[str, list[StandardAcl]], dict[str, list[StandardAcl]]]] = {}
        self._cache: dict[tuple[str, str, AclOperation, ResourceType, str], tuple[bool, str]] = {}
        # composite decisions of the hot direct routes (the `as_is` checks routes.py names,
        # e.g. a commit's group and topic together), dropped with the cache when the ACLs change
        self.memo: dict[tuple[str, ...], bool] = {}

    # ---- state ----

    def load(self) -> int:
        n = self.store.load()
        self._reindex(self.store.state)
        return n

    async def commit(self, records: list[Record]) -> None:
        """Durable first (OSError: nothing changed), then applied; cached decisions are dropped."""
        await self.store.commit(records)
        self._reindex(self.store.state)

    @property
    def acls(self) -> AclState:
        return self.store.state

    def _reindex(self, state: AclState) -> None:
        index: dict[ResourceType, tuple[dict[str, list[StandardAcl]], dict[str, list[StandardAcl]]]] = {}
        for acl in state.values():
            literal, prefixed = index.setdefault(acl.resource_type, ({}, {}))
            target = prefixed if acl.pattern_type == PatternType.PREFIXED else literal
            target.setdefault(acl.resource_name, []).append(acl)
        self._index = index
        self._cache = {}
        self.memo = {}

    # ---- decisions ----

    def authorize(self, principal: str, host: str, op: AclOperation, rtype: ResourceType, name: str,
                  api: str = "", log_denied: bool = True) -> bool:
        key = (principal, host, op, rtype, name)
        hit = self._cache.get(key)
        if hit is None:
            hit = self._decide(principal, host, op, rtype, name)
            if len(self._cache) >= _CACHE_LIMIT:
                self._cache = {}
            self._cache[key] = hit
        if hit[0]:
            return True
        allowed, rule = hit
        if log_denied:
            # Kafka's kafka.authorizer.logger line for a denied action
            audit.info("Principal = %s is Denied operation = %s from host = %s on resource = %s:LITERAL:%s "
                       "for request = %s with resourceRefCount = 1 based on rule %s", principal, op.name, host,
                       _type_name(rtype), name, api or "?", rule)
        return allowed

    def remember(self, key: tuple[str, ...], allowed: bool) -> None:
        """A composite decision for `memo` (bounded like the decision cache)."""
        if len(self.memo) >= _CACHE_LIMIT:
            self.memo = {}
        self.memo[key] = allowed

    def _decide(self, principal: str, host: str, op: AclOperation, rtype: ResourceType, name: str) -> tuple[bool, str]:
        if principal in self.super_users:
            return True, "SuperUser"
        sections = self._index.get(rtype)
        if sections is None:
            return self.allow_everyone, "DefaultAllow" if self.allow_everyone else "DefaultDeny"
        literal, prefixed = sections
        found_any = False
        allow: StandardAcl | None = None
        for candidates in self._applicable(literal, prefixed, name):
            for acl in candidates:
                found_any = True
                result = _result(acl, principal, host, op)
                if result is False:
                    return False, f"MatchingAcl(acl={acl.describe()})"
                if result is True:
                    allow = acl
        if allow is not None:
            return True, f"MatchingAcl(acl={allow.describe()})"
        if not found_any:
            return self.allow_everyone, "DefaultAllow" if self.allow_everyone else "DefaultDeny"
        return False, "DefaultDeny"

    @staticmethod
    def _applicable(literal: dict[str, list[StandardAcl]], prefixed: dict[str, list[StandardAcl]],
                    name: str) -> Iterable[list[StandardAcl]]:
        exact = literal.get(name)
        if exact:
            yield exact
        if prefixed:
            for i in range(1, len(name) + 1):
                hits = prefixed.get(name[:i])
                if hits:
                    yield hits
        if name != WILDCARD:
            wild = literal.get(WILDCARD)
            if wild:
                yield wild

    def authorized_operations(self, principal: str, host: str, rtype: ResourceType, name: str) -> int:
        """The authorized_operations bit field of Kafka's describe answers (no denial logged)."""
        return bit_field({op for op in SUPPORTED_OPERATIONS[rtype]
                          if self.authorize(principal, host, op, rtype, name, log_denied=False)})

    def authorize_by_resource_type(self, principal: str, host: str, op: AclOperation, rtype: ResourceType) -> bool:
        """Kafka's Authorizer.authorizeByResourceType: may the principal do `op` on at least one
        resource of the type (InitProducerId's idempotent-write check)."""
        if self.authorize(principal, host, op, rtype, "hardcode", log_denied=False):
            return True
        deny: dict[PatternType, set[str]] = {PatternType.LITERAL: set(), PatternType.PREFIXED: set()}
        allow: dict[PatternType, set[str]] = {PatternType.LITERAL: set(), PatternType.PREFIXED: set()}
        for acl in self.store.state.values():
            if acl.resource_type != rtype:
                continue
            if acl.host not in (host, WILDCARD) or acl.principal not in (principal, WILDCARD_PRINCIPAL):
                continue
            if acl.operation not in (op, AclOperation.ALL):
                continue
            if acl.permission == AclPermissionType.DENY:
                if acl.pattern_type == PatternType.LITERAL and acl.resource_name == WILDCARD:
                    return False
                deny[acl.pattern_type].add(acl.resource_name)
            elif acl.pattern_type == PatternType.LITERAL and acl.resource_name == WILDCARD:
                return True
            else:
                allow[acl.pattern_type].add(acl.resource_name)
        for pattern, names in allow.items():
            for name in names:
                if pattern == PatternType.LITERAL and name in deny[PatternType.LITERAL]:
                    continue
                if not any(name[:i] in deny[PatternType.PREFIXED] for i in range(1, len(name) + 1)):
                    return True
        return False

    # ---- CreateAcls / DescribeAcls / DeleteAcls ----

    def create(self, acls: list[StandardAcl | str]) -> tuple[list[Record], list[tuple[ErrorCode, str | None]]]:
        """Kafka's AclControlManager.createAcls: an entry that is a str is a refusal decided
        before (its message, INVALID_REQUEST); an ACL that already exists succeeds without a record."""
        existing = set(self.store.state.values())
        records: list[Record] = []
        results: list[tuple[ErrorCode, str | None]] = []
        for acl in acls:
            problem = acl if isinstance(acl, str) else validate_new_acl(acl)
            if problem is not None:
                results.append((ErrorCode.INVALID_REQUEST, problem))
                continue
            assert isinstance(acl, StandardAcl)
            if acl not in existing:
                existing.add(acl)
                records.append(_record(str(uuid.uuid4()), acl))
            results.append((ErrorCode.NONE, None))
        return records, results

    def describe(self, flt: AclFilter) -> list[StandardAcl]:
        return [acl for acl in self.store.state.values() if flt.matches(acl)]

    def delete(self, filters: list[AclFilter]) -> tuple[list[Record], list[tuple[ErrorCode, str | None, list[StandardAcl]]]]:
        """Kafka's AclControlManager.deleteAcls: per filter, the ACLs it removes."""
        records: dict[str, Record] = {}
        results: list[tuple[ErrorCode, str | None, list[StandardAcl]]] = []
        for flt in filters:
            if flt.pattern_type == PatternType.UNKNOWN or flt.resource_type == ResourceType.UNKNOWN:
                results.append((ErrorCode.INVALID_REQUEST, "Unknown patternFilter.", []))
                continue
            if flt.operation == AclOperation.UNKNOWN or flt.permission == AclPermissionType.UNKNOWN:
                results.append((ErrorCode.INVALID_REQUEST, "Unknown entryFilter.", []))
                continue
            matched = [(i, acl) for i, acl in self.store.state.items() if flt.matches(acl)]
            if len(records) + len(matched) > MAX_RECORDS_PER_USER_OP:
                results.append((ErrorCode.UNKNOWN_SERVER_ERROR, f"Cannot remove more than {MAX_RECORDS_PER_USER_OP} "
                                "acls in a single delete operation.", []))
                continue
            for i, _ in matched:
                records[i] = {"type": "RemoveAccessControlEntryRecord", "id": i}
            results.append((ErrorCode.NONE, None, [acl for _, acl in matched]))
        return list(records.values()), results


def _type_name(rtype: ResourceType) -> str:
    """SecurityUtils.resourceTypeName: Topic, Group, Cluster, TransactionalId, DelegationToken, User."""
    return {ResourceType.TRANSACTIONAL_ID: "TransactionalId", ResourceType.DELEGATION_TOKEN: "DelegationToken"}.get(
        rtype, rtype.name.capitalize())


def make_authorizer(config: Any, log_dir: Path) -> Authorizer | None:
    """The authorizer authorizer.class.name asks for, or None (no authorizer: every action is
    allowed and the ACL APIs answer SECURITY_DISABLED, as in Kafka)."""
    name = config["authorizer.class.name"]
    if not name:
        return None
    if name not in AUTHORIZER_CLASSES:
        raise ValueError(f"authorizer.class.name={name} is not available in kcoord; use "
                         f"{AUTHORIZER_CLASSES[0]} (Kafka's StandardAuthorizer), which kcoord implements")
    return Authorizer(log_dir, config["super.users"], config["allow.everyone.if.no.acl.found"])
