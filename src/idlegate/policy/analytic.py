"""The analytic idle rule: Duan & Wu's two-job idle-slot theorem applied online.

An interpretable baseline that wraps any heuristic (fair, SJF-CP, … — a registry name or
a `Scheduler`) and, where the heuristic launches a stage that has neither started nor been
delayed, may put the stage into a deliberate idle slot first. The idle length comes from a
closed-form expected cost; there is no learning and no randomness.

The pair model (Theorem 1 of the idle-slot paper, made stochastic)
------------------------------------------------------------------
Abstract the job J1 whose stage the base launches as *one* stage of length l1 on the `n`
executors the launch would occupy, and the next arrival J2 as one stage of length l2 on
the same executors. J2 arrives δ after now. With an idle slot of length d before J1 (d = 0:
no slot), and R the time at which some *other* busy executor frees (R = ∞ when none is
busy; see `expected_first_release`), the sum of the two completion times is
(`pair_cost`)::

    δ <  d:  J2 starts at once on the idle executors:  C = l2 + max(d, min(δ + l2, R)) + l1
    δ >= d:  J1 runs from d, J2 waits for it or for R: C = d + l1 + l2 + (min(d + l1, R) − δ)⁺

With R = ∞ and a known δ this is Theorem 1: C(0) − C(d) is largest for any
d ∈ (δ, δ + l2], where it equals l1 − l2 − 2δ, so some idle slot helps iff l2 < l1 and
0 < δ < (l1 − l2)/2.

Online, δ ~ Exp(λ) (memoryless, so the time since the last arrival does not matter) and
l2 follows the empirical distribution of recent arrivals' sizes. With
P(a, b) = ∫_a^b λe^{−λx} dx = e^{−λa} − e^{−λb} and
M(a, b) = ∫_a^b x λe^{−λx} dx = a e^{−λa} − b e^{−λb} + P(a, b)/λ, the expectation over δ
is, for each l2 (`expected_pair_cost`)::

    c = clip(d − l2, 0, d)    R' = max(R, d)    e = clip(R' − l2, c, d)
    m = max(min(d + l1, R), d)
    E[C(d)] = (l1 + l2) P(0, d) + d P(0, c) + M(c, e) + l2 P(c, e) + R' P(e, d)   (δ < d)
            + (d + l1 + l2) e^{−λd} + m P(d, m) − M(d, m)                          (δ >= d)

(on [0, c) J1 waits for the end of the slot, on [c, e) for J2, on [e, d) for the release
at R). d = 0 gives the no-idle cost l1 + l2 + m₀P(0, m₀) − M(0, m₀), m₀ = min(l1, R).

The arrivals after J2 (`later_cost`, `stream_cost=True`, the default)
-------------------------------------------------------------------
The pair alone overstates the case for idling in a *stream*: without a slot, J1 blocks
the machine partly before J2 arrives; with one, J1 blocks it entirely after J2, in front
of the arrivals that follow. Those form a Poisson(λ) stream after δ; one arriving at t
while J1 holds the machine and no other executor has freed waits until
e = min(s1 + l1, R) (s1: J1's start), so their summed wait is
L = λ/2 · ((e − max(δ, s1))⁺)². Its expectation over δ is again closed-form
(`expected_later_cost`, with second moments SQ(a, b; k) = ∫_a^b (k − x)² λe^{−λx} dx).

The *expected gain* of d is half the expected drop of the summed JCT, averaged over the
l2 atoms::

    G(d) = ½ · mean_l2 [E C(0) − E C(d) − (E L(d) − E L(0))]

(without the stream term, exactly the drop of the pair's average JCT). The rule
evaluates G on the grid d_k = r·l1·k/K (k = 1..K; r = `max_idle_fraction`,
K = `grid_size`) and inserts the best d only when G(d) > `min_gain`·l1 (and is
numerically positive). As λ → 0, G(d) → −d/2 < 0: with rare arrivals the rule never
idles. With R = ∞ (one executor, or nothing else busy) and the stream term, G(d) < 0 in
every case we tried (a scan of 20,000 random (l1, l2, λ, d)): on one machine under a
steady Poisson stream the long job must block the stream at some point, and the slot
only moves the block; idling pays when other executors will free soon (R < ∞), i.e. the
slot keeps the last free executors for newcomers while J1 waits for a release.
`stream_cost=False` gives the pure pair rule of Theorem 1, right for a burst followed by
silence (the motivating example), wrong for a steady stream.

Estimates (`estimate_arrivals`)
-------------------------------
* Arrival rate: Gamma–Poisson posterior mean over the last `window` arrivals of
  `view.arrival_log`: λ = (α₀ + n) / (α₀/λ₀ + T), with n the arrivals after the window's
  first one and T = now − (that arrival's time), so a long silence since the last arrival
  lowers λ. The prior has `prior_strength` = α₀ pseudo-arrivals at rate λ₀ = `prior_rate`,
  or, if unset, λ₀ = `prior_load`·K / (mean recent job work): "the cluster is that loaded".
* Sizes: the total work W of each of the last `window` arrivals, equally weighted, turned
  into a length on the executors a newcomer would get: l2 = W / min(n, ŵ), ŵ the median
  average width (total work / critical path) of the jobs in the system (≥ 1).
* l1 = max(remaining work / (held + n), remaining critical path) of J1's job, where
  n = min(free, cap − held, tasks of the stage not launched) (all tasks for a gang stage).

When the rule considers an idle slot (`AnalyticIdleScheduler.explain`)
----------------------------------------------------------------------
Only when keeping the executors idle is what the pair model describes:

1. the base launches (no delay of its own) a stage with no task launched, not delayed yet;
2. it is the *only* launchable stage: otherwise the base would give the executors to the
   next stage (of another job or of the same job) and the "idle" slot would merely
   reorder work that the base ranked lower — under SJF-CP a longer job — which the
   theorem does not cover;
3. the launch would take *every* free executor (n = free): otherwise the leftover free
   executors would serve a newcomer at once and keeping these n idle gains nothing. On a
   resource pool (`idlegate.sim.cluster`) what is free for the stage is the tasks of its
   demand the free resources hold (at most the free executors), and the rule reads the
   pool's size as its tasks of the jobs' mean demand (`drf.effective_executors`);
4. no other stage is inside an idle slot now: that slot already reserves the executors
   for a newcomer, and a second slot would make the two-job model wrong (the model
   assumes a job arriving during the slot starts at once, which is what the base does).

Executors held by other jobs enter only through R, the expected time of the first release
(each busy executor's task is taken as uniformly aged; see `expected_first_release`).
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from statistics import median
from typing import Any

import numpy as np
from pydantic import ConfigDict, Field, StrictBool, StrictInt

from idlegate.config import Config, NonNegative, Positive
from idlegate.errors import IdlegateError
from idlegate.policy.drf import effective_executors
from idlegate.policy.heuristics import make_scheduler
from idlegate.sim.forecast_arrivals import PRIOR_LOAD, PRIOR_STRENGTH, WINDOW, gamma_poisson_rate
from idlegate.sim.protocol import (
    Action,
    ClusterView,
    Decision,
    Job,
    Scheduler,
    Stage,
    launchable,
)

__all__ = [
    "CONFIG_FIELDS",
    "AnalyticIdleConfig",
    "AnalyticIdleScheduler",
    "ArrivalEstimate",
    "IdleEvaluation",
    "best_idle",
    "estimate_arrivals",
    "expected_first_release",
    "expected_gain",
    "expected_later_cost",
    "expected_pair_cost",
    "later_cost",
    "make_analytic",
    "pair_cost",
]

_NUMERIC_SLACK = 1e-9
"""A gain must exceed this fraction of l1 to count as positive (rounding noise is not)."""
_RELEASE_POINTS = 129
"""Trapezoid points for E[min release time] in `expected_first_release`."""


# ---------------------------------------------------------------------------------------
# configuration


class AnalyticIdleConfig(Config):
    """Parameters of the analytic idle rule (all have working defaults)."""

    model_config = ConfigDict(title="the analytic idle rule")

    window: StrictInt = Field(WINDOW, ge=1, le=1_000_000)
    """Most recent arrivals used to estimate the arrival rate and the job-size distribution."""
    prior_rate: Positive | None = None
    """Prior arrival rate λ₀ (arrivals per second); None: derived from `prior_load`."""
    prior_load: Positive = PRIOR_LOAD
    """If `prior_rate` is None: λ₀ = prior_load × executors / mean recent job work."""
    prior_strength: Positive = PRIOR_STRENGTH
    """Weight of the prior, in pseudo-arrivals (the Gamma prior's shape α₀)."""
    max_idle_fraction: Positive = 0.5
    """Longest idle slot considered, as a fraction r of l1 (the papers' d = r·l·k/G)."""
    grid_size: StrictInt = Field(16, ge=1, le=10_000)
    """Candidate idle lengths: d_k = max_idle_fraction · l1 · k / grid_size, k = 1..grid_size."""
    min_gain: NonNegative = 0.0
    """Insert a slot only if its expected gain G(d*) (seconds) exceeds min_gain·l1."""
    account_busy: StrictBool = True
    """Model the release of executors busy elsewhere (R); False: R = ∞ (pure Theorem 1)."""
    stream_cost: StrictBool = True
    """Charge the slot's extra waiting of the arrivals after the next one (`later_cost`);
    False: the pair alone counts, as in Theorem 1."""


# ---------------------------------------------------------------------------------------
# the pair model


def pair_cost(d: float, delta: float, l1: float, l2: float, release: float = math.inf) -> float:
    """Sum of the two JCTs: J1 (length l1) idles `d`, J2 (l2) arrives `delta` later.

    One machine (the executors J1 would occupy); a job arriving during the slot starts at
    once; J1 starts at the slot's end or, if J2 holds the machine then, when J2 ends or
    another executor frees at `release`, whichever comes first; J2 arriving after J1
    started waits for J1's end or the release. d = 0 is "no idle slot".
    """
    if delta < d:
        return l2 + max(d, min(delta + l2, release)) + l1
    return d + l1 + l2 + max(0.0, min(d + l1, release) - delta)


def _prob(lam: float, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """P(a <= δ < b) for δ ~ Exp(lam), b >= a (stable for small lam·(b − a))."""
    return np.exp(-lam * a) * -np.expm1(-lam * (b - a))


def _moment(lam: float, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """∫_a^b x λe^{−λx} dx = a e^{−λa} − b e^{−λb} + P(a, b)/λ."""
    return a * np.exp(-lam * a) - b * np.exp(-lam * b) + _prob(lam, a, b) / lam


def _breakpoints(
    d: np.ndarray | float, l1: float, l2: np.ndarray | float, rate: float, release: float
) -> tuple[np.ndarray, ...]:
    """(d, l2, r, c, e, m) of both closed forms: d and l2 as arrays, the capped release r
    and the breakpoints the expectations integrate between (see the module docstring)."""
    if not rate > 0:
        raise IdlegateError(f"the arrival rate must be > 0, got {rate!r}")
    d = np.asarray(d, dtype=float)
    l2 = np.asarray(l2, dtype=float)
    # a release later than d + l1 + l2 changes nothing: cap it so inf never meets 0
    r = np.minimum(release, d + l1 + l2 + 1.0)
    c = np.clip(d - l2, 0.0, d)
    e = np.clip(np.maximum(r, d) - l2, c, d)
    return d, l2, r, c, e, np.maximum(np.minimum(d + l1, r), d)


def expected_pair_cost(
    d: np.ndarray | float,
    l1: float,
    l2: np.ndarray | float,
    rate: float,
    release: float = math.inf,
) -> np.ndarray:
    """E[`pair_cost`(d, δ, l1, l2, release)] over δ ~ Exp(rate), in closed form.

    `d` and `l2` broadcast against each other (e.g. d of shape (K, 1), l2 of shape (N,)).
    See the module docstring for the formula.
    """
    d, l2, r, c, e, m = _breakpoints(d, l1, l2, rate, release)
    zero = np.zeros_like(d)
    during = (
        (l1 + l2) * _prob(rate, zero, d)
        + d * _prob(rate, zero, c)
        + _moment(rate, c, e)
        + l2 * _prob(rate, c, e)
        + np.maximum(r, d) * _prob(rate, e, d)
    )
    after = (d + l1 + l2) * np.exp(-rate * d) + m * _prob(rate, d, m) - _moment(rate, d, m)
    return during + after


def later_cost(
    d: float, delta: float, l1: float, l2: float, rate: float, release: float = math.inf
) -> float:
    """E[summed waits for J1 of the arrivals after J2], given J2 arrives `delta` after now.

    Arrivals after J2 form a Poisson(λ) stream (memorylessness). One arriving at t finds
    every executor busy while J1 holds the machine and no other executor has freed, i.e.
    for t in [max(δ, s1), e) with s1 J1's start and e = min(s1 + l1, R), and it waits
    e − t; the expected sum is λ/2 · ((e − max(δ, s1))⁺)². J1 starts at s1 = 0 without a
    slot; with one, at max(d, min(δ + l2, R)) if δ < d (as in `pair_cost`), else at d.
    """
    if delta < d:
        start = max(d, min(delta + l2, release))
        exposed = min(start + l1, release) - start
    else:
        exposed = min(d + l1, release) - delta
    return rate / 2.0 * max(0.0, exposed) ** 2


def _square_moment(lam: float, a: np.ndarray, b: np.ndarray, k: np.ndarray) -> np.ndarray:
    """∫_a^b (k − x)² λe^{−λx} dx = k² P(a, b) − 2k M(a, b) + Q(a, b).

    Q(a, b) = ∫_a^b x² λe^{−λx} dx = a² e^{−λa} − b² e^{−λb} + 2 M(a, b)/λ.
    """
    p = _prob(lam, a, b)
    m = _moment(lam, a, b)
    q = a * a * np.exp(-lam * a) - b * b * np.exp(-lam * b) + 2.0 * m / lam
    return k * k * p - 2.0 * k * m + q


def expected_later_cost(
    d: np.ndarray | float,
    l1: float,
    l2: np.ndarray | float,
    rate: float,
    release: float = math.inf,
) -> np.ndarray:
    """E[`later_cost`(d, δ, l1, l2, rate, release)] over δ ~ Exp(rate), in closed form.

    On δ < d the start s1 follows the pieces of `expected_pair_cost`: s1 = d on [0, c)
    (exposed min(l1, R − d)⁺), s1 = δ + l2 on [c, e) (exposed min(l1, R − l2 − δ), l1
    up to p = R − l2 − l1), s1 = R' >= R on [e, d) (nothing exposed). On δ >= d the
    exposure is m − δ, m = min(d + l1, R). So, with SQ(a, b; k) = ∫_a^b (k − x)² λe^{−λx}::

        (2/λ) E = min(l1, R − d)⁺² P(0, c) + l1² P(c, p) + SQ(p, e; R − l2) + SQ(d, m; m)

    With R = ∞ it is λ/2 [l1² (1 − e^{−λd}) + SQ(d, d + l1; d + l1)], and the increase over
    d = 0 is >= 0 whatever l2: on one executor the long job must block the stream at
    some point, and the slot only moves the block to after J2's arrival.
    """
    d, l2, r, c, e, m = _breakpoints(d, l1, l2, rate, release)
    p = np.clip(r - l2 - l1, c, e)
    first = np.maximum(np.minimum(l1, r - d), 0.0) ** 2 * _prob(rate, np.zeros_like(d), c)
    second = l1 * l1 * _prob(rate, c, p) + _square_moment(rate, p, e, r - l2)
    after = _square_moment(rate, d, m, m)
    return rate / 2.0 * (first + second + after)


def expected_gain(
    d: np.ndarray | float,
    l1: float,
    l2: Sequence[float] | np.ndarray,
    rate: float,
    release: float = math.inf,
    stream: bool = True,
) -> np.ndarray:
    """G(d): half the expected drop of the summed JCT from an idle slot of length d.

    G(d) = ½ · mean over the l2 atoms of [E[C(0)] − E[C(d)] − (E[L(d)] − E[L(0)])];
    shape of `d`. C is `pair_cost`, L is `later_cost`. With `stream=False` only the pair
    counts and G(d) is exactly the expected drop of the pair's average JCT (Theorem 1's
    criterion); with `stream=True` the extra waiting the slot causes to the arrivals
    after the next one is charged too.
    """
    l2 = np.asarray(l2, dtype=float).reshape(-1)
    if l2.size == 0:
        raise IdlegateError("expected_gain needs at least one next-job length")
    d = np.asarray(d, dtype=float)
    dd = d.reshape(-1, 1)
    base = expected_pair_cost(0.0, l1, l2, rate, release)
    cost = expected_pair_cost(dd, l1, l2[None, :], rate, release)
    drop = (base[None, :] - cost).mean(axis=1).reshape(d.shape)
    if stream:
        later = expected_later_cost(dd, l1, l2[None, :], rate, release)
        later0 = expected_later_cost(0.0, l1, l2, rate, release)
        drop = drop - (later - later0[None, :]).mean(axis=1).reshape(d.shape)
    return drop / 2.0


def best_idle(
    l1: float,
    l2: Sequence[float] | np.ndarray,
    rate: float,
    config: AnalyticIdleConfig,
    release: float = math.inf,
) -> tuple[float, float]:
    """(d*, G(d*)): the grid idle length with the largest expected gain, and that gain.

    The grid is d_k = r·l1·k/K, k = 1..K (r = `max_idle_fraction`, K = `grid_size`);
    ties go to the shorter slot; `config.stream_cost` selects the gain. (0.0, 0.0) when
    l1 <= 0.
    """
    if not l1 > 0:
        return 0.0, 0.0
    k = np.arange(1, config.grid_size + 1, dtype=float)
    grid = config.max_idle_fraction * l1 * k / config.grid_size
    gains = expected_gain(grid, l1, l2, rate, release, config.stream_cost)
    i = int(np.argmax(gains))
    return float(grid[i]), float(gains[i])


# ---------------------------------------------------------------------------------------
# online estimates


@dataclass(frozen=True, slots=True)
class ArrivalEstimate:
    """The arrival process as seen from recent history."""

    rate: float
    """Posterior mean arrival rate λ (per second)."""
    works: np.ndarray
    """Total work (executor-seconds) of the recent arrivals: the job-size atoms."""


def estimate_arrivals(
    arrival_log: Sequence[tuple[float, float]],
    now: float,
    num_executors: int,
    config: AnalyticIdleConfig,
) -> ArrivalEstimate:
    """λ and the job-size atoms from the last `config.window` entries of `arrival_log`.

    λ = (α₀ + n) / (α₀/λ₀ + T): a Gamma(α₀, α₀/λ₀) prior updated with n arrivals (those
    after the window's first one) observed over T = now − (the window's first arrival).
    """
    recent = arrival_log[-config.window :]
    if not recent:
        raise IdlegateError("no arrival yet: the analytic rule needs at least one job")
    works = np.fromiter((w for _, w in recent), dtype=float, count=len(recent))
    rate = gamma_poisson_rate(
        recent,
        works,
        now,
        num_executors,
        config.prior_rate,
        config.prior_load,
        config.prior_strength,
    )
    return ArrivalEstimate(rate=rate, works=works)


def expected_first_release(jobs: Sequence[Job]) -> float:
    """E[time until the first busy executor frees] (∞ when no executor is busy).

    An executor on stage s (task estimate D, m executors on it, u tasks not launched)
    frees at D·u/m + U·D with U ~ Uniform(0, 1) — its current task taken as uniformly
    aged, the stage's remaining tasks as shared evenly. Executors are independent, so
    E[min] = ∫ Π_s P(T_s > t)^{m_s} dt, integrated by the trapezoid rule.
    """
    shifts: list[float] = []
    spans: list[float] = []
    counts: list[int] = []
    for job in jobs:
        if job.held == 0:
            continue
        for s in job.stages:
            if s.executors > 0:
                shifts.append(s.duration * s.remaining / s.executors)
                spans.append(max(s.duration, 1e-12))
                counts.append(s.executors)
    if not counts:
        return math.inf
    shift = np.array(shifts)
    span = np.array(spans)
    end = float((shift + span).min())
    t = np.linspace(0.0, end, _RELEASE_POINTS)[:, None]
    survive = np.clip(1.0 - (t - shift) / span, 0.0, 1.0) ** np.array(counts)
    s = survive.prod(axis=1)
    return float(((s[1:] + s[:-1]) / 2.0).sum() * (end / (_RELEASE_POINTS - 1)))


# ---------------------------------------------------------------------------------------
# the scheduler


@dataclass(frozen=True, slots=True)
class IdleEvaluation:
    """What the rule computed for one candidate launch (for explanations and tests)."""

    stage: tuple[int, int]
    """(job id, stage index) of the stage the base launches."""
    executors: int
    """n: the executors the launch would occupy (all free ones)."""
    l1: float
    """The job's remaining length on held + n executors (at least its critical path)."""
    rate: float
    """Estimated arrival rate λ."""
    newcomer_executors: float
    """Executors a newcomer is taken to use: min(n, median average width)."""
    release: float
    """Expected time until an executor busy elsewhere frees (∞: none busy)."""
    idle: float
    """Best grid idle length d*."""
    gain: float
    """Expected gain G(d*) (seconds): half the expected drop of the summed JCT."""
    inserted: bool
    """Whether the slot is inserted (gain above the threshold)."""


class AnalyticIdleScheduler:
    """A base heuristic plus the analytic idle rule (Duan & Wu's Theorem 1, applied online).

    `decide` asks the base; when the base launches a stage and the four conditions of the
    module docstring hold, it inserts the idle slot d* that maximises the expected gain
    of the pair model, if that gain is positive. Deterministic given the base.
    """

    def __init__(
        self,
        base: Scheduler | str = "sjf-cp",
        config: AnalyticIdleConfig | None = None,
        **base_params: Any,
    ) -> None:
        if isinstance(base, str):
            base = make_scheduler(base, **base_params)
        elif base_params:
            raise IdlegateError("base parameters go with a base given by name, not an instance")
        if not callable(getattr(base, "decide", None)):
            raise IdlegateError(f"base must be a scheduler or a scheduler name, got {base!r}")
        self.base: Scheduler = base
        self.config = config or AnalyticIdleConfig()
        self.name = f"analytic+{getattr(base, 'name', type(base).__name__)}"
        self.idles = 0
        """Idle slots inserted since the last `reset`."""
        self.idle_seconds = 0.0
        """Their total length."""

    def __repr__(self) -> str:
        return f"AnalyticIdleScheduler({self.base!r}, {self.config!r})"

    def reset(self, rng: Any) -> None:
        """Start of a run: reset the base (it gets `rng`) and the counters."""
        self.base.reset(rng)
        self.idles = 0
        self.idle_seconds = 0.0

    def decide(self, view: ClusterView) -> Action:
        """The base's decision, with an idle slot inserted where the pair model says so."""
        action = self.base.decide(view)
        if not isinstance(action, Decision):
            return action
        evaluation = self.explain(view, action)
        if evaluation is None or not evaluation.inserted:
            return action
        self.idles += 1
        self.idle_seconds += evaluation.idle
        job = action.stage.job
        return Decision(action.stage, max(action.parallelism_cap, job.held), evaluation.idle)

    def explain(self, view: ClusterView, decision: Decision) -> IdleEvaluation | None:
        """The rule's evaluation of `decision`, or None when no slot may be considered.

        Pure: reads `view`, changes nothing. A base that shares the evaluation among rules
        alike but for their threshold (`shared_evaluation`: a shared replay's, as
        `portfolio.runs._Once`) is asked for it.
        """
        shared = getattr(self.base, "shared_evaluation", None)
        found = self.evaluate(view, decision) if shared is None else shared(self, view, decision)
        if found is None:
            return None
        inserted = (
            found.idle > 0 and found.gain > max(self.config.min_gain, _NUMERIC_SLACK) * found.l1
        )
        return found if found.inserted == inserted else replace(found, inserted=inserted)

    @property
    def evaluation_key(self) -> str:
        """What `evaluate` is a function of beyond the view and the decision: the config
        but its threshold (`min_gain` only sets `inserted`, which `explain` works out), so
        that rules alike but for it may share one evaluation (`portfolio.runs._Shared`)."""
        return repr(self.config.model_copy(update={"min_gain": 0.0}))

    def evaluate(self, view: ClusterView, decision: Decision) -> IdleEvaluation | None:
        """`explain`'s evaluation, its `inserted` by this rule's threshold (pure)."""
        n = self._idle_executors(view, decision)
        if n == 0:
            return None
        cfg = self.config
        job = decision.stage.job
        l1 = max(job.remaining_work / (job.held + n), job.remaining_cp)
        pool = effective_executors(view, [j.dag for j in view.jobs])
        est = estimate_arrivals(view.arrival_log, view.now, pool, cfg)
        # (statistics.median: numpy's value, the middle one or the mean of the two, for
        # less than np.median's array and partition, asked at every question of a replay)
        width = median([j.average_width for j in view.jobs])
        k2 = min(float(n), max(1.0, width))
        release = expected_first_release(view.jobs) if cfg.account_busy else math.inf
        d, gain = best_idle(l1, est.works / k2, est.rate, cfg, release)
        inserted = d > 0 and gain > max(cfg.min_gain, _NUMERIC_SLACK) * l1
        return IdleEvaluation(decision.stage.key, n, l1, est.rate, k2, release, d, gain, inserted)

    @staticmethod
    def _idle_executors(view: ClusterView, decision: Decision) -> int:
        """n if the four conditions of the module docstring hold, else 0."""
        stage = decision.stage
        job = stage.job
        if decision.idle_delay > 0 or stage.launched or stage.delayed:
            return 0
        free = view.free_executors
        # on a resource pool the tasks of the stage that fit the free resources are what
        # is free for it (a pods-only pool's stage has no need: its free executors)
        room = free if stage.need is None else min(free, stage.need.room())
        n = stage.tasks if stage.gang else min(free, decision.parallelism_cap - job.held)
        n = min(n, stage.remaining, room)
        if n != room or n <= 0:
            return 0
        if not _only_launchable(view, stage):
            return 0
        # (last: a pass over every stage of every job, where the one above is over the
        # jobs' runnable lists; the conditions are pure, so their order is no answer's)
        if any(s.idle_until is not None for j in view.jobs for s in j.stages):
            return 0
        return n


def _only_launchable(view: ClusterView, stage: Stage) -> bool:
    """Whether `view.runnable_stages()` is `stage` alone, read only up to a second stage:
    a queue flooded with hundreds of workflows has many, and listing them at each
    question was a pass over the flood (issue 96). The same rule as the list's: a job's
    stages as the view shows them (`runnable`), those whose next task fits (`launchable`;
    on a pool of pods, a gang's tasks within the free executors)."""
    free, found = view.free_executors, False
    for job in view.jobs:
        for other in view.runnable(job):
            if launchable(other, free):
                if found or other is not stage:
                    return False
                found = True
    return found


def make_analytic(
    base: Scheduler | str = "sjf-cp", *, base_params: dict[str, Any] | None = None, **config: Any
) -> AnalyticIdleScheduler:
    """Registry factory: `make_scheduler("analytic", base="fair", window=30)` calls this.

    Every `AnalyticIdleConfig` field is a keyword (its signature lists them, so the
    registry's parameter check names them); `base_params` go to the base heuristic's
    constructor.
    """
    return AnalyticIdleScheduler(base, AnalyticIdleConfig(**config), **(base_params or {}))


CONFIG_FIELDS: tuple[str, ...] = tuple(AnalyticIdleConfig.model_fields)
"""The config's parameter names, as `make_analytic` accepts them."""

_KEYWORD = inspect.Parameter.KEYWORD_ONLY
_SIGNATURE = inspect.signature(make_analytic)
# inspect reads a function's __signature__, which typeshed does not declare on functions
make_analytic.__signature__ = _SIGNATURE.replace(  # type: ignore[attr-defined]
    parameters=[
        *list(_SIGNATURE.parameters.values())[:2],
        *(
            inspect.Parameter(k, _KEYWORD, default=f.default)
            for k, f in AnalyticIdleConfig.model_fields.items()
        ),
    ]
)
