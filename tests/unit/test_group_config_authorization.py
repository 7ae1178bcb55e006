"""The GROUP config resource's authorization (ConfigHelper / ConfigAdminManager): DESCRIBE_CONFIGS
on the group for DescribeConfigs, ALTER_CONFIGS on the group for AlterConfigs and
IncrementalAlterConfigs, GROUP_AUTHORIZATION_FAILED for the resource refused, the others passed
on. Run against a real Authorizer with the policies the dispatcher uses."""
from __future__ import annotations

import asyncio

from kafka.protocol.admin.configs import DescribeConfigsRequest, IncrementalAlterConfigsRequest

from kcoord.protocol.api import API_TABLE, ApiKey
from kcoord.protocol.errors import ErrorCode as E
from kcoord.server.handlers.routes import POLICIES
from kcoord.server.security.acl import AclOperation, AclPermissionType, PatternType, ResourceType, StandardAcl
from kcoord.server.security.authorizer import Authorizer
from kcoord.server.security.guard import PASS, Access

GROUP = 32


def _authorizer(tmp_path) -> Authorizer:
    a = Authorizer(tmp_path, "", False)
    acls = [("User:ops", "g-ops", AclOperation.ALTER_CONFIGS), ("User:viewer", "g-ops", AclOperation.DESCRIBE_CONFIGS)]
    records, results = a.create([StandardAcl(ResourceType.GROUP, name, PatternType.LITERAL, p, "*", op,
                                             AclPermissionType.ALLOW) for p, name, op in acls])
    assert all(code == 0 for code, _ in results)
    asyncio.run(a.commit(records))
    return a


def _decide(a: Authorizer, principal: str, api: ApiKey, req, version: int):
    return POLICIES[api](Access(a, principal, "10.0.0.1", API_TABLE[api].name, None), req, version)  # type: ignore[arg-type]


def _describe(*groups: str):
    R = DescribeConfigsRequest
    return R(version=4, include_synonyms=False, include_documentation=False, resources=[
        R.DescribeConfigsResource(resource_type=GROUP, resource_name=g, configuration_keys=None) for g in groups])


def _alter(*groups: str):
    R = IncrementalAlterConfigsRequest.AlterConfigsResource
    return IncrementalAlterConfigsRequest(version=1, validate_only=False, resources=[
        R(resource_type=GROUP, resource_name=g, configs=[
            R.AlterableConfig(name="consumer.session.timeout.ms", config_operation=0, value="50000")])
        for g in groups])


def test_describe_needs_describe_configs_on_the_group(tmp_path):
    a = _authorizer(tmp_path)
    assert _decide(a, "User:viewer", ApiKey.DESCRIBE_CONFIGS, _describe("g-ops"), 4) is PASS
    assert _decide(a, "User:ops", ApiKey.DESCRIBE_CONFIGS, _describe("g-ops"), 4) is PASS  # ALTER implies DESCRIBE
    refused = _decide(a, "User:viewer", ApiKey.DESCRIBE_CONFIGS, _describe("g-other"), 4).refusal
    assert [(r.resource_name, r.error_code) for r in refused.results] == [("g-other", E.GROUP_AUTHORIZATION_FAILED)]
    mixed = _decide(a, "User:viewer", ApiKey.DESCRIBE_CONFIGS, _describe("g-ops", "g-other"), 4)
    assert [r.resource_name for r in mixed.request.resources] == ["g-ops"]


def test_alter_needs_alter_configs_on_the_group(tmp_path):
    a = _authorizer(tmp_path)
    assert _decide(a, "User:ops", ApiKey.INCREMENTAL_ALTER_CONFIGS, _alter("g-ops"), 1) is PASS
    for principal, group in (("User:viewer", "g-ops"), ("User:ops", "g-other"), ("User:nobody", "g-ops")):
        refused = _decide(a, principal, ApiKey.INCREMENTAL_ALTER_CONFIGS, _alter(group), 1).refusal
        assert [(r.resource_name, r.error_code) for r in refused.responses] == [(group, E.GROUP_AUTHORIZATION_FAILED)]
