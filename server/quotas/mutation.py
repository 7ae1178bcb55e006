"""controller_mutation_rate (KIP-599): partitions created or deleted per second, as Kafka's
ControllerMutationQuotaManager counts them, with a token bucket (TokenBucket: the bucket holds
at most quota.window.num x quota.window.size.seconds seconds' worth, refills at the quota).

CreateTopics v6+, DeleteTopics v5+ and CreatePartitions v3+ get a strict quota: once the bucket
is below zero, a topic's mutation is refused with THROTTLING_QUOTA_EXCEEDED (its partitions
are recorded otherwise, so one large request still goes through and the next ones wait). Older
versions get a permissive one: every mutation is done, and the answer is throttled. Either way
the answer carries the throttle time and the connection is muted for it.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from kcoord.protocol.errors import ErrorCode, KafkaError
from kcoord.server.quotas.entities import CONTROLLER_MUTATION_RATE
from kcoord.server.quotas.manager import QuotaManager, user_name

if TYPE_CHECKING:
    from kcoord.server.context import RequestContext

THROTTLED_MESSAGE = "The throttling quota has been exceeded."


class TokenBucket:
    __slots__ = ("tokens", "last_ms")

    def __init__(self) -> None:
        self.tokens = 0.0
        self.last_ms: int | None = None

    def _refill(self, rate: float, burst: float, now_ms: int) -> None:
        if self.last_ms is None:
            self.tokens = burst
        else:
            self.tokens = min(burst, self.tokens + rate * (now_ms - self.last_ms) / 1000)
        self.last_ms = now_ms

    def measure(self, rate: float, burst: float, now_ms: int) -> float:
        self._refill(rate, burst, now_ms)
        return self.tokens

    def record(self, permits: float, rate: float, burst: float, now_ms: int) -> None:
        self._refill(rate, burst, now_ms)
        self.tokens = min(burst, self.tokens - permits)


class MutationQuota:
    """One request's controller mutation quota."""

    __slots__ = ("bucket", "rate", "burst", "strict", "clock_ms", "throttle_ms", "recorded_at")

    def __init__(self, bucket: TokenBucket, rate: float, burst: float, strict: bool, clock_ms) -> None:  # noqa: ANN001
        self.bucket = bucket
        self.rate = rate
        self.burst = burst
        self.strict = strict
        self.clock_ms = clock_ms
        self.throttle_ms = 0
        self.recorded_at = 0

    def _violated(self, tokens: float, now: int) -> None:
        # ControllerMutationQuotaManager.throttleTimeMs: the time to refill back to zero
        self.throttle_ms = int(-tokens / self.rate * 1000 + 0.5)
        self.recorded_at = now

    def record(self, permits: int) -> None:
        """Count `permits` partitions; KafkaError(THROTTLING_QUOTA_EXCEEDED) when a strict
        quota is exhausted (nothing recorded then)."""
        now = self.clock_ms()
        if self.strict:
            tokens = self.bucket.measure(self.rate, self.burst, now)
            if tokens < 0:
                self._violated(tokens, now)
                raise KafkaError(ErrorCode.THROTTLING_QUOTA_EXCEEDED, THROTTLED_MESSAGE)
            self.bucket.record(permits, self.rate, self.burst, now)
        else:
            self.bucket.record(permits, self.rate, self.burst, now)
            tokens = self.bucket.tokens
            if tokens < 0:
                self._violated(tokens, now)

    def finish(self, ctx: RequestContext) -> int:
        """The throttle time left for the answer (the connection is muted for it)."""
        left = max(0, self.throttle_ms - (self.clock_ms() - self.recorded_at)) if self.throttle_ms else 0
        if left and ctx.session is not None and ctx.session.mute is not None:
            ctx.session.mute(left)
        return left


def mutation_quota(quotas: QuotaManager, ctx: RequestContext, strict: bool) -> MutationQuota | None:
    """The request's controller mutation quota, or None when none applies (the usual case)."""

    if not quotas.active:
        return None
    user = user_name(ctx.principal)
    found = quotas.resolve(CONTROLLER_MUTATION_RATE, user, ctx.client_id or "")
    if found is None:
        return None
    tags, rate = found
    bucket = quotas.buckets.get(tags)
    if bucket is None:
        bucket = quotas.buckets[tags] = TokenBucket()
    burst = quotas.samples * quotas.window_ms / 1000 * rate
    return MutationQuota(bucket, rate, burst, strict, quotas.clock_ms)
