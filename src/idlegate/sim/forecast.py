"""When will it run? Forecasts of every workflow's start and finish from the present state.

Pure, like the rest of `sim`: the forecaster forks the cluster (`sim.rollout.planning_fork`:
running tasks with their start, waiting workflows, queues and quotas, the pool's nodes),
replays the fork forward under the scheduler the pool runs, M times, and reads in each
replay when every workflow present now started and finished. Over the M replays it gives
each workflow the median (the forecast) and the 10th and 90th percentiles (an 80 %
interval) of its start and its finish, and its position in its queue.

What a replay draws, all from one seeded generator (same seed, same forecast):

* **A new task** takes a draw from its job's duration model (the payload: the simulator's
  model, the operator's measured durations per stage, else the pool's own task times
  against what their stages declared, `sim.task_times`, else the stage's estimate), as the
  simulator's engine does; a replay drawing from a pool's own task times first draws how
  far their average may be off (`LiveTimes.begin`).
* **A running task** has run `elapsed` seconds: it takes a draw from the same model
  conditioned on lasting longer than that (up to `CONDITIONAL_TRIES` draws); when none
  does, it is overdue and ends after `OVERDUE_FRACTION` of its estimate, as a planner's
  rollout assumes.
* **A live pool's dispatch delay**: what follows a task that frees its executor waits for
  the operator's next round; a replay drawing from the pool's own task times adds one of
  its delays where a stage starts on an executor and after each task running now
  (`sim.task_times`, `LiveTimes.delay`).
* **Arrivals not seen yet** are whatever `futures` the caller passes (one per replay:
  `sim.forecast_arrivals.invent`'s, which the evaluation measures and the operator's
  refresh runs; which to invent is in docs/forecast.md); without them none are invented.

What no replay can know: failures, a node lost, a quota changed, a policy switched.

A forecast that cannot be computed is a `WorkflowUnavailable` with why, never a number: a stage
with no estimate and nothing measured, a scheduler that raised, a start beyond the
horizon the caller allowed.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass
from math import inf
from typing import NamedTuple

import numpy as np

from idlegate.sim.cluster import Cluster
from idlegate.sim.dag import Dag
from idlegate.sim.durations import MeasuredDurations, Uniforms
from idlegate.sim.engine import Engine
from idlegate.sim.protocol import Job, Scheduler, Stage
from idlegate.sim.rollout import OVERDUE_FRACTION, Future, planning_fork, push_present
from idlegate.sim.task_times import HIGH, LOW, LiveTimes  # (the 80 % interval's quantiles)

CONDITIONAL_TRIES = 8
"""Draws a running task's duration gets to exceed the time it has already run."""

BUDGET = 10_000
"""Events a refresh may simulate over its replays (`forecast`'s `budget`, as the operator
should pass it): twenty replays of a queue of a few dozen workflows fit in it; a queue of
1,000 waiting k8s-batch workflows takes 14,000 events for one replay, so a refresh of it
is one replay, about 0.12 s of CPU under `fair` and 0.15 s under `srpt`
(benchmarks/forecast.py, docs/research/forecasts.md, "Cost"), and its interval comes from
calibration alone (`sim.forecast_calibration`)."""

SECONDS = 0.2
"""CPU seconds a refresh's replays may take (`forecast`'s `seconds`, as the operator passes
it; the refresh's goal): an event's cost is not the same on every pool. On a pool of
pods `BUDGET`'s events take about 0.1 s, so this bound is not reached first; on a pool
that follows its nodes an event costs ten to thirty times that (a fit test per node), and
one replay of 200 waiting workflows takes about 1.8 s, so there the replays stop after the
first (docs/research/forecasts.md, "Cost in the operator")."""

