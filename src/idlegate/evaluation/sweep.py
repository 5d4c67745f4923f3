"""The idle-slot papers' Fig. 6: idle inserted against the arrival rate and the long-job length.

The synthetic two-type workload is swept over offered loads (plotted at their arrival
rates) and over the long job's work at a fixed load; each point is mean ± CI over seeds.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from pydantic import Field

from idlegate.config import Config
from idlegate.evaluation.pool import ProgressFn, run_tasks
from idlegate.parallel import TaskPool
from idlegate.policy import SchedulerSpec, make_scheduler
from idlegate.sim.engine import simulate
from idlegate.sim.metrics import (
    Estimate,
    mean_ci,
)
from idlegate.sim.workloads import build_workload, mean_job_work, workload_config

__all__ = [
    "SweepConfig",
    "SweepPoint",
    "SweepResult",
    "run_idle_sweep",
    "sweep_config",
    "sweep_tasks",
]


class SweepConfig(Config):
    """The Fig. 6 sweep: the synthetic workload over arrival rates and long-job lengths."""

    loads: tuple[float, ...]
    """Offered loads; each is plotted at its arrival rate (jobs/s)."""
    long_seconds: tuple[float, ...]
    """Work of a long job (executor-s); swept at offered load `long_load`."""
    long_load: float = 0.8
    """Offered load held fixed while long_seconds varies (the arrival rate follows)."""
    options: dict[str, Any] = Field(default_factory=dict)
    """Other synthetic options (num_stream, num_executors, …)."""


def sweep_config(suite: str) -> SweepConfig:
    """The Fig. 6 sweep of `suite`."""
    if suite == "quick":
        return SweepConfig(
            loads=(0.4, 0.6, 0.8), long_seconds=(30.0, 50.0, 90.0), options={"num_stream": 49}
        )
    return SweepConfig(
        loads=(0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9),
        long_seconds=(20.0, 30.0, 50.0, 70.0, 100.0, 150.0),
        options={"num_stream": 99},
    )


@dataclass(frozen=True)
class SweepPoint:
    """One scheduler at one swept value: idle statistics, mean ± CI over seeds."""

    scheduler: str
    parameter: str
    """"rate" or "long_seconds"."""
    value: float
    """Arrival rate (jobs/s) or long-job work (executor-s)."""
    load: float
    idle_per_long_job: Estimate
    idle_per_short_job: Estimate
    idle_per_decision: Estimate
    delayed_long_fraction: Estimate
    avg_jct: Estimate

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict."""
        stats = ("idle_per_long_job", "idle_per_short_job", "idle_per_decision")
        return {
            "scheduler": self.scheduler,
            "parameter": self.parameter,
            "value": self.value,
            "load": self.load,
            **{k: getattr(self, k).to_dict() for k in stats},
            "delayed_long_fraction": self.delayed_long_fraction.to_dict(),
            "avg_jct": self.avg_jct.to_dict(),
        }


@dataclass(frozen=True)
class SweepResult:
    """The sweep's points, by scheduler then parameter then value."""

    config: SweepConfig
    points: tuple[SweepPoint, ...]

    def series(self, scheduler: str, parameter: str) -> list[SweepPoint]:
        """The points of one line of the plot, by value."""
        pts = [p for p in self.points if p.scheduler == scheduler and p.parameter == parameter]
        return sorted(pts, key=lambda p: p.value)

    @property
    def schedulers(self) -> list[str]:
        """Scheduler labels in first-seen order."""
        return list(dict.fromkeys(p.scheduler for p in self.points))

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict."""
        c = self.config
        return {
            "loads": list(c.loads),
            "long_seconds": list(c.long_seconds),
            "long_load": c.long_load,
            "options": dict(c.options),
            "points": [p.to_dict() for p in self.points],
        }


@dataclass(frozen=True)
class _SweepTask:
    entry: SchedulerSpec
    parameter: str
    value: float
    load: float
    options: tuple[tuple[str, Any], ...]
    seed: int


def _sweep_run(task: _SweepTask) -> tuple[float, float, float, float, float]:
    """(idle per long job, per short job, per decision, delayed long fraction, avg JCT)."""
    workload = build_workload("synthetic", task.seed, **dict(task.options))
    result = simulate(workload, make_scheduler(task.entry), seed=task.seed)
    recs = result.records
    long_idle = [r.idle_inserted for r in recs if r.name.startswith("long")]
    short_idle = [r.idle_inserted for r in recs if not r.name.startswith("long")]
    total = float(sum(r.idle_inserted for r in recs))
    return (
        float(np.mean(long_idle)) if long_idle else math.nan,
        float(np.mean(short_idle)) if short_idle else math.nan,
        total / result.decisions if result.decisions else math.nan,
        float(np.mean([x > 0 for x in long_idle])) if long_idle else math.nan,
        float(np.mean([r.jct for r in recs])) if recs else math.nan,
    )


def _arrival_rate(options: Mapping[str, Any]) -> float:
    """Jobs per second of the synthetic workload with `options`."""
    cfg = workload_config("synthetic", **options)
    gap = cfg.mean_interarrival(lambda: mean_job_work(cfg), cfg.num_executors)
    return 1.0 / gap


def sweep_tasks(
    config: SweepConfig, entries: Sequence[SchedulerSpec | str], seeds: Sequence[int]
) -> list[_SweepTask]:
    base = dict(config.options)
    grid: list[tuple[str, float, float, dict[str, Any]]] = []
    for load in config.loads:
        opts = {**base, "load": load}
        grid.append(("rate", _arrival_rate(opts), load, opts))
    for long in config.long_seconds:
        opts = {**base, "load": config.long_load, "long_seconds": long}
        grid.append(("long_seconds", long, config.long_load, opts))
    return [
        _SweepTask(SchedulerSpec.of(e), param, value, load, tuple(sorted(opts.items())), s)
        for e in entries
        for param, value, load, opts in grid
        for s in seeds
    ]


def run_idle_sweep(
    config: SweepConfig,
    entries: Sequence[SchedulerSpec | str],
    seeds: Sequence[int],
    jobs: int = 1,
    progress: ProgressFn | None = None,
    confidence: float = 0.95,
    pool: TaskPool | None = None,
) -> SweepResult:
    """Run each scheduler over the sweep's grid and seeds; summarise per point by title
    (in `pool` if given, else in `jobs` local processes)."""
    tasks = sweep_tasks(config, entries, seeds)
    outcomes = run_tasks(
        _sweep_run, tasks, jobs, progress, lambda t: f"sweep {t.entry.title}", pool
    )
    groups: dict[tuple[str, str, float, float], list[tuple[float, ...]]] = {}
    for task, out in zip(tasks, outcomes, strict=True):
        groups.setdefault((task.entry.title, task.parameter, task.value, task.load), []).append(out)
    points = []
    for (label, param, value, load), rows in groups.items():
        cols = [mean_ci(_finite(c), confidence) for c in zip(*rows, strict=True)]
        points.append(SweepPoint(label, param, value, load, *cols))
    return SweepResult(config, tuple(points))


def _finite(values: Sequence[float]) -> list[float]:
    """The finite values, or [nan] if none (a run without long jobs has no per-long mean)."""
    out = [v for v in values if math.isfinite(v)]
    return out or [math.nan]
