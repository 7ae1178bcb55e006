"""The control API's group operations (server/control/), routed once to the unit that runs
the group's type: force a rebalance, expire a member."""
from __future__ import annotations

from typing import TYPE_CHECKING

from kcoord.protocol.errors import ErrorCode
from kcoord.server.group.classic import control as classic_control
from kcoord.server.group.consumer import control as consumer_control
from kcoord.server.group.share import control as share_control
from kcoord.server.group.types import GroupType

if TYPE_CHECKING:
    from kcoord.server.group.coordinator import GroupCoordinator


def force_rebalance(coordinator: GroupCoordinator, group_id: str, reason: str) -> ErrorCode | None:
    group = coordinator.group(group_id)
    if group is None or group.is_dead():
        return ErrorCode.GROUP_ID_NOT_FOUND
    if group.TYPE is GroupType.CLASSIC:
        return classic_control.force_rebalance(coordinator.classic, group, reason)
    if group.TYPE is GroupType.CONSUMER:
        return consumer_control.force_rebalance(coordinator.consumer, group, reason)
    if group.TYPE is GroupType.SHARE:
        return share_control.force_rebalance(coordinator.share, group, reason)
    return ErrorCode.UNSUPPORTED_VERSION


def expire_member(coordinator: GroupCoordinator, group_id: str, member: str,
                  reason: str) -> tuple[ErrorCode | None, str | None]:
    group = coordinator.group(group_id)
    if group is None or group.is_dead():
        return ErrorCode.GROUP_ID_NOT_FOUND, None
    if group.TYPE is GroupType.CLASSIC:
        return classic_control.expire_member(coordinator.classic, group, member, reason)
    if group.TYPE is GroupType.CONSUMER:
        return consumer_control.expire_member(coordinator.consumer, group, member, reason)
    if group.TYPE is GroupType.SHARE:
        return share_control.expire_member(coordinator.share, group, member, reason)
    return ErrorCode.UNSUPPORTED_VERSION, None
