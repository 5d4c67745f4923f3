"""How right are the forecasts? `idlegate forecast evaluate`: forecast during a simulated run,
then compare with what happened (docs/research/forecasts.md).

A run of the workload under the pool's scheduler stops at every arrival (and, with
``every``, every N seconds while a workflow waits), forecasts the workflows it is asked
about (`sim.forecast.forecast` on the live state, under the scheduler the pool follows
then), and beside it the baselines, then runs on. At the end every forecast is scored
against the workflow's real start and finish (`forecast_report`).

The baselines, each computed from what the run knew at the forecast's time:

* ``position×rate`` (Kueue's suggestion, kueue #13159): start = now + position ÷ the
  queue's admission rate over its last `RECENT` admissions.
* ``ema-wait`` (#13159's proposal): start = arrival + an exponential moving average of the
  queue's recent waits (no earlier than now).
* ``declared`` (Slurm's ``squeue --start``): one plan by the pool's scheduler (Slurm's
  plan is its own scheduler's) with every task taking its declared duration and a
  running one its declared end (`forecast` with one replay, no duration draws).

The shipped forecast is ``calibrated``: the replays' median with their interval widened
by how the run's earlier forecasts came out (`sim.forecast_calibration`); ``forecast`` is
the replays' own interval, beside it.

A baseline's finish is its start plus the median run time (finish − start) of the queue's
last `RECENT` finished workflows (the workflow's critical path before any finished);
``declared`` plans its finish itself. Baselines give no interval.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from math import inf
from typing import Literal

import numpy as np

from idlegate.errors import IdlegateError
from idlegate.evaluation.comparison import WorkloadOptions, build, check_names
from idlegate.policy import make_scheduler
from idlegate.policy.portfolio.scheduler import PortfolioScheduler
from idlegate.sim.cluster import Cluster
from idlegate.sim.durations import MeasuredDurations
from idlegate.sim.engine import Engine, TaskRun, Workload
from idlegate.sim.forecast import BUDGET, Span, WorkflowUnavailable, forecast, start_quantile
from idlegate.sim.forecast_arrivals import TEMPLATES, arrived, invent
from idlegate.sim.forecast_calibration import calibrations
from idlegate.sim.protocol import Job, JobRecord, Scheduler
from idlegate.sim.rollout import Future

Arrivals = Literal["none", "poisson", "queues", "oracle"]
Durations = Literal["model", "measured"]
METHODS = ("calibrated", "forecast", "position×rate", "ema-wait", "declared")
"""The forecast (its interval widened by past forecasts' scores, then the replays' own)
and its baselines, in the report's order."""
RECENT = 20
"""Admissions, waits and run times a baseline looks back over, per queue."""
EMA_ALPHA = 0.2
"""Weight of the newest wait in ``ema-wait``."""


@dataclass(frozen=True)
class Prediction:
    """One method's forecast of one workflow, made at `made_at`."""

    method: str
    job_id: int
    made_at: float
    started: bool
    """Whether it had started at `made_at` (its start was then known)."""
    start: Span
    finish: Span


@dataclass
class SeedRun:
    """One seed's forecasts and what happened."""

    seed: int
    predictions: list[Prediction] = field(default_factory=list)
    unavailable: list[tuple[str, int, str]] = field(default_factory=list)
    """(method, job id, why) of every forecast that could not be made."""
    actual: dict[int, JobRecord] = field(default_factory=dict)
    refreshes: int = 0


