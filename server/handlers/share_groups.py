"""ShareGroupHeartbeat (76) and ShareGroupDescribe (77): served by the group coordinator's share
group unit (server/group/share/) through the coordinator runtime."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kcoord.server.context import RequestContext


def handle_share_group_heartbeat(ctx: RequestContext, req: Any, version: int) -> Any:
    coordinator = ctx.broker.coordinator
    return ctx.broker.runtime.submit(
        coordinator.share_group_heartbeat(req, version, ctx.client_id or "", "/" + ctx.client_host))


def handle_share_group_describe(ctx: RequestContext, req: Any, version: int) -> Any:
    return ctx.broker.runtime.submit(ctx.broker.coordinator.share_group_describe(req, version))
