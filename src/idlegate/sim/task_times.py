"""How long a live pool's tasks take against what their stages declare, learned from the pool.

A forecast replays a pool forward drawing each task's time (`sim.forecast`): in the
operator, from the times its stage's tasks took so far, else the stage's declared
``taskDurationSeconds`` (`sim.durations.MeasuredDurations`). A waiting workflow has no
measured task, so its replays ran every task for exactly what it declares: on a pool whose
tasks run longer than declared, or start seconds after their release (binding, image pull,
container start), every forecast came out early, and with no spread (issue 80: early by a
median 32-44 s, the intervals holding 25-49 %). So a pool learns, from its own tasks as
they end (`TaskTimes.record`), two things per task:

* its **latency**: from its release to the operator seeing its pod ``Running``;
* its **stretch**: the time it then ran ÷ the duration its stage declares;

and the replays draw a task of a stage with nothing measured as latency + stretch ×
declared, a latency of the pool's last `LATENCIES` tasks and a stretch of its last
`WINDOW`, each drawn at random (`MeasuredDurations`'s `times`; the stretches corrected for
the tasks still running, `TaskTimes.frozen`): the bias goes, and the interval spreads as
the pool's tasks do. A pool that has not seen `EVIDENCE` of its tasks end knows neither
(`TaskTimes.ready`): the operator then says so instead of forecasting
(`operator.forecasting.book`).

Within one replay every task draws from the same pool-wide shift of these (`LiveTimes.
begin`): what the pool's few tasks seen so far leave unknown is how its tasks run *on
average*, and a replay that draws it task by task averages it away over a long queue, as
if known. So each replay first draws that average's error, on the log of the stretch and
on the latency, a normal draw with the standard error of the mean of the pool's tasks
(their spread ÷ √n, times Student's t for n − 1 degrees of freedom): the interval is wide
while few tasks have ended, and narrows as they accrue, from the pool's own tasks, not from
a prior fitted anywhere else.

Each task, as it ends, is also scored against what the pool's tasks before it predicted
of it (`TaskTimes.told`, `predict`): how far off the pool's own account of its tasks is,
which widens a cold pool's intervals before any of its forecasts came out
(`sim.forecast_calibration.cold_margin`).

A third thing a pool learns is its **dispatch delay**: a task's end seen frees its room,
but the next task released into it waits for the operator's next decision round (the
rounds of a burst are paced, `operator.lag.pacing.ARRIVALS_ROUND`; a pool that follows its nodes
reads them again first), where the simulator's engine releases it at the end itself. A
replay that leaves it out starts a waiting workflow early by a delay per run of tasks
ahead of it (on the live benchmark a small share of a task: docs/research/forecasts.md,
"The operator's dispatch delay"). So the pool keeps the ends whose room went free
(`TaskTimes.freed`) and, at each round that releases tasks, pairs them with the latest of
those rooms, each pair a delay (`TaskTimes.dispatched`; the rooms such a round left
untaken waited on no round, and are dropped). A replay adds a delay of the pool's last
`LATENCIES` where a stage starts on an executor (a decision's launch, `LiveTimes.draw`'s
`first`) and after each task running at the fork (`LiveTimes.delay`): each executor's run
of tasks then ends a delay later, and what waits for it starts as late as the operator
starts it. A task going on with its stage on the same executor is released as the one
before ends (`Cluster.task_finished`), and draws none. Its release to ``Running`` is its
latency, above.

Pure: no clock, no I/O. The operator keeps one per pool (the core records, the refresh
reads a `frozen` copy, which crosses to the replay process by pickling).
"""

from __future__ import annotations

import bisect
import math
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from statistics import NormalDist

import numpy as np