@dataclass(frozen=True)
class EvalSettings:
    """What `evaluate_seed` runs (the command's options)."""

    workload: str
    scheduler: str = "default"
    options: WorkloadOptions = field(default_factory=WorkloadOptions)
    replays: int = 20
    every: float | None = None
    """Forecast every waiting workflow every this many seconds too (None: at arrival only)."""
    arrivals: Arrivals = "none"
    horizon: float = inf
    durations: Durations = "model"
    """What a replay draws a task's duration from: ``model``, the workload's own duration
    model (what the simulator draws from); ``measured``, what an operator has, the
    durations its stage's tasks took so far, else the declared estimate
    (`sim.durations.MeasuredDurations`, `measured_view`)."""
    start_quantile: float | None = None
    """The quantile of the replays' starts the forecast's start is (`sim.forecast.forecast`'s
    `start_quantile`); None: as the operator's pool with these arrivals takes it
    (`sim.forecast.start_quantile`: 0.75 where the replays invent none, else the median)."""
    budget: int | None = BUDGET
    """Events a refresh's replays may simulate (`sim.forecast.forecast`'s `budget`): the
    operator's (`sim.forecast.BUDGET`, the first replay always whole), so that a long
    queue is forecast from the replays the operator's refresh runs, not twenty (a burst
    of 500 under queues cost a refresh 7 to 12 s of CPU: issue 96); None: every replay.
    The operator's CPU cap (`sim.forecast.SECONDS`) is left out: a run's figures would
    move with the machine's speed."""

    @property
    def invented(self) -> bool:
        """Whether the replays are given arrivals not seen yet (invented, or the run's own:
        ``oracle``), which sets the start's prior and quantile as the operator's pool's."""
        return self.arrivals != "none"

    @property
    def start_at(self) -> float:
        """The start's quantile these settings forecast with (`start_quantile`)."""
        if self.start_quantile is not None:
            return self.start_quantile
        return start_quantile(self.invented)


class _Queue:
    """What the baselines know of one queue so far."""

    def __init__(self) -> None:
        self.admitted: list[float] = []
        self.ema: float | None = None
        self.runs: list[float] = []


class Watch:
    """The run's past as the baselines see it: admissions, waits and run times per queue,
    read off the cluster at each forecast (`see`), or told one outcome at a time (`started`,
    `finished`: a live pool's, benchmarks/live_forecast.py)."""

    def __init__(self) -> None:
        self.queues: dict[int, _Queue] = {}
        self.queue_of: dict[int, int] = {}
        self.finished = 0
        self.start_of: dict[int, float] = {}
        self.finish_of: dict[int, float] = {}

    def see(self, cluster: Cluster) -> None:
        starts: list[tuple[float, int, float]] = []
        for job in cluster.jobs:
            self.queue_of.setdefault(job.id, job.queue)
            if job.first_start is not None and job.id not in self.start_of:
                starts.append((job.first_start, job.id, job.first_start - job.arrival))
        for record in cluster.done[self.finished :]:
            self.ended(
                record.id, self.queue_of.get(record.id, 0), record.first_start, record.finish
            )
            if record.id not in self.start_of:
                starts.append((record.first_start, record.id, record.first_start - record.arrival))
        self.finished = len(cluster.done)
        for when, job_id, wait in sorted(starts):
            self.started(job_id, self.queue_of.get(job_id, 0), when, wait)

    def started(self, job_id: int, queue: int, when: float, wait: float) -> None:
        """Workflow `job_id` of `queue` started at `when` after waiting `wait` seconds (told
        in the order of the starts)."""
        self.start_of[job_id] = when
        q = self._queue(queue)
        q.admitted.append(when)
        q.ema = wait if q.ema is None else EMA_ALPHA * wait + (1 - EMA_ALPHA) * q.ema

    def ended(self, job_id: int, queue: int, start: float, finish: float) -> None:
        """Workflow `job_id` of `queue`, started at `start`, finished at `finish`."""
        self.finish_of[job_id] = finish
        self._queue(queue).runs.append(finish - start)

    def _queue(self, q: int) -> _Queue:
        return self.queues.setdefault(q, _Queue())

    def run_time(self, queue: int, critical_path: float) -> float:
        """A baseline's run time of a workflow of `queue`: the median of the queue's recent
        ones, before any its `critical_path`."""
        runs = self._queue(queue).runs[-RECENT:]
        return float(np.median(runs)) if runs else critical_path

    def by_rate(self, queue: int, position: int, now: float) -> float | None:
        """position × rate's start, or None before the queue admitted twice."""
        admitted = self._queue(queue).admitted[-RECENT:]
        if len(admitted) < 2 or now <= admitted[0]:
            return None
        rate = len(admitted) / (now - admitted[0])
        return now + position / rate

    def by_ema(self, job: Job, now: float) -> float | None:
        """ema-wait's start, or None before the queue admitted any."""
        ema = self._queue(job.queue).ema
        return None if ema is None else max(now, job.arrival + ema)


def replay_scheduler(scheduler: Scheduler, spec: str, cache: dict[str, Scheduler]) -> Scheduler:
    """The scheduler a forecast replays: a copy of the pool's (built from its `spec`: each
    replay resets it, which must not touch the run's own), and for the portfolio
    (`default`) the candidate it follows now (replaying the portfolio would replay its
    replays)."""
    if isinstance(scheduler, PortfolioScheduler):
        spec = scheduler.following
    if spec not in cache:
        cache[spec] = make_scheduler(spec)
    return cache[spec]


