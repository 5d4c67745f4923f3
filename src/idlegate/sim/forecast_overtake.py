"""Being overtaken: the top of a waiting workflow's interval when the replays invent no arrivals.

A live pool's replays invent no arrivals by default (``--forecast-arrivals none``), so no
replay has a workflow submitted later go ahead of one waiting now; under a rule that orders
by size (`srpt`, `sjf-cp`, `sjf`) a smaller later one does, and on the live benchmark
(issue 80) the 8 workflows submitted a minute after a burst of 40 made the burst's tail
start after its interval's top, every miss late. Replays that repeat whole past bursts
were tried and dropped: a repeated 40-burst overtook the tail in most replays, and what
the pool had seen could not tell the 8 that came from another 40.

So the arrivals are counted here, honestly and only from the pool's own past: its
*arrival events*, arrivals less than `BURST_GAP` seconds after the one before joining its
event (a burst counts once), make a Poisson process of unknown rate λ. From its last
`EVENTS` events, n after the first over the T seconds from the first to now, λ's
posterior under the scale-free prior 1/λ is Gamma(n, T) (mean n/T, the plain estimate;
proper from the first gap on: a pool that has seen one event only has no rate yet, and
nothing is added). Each event is one workflow like the pool's recent ones (`Overtake.
sizes`: a burst counts as one arrival of one workflow, never as a repeat of itself). Over
the L seconds a workflow waits, one goes ahead of it with the share p of recent arrivals
that the admission would start first: those of a higher priority, and of its own those
whose key under the pool's rule (its ``order_key``) is smaller than its own (ties go to
the one that came first), the order its position is numbered in (issue 93:
`idlegate.sim.admission_entries.Entries.in_order`); with λ Gamma-distributed the count
ahead is negative binomial,

    N ~ NB(n, T / (T + pL)),   P(N = k) = C(k + n − 1, k) · s^n · (1 − s)^k,  s = T/(T + pL),

and the workflow starts later by the `LEVEL` quantile of N (`count_quantile`) times the
mean work of those smaller arrivals over the pool's executors (`Overtake.delay`). Its
start's and its finish's interval tops are raised by that (`widen`); the point forecast
and the bottom stay the replays'. A rule with no order key (`fifo`, `fair`...) lets only
a later arrival of higher priority ahead here, and a started workflow is not delayed.

What it does not know: when a stream will send a burst again (each event is one
workflow), which queue a later arrival joins (any goes ahead by its priority and key),
the priority of an arrival read back from the history after a restart (0), and how long
the arrivals' tasks really run (their declared work).
Pure: no clock, no I/O; the same inputs give the same interval.
"""

from __future__ import annotations

import bisect
import dataclasses
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cached_property
from itertools import accumulate
from statistics import NormalDist
from typing import TypeAlias

from idlegate.sim.cluster import Cluster
from idlegate.sim.dag import Dag
from idlegate.sim.forecast import HIGH, PoolForecast, WorkflowForecast

BURST_GAP = 2.0
"""Seconds: an arrival less than this after the one before it joins its event (a burst
counts once), as a forecast refresh waits for a burst to pause this long before it
replays it (`operator.forecasting.book.DEBOUNCE`)."""
EVENTS = 50
"""The most recent arrival events the rate is fitted on."""
LEVEL = HIGH
"""The quantile of the count ahead that raises the interval's top: the top's own."""
EXACT = 200.0
"""Mean counts up to this sum the negative binomial's terms; above it (a long wait on a
busy stream) its normal approximation gives the quantile (`count_quantile`)."""
KEYS = {"remaining_work": 0, "total_work": 0, "remaining_cp": 1}
"""A rule's order key → the item of a recent arrival's `Size` that is a new arrival's key
(a new workflow's remaining work is its DAG's total work, its remaining critical path its
DAG's critical path)."""

Size: TypeAlias = tuple[float, float, int]
"""A recent arrival as `Overtake.sizes` keeps it: (total work, critical path, priority)."""


def arrival_events(times: Iterable[float], gap: float = BURST_GAP) -> list[float]:
    """The first arrival time of each arrival event among `times` (any order): an arrival
    less than `gap` seconds after the one before it joins its event."""
    events: list[float] = []
    last = -math.inf
    for t in sorted(times):
        if t - last >= gap:
            events.append(t)
        last = t
    return events


def count_quantile(shape: float, success: float, level: float = LEVEL) -> int:
    """The `level` quantile of the negative binomial NB(`shape`, `success`): the least k
    with P(N ≤ k) ≥ `level`, where P(N = 0) = s^r and P(N = k + 1) = P(N = k) · (k + r) /
    (k + 1) · (1 − s) (r = `shape` > 0, s = `success` in (0, 1]). Past a mean of `EXACT`
    the normal approximation, mean + z · sd (mean r(1 − s)/s, variance mean/s), rounded
    up."""
    if shape <= 0 or not 0.0 < success <= 1.0:
        raise ValueError(f"NB({shape}, {success}): its shape is > 0 and success in (0, 1]")
    mean = shape * (1.0 - success) / success
    if mean > EXACT:
        sd = math.sqrt(mean / success)
        return math.ceil(mean + NormalDist().inv_cdf(level) * sd)
    p = success**shape
    total, k = p, 0
    while total < level and p > 0.0:
        p *= (k + shape) / (k + 1) * (1.0 - success)
        k += 1
        total += p
    return k