LOW, HIGH = 0.1, 0.9
"""The quantiles of the 80 % interval: a forecast's (`sim.forecast`, which imports them
from here) and a task's predicted time's (`TaskTimes.predict`)."""
WINDOW = 200
"""Tasks kept: the most recent, so that what is learned follows a pool that changes."""
LATENCIES = 50
"""Tasks whose latencies the replays draw from: the most recent (`TaskTimes.frozen`)."""
EVIDENCE = 10
"""Tasks that must have ended before a pool's forecasts draw from them (`TaskTimes.ready`)."""
PREDICTS = 2
"""Tasks that must have ended before the next one's time is predicted and scored
(`TaskTimes.told`): the fewest whose times have a spread."""


class TaskTimes:
    """A pool's last `WINDOW` tasks' (latency, stretch) (module docstring)."""

    def __init__(self) -> None:
        self.seen: deque[tuple[float, float]] = deque(maxlen=WINDOW)
        self.delays: deque[float] = deque(maxlen=LATENCIES)
        """The last `LATENCIES` dispatch delays: a freed room's end seen to the decision
        round that released a task into it (`freed`, `dispatched`)."""
        self.free: deque[float] = deque()
        """When each room freed since the last round that released tasks went free
        (`freed`, `dispatched`)."""
        self.told: deque[tuple[float, float, float, float]] = deque(maxlen=WINDOW)
        """Each of the last `WINDOW` tasks' time as the pool's tasks before it predicted it
        (`predict`: low, median, high) and as it came out (held): how far off the pool's
        own account of its tasks is, which a cold pool's intervals are widened by
        (`sim.forecast_calibration.cold_margin`) before any of its forecasts came out."""

    def record(self, declared: float, held: float, running: float | None) -> None:
        """A task whose stage declares `declared` seconds held its executor `held` seconds,
        from its release to its observed end, the last `running` of them running (None:
        its pod was not seen ``Running``, and all of `held` counts as its run). A stage
        that declares no positive duration teaches nothing of stretch. Its time is first
        scored against what the tasks before it predicted (`told`), once `PREDICTS` have
        ended: a forecast of the pool's, made before its outcome, as a workflow's is."""
        if not declared > 0 or not held >= 0:
            return
        if len(self.seen) >= PREDICTS:
            self.told.append((*self.predict(declared), held))
        ran = held if running is None else min(max(running, 0.0), held)
        self.seen.append((held - ran, ran / declared))

    def freed(self, now: float) -> None:
        """A task's end seen at `now` freed its room (no task of its stage goes on there):
        the next task released into it waits for a round (`dispatched`)."""
        self.free.append(now)

    def dispatched(self, now: float, released: int, waiting: bool) -> None:
        """A decision round at `now` released `released` tasks: each takes a room freed
        since the last round that released any, the latest first (the end the round
        answers), a delay of `now` less its end. A round that released none leaves the
        rooms to a later one while work is `waiting` (a pool that follows its nodes sees a
        room once it read them again); the rooms a releasing round left untaken, or any
        once nothing waits, waited on no round of the operator's (a stage no room fits, a
        quota, an idle pool): dropped, so that a room freed long ago is never paired with
        a release it did not wait for."""
        for _ in range(min(released, len(self.free))):
            self.delays.append(max(0.0, now - self.free.pop()))
        if released or not waiting:
            self.free.clear()

    def predict(self, declared: float) -> tuple[float, float, float]:
        """The 10th, 50th and 90th percentiles (`LOW`, `HIGH`) of the time a task declaring
        `declared` seconds holds its executor, by the pool's last `LATENCIES` tasks: each
        latency with each stretch, as a replay pairs them (`LiveTimes.draw`; without the
        running tasks' correction and the error of the average, which the replays add)."""
        last = list(self.seen)[-LATENCIES:]
        latencies = np.fromiter((p[0] for p in last), float, len(last))
        stretches = np.fromiter((p[1] for p in last), float, len(last))
        times = np.add.outer(latencies, stretches * declared).ravel()
        low, median, high = np.quantile(times, (LOW, 0.5, HIGH))
        return float(low), float(median), float(high)

    @property
    def ready(self) -> bool:
        """Whether `EVIDENCE` tasks have ended: enough to draw from, and to say how far
        their average is known."""
        return len(self.seen) >= EVIDENCE

    def median_known(self, running: Iterable[tuple[float, float]] = ()) -> bool:
        """Whether the pool's ended tasks, with those `running` (as `frozen` takes them),
        tell the median of its tasks' stretch: Kaplan-Meier's estimate of it reaches one
        half at an ended task. Before, the tasks that ended are a burst's quick ones, and
        its middle is a lognormal's extrapolation from them (issue 97: a cold burst's first
        forecasts, made at its 10th end, held 6 % of its starts)."""
        observed = [(p[1], True) for p in self.seen]
        observed += [(ran / declared, False) for ran, declared in running if declared > 0]
        return _product_limit(observed)[4] <= 0.5

    def frozen(self, running: Iterable[tuple[float, float]] = ()) -> LiveTimes:
        """What a refresh's replays draw from, as it is now; `running`: (seconds it has run
        since its pod was seen ``Running``, declared seconds) of each task running now.

        The tasks that end first are the quick ones: in a burst the pool has seen only
        them when its first forecasts are made, and their stretches alone would make every
        forecast early. A running task's stretch is known to exceed what it has run so far
        ÷ what it declares: the stretches are the Kaplan-Meier estimate over both, the
        ended tasks' and these censored ones, and the weight left beyond the last ended
        task goes to the running ones beyond it (`kaplan_meier`: past what they have run,
        as a lognormal fitted to all of them says). The latencies are the last
        `LATENCIES` tasks': a latency follows the pool's load (a burst's first pods wait
        on the operator's own writes), and what comes next starts as the last did."""
        latencies = tuple(p[0] for p in list(self.seen)[-LATENCIES:])
        observed = [(p[1], True) for p in self.seen]
        observed += [(ran / declared, False) for ran, declared in running if declared > 0]
        stretches, cumulative = kaplan_meier(observed)
        return LiveTimes(latencies, stretches, cumulative, len(self.seen), tuple(self.delays))


