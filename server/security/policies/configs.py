"""Who may describe and alter configs: DESCRIBE_CONFIGS / ALTER_CONFIGS on each resource (the
topic; the group for a GROUP config resource; the cluster for a broker or a broker logger)."""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kcoord.protocol.errors import ErrorCode
from kcoord.server.security.acl import CLUSTER_NAME, AclOperation
from kcoord.server.security.guard import (
    CLUSTER,
    GROUP,
    PASS,
    TOPIC,
    Access,
    Guarded,
    Policy,
    clone,
)

_CONFIG_RESOURCES = {2: (TOPIC, ErrorCode.TOPIC_AUTHORIZATION_FAILED),
                     4: (CLUSTER, ErrorCode.CLUSTER_AUTHORIZATION_FAILED),
                     8: (CLUSTER, ErrorCode.CLUSTER_AUTHORIZATION_FAILED),
                     32: (GROUP, ErrorCode.GROUP_AUTHORIZATION_FAILED)}


def _configs(op: AclOperation, result_field: str, result_class: Callable[[], Any]) -> Policy:
    """DescribeConfigs / AlterConfigs / IncrementalAlterConfigs: DESCRIBE_CONFIGS or ALTER_CONFIGS
    on each resource (the cluster for a broker or broker logger)."""
    def policy(a: Access, req: Any, version: int) -> Guarded:
        response_cls, entry_cls = result_class()

        def permitted(r: Any) -> ErrorCode | None:
            rtype, error = _CONFIG_RESOURCES.get(r.resource_type, (None, None))
            if rtype is None:
                return None  # an unknown type: the handler answers it
            name = CLUSTER_NAME if rtype == CLUSTER else r.resource_name
            return None if a.allowed(op, rtype, name) else error
        codes = [permitted(r) for r in req.resources]
        if not any(codes):
            return PASS
        errors = []
        for r, code in zip(req.resources, codes, strict=True):
            if code is not None:
                entry = entry_cls(error_code=int(code), error_message=None, resource_type=r.resource_type,
                                  resource_name=r.resource_name)
                if result_field == "results":
                    entry.configs = []
                errors.append(entry)
        kept = [r for r, code in zip(req.resources, codes, strict=True) if code is None]

        def merge(resp: Any) -> Any:
            setattr(resp, result_field, list(getattr(resp, result_field)) + errors)
            return resp

        if not kept:
            return Guarded(refusal=response_cls(version=version, throttle_time_ms=0, **{result_field: errors}))
        return Guarded(request=clone(req, resources=kept), after=merge)
    return policy


def _describe_configs_classes() -> tuple[Any, Any]:
    from kafka.protocol.admin.configs import DescribeConfigsResponse

    return DescribeConfigsResponse, DescribeConfigsResponse.DescribeConfigsResult


def _alter_configs_classes() -> tuple[Any, Any]:
    from kafka.protocol.admin.configs import AlterConfigsResponse

    return AlterConfigsResponse, AlterConfigsResponse.AlterConfigsResourceResponse


def _incremental_alter_configs_classes() -> tuple[Any, Any]:
    from kafka.protocol.admin.configs import IncrementalAlterConfigsResponse

    return IncrementalAlterConfigsResponse, IncrementalAlterConfigsResponse.AlterConfigsResourceResponse


describe_configs = _configs(AclOperation.DESCRIBE_CONFIGS, "results", _describe_configs_classes)
alter_configs = _configs(AclOperation.ALTER_CONFIGS, "responses", _alter_configs_classes)
incremental_alter_configs = _configs(AclOperation.ALTER_CONFIGS, "responses", _incremental_alter_configs_classes)
