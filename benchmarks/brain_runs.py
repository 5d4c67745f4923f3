"""The runs of benchmarks/brain.py: its cases (workloads, seeds, fixed rows) and their
simulation in worker processes, one `Run` per (case, row, seed).

benchmarks/brain.py prints the figures and checks the targets; benchmarks/brain_prior.py
and benchmarks/brain_watch.py run the same cases. Nothing here prints but progress.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from idlegate.cli_run import DEMO_SCHEDULERS, DEMO_SEEDS
from idlegate.errors import IdlegateError
from idlegate.evaluation.comparison import WorkloadOptions, build
from idlegate.evaluation.suites import (
    DEMO_EXECUTORS,
    DEMO_LOAD,
    DEMO_STREAMED_JOBS,
    DEMO_WORKLOAD,
    select_cases,
    suite_cases,
)
from idlegate.flags import seed_range
from idlegate.parallel import LocalPool
from idlegate.policy import make_scheduler

try:
    from idlegate.policy.portfolio import (
        PortfolioScheduler,
        analytic_specs,
        candidate_specs,
        kind_of,
        portfolio_config,
    )
except ImportError:  # a checkout from before the portfolio scheduler: `run` says so
    PortfolioScheduler = None  # type: ignore[assignment,misc]
from idlegate.policy.spec import SchedulerSpec
from idlegate.progress import stderr_progress
from idlegate.sim.engine import simulate
from idlegate.sim.tpch import resolve_tpch_dir
from idlegate.sim.workloads import shift_phase, workload_config

BRAIN = "portfolio"
"""The scheduler under test unless `--brain` says otherwise."""
LONG_JOBS, QUICK_JOBS = 1000, 200
POD_HOURS = 24.0
"""Hours of `k8s-batch` arrivals at `LONG_JOBS` (scaled with the job count)."""
EXTRA = ("argo-shapes",)
"""Workloads the suite lacks, evaluated here at their defaults (`--workloads` or all)."""


@dataclass(frozen=True)
class Case:
    """A workload to evaluate: its build arguments, seeds and fixed rows (None: the
    portfolio's)."""

    key: str
    family: str
    workload: str
    options: WorkloadOptions
    seeds: tuple[int, ...]
    fixed: tuple[tuple[str, str], ...] | None = None
    """(label, spec) of the fixed rows; None: the portfolio's candidates."""


@dataclass(frozen=True)
class Task:
    case: Case
    label: str
    spec: str
    seed: int


@dataclass
class Run:
    """One simulated run: per job (id order) its JCT, arrival and phase; the brain's
    rounds as (round start, choice effective, candidate followed)."""

    jct: np.ndarray
    arrival: np.ndarray
    phase: np.ndarray | None
    rounds: list[tuple[float, float, str]]
    start: str | None
    end: float
    cpu: float
    choices: list[dict[str, Any]] = field(default_factory=list)
    """Every round's `portfolio.Choice` as a dict (its reason, best and scores)."""
    label: str = ""
    """The row it belongs to (its candidate's spec, or ``brain``)."""

    @property
    def followed(self) -> list[tuple[float, str]]:
        """(time, candidate) from which each was followed: the cold start's from 0, then
        each round's from when it took effect (`PortfolioScheduler.followed_from`; empty
        for a fixed candidate's run)."""
        if self.start is None:
            return []
        return [(0.0, self.start)] + [(effect, cand) for _, effect, cand in self.rounds]


@dataclass
class Results:
    """Per case key, label, seed: the run."""

    runs: dict[str, dict[str, dict[int, Run]]] = field(default_factory=dict)

    def add(self, task: Task, run: Run) -> None:
        self.runs.setdefault(task.case.key, {}).setdefault(task.label, {})[task.seed] = run

    def means(self, key: str, label: str, phase: int | None = None) -> list[float]:
        """Per seed (in seed order) the mean JCT of `label` (of `phase`'s jobs if given)."""
        out = []
        for _, run in sorted(self.runs[key][label].items()):
            jct = run.jct if phase is None else run.jct[run.phase == phase]
            out.append(float(np.mean(jct)))
        return out


# ---------------------------------------------------------------------------------------
# cases


def long_options(case_workload: str, options: WorkloadOptions, jobs: int) -> WorkloadOptions:
    """`options` with `jobs` workflows (24 h × jobs/1,000 of arrivals for `k8s-batch`)."""
    extra = dict(options.extra)
    if case_workload == "k8s-batch":
        gap = workload_config("k8s-batch", **options.to_kwargs()).mean_gap()
        extra["num_jobs"] = max(1, round(POD_HOURS * 3600 * jobs / LONG_JOBS / gap))
    elif "num_stream" in extra:
        extra["num_stream"] = jobs - int(extra.get("init", 1))
    else:
        extra["num_jobs"] = jobs
    return options.model_copy(update={"extra": extra})


def shift_case(tpch_dir: Path | None, jobs: int, seeds: tuple[int, ...]) -> Case:
    """TPC-H at 25 s (TPC-H-like at load 0.85 without traces), then k8s-batch pods."""
    first = ("tpch-like", "load=0.85")
    if tpch_found(tpch_dir):
        where = f"&tpch_dir={tpch_dir}" if tpch_dir is not None else ""
        first = ("tpch", f"interarrival=25{where}")
    extra = {
        "first": first[0],
        "first_options": first[1],
        "second": "k8s-batch",
        "second_options": "load=0.7",
        "first_jobs": jobs // 2,
        "second_jobs": jobs - jobs // 2,
    }
    return Case("shift", "shift", "shift", WorkloadOptions(num_executors=50, extra=extra), seeds)


def demo_case() -> Case:
    """`idlegate demo`'s setting, seeds and rows, but for its row ``default``: the brain
    (``--brain``) is its own row."""
    options = WorkloadOptions(
        num_executors=DEMO_EXECUTORS, load=DEMO_LOAD, extra={"num_stream": DEMO_STREAMED_JOBS}
    )
    specs = [s for s in map(SchedulerSpec.parse, DEMO_SCHEDULERS) if s.kind != "default"]
    rows = tuple((s.title, s.format(label=False)) for s in specs)
    return Case("demo", "demo", DEMO_WORKLOAD, options, tuple(range(DEMO_SEEDS)), rows)


def tpch_found(tpch_dir: Path | None) -> bool:
    try:
        return any(resolve_tpch_dir(tpch_dir).glob("*/q*.json"))
    except IdlegateError:
        return False


def cases_of(args: argparse.Namespace) -> tuple[list[Case], list[str]]:
    """The runnable cases and a line per skipped one."""
    seeds = tuple(seed_range(args))
    suite = suite_cases("full", args.tpch_dir)
    keys = {c.key for c in suite} | {c.family for c in suite} | {"shift", "demo", *EXTRA}
    wanted = args.workloads
    if wanted is not None:
        unknown = [w for w in wanted if w not in keys]
        if unknown:
            raise IdlegateError(
                f"unknown workload {unknown[0]!r}; choose from: {', '.join(sorted(keys))}"
            )
    named = [w for w in wanted if w in keys - {"shift", "demo", *EXTRA}] if wanted else None
    chosen = select_cases(suite, named) if named != [] else []
    cases, skipped = [], []
    for c in chosen:
        if c.skip_reason is not None:
            skipped.append(f"{c.key}: {c.skip_reason}")
            continue
        options = long_options(c.workload, c.options, args.jobs_count)
        cases.append(Case(c.key, c.family, c.workload, options, seeds))
    for key in EXTRA:
        if wanted is None or key in wanted:
            options = long_options(key, WorkloadOptions(), args.jobs_count)
            cases.append(Case(key, key, key, options, seeds))
    if wanted is None or "shift" in wanted:
        cases.append(shift_case(args.tpch_dir, args.jobs_count, seeds))
    if wanted is None or "demo" in wanted:
        cases.append(demo_case())
    return cases, skipped


# ---------------------------------------------------------------------------------------
# running


@lru_cache(maxsize=4)
def _built(workload: str, seed: int, options: str) -> Any:
    return build(workload, seed, WorkloadOptions.model_validate_json(options))


def run_task(task: Task) -> Run:
    """Simulate `task` (in a worker): per-job JCTs, arrivals, phases, and the brain's rounds."""
    case = task.case
    workload = _built(case.workload, task.seed, case.options.model_dump_json())
    scheduler = make_scheduler(task.spec)
    start = getattr(scheduler, "following", None)  # the portfolio's cold-start candidate
    started = time.process_time()
    result = simulate(workload, scheduler, seed=task.seed)
    cpu = time.process_time() - started
    if result.unfinished:
        raise IdlegateError(f"{task.spec} left {result.unfinished} jobs of {case.key} unfinished")
    records = sorted(result.records, key=lambda r: r.id)
    phase = None
    if case.workload == "shift":
        phase = np.array([shift_phase(r.name) for r in records])
    rounds = []
    if isinstance(scheduler, PortfolioScheduler):
        rounds = [(c.at, scheduler.took_effect(c), c.candidate) for c in scheduler.rounds]
    choices = [c.to_dict() for c in getattr(scheduler, "rounds", ())]
    return Run(
        np.array([r.jct for r in records]),
        np.array([r.arrival for r in records]),
        phase,
        rounds,
        start,
        result.end_time,
        cpu,
        choices,
        label=task.label,
    )


def fixed_rows(case: Case, brain: str) -> list[tuple[str, str]]:
    """(label, spec) of `case`'s fixed rows before the analytic rule."""
    if case.fixed is not None:
        return list(case.fixed)
    config, _ = portfolio_config(SchedulerSpec.parse(brain), {})
    return [(s, s) for s in candidate_specs(config)]


def analytic_rows(case: Case, brain: str, results: Results) -> list[tuple[str, str]]:
    """The analytic rule at each threshold over `case`'s best plain rule (portfolio cases)."""
    config, _ = portfolio_config(SchedulerSpec.parse(brain), {})
    if case.fixed is not None or "analytic" not in config.portfolio():
        return []
    plain = [lab for lab, _ in fixed_rows(case, brain) if kind_of(lab) == "rule" and "?" not in lab]
    base = min(plain, key=lambda lab: float(np.mean(results.means(case.key, lab))))
    return [(s, s) for s in analytic_specs(config, base)]


def run_stage(pool: LocalPool, tasks: list[Task], results: Results) -> None:
    """Run `tasks` in `pool`, with their progress on stderr (`idlegate.progress`); results
    into `results`."""
    with stderr_progress("simulating", len(tasks)) as bar:

        def progress(done: int, total: int, index: int) -> None:
            t = tasks[index]
            bar(done, total, f"{t.case.key} {t.label} seed {t.seed}")

        for task, run in zip(tasks, pool.map(run_task, tasks, progress=progress), strict=True):
            results.add(task, run)


def run_all(args: argparse.Namespace, cases: Sequence[Case]) -> Results:
    """The brain and the fixed rows first, then the analytic rule over each best rule."""
    results = Results()
    first = [Task(c, "brain", args.brain, s) for c in cases for s in c.seeds]  # slow first
    first += [
        Task(c, label, spec, s)
        for c in cases
        for label, spec in fixed_rows(c, args.brain)
        for s in c.seeds
    ]
    with LocalPool(args.jobs, preload=["idlegate.policy"]) as pool:
        run_stage(pool, first, results)
        more = [
            Task(c, label, spec, s)
            for c in cases
            for label, spec in analytic_rows(c, args.brain, results)
            for s in c.seeds
        ]
        run_stage(pool, more, results)
    return results
