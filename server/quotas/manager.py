"""Which quota applies to a request and how long its client waits: Kafka's ClientQuotaManager
(one per quota type: produce bytes, fetch bytes, request time, controller mutations) with its
default callback's precedence, for a (user, client id):

    /users/<user>/clients/<client-id>     /users/<user>/clients/<default>     /users/<user>
    /users/<default>/clients/<client-id>  /users/<default>/clients/<default>  /users/<default>
    /clients/<client-id>                  /clients/<default>

The first entity with a quota of that type decides both the bound and whose usage it is
measured against (its "metric tags"): a /users/alice quota is shared by all of alice's
clients, a /clients/<default> quota gives each client id its own measure of that bound.

`active` says whether any user or client-id quota exists: the dispatcher takes its quota path
(server/quotas/gate.py) only while it does.
"""
from __future__ import annotations

import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kcoord.protocol.errors import ErrorCode, error_code_of
from kcoord.server.quotas import store as quota_store
from kcoord.server.quotas.entities import (
    CLIENT_ID,
    CONSUMER_BYTE_RATE,
    CONTROLLER_MUTATION_RATE,
    IP,
    PRODUCER_BYTE_RATE,
    REQUEST_PERCENTAGE,
    USER,
    Entity,
    Filter,
)
from kcoord.server.quotas.rate import Rate

if TYPE_CHECKING:
    from kcoord.server.config import Config

log = logging.getLogger("kcoord.quotas")

# quota key -> Kafka's QuotaType name (the metric group: Produce, Fetch, Request, ...)
QUOTA_TYPES = {PRODUCER_BYTE_RATE: "Produce", CONSUMER_BYTE_RATE: "Fetch", REQUEST_PERCENTAGE: "Request",
               CONTROLLER_MUTATION_RATE: "ControllerMutation"}

Tags = tuple[str, str]  # (user, client id) as Kafka's metric tags; "" where not part of it
INACTIVE_MS = 3_600_000  # ClientQuotaManager.InactiveSensorExpirationTimeSeconds
PRUNE_AT = 4096  # measures kept before the idle ones are looked for
RESOLVED_MAX = 65536  # (quota type, user, client id) lookups remembered


def _now_ms() -> int:
    return int(time.monotonic() * 1000)


def user_name(principal: str) -> str:
    """KafkaPrincipal.getName of "User:alice"."""
    return principal.split(":", 1)[1] if ":" in principal else principal


class Usage:
    """One entity's measure of one quota type: its sampled rate and its throttling so far."""

    __slots__ = ("rate", "throttled_ms", "throttled")

    def __init__(self, samples: int, window_ms: int) -> None:
        self.rate = Rate(samples, window_ms)
        self.throttled_ms = 0
        self.throttled = 0


