"""Simulated futures from the present state: the forward model of lookahead planners.

Pure, like the rest of `sim`: a planner forks the cluster it is deciding on
(`Cluster.fork`), hands the fork a *future* (arrivals it sampled, a seed for task
durations) and a scheduler, and gets back the cost of that future. The real cluster is
never touched.

What the fork knows, and what a rollout assumes
-----------------------------------------------
* **Running tasks.** The cluster knows when each busy executor started its task, not
  when the task will end. A rollout ends it at ``start + estimate`` (the stage's
  ``duration``, what the scheduler sees), and an overdue task at ``now + ε·estimate``
  (it is about to end; ε = `OVERDUE_FRACTION`).
* **New tasks** take a duration drawn from the job's duration model with the rollout's
  own stream of uniforms (`sim.durations.duration_model` of its payload: the simulator's
  payload is the model; the operator's Workflow offers the durations measured so far
  on each stage), else exactly the estimate; an executor new to a job adds the
  cluster's `moving_delay`, as the simulator does.
* **Idle slots** in progress end at their recorded time.
* **Arrivals** are the future's; events at one time are applied together before the
  scheduler is asked, exactly as in `sim.engine.simulate`.

The cost of a future over the horizon [t₀, t₀ + H] is

    C = ∫_{t₀}^{t₀+H} (jobs in system) dt  +  w · R(t₀ + H)

where R estimates what the jobs still in the system at the horizon will add to the sum
of completion times (`remaining_flow_estimate`): run shortest-remaining-work first on all
K executors with perfect packing, job i (remaining work Wᵢ in increasing order) ends
after (W₁ + … + Wᵢ)/K, but never before its remaining critical path. It ignores arrivals
after the horizon, which are the same for every candidate a planner compares.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from math import inf
from typing import NamedTuple

import numpy as np

from idlegate.sim.admission_view import PoolView
from idlegate.sim.cluster import Cluster
from idlegate.sim.durations import Uniforms, duration_model
from idlegate.sim.engine import Engine, JobArrival
from idlegate.sim.pool import tasks_at_once
from idlegate.sim.protocol import WAIT, Action, Decision, Job, Scheduler, Stage
from idlegate.sim.reclaim_patience import OVERDUE_FRACTION as OVERDUE_FRACTION

Forkable = Cluster | PoolView
"""A pool a planner may fork: the cluster, or the whole pool as its admission shows it to
the policy at a question (`idlegate.sim.admission_view.PoolView`, whose fork is the
pool's as it is: its copy of the admission holds back what the pool's does)."""


@dataclass(frozen=True)
class Future:
    """One sampled future: arrivals after now and a seed for task durations."""

    arrivals: tuple[JobArrival, ...]
    seed: int


def remaining_flow_estimate(cluster: Cluster) -> float:
    """R: the completion-time sum the jobs in the system still need (module docstring).

    Shortest remaining work first on K perfectly packed executors, each job no sooner
    than its remaining critical path allows; a resource pool's K is the tasks of the
    jobs' mean demand it holds at once (`idlegate.sim.pool.tasks_at_once`).
    """
    jobs = sorted(cluster.jobs, key=lambda j: j.remaining_work)
    k = cluster.num_executors
    if cluster.resource_names:  # (a resource pool's K: its tasks of the jobs' mean demand)
        k = tasks_at_once(cluster.capacity, cluster.resource_names, k, (j.dag for j in jobs))
    total = 0.0
    done_work = 0.0
    for job in jobs:
        done_work += max(job.remaining_work, 0.0)
        total += max(done_work / k, job.remaining_cp)
    return total


class FutureOutcome(NamedTuple):
    """What one simulated future gave: its cost C and the time it was cut at."""

    cost: float
    """C; for a rollout `stopped`, the integral so far (a lower bound of C)."""
    end: float
    """t₀ + H, or earlier when the scheduler used up `max_decisions`."""
    stopped: bool = False
    """True when the integral passed `stop_above` before the horizon."""
    events: int = 0
    """Events the rollout simulated (its cost)."""


STOP_CHECKS = 16
"""A rollout with `stop_above` compares its integral with it this many times."""


def rollout(
    cluster: Cluster,
    scheduler: Scheduler,
    future: Future,
    horizon: float,
    *,
    first: Action | None = None,
    terminal_weight: float = 1.0,
    rng_seed: int = 0,
    max_decisions: int | None = None,
    stop_above: float | None = None,
) -> FutureOutcome:
    """C of `future` when `first` (if given) is carried out now and `scheduler` decides the
    rest; cut short once `scheduler` made `max_decisions` decisions, or stopped once its
    cost is sure to exceed `stop_above`.

    Works on a fork: `cluster` is left as it was. `first` is a Decision (applied, then
    `scheduler` is asked for the rest of this event) or WAIT (nothing more this event);
    None lets `scheduler` decide from the start. `rng_seed` seeds the scheduler's own
    random choices.

    A cut rollout ends at the time of the event whose round used up the budget, with the
    integral up to then and R from then: a planner that cuts its costliest candidate
    this way compares the others over the same shorter horizon (an adaptive horizon).
    The integral only grows and R ≥ 0, so a rollout whose integral passed `stop_above`
    (checked `STOP_CHECKS` times over the horizon) can only end above it: it stops there.
    """
    sim = planning_fork(cluster)
    scheduler.reset(np.random.default_rng(rng_seed))
    start_area = sim.jobs_time_integral
    limit = sim.decisions + (max_decisions or 0)
    now = sim.now
    end = now + horizon
    engine = Engine(sim, scheduler, Uniforms(np.random.default_rng(future.seed)))
    push_present(engine, now)
    engine.push_arrivals(a for a in future.arrivals if now <= a.time <= end)
    if first is WAIT:
        sim.needs_schedule = False
    else:
        if isinstance(first, Decision):
            engine.start(sim.apply(_on_fork(sim, first), now), now)
        engine.schedule()
    if stop_above is not None and max_decisions is None:
        for k in range(1, STOP_CHECKS + 1):
            engine.run(now + horizon * k / STOP_CHECKS)  # k = STOP_CHECKS: exactly `end`
            so_far = sim.jobs_time_integral - start_area
            if so_far > stop_above:
                return FutureOutcome(so_far, sim.now, stopped=True, events=engine.events)
    elif max_decisions is None:
        engine.run(end)
    else:
        while sim.decisions < limit and engine.peek() <= end:
            engine.step()
        if sim.decisions >= limit:
            end = sim.now
    sim.advance(end)  # run stops earlier when no event is left
    cost = sim.jobs_time_integral - start_area
    if terminal_weight:
        cost += terminal_weight * remaining_flow_estimate(sim)
    return FutureOutcome(cost, end, events=engine.events)


class RolloutComparison(NamedTuple):
    """What `compare` found."""

    costs: list[float]
    """Mean cost of each plan over the futures it saw."""
    raced_out: list[int]
    """Plans that saw fewer futures than the others (raced out after the first)."""
    horizon: float
    """The shortest horizon used (cut by `max_decisions`)."""
    futures: int
    """Futures the plans not raced out saw."""


# long: the race's state (the best cost so far, the horizon plan 0 reached, the plans still
# in) is shared by both loops; split into functions, it would travel through every call
def compare(
    fork: Cluster,
    futures: Sequence[Future],
    horizon: float,
    plans: Sequence[tuple[Action | None, Scheduler]],
    *,
    terminal_weight: float = 1.0,
    max_decisions: int | None = None,
    race: float | None = None,
    out_of_time: Callable[[], bool] | None = None,
) -> RolloutComparison:
    """Mean cost of each plan (first action, policy after it) over common futures.

    With `max_decisions`, plan 0 runs first in each future, within that budget, and the
    others run to the horizon it reached. With `race`, plans costing more than the best
    one by that fraction in the first future see no other (their mean is over that
    one; a rollout already behind that far is stopped at once, `stop_above`, and plan 0
    runs last so that the cheaper plans set the bar). When
    `out_of_time()` says so after a future, the futures simulated so far are all
    (the first one always is complete).
    """
    totals = [0.0] * len(plans)
    runs = [0] * len(plans)
    alive = list(range(len(plans)))
    dropped: set[int] = set()
    # racing: in the first future, a plan stops once it is sure to trail the best so far;
    # BASE (plan 0, often the costliest) goes last then, unless its budget sets the horizon
    order = alive if max_decisions is not None else [*alive[1:], *alive[:1]]
    shortest = horizon
    for m, future in enumerate(futures):
        cut = horizon
        best = inf
        for i in order if m == 0 else alive:
            first, policy = plans[i]
            limit = best * (1.0 + race) if m == 0 and race is not None and best < inf else None
            done = rollout(
                fork,
                policy,
                future,
                cut,
                first=first,
                terminal_weight=terminal_weight,
                rng_seed=future.seed,
                max_decisions=max_decisions if i == 0 else None,
                stop_above=limit,
            )
            if i == 0 and max_decisions is not None:
                cut = done.end - fork.now
            totals[i] += done.cost
            runs[i] += 1
            if done.stopped:
                dropped.add(i)
            else:
                best = min(best, done.cost)
        shortest = min(shortest, cut)
        if m == 0 and race is not None:
            alive = [i for i in alive if i not in dropped and totals[i] <= best * (1.0 + race)]
        if out_of_time is not None and out_of_time():
            break
    costs = [totals[i] / runs[i] for i in range(len(plans))]
    most = max(runs)
    raced_out = [i for i in range(len(plans)) if runs[i] < most or i in dropped]
    return RolloutComparison(costs, raced_out, shortest, most)


def planning_fork(cluster: Forkable, only: Iterable[Job] | None = None) -> Cluster:
    """A fork of `cluster` (of the jobs `only` and the holders, `Cluster.fork`) whose jobs
    carry their duration models as payloads.

    A rollout is the fork's driver, as the simulator is a cluster's: it samples task
    durations from the payloads (`Engine`). A job of another driver carries that
    driver's object instead (the operator's Workflow), so each payload is replaced by
    `duration_model` of it; payloads that are models already stay, so forking a
    planning fork again costs no conversion. Every task of the fork is available
    (`Cluster.tasks_available`): nothing in a simulated future would make more so, and
    Argo creates a node's pods as soon as it may.
    """
    sim = cluster.fork(only)
    for job in sim.jobs:
        job.payload = duration_model(job.payload)
        for stage in job.stages:
            if stage.available < stage.tasks:
                sim.tasks_available(stage, stage.tasks, sim.now)
    return sim


def _on_fork(fork: Cluster, decision: Decision) -> Decision:
    """`decision` (on the original's stage) pointed at the fork's copy of that stage."""
    job_id, index = decision.stage.key
    job = next(j for j in fork.jobs if j.id == job_id)
    return Decision(job.stages[index], decision.parallelism_cap, decision.idle_delay)


def push_present(
    engine: Engine, now: float, end_of: Callable[[Stage, float], float] | None = None
) -> None:
    """Events the present state already implies: running tasks ending, idle slots ending.

    A running task ends at ``end_of(stage, started)`` when given (the forecaster draws it,
    `sim.forecast`), else at its estimate (module docstring)."""
    cluster = engine.cluster
    for executor, stage, started in cluster.running_tasks():
        if end_of is not None:
            engine.push_task_end(end_of(stage, started), executor)
            continue
        end = started + stage.duration
        engine.push_task_end(
            end if end > now else now + OVERDUE_FRACTION * stage.duration, executor
        )
    for job in cluster.jobs:
        for stage in job.stages:
            if stage.idle_until is not None:
                engine.push_idle_end(stage)
    cluster.new_timers.clear()
