"""What the example-shaped workloads (`argo-shapes`, `airflow-shapes`) share.

Both draw a job of some shape, give each of its stages a run time log-normal around its
kind's median, add every pod's start latency to the estimate schedulers see, and let a pod's
real run time vary around that estimate (`K8sPodDurations`); they differ only in how a
shape becomes a job. Here is that common part: drawing the stage run times, timing a
mapped job's stages, the fixed-seed mean work that sets the arrival rate, and the
Poisson-arrival workload itself, with its pods' requests drawn from a stream of their own
when asked (`ShapesConfig.requests`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from typing import ClassVar

import numpy as np
from pydantic import Field

from idlegate.sim.dag import Dag
from idlegate.sim.engine import JobArrival, Workload
from idlegate.sim.spec import MAX_TASK_SECONDS, StageSpec
from idlegate.sim.workloads.base import MAX_JOBS, ArrivalOptions, SeedLike, as_rng, split_streams
from idlegate.sim.workloads.k8s_batch import K8S_FIDELITY, K8sPodDurations
from idlegate.sim.workloads.requests import requests_stream

Draw = Callable[
    [np.random.Generator, np.random.Generator | None], tuple[str, Dag, tuple[float, ...]]
]
"""Draws one job from a stream: its shape, its DAG (estimates include the start latency)
and its stages' run times without the latency; with a second stream, its pods' requests
(`idlegate.sim.workloads.requests`)."""


def draw_runs(
    rng: np.random.Generator,
    kinds: Iterable[tuple[float, float]],
    duration_scale: float,
    start_latency: float,
) -> tuple[float, ...]:
    """A run time per stage, log-normal around its kind's (median, sigma) times
    `duration_scale`, at least a second and short enough that the start latency still fits
    under `MAX_TASK_SECONDS`."""
    runs = []
    for median, sigma in kinds:
        run = round(median * duration_scale * math.exp(sigma * rng.standard_normal()), 1)
        runs.append(min(max(run, 1.0), MAX_TASK_SECONDS - start_latency))
    return tuple(runs)


def timed_stages(
    stages: Sequence[StageSpec], runs: Sequence[float], start_latency: float
) -> tuple[StageSpec, ...]:
    """`stages` with each one's estimate set to the start latency plus its run time (their
    requests, if any, kept)."""
    return tuple(
        StageSpec(
            name=s.name,
            tasks=s.tasks,
            task_duration_seconds=start_latency + run,
            depends_on=s.depends_on,
            resources=s.resources,
        )
        for s, run in zip(stages, runs, strict=True)
    )


def sample_mean_work(draw: Draw, seed: int, samples: int) -> float:
    """The mean estimated work of `samples` jobs drawn from a stream seeded with `seed`."""
    rng = np.random.default_rng(seed)
    return float(np.mean([draw(rng, None)[1].total_work for _ in range(samples)]))


class ShapesConfig(ArrivalOptions):
    """What every example-shaped workload of minute-scale pods is told (Argo's, Airflow's)."""

    num_jobs: int = Field(200, ge=1, le=MAX_JOBS)
    """Workflows in total."""
    num_executors: int = Field(20, ge=1, le=100_000)
    """Executors (pod slots) of the pool."""
    duration_scale: float = Field(1.0, gt=0)
    """Factor on every pod's run time (not on its start latency)."""
    task_sigma: float = Field(0.3, ge=0, le=3)
    """Log-normal spread of a pod's real run time around its stage's estimate (0: exact)."""
    start_latency: float = Field(15.0, ge=0, le=3600)
    """Seconds every pod needs to start (scheduling, image pull), part of its duration."""
    requests: bool = False
    """Give each stage's pods requests (CPU 0.1-8 by the stage's kind, memory to match, a
    GPU on a few stages), counted by a pool with --resources
    (`idlegate.sim.workloads.requests`). Off: no requests, the workload as it always was."""
    DEFAULT_LOAD: ClassVar[float | None] = 0.7


def shapes_workload(
    name: str,
    options: ShapesConfig,
    seed: SeedLike,
    *,
    draw: Draw,
    mean_work: Callable[[], float],
) -> Workload:
    """`options.num_jobs` jobs from `draw`, Poisson arrivals at `options`' load for
    `mean_work`; content and arrival gaps come from independent streams of `seed`."""
    root = as_rng(seed)
    content, arrivals = split_streams(root)
    requests = requests_stream(root, options.requests)
    gap = options.mean_interarrival(mean_work, options.num_executors)
    draws = arrivals.standard_exponential(options.num_jobs - 1) * gap
    times = np.concatenate([[0.0], np.cumsum(draws)])
    jobs = []
    for i, t in enumerate(times.tolist()):
        shape, dag, runs = draw(content, requests)
        model = K8sPodDurations(options.start_latency, runs, options.task_sigma)
        jobs.append(JobArrival(t, f"{shape}-{i}", dag, model))
    return Workload(name, tuple(jobs), options.num_executors, K8S_FIDELITY)
