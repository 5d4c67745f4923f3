"""The simulator: drives the cluster state machine with a virtual clock and a heap of events.

Pure (no wall clock, no I/O): a run is a function of (workload, scheduler, seed, options).
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable
from dataclasses import dataclass, field
from itertools import count
from math import inf
from typing import Any, NamedTuple

import numpy as np

from idlegate.errors import IdlegateError
from idlegate.sim.cluster import Cluster
from idlegate.sim.dag import Dag
from idlegate.sim.durations import DurationModel, Uniforms
from idlegate.sim.protocol import JobRecord, Launch, Scheduler, Stage

_ARRIVE, _TASK, _IDLE = 0, 1, 2


@dataclass(frozen=True)
class JobArrival:
    """A job of the workload: when it arrives, its DAG, and how its tasks really run."""

    time: float
    name: str
    dag: Dag
    durations: DurationModel | None = None
    """None: every task takes exactly its estimated duration."""


@dataclass(frozen=True)
class Fidelity:
    """Decima's Spark effects. Off (`Fidelity.none()`) for synthetic workloads."""

    moving_delay: float = 2.0
    """Seconds an executor needs to move to a job it did not work for before."""
    wave_durations: bool = True
    """Sample task durations from the job's measured waves (if it has them)."""

    @classmethod
    def none(cls) -> Fidelity:
        return cls(moving_delay=0.0, wave_durations=False)


@dataclass(frozen=True)
class Workload:
    """An arrival sequence plus the cluster it is meant for."""

    name: str
    jobs: tuple[JobArrival, ...]
    num_executors: int
    fidelity: Fidelity = field(default_factory=Fidelity.none)

    def __post_init__(self) -> None:
        if not self.jobs:
            raise IdlegateError(f"workload {self.name!r} has no jobs")
        times = [j.time for j in self.jobs]
        if times != sorted(times) or times[0] < 0:
            raise IdlegateError(f"workload {self.name!r}: arrival times must be sorted and >= 0")


@dataclass
class SimResult:
    """Outcome of one run: per-job records plus run-wide counters."""

    workload: str
    scheduler: str
    seed: int
    num_executors: int
    records: list[JobRecord]
    unfinished: int
    end_time: float
    busy_seconds: float
    jobs_time_integral: float
    events: int
    decisions: int
    trace: list[tuple[float, str, int, int, Any]] | None = None
    tasks: list[TaskRun] | None = None
    overhead_seconds: float = 0.0
    """Executor-seconds of moving delay (an executor new to a job moves before its first
    task) up to `end_time`; part of `busy_seconds`. Warm-up is not in it: a moved
    executor's fresh task duration is one measured draw (`DurationModel.sample`), so the
    warm-up inside it cannot be told apart and stays task time."""


class TaskRun(NamedTuple):
    """One task execution (only recorded with `simulate(..., record_tasks=True)`)."""

    executor: int
    job: int
    stage: int
    start: float
    end: float


