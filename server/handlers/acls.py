"""DescribeAcls, CreateAcls and DeleteAcls v0-v3 (what kafka-acls.sh and the Admin clients use).

Without an authorizer (authorizer.class.name unset) they answer SECURITY_DISABLED, as Kafka
does. With one, changes are made durable (kcoord-acls.json) before they are answered; who may
call them (DESCRIBE / ALTER on the cluster) is in server/security/policies/cluster.py. Kafka refuses
(closes the connection on) a v0 request with a pattern type other than LITERAL (DescribeAcls
and DeleteAcls v0 read ANY as LITERAL), and any request naming an UNKNOWN type, operation or
permission.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kafka.protocol.admin.acl import CreateAclsResponse, DeleteAclsResponse, DescribeAclsResponse

from kcoord.protocol.errors import ErrorCode, error_code_of
from kcoord.server.context import RequestContext
from kcoord.server.deferred import of_coroutine
from kcoord.server.security.acl import (
    AclFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
    acl_from_creation,
)

if TYPE_CHECKING:
    from kcoord.server.security.state import SecurityState

Described = DescribeAclsResponse.DescribeAclsResource
Matching = DeleteAclsResponse.DeleteAclsFilterResult.DeleteAclsMatchingAcl


def _refuse(reason: str) -> None:
    from kcoord.server.dispatch import CloseConnection  # dispatch imports the handlers

    raise CloseConnection(reason)






async def _create(authorizer: Any, acls: list[Any], version: int) -> Any:
    async with authorizer.store.lock:
        records, results = authorizer.create(list(acls))
        try:
            await authorizer.commit(records)
        except OSError as e:  # nothing was created
            results = [(error_code_of(e), str(e)) if code == ErrorCode.NONE else (code, msg) for code, msg in results]
    return CreateAclsResponse(version=version, throttle_time_ms=0, results=[
        CreateAclsResponse.AclCreationResult(error_code=code, error_message=msg) for code, msg in results])




async def _delete(authorizer: Any, filters: list[AclFilter], version: int) -> Any:
    async with authorizer.store.lock:
        records, results = authorizer.delete(filters)
        try:
            await authorizer.commit(records)
        except OSError as e:  # nothing was deleted
            results = [(error_code_of(e), str(e), []) for _ in results]
    return DeleteAclsResponse(version=version, throttle_time_ms=0, filter_results=[
        DeleteAclsResponse.DeleteAclsFilterResult(error_code=code, error_message=msg, matching_acls=[
            Matching(error_code=0, error_message=None, resource_type=int(a.resource_type),
                     resource_name=a.resource_name, pattern_type=int(a.pattern_type), principal=a.principal,
                     host=a.host, operation=int(a.operation), permission_type=int(a.permission))
            for a in matched]) for code, msg, matched in results])


class AclApis:
    """The handlers of acls.py, built by the composition root (server/node.py) with the parts they use."""

    def __init__(self, security: SecurityState) -> None:
        self.security = security

    def handle_describe_acls(self, ctx: RequestContext, req: Any, version: int) -> Any:
        flt = AclFilter.of(req)  # v0 has no pattern type: LITERAL
        if flt.unknown():
            _refuse("DescribeAclsRequest contains UNKNOWN elements")
        authorizer = self.security.authorizer
        if authorizer is None:
            return DescribeAclsResponse(version=version, throttle_time_ms=0, error_code=ErrorCode.SECURITY_DISABLED,
                                        error_message="No Authorizer is configured on the broker", resources=[])
        grouped: dict[tuple[int, str, int], list[Any]] = {}
        for acl in authorizer.describe(flt):
            grouped.setdefault((int(acl.resource_type), acl.resource_name, int(acl.pattern_type)), []).append(
                Described.AclDescription(principal=acl.principal, host=acl.host, operation=int(acl.operation),
                                         permission_type=int(acl.permission)))
        resources = [Described(resource_type=rt, resource_name=name, pattern_type=pt,
                               acls=sorted(acls, key=lambda d: (d.principal, d.host, d.operation, d.permission_type)))
                     for (rt, name, pt), acls in sorted(grouped.items())
                     if version > 0 or pt == PatternType.LITERAL]
        return DescribeAclsResponse(version=version, throttle_time_ms=0, error_code=0, error_message=None,
                                    resources=resources)

    def handle_create_acls(self, ctx: RequestContext, req: Any, version: int) -> Any:
        acls = [acl_from_creation(c) for c in req.creations]
        if version == 0 and any(a.pattern_type != PatternType.LITERAL for a in acls):
            _refuse("CreateAcls version 0 only supports literal resource pattern types")
        if any(a.pattern_type == PatternType.UNKNOWN or a.resource_type == ResourceType.UNKNOWN
               or a.operation == AclOperation.UNKNOWN or a.permission == AclPermissionType.UNKNOWN for a in acls):
            _refuse("CreatableAcls contain unknown elements")
        authorizer = self.security.authorizer
        if authorizer is None:
            return CreateAclsResponse(version=version, throttle_time_ms=0, results=[
                CreateAclsResponse.AclCreationResult(error_code=ErrorCode.SECURITY_DISABLED,
                                                     error_message="No Authorizer is configured.") for _ in acls])
        return of_coroutine(_create(authorizer, acls, version), "CreateAcls")

    def handle_delete_acls(self, ctx: RequestContext, req: Any, version: int) -> Any:
        filters = []
        for f in req.filters:
            flt = AclFilter.of(f)
            if version == 0 and flt.pattern_type == PatternType.ANY:
                flt = AclFilter(flt.resource_type, flt.resource_name, PatternType.LITERAL, flt.principal, flt.host,
                                flt.operation, flt.permission)
            elif version == 0 and flt.pattern_type != PatternType.LITERAL:
                _refuse(f"Version 0 does not support pattern type {flt.pattern_type.name} (only LITERAL and ANY are "
                        "supported)")
            if flt.unknown():
                _refuse("Filters contain UNKNOWN elements")
            filters.append(flt)
        authorizer = self.security.authorizer
        if authorizer is None:
            return DeleteAclsResponse(version=version, throttle_time_ms=0, filter_results=[
                DeleteAclsResponse.DeleteAclsFilterResult(error_code=ErrorCode.SECURITY_DISABLED,
                                                          error_message="No Authorizer is configured.", matching_acls=[])
                for _ in filters])
        return of_coroutine(_delete(authorizer, filters, version), "DeleteAcls")
