"""The operator's forecasts: one pool's forecasts, kept forecasts and their errors.

A pool's forecasts run `idlegate.sim.forecast.forecast` off the decision's path
(docs/research/forecasts.md, "In the operator"). Their state and pure steps are here
(:class:`ForecastBook`: the request, the result taken back, the scores); their runtime,
when a refresh runs, where its replays run and the apply step that writes status, metrics
and calibration, is the operator's (`operator.forecasting.refresh.ForecastRefresh`):

* **When.** Every `interval` seconds of the operator's clock, and `debounce` seconds after
  the pool's set of workflows changed (one arrived or ended:
  `ForecastRefresh.changed`, after each event; a burst that goes on arriving, once it has
  been quiet that long, within `interval`); at most one refresh runs at a time, a
  change during one asks for the next, and refreshes take at most `DUTY` of the time (a
  refresh that took T seconds of CPU is followed by none for T·(1/DUTY − 1):
  `after_duty`). Its CPU, not its wall time: the wall time of the first includes the
  replay process's start (half a minute on a busy node), and a duty charged with that starved a burst of forecasts for minutes; the process starts with the
  operator (`ForecastRefresh.warm`), not with the first refresh.
* **How.** In the event loop (which owns the cluster) :meth:`request` forks the pool's
  state (`sim.rollout.planning_fork`, at the loop's time) and says which scheduler to
  replay (never the deciding one: each replay resets it), frozen in a `ForecastRequest`;
  `operator.forecasting.request.compute` replays them
  away from the decisions; back in the loop :meth:`take` turns the result into each
  workflow's `api.forecast_status` forecast. The forecast's seconds are the cluster's,
  which are the operator clock's (the status's timestamps): no conversion is needed.
* **Where.** With ``--forecast-workers process`` (the default) in the operator's one
  `operator.forecasting.process.ReplayProcess`, shared by its pools: the fork is plain data,
  pickled to it; the scheduler goes as its spec and is built there once per spec (a
  model file is not pickled). So the replays' objects are not the operator's heap (whose
  cyclic collections run in whichever thread allocates, often the deciding one) and the replays hold no lock
  the decisions need. With ``thread`` a worker thread of the pool runs them in the
  operator's process, sharing its interpreter; a pool driven without an event loop
  (tests) refreshes in place. The same state and seed give the same forecast in each.
  A replay process that dies or raises fails that refresh (below); the next starts a new
  one. What if one more were submitted now: `operator.forecasting.whatif`.
* **Arrivals.** What the replays invent of the workflows not submitted yet is the pool's
  `arrivals` (``--forecast-arrivals``, an ExecutorPool's ``forecastArrivals``): none, or
  `sim.forecast_arrivals.invent`'s ``poisson`` or ``queues``, the one copy `idlegate
  forecast evaluate` measures (an ExecutorPool without queues that inherits ``queues``
  invents ``poisson``, and says so: `api.pool_spec.pool_arrivals`). Their templates are
  the pool's last `TEMPLATES` arrivals (:attr:`ForecastBook.recent`, kept as they
  arrive, finished ones included: the cluster keeps no finished workflow's DAG), frozen in
  the loop (`Recent`); the worker draws the futures from a generator seeded by the
  refresh's seed, so the same state and seed give the same forecast.
* **Live.** An operator's pool learns its own tasks' latency and stretch as they end
  (`times`, `sim.task_times`); its replays draw from them (:meth:`live`), its calibration
  has no simulator prior, and until `EVIDENCE` of its tasks have ended each workflow's
  forecast is Unavailable with why (:meth:`unknown`; their becoming known is a change).
  Where its replays invent no arrivals, its waiting workflows' interval tops are raised
  by the chance of being overtaken, counted from its own arrival events (:meth:`overtake`,
  `sim.forecast_overtake`).
* **What is shown.** :attr:`shown` (owner uid → Forecast or Unavailable), which
  `api.visibility.forecast_of` reads for every kind; a DagWorkflow's forecast also goes
  into its status (`Workflow.forecast`, ``status.forecast``), written only when it moved
  meaningfully (`MOVED` seconds, or its position, or available ↔ unavailable), so that a
  refresh does not rewrite every waiting workflow's status.
* **How right.** The first forecast of each workflow made while it waited is kept
  (:attr:`kept`) until it starts and ends; its absolute errors then go to
  ``idlegate_forecast_error_seconds`` (per pool, queue, start|finish), to the pool's
  interval calibration (`sim.forecast_calibration`), to whether its interval held it
  (:meth:`ForecastBook.coverage`, what a what-if says of how sure it is), and, for a
  DagWorkflow or an Argo
  Workflow, to its history record (its payload's ``forecast_made``, with the replays'
  interval before the calibration widened it: `history_forecast`).
* **After a restart.** The calibration is not kept apart: it is a function of the
  resolved forecasts, which the history records hold. With a history sink
  (``--history-file``), a restarted pool rebuilds it from its last `WINDOW` records there
  (:meth:`ForecastBook.resume_from`, `resumed_calibration`), each finished DagWorkflow
  or Argo Workflow giving back its start and finish scores, and goes on from there. The
  same records lead its recent arrivals, merged by arrival with the workflows it rebuilt,
  and the log the invented arrivals' rate is estimated from (`resume_recent`: the
  cluster's own starts at the restart), so it invents the futures it invented before it
  stopped. A sink that cannot be read, or a record whose stored interval is inconsistent,
  leaves the calibration cold (an unreadable sink: the recent arrivals too), logged as a
  Warning and counted (``idlegate_forecast_calibration_errors_total``); never an error of
  the pool. Not carried over: Airflow runs' forecasts (the sink holds no record of them:
  docs/research/forecasts.md, "After a restart", says why), and an Argo Workflow's kept forecast
  while it waits or runs at the restart (idlegate writes nothing on it). A DagWorkflow's
  is in its status (``status.firstForecast``, written with its status once kept:
  `api.forecast_first`), read back as it is rebuilt (`restore_first`) and kept again by the
  restarted pool (`note_arrivals`), so it is scored as if no restart had happened.

A forecast that cannot be computed (a stage with no estimate, a scheduler that raised) is an
`Unavailable` with why, never a number. A refresh that fails as a whole is logged as a
Warning and counted (``idlegate_forecast_refresh_errors_total``); decisions never wait on
it. Pure: no thread, no process, no clock of its own, no kopf, no API.
"""

