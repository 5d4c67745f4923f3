"""Schedulers for rigid (HPC-style) jobs: priority rules, EASY backfilling, the reject rule.

A rigid job is a one-stage gang DAG (`idlegate.sim.rigid`): it needs n executors at once
for its requested time r (the stage's `duration`, what schedulers see). The rules follow
SchedInspector (Zhang et al., HPDC 2022) and its simulator:

**Priority orders** (smaller first; ties to the lower job id, LCFS to the higher):

=========  ===============================================  ==========================
name       key                                              note
=========  ===============================================  ==========================
``fcfs``   submit time                                      first come, first served
``lcfs``   −submit time                                     last come, first served
``sjf``    (r, n)                                           shortest *requested time*
``saf``    r·n                                              smallest area
``srf``    r / n                                            smallest ratio
``f1``     log10(r)·n + 870·log10(s)                        Carastan-Santos & de
                                                            Camargo's F1 (s: submit)
=========  ===============================================  ==========================

For a DAG job r is its critical path and n its average width (total work / critical
path), which are the requested time and the size for a one-stage job. s is the job's
submit time in the trace's clock (`RigidRun.submit_time`; the arrival time for jobs
without one); r or s of 0 counts as 0.1, as in SchedInspector.

Note the registered DAG heuristics `sjf` and `lcfs` (`policy.heuristics`) are not these:
they launch the best job *that fits now* (so they backfill greedily, without a
reservation), and `sjf` orders by total work, which for a rigid job is r·n (SAF). The
rigid orders are reached by the names ``fcfs``, ``saf``, ``srf``, ``f1`` and by the spec
kinds below, where BASE is one of the six names above:

* ``strict:BASE`` — no backfilling. The *pick* is fixed as SchedInspector's simulator
  fixes it: right after every start it is the highest-priority job waiting then, and
  while none waits, the next job to arrive. If it fits the free executors it starts,
  else it is the committed head and nothing else starts until it does: a later arrival
  with a higher priority does not displace it (SchedInspector's `skip_for_resources`).
  ``fcfs`` is ``strict:fcfs`` and so on. ``?lock_in=false`` is the greedier variant: the
  pick is the highest-priority waiting job whenever the cluster asks, which it does
  only when some job fits, so a pick that cannot start is not committed until then.
  Example: a 256-executor job arrives while the machine is full, then a 1-executor
  job; when one executor frees, ``strict:sjf`` waits for the big job (committed at its
  arrival, the queue being empty) and ``strict:sjf?lock_in=false`` starts the small one.
* ``easy:BASE`` — EASY backfilling (Lifka 1995; Mu'alem & Feitelson 2001). The blocked
  head gets a reservation at the *shadow time*, the earliest time enough executors are
  free if running jobs end at their start + requested time; the *extra* executors are
  those free then beyond the head's need. Other waiting jobs (in FCFS order, or the
  base's with ``backfill_order="base"``) start now if they fit and either end by the
  shadow time (now + r ≤ shadow) or use at most the extra executors
  (``extra_nodes=False`` keeps only the first condition, strictly before the shadow
  time, as SchedInspector's simulator). The pick is fixed as for ``strict:``.
  The reservation is recomputed at every decision, so a job ending before its request
  pulls the shadow time in.
* ``reject:BASE`` (also ``reject:easy:BASE``) — the reject rule: whenever the base's pick
  cannot start now it is rejected, nothing starts at this scheduling point, and at the
  next one (an arrival or completion) the base picks again — possibly another job. A job
  is rejected at most ``max_rejections`` times (72, SchedInspector's 12 h cap at one
  rejection per 600 s); after that the pick is accepted and waits as the committed head
  (backfilled around with ``easy:``). Rejections are counted at SchedInspector's
  scheduling points: right after every start, at every arrival and every completion
  (one each, also when several share a time), and every ``interval`` seconds (600)
  after a rejection without an event. The cluster asks only when some job fits, so the
  points in between are replayed at the next question (`RejectScheduler.replay`); a
  pick accepted at a 600 s point the cluster did not stop at starts at the next event.

Every rule here starts a gang stage whole or not at all (the cluster enforces it).
"""

from __future__ import annotations

import math
from bisect import bisect_right
from collections.abc import Callable
from typing import Any

from idlegate.errors import IdlegateError, reject_unknown
from idlegate.policy.heuristics import best_stage, launch_decision
from idlegate.policy.spec import SchedulerSpec
from idlegate.sim.protocol import WAIT, Action, ClusterView, Job, Scheduler, Stage

