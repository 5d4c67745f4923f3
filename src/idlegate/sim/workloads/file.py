"""The `file` workload: workflows from a YAML/JSON file, or a history replayed.

The file is read by `sim.history.load_history`; its workflows are cycled and submitted all
at t=0, as a Poisson or fixed-gap stream, or at the arrival times the file records
(rescaled to an interarrival, rate or load if one is given).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

import numpy as np
from pydantic import Field, field_validator, model_validator

from idlegate.errors import IdlegateError
from idlegate.sim.dag import Dag
from idlegate.sim.engine import JobArrival, Workload
from idlegate.sim.history import (
    HistoryWorkflow,
    history_part,
    load_history,
    most_recorded,
    recorded_order,
)
from idlegate.sim.workloads.base import (
    MAX_JOBS,
    ArrivalOptions,
    SeedLike,
    _fidelity,
    as_rng,
    poisson_times,
    split_streams,
)

ArrivalMode = Literal["batch", "poisson", "fixed", "recorded"]
DEFAULT_EXECUTORS = 10
"""The pool of a file that records none (`FileConfig.num_executors`)."""


class FileConfig(ArrivalOptions):
    """Workflows from a YAML/JSON file, repeated and submitted; or a replayed history.

    The file is read by `sim.history.load_history`: any workflow file, whose workflows may
    also carry their arrival time and measured task durations (docs/workloads.md).
    """

    path: str = Field()
    """The YAML or JSON file holding one or more workflows."""
    arrival: ArrivalMode | None = None
    """batch: all at t=0; poisson: first at t=0, exponential gaps; fixed: one every
    interarrival seconds; recorded: the file's arrival/submitTime times, rescaled to an
    interarrival, rate or load if one is given (default: recorded if the workflows have
    arrival times, else batch, or poisson if an interarrival, rate or load is given)."""
    repeat: int | None = Field(None, ge=1, le=MAX_JOBS)
    """Submit the file's workflows this many times (default 1): in file order, or in
    recorded order one recorded span apart."""
    num_jobs: int | None = Field(None, ge=1, le=MAX_JOBS)
    """Total jobs, cycling through the file's workflows (instead of repeat)."""
    num_executors: int | None = Field(None, ge=1, le=100_000)
    """Executors of the cluster (default: the poolSize the file's workflows record most
    often, as for a history; 10 when none is recorded)."""
    moving_delay: float = Field(0.0, ge=0)
    """Seconds an executor needs to move to another job."""
    part: Literal["all", "train", "test"] = "all"
    """Which workflows of a history: all, or one side of its time split (train: those
    that arrived in the first train_fraction of the recorded span, test: the rest;
    `sim.history.split_history`)."""
    train_fraction: float = Field(0.7, gt=0, lt=1)
    """Where the time split cuts the recorded span (part train or test)."""

    @field_validator("path", mode="before")
    @classmethod
    def _path_text(cls, value: Any) -> Any:
        return str(value) if isinstance(value, Path) else value

    @model_validator(mode="after")
    def _arrival_needs_rate(self) -> FileConfig:
        if self.arrival == "batch" and self.arrival_given:
            raise ValueError(
                "arrival 'batch' submits every job at t=0; drop interarrival/rate/load or "
                "choose arrival 'poisson' or 'fixed'"
            )
        if self.arrival in ("poisson", "fixed") and not self.arrival_given:
            raise ValueError(f"arrival {self.arrival!r} needs one of interarrival, rate or load")
        return self

    @model_validator(mode="after")
    def _one_count(self) -> FileConfig:
        if self.repeat is not None and self.num_jobs is not None:
            raise ValueError("give repeat or num_jobs, not both")
        return self

    def job_order(self, num_workflows: int) -> list[int]:
        """Workflow index of each job: file order, cycled `repeat` times or to `num_jobs` jobs."""
        n = self.num_jobs if self.num_jobs is not None else (self.repeat or 1) * num_workflows
        return [i % num_workflows for i in range(n)]

    def arrival_mode(self, recorded: bool) -> ArrivalMode:
        """The arrival mode to use; `recorded`: the file records arrival times."""
        if self.arrival is not None:
            return self.arrival
        if recorded:
            return "recorded"
        return "poisson" if self.arrival_given else "batch"


