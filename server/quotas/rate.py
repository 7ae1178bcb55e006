"""Kafka's sampled rate (org.apache.kafka.common.metrics.stats.Rate over a SampledStat), the
measure every client quota is checked against.

`samples` windows of `window_ms`: a value goes to the current window; a window older than
window_ms is complete and the next one starts at the time of the value that opens it (one slot
more than `samples` is kept); a window whose last value is older than samples * window_ms is
reset. The rate is the sum of the windows over the elapsed
time since the oldest window started, counted as at least samples - 1 full windows (so the
first values of a new client are not measured over a few milliseconds).
"""
from __future__ import annotations


class Rate:
    __slots__ = ("starts", "lasts", "values", "current", "samples", "window_ms")

    def __init__(self, samples: int, window_ms: int) -> None:
        self.samples = samples
        self.window_ms = window_ms
        self.starts: list[int] = []  # each window's start
        self.lasts: list[int] = []  # each window's last value's time
        self.values: list[float] = []
        self.current = 0

    def record(self, value: float, now_ms: int) -> None:
        starts = self.starts
        if not starts:
            self._add(now_ms)
        elif now_ms - starts[self.current] >= self.window_ms:
            # one slot more than the samples: the window overlapping the measured span's start
            self.current = (self.current + 1) % (self.samples + 1)
            if self.current >= len(starts):
                self._add(now_ms)
            else:
                self._reset(self.current, now_ms)
        self.values[self.current] += value
        self.lasts[self.current] = now_ms

    def _add(self, now_ms: int) -> None:
        self.starts.append(now_ms)
        self.lasts.append(now_ms)
        self.values.append(0.0)
        self.current = len(self.starts) - 1

    def _reset(self, i: int, now_ms: int) -> None:
        self.starts[i] = now_ms
        self.lasts[i] = now_ms
        self.values[i] = 0.0

    def _purge(self, now_ms: int) -> None:
        """Windows whose last value is older than samples * window_ms no longer count."""
        expire = self.samples * self.window_ms
        for i, last in enumerate(self.lasts):
            if now_ms - last >= expire:
                self._reset(i, now_ms)

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