F1_SUBMIT_WEIGHT = 870.0
MIN_LOG_ARGUMENT = 0.1
"""SchedInspector's stand-in for a requested or submit time of 0 inside log10."""
DEFAULT_MAX_REJECTIONS = 72
DEFAULT_REJECT_INTERVAL = 600.0

# ---------------------------------------------------------------------------------------
# Job attributes and priority keys


def requested_time(job: Job) -> float:
    """r: the requested time of a rigid job (its critical path for a DAG job)."""
    return job.dag.critical_path


def job_size(job: Job) -> float:
    """n: the executors a rigid job needs (its average width for a DAG job)."""
    return job.dag.average_width


def submit_time(job: Job) -> float:
    """s: the trace's submit time if the job carries one, else its arrival time."""
    s = getattr(job.payload, "submit_time", None)
    return job.arrival if s is None else float(s)


def log10_floor(x: float) -> float:
    """log10(x), with x <= 0 counted as 0.1 (SchedInspector)."""
    return math.log10(x if x > 0 else MIN_LOG_ARGUMENT)


def _finish(record: Any) -> float:
    return float(record.finish)


def _size(record: Any) -> int:
    """The executors a finished rigid job held (its record's work / critical path)."""
    return round(record.total_work / record.critical_path) if record.critical_path > 0 else 0


PriorityKey = Callable[[Job], tuple[float, ...]]

ORDERS: dict[str, PriorityKey] = {
    "fcfs": lambda j: (submit_time(j), j.id),
    "lcfs": lambda j: (-submit_time(j), -j.id),
    "sjf": lambda j: (requested_time(j), job_size(j), j.id),
    "saf": lambda j: (requested_time(j) * job_size(j), j.id),
    "srf": lambda j: (requested_time(j) / job_size(j), j.id),
    "f1": lambda j: (
        log10_floor(requested_time(j)) * job_size(j)
        + F1_SUBMIT_WEIGHT * log10_floor(submit_time(j)),
        j.id,
    ),
}
"""The rigid priority orders by name (smaller key first)."""
ORDER_ALIASES = {"fifo": "fcfs"}


def order_name(name: str) -> str:
    """The canonical order name of `name`, or an IdlegateError listing the valid ones."""
    key = ORDER_ALIASES.get(name.strip().lower(), name.strip().lower())
    if key not in ORDERS:
        raise IdlegateError(
            f"unknown rigid priority order {name!r}; choose one of {', '.join(ORDERS)}"
        )
    return key


def fits(stage: Stage, free: int) -> bool:
    """True when `stage` can start on `free` executors now (a gang needs all its tasks)."""
    return free > 0 and (not stage.gang or stage.tasks <= free)


# ---------------------------------------------------------------------------------------
# Strict priority (no backfilling)


