"""What the lookahead planner's plans are made of: requests, plans, statistics, job sets,
and the reason of a hold.

`policy.lookahead` makes them; an operator's planning worker (switch mode) carries a
`PlanRequest` to another thread and a `Plan` back (see `policy.lookahead`,
"Asynchronous planning"). A decision-mode planner that holds a stage back for arrivals
its futures expect says why in a `Hold` (`hold_of`), which the operator's Events quote.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from idlegate.sim.cluster import Cluster
from idlegate.sim.protocol import WAIT, Action, ClusterView, Decision, Stage
from idlegate.sim.rollout import OVERDUE_FRACTION, Forkable, Future

JobSet = tuple[int, ...]
"""The ids of the jobs in the system, in arrival order: what a switch-mode plan is for."""


def job_set(view: ClusterView) -> JobSet:
    """The job set of `view` (a plan made for another one is stale)."""
    return tuple(j.id for j in view.jobs)


@dataclass
class PlannerStats:
    """What the planner did in a run (for reports and the decision-time benchmark)."""

    decisions: int = 0
    planned: int = 0
    """Decisions where candidates differed, so futures were simulated (switch mode: plans)."""
    rollouts: int = 0
    changed: int = 0
    """Plans where the planner overruled BASE."""
    waits: int = 0
    idles: int = 0
    holds: int = 0
    """Waits and idle slots chosen for arrivals the futures expect (`Hold`)."""
    switches: int = 0
    """Times the followed policy changed (switch mode)."""
    dropped: int = 0
    """Plans dropped because the job set changed while they were made, or because they
    overran their budget (switch mode)."""
    overran: int = 0
    """Plans abandoned because they took longer than their budget (switch mode)."""
    plan_seconds: list[float] = field(default_factory=list)
    """Wall seconds of each plan (of each planned decision)."""
    plan_cpu_seconds: list[float] = field(default_factory=list)
    """CPU seconds of each plan's thread (of each planned decision)."""


@dataclass(frozen=True)
class PlanRequest:
    """What a switch-mode plan needs, taken from the live cluster (`request`)."""

    key: JobSet
    fork: Cluster
    """A `planning_fork` of the live cluster: the plan's alone."""
    following: str
    """The policy followed when the plan was requested (the incumbent, `margin`)."""
    futures: tuple[Future, ...]
    horizon: float
    now: float
    """Cluster time of the state planned on."""


@dataclass(frozen=True)
class Plan:
    """The outcome of `plan`: which policy to follow for the job set `key`, and why."""

    key: JobSet
    choice: str
    """Name of the policy to follow (BASE's or a candidate's)."""
    costs: Mapping[str, float]
    """Mean rollout cost C of each policy (raced out: of the futures it ran, its first
    rollout stopped where it passed the bar, so a lower bound)."""
    raced_out: tuple[str, ...]
    """Policies that saw fewer futures than the others (`LookaheadConfig.race`)."""
    futures: int
    """Futures the policies not raced out saw (fewer than M when the budget ran out)."""
    horizon: float
    """The horizon planned over, in seconds (the shortest one when cut short)."""
    planned_at: float
    """Cluster time of the state planned on."""
    seconds: float
    """Wall seconds `plan` took."""
    cpu_seconds: float
    """CPU seconds of the planning thread (what `plan` costs without contention)."""
    overran: bool = False
    """It took longer than its budget: `adopt` abandons it rather than apply it late."""

    def expected_change(self, versus: str = "fair") -> float | None:
        """C(choice) / C(versus) − 1 over the horizon (−0.08: 8 % fewer job-seconds), or
        None when `versus` was not simulated."""
        if versus not in self.costs or self.costs[versus] <= 0:
            return None
        return self.costs[self.choice] / self.costs[versus] - 1.0


@dataclass(frozen=True)
class Hold:
    """Why a planner holds `stage` back: arrivals smaller than its workflow are expected.

    "holding extract: 3 short workflows expected within 40 s (p = 0.8)": `expected` is
    the median over the decision's futures of the arrivals within the hold (`window`
    seconds from the decision) whose total work is below the held workflow's remaining
    work, and `p` the share of futures with at least one. With one future (``expected``,
    ``oracle``) the median is that future's count and p is 1.0.
    """

    stage: Stage
    expected: float
    window: float
    """Seconds the hold lasts: the idle slot's length, or for a wait the time until the
    first running task is expected to end (when the planner decides again)."""
    p: float


def wait_window(view: Forkable) -> float:
    """Seconds until the first running task is expected to end (its stage's estimate after
    its start; an overdue one, as a rollout ends it, after a small fraction of it)."""
    ends = [
        max(start + stage.duration - view.now, OVERDUE_FRACTION * stage.duration)
        for _, stage, start in view.running_tasks()
    ]
    return min(ends, default=0.0)


def hold_of(view: Forkable, pick: Action, chosen: Action, futures: Sequence[Future]) -> Hold | None:
    """The `Hold` of the planner's `chosen` action, when it holds a stage back (an idle
    slot, or WAIT over BASE's launch of `pick`), for the arrivals of `futures`; None for
    any other action, or when no future has a smaller arrival within the hold (it is
    not for an arrival)."""
    if isinstance(chosen, Decision) and chosen.idle_delay > 0:
        return _hold(chosen.stage, view.now, chosen.idle_delay, futures)
    if chosen is WAIT and isinstance(pick, Decision) and pick.idle_delay == 0:
        return _hold(pick.stage, view.now, wait_window(view), futures)
    return None


def _hold(stage: Stage, now: float, window: float, futures: Sequence[Future]) -> Hold | None:
    size = stage.job.remaining_work
    counts = [
        sum(1 for a in f.arrivals if now < a.time <= now + window and a.dag.total_work < size)
        for f in futures
    ]
    if not any(counts):
        return None
    p = sum(c > 0 for c in counts) / len(counts)
    return Hold(stage, float(np.median(counts)), window, p)


def changed_between(view: Forkable, start: float, end: float) -> bool:
    """True when a job arrived, finished or was removed in (start, end]: a plan made at
    `start` and taking effect at `end` is stale."""
    for log, when in (
        (view.arrival_log, lambda e: e[0]),
        (view.done, lambda r: r.finish),
        (view.removed, lambda j: j.finish),
    ):
        for entry in reversed(log):
            t = when(entry)
            if t <= start:
                break
            if t <= end:
                return True
    return False