def kaplan_meier(
    observed: Sequence[tuple[float, bool]],
) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """The distribution the Kaplan-Meier estimator gives of positive values `observed` as
    (value, ended) (ended False: censored, the value only a lower bound), as (values,
    cumulative weights), ascending.

    Beyond the last ended value Kaplan-Meier knows only how much weight is left, not where
    it lies. Placing it at the censored values themselves (the least they take) made a
    burst's first forecasts early: its quick tasks end first, and the rest, all still
    running, were counted as ending now (issue 80). So the weight left goes, in equal
    shares, to the censored values beyond the last ended one, each moved to where a
    lognormal fitted to all the values by maximum likelihood (`censored_lognormal`) puts
    the same rank among values past the last ended one, and never below what it has run."""
    ordered, last, values, weights, left = _product_limit(observed)
    tail = [v for v, _ in ordered[last + 1 :]]
    if tail and last >= 0:  # (none ended: nothing known of what they take)
        values += _beyond(ordered, values[-1], tail)
        weights += [left / len(tail)] * len(tail)
    total, cumulative = 0.0, []
    for w in weights:
        total += w
        cumulative.append(total)
    return tuple(values), tuple(c / total for c in cumulative) if total else ()


def _product_limit(
    observed: Sequence[tuple[float, bool]],
) -> tuple[list[tuple[float, bool]], int, list[float], list[float], float]:
    """Kaplan-Meier's product-limit over `observed` (value, ended): the values in order,
    the index of the last ended one (-1: none), the ended values with their weights, and
    the weight it leaves beyond the last ended value (what it does not know where lies)."""
    ordered = sorted(observed, key=lambda o: (o[0], not o[1]))  # (ties: the ended first)
    last = max((i for i, (_, ended) in enumerate(ordered) if ended), default=-1)
    at_risk, left = len(ordered), 1.0
    values: list[float] = []
    weights: list[float] = []
    for value, ended in ordered[: last + 1]:
        if ended:
            share = left / at_risk
            values.append(value)
            weights.append(share)
            left -= share
        at_risk -= 1
    return ordered, last, values, weights, left