class StrictScheduler:
    """The base's pick starts if it fits, else it is the committed head (see the module doc).

    With `lock_in` (the default) the pick is fixed as SchedInspector's simulator fixes
    it: right after every start of a pick (`next_pick`, the best of the jobs waiting
    then) and, while none waits, at the next arrival (`fresh`: the earliest-arrived
    waiting job). Without it the pick is the best waiting job whenever the cluster asks,
    which is only when some job fits, so a later arrival may overtake a blocked pick.
    """

    def __init__(self, order: str = "fcfs", *, lock_in: bool = True) -> None:
        if not isinstance(lock_in, bool):
            raise IdlegateError(f"lock_in must be true or false, got {lock_in!r}")
        self.order = order_name(order)
        self.lock_in = lock_in
        self._key = ORDERS[self.order]
        self._keys: dict[int, tuple[float, ...]] = {}
        self.head: Job | None = None
        """The committed blocked pick, or None."""
        self.next_pick: Job | None = None
        """The pick fixed right after the last start, not yet questioned (lock-in only)."""
        self.next_pick_time = 0.0
        """When `next_pick` was fixed."""
        self.fresh = True
        """No job waited after the last start: the next pick is the next arrival."""
        self.name = self._name()

    def _name(self) -> str:
        suffix = "" if self.lock_in else "?lock_in=false"
        return f"strict:{self.order}{suffix}"

    def reset(self, rng: Any) -> None:
        """Forget the head, the fixed pick and the cached keys (a new run)."""
        self.head = None
        self.next_pick = None
        self.fresh = True
        self._keys = {}

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r})"

    def key(self, job: Job) -> tuple[float, ...]:
        """The job's priority key (cached: every input is static)."""
        k = self._keys.get(job.id)
        if k is None:
            k = self._keys[job.id] = self._key(job)
        return k

    def best(self, jobs: list[Job]) -> Job:
        """The highest-priority job of `jobs` (not empty)."""
        return min(jobs, key=self.key)

    def waiting(self, view: ClusterView) -> list[Job]:
        """Jobs with a stage to launch, in arrival order."""
        runnable = view.runnable
        return [j for j in view.jobs if runnable(j)]

    def pick(self, view: ClusterView) -> Job | None:
        """The committed head or the fixed pick if it still waits, else the next pick:
        the earliest arrival while `fresh`, else the highest-priority waiting job."""
        for fixed in (self.head, self.next_pick):
            if fixed is not None and fixed.finish is None and view.runnable(fixed):
                return fixed
        self.head = self.next_pick = None
        jobs = self.waiting(view)
        if not jobs:
            return None
        if not (self.lock_in and self.fresh):
            return self.best(jobs)
        first = jobs[0]  # waiting() is in arrival order
        if first.arrival < view.now:
            # it could not start when it arrived (the cluster did not ask): fixed since
            self.next_pick, self.next_pick_time, self.fresh = first, first.arrival, False
        return first

    def candidate(self, view: ClusterView) -> tuple[Job | None, Stage | None]:
        """(`pick`, its best stage)."""
        job = self.pick(view)
        return job, None if job is None else best_stage(view.runnable(job), view.num_executors)

    def decide(self, view: ClusterView) -> Action:
        job, stage = self.candidate(view)
        if job is None or stage is None:
            return WAIT
        if fits(stage, view.free_executors):
            self.started(view, job, stage)
            return launch_decision(stage, view.num_executors)
        self.head = job
        self.next_pick = None
        self.fresh = False
        return self.blocked(view, job, stage)

    def started(self, view: ClusterView, job: Job, stage: Stage) -> None:
        """The pick `job` starts `stage` now: fix the next pick (see the class doc).

        A fresh pick that starts at once leaves the simulator's queue empty, so the next
        pick is again the next arrival (jobs arriving together are taken one by one).
        """
        self.head = self.next_pick = None
        if not self.lock_in or self.fresh:
            return
        done = stage.gang and view.runnable(job) == [stage]
        others = [j for j in self.waiting(view) if j is not job or not done]
        if others:
            self.next_pick = self.best(others)
            self.next_pick_time = view.now
        else:
            self.fresh = True

    def blocked(self, view: ClusterView, head: Job, stage: Stage) -> Action:
        """What to do while `head` cannot start: nothing, without backfilling."""
        return WAIT


# ---------------------------------------------------------------------------------------
# EASY backfilling


def reservation(view: ClusterView, need: int) -> tuple[float, int]:
    """(shadow time, extra executors) for a gang of `need` executors.

    Running tasks are assumed to end at their start + their stage's duration (the
    requested time), or now if already past it.
    """
    running = getattr(view, "running_tasks", None)
    if running is None:
        raise IdlegateError(
            "EASY backfilling needs the cluster's running tasks (Cluster.running_tasks); "
            "this view does not provide them"
        )
    now = view.now
    ends = sorted(max(now, start + stage.duration) for _, stage, start in running())
    short = need - view.free_executors
    if short <= 0:
        return now, view.free_executors - need
    if short > len(ends):  # cannot happen for a job that fits the machine
        return math.inf, 0
    shadow = ends[short - 1]
    available = view.free_executors + sum(1 for e in ends if e <= shadow)
    return shadow, available - need


def estimated_end(stage: Stage, now: float, executors: int) -> float:
    """When `stage` ends if started now on `executors` executors (tasks in waves)."""
    waves = math.ceil(stage.remaining / executors) if not stage.gang else 1
    return now + stage.duration * waves


class EasyScheduler(StrictScheduler):
    """EASY backfilling around the base's blocked pick (see the module docstring)."""

    def __init__(
        self,
        order: str = "fcfs",
        *,
        extra_nodes: bool = True,
        backfill_order: str = "fcfs",
        lock_in: bool = True,
    ) -> None:
        if not isinstance(extra_nodes, bool):
            raise IdlegateError(f"extra_nodes must be true or false, got {extra_nodes!r}")
        if backfill_order not in ("fcfs", "base"):
            raise IdlegateError(f"backfill_order must be 'fcfs' or 'base', got {backfill_order!r}")
        self.extra_nodes = extra_nodes
        self.backfill_order = backfill_order
        super().__init__(order, lock_in=lock_in)

    def _name(self) -> str:
        return super()._name().replace("strict:", "easy:", 1)

    def blocked(self, view: ClusterView, head: Job, stage: Stage) -> Action:
        free = view.free_executors
        shadow, extra = reservation(view, stage.tasks)
        now = view.now
        others = [j for j in self.waiting(view) if j is not head]
        if self.backfill_order == "base":
            others.sort(key=self.key)
        for job in others:  # waiting() is in arrival order: FCFS
            candidate = best_stage(view.runnable(job), free)
            if candidate is None:
                continue
            used = candidate.tasks if candidate.gang else min(free, candidate.remaining)
            end = estimated_end(candidate, now, used)
            if (end < shadow if not self.extra_nodes else end <= shadow) or (
                self.extra_nodes and used <= extra
            ):
                if candidate.gang:
                    return launch_decision(candidate, view.num_executors)
                return launch_decision(candidate, job.held + used)
        return WAIT