class EventLoop:
    """The heap of events that drives a Cluster: task ends, job arrivals, idle-slot ends.

    `simulate` runs one from an empty cluster; planners resume one from a forked cluster
    (`sim.rollout`). Events at one time are all applied before the scheduler is asked.
    A launched task runs for a draw from its job's duration model (the payload) when
    `waves` is on and the job has one, else for its estimate; an executor new to the
    job first pays the cluster's `moving_delay`, counted in `overhead` up to `max_time`.
    """

    def __init__(
        self,
        cluster: Cluster,
        scheduler: Scheduler,
        u: Uniforms,
        *,
        waves: bool = True,
        max_time: float = inf,
        task_log: list[TaskRun] | None = None,
    ) -> None:
        self.cluster = cluster
        self.scheduler = scheduler
        self.u = u
        self.waves = waves
        self.max_time = max_time
        self.task_log = task_log
        self.heap: list[tuple[float, int, int, Any]] = []
        self._seq = count()
        self.events = 0
        """Events applied so far."""
        self.overhead = 0.0
        """Executor-seconds of moving delay before `max_time`."""

    def push(self, time: float, kind: int, obj: Any) -> None:
        heapq.heappush(self.heap, (time, next(self._seq), kind, obj))

    def push_arrivals(self, arrivals: Iterable[JobArrival]) -> None:
        for a in arrivals:
            self.push(float(a.time), _ARRIVE, a)

    def push_task_end(self, time: float, executor: int) -> None:
        self.push(time, _TASK, executor)

    def push_idle_end(self, stage: Stage) -> None:
        self.push(stage.idle_until, _IDLE, stage)  # type: ignore[arg-type]

    def _duration(self, stage: Stage, first: bool, moved: bool) -> float:
        model = stage.job.payload
        if self.waves and model is not None:
            return model.sample(stage.index, stage.job.held, first, moved, self.u)
        return stage.duration

    def _run_task(self, executor: int, stage: Stage, now: float, d: float) -> None:
        self.push_task_end(now + d, executor)
        if self.task_log is not None:
            self.task_log.append(TaskRun(executor, stage.job.id, stage.index, now, now + d))

    def start(self, launches: Iterable[Launch], now: float) -> None:
        """Run the launched tasks (a decision's, or a planner's first action's)."""
        moving = self.cluster.moving_delay
        for launch in launches:
            d = self._duration(launch.stage, launch.first, launch.moved)
            if launch.moved:
                d += moving
                # the delay comes first in the busy interval; a run cut at max_time counts
                # only the part before it, as busy_seconds does
                self.overhead += min(moving, max(0.0, self.max_time - now))
            self._run_task(launch.executor, launch.stage, now, d)

    def schedule(self, now: float) -> None:
        """Ask the scheduler, run what it launches and arm the idle slots it began."""
        cluster = self.cluster
        self.start(cluster.schedule(self.scheduler, now), now)
        for stage in cluster.new_timers:
            self.push_idle_end(stage)
        cluster.new_timers.clear()

    def run(self, until: float = inf) -> float:
        """Apply every event up to `until`; returns the time reached (`until` if cut there)."""
        heap, cluster, pop = self.heap, self.cluster, heapq.heappop
        now = cluster.now
        while heap:
            now = heap[0][0]
            if now > until:
                return until
            while heap and heap[0][0] == now:
                _, _, kind, obj = pop(heap)
                self.events += 1
                if kind == _TASK:
                    stage = cluster.task_finished(obj, now)
                    if stage is not None:  # the executor's next task on the same stage
                        self._run_task(obj, stage, now, self._duration(stage, False, False))
                elif kind == _ARRIVE:
                    cluster.add_job(obj.dag, now, obj.name, obj.durations)
                else:
                    cluster.idle_expired(obj, now)
            if cluster.needs_schedule:
                self.schedule(now)
        return now


def simulate(
    workload: Workload,
    scheduler: Scheduler,
    seed: int = 0,
    *,
    num_executors: int | None = None,
    fidelity: Fidelity | None = None,
    max_time: float = inf,
    trace: bool = False,
    record_tasks: bool = False,
) -> SimResult:
    """Run `scheduler` on `workload` until every job finishes (or `max_time`).

    The run owns one Generator seeded with `seed`: task durations and the scheduler's
    own random choices come from it, so the same inputs give the same trace.
    """
    k = num_executors or workload.num_executors
    fid = fidelity or workload.fidelity
    rng = np.random.default_rng(seed)
    scheduler.reset(np.random.default_rng(rng.integers(2**63)))
    events_log: list[tuple[float, str, int, int, Any]] | None = [] if trace else None
    sink = None if events_log is None else lambda *e: events_log.append(e)
    cluster = Cluster(k, trace=sink, moving_delay=fid.moving_delay)
    task_log: list[TaskRun] | None = [] if record_tasks else None
    loop = EventLoop(
        cluster,
        scheduler,
        Uniforms(rng),
        waves=fid.wave_durations,
        max_time=max_time,
        task_log=task_log,
    )
    loop.push_arrivals(workload.jobs)
    now = loop.run(max_time)
    cluster.advance(now)
    return SimResult(
        workload=workload.name,
        scheduler=getattr(scheduler, "name", type(scheduler).__name__),
        seed=seed,
        num_executors=k,
        records=sorted(cluster.done, key=lambda r: r.id),
        unfinished=len(cluster.jobs),
        end_time=now,
        busy_seconds=cluster.busy_seconds,
        jobs_time_integral=cluster.jobs_time_integral,
        events=loop.events,
        decisions=cluster.decisions,
        trace=events_log,
        tasks=task_log,
        overhead_seconds=loop.overhead,
    )
