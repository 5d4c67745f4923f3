"""Clocks of the tests: an accelerated one for the end-to-end tests (the operator's
injectable :class:`~idlegate.api.settings.Clock`, running as fast as the simulated
kubelet), and fake loop time (looptime) for a test that runs its scenario by hand."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Coroutine
from typing import Any, TypeVar

import looptime

try:
    from idlegate.api.settings import Clock
except ImportError:  # (an older checkout's operator, run by benchmarks/scaled_operator.py)
    from idlegate.operator.settings import Clock  # type: ignore[no-redef]

T = TypeVar("T")


def run_in_loop_time(scenario: Coroutine[Any, Any, T]) -> T:
    """`asyncio.run(scenario)` in fake loop time (looptime), as ``@pytest.mark.looptime``
    runs an async test: its sleeps, timeouts and back-offs take no wall time."""
    with asyncio.Runner(loop_factory=looptime.new_event_loop) as runner:
        return runner.run(scenario)


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
