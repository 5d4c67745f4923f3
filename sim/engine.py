"""The simulator: drives the cluster state machine with a virtual clock and a heap of events.

Pure (no wall clock, no I/O): a run is a function of (workload, scheduler, seed, options).
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field
from itertools import count
from math import inf
from typing import Any, NamedTuple

import numpy as np

from idlegate.errors import IdlegateError
from idlegate.sim.cluster import Cluster, JobRecord, Launch, Scheduler
from idlegate.sim.dag import Dag
from idlegate.sim.durations import DurationModel, Uniforms

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
    u = Uniforms(rng)
    events_log: list[tuple[float, str, int, int, Any]] | None = [] if trace else None
    sink = None if events_log is None else lambda *e: events_log.append(e)
    cluster = Cluster(k, trace=sink, moving_delay=fid.moving_delay)
    seq = count()
    heap: list[tuple[float, int, int, Any]] = [
        (float(a.time), next(seq), _ARRIVE, a) for a in workload.jobs
    ]
    heapq.heapify(heap)
    moving = fid.moving_delay
    waves = fid.wave_durations
    push, pop = heapq.heappush, heapq.heappop
    task_log: list[TaskRun] | None = [] if record_tasks else None
    task_finished = cluster.task_finished
    overhead = 0.0

    def start(launch: Launch, now: float) -> None:
        nonlocal overhead
        stage = launch.stage
        model = stage.job.payload
        if waves and model is not None:
            d = model.sample(stage.index, stage.job.held, launch.first, launch.moved, u)
        else:
            d = stage.duration
        if launch.moved:
            d += moving
            # the delay comes first in the busy interval; a run cut at max_time counts
            # only the part before it, as busy_seconds does
            overhead += min(moving, max(0.0, max_time - now))
        push(heap, (now + d, next(seq), _TASK, launch.executor))
        if task_log is not None:
            task_log.append(TaskRun(launch.executor, stage.job.id, stage.index, now, now + d))

    n_events = 0
    now = 0.0
    while heap:
        now = heap[0][0]
        if now > max_time:
            now = max_time
            break
        while heap and heap[0][0] == now:
            _, _, kind, obj = pop(heap)
            n_events += 1
            if kind == _TASK:
                stage = task_finished(obj, now)
                if stage is not None:  # the executor's next task on the same stage
                    model = stage.job.payload
                    if waves and model is not None:
                        d = model.sample(stage.index, stage.job.held, False, False, u)
                    else:
                        d = stage.duration
                    push(heap, (now + d, next(seq), _TASK, obj))
                    if task_log is not None:
                        task_log.append(TaskRun(obj, stage.job.id, stage.index, now, now + d))
            elif kind == _ARRIVE:
                cluster.add_job(obj.dag, now, obj.name, obj.durations)
            else:
                cluster.idle_expired(obj, now)
        if cluster.needs_schedule:
            for launch in cluster.schedule(scheduler, now):
                start(launch, now)
            for stage in cluster.new_timers:
                push(heap, (stage.idle_until, next(seq), _IDLE, stage))
            cluster.new_timers.clear()
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
        events=n_events,
        decisions=cluster.decisions,
        trace=events_log,
        tasks=task_log,
        overhead_seconds=overhead,
    )