# ---------------------------------------------------------------------------------------
# The reject rule


class RejectScheduler:
    """Reject the base's pick whenever it cannot start now (capped; see the module doc)."""

    def __init__(
        self,
        base: StrictScheduler,
        *,
        max_rejections: int = DEFAULT_MAX_REJECTIONS,
        interval: float = DEFAULT_REJECT_INTERVAL,
    ) -> None:
        if isinstance(max_rejections, bool) or not isinstance(max_rejections, int):
            raise IdlegateError(f"max_rejections must be a whole number, got {max_rejections!r}")
        if max_rejections < 0:
            raise IdlegateError(f"max_rejections must be >= 0, got {max_rejections}")
        if not isinstance(interval, int | float) or not interval > 0 or math.isinf(interval):
            raise IdlegateError(
                f"interval must be a finite number of seconds > 0, got {interval!r}"
            )
        self.base = base
        self.max_rejections = max_rejections
        self.interval = float(interval)
        self.name = f"reject:{base.name.removeprefix('strict:')}"
        self.rejections: dict[int, int] = {}
        """Rejections so far, by job id."""
        self._since: tuple[float, bool] | None = None
        """(time, a rejection there?) of the last point this rule answered while no pick
        is committed (a start, or a rejection); None while one is."""

    def reset(self, rng: Any) -> None:
        self.base.reset(rng)
        self.rejections = {}
        self._since = None

    def __repr__(self) -> str:
        return f"RejectScheduler({self.name!r}, max_rejections={self.max_rejections})"

    def decide(self, view: ClusterView) -> Action:
        base = self.base
        if self._since is not None:
            self.replay(view, *self._since)
        job, stage = base.candidate(view)
        if job is None:
            return WAIT
        if base.head is job or stage is None or not self.inspects(view, stage):
            return self._base_decides(view)  # committed, nothing to start, or not in question
        count = self.rejections.get(job.id, 0)
        if count >= self.max_rejections or not self.rejects(view, job, stage, count):
            return self._base_decides(view)  # accepted: the base commits to it (and backfills)
        self.reject(job, view.now)
        return WAIT

    def _base_decides(self, view: ClusterView) -> Action:
        action = self.base.decide(view)
        if self.base.head is not None:
            self._since = None  # committed: nothing is asked until it starts
        elif action is not WAIT:
            self._since = (view.now, False)  # the pick started: the next one is asked now
        return action

    def reject(self, job: Job, now: float) -> None:
        """Count one rejection of the pick `job` at `now`; the next point picks afresh."""
        self.rejections[job.id] = self.rejections.get(job.id, 0) + 1
        self._since = (now, True)
        self.base.next_pick = None
        self.base.fresh = False

    def replay(self, view: ClusterView, since: float, rejected: bool) -> None:
        """Answer the scheduling points between `since` and now the cluster did not ask about.

        SchedInspector asks right after every start, at every arrival and every
        completion (one point each, also when several share a time: arrivals first, then
        completions one by one), and `interval` seconds after a rejection without an
        event. The cluster asks only when some job fits, so at the points it skipped
        nothing could start: the pick there, the best job waiting then, is rejected or
        accepted (`rejects`, judged on the present view; always accepted at the cap), and
        an accepted pick is committed. The last point, now, is the present question.
        """
        now = view.now
        if since >= now:
            return
        waiting = self.base.waiting(view)  # nothing started since `since`
        points = self._points(view, waiting, since, rejected)
        if points and points[-1][0] == now:
            points.pop()
        last = since if rejected else None
        for t, arrived, free in [*points, (now, -1, 0)]:
            while last is not None and last + self.interval < t:
                last += self.interval
                if self._missed(view, waiting, last, len(waiting), 0) is None:
                    return
            if arrived < 0:
                return
            outcome = self._missed(view, waiting, t, arrived, free)
            if outcome is None:
                return
            last = t if outcome else None

    def _points(
        self, view: ClusterView, waiting: list[Job], since: float, rejected: bool
    ) -> list[tuple[float, int, int]]:
        """(time, jobs of `waiting` arrived by then, free executors if at now) per point."""
        now = view.now
        done = getattr(view, "done", ())
        ended = [r for r in done[bisect_right(done, since, key=_finish) :] if r.finish <= now]
        free = view.free_executors - sum(_size(r) for r in ended if r.finish == now)
        points = [] if rejected else [(since, len(waiting), 0)]
        points += [
            (j.arrival, i + 1, free if j.arrival == now else 0)
            for i, j in enumerate(waiting)
            if j.arrival > since
        ]
        for r in ended:
            if r.finish == now:
                free += _size(r)
            points.append((r.finish, len(waiting), free if r.finish == now else 0))
        points.sort(key=lambda p: p[0])  # stable: arrivals before completions at a time
        return points

    def _missed(
        self, view: ClusterView, waiting: list[Job], t: float, arrived: int, free: int
    ) -> bool | None:
        """One skipped point at `t`: True for a rejection, False for an empty queue, None
        when replaying ends there (the pick is committed, or starts now)."""
        queue = [j for j in waiting[:arrived] if j.arrival <= t]
        if not queue:
            return False
        job = self.base.best(queue)
        stage = best_stage(view.runnable(job), view.num_executors)
        if stage is None or (t == view.now and fits(stage, free)):
            return None  # it starts at this point, as it will in `decide`
        count = self.rejections.get(job.id, 0)
        # the judge sees the system as it is now (the view of `t` is gone)
        if count >= self.max_rejections or not self.rejects(view, job, stage, count):
            self.base.head = job  # accepted: committed until it starts
            self.base.next_pick = None
            self._since = None
            return None
        self.reject(job, t)
        return True

    def inspects(self, view: ClusterView, stage: Stage) -> bool:
        """Whether the base's pick is in question at all: the rule questions only a pick
        that cannot start now."""
        return not fits(stage, view.free_executors)

    def rejects(self, view: ClusterView, job: Job, stage: Stage, count: int) -> bool:
        """Reject the pick (below the cap, already rejected `count` times)? The rule: always."""
        return True


