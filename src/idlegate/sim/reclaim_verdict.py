"""A reclaim's verdict when a queue's stops are decided on forecasts (issue 82, item 3):
which case held, with both figures. The judge that reaches it is
`idlegate.sim.reclaim_forecast` (its docstring states the cases and the exchange rate);
this module is what the admission's reclaim phase (`idlegate.sim.reclaim_plan`) and the
``Preempted`` Event (`idlegate.api.notices.preempted`) read of it, without the replays.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

BOUND = "bound"
"""The owners' wait bound would be broken without the stops."""
PAYS = "pays"
"""The owners' forecast wait falls by more than the work lost (at `RATE`)."""
DECLINED = "declined"
"""Neither: nothing is stopped."""
CUT = "cut"
"""The budget was spent before one pair of replays ended: the rules' answer."""
CASES = (BOUND, PAYS, DECLINED, CUT)

RATE = 0.25
"""Seconds of the owners' wait saved one executor-second of work lost costs
(`idlegate.sim.reclaim_forecast`'s docstring says why a quarter)."""


class ReclaimVerdict(NamedTuple):
    """A decision on a reclaim's stops: which case held (`CASES`), the owners' forecast
    wait saved (seconds, summed over their workflows; nan when cut), the work the stops
    lose (executor-seconds), the owners' latest forecast start past their bound without
    the stops (seconds; 0: none), the pairs of replays run, the events they simulated, and
    the caller's clock spent (None: no clock)."""

    case: str
    gain: float
    lost: float
    overshoot: float
    pairs: int
    events: int = 0
    spent: float | None = None
    rate: float = RATE
    """The exchange rate it was decided at (`RATE`)."""

    @property
    def stops(self) -> bool:
        """Whether the stops go ahead."""
        return self.case != DECLINED

    def sentence(self) -> str:
        """Which case held, with both figures (the ``Preempted`` Event's clause)."""
        lost = f"{self.lost:.0f} executor-seconds lost"
        if self.case == CUT:
            return (
                f"decided by the rules: the forecast's budget ran out before a replay ended "
                f"({lost})"
            )
        gain = f"the owners' forecast wait falls by {self.gain:.0f} s"
        if self.case == BOUND:
            return (
                f"decided on forecasts: without it a task of the queue would start "
                f"{self.overshoot:.0f} s past its wait bound ({gain}, {lost})"
            )
        rate = self.rate
        worth = f"{rate * self.lost:.0f} s the {self.lost:.0f} executor-seconds lost are worth"
        if self.case == PAYS:
            return f"decided on forecasts: {gain}, more than the {worth} ({rate:g} s each)"
        return f"declined on forecasts: {gain}, not more than the {worth} ({rate:g} s each)"


def counts(verdicts: Sequence[ReclaimVerdict]) -> dict[str, int]:
    """How many verdicts of each case (`CASES`, in order)."""
    return {case: sum(1 for v in verdicts if v.case == case) for case in CASES}


__all__ = ["BOUND", "CASES", "CUT", "DECLINED", "PAYS", "RATE", "ReclaimVerdict", "counts"]
