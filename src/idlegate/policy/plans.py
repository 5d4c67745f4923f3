"""What the lookahead planner's plans are made of: requests, plans, statistics, job sets.

`policy.lookahead` makes them; an operator's planning worker (switch mode) carries a
`PlanRequest` to another thread and a `Plan` back (see `policy.lookahead`,
"Asynchronous planning").
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from idlegate.sim.cluster import Cluster
from idlegate.sim.protocol import ClusterView
from idlegate.sim.rollout import Future

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
    switches: int = 0
    """Times the followed policy changed (switch mode)."""
    dropped: int = 0
    """Plans dropped because the job set changed while they were made (switch mode)."""
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

    def expected_change(self, versus: str = "fair") -> float | None:
        """C(choice) / C(versus) − 1 over the horizon (−0.08: 8 % fewer job-seconds), or
        None when `versus` was not simulated."""
        if versus not in self.costs or self.costs[versus] <= 0:
            return None
        return self.costs[self.choice] / self.costs[versus] - 1.0
