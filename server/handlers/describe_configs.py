"""DescribeConfigs v0-v4: a topic's configs (its own and the broker defaults behind them), the
broker's (this node id; "" for the cluster-wide dynamic defaults) and BROKER_LOGGER levels, with
sources, synonyms (v1+, when asked), types and documentation (v3+, when asked)."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kafka.protocol.admin.configs import DescribeConfigsResponse

from kcoord.protocol.errors import ErrorCode, KafkaError
from kcoord.server.config_admin import describe
from kcoord.server.config_catalogue import ConfigSource
from kcoord.server.context import RequestContext

if TYPE_CHECKING:
    from kcoord.server.config_admin import ConfigState

Result = DescribeConfigsResponse.DescribeConfigsResult
ConfigOut = Result.DescribeConfigsResourceResult
SynonymOut = ConfigOut.DescribeConfigsSynonym


class DescribeConfigsApi:
    """The handler of describe_configs.py, built by the composition root (server/node.py) with the config state (server/config_admin.py)."""

    def __init__(self, state: ConfigState) -> None:
        self.state = state

    def handle_describe_configs(self, ctx: RequestContext, req: Any, version: int) -> Any:
        synonyms = version >= 1 and bool(req.include_synonyms)
        docs = version >= 3 and bool(req.include_documentation)
        results = []
        for r in req.resources:
            try:
                entries = describe(self.state, r.resource_type, r.resource_name, r.configuration_keys, synonyms, docs)
            except KafkaError as e:
                results.append(Result(error_code=e.code, error_message=e.message, resource_type=r.resource_type,
                                      resource_name=r.resource_name, configs=[]))
                continue
            configs = [
                ConfigOut(name=e.name, value=e.value, read_only=e.read_only, config_source=int(e.source),
                          # v0 has no source: "default" is what the source says (Kafka leaves it false)
                          is_default=e.source == ConfigSource.DEFAULT_CONFIG, is_sensitive=e.sensitive,
                          synonyms=[SynonymOut(name=s.name, value=s.value, source=int(s.source)) for s in e.synonyms],
                          config_type=int(e.type), documentation=e.doc)
                for e in entries
            ]
            results.append(Result(error_code=ErrorCode.NONE, error_message=None, resource_type=r.resource_type,
                                  resource_name=r.resource_name, configs=configs))
        return DescribeConfigsResponse(version=version, throttle_time_ms=0, results=results)