@dataclass(frozen=True)
class Overtake:
    """What the pool's own past says of arrivals to come (module docstring): `events`
    (n) arrival events after the first over `exposure` (T) seconds until the forecast,
    the recent arrivals' `sizes`, and the pool's size in tasks, `executors`."""

    events: int
    exposure: float
    sizes: tuple[Size, ...]
    executors: float

    @classmethod
    def of(
        cls,
        log: Sequence[tuple[float, float]],
        now: float,
        sizes: Iterable[Size],
        executors: float,
    ) -> Overtake | None:
        """From the pool's (time, work) arrival `log` until `now`, its recent arrivals'
        `sizes` (`size_of`) and its size in tasks; None while it has seen no gap between
        two events (no rate), nor any arrival to copy."""
        events = arrival_events(t for t, _ in log if t <= now)[-EVENTS:]
        sizes = tuple(sizes)
        if len(events) < 2 or not sizes or executors <= 0 or now <= events[0]:
            return None
        return cls(len(events) - 1, now - events[0], sizes, float(executors))

    def delay(self, key: str | None, own: float, lead: float, priority: int = 0) -> float:
        """Seconds a workflow of `priority` whose key under the rule's order `key` is `own`
        starts later than the replays say, at the `LEVEL` quantile, after waiting `lead`
        seconds: the count ahead (`count_quantile`) times the mean work of the recent
        arrivals that go ahead of it (of a higher priority, or of its own with a smaller
        key; a rule without an order key: of a higher priority), over `executors`. 0 when
        no recent arrival goes ahead, or with no wait."""
        if lead <= 0.0:
            return 0.0
        index = KEYS.get(key or "")
        keys, works = self._ordered(index)
        below = bisect.bisect_left(keys, (-priority, 0.0 if index is None else own))
        if below == 0:
            return 0.0
        share = below / len(keys)
        ahead = count_quantile(self.events, self.exposure / (self.exposure + share * lead))
        return ahead * (works[below - 1] / below) / self.executors

    @cached_property
    def ranked(self) -> bool:
        """Whether a recent arrival is of a priority other than 0 (it may go ahead under
        any rule)."""
        return any(s[2] for s in self.sizes)

    def _ordered(self, index: int | None) -> tuple[list[tuple[int, float]], list[float]]:
        """The arrivals' (−priority, key: item `index` of their size, None: none) in the
        order they would start, and the running sums of their work in that order (once a
        forecast per key: `delay` is asked per workflow)."""
        kept = self._orders.get(index)
        if kept is None:
            ranks = sorted((-s[2], 0.0 if index is None else s[index], s[0]) for s in self.sizes)
            kept = [(p, k) for p, k, _ in ranks], list(accumulate(w for _, _, w in ranks))
            self._orders[index] = kept
        return kept

    @cached_property
    def _orders(self) -> dict[int | None, tuple[list[tuple[int, float]], list[float]]]:
        return {}


def size_of(dag: Dag, priority: int = 0) -> Size:
    """A recent arrival's size as `Overtake.sizes` keeps it, of its DAG and priority."""
    return dag.total_work, dag.critical_path, priority


def widen(
    result: PoolForecast, cluster: Cluster, overtake: Overtake, key: str | None
) -> PoolForecast:
    """`result` (a forecast of `cluster`, whose replays invented no arrivals) with each
    waiting workflow's start and finish interval tops raised by `Overtake.delay` over
    its wait (from the forecast to its start), by its priority and the rule's order `key`."""
    keyed = key is not None and key in KEYS
    if not keyed and not overtake.ranked:
        return result
    waiting = {j.id: j for j in cluster.jobs if j.first_start is None}
    out = []
    for entry in result.workflows:
        job = waiting.get(entry.job_id)
        if job is None or not isinstance(entry, WorkflowForecast):
            out.append(entry)
            continue
        own = getattr(job, key) if keyed and key is not None else 0.0
        late = overtake.delay(key, own, entry.start.median - result.now, job.priority)
        out.append(raised(entry, late))
    return PoolForecast(result.now, result.replays, tuple(out), result.events)


def raised(entry: WorkflowForecast, late: float) -> WorkflowForecast:
    """`entry` with its start's and finish's interval tops `late` seconds later (the point
    forecast and the bottom stay the replays'): what being overtaken adds (`widen`; the
    paired measurement, benchmarks/live_forecast_paired.py, adds it as the pool would)."""
    start = entry.start._replace(high=entry.start.high + late)
    finish = entry.finish._replace(high=entry.finish.high + late)
    return dataclasses.replace(entry, start=start, finish=finish)
