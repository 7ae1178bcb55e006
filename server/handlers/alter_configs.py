"""AlterConfigs v0-v2 (the legacy, whole-map form): a topic's or the broker's dynamic configs
become exactly those given (what is not named is removed). Checked in full before anything is
written; validate_only stops there; applied durably before the answer."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kafka.protocol.admin.configs import AlterConfigsResponse

from kcoord.protocol.errors import ErrorCode, KafkaError, error_code_of
from kcoord.server.config_admin import DUPLICATE_RESOURCE, commit, duplicates, plan_legacy
from kcoord.server.context import RequestContext

if TYPE_CHECKING:
    from kcoord.server.config_admin import ConfigState

Out = AlterConfigsResponse.AlterConfigsResourceResponse


class AlterConfigsApi:
    """The handler of alter_configs.py, built by the composition root (server/node.py) with the config state (server/config_admin.py)."""

    def __init__(self, state: ConfigState) -> None:
        self.state = state

    def handle_alter_configs(self, ctx: RequestContext, req: Any, version: int) -> Any:
        dup = duplicates(req.resources)
        out = []
        for i, r in enumerate(req.resources):
            code, message = ErrorCode.NONE, None
            try:
                if i in dup:
                    raise KafkaError(ErrorCode.INVALID_REQUEST, DUPLICATE_RESOURCE)
                plan = plan_legacy(self.state, r)
                if not req.validate_only:
                    commit(self.state, plan)
            except (KafkaError, OSError) as e:
                code, message = error_code_of(e), getattr(e, "message", None) or str(e)
            out.append(Out(error_code=code, error_message=message, resource_type=r.resource_type,
                           resource_name=r.resource_name))
        return AlterConfigsResponse(version=version, throttle_time_ms=0, responses=out)
