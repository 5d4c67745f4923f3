"""A sequential test on a replay's running difference (`RunningTest`): cut a replay that is
already losing, with a stated error rate, before the sure bound of `runs.Runs` would.

A round's replays share the window, its arrivals and its duration seeds. Once the
candidate followed is replayed to its end, its *area so far* is known at every time t:
A_f(t) = Σ_i min(max(t − a_i, 0), J_i) over the window's workflows (arrival a_i, JCT J_i),
up to its whole A_f(∞) = n × its score. Another candidate's replay has its own area so far
A_c(t) (`Cluster.jobs_time_integral`). Their *running difference*, in units of the
followed one's whole, is D(τ) = (A_c(t) − A_f(t)) / A_f(∞) at the time t where the
followed one has run τ of its whole (A_f(t) = τ A_f(∞)); D(1) is the candidate's score
over the followed one's, minus 1. `runs.Runs` cuts a replay once its area alone is past
(1 + `CUT`) × the reference: sure, but late (τ near 1, after 60-70 % of the replay's events
on teams' larger windows).

The test reads D on a grid τ_j = j/`GRID` and models it as a Brownian motion with drift
μ and variance σ² a unit of τ (each workflow's share of the difference an independent
draw, the finite-population view of the window). Then D(1) − D(τ) = μ(1 − τ) + noise,
μ̂ = D(τ)/τ, σ̂² from the j increments so far (j − 1 degrees of freedom), and the
prediction D̂(1) = μ̂ has the error variance σ²(1 − τ)/τ (the noise still to come,
σ²(1 − τ), plus μ̂'s own error carried over 1 − τ, σ²(1 − τ)²/τ). At the looks
(`LOOK_AT`: τ = 1/4, 5/16 … 15/16) a replay is cut at the first where

    μ̂ − θ > t σ̂ √((1 − τ)/τ),    t = the Student t quantile 1 − α/L at j − 1 degrees,

θ the reference's threshold in the same units ((1 + `CUT`) × reference / score − 1),
α the stated error (`PortfolioConfig.cut_error`) and L the looks: under the model the
chance that a replay whose whole would have stayed within θ is cut at any look is at
most α (Bonferroni over the looks; t, not the normal quantile, as σ is estimated). The model is not the replays: a flood's queues make
the difference grow faster late than early (convex D), so μ̂ under-predicts a losing
candidate's D(1) and the test cuts it later than it could; a candidate whose difference
shrinks at the end (a few large workflows it finishes sooner) is the case the error
rate is for. Its cut score is the ratio estimate A_c(t)/A_f(t) × score (`Runs._estimate`),
which is 1 + μ̂ times the score: above (1 + `CUT`) × the reference, as the sure cut's.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import NormalDist
from typing import Final

import numpy as np

from idlegate.errors import IdlegateError

__all__ = ["GRID", "LOOK_AT", "RunningTest", "area_so_far", "losing", "t_quantile"]

GRID: Final = 64
"""The followed replay's whole is read in this many equal parts (D at j/GRID)."""
LOOK_AT: Final = tuple(range(16, GRID, 4))
"""The grid points where the test looks (τ = 1/4 … 15/16, 12 looks): from a quarter on, 15
increments estimate σ, and before it the difference is mostly the first workflows'."""


def t_quantile(p: float, df: int) -> float:
    """Student's t quantile at `p` with `df` degrees of freedom: the normal quantile's
    Cornish-Fisher expansion in 1/df to its fourth term (Abramowitz and Stegun 26.7.5;
    within 0.3 % of the exact value from 10 degrees of freedom at the tails used here)."""
    if not 0.5 <= p < 1 or df < 1:
        raise IdlegateError(f"a cut's error rate is a fraction in (0, 1/2], not {1 - p}")
    z = NormalDist().inv_cdf(p)
    g = (
        (z**3 + z) / 4,
        (5 * z**5 + 16 * z**3 + 3 * z) / 96,
        (3 * z**7 + 19 * z**5 + 17 * z**3 - 15 * z) / 384,
        (79 * z**9 + 776 * z**7 + 1482 * z**5 - 1920 * z**3 - 945 * z) / 92160,
    )
    return z + sum(gi / df ** (i + 1) for i, gi in enumerate(g))


def losing(differences: Sequence[float], threshold: float, error: float) -> bool:
    """True if the running differences `differences` (D at the grid points 1/GRID, 2/GRID,
    …, the last the point now) say at the error rate `error` that D(1) ends beyond
    `threshold` (module docstring); False but at the looks (`LOOK_AT`)."""
    j = len(differences)
    if j not in LOOK_AT:
        return False
    step = 1.0 / GRID
    tau = j * step
    drift = differences[-1] / tau
    steps = np.diff(np.asarray([0.0, *differences], dtype=float))
    sigma = math.sqrt(float(np.sum((steps - drift * step) ** 2)) / ((j - 1) * step))
    t = t_quantile(1.0 - error / len(LOOK_AT), j - 1)
    return drift - threshold > t * sigma * math.sqrt((1.0 - tau) / tau)


def area_so_far(at: float, arrivals: np.ndarray, jcts: np.ndarray) -> float:
    """Σ_i min(max(`at` − a_i, 0), J_i): the workflows' time in the system up to `at`."""
    return float(np.clip(at - arrivals, 0.0, jcts).sum())


@dataclass(frozen=True)
class RunningTest:
    """The grid of a round's test: the times at which the followed candidate's replay
    (`arrivals`, its `jcts`) has run j/`GRID` of its whole (`whole`), and the `error`."""

    times: tuple[float, ...]
    """t_j, j = 1 … GRID − 1: A_f(t_j) = j/GRID × `whole`."""
    whole: float
    error: float

    @classmethod
    def of(cls, arrivals: np.ndarray, jcts: np.ndarray, error: float) -> RunningTest | None:
        """The test against a followed replay (None: it has no area to measure against).
        A_f is piecewise linear and rising: each t_j by bisection to the clock's
        resolution."""
        t_quantile(1.0 - error / len(LOOK_AT), 1)  # (a wrong rate fails here, not in a replay)
        whole = float(np.sum(jcts))
        if not whole > 0 or not math.isfinite(whole):
            return None
        ends = arrivals + jcts
        times = []
        for j in range(1, GRID):
            target, lo, hi = j / GRID * whole, float(arrivals.min()), float(ends.max())
            while hi - lo > 1e-9 * max(1.0, abs(hi)):
                mid = (lo + hi) / 2
                lo, hi = (mid, hi) if area_so_far(mid, arrivals, jcts) < target else (lo, mid)
            times.append(hi)
        return cls(tuple(times), whole, error)

    def difference(self, j: int, area: float) -> float:
        """D at grid point `j` (1-based) of a replay whose area so far there is `area`."""
        return (area - j / GRID * self.whole) / self.whole