def _beyond(observed: Sequence[tuple[float, bool]], end: float, tail: list[float]) -> list[float]:
    """The censored values `tail` (ascending, each past `end`, the last ended value) as the
    lognormal fitted to `observed` places as many values past `end`: the midpoints of equal
    shares of its weight there, each raised to the censored value of its rank; `tail`
    itself where no lognormal fits (the ended values all equal)."""
    fit = censored_lognormal(observed)
    if fit is None:
        return tail
    mu, sigma = fit
    normal = NormalDist(mu, sigma)
    below = normal.cdf(math.log(end))
    top = math.nextafter(1.0, 0.0)
    ranks = (min(below + (1.0 - below) * (j + 0.5) / len(tail), top) for j in range(len(tail)))
    return [max(math.exp(normal.inv_cdf(r)), v) for r, v in zip(ranks, tail, strict=True)]


def censored_lognormal(observed: Sequence[tuple[float, bool]]) -> tuple[float, float] | None:
    """The maximum-likelihood normal (mean, standard deviation) of the logs of positive
    values `observed` as (value, ended), a censored one only a lower bound, by
    expectation-maximisation (each step fills in a censored log by the normal's mean and
    square beyond it, and refits; the likelihood never falls); None where the ended values
    have no spread to start from."""
    ended = np.log([v for v, e in observed if e and v > 0])
    bounds = np.log([v for v, e in observed if not e and v > 0])
    if len(ended) < 2 or not float(np.std(ended)) > 0:
        return None
    n = len(ended) + len(bounds)
    mu, sigma = float(np.mean(ended)), float(np.std(ended))
    for _ in range(1000):
        a = (bounds - mu) / sigma
        hazard = _hazard(a)
        first = float(ended.sum() + np.sum(mu + sigma * hazard))
        second = float(np.sum(ended**2) + np.sum(mu**2 + sigma**2 + sigma * (bounds + mu) * hazard))
        new_mu = first / n
        new_sigma = math.sqrt(max(second / n - new_mu**2, 0.0))
        done = abs(new_mu - mu) + abs(new_sigma - sigma) < 1e-12
        mu, sigma = new_mu, new_sigma
        if done or not sigma > 0:
            break
    return (mu, sigma) if sigma > 0 else None


def _hazard(a: np.ndarray) -> np.ndarray:
    """The standard normal's density over its upper tail at each of `a` (the inverse Mills
    ratio): how far past a bound a censored value lies, on average, in standard units. The
    tail is erfc's, exact where 1 − Φ(a) rounds to 0; past 37 standard units erfc itself
    underflows, and the ratio is a's to within 1/a."""
    far = a > 37.0
    safe = np.where(far, 0.0, a)
    density = np.exp(-0.5 * safe**2) / math.sqrt(2.0 * math.pi)
    tail = 0.5 * np.vectorize(math.erfc)(safe / math.sqrt(2.0))
    return np.where(far, a + 1.0 / np.maximum(a, 1.0), density / tail)


T90 = (6.31, 2.92, 2.35, 2.13, 2.02, 1.94, 1.89, 1.86, 1.83, 1.81)
"""Student's t, 95th percentile, for 1-10 degrees of freedom; beyond, `Z90` × (1 + 1/(4·df))."""
Z90 = 1.645


def t_scale(df: int) -> float:
    """How much wider Student's t with `df` degrees of freedom is than the normal (its
    95th percentile over the normal's): a mean known from few tasks is known less well."""
    if df <= len(T90):
        return T90[df - 1] / Z90
    return 1.0 + 1.0 / (4.0 * df)


