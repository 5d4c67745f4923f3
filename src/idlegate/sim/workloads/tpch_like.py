"""The built-in TPC-H-like DAG generator: random plans shaped like TPC-H queries.

Synthetic: it imitates the shape of TPC-H query plans (scans merged by joins, down to one
sink), it is not TPC-H and needs no data. `DagShape` holds its knobs, `tpch_like_spec`
draws one plan, `estimate_tpch_like_work` gives the mean work a load is derived from.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
from pydantic import Field, model_validator

from idlegate.sim.spec import MAX_TASK_SECONDS, StageSpec, WorkflowSpec
from idlegate.sim.workloads.knobs import _Options


class DagShape(_Options):
    """Knobs of the built-in TPC-H-like DAG generator (see `tpch_like_spec`)."""

    min_stages: int = Field(2, ge=1, le=500)
    """Fewest stages of a DAG."""
    max_stages: int = Field(18, ge=1, le=500)
    """Most stages of a DAG."""
    max_tasks: int = Field(200, ge=1, le=100_000)
    """Most tasks of a stage."""
    min_task_seconds: float = Field(0.2, gt=0)
    """Shortest task duration."""
    max_task_seconds: float = Field(5.0, gt=0, le=MAX_TASK_SECONDS)
    """Longest task duration."""

    @model_validator(mode="after")
    def _ordered(self) -> DagShape:
        if self.min_stages > self.max_stages:
            raise ValueError(
                f"min_stages ({self.min_stages}) exceeds max_stages ({self.max_stages})"
            )
        if self.min_task_seconds > self.max_task_seconds:
            raise ValueError(
                f"min_task_seconds ({self.min_task_seconds}) exceeds max_task_seconds "
                f"({self.max_task_seconds})"
            )
        return self

    def shape(self) -> DagShape:
        """Just the shape knobs (configs that extend DagShape carry more fields)."""
        return DagShape(**{k: getattr(self, k) for k in DagShape.model_fields})


STAGE_SKEW = 1.2
"""Stage count = min + ⌊(max − min + 1)·U^1.2⌋: slightly toward small plans (TPC-H mean ≈ 9.2)."""
MEDIAN_TASKS = {"scan": 8.0, "inner": 60.0, "sink": 2.0}
"""Median tasks by role; TPC-H scans have few tasks, shuffle stages many, final stages 1–2."""
TASKS_SIGMA = 1.2
"""Log-normal spread of tasks per stage (heavy tail, clipped to [1, max_tasks])."""
EXTRA_EDGE_PROB = 0.04
"""Chance that a non-scan stage also reads an earlier stage (TPC-H plans are near-trees)."""


def tpch_like_spec(rng: np.random.Generator, shape: DagShape | None = None) -> WorkflowSpec:
    """A random DAG shaped like a TPC-H query plan. Synthetic: it imitates, it is not TPC-H.

    Shape: `s` scan stages (no parents) are merged by `s − 1` two-input join stages, with
    single-input aggregation/exchange stages interleaved at random, down to one final
    sink stage; now and then a stage also reads an earlier stage. Stage counts fall in
    [min_stages, max_stages] (default 2–18, mean ≈ 9). Tasks per stage are log-normal
    (median 8 for scans, 60 inside, 2 for the sink; clipped to 1–max_tasks, ≈ 500 tasks
    per job on average). Task durations are log-uniform, scans in the upper half of
    [min_task_seconds, max_task_seconds] (default 1–5 s) and the rest in the lower half
    (0.2–1 s), as TPC-H scans are slow and shuffle tasks short.
    """
    plan = _plan(rng, shape or DagShape())
    stages = tuple(
        StageSpec(
            name=plan.names[i],
            tasks=plan.tasks[i],
            task_duration_seconds=plan.durations[i],
            depends_on=tuple(plan.names[p] for p in plan.parents[i]),
        )
        for i in range(len(plan.names))
    )
    return WorkflowSpec(stages=stages)


@dataclass(frozen=True)
class _Plan:
    names: list[str]
    tasks: list[int]
    durations: list[float]
    parents: list[tuple[int, ...]]

    @property
    def work(self) -> float:
        return sum(n * d for n, d in zip(self.tasks, self.durations, strict=True))


def _plan(rng: np.random.Generator, shape: DagShape) -> _Plan:
    lo, hi = shape.min_stages, shape.max_stages
    n = min(hi, lo + int((hi - lo + 1) * rng.random() ** STAGE_SKEW))
    scans = int(rng.integers(1, max(1, (n + 1) // 2) + 1))
    ops = np.array([True] * (scans - 1) + [False] * (n - 2 * scans + 1))  # True: join
    rng.shuffle(ops)
    u = iter(rng.random(3 * n).tolist())
    roots = list(range(scans))
    names = [f"scan-{i}" for i in range(scans)]
    parents: list[tuple[int, ...]] = [()] * scans
    for k, join in enumerate(ops.tolist()):
        i = scans + k
        a = roots.pop(int(next(u) * len(roots)))
        ps = [a, roots.pop(int(next(u) * len(roots)))] if join else [a]
        if next(u) < EXTRA_EDGE_PROB:
            extra = int(rng.integers(i))
            if extra not in ps:
                ps.append(extra)
        parents.append(tuple(sorted(ps)))
        names.append(f"{'join' if join else 'agg'}-{i}")
        roots.append(i)
    roles = ["scan" if i < scans else "sink" if i == n - 1 else "inner" for i in range(n)]
    median = np.array([MEDIAN_TASKS[r] for r in roles])
    tasks = np.clip(
        np.rint(median * np.exp(TASKS_SIGMA * rng.standard_normal(n))), 1, shape.max_tasks
    )
    tmin, tmax = shape.min_task_seconds, shape.max_task_seconds
    mid = math.sqrt(tmin * tmax)
    low = np.where(np.array(roles) == "scan", mid, tmin)
    high = np.where(np.array(roles) == "scan", tmax, mid)
    durations = np.maximum(np.round(low * (high / low) ** rng.random(n), 3), 0.001)
    return _Plan(names, [int(t) for t in tasks], durations.tolist(), parents)


SMALL_DAG = DagShape(min_stages=2, max_stages=6, max_tasks=8)
"""The plans of `job_shape: dag`: TPC-H-like, small enough for a 4-executor cluster."""

ESTIMATE_SAMPLES = 2000
ESTIMATE_SEED = 20190819


@lru_cache(maxsize=64)
def estimate_tpch_like_work(
    shape: DagShape | None = None, samples: int = ESTIMATE_SAMPLES
) -> float:
    """Mean total work of `tpch_like_spec` DAGs, from a fixed-seed sample (cached per shape)."""
    rng = np.random.default_rng(ESTIMATE_SEED)
    s = shape or DagShape()
    return float(np.mean([_plan(rng, s).work for _ in range(samples)]))