MEDIAN = 0.5
"""The quantile of the replays a forecast time is by default (`forecast`'s
`start_quantile`): their median."""
START_UNSEEN = 0.75
"""The quantile of the replays' starts a waiting workflow's start is when the replays
invent no arrivals (`start_quantile`). Such replays are early: a workflow not submitted
yet can only overtake one that waits, never make it start sooner, so the actual start
falls above the replays' median far more often than below (80 % of the scored starts on
k8s-batch's training seeds 0-29). Fitted there, by the median error of the start as a
share of the wait: 22.5 % at 0.5, 19.4 % at 0.6, 17.7 % at 0.75, 18.0 % at 0.8, 19.7 %
at 0.9 (`benchmarks/forecast_start.py --seeds 0-29`); the interval's ends stay the
replays' own, and the finish moves by as much as the start (`_later_by`). Replays that invent arrivals (or know them) spread with them
already: their start stays the median (on the same seeds with Poisson arrivals no
quantile did better than 22.8 %)."""


def start_quantile(invented: bool) -> float:
    """The quantile of the replays' starts a waiting workflow's start is, for replays
    that invent arrivals (`invented`) or not (`START_UNSEEN`): what the operator's pool
    and `idlegate forecast evaluate` both pass `forecast`, so that what is measured is
    what runs."""
    return MEDIAN if invented else START_UNSEEN


class Span(NamedTuple):
    """A forecast time: the point forecast and the 80 % interval around it (absolute
    simulated seconds; inf: after the horizon in that share of the replays). `median` is
    the replays' median, but for a waiting workflow's start it is their `start_quantile`
    (`forecast`: later where the replays invent no arrivals)."""

    low: float
    median: float
    high: float


@dataclass(frozen=True)
class WorkflowForecast:
    """One workflow's forecast."""

    job_id: int
    name: str
    queue: int
    position: int | None
    """Its 1-based place among the waiting workflows of its queue; None once started."""
    start: Span
    """When its first task starts (a started workflow's: when it did, exactly)."""
    finish: Span


@dataclass(frozen=True)
class WorkflowUnavailable:
    """A workflow whose forecast cannot be computed, and why (a sentence for its status)."""

    job_id: int
    name: str
    reason: str


@dataclass(frozen=True)
class PoolForecast:
    """What `forecast` gives: one entry per workflow present at `now`."""

    now: float
    replays: int
    workflows: tuple[WorkflowForecast | WorkflowUnavailable, ...]
    events: int = 0
    """Events the replays simulated (the refresh's cost)."""

    def of(self, job_id: int) -> WorkflowForecast | WorkflowUnavailable:
        """The entry of the workflow with id `job_id` (KeyError: none)."""
        if not hasattr(self, "_by_id"):  # (built once: an evaluation asks per workflow)
            object.__setattr__(self, "_by_id", {e.job_id: e for e in self.workflows})
        by_id: dict[int, WorkflowForecast | WorkflowUnavailable] = self.__dict__["_by_id"]
        return by_id[job_id]


