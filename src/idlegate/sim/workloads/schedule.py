"""A recurring schedule: every `period` seconds from `phase`, each start late by a jitter.

`PeriodicStarts` is the one notion of "when does a recurring workflow start" in idlegate: the
`recurring` workload draws its runs from it, and a CronWorkflow-like resource of the
operator can hold one and ask `next_after(now)` for its next nominal start. It is small
on purpose: a period, a phase (the first nominal start) and a jitter (a run starts
uniformly within `jitter` seconds after its nominal time, as controllers do not start
scheduled work on the second).
"""

from __future__ import annotations

import math

import numpy as np
from pydantic import Field, model_validator

from idlegate.config import Config


class PeriodicStarts(Config):
    """Nominal starts phase, phase + period, phase + 2·period, …; each run late by U[0, jitter)."""

    period: float = Field(gt=0, allow_inf_nan=False)
    """Seconds between nominal starts."""
    phase: float = Field(0.0, ge=0, allow_inf_nan=False)
    """Seconds from t=0 to the first nominal start."""
    jitter: float = Field(0.0, ge=0, allow_inf_nan=False)
    """A run starts uniformly within this many seconds after its nominal time (< period)."""

    @model_validator(mode="after")
    def _jitter_below_period(self) -> PeriodicStarts:
        if self.jitter >= self.period:
            raise ValueError(
                f"jitter ({self.jitter:g} s) must be shorter than the period "
                f"({self.period:g} s), so that a run starts before the next one"
            )
        return self

    def nominal(self, k: int | np.ndarray) -> float | np.ndarray:
        """The k-th nominal start (k = 0, 1, …)."""
        return self.phase + k * self.period

    def next_after(self, t: float) -> float:
        """The first nominal start strictly after time `t`."""
        if t < self.phase:
            return self.phase
        return float(self.nominal(math.floor((t - self.phase) / self.period) + 1))

    def runs(self, rng: np.random.Generator, count: int) -> np.ndarray:
        """The first `count` start times, jittered; increasing, and a prefix of any longer
        draw from the same generator state (one uniform per run, in order)."""
        late = rng.random(count) * self.jitter
        return self.nominal(np.arange(count)) + late

    def scaled(self, factor: float) -> PeriodicStarts:
        """The same schedule with every time (period, phase, jitter) times `factor`."""
        return PeriodicStarts(
            period=self.period * factor, phase=self.phase * factor, jitter=self.jitter * factor
        )