from __future__ import annotations

import copy
import dataclasses
import logging
import math
from collections import deque
from collections.abc import Callable, Iterable
from concurrent.futures import Future
from dataclasses import dataclass
from statistics import median
from typing import Any

from idlegate.api.forecast_status import Forecast, Unavailable
from idlegate.errors import IdlegateError, SpecError
from idlegate.operator.forecasting.request import ForecastRequest, replayed_spec, scheduler_copy
from idlegate.sim import forecast as sim_forecast
from idlegate.sim.cluster import Cluster
from idlegate.sim.dag import Dag
from idlegate.sim.durations import MeasuredDurations
from idlegate.sim.forecast import PoolForecast
from idlegate.sim.forecast_arrivals import ARRIVALS, TEMPLATES, Recent, Template, templates
from idlegate.sim.forecast_arrivals import WINDOW as RATE_WINDOW
from idlegate.sim.forecast_calibration import (
    WINDOW,
    Calibration,
    calibrations,
    shared_margin,
    start_prior,
)
from idlegate.sim.forecast_overtake import Overtake, size_of
from idlegate.sim.history import HistoryWorkflow, Tail
from idlegate.sim.pool import effective_executors
from idlegate.sim.protocol import Job, Scheduler
from idlegate.sim.queues import queue_of
from idlegate.sim.rollout import planning_fork
from idlegate.sim.task_times import EVIDENCE, TaskTimes

log = logging.getLogger(__name__)

INTERVAL = 30.0
"""Seconds between two scheduled refreshes (``--forecast-interval``)."""
DEBOUNCE = 2.0
"""Seconds a change waits before its refresh (changes within them share one)."""
MOVED = 5.0
"""Seconds a forecast start or finish must move before a status is written again..."""
RELATIVE = 0.1
"""... and the share of how far ahead it is (a start in an hour moves 6 min first)."""
FRONT = 10
"""Positions among which any move is written (further back: a move of `RELATIVE`)."""
REPLAYS = 20
"""Replays per refresh (fewer when `BUDGET` runs out: a long queue gets one)."""
DUTY = 0.2
"""The share of the operator clock's time refreshes may take: after a refresh that took T
seconds of CPU (the fork and the result in the event loop, the replays where they ran),
the next waits until T·(1/DUTY − 1) has passed, so a pool whose workflows change all the
time is not replayed back to back (the replays hold the interpreter's lock that the
decisions need, or a core). CPU, not wall: module docstring, "When"."""


