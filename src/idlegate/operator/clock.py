"""Time for the operator: an injectable clock, so tests can run in accelerated or fake time.

The cluster state machine takes plain float seconds (`now`). The operator reads them from a
:class:`Clock`: epoch seconds for the real thing (:class:`WallClock`); tests inject their
own (a fake one, or one running faster than the wall for end-to-end runs against a
simulated kubelet accelerated by the same factor). Timestamps written into the
status (`startTime`, `releaseTime`, ...) are the clock's time as UTC datetimes, and timers
(idle slots) are armed on the wall clock after `wall_delay`. The bridge and its writes read
the clock through one :class:`Steady`, which never goes back.
"""

from __future__ import annotations

import time
from typing import Protocol, runtime_checkable


@runtime_checkable
class Clock(Protocol):
    """Where the operator gets its time from."""

    def now(self) -> float:
        """Seconds since the epoch, in the clock's time."""

    def wall_delay(self, seconds: float) -> float:
        """Wall-clock seconds that `seconds` of the clock's time take."""

    def from_wall(self, t: float) -> float:
        """The clock's time at the wall-clock epoch time `t` (e.g. an API timestamp)."""


class Steady:
    """The operator's time: `clock`'s, never going back (the state machine refuses to), one
    reading shared by the bridge and its writes."""

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self.last = float("-inf")

    def now(self) -> float:
        self.last = max(self.last, self.clock.now())
        return self.last


class WallClock:
    """The real time: `time.time()`, one second per second."""

    def now(self) -> float:
        return time.time()

    def wall_delay(self, seconds: float) -> float:
        return max(0.0, seconds)

    def from_wall(self, t: float) -> float:
        return t

    def __repr__(self) -> str:
        return "WallClock()"
