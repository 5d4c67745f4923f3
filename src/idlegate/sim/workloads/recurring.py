"""The `recurring` workload: named pipelines on cron-like schedules, plus ad-hoc jobs.

A nightly job is followed by its consumers at fixed times; a dashboard refreshes every
few minutes. Each `RecurringPipeline` has a name, a `PeriodicStarts` (period, phase, jitter)
and a job it runs every time: the same DAG (one stage of `tasks` tasks, or a small
TPC-H-like plan drawn once per pipeline with `job_shape: dag`) with a similar amount of
work (its `work` times a log-normal factor of mean 1 and spread `spread` per run). A
share `adhoc_fraction` of the jobs are ad hoc: a Poisson stream of short
(`short_seconds`) and long (`size_ratio` × `short_seconds`) one-off jobs.

The default pipelines, on 4 executors, offer a load of 0.70 as written: an `ingest`
(100 s) every 120 s followed 12 s and 16 s later by its consumers `ingest-report` and
`ingest-check` (10 s each), a `dashboard` refresh (10 s) every 20 s, and a `train`
(180 s) every 240 s; one job in five is ad hoc. Given `load` (or `interarrival`,
`rate`), every schedule's times (period, phase, jitter) are stretched or compressed by
one factor so that the offered load is that: the pattern stays, the clock changes.

Names: a run is ``<pipeline>-<index>`` (``ingest-report-7``), an ad-hoc job
``adhoc-long-3`` or ``adhoc-short-4``; `triggered.job_class` reads the class back.

Seeds. Each pipeline's run times and work factors come from its own child streams, the
ad-hoc arrivals and kinds from two more, and the ad-hoc jobs' content (and the pipelines'
DAGs) from the content stream, all read in order, so the first n jobs do not depend on
how many are drawn: a run starts before the next nominal time (jitter < period).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

import numpy as np
from pydantic import Field, field_validator, model_validator

from idlegate.config import Config
from idlegate.sim.dag import Dag
from idlegate.sim.engine import JobArrival, Workload
from idlegate.sim.workloads.base import (
    MAX_JOBS,
    ArrivalOptions,
    SeedLike,
    _fidelity,
    as_rng,
    split_streams,
)
from idlegate.sim.workloads.schedule import PeriodicStarts
from idlegate.sim.workloads.sources import (
    MAX_TASK_SECONDS,
    JobShape,
    TwoTypeSource,
    _one_stage_dag,
    _scaled_plan,
    _sized_dag,
)
from idlegate.sim.workloads.tpch_like import SMALL_DAG, _Plan, _plan
from idlegate.sim.workloads.triggered import poisson_times

_NAME = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")


class RecurringPipeline(Config):
    """One named recurring pipeline: when it runs and what it runs."""

    name: str
    """Lower-case letters, digits and '-' (a Kubernetes name), not starting with 'adhoc'."""
    schedule: PeriodicStarts
    """When it runs (period, phase, jitter in seconds)."""
    work: float = Field(gt=0, allow_inf_nan=False)
    """Mean work of a run (executor-seconds)."""
    tasks: int = Field(1, ge=1, le=100_000)
    """Tasks of its one stage (its work split evenly); job_shape dag draws its own."""
    spread: float = Field(0.1, ge=0, le=3)
    """Log-normal spread of a run's work around `work` (0: the same every run)."""

    @field_validator("name")
    @classmethod
    def _kube_name(cls, name: str) -> str:
        if not _NAME.fullmatch(name) or name.startswith("adhoc"):
            raise ValueError(
                f"pipeline name {name!r} must be lower-case letters, digits and '-' (like "
                "'nightly-etl') and must not start with 'adhoc'"
            )
        return name


def _pipeline(
    name: str, work: float, period: float, phase: float, jitter: float
) -> RecurringPipeline:
    schedule = PeriodicStarts(period=period, phase=phase, jitter=jitter)
    return RecurringPipeline(name=name, schedule=schedule, work=work)


DEFAULT_PIPELINES = (
    _pipeline("ingest", 100.0, 120.0, 0.0, 3.0),
    _pipeline("ingest-report", 10.0, 120.0, 12.0, 3.0),
    _pipeline("ingest-check", 10.0, 120.0, 16.0, 3.0),
    _pipeline("dashboard", 10.0, 20.0, 5.0, 2.0),
    _pipeline("train", 180.0, 240.0, 60.0, 5.0),
)
"""An ingest followed by its two consumers, a frequent dashboard, a slow training run."""


