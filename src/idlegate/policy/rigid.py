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

* ``strict:BASE`` — no backfilling. The highest-priority waiting job is the *pick*; if it
  fits the free executors it starts, else it becomes the committed head and nothing else
  starts until it does (SchedInspector's `skip_for_resources`: a later arrival with a
  higher priority does not displace it). ``fcfs`` is ``strict:fcfs`` and so on.
* ``easy:BASE`` — EASY backfilling (Lifka 1995; Mu'alem & Feitelson 2001). The blocked
  head gets a reservation at the *shadow time*, the earliest time enough executors are
  free if running jobs end at their start + requested time; the *extra* executors are
  those free then beyond the head's need. Other waiting jobs (in FCFS order, or the
  base's with ``backfill_order="base"``) start now if they fit and either end by the
  shadow time (now + r ≤ shadow) or use at most the extra executors
  (``extra_nodes=False`` keeps only the first condition, as SchedInspector's simulator).
  The reservation is recomputed at every decision, so a job ending before its request
  pulls the shadow time in.
* ``reject:BASE`` (also ``reject:easy:BASE``) — the reject rule: whenever the base's pick
  cannot start now it is rejected, nothing starts at this scheduling point, and at the
  next one (an arrival or completion) the base picks again — possibly another job. A job
  is rejected at most ``max_rejections`` times (72, SchedInspector's 12 h cap at one
  rejection per 600 s); after that the pick is accepted and waits as the committed head
  (backfilled around with ``easy:``). Rejections are counted at each scheduling point
  where something could start, plus one per ``interval`` seconds (600) the same job
  stays the rejected pick in between, as SchedInspector's inspector is re-asked every
  600 s without an event.

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
    """The base's pick starts if it fits, else it is the committed head (see the module doc)."""

    def __init__(self, order: str = "fcfs") -> None:
        self.order = order_name(order)
        self._key = ORDERS[self.order]
        self._keys: dict[int, tuple[float, ...]] = {}
        self.head: Job | None = None
        """The committed blocked pick, or None."""
        self.name = self._name()

    def _name(self) -> str:
        return f"strict:{self.order}"

    def reset(self, rng: Any) -> None:
        """Forget the head and the cached keys (a new run)."""
        self.head = None
        self._keys = {}

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r})"

    def key(self, job: Job) -> tuple[float, ...]:
        """The job's priority key (cached: every input is static)."""
        k = self._keys.get(job.id)
        if k is None:
            k = self._keys[job.id] = self._key(job)
        return k

    def waiting(self, view: ClusterView) -> list[Job]:
        """Jobs with a stage to launch, in arrival order."""
        return [j for j in view.jobs if j.runnable]

    def pick(self, view: ClusterView) -> Job | None:
        """The committed head if it still waits, else the highest-priority waiting job."""
        head = self.head
        if head is not None and head.finish is None and head.runnable:
            return head
        self.head = None
        jobs = self.waiting(view)
        return min(jobs, key=self.key) if jobs else None

    def candidate(self, view: ClusterView) -> tuple[Job | None, Stage | None]:
        """(`pick`, its best stage); (None, None) while no executor is free."""
        if view.free_executors <= 0:
            return None, None
        job = self.pick(view)
        return job, None if job is None else best_stage(job, view.num_executors)

    def decide(self, view: ClusterView) -> Action:
        job, stage = self.candidate(view)
        if job is None or stage is None:
            return WAIT
        if fits(stage, view.free_executors):
            self.head = None
            return launch_decision(stage, view.num_executors)
        self.head = job
        return self.blocked(view, job, stage)

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
        self, order: str = "fcfs", *, extra_nodes: bool = True, backfill_order: str = "fcfs"
    ) -> None:
        if not isinstance(extra_nodes, bool):
            raise IdlegateError(f"extra_nodes must be true or false, got {extra_nodes!r}")
        if backfill_order not in ("fcfs", "base"):
            raise IdlegateError(f"backfill_order must be 'fcfs' or 'base', got {backfill_order!r}")
        self.extra_nodes = extra_nodes
        self.backfill_order = backfill_order
        super().__init__(order)

    def _name(self) -> str:
        return f"easy:{self.order}"

    def blocked(self, view: ClusterView, head: Job, stage: Stage) -> Action:
        free = view.free_executors
        shadow, extra = reservation(view, stage.tasks)
        now = view.now
        others = [j for j in self.waiting(view) if j is not head]
        if self.backfill_order == "base":
            others.sort(key=self.key)
        for job in others:  # waiting() is in arrival order: FCFS
            candidate = best_stage(job, free)
            if candidate is None:
                continue
            used = candidate.tasks if candidate.gang else min(free, candidate.remaining)
            if estimated_end(candidate, now, used) <= shadow or (
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
        self._last: tuple[int, float] | None = None

    def reset(self, rng: Any) -> None:
        self.base.reset(rng)
        self.rejections = {}
        self._last = None

    def __repr__(self) -> str:
        return f"RejectScheduler({self.name!r}, max_rejections={self.max_rejections})"

    def missed_points(self, view: ClusterView, since: float) -> int:
        """Scheduling points in (since, now) where this rule was not asked.

        The cluster asks only when something could start; SchedInspector's inspector is
        asked at every arrival and completion, and every `interval` seconds without one.
        Arrivals come from `view.arrival_log`, completions from the cluster's finished
        jobs (`done`, when the view has it).
        """
        now = view.now
        times = [
            t for t, _ in view.arrival_log[bisect_right(view.arrival_log, (since, math.inf)) :]
        ]
        done = getattr(view, "done", ())
        times += [r.finish for r in done[bisect_right(done, since, key=_finish) :]]
        points = sorted(t for t in times if t < now)
        count = len(points)
        previous = since
        for t in [*points, now]:
            count += max(0, math.ceil((t - previous) / self.interval) - 1)
            previous = t
        return count

    def decide(self, view: ClusterView) -> Action:
        base = self.base
        job, stage = base.candidate(view)
        if job is None:
            return WAIT
        if base.head is job or stage is None or not self.inspects(view, stage):
            return base.decide(view)  # committed, nothing to start, or not in question
        count = self.rejections.get(job.id, 0)
        if self._last is not None and self._last[0] == job.id:
            count += self.missed_points(view, self._last[1])
        self.rejections[job.id] = count
        if count >= self.max_rejections or not self.rejects(view, job, stage, count):
            return base.decide(view)  # accepted: the base commits to it (and backfills)
        self.rejections[job.id] = count + 1
        self._last = (job.id, view.now)
        return WAIT

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
        reject_unknown(params, ("extra_nodes", "backfill_order"), "easy:BASE")
        return EasyScheduler(s.argument or "", **params)
    if s.kind != "strict" and (s.argument is not None or s.base is not None):
        raise IdlegateError(
            f"a rigid base is ORDER, strict:ORDER or easy:ORDER (e.g. easy:sjf), got {s}"
        )
    if params:
        raise IdlegateError(
            f"strict:BASE takes no parameter (got {sorted(params)[0]!r}); backfilling "
            "options belong to easy:BASE"
        )
    return StrictScheduler(s.argument or s.kind)


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