def forecast(
    cluster: Cluster,
    scheduler: Scheduler,
    *,
    seed: int = 0,
    replays: int = 20,
    futures: Iterable[Future] | None = None,
    horizon: float = inf,
    waves: bool = True,
    budget: int | None = None,
    seconds: float | None = None,
    clock: Callable[[], float] | None = None,
    start_quantile: float = MEDIAN,
    watch: Collection[int] | None = None,
    cut: float | None = None,
) -> PoolForecast:
    """Forecast the start and finish of every workflow in `cluster` under `scheduler`.

    `cluster` is left as it is (each replay runs on a fork), but `scheduler` is reset for
    every replay: pass a copy of the pool's, never the one deciding. `replays` replays, each with
    its own duration stream and scheduler seed drawn from one generator seeded with
    `seed`; with `futures` there is one replay per future, with its arrivals and seed
    (read one at a time: futures drawn as they are read are drawn only for the replays
    that run).
    A replay stops once every workflow present now has finished, or at ``now + horizon``
    (a cap on the cost: what is later is inf in the spans). `waves` False runs every
    task for its estimate (a workload without duration models, `Fidelity.wave_durations`).
    `budget` caps the events simulated over all replays: no replay starts that would, at
    the replays' mean events so far, end past it (the first always runs;
    `PoolForecast.replays` says how many did), so a refresh of a long queue costs what
    one replay of it costs, not M, and the replays stay within the budget but for the
    first (a rule that stopped once they reached it ran one replay past it: a third
    replay of 4,200 events in a budget of 10,000, a third of the refresh's CPU, issue
    96). `seconds` caps
    their CPU alike, as the caller's `clock` measures it (the operator's: its thread's CPU
    time; a clock is the caller's, as this core reads none of its own): no replay starts
    that would, at the replays' mean cost so far, end past it (the first always runs), so
    a pool whose events are dear (one that follows its nodes) gets fewer replays, never a
    replay cut short (what a cut replay gave would be a guess).
    `start_quantile` is the quantile of the replays' starts a waiting workflow's forecast
    start (`Span.median`) is, their median by default; a higher one for replays that
    invent no arrivals, whose starts are early by what later arrivals that overtake a
    workflow would delay it (`start_quantile`, `START_UNSEEN`). The interval's ends stay
    the replays' 10th and 90th percentiles, and the finish their median, but a waiting
    workflow's finish is read as much later as its start was (`_later_by`: a finish
    includes the run, so it is never its start).
    `watch` names the workflows wanted (None: every one present): a replay stops once they
    finished, and only they are in the result (a what-if's one workflow: what comes after
    its finish is not replayed). `cut` (seconds of `clock`) bounds the answer, not only
    the replays started: a replay still running when they are spent is stopped and left
    out, the first one too, and then each workflow is Unavailable with why (a person waits
    on a what-if; a refresh's replays are never cut).
    """
    if not LOW <= start_quantile <= HIGH:
        raise ValueError(
            f"start_quantile is a quantile in [{LOW}, {HIGH}] (within the interval), "
            f"not {start_quantile}"
        )
    if seconds is not None and clock is None:
        raise ValueError("a budget of seconds needs the clock that measures them (`clock`)")
    now = cluster.now
    jobs = sorted(cluster.jobs, key=lambda j: j.id)
    missing = next((m for j in jobs if (m := missing_estimate(j)) is not None), None)
    wanted = jobs if watch is None else [j for j in jobs if j.id in watch]
    if missing is not None:
        return _unavailable(now, wanted, missing)
    rng = np.random.default_rng(seed)
    if futures is None:
        futures = [Future((), int(rng.integers(2**63))) for _ in range(replays)]
    starts: dict[int, list[float]] = {j.id: [] for j in wanted}
    finishes: dict[int, list[float]] = {j.id: [] for j in wanted}
    spent = done = 0
    began = clock() if clock is not None else 0.0
    stop = None
    if cut is not None:
        if clock is None:
            raise ValueError("a cut needs the clock that measures it (`clock`)")
        stop = functools.partial(_past, clock, began + cut)
    for future in futures:
        try:
            seen, events = replay(
                cluster, scheduler, future, now + horizon, waves, watch, stop, ledger=False
            )
        except ReplayCut:
            break
        except Exception as exc:  # (any policy error: the forecast says so, never a guess)
            name = getattr(scheduler, "name", type(scheduler).__name__)
            reason = f"the scheduler {name} raised {type(exc).__name__}: {exc}"
            return _unavailable(now, wanted, reason)
        spent, done = spent + events, done + 1
        for job_id, (start, finish) in seen.items():
            if job_id in starts:
                starts[job_id].append(start)
                finishes[job_id].append(finish)
        if budget is not None and spent + spent / done > budget:
            break  # (before the next future is read: one drawn as read is not drawn)
        if seconds is not None and clock is not None:
            took = clock() - began
            if took + took / done > seconds:
                break  # (the next would end past `seconds`, at the mean cost so far)
    if done == 0:  # (cut: `stop`)
        reason = (
            f"its replay of the pool did not end within the {cut:g} s an answer may take; "
            "ask again when fewer workflows wait"
        )
        return _unavailable(now, wanted, reason)
    result = cluster.admission_result()  # (the admission's positions: one per workflow)
    return PoolForecast(
        now,
        done,
        tuple(
            _summary(j, result.position(j), starts[j.id], finishes[j.id], horizon, start_quantile)
            for j in wanted
        ),
        spent,
    )


class ReplayCut(Exception):
    """A replay stopped by its `stop` (`forecast`'s `cut`, a reclaim's budget)."""


def _past(clock: Callable[[], float], deadline: float) -> bool:
    return clock() > deadline


