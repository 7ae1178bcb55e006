"""GroupConfig: the group coordinator's settings, named and defaulted exactly as Kafka's broker
configs (group.* and offsets.*, dots become underscores)."""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol


class GroupOverrides(Protocol):
    """Per-group configs (server/group_configs.py GroupConfigs): those set on a group, typed."""

    def get(self, group_id: str) -> Mapping[str, str]: ...

    def value(self, group_id: str, name: str) -> Any: ...


@dataclass(slots=True)
class GroupConfig:
    group_min_session_timeout_ms: int = 6000
    group_max_session_timeout_ms: int = 1800000
    group_initial_rebalance_delay_ms: int = 3000
    group_max_size: int = 2**31 - 1
    offset_metadata_max_bytes: int = 4096
    offsets_retention_minutes: int = 10080
    offsets_retention_check_interval_ms: int = 600000
    offsets_commit_timeout_ms: int = 5000
    # consumer groups (KIP-848)
    group_consumer_session_timeout_ms: int = 45000
    group_consumer_min_session_timeout_ms: int = 45000
    group_consumer_max_session_timeout_ms: int = 60000
    group_consumer_heartbeat_interval_ms: int = 5000
    group_consumer_min_heartbeat_interval_ms: int = 5000
    group_consumer_max_heartbeat_interval_ms: int = 15000
    group_consumer_max_size: int = 2**31 - 1
    group_consumer_assignors: tuple[str, ...] = ("uniform", "range")
    group_consumer_migration_policy: str = "bidirectional"
    # share groups (KIP-932)
    group_share_session_timeout_ms: int = 45000
    group_share_min_session_timeout_ms: int = 45000
    group_share_max_session_timeout_ms: int = 60000
    group_share_heartbeat_interval_ms: int = 5000
    group_share_min_heartbeat_interval_ms: int = 5000
    group_share_max_heartbeat_interval_ms: int = 15000
    group_share_max_size: int = 200
    # the GROUP config resource: a group's own consumer.session.timeout.ms / heartbeat interval
    overrides: GroupOverrides | None = None

    def consumer_session_timeout_ms(self, group_id: str) -> int:
        """Kafka's consumerGroupSessionTimeoutMs(groupId): the group's config, else the broker's."""
        o = self.overrides
        if o is not None and "consumer.session.timeout.ms" in o.get(group_id):
            return int(o.value(group_id, "consumer.session.timeout.ms"))
        return self.group_consumer_session_timeout_ms

    def consumer_heartbeat_interval_ms(self, group_id: str) -> int:
        """Kafka's consumerGroupHeartbeatIntervalMs(groupId)."""
        o = self.overrides
        if o is not None and "consumer.heartbeat.interval.ms" in o.get(group_id):
            return int(o.value(group_id, "consumer.heartbeat.interval.ms"))
        return self.group_consumer_heartbeat_interval_ms

    @property
    def offsets_retention_ms(self) -> int:
        return self.offsets_retention_minutes * 60 * 1000