def file_workload(config: FileConfig, seed: SeedLike = 0) -> Workload:
    """The workflows of a YAML/JSON file, cycled, all at t=0, streamed or at recorded times.

    Stages with measured task durations run for durations drawn from the measurements
    (`sim.history.MeasuredDurations`); their estimate stays `taskDurationSeconds`.
    """
    workflows = load_history(config.path)
    c = config
    pool = c.num_executors or most_recorded([w.pool_size for w in workflows]) or DEFAULT_EXECUTORS
    history = history_part(workflows, c.part, c.train_fraction)
    dags = [Dag.from_spec(h.spec) for h in history]
    models = [h.durations() for h in history]
    stem = Path(c.path).stem
    labels = [h.name or (stem if len(dags) == 1 else f"{stem}-w{i}") for i, h in enumerate(history)]
    # one recorded time makes the file a history: replaying it needs them all
    mode = c.arrival_mode(any(h.arrival is not None for h in history))
    if mode == "recorded":
        order, times = _recorded(c, history, dags, pool)
    else:
        order = c.job_order(len(dags))
        times = _file_times(c, mode, order, dags, seed, pool)
    arrivals = tuple(
        JobArrival(t, f"{labels[w]}-{i}", dags[w], models[w], queue=history[w].spec.queue_name)
        for i, (t, w) in enumerate(zip(times, order, strict=True))
    )
    waves = any(m is not None for m in models)
    return Workload(f"file:{stem}", arrivals, pool, _fidelity(c.moving_delay, waves))


def _file_times(
    c: FileConfig, mode: ArrivalMode, order: list[int], dags: list[Dag], seed: SeedLike, pool: int
) -> list[float]:
    n = len(order)
    if mode == "batch":
        return [0.0] * n
    gap = c.mean_interarrival(_mean_work_of(order, dags), pool)
    if mode == "fixed":
        return [i * gap for i in range(n)]
    _, gaps = split_streams(as_rng(seed))
    return poisson_times(gaps, 1, n - 1, gap)


def _mean_work_of(order: list[int], dags: list[Dag]) -> Callable[[], float]:
    return lambda: float(np.mean([dags[w].total_work for w in order]))


def _recorded(
    c: FileConfig, history: list[HistoryWorkflow], dags: list[Dag], pool: int
) -> tuple[list[int], list[float]]:
    """Jobs in the order they arrived in the history, and their times (starting at 0).

    Repeats (`repeat`, or `num_jobs` beyond the file) replay the history again, each copy
    one recorded span plus one mean recorded gap after the previous one; an interarrival,
    rate or load rescales every time so the mean gap matches it.
    """
    for h in history:
        if h.arrival is None:
            raise IdlegateError(
                f"{h.source} has no arrival (or submitTime); replaying recorded arrivals needs "
                "one on every workflow: add it in seconds, or choose arrival batch, poisson or "
                "fixed to ignore them"
            )
    k = len(history)
    by_time, base = recorded_order(history)
    period = base[-1] * k / (k - 1) if k > 1 else 0.0  # the span plus one mean gap
    n = c.num_jobs if c.num_jobs is not None else (c.repeat or 1) * k
    order = [by_time[i % k] for i in range(n)]
    times = [base[i % k] + (i // k) * period for i in range(n)]
    if c.arrival_given:
        recorded_gap = period / k
        if recorded_gap == 0:
            raise IdlegateError(
                f"{c.path}: every workflow has the same arrival time, so there is no recorded "
                "gap to rescale to the interarrival, rate or load; drop that option or choose "
                "arrival poisson or fixed"
            )
        gap = c.mean_interarrival(_mean_work_of(order, dags), pool)
        times = [t * gap / recorded_gap for t in times]
    return order, times
