"""The share group coordinator's broker settings (group.share.*), with Kafka's names, defaults
and bounds (GroupCoordinatorConfig): each is checked against its min/max pair, and the heartbeat
interval must be below the session timeout, as Kafka requires at start-up."""
from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

# name -> (parser, default), merged into server/config.py's table
SETTINGS: dict[str, tuple[Callable[[Any], Any], Any]] = {
    "group.share.session.timeout.ms": (int, 45000),
    "group.share.min.session.timeout.ms": (int, 45000),
    "group.share.max.session.timeout.ms": (int, 60000),
    "group.share.heartbeat.interval.ms": (int, 5000),
    "group.share.min.heartbeat.interval.ms": (int, 5000),
    "group.share.max.heartbeat.interval.ms": (int, 15000),
    "group.share.max.size": (int, 200),
}


def group_config_fields(cfg: Mapping[str, Any]) -> dict[str, int]:
    """GroupConfig's group_share_* fields from the broker's settings; ValueError, with Kafka's
    reason, for values out of bounds."""
    out = {name.replace(".", "_"): int(cfg[name]) for name in SETTINGS}
    for stem in ("session.timeout.ms", "heartbeat.interval.ms"):
        value, lo, hi = (cfg[f"group.share.{p}{stem}"] for p in ("", "min.", "max."))
        if lo < 1 or hi < lo:
            raise ValueError(f"group.share.max.{stem} must be greater than or equal to group.share.min.{stem}")
        if not lo <= value <= hi:
            raise ValueError(f"group.share.{stem} must be between group.share.min.{stem} ({lo}) and "
                             f"group.share.max.{stem} ({hi}), not {value}")
    if cfg["group.share.heartbeat.interval.ms"] >= cfg["group.share.session.timeout.ms"]:
        raise ValueError("group.share.heartbeat.interval.ms must be less than group.share.session.timeout.ms")
    if not 10 <= cfg["group.share.max.size"] <= 1000:
        raise ValueError(f"group.share.max.size must be between 10 and 1000, not {cfg['group.share.max.size']}")
    return out