def replay(
    cluster: Cluster,
    scheduler: Scheduler,
    future: Future,
    until: float,
    waves: bool = True,
    watch: Collection[int] | None = None,
    stop: Callable[[], bool] | None = None,
    after: Callable[[Cluster], object] | None = None,
    truncate: bool = False,
    ledger: bool = True,
) -> tuple[dict[int, tuple[float, float]], int]:
    """One replay of a fork of `cluster`: per workflow present, (start, finish) as it went
    (inf: not by `until`), and the events it simulated; it ends once the workflows of
    `watch` (None: every one present) finished. `stop` is asked after each event: True
    raises `ReplayCut` (`forecast`'s `cut`), or with `truncate` ends the replay there as
    its horizon would (a reclaim's judge, which reads the fork where it ended). `after`
    is given the replayed fork once it ended, for what a caller reads of it beyond
    starts and finishes (a reclaim's judge: where it ended, the owners left, the starts
    past a wait bound, `idlegate.sim.reclaim_forecast`). `ledger` False stops the fork's
    queues from keeping their ledger (`Usage.counts`): a forecast reads starts and
    finishes alone, and the ledger's sums at every task's start and end were a tenth of a
    replay's CPU under queues (issue 96); a reclaim's judge reads its overdue starts."""
    sim = planning_fork(cluster)
    if not ledger and sim.admission is not None:
        sim.admission.counts = False
    now = sim.now
    streams = np.random.default_rng(future.seed)
    u = Uniforms(streams)
    scheduler.reset(np.random.default_rng(int(streams.integers(2**63))))
    for times in _live_times(sim):  # (a live pool's: none in the simulator, whose draws stay)
        times.begin(streams)
    engine = Engine(sim, scheduler, u, waves=waves)
    push_present(engine, now, _task_end(now, u, waves))
    present = {j.id: j for j in sim.jobs}
    arrivals = [a for a in future.arrivals if now <= a.time <= until]
    engine.push_arrivals(arrivals)
    if sim.needs_schedule:  # (the live pool decided at `now` already, unless told to again)
        engine.schedule()
    wanted = present if watch is None else {i for i in watch if i in present}
    if not arrivals and watch is None and stop is None:
        engine.run(until)  # (no arrivals: the heap empties when the present is done)
    else:
        left = len(wanted)
        read = 0
        while left and engine.peek() <= until:
            engine.step()
            for record in sim.done[read:]:
                left -= record.id in wanted
            read = len(sim.done)
            if stop is not None and stop():
                if truncate:
                    break
                raise ReplayCut
    if after is not None:
        after(sim)
    seen = {r.id: (r.first_start, r.finish) for r in sim.done if r.id in present}
    for job in sim.jobs:
        if job.id in present:
            seen[job.id] = (inf if job.first_start is None else job.first_start, inf)
    return seen, engine.events


def _live_times(sim: Cluster) -> list[LiveTimes]:
    """The pool's own task times the jobs of `sim` draw from (`MeasuredDurations.times`),
    each once: a replay draws its error of their average before it starts (`LiveTimes.
    begin`)."""
    found: dict[int, LiveTimes] = {}
    for job in sim.jobs:
        times = getattr(job.payload, "times", None)
        if isinstance(times, LiveTimes):
            found.setdefault(id(times), times)
    return list(found.values())


def missing_estimate(job: Job) -> str | None:
    """Why `job` cannot be forecast (a stage with tasks left and no duration to draw), or
    None."""
    for stage in job.stages:
        if stage.finished == stage.tasks or known_duration(job.payload, job.dag, stage.index):
            continue
        return (
            f"stage {stage.index} of workflow {job.name!r} has no duration estimate and no "
            "measured task; give it taskDurationSeconds (or let one task finish)"
        )
    return None


def known_duration(model: object, dag: Dag, i: int) -> bool:
    """Whether a task of stage `i` of `dag` has a duration to draw under `model` (a job's
    payload, or its duration model)."""
    if isinstance(model, MeasuredDurations):  # (the operator's: measured, else estimate)
        return bool(model.measured[i]) or _finite(model.estimates[i])
    # (a simulator's model draws every task itself; none: the estimate)
    return model is not None or _finite(dag.durations[i])


def _finite(seconds: float) -> bool:
    return math.isfinite(seconds) and seconds >= 0