# ---------------------------------------------------------------------------------------
# Construction from specs


def make_base(spec: SchedulerSpec | str, /, **params: Any) -> StrictScheduler:
    """A rigid base: ``ORDER`` (strict), ``strict:ORDER`` or ``easy:ORDER``, with the
    spec's parameters and keyword `params` (``extra_nodes``, ``backfill_order``)."""
    s = SchedulerSpec.of(spec)
    params = s.keywords(params)
    if s.kind == "easy":
        reject_unknown(params, ("extra_nodes", "backfill_order", "lock_in"), "easy:BASE")
        return EasyScheduler(s.argument or "", **params)
    if s.kind != "strict" and (s.argument is not None or s.base is not None):
        raise IdlegateError(
            f"a rigid base is ORDER, strict:ORDER or easy:ORDER (e.g. easy:sjf), got {s}"
        )
    lock_in = params.pop("lock_in", True)
    if params:
        raise IdlegateError(
            f"strict:BASE takes only lock_in (got {sorted(params)[0]!r}); backfilling "
            "options belong to easy:BASE"
        )
    return StrictScheduler(s.argument or s.kind, lock_in=lock_in)


def make_rigid(spec: SchedulerSpec, /, **params: Any) -> Scheduler:
    """Build ``strict:ORDER``, ``easy:ORDER`` or ``reject:BASE`` with keyword `params`
    (``reject:`` keeps ``max_rejections`` and ``interval``, its base gets the others)."""
    if spec.kind != "reject" or spec.base is None:
        return make_base(spec, **params)
    params = spec.keywords(params)
    own = {k: params.pop(k) for k in ("max_rejections", "interval") if k in params}
    return RejectScheduler(make_base(spec.base, **params), **own)


def _strict(order: str) -> Callable[[], Scheduler]:
    def factory() -> Scheduler:
        scheduler = StrictScheduler(order)
        scheduler.name = order
        return scheduler

    factory.__name__ = order
    factory.__doc__ = f"Strict {order.upper()} order for rigid jobs (no backfilling)."
    return factory


RIGID_SCHEDULERS: dict[str, Callable[..., Scheduler]] = {
    name: _strict(name) for name in ("fcfs", "saf", "srf", "f1")
}
"""The registered names this module adds (`sjf`, `lcfs` stay the DAG heuristics)."""