def after_duty(now: float, charged: float) -> float:
    """When the next refresh may start, the last one having ended at `now` and taken
    `charged` seconds of CPU: refreshes take at most `DUTY` of the time."""
    return now + charged * (1 / DUTY - 1)


Shown = Forecast | Unavailable


@dataclass
class Kept:
    """The first forecast made while a workflow waited, kept until it starts and ends."""

    job: Job
    queue: str
    forecast: Forecast
    start: sim_forecast.Span
    finish: sim_forecast.Span
    typical: float | None = None
    """Its refresh's typical stretch (`LiveTimes.typical`; None: a restored one's, unknown)."""
    started: bool = False
    start_told: bool = False
    """Restored after its start (`note_arrivals`): its start's error went to the metric of
    the operator before the restart (its next refresh, within `interval` of the start,
    scored it), so only the calibration, which the restart emptied, takes it again."""


def moved(old: Shown | None, new: Shown) -> bool:
    """Whether `new` differs from `old` enough to be written: available ↔ unavailable, a new
    reason, a start or finish moved by more than `MOVED` seconds and `RELATIVE` of how far
    ahead it is, or a position moved among the first `FRONT` or by `RELATIVE` of itself.
    (Every start moves each later workflow of a long queue up by one: writing each at
    every refresh would flood the API server for nothing the visibility API does not say live.)"""
    if old is None or type(old) is not type(new):
        return True
    if isinstance(new, Unavailable):
        return not isinstance(old, Unavailable) or old.reason != new.reason
    assert isinstance(old, Forecast)

    def far(a: float, b: float) -> bool:
        return abs(a - b) > max(MOVED, RELATIVE * (b - new.computed_at))

    if far(old.start, new.start) or far(old.finish, new.finish):
        return True
    if old.position == new.position:
        return False
    if old.position is None or new.position is None:
        return True
    return min(old.position, new.position) <= FRONT or (
        abs(old.position - new.position) > RELATIVE * old.position
    )


def _finite(*values: float) -> bool:
    return all(math.isfinite(v) for v in values)


def as_shown(
    entry: Any, made: float, calibration: dict[str, Calibration], started: float | None = None
) -> Shown:
    """A `sim.forecast` entry made at `made` as a status's forecast, its intervals widened
    by `calibration` (start, finish). `started`: when its workflow started, if it has: its
    start is then that, with no interval (nothing of it is forecast: docs/forecast.md)."""
    if isinstance(entry, sim_forecast.WorkflowUnavailable):
        return Unavailable(made, entry.reason)
    start = calibration["start"].widen(entry.start, made, earliest=made)
    # (a waiting workflow's finish is as far off as its start: widened by the start's
    # margin over its wait, as `forecast evaluate` measured it)
    finish = calibration["finish"].widen(entry.finish, made, earliest=made, start=entry.start)
    if not _finite(*start, *finish):
        return Unavailable(made, "it finishes beyond the forecast's horizon in some replays")
    # (a replay's finish is never before its start, so neither are the quantiles)
    if started is not None:
        return Forecast(made, min(started, finish.median), None, finish.median,
                        (finish.low, finish.high), entry.position)  # fmt: skip
    return Forecast(
        computed_at=made,
        start=start.median,
        start_interval=(start.low, start.high),
        finish=finish.median,
        finish_interval=(finish.low, finish.high),
        position=entry.position,
    )


def started_at(job: Job) -> float | None:
    """When `job`'s workflow started as its user sees it: its first pod Running (a
    DagWorkflow's `started_at`), else the state machine's release (`first_start`; other
    kinds, the simulator's); None: not yet. A workflow released whose pod does not run yet
    has not started: once it ends, it did at its release at the latest."""
    if job.first_start is None:
        return None
    payload = job.payload
    if not hasattr(payload, "started_at"):
        return job.first_start
    seen: float | None = payload.started_at
    return seen if seen is not None or job.finish is None else job.first_start


def shifted(span: sim_forecast.Span, by: float) -> sim_forecast.Span:
    """`span` `by` seconds later."""
    return sim_forecast.Span(span.low + by, span.median + by, span.high + by)