def checkpoints(workload: Workload, every: float | None) -> Iterator[tuple[float, bool]]:
    """(time, whether it is a periodic refresh) of each stop, in order: every distinct
    arrival time, and with `every` its multiples up to the last arrival."""
    times = {a.time: False for a in workload.jobs}
    if every is not None:
        last = workload.jobs[-1].time
        for k in range(1, int(last / every) + 1):
            times.setdefault(k * every, True)
    yield from sorted(times.items())


def evaluate_seed(
    settings: EvalSettings, seed: int, tick: Callable[[int, int], None] | None = None
) -> SeedRun:
    """One seed's run with its forecasts (module docstring); `tick(done, total)` after
    each of its checkpoints (a run of a few hundred arrivals takes minutes)."""
    built = build(settings.workload, seed, settings.options)
    measured = settings.durations == "measured"
    engine = Engine.for_workload(
        built, make_scheduler(settings.scheduler), seed, record_tasks=measured
    )
    pool_scheduler = engine.scheduler
    if pool_scheduler is None:  # (for_workload keeps the scheduler it was given)
        raise IdlegateError("the run has no scheduler; give -s/--scheduler")
    waves = built.fidelity.wave_durations
    rng = np.random.default_rng(seed)
    out = SeedRun(seed)
    watch, recent = Watch(), deque[Job](maxlen=TEMPLATES)
    cache: dict[str, Scheduler] = {}
    tuning = Tuning(settings.invented)
    points = list(checkpoints(built, settings.every))
    for n, (t, periodic) in enumerate(points):
        if tick is not None:
            tick(n, len(points))
        engine.run(t)
        cluster = engine.cluster
        watch.see(cluster)
        tuning.resolve(watch)
        arrived(recent, cluster.jobs, t)
        asked = [j for j in cluster.jobs if j.arrival == t or (periodic and j.first_start is None)]
        if not asked:
            continue
        futures = _futures(settings, cluster, recent, rng, built)
        rule = replay_scheduler(pool_scheduler, settings.scheduler, cache)
        ours = forecast(
            measured_view(cluster, engine.task_log or []) if measured else cluster,
            rule,
            seed=int(rng.integers(2**63)),
            replays=settings.replays,
            futures=futures,
            horizon=settings.horizon,
            waves=waves,
            start_quantile=settings.start_at,
            budget=settings.budget,
        )
        plan = forecast(cluster, rule, replays=1, waves=False, horizon=settings.horizon)
        positions = cluster.admission_result()  # (the admission's, as the operator's)
        out.refreshes += 1
        for job in asked:
            started = job.first_start is not None
            for method, entry in (("forecast", ours.of(job.id)), ("declared", plan.of(job.id))):
                if isinstance(entry, WorkflowUnavailable):
                    out.unavailable.append((method, job.id, entry.reason))
                else:
                    out.predictions.append(
                        Prediction(method, job.id, t, started, entry.start, entry.finish)
                    )
            _baselines(out, watch, job, positions.position(job), t)
            raw = ours.of(job.id)
            if not isinstance(raw, WorkflowUnavailable):
                out.predictions.append(tuning.calibrated(job, raw.start, raw.finish, t))
    engine.run()
    out.actual = {r.id: r for r in engine.cluster.done}
    return out


def measured_view(cluster: Cluster, tasks: Sequence[TaskRun]) -> Cluster:
    """A fork of `cluster` whose workflows draw their tasks as the operator's do: from the
    durations of their stage's tasks that ended by now, else the stage's estimate."""
    fork = cluster.fork()
    now = fork.now
    measured: dict[int, list[list[float]]] = {
        j.id: [[] for _ in range(j.dag.num_stages)] for j in fork.jobs
    }
    for task in tasks:
        if task.end <= now and task.job in measured:
            measured[task.job][task.stage].append(task.end - task.start)
    for job in fork.jobs:
        job.payload = MeasuredDurations(job.dag.durations, measured[job.id])
    return fork


