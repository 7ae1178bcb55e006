"""ShareGroupHeartbeat (76) and ShareGroupDescribe (77): served by the group coordinator's share
group unit (server/group/share/) through the coordinator runtime."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kcoord.protocol.coordinator_records import CoordinatorRecord
    from kcoord.server.context import RequestContext
    from kcoord.server.coordinator.runtime import CoordinatorRuntime
    from kcoord.server.group.coordinator import GroupCoordinator


class ShareGroupApis:
    """The share group APIs' handlers, built by the composition root (server/node.py) with the
    group coordinator and its runtime."""

    def __init__(self, coordinator: GroupCoordinator, runtime: CoordinatorRuntime[CoordinatorRecord]) -> None:
        self.coordinator = coordinator
        self.submit = runtime.submit

    def handle_share_group_heartbeat(self, ctx: RequestContext, req: Any, version: int) -> Any:
        return self.submit(
            self.coordinator.share_group_heartbeat(req, version, ctx.client_id or "", "/" + ctx.client_host))

    def handle_share_group_describe(self, ctx: RequestContext, req: Any, version: int) -> Any:
        return self.submit(self.coordinator.share_group_describe(req, version))
