"""AlterConfigs v0-v2 (the legacy, whole-map form): a topic's or the broker's dynamic configs
become exactly those given (what is not named is removed). Checked in full before anything is
written; validate_only stops there; applied durably before the answer."""
from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from kafka.protocol.admin.configs import AlterConfigsResponse

from kcoord.protocol.errors import ErrorCode, KafkaError
from kcoord.server.config_admin import (
    Outcome,
    cluster_change,
    commit,
    each_resource,
    each_resource_awaited,
    plan_legacy,
)
from kcoord.server.context import RequestContext
from kcoord.server.deferred import of_coroutine

if TYPE_CHECKING:
    from kcoord.server.config_admin import ConfigState


class ConfigAlterations:
    """What the AlterConfigs and IncrementalAlterConfigs areas are built with by the
    composition root (server/node.py): the config state (server/config_admin.py) and, on a
    cluster node, the ClusterNode, whose config publisher writes changes to ZooKeeper."""

    def __init__(self, state: ConfigState, cluster: Callable[[], Any] = lambda: None) -> None:
        self.state = state
        self.cluster = cluster  # the node's ClusterNode on a cluster node, else None

    def _publisher(self) -> Any:
        """On a cluster node, what writes topic and broker changes to ZooKeeper."""
        node = self.cluster()
        return None if node is None else node.configs


class AlterConfigsApi(ConfigAlterations):
    """The handler of alter_configs.py."""

    def handle_alter_configs(self, ctx: RequestContext, req: Any, version: int) -> Any:
        publisher = self._publisher()
        if publisher is not None and not req.validate_only:
            return of_coroutine(self._published(req, version, publisher), "AlterConfigs")

        def apply(r: Any) -> None:
            plan = plan_legacy(self.state, r)
            if not req.validate_only:
                commit(self.state, plan)
        return _response(req, version, each_resource(req.resources, apply))

    async def _published(self, req: Any, version: int, publisher: Any) -> Any:
        """On a cluster node: topic and broker changes written to ZooKeeper, every node applies
        them (server/cluster/config_changes.py); group configs stay on this node."""
        async def apply(r: Any) -> None:
            plan = plan_legacy(self.state, r)
            change = cluster_change(plan)
            if change is None:
                commit(self.state, plan)
            else:
                await publish(publisher, change, plan.configs)
        return _response(req, version, await each_resource_awaited(req.resources, apply))


def _response(req: Any, version: int, outcomes: list[Outcome]) -> Any:
    return response(AlterConfigsResponse, req, version, outcomes)


def response(cls: Any, req: Any, version: int, outcomes: list[Outcome]) -> Any:
    """The answer (AlterConfigs' or IncrementalAlterConfigs' response class `cls`) with each
    resource's outcome."""
    out = cls.AlterConfigsResourceResponse
    return cls(version=version, throttle_time_ms=0, responses=[
        out(error_code=code, error_message=message, resource_type=r.resource_type, resource_name=r.resource_name)
        for r, (code, message) in zip(req.resources, outcomes, strict=True)])


async def publish(publisher: Any, change: tuple[str, str], configs: dict[str, str]) -> None:
    """ZooKeeper's failures answer UNKNOWN_SERVER_ERROR for the resource (nothing applied)."""
    try:
        await publisher.publish(*change, configs)
    except Exception as e:  # noqa: BLE001 - kazoo's connection and session errors
        raise KafkaError(ErrorCode.UNKNOWN_SERVER_ERROR, f"Writing the config change failed: {e!r}") from None
