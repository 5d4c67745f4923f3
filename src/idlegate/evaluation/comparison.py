"""Side-by-side comparison of schedulers on common random numbers: config, runs, pairing.

Every scheduler runs on the *same* arrival sequences: for each seed the workload is built
once with ``build_workload(name, seed, **options)`` and each scheduler is simulated on it
with ``simulate(workload, scheduler, seed=seed)``. Differences between schedulers are then
paired per seed (:func:`~idlegate.sim.metrics.paired_relative_change`), which cancels the
seed-to-seed variation of the workload itself.

Runs are independent; with ``jobs > 1`` they are spread over a process pool. Each run is
a pure function of (workload, scheduler, seed), so the results do not depend on ``jobs``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

import numpy as np

from idlegate import __version__
from idlegate.errors import IdlegateError
from idlegate.evaluation.pool import run_tasks
from idlegate.evaluation.setting import Setting, describe_setting
from idlegate.parallel import TaskPool
from idlegate.policy import SchedulerSpec, make_scheduler
from idlegate.sim.engine import Workload, simulate
from idlegate.sim.metrics import (
    Estimate,
    JobMetrics,
    RunMetrics,
    job_metrics,
    mean_ci,
    paired_relative_change,
    run_metrics,
)
from idlegate.sim.protocol import Scheduler
from idlegate.sim.workloads import WORKLOADS, build_workload

__all__ = [
    "RIGID_SUMMARY_FIELDS",
    "SUMMARY_FIELDS",
    "CompareConfig",
    "Comparison",
    "ProgressCallback",
    "RunOutcome",
    "SchedulerResult",
    "WorkloadOptions",
    "build",
    "check_names",
    "is_rigid",
    "run_comparison",
    "run_one",
]


ProgressCallback = Callable[[int, int, str, int], None]
"""Called after each finished run as ``progress(done, total, scheduler, seed)``."""

SUMMARY_FIELDS: tuple[str, ...] = (
    "avg_jct",
    "median_jct",
    "p95_jct",
    "p99_jct",
    "makespan",
    "utilisation",
    "overhead",
    "mean_jobs_in_system",
    "idle_inserted",
    "lb_ratio",
)
"""RunMetrics fields summarised as mean ± CI over seeds."""

RIGID_SUMMARY_FIELDS: tuple[str, ...] = (*SUMMARY_FIELDS, "avg_wait", "avg_bsld", "max_bsld")
"""The fields summarised for a rigid workload (:func:`is_rigid`): the DAG fields plus the
HPC metrics, wait and bounded slowdown, by which rigid schedulers are judged."""


# ---------------------------------------------------------------------------------------
# Configuration


@dataclass(frozen=True)
class WorkloadOptions:
    """Workload options a user gave; None means "not given" (the workload's own default).

    The fields are ``build_workload`` option names; only those given are passed on, and
    ``build_workload`` validates them against the chosen workload (an option the workload
    does not take, or a bad value, is an IdlegateError that names the valid options).
    """

    num_executors: int | None = None
    """Executors in the cluster (K)."""
    interarrival: float | None = None
    """Mean seconds between streamed job arrivals."""
    load: float | None = None
    """Target offered load; the interarrival is derived from it."""
    num_jobs: int | None = None
    """Total jobs in the arrival sequence (jobs at t=0 plus streamed ones)."""
    tpch_dir: Path | None = None
    """Directory of Decima's TPC-H traces (workloads "tpch", "mixed")."""
    path: Path | None = None
    """A workflow file (workload "file")."""
    alpha: float | None = None
    """Fraction of synthetic two-type jobs (workload "mixed")."""
    extra: Mapping[str, Any] = field(default_factory=dict)
    """Any other ``build_workload`` option, e.g. ``{"num_stream": 100}``."""

    def to_kwargs(self) -> dict[str, Any]:
        """The options that were given, as ``build_workload`` keyword arguments."""
        out: dict[str, Any] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name != "extra" and value is not None:
                out[f.name] = str(value) if isinstance(value, Path) else value
        clash = sorted(set(out) & set(self.extra))
        if clash:
            raise IdlegateError(f"workload option {clash[0]!r} given twice")
        out.update({k: v for k, v in self.extra.items() if v is not None})
        return out


@dataclass(frozen=True)
class CompareConfig:
    """What to compare: schedulers × seeds on one workload.

    Each scheduler is a `SchedulerSpec` (a text is parsed); rows and the baseline go by
    its title, the label if it has one (`idlegate.policy.spec`).
    """

    workload: str
    schedulers: tuple[SchedulerSpec, ...]
    seeds: tuple[int, ...] = (0, 1, 2)
    baseline: str | None = None
    """Scheduler the % column is relative to; None: "fair" if compared, else the first."""
    options: WorkloadOptions = field(default_factory=WorkloadOptions)
    jobs: int = 1
    """Worker processes (1: run in this process)."""
    confidence: float = 0.95

    def __post_init__(self) -> None:
        object.__setattr__(self, "schedulers", tuple(map(SchedulerSpec.of, self.schedulers)))
        if not self.schedulers:
            raise IdlegateError("no scheduler to compare; pass e.g. --schedulers fifo,fair")
        labels = self.labels
        dupes = sorted({s for s in labels if labels.count(s) > 1})
        if dupes:
            raise IdlegateError(f"scheduler listed twice: {', '.join(dupes)}")
        if not self.seeds:
            raise IdlegateError("no seed to run; pass --seeds 1 or more")
        if len(set(self.seeds)) != len(self.seeds):
            raise IdlegateError("seeds must be distinct")
        if self.baseline is not None and self.baseline not in labels:
            raise IdlegateError(
                f"baseline {self.baseline!r} is not among the compared schedulers "
                f"({', '.join(labels)})"
            )
        if isinstance(self.jobs, bool) or not isinstance(self.jobs, int) or self.jobs < 1:
            raise IdlegateError(f"--jobs must be a whole number >= 1, got {self.jobs!r}")
        if not 0 < self.confidence < 1:
            raise IdlegateError(f"confidence must be between 0 and 1, got {self.confidence}")

    @property
    def labels(self) -> tuple[str, ...]:
        """The row label of each scheduler, in order."""
        return tuple(s.title for s in self.schedulers)

    @property
    def baseline_name(self) -> str:
        """The baseline actually used (a label)."""
        if self.baseline is not None:
            return self.baseline
        labels = self.labels
        return "fair" if "fair" in labels else labels[0]

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready description of the comparison."""
        return {
            "workload": self.workload,
            "workload_options": self.options.to_kwargs(),
            "schedulers": [s.format() for s in self.schedulers],
            "seeds": list(self.seeds),
            "baseline": self.baseline_name,
            "confidence": self.confidence,
        }


# ---------------------------------------------------------------------------------------
# Running


def check_names(workload: str, schedulers: Iterable[SchedulerSpec] = ()) -> None:
    """Raise IdlegateError naming the known choices if the workload is unknown, or if a
    scheduler cannot be built (each is built once, before any run: a missing model file
    stops the comparison at once)."""
    if workload not in WORKLOADS:
        raise IdlegateError(f"unknown workload {workload!r}; choose one of: {', '.join(WORKLOADS)}")
    for s in schedulers:
        make_scheduler(s)


def is_rigid(workload: Workload) -> bool:
    """True when every job of `workload` is rigid: one gang stage (`swf`, `lublin`, or a
    file of such jobs). Its comparison then reports wait and bounded slowdown too."""
    return bool(workload.jobs) and all(
        j.dag.num_stages == 1 and j.dag.gang[0] for j in workload.jobs
    )


def build(workload: str, seed: int, options: WorkloadOptions | None = None) -> Workload:
    """Build the arrival sequence of `workload` for `seed` (only the given options are passed)."""
    kwargs = (options or WorkloadOptions()).to_kwargs()
    return build_workload(workload, seed, **kwargs)


@dataclass(frozen=True, eq=False)
class RunOutcome:
    """One simulated run: its aggregates and its per-job metrics."""

    metrics: RunMetrics
    jobs: JobMetrics


def _simulate(workload: Workload, scheduler: Scheduler, seed: int) -> RunOutcome:
    result = simulate(workload, scheduler, seed=seed)
    jm = job_metrics(result)
    return RunOutcome(run_metrics(result, jm), jm)


def run_one(
    workload: str,
    scheduler: SchedulerSpec | str,
    seed: int = 0,
    options: WorkloadOptions | None = None,
) -> RunOutcome:
    """Build `workload` for `seed` and simulate `scheduler` on it (built once)."""
    check_names(workload)
    built = make_scheduler(scheduler)
    return _simulate(build(workload, seed, options), built, seed)


def _pool_run(
    args: tuple[Workload, SchedulerSpec, int],
) -> tuple[str, int, RunMetrics, np.ndarray, np.ndarray]:
    workload, spec, seed = args
    out = _simulate(workload, make_scheduler(spec), seed)
    return spec.title, seed, out.metrics, out.jobs.jct, out.jobs.idle_inserted


@dataclass(frozen=True, eq=False)
class SchedulerResult:
    """One scheduler's runs (in seed order) and their summaries over seeds."""

    name: str
    runs: tuple[RunMetrics, ...]
    jct: tuple[np.ndarray, ...]
    """Per seed, the JCT of every finished job (by job id)."""
    summary: Mapping[str, Estimate]
    """Mean ± CI over seeds of each field in SUMMARY_FIELDS (RIGID_SUMMARY_FIELDS for a
    rigid workload)."""
    vs_baseline: Estimate
    """Paired relative change of the average JCT against the baseline (−0.1: 10 % lower)."""
    is_baseline: bool = False
    idle: tuple[np.ndarray, ...] = ()
    """Per seed, the deliberate idle seconds inserted before each finished job (by job id)."""
    bsld_vs_baseline: Estimate | None = None
    """Paired relative change of the average bounded slowdown against the baseline (rigid
    workloads only; None otherwise)."""

    def to_dict(self, include_jct: bool = True) -> dict[str, Any]:
        """JSON-ready dict."""
        out: dict[str, Any] = {
            "is_baseline": self.is_baseline,
            "summary": {k: v.to_dict() for k, v in self.summary.items()},
            "avg_jct_vs_baseline": self.vs_baseline.to_dict(),
            "runs": [r.to_dict() for r in self.runs],
        }
        if self.bsld_vs_baseline is not None:
            out["avg_bsld_vs_baseline"] = self.bsld_vs_baseline.to_dict()
        if include_jct:
            out["jct"] = [a.tolist() for a in self.jct]
        return out


@dataclass(frozen=True, eq=False)
class Comparison:
    """The outcome of :func:`run_comparison`."""

    config: CompareConfig
    results: tuple[SchedulerResult, ...]
    num_executors: int
    setting: Setting | None = None
    """The resolved workload setting (TPC-H sizes, interarrival, executors, jobs)."""
    rigid: bool = False
    """Every job is rigid (:func:`is_rigid`): wait and bounded slowdown are summarised."""

    def __getitem__(self, name: str) -> SchedulerResult:
        for r in self.results:
            if r.name == name:
                return r
        raise KeyError(name)

    @property
    def baseline(self) -> SchedulerResult:
        return self[self.config.baseline_name]

    @property
    def best(self) -> SchedulerResult:
        """The scheduler with the lowest mean average JCT."""
        return min(self.results, key=lambda r: r.summary["avg_jct"].mean)

    def to_dict(self, include_jct: bool = True) -> dict[str, Any]:
        """JSON-ready dict (deterministic: no wall-clock data)."""
        return {
            "idlegate_version": __version__,
            "config": self.config.to_dict(),
            "num_executors": self.num_executors,
            "setting": None if self.setting is None else self.setting.to_dict(),
            "rigid": self.rigid,
            "best": self.best.name,
            "schedulers": {r.name: r.to_dict(include_jct) for r in self.results},
        }


def run_comparison(
    config: CompareConfig,
    progress: ProgressCallback | None = None,
    pool: TaskPool | None = None,
) -> Comparison:
    """Run every scheduler of `config` on every seed's workload and summarise.

    The runs go to `pool` (local processes or Ray, `open_runs_pool`) if given, else to
    ``config.jobs`` local processes; the result is the same either way.
    """
    check_names(config.workload, config.schedulers)
    workloads = {seed: build(config.workload, seed, config.options) for seed in config.seeds}
    tasks = [(workloads[seed], s, seed) for seed in config.seeds for s in config.schedulers]
    metrics: dict[tuple[str, int], RunMetrics] = {}
    jcts: dict[tuple[str, int], np.ndarray] = {}
    idles: dict[tuple[str, int], np.ndarray] = {}

    def report(done: int, total: int, task: tuple[Workload, SchedulerSpec, int]) -> None:
        if progress is not None:
            progress(done, total, task[1].title, task[2])

    for name, seed, m, jct, idle in run_tasks(
        _pool_run, tasks, config.jobs, report, lambda task: task, pool
    ):
        metrics[name, seed] = m
        jcts[name, seed] = jct
        idles[name, seed] = idle

    first = workloads[config.seeds[0]]
    rigid = is_rigid(first)
    summary_fields = RIGID_SUMMARY_FIELDS if rigid else SUMMARY_FIELDS
    base = config.baseline_name
    base_runs = [metrics[base, s] for s in config.seeds]
    results = []
    for name in config.labels:
        runs = tuple(metrics[name, s] for s in config.seeds)
        summary = {
            f: mean_ci([getattr(r, f) for r in runs], config.confidence) for f in summary_fields
        }
        rel = _paired(runs, base_runs, "avg_jct", config.confidence)
        results.append(
            SchedulerResult(
                name=name,
                runs=runs,
                jct=tuple(jcts[name, s] for s in config.seeds),
                summary=summary,
                vs_baseline=rel,
                is_baseline=name == base,
                idle=tuple(idles[name, s] for s in config.seeds),
                bsld_vs_baseline=(
                    _paired(runs, base_runs, "avg_bsld", config.confidence) if rigid else None
                ),
            )
        )
    setting = describe_setting(config.workload, config.options.to_kwargs(), first)
    return Comparison(config, tuple(results), first.num_executors, setting, rigid)


def _paired(
    runs: Sequence[RunMetrics], base: Sequence[RunMetrics], metric: str, confidence: float
) -> Estimate:
    """`metric`'s change against the baseline's runs on the same seeds."""
    values = [getattr(r, metric) for r in runs]
    return paired_relative_change(values, [getattr(r, metric) for r in base], confidence)