class Tuning:
    """The calibrations of start and finish forecasts (`sim.forecast_calibration`), fed
    with the forecasts of this run as their workflows start and finish."""

    def __init__(self, invented: bool = False) -> None:
        fresh = calibrations(invented)
        self.start, self.finish = fresh["start"], fresh["finish"]
        self.pending: list[tuple[int, float, Span | None, Span]] = []
        """(job id, made at, start span while it waited else None, finish span)."""

    def calibrated(self, job: Job, start: Span, finish: Span, now: float) -> Prediction:
        """The ``calibrated`` forecast (the replays' widened), and `job`'s raw spans kept
        until its start and finish score them."""
        started = job.first_start is not None
        self.pending.append((job.id, now, None if started else start, finish))
        finish = self.finish.widen(finish, now, now, start=None if started else start)
        if not started:
            start = self.start.widen(start, now, earliest=now)
        return Prediction("calibrated", job.id, now, started, start, finish)

    def resolve(self, watch: Watch) -> None:
        """Score the pending forecasts whose workflow has since started or finished."""
        left = []
        for job_id, made_at, start, finish in self.pending:
            if start is not None and job_id in watch.start_of:
                self.start.record(start, made_at, watch.start_of[job_id])
                start = None
            if job_id in watch.finish_of:
                if finish.median < inf:
                    self.finish.record(finish, made_at, watch.finish_of[job_id])
                continue
            left.append((job_id, made_at, start, finish))
        self.pending = left


def _futures(
    settings: EvalSettings,
    cluster: Cluster,
    recent: Sequence[Job],
    rng: np.random.Generator,
    workload: Workload | None = None,
) -> list[Future] | None:
    """The replays' arrivals not seen yet (`EvalSettings.arrivals`): none, ``poisson`` or
    ``queues`` as the operator's refresh invents them (`sim.forecast_arrivals.invent`, the
    one copy); or the run's own (``oracle``: what no forecaster knows, to measure what not
    knowing them costs)."""
    if settings.arrivals == "oracle":
        if workload is None:
            raise IdlegateError("oracle arrivals need the workload the run replays")
        later = tuple(a for a in workload.jobs if a.time > cluster.now)
        return [Future(later, int(rng.integers(2**63))) for _ in range(settings.replays)]
    drawn = invent(settings.arrivals, cluster, recent, settings.replays, rng, settings.horizon)
    # (all drawn now: the run's generator draws the forecast's seed next)
    return None if drawn is None else list(drawn)


def _baselines(out: SeedRun, watch: Watch, job: Job, position: int | None, now: float) -> None:
    """position×rate's and ema-wait's forecasts of `job` (point forecasts: no interval)."""
    for method, start in (
        ("position×rate", _known_or(job, watch.by_rate(job.queue, position or 0, now))),
        ("ema-wait", _known_or(job, watch.by_ema(job, now))),
    ):
        if start is None:
            out.unavailable.append((method, job.id, "its queue has admitted too few yet"))
            continue
        finish = start + watch.run_time(job.queue, job.dag.critical_path)
        if job.first_start is not None:  # (running: its start is known, its finish too far)
            finish = max(finish, now)
        out.predictions.append(
            Prediction(
                method,
                job.id,
                now,
                job.first_start is not None,
                Span(start, start, start),
                Span(finish, finish, finish),
            )
        )


def _known_or(job: Job, start: float | None) -> float | None:
    """A started workflow's known start, else the baseline's."""
    return job.first_start if job.first_start is not None else start


def _ticks(
    progress: Callable[[int, int, str], None] | None, i: int, seeds: int, seed: int
) -> Callable[[int, int], None] | None:
    """A seed's checkpoints as `progress` steps: of the run's checkpoints, counting every
    seed as having as many as seed `seed` (the `i`-th of `seeds`), so that a line off a
    terminal gives a share done and a time left within a seed too."""
    if progress is None:
        return None
    report = progress

    def tick(done: int, total: int) -> None:
        report(
            i * total + done + 1,
            seeds * total,
            f"seed {seed}, checkpoint {done + 1} of {total}",
        )

    return tick


def evaluate(
    settings: EvalSettings,
    seeds: Sequence[int],
    progress: Callable[[int, int, str], None] | None = None,
) -> list[SeedRun]:
    """Every seed's run, in order (`progress(done, total, what)` at each checkpoint:
    `_ticks`)."""
    check_names(settings.workload)
    runs = []
    for i, seed in enumerate(seeds):
        runs.append(evaluate_seed(settings, seed, _ticks(progress, i, len(seeds), seed)))
    return runs
