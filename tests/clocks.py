"""An accelerated clock for the end-to-end tests: the operator's injectable
:class:`~idlegate.operator.settings.Clock`, running as fast as the simulated kubelet."""

from __future__ import annotations

import time

from idlegate.operator.settings import Clock


class ScaledClock(Clock):
    """Time that runs `speed` times faster than the wall clock from `anchor` on.

    ``now() = anchor + (time.time() - anchor) * speed``. Share one instance between
    operator runs in a test (a restart) so that persisted timestamps stay meaningful.
    """

    def __init__(self, speed: float, anchor: float | None = None) -> None:
        if not speed > 0:
            raise ValueError(f"a clock's speed must be positive, got {speed!r}")
        self.speed = float(speed)
        self.anchor = time.time() if anchor is None else float(anchor)

    def now(self) -> float:
        return self.anchor + (time.time() - self.anchor) * self.speed

    def wall_delay(self, seconds: float) -> float:
        return max(0.0, seconds) / self.speed

    def from_wall(self, t: float) -> float:
        return self.anchor + (t - self.anchor) * self.speed

    def __repr__(self) -> str:
        return f"ScaledClock(speed={self.speed:g})"