def _task_end(now: float, u: Uniforms, waves: bool) -> Callable[[Stage, float], float]:
    """When a running task started at `started` ends: a draw from its job's model that
    lasts longer than it has run, else its estimate, else overdue (module docstring); on a
    live pool a dispatch delay after it, as after each executor's run of tasks
    (`LiveTimes.delay`)."""

    def end_of(stage: Stage, started: float) -> float:
        elapsed = now - started
        model = stage.job.payload
        times = getattr(model, "times", None)
        late = times.delay(u.next) if waves and isinstance(times, LiveTimes) else 0.0
        if waves and model is not None:
            for _ in range(CONDITIONAL_TRIES):
                d = model.sample(stage.index, stage.job.held, False, False, u)
                if d > elapsed:
                    return started + d + late
        elif stage.duration > elapsed:
            return started + stage.duration + late
        return now + OVERDUE_FRACTION * stage.duration + late

    return end_of


def quantile(values: Sequence[float], q: float) -> float:
    """The `q` quantile of `values` by linear interpolation (numpy's default), where an
    inf (after the horizon) makes any interpolation that touches it inf."""
    return _quantile_of_sorted(sorted(values), q)


def _quantile_of_sorted(ordered: Sequence[float], q: float) -> float:
    """`quantile` of values sorted already."""
    pos = q * (len(ordered) - 1)
    lo = int(pos)
    frac = pos - lo
    if frac == 0.0 or lo + 1 >= len(ordered):
        return ordered[lo]
    a, b = ordered[lo], ordered[lo + 1]
    if b == inf:
        return inf
    return a + (b - a) * frac


def _span(values: Sequence[float], point: float = MEDIAN) -> Span:
    """The `LOW`, `point` and `HIGH` quantiles of `values` (`point`: the span's median)."""
    ordered = sorted(values)  # (once for the three: a refresh spans every workflow twice)
    return Span(
        _quantile_of_sorted(ordered, LOW),
        _quantile_of_sorted(ordered, point),
        _quantile_of_sorted(ordered, HIGH),
    )


def _summary(
    job: Job,
    position: int | None,
    starts: Sequence[float],
    finishes: Sequence[float],
    horizon: float,
    start_quantile: float = MEDIAN,
) -> WorkflowForecast | WorkflowUnavailable:
    waiting = job.first_start is None
    start = _span(starts, start_quantile if waiting else MEDIAN)
    if start.median == inf:
        return WorkflowUnavailable(
            job.id,
            job.name,
            f"it starts later than the forecast's horizon ({horizon:g} s ahead) in too many "
            "replays to say when; a longer horizon forecasts it",
        )
    finish = _span(finishes)
    if waiting and start_quantile != MEDIAN:
        finish = _later_by(finish, start.median - quantile(starts, MEDIAN))
    return WorkflowForecast(job.id, job.name, job.queue, position, start, finish)


def _later_by(finish: Span, shift: float) -> Span:
    """A waiting workflow's finish read as much later as its start was (`start_quantile`
    above the median): what delays its start delays its end, so the replays' median
    finish moves by the start's shift, and the top of its interval at least to it.

    A finish so read is after the start by at least the shortest run of any replay (each
    replay's finish is its start plus its run, so every quantile of the finishes is at
    least the same of the starts plus that run); raising the finish's median only up to
    the start, as before, gave a finish equal to the start wherever the start's spread
    exceeded the run (55 of 2,844 waiting forecasts on issue 96's stream): a finish
    includes the run."""
    if shift <= 0 or finish.median == inf:
        return finish
    median = finish.median + shift
    return Span(finish.low, median, max(finish.high, median))


def unavailable(cluster: Cluster, reason: str) -> PoolForecast:
    """A forecast of every workflow of `cluster` that cannot be made, for `reason` (a
    sentence for its status)."""
    return _unavailable(cluster.now, sorted(cluster.jobs, key=lambda j: j.id), reason)


def _unavailable(now: float, jobs: Sequence[Job], reason: str) -> PoolForecast:
    return PoolForecast(now, 0, tuple(WorkflowUnavailable(j.id, j.name, reason) for j in jobs))