def queue_name(cluster: Cluster, job: Job) -> str:
    admission = cluster.admission
    return admission.queues[job.queue].name if admission is not None else ""


class ForecastBook:
    """One pool's forecasts, as state and pure steps (module docstring): `request` freezes
    what a refresh replays, `take` turns what came back into each workflow's forecast,
    `score` resolves the kept ones. `cluster`, `scheduler` (a callable: the pool's deciding
    policy now, its spec and what a portfolio learns) say what to fork and replay; `now`
    is the operator's clock. When it runs, where, and what is written of it:
    `operator.forecasting.refresh.ForecastRefresh`."""

    def __init__(
        self,
        cluster: Cluster,
        scheduler: Callable[[], tuple[Scheduler, str | None, Any]],
        *,
        now: Callable[[], float],
        replays: int = REPLAYS,
        budget: int = sim_forecast.BUDGET,
        seconds: float | None = sim_forecast.SECONDS,
        arrivals: str = "none",
        times: TaskTimes | None = None,
    ) -> None:
        if arrivals not in ARRIVALS:
            raise SpecError(
                f"the forecast's arrivals {arrivals!r} are none of {', '.join(ARRIVALS)}; "
                "give one of them"
            )
        self.cluster = cluster
        self.arrivals = arrivals
        """What the replays invent (module docstring, "Arrivals")."""
        self.recent: deque[Template] = deque(maxlen=TEMPLATES)
        """The pool's last `TEMPLATES` arrivals, finished ones included, oldest first (kept
        by `note_arrivals` whatever `arrivals` is, so that a change of it has them; after a
        restart, led by the finished ones its history records hold: `resume_from`)."""
        self.resumed_log: list[tuple[float, float]] = []
        """(arrival, work) of the last arrivals the history sink's records gave back
        (`resume_from`): the pool's own log (the cluster's) starts at the restart, so the
        invented arrivals' rate is estimated from these and it (`ForecastRequest.rate_log`)."""
        self._last_id = -1
        self.scheduler, self.now = scheduler, now
        self.replays, self.budget, self.seconds = replays, budget, seconds
        self.shown: dict[str, Shown] = {}
        """Owner uid → its last forecast (what the visibility API and the page show)."""
        self.kept: dict[int, Kept] = {}
        """Job id → its first forecast made while it waited, until it starts and ends."""
        self.times = times
        """The pool's own task times (`sim.task_times`; None: its replays run every task of
        a stage with nothing measured for its estimate, as before a pool learned them):
        its replays draw from them, and until they are `ready` it says so instead."""
        self.calibration = calibrations(live=times is not None)
        self.held: dict[str, deque[bool]] = {k: deque(maxlen=WINDOW) for k in self.calibration}
        """Per kind (start, finish), whether each of the last `WINDOW` resolved forecasts
        held its actual inside the interval shown (`coverage`)."""
        self.resuming: Future[Tail] | None = None
        """The pool's records in the history sink, being read (`resume_from`)."""
        self.refreshes = 0
        self.taken = 0
        """Refreshes whose result was taken back (last: after every workflow's forecast)."""
        self.cpu: list[float] = []
        """CPU seconds of each refresh's forecast (the benchmark reads them)."""
        self._schedulers: dict[str, Scheduler] = {}
        """The replays' schedulers by spec (used by one refresh at a time)."""
        self.ships = False
        """Whether its requests cross to a replay process (the scheduler goes as its spec)."""
        self.asked: dict[int, dict[int, tuple[Job, Any]]] = {}
        """The last request's seed → its workflows' jobs and owners by job id: the
        operator's objects, which stay behind while the request's replays run."""
        self.spread, self.typical = 0.0, 1.0
        """The standard error of the log of the pool's average stretch its last refresh's
        replays drew from (`live`; 0: none drawn), whose unspread part widens its starts
        (`take`, `forecast_calibration.shared_margin`); that average, scores' (`score`)."""
        self.typical_known = False
        """Its tasks' median was once known (`unknown`): a pool forecasts from then on."""
        self.latency = 0.0
        """The median start latency (release to Running) of the pool's tasks its last
        refresh drew from (`live`; 0: none): a replay starts a workflow at its release, its
        user sees it start once its first pod runs (`started_at`), which is forecast."""

    def note_arrivals(self) -> None:
        """Event loop: the workflows that arrived since the last call join `recent` (the
        cluster's jobs are in id order, and ids grow: the new ones are at its end)."""
        jobs = self.cluster.jobs
        new = []
        for job in reversed(jobs):
            if job.id <= self._last_id:
                break
            new.append(job)
        if new:
            self._last_id = new[0].id
            self.recent.extend(reversed(new))
        for job in new:  # (before a refresh can forecast it: a rebuilt one's status wins)
            payload = job.payload
            if getattr(payload, "forecast_restored", False) and job.id not in self.kept:
                # a DagWorkflow rebuilt with its first forecast (`restore_first`): kept
                # again, as the operator that made it kept it (one that had started was
                # observed by that operator's metric: `Kept.start_told`)
                payload.forecast_restored = False
                start, finish = payload.forecast_replayed
                queue = queue_name(self.cluster, job)
                made = payload.forecast_made
                told = job.first_start is not None
                self.kept[job.id] = Kept(job, queue, made, start, finish, start_told=told)

    def resume_from(self, records: Future[Tail]) -> None:
        """Resume from the pool's last records in the history sink (module docstring, "After
        a restart"), once `records` is read (the sink's thread reads it; the first refresh
        after that takes it): the calibration, scores recorded meanwhile coming after, and
        the recent arrivals the invented ones copy, with their rate (`resume_recent`)."""
        self.resuming = records

    def _resume(self) -> None:
        """Event loop: take the history sink's records, if read (`resume_from`)."""
        reading = self.resuming
        if reading is None or not reading.done():
            return
        self.resuming = None
        try:
            records = reading.result().workflows
        except Exception as exc:  # (a sink that cannot be read: cold, loudly)
            self._not_resumed("The forecast calibration and recent arrivals were", exc)
            return
        self.resume_recent(records)
        try:
            resumed = resumed_calibration(records)
        except Exception as exc:  # (a corrupt calibration: cold, loudly, never the pool's end)
            self._not_resumed("The forecast calibration was", exc)
            return
        for which, calibration in self.calibration.items():
            calibration.resume(resumed[which])
        log.info(
            "The forecast calibration resumed from the history sink: %d start and %d finish "
            "scores.",
            len(resumed["start"].scores),
            len(resumed["finish"].scores),
        )

    def _not_resumed(self, what: str, exc: Exception) -> None:
        """A resume that failed: logged (and counted, by the runtime)."""
        log.warning(
            "%s not resumed from the history sink (%s: %s); its intervals start cold.",
            what,
            type(exc).__name__,
            exc,
        )

    def resume_recent(self, records: Iterable[HistoryWorkflow]) -> None:
        """Event loop: the finished workflows of `records` (the pool's in its history sink,
        from before a restart) join `recent`, merged by arrival with those the pool has seen
        since (the workflows it rebuilt, and any arrived since), and their (arrival, work)
        is kept for the invented arrivals' rate (`resumed_log`): a restarted pool copies
        the workflows it copied before it stopped, at the rate it saw them arrive.
        Each record's DAG, its measured durations and its queue (as the pool places a
        workflow: its queueName, label or namespace) make its template; one whose queue the
        pool no longer has is left out (no stream of the pool's now copies it)."""
        admission = self.cluster.admission
        found: list[Recent] = []
        for record in records:
            if record.arrival is None:
                continue
            try:
                queue = 0
                if admission is not None:
                    named = record.spec.queue_name
                    queue = queue_of(admission.queues, record.namespace, named, record.labels)
                dag = Dag.from_spec(record.spec)
            except IdlegateError as exc:
                log.debug("Not a template of the invented arrivals: %s (%s)", record.source, exc)
                continue
            found.append(Recent(record.arrival, queue, dag, record.durations()))
        if not found:
            return
        found.sort(key=lambda r: r.arrival)
        self.note_arrivals()
        merged = sorted([*found, *self.recent], key=lambda t: t.arrival)
        self.recent.clear()
        self.recent.extend(merged)
        self.resumed_log = [(r.arrival, r.dag.total_work) for r in found[-RATE_WINDOW:]]

    def unknown(self) -> str | None:
        """Why the pool cannot forecast yet, or None: its own task times not `ready`, or
        their median not known (`TaskTimes.median_known`: once it is, it stays known)."""
        if self.times is None or self.typical_known or not self.cluster.jobs:
            return None
        if not self.times.ready:
            return (
                f"fewer than {EVIDENCE} tasks of its pool have ended, so how long the pool's "
                "tasks take against what their stages declare (their start latency, their "
                "stretch) is not known yet; its forecast follows once they have"
            )
        if not self.times.median_known(self.running_tasks(self.now())):
            return (
                "of the tasks its pool has run, only the quick ones have ended, so how long "
                "its tasks typically take against what their stages declare is not known "
                "yet; its forecast follows once half of them, by that measure, have ended"
            )
        self.typical_known = True
        return None

    def running_tasks(self, now: float) -> list[tuple[float, float]]:
        """Event loop: each task running now whose pod was seen Running: (seconds it has
        run at `now`, the seconds its stage declares), as `TaskTimes.frozen` takes them."""
        out = []
        for executor, stage, _ in self.cluster.running_tasks():
            since = getattr(stage.job.payload, "running_since", None)
            seen = since(stage.index, executor) if since is not None else None
            if seen is not None:
                out.append((now - seen, stage.duration))
        return out

    def request(self) -> ForecastRequest:
        """Event loop: a fork of the pool at the loop's time, and a scheduler copy (its
        spec, if the request `ships`). Kept forecasts whose workflow started or ended since
        are scored first (after the calibration resumed, if its records were read)."""
        now = self.now()
        self.note_arrivals()  # (a rebuilt workflow's first forecast kept before it is scored)
        self._resume()
        self.score(now)
        fork = planning_fork(self.cluster)
        if fork.now < now:
            fork.advance(now)
        self.live(fork)
        policy, spec, learns = self.scheduler()
        self.refreshes += 1
        wanted = replayed_spec(spec, learns)
        arrivals = self.with_arrivals(fork)
        overtake = self.overtake(fork)
        if self.ships and wanted is not None:  # (built there: `compute`)
            request = ForecastRequest(
                fork, None, self.refreshes, *arrivals, spec=wanted, overtake=overtake
            )
        else:
            copied = scheduler_copy(policy, spec, learns, self._schedulers)
            request = ForecastRequest(fork, copied, self.refreshes, *arrivals, overtake=overtake)
        self.asked = {request.seed: {j.id: (j, j.payload) for j in self.cluster.jobs}}
        return request

    def live(self, fork: Cluster) -> None:
        """Event loop: the jobs of `fork` (the pool's, forked now) draw the tasks of a stage
        with nothing measured from the pool's own task times, once they are `ready`
        (`sim.task_times`): one copy for all, so that a replay draws its error of their
        average once; the tasks running now, their pods seen Running, are the censored
        stretches it corrects the quick ones that ended first by."""
        self.spread, self.typical, self.latency = 0.0, 1.0, 0.0
        if self.times is None or not self.times.ready:
            return
        times = self.times.frozen(self.running_tasks(fork.now))
        self.spread, self.typical = times.spread[1], times.typical
        self.latency = median(times.latencies) if times.latencies else 0.0
        for job in fork.jobs:
            if isinstance(job.payload, MeasuredDurations):
                job.payload = job.payload.frozen(times)

    def with_arrivals(
        self, fork: Cluster
    ) -> tuple[str, tuple[Recent, ...], list[tuple[float, float]] | None]:
        """Event loop: what the replays of `fork` (the pool's, forked now) invent: the
        pool's `arrivals`, copies of its `recent` frozen now, and the log of their rate
        (`ForecastRequest`'s; a refresh's, and a what-if's on the pool)."""
        # (a pool's arrivals may change at run time, its tasks come out: its start prior
        # follows them)
        self.calibration["start"].prior = start_prior(
            self.arrivals != "none", self.times is not None, self.times
        )
        if self.arrivals == "none":
            return self.arrivals, (), None
        self.note_arrivals()
        return self.arrivals, templates(self.recent), self.rate_log(fork)

    def rate_log(self, fork: Cluster) -> list[tuple[float, float]] | None:
        """The (time, work) arrivals a rate of `fork` (the pool's, forked now) is fitted on
        when its own log lacks those before a restart (`resumed_log`); None: its own."""
        if not self.resumed_log:
            return None
        return sorted([*self.resumed_log, *fork.arrival_log[-RATE_WINDOW:]])

    def overtake(self, fork: Cluster) -> Overtake | None:
        """Event loop: a live pool's arrivals counted from its own past, which raise its
        waiting workflows' interval tops where its replays invent none
        (`sim.forecast_overtake`); None for a pool that learns no task times (the
        simulator's: `idlegate forecast evaluate` is as it was) or invents arrivals."""
        if self.times is None or self.arrivals != "none":
            return None
        self.note_arrivals()
        dags = [t.dag for t in self.recent]
        log = self.rate_log(fork) or fork.arrival_log
        sizes = [size_of(t.dag, t.priority) for t in self.recent]
        return Overtake.of(log, fork.now, sizes, effective_executors(fork, dags))

    def for_what_if(
        self, request: ForecastRequest
    ) -> tuple[ForecastRequest, dict[str, Calibration]]:
        """Event loop: a what-if's `request` as the pool's refresh asks its own (its
        arrivals: `with_arrivals`), and a copy of the calibration to widen its interval
        (the loop records scores while the worker thread reads it); its replays draw from
        the pool's own task times as the refresh's do (`live`). The history sink's records
        are taken first if read (`_resume`): a what-if asked after a restart, before the
        pool's first refresh, has the resumed calibration and arrivals, not cold ones."""
        self._resume()
        self.live(request.fork)
        arrivals, recent, rate_log = self.with_arrivals(request.fork)
        overtake = self.overtake(request.fork)
        asked = dataclasses.replace(
            request, arrivals=arrivals, recent=recent, rate_log=rate_log, overtake=overtake
        )
        return asked, copy.deepcopy(self.calibration)

    def take(self, request: ForecastRequest, result: PoolForecast, cpu: float) -> list[Any]:
        """Event loop: the refresh's `result` (of `request`, taking `cpu` seconds) becomes
        each workflow's forecast (`shown`, its first one `kept`); returns the DagWorkflows
        whose forecast moved, to be written."""
        self.cpu.append(cpu)
        made, dirty = result.now, []
        # (its R replays spread their draws' shared error of the average in part: the rest)
        self.calibration["start"].shared = shared_margin(self.spread, result.replays)
        owned = self.asked.pop(request.seed, {})
        for entry in result.workflows:
            job, payload = owned.get(entry.job_id, (None, None))
            owner = getattr(payload, "owner", None)
            if job is None or payload is None or owner is None or job.finish is not None:
                continue  # (ended meanwhile: nothing to show)
            started = started_at(job)
            if job.first_start is None and isinstance(entry, sim_forecast.WorkflowForecast):
                entry = dataclasses.replace(entry, start=shifted(entry.start, self.latency))
            elif started is None and job.first_start is not None:  # (its pod starts soon)
                started = job.first_start + self.latency
            shown = as_shown(entry, made, self.calibration, started)
            first = False
            if isinstance(shown, Forecast) and job.first_start is None and job.id not in self.kept:
                assert isinstance(entry, sim_forecast.WorkflowForecast)
                queue = queue_name(self.cluster, job)
                self.kept[job.id] = Kept(job, queue, shown, entry.start, entry.finish, self.typical)
                if hasattr(payload, "forecast_made"):  # (its history record and status say it)
                    payload.forecast_made = shown
                    payload.forecast_replayed = entry.start, entry.finish
                    first = True
            old = self.shown.get(owner.uid)
            self.shown[owner.uid] = shown
            if hasattr(payload, "forecast") and (first or moved(old, shown)):
                payload.forecast = shown
                dirty.append(payload)
        live = {o.uid for j in self.cluster.jobs if (o := getattr(j.payload, "owner", None))}
        for uid in [u for u in self.shown if u not in live]:
            del self.shown[uid]
        self.taken += 1
        return dirty

    def score(self, now: float) -> list[tuple[str, str, float]]:
        """Kept forecasts whose workflow started (or ended) since: their absolute errors to
        the metric, and to the calibration relative to their refresh's typical stretch
        (`sim.forecast_calibration.rescaled`); returns (queue, which, error) of each."""
        out = []
        live = {j.id for j in self.cluster.jobs}
        for job_id, kept in list(self.kept.items()):
            job, f, scale = kept.job, kept.forecast, self.typical / (kept.typical or self.typical)
            if job.finish is None and job_id not in live:  # (deleted, or moved to another pool)
                del self.kept[job_id]
                continue
            started = started_at(job)
            if not kept.started and started is not None:
                kept.started = True
                if not kept.start_told:
                    out.append((kept.queue, "start", abs(started - f.start)))
                self.calibration["start"].record(kept.start, f.computed_at, started, scale)
                assert f.start_interval is not None  # (made while it waited)
                self._held("start", f.start_interval, started)
            if job.finish is not None:
                out.append((kept.queue, "finish", abs(job.finish - f.finish)))
                self.calibration["finish"].record(kept.finish, f.computed_at, job.finish, scale)
                self._held("finish", f.finish_interval, job.finish)
                del self.kept[job_id]
        return out

    def _held(self, which: str, interval: tuple[float, float], actual: float) -> None:
        low, high = interval
        self.held[which].append(low <= actual <= high)

    def coverage(self) -> dict[str, tuple[int, int]]:
        """Per kind (start, finish): of the pool's last resolved forecasts (since the
        operator started), how many held their actual inside the interval shown, and of how
        many (a what-if's answer says it: `operator.forecasting.whatif.sureness`)."""
        return {which: (sum(held), len(held)) for which, held in self.held.items()}


