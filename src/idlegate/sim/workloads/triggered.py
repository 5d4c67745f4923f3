"""What `follow` and `push` share: triggers that each release one long job and a few short ones.

A *trigger* (an ETL run that its readers follow, a push to a repository) releases a
group of jobs at fixed offsets from its time: one long job and a session of short ones.
Triggers arrive as a Poisson process; a share `uncorrelated` of all jobs arrives instead
on a Poisson stream of its own, with the same mix of long and short jobs, so that the
share of jobs whose arrival is told by an earlier one is an option (1: plain Poisson).

Jobs are those of the two-type set (`sources.TwoTypeSource`): one stage of
`tasks_per_job` tasks, or a small TPC-H-like DAG (`job_shape: dag`), of `short_seconds`
or `size_ratio` × `short_seconds` of work. A job's name is its class and its index,
``long-3`` or ``short-4`` (`job_class` reads it back); nothing in it says whether the job
was triggered, since what follows a long job is what a future model has to learn.

Load. The merged stream's mean gap g follows from `load` (default 0.7), `interarrival`
or `rate`, against the mean job work (L + s·S)/(1 + s) of a long job L followed by s
short ones S on average; triggers then come every g·(1 + s)/(1 − uncorrelated) seconds
on average, uncorrelated jobs every g/uncorrelated.

Seeds. The content (job sizes, DAGs), the trigger times, each trigger's own draws (its
session size, lag and gaps: one row of uniforms per trigger) and the uncorrelated stream
come from independent child streams (`base.split_streams`), each read in order, so the
first n jobs do not depend on how many are drawn: every trigger releases a job at its
own time, so n triggers and n uncorrelated candidates always hold the first n jobs.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import ClassVar, Literal

import numpy as np
from pydantic import Field

from idlegate.sim.engine import JobArrival, Workload
from idlegate.sim.workloads.base import (
    MAX_JOBS,
    ArrivalOptions,
    SeedLike,
    _fidelity,
    as_rng,
    split_streams,
)
from idlegate.sim.workloads.sources import JobShape, TwoTypeSource, _one_stage_dag

LagDistribution = Literal["exponential", "uniform", "fixed"]
"""How a random lag of mean m is drawn: exponential (mean m), uniform on [0, 2m], or m."""


class TriggeredOptions(ArrivalOptions):
    """The options `follow` and `push` share: cluster, job sizes, session size, load."""

    num_jobs: int = Field(100, ge=1, le=MAX_JOBS)
    """Jobs in total, triggered and uncorrelated."""
    num_executors: int = Field(4, ge=1, le=100_000)
    """Executors of the cluster."""
    short_seconds: float = Field(10.0, gt=0)
    """Work of a short job (executor-seconds)."""
    size_ratio: float = Field(10.0, ge=1, le=1000)
    """Work of a long job / work of a short one (the issue's range: 5-20)."""
    tasks_per_job: int = Field(1, ge=1, le=100_000)
    """Tasks of a one-stage job (its work split evenly); job_shape dag draws its own."""
    job_shape: JobShape = "one-stage"
    """one-stage, or dag: a small random TPC-H-like plan (2-6 stages of at most 8 tasks)
    scaled to the job's work."""
    session_size: float = Field(3.5, ge=0, le=1000)
    """Mean short jobs a trigger releases; each trigger releases floor or ceil of it
    (3.5: three or four, equally often)."""
    uncorrelated: float = Field(0.2, ge=0, le=1)
    """Share of the jobs that arrive on their own Poisson stream (same long/short mix),
    not released by a trigger (1: plain Poisson arrivals)."""
    moving_delay: float = Field(0.0, ge=0)
    """Seconds an executor needs to move to another job."""
    DEFAULT_LOAD: ClassVar[float | None] = 0.7

    @property
    def long_seconds(self) -> float:
        """Work of a long job (executor-seconds)."""
        return self.short_seconds * self.size_ratio

    def source(self) -> TwoTypeSource:
        """The jobs: short or long, of this config's shape."""
        tasks = 1 if self.job_shape == "dag" else self.tasks_per_job
        return TwoTypeSource(
            _one_stage_dag(self.short_seconds, tasks),
            _one_stage_dag(self.long_seconds, tasks),
            self.long_share(),
            job_shape=self.job_shape,
        )

    def long_share(self) -> float:
        """Fraction of the jobs that are long: 1/(1 + session_size)."""
        return 1.0 / (1.0 + self.session_size)

    def mean_job_work(self) -> float:
        """Mean estimated work of one job (executor-seconds)."""
        return self.source().mean_work()

    def mean_gap(self) -> float:
        """The merged stream's mean gap between jobs (seconds)."""
        return self.mean_interarrival(self.mean_job_work, self.num_executors)


def lags(u: np.ndarray, mean: float, distribution: LagDistribution) -> np.ndarray:
    """Lags of mean `mean` from uniforms `u` in [0, 1) (one per lag, so a prefix of `u`
    gives a prefix of the lags)."""
    if distribution == "exponential":
        return -mean * np.log1p(-u)
    if distribution == "uniform":
        return 2.0 * mean * u
    return np.full_like(u, mean)


def poisson_times(rng: np.random.Generator, n: int, mean_gap: float) -> np.ndarray:
    """The first `n` arrival times of a Poisson stream of mean gap `mean_gap`, one uniform
    per gap read in order (so a prefix of the draws gives a prefix of the times)."""
    return np.cumsum(-np.log1p(-rng.random(n))) * mean_gap


def session_counts(u: np.ndarray, mean: float) -> np.ndarray:
    """floor(mean) or ceil(mean) per uniform, ceil with probability mean - floor(mean)."""
    whole = math.floor(mean)
    return whole + (u < mean - whole).astype(int)


Releases = Callable[[np.random.Generator, int], tuple[np.ndarray, np.ndarray]]
"""Given a trigger stream's generator and a trigger count T: (offsets, long), both (T, W):
each trigger's jobs' offsets from its time (NaN: no job in that slot; at least one 0 per
row) and whether each is long. Reads one row of uniforms per trigger."""


def triggered_workload(
    name: str, c: TriggeredOptions, releases: Releases, seed: SeedLike
) -> Workload:
    """The first `c.num_jobs` jobs of triggered groups (`releases`) merged with the
    uncorrelated Poisson stream (module docs)."""
    n, share = c.num_jobs, c.uncorrelated
    content, arrivals = split_streams(as_rng(seed))
    trigger_stream, free_stream = split_streams(arrivals)
    gap = c.mean_gap()
    times, is_long = [np.empty(0)], [np.empty(0, bool)]
    if share < 1:
        trigger_gaps, per_trigger = split_streams(trigger_stream)
        every = gap * (1 + c.session_size) / (1 - share)
        starts = poisson_times(trigger_gaps, n, every)
        offsets, long = releases(per_trigger, n)
        at = starts[:, None] + offsets
        times.append(at[~np.isnan(at)])
        is_long.append(long[~np.isnan(at)])
    if share > 0:
        gaps_rng, kinds_rng = split_streams(free_stream)
        times.append(poisson_times(gaps_rng, n, gap / share))
        is_long.append(kinds_rng.random(n) < c.long_share())
    all_times, all_long = np.concatenate(times), np.concatenate(is_long)
    first = np.argsort(all_times, kind="stable")[:n]
    jobs = c.source().jobs(content, all_long[first].tolist())
    arrivals_ = tuple(
        JobArrival(t, f"{j.label}-{i}", j.dag, j.durations)
        for i, (t, j) in enumerate(zip(all_times[first].tolist(), jobs, strict=True))
    )
    return Workload(name, arrivals_, c.num_executors, _fidelity(c.moving_delay, False))


def job_class(name: str) -> str:
    """The class of a generated job from its name: ``long-3`` → "long", ``etl-report-7`` →
    "etl-report" (the name without its index)."""
    return name.rsplit("-", 1)[0]
