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
* **New tasks** take a duration drawn from the job's duration model (its payload, as in
  the simulator) with the rollout's own stream of uniforms, else exactly the estimate;
  an executor new to a job adds the cluster's `moving_delay`, as the simulator does.
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

import heapq
from collections.abc import Iterable
from dataclasses import dataclass
from itertools import count

import numpy as np

from idlegate.sim.cluster import WAIT, Action, Cluster, Decision, Launch, Scheduler
from idlegate.sim.durations import Uniforms
from idlegate.sim.engine import JobArrival

OVERDUE_FRACTION = 0.05
"""A running task past its estimate ends after this fraction of the estimate."""

_ARRIVE, _TASK, _IDLE = 0, 1, 2


@dataclass(frozen=True)
class Future:
    """One sampled future: arrivals after now and a seed for task durations."""

    arrivals: tuple[JobArrival, ...]
    seed: int


def remaining_flow_estimate(cluster: Cluster) -> float:
    """R: the completion-time sum the jobs in the system still need (module docstring).

    Shortest remaining work first on K perfectly packed executors, each job no sooner
    than its remaining critical path allows.
    """
    jobs = sorted(cluster.jobs, key=lambda j: j.remaining_work)
    k = cluster.num_executors
    total = 0.0
    done_work = 0.0
    for job in jobs:
        done_work += max(job.remaining_work, 0.0)
        total += max(done_work / k, job.remaining_cp)
    return total


def rollout_cost(
    cluster: Cluster,
    scheduler: Scheduler,
    future: Future,
    horizon: float,
    *,
    first: Action | None = None,
    terminal_weight: float = 1.0,
    rng_seed: int = 0,
) -> float:
    """C of `future` when `first` (if given) is carried out now and `scheduler` decides the rest.

    Works on a fork: `cluster` is left as it was. `first` is a Decision (applied, then
    `scheduler` is asked for the rest of this event) or WAIT (nothing more this event);
    None lets `scheduler` decide from the start. `rng_seed` seeds the scheduler's own
    random choices.
    """
    sim = cluster.fork()
    scheduler.reset(np.random.default_rng(rng_seed))
    start_area = sim.jobs_time_integral
    now = sim.now
    end = now + horizon
    run = _Rollout(sim, scheduler, future.seed)
    run.push_present(now)
    run.push_arrivals(a for a in future.arrivals if now <= a.time <= end)
    if first is WAIT:
        sim.needs_schedule = False
    elif first is not None:
        run.start_all(sim.apply(_on_fork(sim, first), now), now)  # type: ignore[arg-type]
        run.schedule(now)
    else:
        run.schedule(now)
    run.run_until(end)
    sim.advance(max(end, sim.now))
    cost = sim.jobs_time_integral - start_area
    if terminal_weight:
        cost += terminal_weight * remaining_flow_estimate(sim)
    return cost


def _on_fork(fork: Cluster, decision: Decision) -> Decision:
    """`decision` (on the original's stage) pointed at the fork's copy of that stage."""
    job_id, index = decision.stage.key
    job = next(j for j in fork.jobs if j.id == job_id)
    return Decision(job.stages[index], decision.parallelism_cap, decision.idle_delay)


class _Rollout:
    """The event loop of `sim.engine.simulate`, resumed from a forked cluster."""

    def __init__(self, cluster: Cluster, scheduler: Scheduler, seed: int) -> None:
        self.cluster = cluster
        self.scheduler = scheduler
        self.heap: list[tuple[float, int, int, object]] = []
        self.seq = count()
        self.u = Uniforms(np.random.default_rng(seed))

    def push_present(self, now: float) -> None:
        """Events the present state already implies: running tasks ending, idle slots ending."""
        push, seq = heapq.heappush, self.seq
        for executor, stage, started in self.cluster.running_tasks():
            estimate = stage.duration
            end = started + estimate
            if end <= now:
                end = now + OVERDUE_FRACTION * estimate
            push(self.heap, (end, next(seq), _TASK, executor))
        for job in self.cluster.jobs:
            for stage in job.stages:
                if stage.idle_until is not None:
                    push(self.heap, (stage.idle_until, next(seq), _IDLE, stage))
        self.cluster.new_timers.clear()

    def push_arrivals(self, arrivals: Iterable[JobArrival]) -> None:
        for a in arrivals:
            heapq.heappush(self.heap, (a.time, next(self.seq), _ARRIVE, a))

    def duration(self, launch: Launch) -> float:
        stage = launch.stage
        model = stage.job.payload
        if model is not None:
            d = model.sample(stage.index, stage.job.held, launch.first, launch.moved, self.u)
        else:
            d = stage.duration
        return d + self.cluster.moving_delay if launch.moved else d

    def start_all(self, launches: list[Launch], now: float) -> None:
        for launch in launches:
            heapq.heappush(
                self.heap, (now + self.duration(launch), next(self.seq), _TASK, launch.executor)
            )

    def schedule(self, now: float) -> None:
        cluster = self.cluster
        self.start_all(cluster.schedule(self.scheduler, now), now)
        for stage in cluster.new_timers:
            heapq.heappush(self.heap, (stage.idle_until, next(self.seq), _IDLE, stage))
        cluster.new_timers.clear()

    def run_until(self, end: float) -> None:
        heap, cluster, pop = self.heap, self.cluster, heapq.heappop
        while heap and heap[0][0] <= end:
            now = heap[0][0]
            while heap and heap[0][0] == now:
                _, _, kind, obj = pop(heap)
                if kind == _TASK:
                    stage = cluster.task_finished(obj, now)  # type: ignore[arg-type]
                    if stage is not None:
                        model = stage.job.payload
                        d = (
                            stage.duration
                            if model is None
                            else model.sample(stage.index, stage.job.held, False, False, self.u)
                        )
                        heapq.heappush(heap, (now + d, next(self.seq), _TASK, obj))
                elif kind == _ARRIVE:
                    a: JobArrival = obj  # type: ignore[assignment]
                    cluster.add_job(a.dag, now, a.name, a.durations)
                else:
                    cluster.idle_expired(obj, now)  # type: ignore[arg-type]
            if cluster.needs_schedule:
                self.schedule(now)
