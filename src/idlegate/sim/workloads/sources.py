"""Job sources: distributions over jobs that draw `n` jobs and know their mean work.

A source draws only job content (DAG, label, duration model); arrival times come from the
generators (`sim.workloads.generators`). `size_factors` makes the heavy-tailed job sizes
(Pareto, log-normal) of mean 1 that keep the two-type set's mean work, and with it what
`load` means.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Literal, Protocol

import numpy as np

from idlegate.errors import IdlegateError
from idlegate.sim.dag import Dag
from idlegate.sim.durations import DurationModel
from idlegate.sim.spec import MAX_TASK_SECONDS, StageSpec, WorkflowSpec
from idlegate.sim.tpch import TpchLibrary
from idlegate.sim.workloads.tpch_like import (
    SMALL_DAG,
    DagShape,
    _Plan,
    _plan,
    estimate_tpch_like_work,
    tpch_like_spec,
)

SizeDistribution = Literal["two-type", "pareto", "lognormal"]
JobShape = Literal["one-stage", "dag"]
DEFAULT_SIZE_SHAPE: dict[str, float] = {"pareto": 1.5, "lognormal": 1.0}
"""Shape used when `size_shape` is not given: Pareto tail index 1.5, log-normal sigma 1."""


def size_factors(
    rng: np.random.Generator, distribution: SizeDistribution, shape: float, n: int
) -> np.ndarray:
    """`n` random job-size factors of mean 1 (all 1 for two-type).

    * pareto: x_m·U^(−1/α) with x_m = (α − 1)/α, so P(X > x) = (x_m/x)^α for x ≥ x_m and
      E[X] = 1; the variance is infinite for α ≤ 2.
    * lognormal: exp(σZ − σ²/2), so E[X] = 1 and log X has spread σ.
    """
    if distribution == "two-type":
        return np.ones(n)
    if distribution == "pareto":
        x_min = (shape - 1) / shape
        return x_min * (1.0 - rng.random(n)) ** (-1.0 / shape)  # 1 − U lies in (0, 1]
    if distribution == "lognormal":
        return np.exp(shape * rng.standard_normal(n) - shape * shape / 2)
    raise IdlegateError(
        f"unknown size distribution {distribution!r}; choose two-type, pareto or lognormal"
    )


@dataclass(frozen=True)
class DrawnJob:
    """One job drawn from a source, before it gets an arrival time."""

    label: str
    dag: Dag
    durations: DurationModel | None = None


class JobSource(Protocol):
    """A distribution over jobs."""

    def draw(self, rng: np.random.Generator, n: int) -> list[DrawnJob]:
        """`n` independent jobs."""

    def mean_work(self) -> float:
        """Expected `total_work` of one job (exact or a fixed-seed estimate)."""


@lru_cache(maxsize=256)
def _one_stage_dag(work: float, tasks: int) -> Dag:
    """A one-stage job with `work` executor-seconds split evenly over `tasks` tasks."""
    return _sized_dag(work / tasks, tasks)


@dataclass(frozen=True)
class TwoTypeSource:
    """Short or long jobs; long with probability `long_fraction`.

    Plain two-type jobs share two one-stage DAGs. With a heavy-tailed `distribution` each
    job's work is its type's nominal work times a `size_factors` draw (of shape
    `size_shape`); with `job_shape` "dag" each job is a small random TPC-H-like plan
    (`SMALL_DAG`) whose task durations are scaled so its work is that size.
    """

    short: Dag
    long: Dag
    long_fraction: float
    distribution: SizeDistribution = "two-type"
    size_shape: float = 0.0
    job_shape: JobShape = "one-stage"

    def draw(self, rng: np.random.Generator, n: int) -> list[DrawnJob]:
        return self.jobs(rng, (rng.random(n) < self.long_fraction).tolist())

    def jobs(self, rng: np.random.Generator, is_long: list[bool]) -> list[DrawnJob]:
        """One job per entry of `is_long`.

        Sizes and DAGs come from child streams of `rng` (spawning draws nothing from it),
        so for a seed the job types are those of the plain two-type set, and the first
        n jobs do not depend on how many are drawn.
        """
        if self.distribution == "two-type" and self.job_shape == "one-stage":
            short, long = DrawnJob("short", self.short), DrawnJob("long", self.long)
            return [long if x else short for x in is_long]
        sizes, shapes = rng.spawn(2)
        factors = size_factors(sizes, self.distribution, self.size_shape, len(is_long))
        out = []
        for x, factor in zip(is_long, factors.tolist(), strict=True):
            work = (self.long if x else self.short).total_work * factor
            if self.job_shape == "dag":
                dag = _scaled_plan(_plan(shapes, SMALL_DAG), work)
            else:
                tasks = self.short.tasks[0]
                dag = _sized_dag(min(work / tasks, MAX_TASK_SECONDS), tasks)
            out.append(DrawnJob("long" if x else "short", dag))
        return out

    def mean_work(self) -> float:
        f = self.long_fraction
        return (1 - f) * self.short.total_work + f * self.long.total_work


def _sized_dag(task_seconds: float, tasks: int) -> Dag:
    """A one-stage job of `tasks` tasks of `task_seconds` each (uncached: sizes vary)."""
    stage = StageSpec(name="s0", tasks=tasks, task_duration_seconds=task_seconds)
    return Dag.from_spec(WorkflowSpec(stages=(stage,)))


def _scaled_plan(plan: _Plan, work: float) -> Dag:
    """The DAG of `plan` with every task duration scaled so its total work is `work`."""
    scale = work / plan.work
    stages = tuple(
        StageSpec(
            name=plan.names[i],
            tasks=plan.tasks[i],
            task_duration_seconds=min(plan.durations[i] * scale, MAX_TASK_SECONDS),
            depends_on=tuple(plan.names[p] for p in plan.parents[i]),
        )
        for i in range(len(plan.names))
    )
    return Dag.from_spec(WorkflowSpec(stages=stages))


@dataclass(frozen=True)
class TpchSource:
    """A uniformly random query at a uniformly random size (Decima's stream)."""

    library: TpchLibrary
    sizes: tuple[str, ...]
    queries: tuple[int, ...]

    def draw(self, rng: np.random.Generator, n: int) -> list[DrawnJob]:
        si = rng.integers(len(self.sizes), size=n).tolist()
        qi = rng.integers(len(self.queries), size=n).tolist()
        out = []
        for s, q in zip(si, qi, strict=True):
            query = self.library.load(self.sizes[s], self.queries[q])  # cached: Dags are shared
            out.append(DrawnJob(query.name, query.dag, query.durations))
        return out

    def mean_work(self) -> float:
        return self.library.mean_total_work(self.sizes, self.queries)


@dataclass(frozen=True)
class TpchLikeSource:
    """Fresh random TPC-H-like DAGs from `tpch_like_spec`."""

    shape: DagShape

    def draw(self, rng: np.random.Generator, n: int) -> list[DrawnJob]:
        return [
            DrawnJob("tpch-like", Dag.from_spec(tpch_like_spec(rng, self.shape))) for _ in range(n)
        ]

    def mean_work(self) -> float:
        return estimate_tpch_like_work(self.shape)


@dataclass(frozen=True)
class MixSource:
    """Each job from `first` with probability `alpha`, else from `second`."""

    first: JobSource
    second: JobSource
    alpha: float

    def draw(self, rng: np.random.Generator, n: int) -> list[DrawnJob]:
        pick = (rng.random(n) < self.alpha).tolist()
        a = iter(self.first.draw(rng, sum(pick)))
        b = iter(self.second.draw(rng, n - sum(pick)))
        return [next(a) if p else next(b) for p in pick]

    def mean_work(self) -> float:
        a = self.first.mean_work() if self.alpha > 0 else 0.0
        b = self.second.mean_work() if self.alpha < 1 else 0.0
        return self.alpha * a + (1 - self.alpha) * b
