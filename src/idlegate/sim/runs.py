"""What a simulator run takes and gives: a workload (`Workload`: its arrivals, each a
`JobArrival`, and the `Fidelity` of its durations) and a result (`SimResult`, `TaskRun`).
Types only, in a module of their own so that the engine (`idlegate.sim.engine`, which
re-exports them) and the pods gate it wraps (`idlegate.sim.gate`) both import them and
neither imports the other."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from idlegate.errors import IdlegateError
from idlegate.sim.admission_ledger import Ledger
from idlegate.sim.dag import Dag
from idlegate.sim.durations import DurationModel
from idlegate.sim.protocol import JobRecord
from idlegate.sim.queues import QueueSpec
from idlegate.sim.resources import ResourceVector


@dataclass(frozen=True)
class JobArrival:
    """A job of the workload: when it arrives, its DAG, and how its tasks really run."""

    time: float
    name: str
    dag: Dag
    durations: DurationModel | None = None
    """None: every task takes exactly its estimated duration."""
    scheduled: bool = False
    """A run of a schedule (a cron workflow's): known before it arrives, so a planner with
    ``futures=known`` is told it in advance (`policy.futures.KnownSource`)."""
    queue: str | None = None
    """The queue it names (`Workload.queues`; None: by its label, its namespace or the
    default, `idlegate.sim.queues.queue_of`)."""
    namespace: str | None = None
    """Its namespace (a queue's ``namespaces`` select it when it names no queue)."""
    labels: Mapping[str, str] | None = field(default=None, hash=False, compare=False)
    """Its labels (``idlegate.io/queue`` names its queue when `queue` does not)."""
    priority: int = 0
    """Its priority within its queue: higher goes first (`idlegate.sim.admission`)."""


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
    resources: ResourceVector | None = None
    """The pool's resources beyond its executors (its pods), e.g. cpu=8,memory=32Gi; None:
    a pods-only pool (`idlegate.sim.cluster`)."""
    nodes: tuple[ResourceVector, ...] = ()
    """The nodes `resources` is the sum of, pods included (`sim.pool.identical_nodes`):
    a task starts only where it fits one (on the one it fills most: `sim.pool.packed`);
    empty: the pool is one bin."""
    queues: tuple[QueueSpec, ...] = ()
    """The pool's queues (`idlegate.sim.queues`); empty: one queue, no quotas."""

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
    capacity: ResourceVector | None = None
    """The pool's capacity, when it counts resources beyond pods (else None)."""
    resource_seconds: dict[str, float] | None = None
    """Unit-seconds of each of those resources that running tasks held (requested), up
    to `end_time`; None for a pods-only pool."""
    queues: Ledger | None = None
    """What the pool's admission saw per queue (waits, borrowing, fairness); None: one
    queue (`idlegate.sim.queue_metrics` turns it into figures)."""
    preempted: int = 0
    """Tasks stopped (`Cluster.stop`: a reclaim's), each run again."""
    preempted_seconds: float = 0.0
    """Executor-seconds of work the stopped tasks lost (part of `busy_seconds`)."""
    verdicts: dict[str, int] | None = None
    """The forecast judge's verdicts by case (``decide: Forecast`` queues' stops,
    `idlegate.sim.reclaim_verdict.counts` of `Reclaimer.verdicts`, the one record of
    them); None where the judge gave none."""
    pending: tuple[int, float] | None = None
    """Behind a pods-only gate (`idlegate.sim.gate`): the pods that pended and the seconds
    they pended; None for any other run."""


class TaskRun(NamedTuple):
    """One task execution (only recorded with `simulate(..., record_tasks=True)`)."""

    executor: int
    job: int
    stage: int
    start: float
    end: float