def history_forecast(
    made: Forecast | None,
    started: float | None,
    replayed: tuple[sim_forecast.Span, sim_forecast.Span] | None = None,
) -> tuple[tuple[str, float], ...] | None:
    """A finished workflow's record's ``forecast`` (`sim.history.records.FORECAST_KEYS`):
    its first forecast made while it waited, `made`, its real start, and the replays'
    intervals of that forecast (start, finish) before the calibration widened them, from
    which a restarted pool's calibration is rebuilt (`resumed_calibration`); None: none."""
    if made is None:
        return None
    pairs = [("madeAt", made.computed_at), ("start", made.start), ("finish", made.finish)]
    if started is not None:
        pairs.append(("startedAt", started))
    if replayed is not None:
        start, finish = replayed
        pairs += [("startLow", start.low), ("startHigh", start.high)]
        pairs += [("finishLow", finish.low), ("finishHigh", finish.high)]
    return tuple(pairs)


def resumed_calibration(records: Iterable[HistoryWorkflow]) -> dict[str, Calibration]:
    """The calibration (start, finish) that `records` (a pool's, oldest first) give: each
    record's first forecast, with the replays' interval it stored, scored against its real
    start and finish as `ForecastBook.score` scored it (the last `WINDOW` of each kind).
    A record without the interval (an older operator's) gives none. SpecError (a
    sentence) if a stored interval does not hold its forecast (low ≤ forecast ≤ high):
    the stored calibration is corrupt, and the caller starts cold."""
    out = calibrations()
    for record in records:
        found = dict(record.forecast or ())
        if "startLow" not in found:
            continue
        made = found["madeAt"]
        finish = None
        if record.arrival is not None and record.jct is not None:
            finish = record.arrival + record.jct
        for which, actual in (("start", found.get("startedAt")), ("finish", finish)):
            low, median = found.get(f"{which}Low"), found[which]
            high = found.get(f"{which}High")
            if low is None or high is None or not low <= median <= high:
                raise SpecError(
                    f"{record.source}: the forecast's {which} interval [{low}, {high}] does "
                    f"not hold its {which} {median}"
                )
            if actual is not None:
                out[which].record(sim_forecast.Span(low, median, high), made, actual)
    return out


def accuracy(records: Iterable[Any]) -> str | None:
    """`idlegate advise`'s line on the forecasts a history file recorded (records with a
    ``forecast``, an arrival and a JCT): median and p90 absolute error of start and finish."""
    starts, finishes = [], []
    for r in records:
        found = dict(r.forecast or ())
        if not found or r.arrival is None or r.jct is None:
            continue
        finishes.append(abs(r.arrival + r.jct - found["finish"]))
        if "startedAt" in found:
            starts.append(abs(found["startedAt"] - found["start"]))
    if not finishes:
        return None

    def q(values: list[float], p: float) -> str:
        ordered = sorted(values)
        return f"{ordered[min(len(ordered) - 1, int(p * len(ordered)))]:.0f} s" if values else "-"

    return (
        f"Forecasts recorded for {len(finishes)} workflows: start error median {q(starts, 0.5)}, "
        f"p90 {q(starts, 0.9)}; finish error median {q(finishes, 0.5)}, p90 {q(finishes, 0.9)} "
        "(each workflow's first forecast made while it waited, against what happened)."
    )