def _error(values: np.ndarray, weights: np.ndarray | None, n: int) -> float:
    """The standard error of the mean of `values` (with `weights`, summing to 1), known from
    `n` of them, widened by Student's t for n − 1 degrees of freedom; 0 below two."""
    if n < 2 or not len(values):
        return 0.0
    if weights is None:
        weights = np.full(len(values), 1.0 / len(values))
    mean = float(np.dot(weights, values))
    sd = math.sqrt(float(np.dot(weights, (values - mean) ** 2)) * n / (n - 1))
    return t_scale(n - 1) * sd / math.sqrt(n)


@dataclass
class LiveTimes:
    """A frozen copy of a pool's task times: the latencies of its ended tasks, the stretches
    (ascending, `TaskTimes.frozen`) with their cumulative weights, and the pool-wide error
    of their average the replay drawing from them now takes (`begin`)."""

    latencies: tuple[float, ...]
    stretches: tuple[float, ...]
    cumulative: tuple[float, ...]
    ended: int = 0
    """The ended tasks the stretches come from (the rest: running ones, censored)."""
    delays: tuple[float, ...] = ()
    """The pool's last dispatch delays (module docstring; none: no delay is drawn)."""
    shift: tuple[float, float, float] = (0.0, 1.0, 0.0)
    """This replay's error of the average (latency added, factor on the stretch, delay
    added)."""
    _spread: tuple[float, float, float] | None = field(default=None, repr=False)

    @property
    def usable(self) -> bool:
        return bool(self.latencies and self.stretches)

    @property
    def spread(self) -> tuple[float, float, float]:
        """The standard errors of the pool's averages a replay draws its error of (`begin`):
        of the latency (seconds), of the log of the stretch, of the delay (seconds)."""
        if self._spread is None:
            self._spread = (
                _error(np.asarray(self.latencies), None, len(self.latencies)),
                _error(np.log(np.maximum(np.asarray(self.stretches), 1e-9)),
                       np.diff(np.asarray((0.0, *self.cumulative))), self.ended),
                _error(np.asarray(self.delays), None, len(self.delays)),
            )  # fmt: skip
        return self._spread

    @property
    def typical(self) -> float:
        """The pool's typical stretch its replays draw around: the geometric mean of the
        stretches (the exponent of their log's mean, whose error `spread` gives)."""
        weights = np.diff(np.asarray((0.0, *self.cumulative)))
        return math.exp(float(np.dot(weights, np.log(np.maximum(self.stretches, 1e-9)))))

    def begin(self, rng: np.random.Generator) -> None:
        """A new replay: draw its error of the pool's average (module docstring)."""
        spread = self.spread
        z = rng.standard_normal(3 if self.delays else 2)
        late = float(z[2]) * spread[2] if self.delays else 0.0
        self.shift = (float(z[0]) * spread[0], math.exp(float(z[1]) * spread[1]), late)

    def draw(self, declared: float, u: Callable[[], float], first: bool = False) -> float:
        """A task declaring `declared` seconds: a latency and a stretch of the pool's (`u`:
        uniform draws in [0, 1)), shifted by this replay's error of the average; where a
        stage starts on its executor (`first`: a decision's launch), a dispatch delay
        after it (`delay`)."""
        latency = self.latencies[int(u() * len(self.latencies))]
        stretch = self.stretches[
            min(bisect.bisect_right(self.cumulative, u()), len(self.stretches) - 1)
        ]
        added, factor, _ = self.shift
        ran = max(0.0, latency + added) + stretch * factor * declared
        return ran + self.delay(u) if first else ran

    def delay(self, u: Callable[[], float]) -> float:
        """A dispatch delay of the pool's, shifted by this replay's error of their average
        (0 without any): what an executor's run of tasks waits, once it ends, for the
        round that releases the next task into it (module docstring)."""
        if not self.delays:
            return 0.0
        return max(0.0, self.delays[int(u() * len(self.delays))] + self.shift[2])