class QuotaManager:
    def __init__(self, config: Config, log_dir: Path, clock_ms: Callable[[], int] = _now_ms) -> None:
        self.samples = int(config["quota.window.num"])
        self.window_ms = int(config["quota.window.size.seconds"]) * 1000
        self.store = quota_store.QuotaStore(log_dir)
        self.clock_ms = clock_ms
        self.active = False
        self._watchers: list[Callable[[bool], None]] = []
        # quota key -> {entity: bound} (user / client-id entities only)
        self._bounds: dict[str, dict[Entity, float]] = {k: {} for k in QUOTA_TYPES}
        self._resolved: dict[tuple[str, str, str], tuple[Tags, float] | None] = {}
        self.usage: dict[tuple[str, Tags], Usage] = {}
        self._prune_at = PRUNE_AT
        self.buckets: dict[Tags, Any] = {}  # controller_mutation_rate's token buckets (server/quotas/mutation.py)

    # the quotas

    def load(self) -> None:
        if self.store.path.exists():
            n = self.store.load()
            if n:
                log.info("Loaded %d client quotas from %s", n, self.store.path)
        self._rebuild()

    def watch(self, fn: Callable[[bool], None]) -> None:
        """fn(active) now and whenever `active` changes."""
        self._watchers.append(fn)
        fn(self.active)

    def _rebuild(self) -> None:
        bounds: dict[str, dict[Entity, float]] = {k: {} for k in QUOTA_TYPES}
        for entity, values in self.store.state.items():
            if any(t == IP for t, _ in entity):
                continue
            for key, value in values.items():
                if key in bounds:
                    bounds[key][entity] = value
        self._bounds = bounds
        self._resolved.clear()
        active = any(bounds.values())
        if active != self.active:
            self.active = active
            log.info("Client quotas %s", "enforced" if active else "off (none defined)")
            for fn in self._watchers:
                fn(active)

    async def alter(self, entries: list[quota_store.Alteration], validate_only: bool) -> list[quota_store.Result]:
        async with self.store.lock:  # validate and write one request at a time
            records, results = quota_store.alter(self.store.state, entries)
            if validate_only or not records:
                return results
            try:
                await self.store.commit(records)
            except OSError as e:  # nothing was applied
                code = error_code_of(e)
                return [(pairs, code if err == ErrorCode.NONE else err, str(e) if err == ErrorCode.NONE else msg)
                        for pairs, err, msg in results]
            self._rebuild()
            for rec in records:
                log.info("Client quota %s: %s %s", rec["entity"], rec["key"],
                         "removed" if rec.get("remove") else f"= {rec['value']}")
        return results

    def describe(self, flt: Filter) -> list[tuple[Entity, dict[str, float]]]:
        return quota_store.describe(self.store.state, flt.matches)

    # enforcement

    def resolve(self, key: str, user: str, client: str) -> tuple[Tags, float] | None:
        """The (metric tags, bound) of the quota of this type for (user, client id), or None."""
        memo = (key, user, client)
        try:
            return self._resolved[memo]
        except KeyError:
            pass
        if len(self._resolved) >= RESOLVED_MAX:
            self._resolved.clear()
        found = self._resolved[memo] = _resolve(self._bounds[key], user, client)
        return found

    def _usage(self, key: str, tags: Tags) -> Usage:
        usage = self.usage.get((key, tags))
        if usage is None:
            if len(self.usage) >= self._prune_at:
                self._prune()
            usage = self.usage[(key, tags)] = Usage(self.samples, self.window_ms)
        return usage

    def _prune(self) -> None:
        """Forget the measures of entities idle for an hour (Kafka expires a quota sensor after
        an hour without a value), and the lookups made for them."""
        cutoff = self.clock_ms() - INACTIVE_MS
        self.usage = {k: u for k, u in self.usage.items() if u.rate.lasts and max(u.rate.lasts) >= cutoff}
        self._resolved.clear()
        self._prune_at = max(2 * len(self.usage), PRUNE_AT)

    def record(self, key: str, user: str, client: str, value: float, now_ms: int, cap_ms: int | None = None) -> int:
        """Record `value` against the quota of this type that applies; the throttle time in ms
        (0 within the quota or without one)."""
        found = self.resolve(key, user, client)
        if found is None:
            return 0
        tags, bound = found
        usage = self._usage(key, tags)
        usage.rate.record(value, now_ms)
        throttle = usage.rate.throttle_ms(bound, now_ms)
        if cap_ms is not None and throttle > cap_ms:
            throttle = cap_ms
        return throttle

    def unrecord(self, key: str, user: str, client: str, value: float, now_ms: int) -> None:
        found = self.resolve(key, user, client)
        if found is not None:
            self._usage(key, found[0]).rate.record(-value, now_ms)

    def throttled(self, key: str, user: str, client: str, ms: int) -> None:
        found = self.resolve(key, user, client)
        if found is not None:
            usage = self._usage(key, found[0])
            usage.throttled_ms += ms
            usage.throttled += 1

    def rates(self) -> list[tuple[str, Tags, float, int, int]]:
        """(quota type, tags, current rate, throttled ms, throttled answers) per measured entity."""
        now = self.clock_ms()
        return [(QUOTA_TYPES[key], tags, u.rate.measure(now), u.throttled_ms, u.throttled)
                for (key, tags), u in sorted(self.usage.items())]

    def reset(self) -> None:
        """The log directory was emptied (server/control/reset.py): no quotas any more."""
        self.store.state.clear()
        self.usage.clear()
        self.buckets.clear()
        self._rebuild()


def _resolve(bounds: dict[Entity, float], user: str, client: str) -> tuple[Tags, float] | None:
    if not bounds:
        return None
    uc: Entity = ((CLIENT_ID, client), (USER, user))
    ud: Entity = ((CLIENT_ID, None), (USER, user))
    dc: Entity = ((CLIENT_ID, client), (USER, None))
    dd: Entity = ((CLIENT_ID, None), (USER, None))
    u: Entity = ((USER, user),)
    du: Entity = ((USER, None),)
    # ClientQuotaManager.DefaultQuotaCallback.quotaMetricTags: whose usage is measured
    if uc in bounds or ud in bounds:
        tags = (user, client)
    elif u in bounds:
        tags = (user, "")
    elif dc in bounds or dd in bounds:
        tags = (user, client)
    elif du in bounds:
        tags = (user, "")
    else:
        tags = ("", client)
    # ... and quotaLimit: the bound for those tags
    user_tag, client_tag = tags
    if user_tag and client_tag:
        order: tuple[Entity, ...] = (uc, ud, dc, dd)
    elif user_tag:
        order = (u, du)
    elif client_tag:
        order = (((CLIENT_ID, client),), ((CLIENT_ID, None),))
    else:
        return None
    for entity in order:
        bound = bounds.get(entity)
        if bound is not None:
            return tags, bound
    return None