class RecurringConfig(ArrivalOptions):
    """Named pipelines on cron-like schedules plus ad-hoc Poisson jobs (module docs).

    Default: 100 jobs on 4 executors, `DEFAULT_PIPELINES` as written (offered load 0.70),
    one job in five ad hoc (10 s, or 100 s one time in five).
    """

    num_jobs: int = Field(100, ge=1, le=MAX_JOBS)
    """Jobs in total, recurring runs and ad hoc."""
    num_executors: int = Field(4, ge=1, le=100_000)
    """Executors of the cluster."""
    pipelines: tuple[RecurringPipeline, ...] = Field(DEFAULT_PIPELINES, min_length=1)
    """The recurring pipelines: a list of {name, schedule: {period, phase, jitter}, work,
    tasks, spread} (on the command line as JSON)."""
    adhoc_fraction: float = Field(0.2, ge=0, lt=1)
    """Share of the jobs that are ad hoc (a Poisson stream)."""
    short_seconds: float = Field(10.0, gt=0)
    """Work of a short ad-hoc job (executor-seconds)."""
    size_ratio: float = Field(10.0, ge=1, le=1000)
    """Work of a long ad-hoc job / work of a short one."""
    adhoc_long_fraction: float = Field(0.2, ge=0, le=1)
    """Share of the ad-hoc jobs that are long."""
    job_shape: JobShape = "one-stage"
    """one-stage, or dag: each pipeline runs a small random TPC-H-like plan (drawn once
    per pipeline), each ad-hoc job its own."""
    moving_delay: float = Field(0.0, ge=0)
    """Seconds an executor needs to move to another job."""

    @field_validator("pipelines", mode="before")
    @classmethod
    def _json_text(cls, value: Any) -> Any:
        if isinstance(value, str):
            try:
                return json.loads(value)
            except json.JSONDecodeError as exc:
                raise ValueError(f"pipelines is not valid JSON ({exc.msg})") from None
        return value

    @model_validator(mode="after")
    def _unique_names(self) -> RecurringConfig:
        names = [p.name for p in self.pipelines]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise ValueError(f"pipeline {twice[0]!r} is named twice; give each its own name")
        return self

    def adhoc_source(self) -> TwoTypeSource:
        """The ad-hoc jobs: short or long, of this config's shape."""
        return TwoTypeSource(
            _one_stage_dag(self.short_seconds, 1),
            _one_stage_dag(self.short_seconds * self.size_ratio, 1),
            self.adhoc_long_fraction,
            job_shape=self.job_shape,
        )

    def nominal_gap(self) -> float:
        """The merged stream's mean gap with the schedules as written (seconds)."""
        return (1 - self.adhoc_fraction) / sum(1 / p.schedule.period for p in self.pipelines)

    def mean_job_work(self) -> float:
        """Mean work of one job (executor-seconds); the schedules' scale does not change it."""
        rates = [1 / p.schedule.period for p in self.pipelines]
        runs = sum(p.work * r for p, r in zip(self.pipelines, rates, strict=True)) / sum(rates)
        f = self.adhoc_fraction
        return (1 - f) * runs + f * self.adhoc_source().mean_work()

    def mean_interarrival(self, mean_work: Callable[[], float], num_executors: int) -> float:
        """The merged stream's mean gap: from an arrival knob if given, else as written."""
        if not self.arrival_given:
            return self.nominal_gap()
        return super().mean_interarrival(mean_work, num_executors)

    def time_scale(self) -> float:
        """The factor on every schedule's times that gives the asked load (1: as written)."""
        return self.mean_interarrival(self.mean_job_work, self.num_executors) / self.nominal_gap()


def _pipeline_dags(rng: np.random.Generator, c: RecurringConfig) -> list[_Plan | None]:
    """Each pipeline's fixed plan (job_shape dag), drawn in order; None for one-stage."""
    return [_plan(rng, SMALL_DAG) if c.job_shape == "dag" else None for _ in c.pipelines]


def _run_dag(p: RecurringPipeline, plan: _Plan | None, factor: float) -> Dag:
    work = p.work * factor
    if plan is not None:
        return _scaled_plan(plan, work)
    return _sized_dag(min(work / p.tasks, MAX_TASK_SECONDS), p.tasks)


def recurring_workload(config: RecurringConfig | None = None, seed: SeedLike = 0) -> Workload:
    """Runs of the recurring pipelines merged with ad-hoc Poisson jobs (module docs)."""
    c = config or RecurringConfig()
    n, f, scale = c.num_jobs, c.adhoc_fraction, c.time_scale()
    content, arrivals = split_streams(as_rng(seed))
    plans_rng, adhoc_content = split_streams(content)
    plans = _pipeline_dags(plans_rng, c)
    times, who, factors = [], [], []
    for i, p in enumerate(c.pipelines):
        run_rng, work_rng = split_streams(as_rng(int(arrivals.integers(2**63))))
        times.append(p.schedule.scaled(scale).runs(run_rng, n))
        s = p.spread
        factors.append(np.exp(s * work_rng.standard_normal(n) - s * s / 2))
        who.append(np.full(n, i))
    gaps_rng, kinds_rng = split_streams(arrivals)
    if f > 0:
        times.append(poisson_times(gaps_rng, n, c.nominal_gap() * scale / f))
        who.append(np.where(kinds_rng.random(n) < c.adhoc_long_fraction, -1, -2))
        factors.append(np.ones(n))
    all_times, all_who = np.concatenate(times), np.concatenate(who)
    first = np.argsort(all_times, kind="stable")[:n]
    picked = all_who[first]
    adhoc = iter(c.adhoc_source().jobs(adhoc_content, (picked[picked < 0] == -1).tolist()))
    all_factors = np.concatenate(factors)[first].tolist()
    jobs = []
    for i, (t, w, factor) in enumerate(
        zip(all_times[first].tolist(), picked.tolist(), all_factors, strict=True)
    ):
        if w < 0:
            drawn = next(adhoc)
            jobs.append(JobArrival(t, f"adhoc-{drawn.label}-{i}", drawn.dag))
        else:
            p = c.pipelines[w]
            dag = _run_dag(p, plans[w], factor)
            jobs.append(JobArrival(t, f"{p.name}-{i}", dag, scheduled=True))
    return Workload("recurring", tuple(jobs), c.num_executors, _fidelity(c.moving_delay, False))
