"""IncrementalAlterConfigs v0-v1: SET, DELETE, APPEND and SUBTRACT (the last two for LIST
configs) on a topic's or the broker's dynamic configs, and log levels of BROKER_LOGGER. Each
resource is checked in full, then applied durably (or not at all: validate_only, an error)."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kafka.protocol.admin.configs import IncrementalAlterConfigsResponse

from kcoord.protocol.errors import ErrorCode, KafkaError, error_code_of
from kcoord.server import broker_logger
from kcoord.server.config_admin import DUPLICATE_RESOURCE, commit, duplicates, plan_incremental
from kcoord.server.context import RequestContext

if TYPE_CHECKING:
    from kcoord.server.config_admin import ConfigState

Out = IncrementalAlterConfigsResponse.AlterConfigsResourceResponse


class IncrementalAlterConfigsApi:
    """The handler of incremental_alter_configs.py, built by the composition root (server/node.py) with the config state (server/config_admin.py)."""

    def __init__(self, state: ConfigState) -> None:
        self.state = state

    def handle_incremental_alter_configs(self, ctx: RequestContext, req: Any, version: int) -> Any:
        dup = duplicates(req.resources)
        out = []
        for i, r in enumerate(req.resources):
            code, message = ErrorCode.NONE, None
            try:
                if i in dup:
                    raise KafkaError(ErrorCode.INVALID_REQUEST, DUPLICATE_RESOURCE)
                plan = plan_incremental(self.state, r)
                if not req.validate_only:
                    if plan is None:  # BROKER_LOGGER: levels change in memory only, as in Kafka
                        broker_logger.apply(r.configs)
                    else:
                        commit(self.state, plan)
            except (KafkaError, OSError) as e:
                code, message = error_code_of(e), getattr(e, "message", None) or str(e)
            out.append(Out(error_code=code, error_message=message, resource_type=r.resource_type,
                           resource_name=r.resource_name))
        return IncrementalAlterConfigsResponse(version=version, throttle_time_ms=0, responses=out)
