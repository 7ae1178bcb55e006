"""IncrementalAlterConfigs v0-v1: SET, DELETE, APPEND and SUBTRACT (the last two for LIST
configs) on a topic's or the broker's dynamic configs, and log levels of BROKER_LOGGER. Each
resource is checked in full, then applied durably (or not at all: validate_only, an error)."""
from __future__ import annotations

from typing import Any

from kafka.protocol.admin.configs import IncrementalAlterConfigsResponse

from kcoord.server import broker_logger
from kcoord.server.config_admin import (
    Outcome,
    cluster_change,
    commit,
    each_resource,
    each_resource_awaited,
    plan_incremental,
)
from kcoord.server.context import RequestContext
from kcoord.server.deferred import of_coroutine
from kcoord.server.handlers.alter_configs import ConfigAlterations, publish, response


class IncrementalAlterConfigsApi(ConfigAlterations):
    """The handler of incremental_alter_configs.py."""

    def handle_incremental_alter_configs(self, ctx: RequestContext, req: Any, version: int) -> Any:
        publisher = self._publisher()
        if publisher is not None and not req.validate_only:
            return of_coroutine(self._published(req, version, publisher), "IncrementalAlterConfigs")

        def apply(r: Any) -> None:
            plan = plan_incremental(self.state, r)
            if not req.validate_only:
                if plan is None:  # BROKER_LOGGER: levels change in memory only, as in Kafka
                    broker_logger.apply(r.configs)
                else:
                    commit(self.state, plan)
        return _response(req, version, each_resource(req.resources, apply))

    async def _published(self, req: Any, version: int, publisher: Any) -> Any:
        """On a cluster node: topic and broker changes written to ZooKeeper, every node applies
        them (server/cluster/config_changes.py); group configs and log levels stay here."""
        async def apply(r: Any) -> None:
            plan = plan_incremental(self.state, r)
            change = None if plan is None else cluster_change(plan)
            if plan is None:
                broker_logger.apply(r.configs)
            elif change is None:
                commit(self.state, plan)
            else:
                await publish(publisher, change, plan.configs)
        return _response(req, version, await each_resource_awaited(req.resources, apply))


def _response(req: Any, version: int, outcomes: list[Outcome]) -> Any:
    return response(IncrementalAlterConfigsResponse, req, version, outcomes)
