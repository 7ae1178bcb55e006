"""Kafka's sampled rate (org.apache.kafka.common.metrics.stats.Rate over a SampledStat), the
measure every client quota is checked against.

`samples` windows of `window_ms`: a value goes to the current window; a window older than
window_ms is complete and the next one starts at the time of the value that opens it; windows
older than samples * window_ms are reset. The rate is the sum of the windows over the elapsed
time since the oldest window started, counted as at least samples - 1 full windows (so the
first values of a new client are not measured over a few milliseconds).
"""
from __future__ import annotations


class Rate:
    __slots__ = ("starts", "values", "current", "samples", "window_ms")

    def __init__(self, samples: int, window_ms: int) -> None:
        self.samples = samples
        self.window_ms = window_ms
        self.starts: list[int] = []
        self.values: list[float] = []
        self.current = 0

    def record(self, value: float, now_ms: int) -> None:
        if not self.starts:
            self.starts.append(now_ms)
            self.values.append(0.0)
            self.current = 0
        elif now_ms - self.starts[self.current] >= self.window_ms:
            self.current = (self.current + 1) % self.samples
            if self.current >= len(self.starts):
                self.starts.append(now_ms)
                self.values.append(0.0)
            else:
                self.starts[self.current] = now_ms
                self.values[self.current] = 0.0
        self.values[self.current] += value

    def _purge(self, now_ms: int) -> None:
        expire = self.samples * self.window_ms
        starts, values = self.starts, self.values
        for i, start in enumerate(starts):
            if now_ms - start >= expire:
                starts[i] = now_ms
                values[i] = 0.0

    def window_size_ms(self, now_ms: int) -> int:
        self._purge(now_ms)
        oldest = min(self.starts) if self.starts else now_ms
        elapsed = now_ms - oldest
        full = elapsed // self.window_ms
        if full < self.samples - 1:
            elapsed += (self.samples - 1 - full) * self.window_ms
        return max(elapsed, 1)

    def measure(self, now_ms: int) -> float:
        """Per second."""
        window = self.window_size_ms(now_ms)
        return sum(self.values) / (window / 1000.0)

    def throttle_ms(self, bound: float, now_ms: int) -> int:
        """Kafka's QuotaUtils.throttleTime: 0 within the bound, else how long until the rate
        is back at the bound with nothing more recorded."""
        window = self.window_size_ms(now_ms)
        value = sum(self.values) / (window / 1000.0)
        if value <= bound:
            return 0
        return int((value - bound) / bound * window + 0.5)  # Java Math.round
