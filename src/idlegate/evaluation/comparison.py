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

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Annotated, Any

import numpy as np
from pydantic import AfterValidator, BeforeValidator, ConfigDict, Field, model_validator

from idlegate import __version__
from idlegate.config import Config, Flag, flag_text
from idlegate.errors import IdlegateError, UnknownNameError, renamed
from idlegate.evaluation.pool import run_tasks
from idlegate.evaluation.setting import Setting, describe_setting
from idlegate.parallel import TaskPool
from idlegate.policy import SchedulerSpec, make_scheduler
from idlegate.policy.account import mean_shares
from idlegate.policy.account import shares as run_shares
from idlegate.policy.portfolio import PortfolioScheduler
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
from idlegate.sim.pool import identical_nodes
from idlegate.sim.protocol import PodsGate, Scheduler
from idlegate.sim.queue_files import check_named
from idlegate.sim.queue_metrics import jain, queue_figures, replay_alone
from idlegate.sim.queues import QUEUE_LABEL, check_cohort, read_queues
from idlegate.sim.reclaim_forecast import forecast_judge
from idlegate.sim.resources import MILLI, ResourceVector, check_requested
from idlegate.sim.workloads import build_workload, workload_kind

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


MAX_PODS = 100_000
"""The most pods -k gives a pool (the workloads' bound on ``num_executors``), so the most
nodes too: each holds one at least."""
PODS_A_NODE = 110
"""Kubernetes' default pods a node (kubelet's ``maxPods``), for the -k a number of nodes
suggests."""


class WorkloadOptions(Config):
    """Workload options a user gave; None means "not given" (the workload's own default).

    The fields are ``build_workload`` option names; only those given are passed on, and
    ``build_workload`` validates them against the chosen workload (an option the workload
    does not take, or a bad value, is an IdlegateError that names the valid options).
    """

    model_config = ConfigDict(title="the workload options")

    num_executors: Annotated[int | None, Flag("--executors", "-k")] = None
    """Executors in the cluster (K)."""
    interarrival: float | None = None
    """Mean seconds between job arrivals."""
    load: float | None = None
    """Target offered load (instead of --interarrival)."""
    num_jobs: Annotated[int | None, Flag("--jobs-count")] = None
    """Total jobs in the arrival sequence."""
    tpch_dir: Path | None = None
    """Directory of TPC-H traces (workloads tpch, mixed)."""
    alibaba_dir: Path | None = None
    """Directory of Alibaba's trace (workload alibaba)."""
    path: Annotated[Path | None, Flag("--file")] = None
    """Workload file (workload file)."""
    alpha: float | None = None
    """Fraction of synthetic jobs (workload mixed)."""
    resources: ResourceVector | None = None
    """The pool's resources beyond its executors (its pods), e.g.
    cpu=8,memory=32Gi,nvidia.com/gpu=2: a task starts only where its stage's requests fit
    (workflow files state them). Unset: a pods-only pool of -k/--executors."""
    nodes: int | None = Field(None, ge=1, le=MAX_PODS)
    """The cluster is this many nodes (at most -k, a pod a node), each of --resources
    (then one node's allocatable), sharing -k's pods: a task starts only where it fits one
    node, on the one it fills most (packing, as the operator's pool of nodes places one).
    Unset: the pool is one bin of --resources."""
    queues: Path | None = None
    """A YAML file of the pool's queues (docs/queues.md): each workflow waits in the queue
    it names (queueName, or its label idlegate.io/queue), else in the queue of its
    namespace, else in the default one. Unset: the workload's own (-w teams), else one
    queue."""
    extra: Annotated[dict[str, Any], Flag("--option", "-o")] = Field(default_factory=dict)
    """A workload option as KEY=VALUE (repeatable), e.g. size_distribution=pareto,
    burstiness=20 (options per workload: docs/workloads.md); one that has a flag of its
    own (num_jobs: --jobs-count, num_executors: -k, load: --load, ...) either way, once."""

    def to_kwargs(self) -> dict[str, Any]:
        """The options that were given, as ``build_workload`` keyword arguments; an
        option given both by its flag and by ``-o`` is an IdlegateError naming both."""
        given = self.model_dump(exclude=_NOT_THE_WORKLOADS, exclude_none=True)
        out = {k: str(v) if isinstance(v, Path) else v for k, v in given.items()}
        clash = sorted(set(out) & set(self.extra))
        if clash:
            name = clash[0]
            flag = flag_text(name, type(self).model_fields[name])
            raise IdlegateError(
                f"{flag} and -o {name} both give the workload option {name}; give it once "
                "(either way sets the same option)"
            )
        out.update({k: v for k, v in self.extra.items() if v is not None})
        return out

    def _flags(self) -> dict[str, str]:
        """Each workload option that has a flag of its own, and the flag."""
        fields = type(self).model_fields
        return {f: flag_text(f, info) for f, info in fields.items() if f not in _NOT_THE_WORKLOADS}

    def _unknown(self, exc: UnknownNameError, given: set[str]) -> IdlegateError:
        """The workload's "no such option" said as the command takes its options: every
        option by ``-o KEY=VALUE``, those with a flag of their own also by it (the name
        is the option's in the list whichever way others were given); the unknown one as
        the user gave it, a flag or ``-o``'s key."""
        flags = self._flags()
        takes = ", ".join(
            f"{name} (or {flags[name]})" if name in flags else name for name in exc.accepted
        )
        name = exc.unknown
        said = f"{flags[name]} (the option {name})" if name in given else repr(name)
        return IdlegateError(f"{exc.owner} has no option {said}; -o KEY=VALUE takes {takes}")

    @contextmanager
    def as_given(self) -> Iterator[None]:
        """An IdlegateError raised inside names each option given by a flag of its own as
        that flag (``--jobs-count``, ``-k/--executors``), not as the workload's option name
        (``num_jobs``, ``num_executors``): the sentence says what the user typed. One the
        workload needs but was not given is named by its flag too, with what to do
        (``--file: Field required (the workload needs it: give --file)``, not ``path``)."""
        given = self.model_dump(exclude=_NOT_THE_WORKLOADS, exclude_none=True)
        try:
            yield
        except UnknownNameError as exc:
            if not exc.owner.startswith("workload "):
                raise
            raise self._unknown(exc, set(given)) from None
        except IdlegateError as exc:
            # the pool's options are not the workload's: `resources` in a message is a
            # stage's field (stages[0].resources), never --resources
            fields = type(self).model_fields
            names = {f: flag_text(f, fields[f]) for f in given}
            missing = set(fields) - set(given) - set(self.extra) - _NOT_THE_WORKLOADS
            for f in sorted(missing):
                flag = flag_text(f, fields[f])
                names[f"{f}: Field required"] = (
                    f"{flag}: Field required (the workload needs it: give {flag.split('/')[-1]})"
                )
            raise renamed(exc, names) from None


_NOT_THE_WORKLOADS = {"extra", "resources", "nodes", "queues"}
"""WorkloadOptions' fields that are no option of the workload's (`to_kwargs`)."""


def parse_list(values: Any) -> Any:
    """Comma-separated and/or repeated texts as one tuple of non-empty items (other
    values, e.g. specs, stay as they are)."""
    out: list[Any] = []
    for v in [values] if isinstance(values, str) else values:
        out += [x.strip() for x in v.split(",") if x.strip()] if isinstance(v, str) else [v]
    return tuple(out)


def _some(specs: tuple[SchedulerSpec, ...]) -> tuple[SchedulerSpec, ...]:
    if not specs:
        raise ValueError("give at least one scheduler spec, comma-separated, e.g. fair,srpt")
    return specs


Schedulers = Annotated[
    tuple[SchedulerSpec, ...], BeforeValidator(parse_list), AfterValidator(_some)
]
"""Scheduler specs, as specs or texts (comma-separated and/or repeated); at least one."""


class CompareConfig(Config):
    """What to compare: schedulers × seeds on one workload.

    Each scheduler is a `SchedulerSpec` (a text is parsed); rows and the baseline go by
    its title, the label if it has one (`idlegate.policy.spec`).
    """

    model_config = ConfigDict(title="the comparison")

    workload: Annotated[str, Flag("-w")] = "tpch-like"
    """Workload: synthetic, tpch, tpch-like, mixed, bursty, k8s-batch, argo-shapes,
    airflow-shapes, alibaba, follow, push, recurring, shift, teams, shared, file, swf,
    lublin."""
    schedulers: Schedulers = Field(
        parse_list("fifo,fair,sjf-cp,weighted-fair"), validate_default=True
    )
    """Comma-separated scheduler specs (fair, analytic:BASE, learned:PATH.onnx, default,
    ...), each optionally LABEL=SPEC."""
    seeds: int = Field(5, ge=1)
    """Number of seeds (paired runs)."""
    first_seed: int = Field(0, ge=0)
    """First seed."""
    baseline: str | None = None
    """Reference of the % column (default "fair" if compared, else the first scheduler)."""
    options: WorkloadOptions = WorkloadOptions()
    """The workload's options."""
    jobs: Annotated[int, Flag("-j")] = Field(1, ge=1)
    """Worker processes (1: run in this process)."""
    confidence: float = Field(0.95, gt=0, lt=1)
    """Confidence level of the intervals."""

    @model_validator(mode="after")
    def _labels(self) -> CompareConfig:
        labels = self.labels
        dupes = sorted({s for s in labels if labels.count(s) > 1})
        if dupes:
            raise ValueError(f"scheduler listed twice: {', '.join(dupes)}")
        if self.baseline is not None and self.baseline not in labels:
            raise ValueError(
                f"baseline {self.baseline!r} is not among the compared schedulers "
                f"({', '.join(labels)})"
            )
        return self

    @property
    def seed_list(self) -> tuple[int, ...]:
        """The seeds, first_seed upwards."""
        return tuple(range(self.first_seed, self.first_seed + self.seeds))

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
            **(
                {}
                if self.options.resources is None
                else {"resources": self.options.resources.format()}
            ),
            **({} if self.options.nodes is None else {"nodes": self.options.nodes}),
            "schedulers": [s.format() for s in self.schedulers],
            "seeds": list(self.seed_list),
            "baseline": self.baseline_name,
            "confidence": self.confidence,
        }


# ---------------------------------------------------------------------------------------
# Running


def check_names(workload: str, schedulers: Iterable[SchedulerSpec] = ()) -> None:
    """Raise IdlegateError naming the known choices if the workload is unknown, or if a
    scheduler cannot be built (each is built once, before any run: a missing model file
    stops the comparison at once)."""
    workload_kind(workload)
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
    options = options or WorkloadOptions()
    kwargs = options.to_kwargs()  # (its sentence names the flags already)
    with options.as_given():
        built = build_workload(workload, seed, **kwargs)
    built = _with_queues(_pooled(built, options), options, workload)
    return built


def _with_queues(built: Workload, options: WorkloadOptions, workload: str) -> Workload:
    """`built` with the queues of the file of ``--queues`` (checked against its pool and
    the queues its workflows name, as lint checks them: `check_named`)."""
    path = options.queues
    if path is None:
        return built
    own = getattr(workload_kind(workload).config, "QUEUE_OPTIONS", ())
    if ignored := [o for o in own if o in options.extra]:
        said = " and ".join(f"-o {o}" for o in ignored)
        raise IdlegateError(
            f"{said} set{'s' * (len(ignored) == 1)} the {workload} workload's own queues, "
            f"which --queues {path} replaces; set them in that file (waitBound, "
            "preemption.reclaim, preemption.decide of each queue), or drop --queues"
        )
    queues = read_queues(path)
    pool = ResourceVector({**(built.resources or {}), "pods": built.num_executors * MILLI})
    check_cohort(queues, pool, where=str(path))
    source = options.path if options.path is not None else built.name
    # (a queue named, by spec.queueName or its label, that the file lacks: refused before
    # the run, naming the workflow and the file)
    named = ((j, j.queue or (j.labels or {}).get(QUEUE_LABEL)) for j in built.jobs)
    check_named(queues, str(path), ((f"{j.name!r} of {source}", q) for j, q in named))
    return replace(built, queues=queues)


def _pooled(built: Workload, options: WorkloadOptions) -> Workload:
    """`built` on the pool of ``--resources`` and ``--nodes``."""
    if options.resources is None:
        if options.nodes is not None:
            raise IdlegateError(
                "--nodes: give each node's resources with --resources (e.g. --nodes 3 "
                "--resources cpu=8,memory=32Gi)"
            )
        return built
    _check_requested(built, options.resources)
    if options.nodes is None:
        return replace(built, resources=options.resources)
    if options.nodes > built.num_executors:
        # (a suggestion the bound of -k refuses would be a second error: it stays within)
        suggested = min(PODS_A_NODE * options.nodes, MAX_PODS)
        raise IdlegateError(
            f"--nodes {options.nodes} share the pool's {built.num_executors} pods (-k), so "
            "a node would hold none; -k counts the pods of all the nodes together: give "
            f"at least {options.nodes} (up to {PODS_A_NODE} a node, at most {MAX_PODS}: "
            f"-k {suggested})"
        )
    nodes = identical_nodes(options.resources, options.nodes, built.num_executors)
    total = options.resources.restricted(n for n in options.resources if n != "pods")
    return replace(built, resources=total * options.nodes, nodes=nodes)


def _check_requested(workload: Workload, pool: ResourceVector) -> None:
    """`check_requested` on the stages of `workload`: a pool none of whose resources they
    request is a forgotten ``-o requests=true`` or a misnamed resource."""
    asked = {n for j in workload.jobs for d in j.dag.demands for n in d if d[n]}
    check_requested(
        pool,
        asked,
        workload.name,
        "give the workload requests (k8s-batch, argo-shapes, airflow-shapes: -o requests=true)",
    )


@dataclass(frozen=True, eq=False)
class RunOutcome:
    """One simulated run: its aggregates and its per-job metrics."""

    metrics: RunMetrics
    jobs: JobMetrics
    followed: dict[str, Any] | None = None
    """A self-tuning scheduler's account of what it followed and why
    (`PortfolioScheduler.account`); None for any other scheduler."""
    queues: dict[str, Any] | None = None
    """Per-queue figures and Jain's index (`idlegate.sim.queue_metrics`) of a workload
    with queues; None for one queue."""

    @property
    def shares(self) -> dict[str, float] | None:
        """The fraction of the run each candidate was followed (`policy.account.shares`);
        None for a scheduler that follows none."""
        return None if self.followed is None else run_shares(self.followed["time_followed"])


def _simulate(
    workload: Workload,
    scheduler: Scheduler,
    seed: int,
    spec: SchedulerSpec | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> RunOutcome:
    queued = bool(workload.queues)
    result = simulate(
        workload,
        scheduler,
        seed=seed,
        record_tasks=queued,
        progress=progress,
        judge=forecast_judge,
    )
    jm = job_metrics(result)
    followed = None
    inner = scheduler.scheduler if isinstance(scheduler, PodsGate) else scheduler
    if isinstance(inner, PortfolioScheduler):
        followed = inner.account(result.end_time)
    queues = None
    if result.queues is not None:
        # each queue's workflows replayed alone on its quota, under the same spec, for ρ
        solo = {} if spec is None else replay_alone(workload, lambda: make_scheduler(spec), seed)
        queues = {
            "queues": [f.to_dict() for f in queue_figures(workload, result, solo)],
            "jain": jain(result),
        }
        result.tasks = None
    return RunOutcome(run_metrics(result, jm), jm, followed, queues)


def run_one(
    workload: str,
    scheduler: SchedulerSpec | str,
    seed: int = 0,
    options: WorkloadOptions | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> RunOutcome:
    """Build `workload` for `seed` and simulate `scheduler` on it (built once);
    `progress(arrived, total)` at each arrival time (`sim.engine.simulate`)."""
    check_names(workload)
    built = make_scheduler(scheduler)
    spec = SchedulerSpec.of(scheduler)
    return _simulate(build(workload, seed, options), built, seed, spec, progress)


_PoolRun = tuple[
    str, int, RunMetrics, np.ndarray, np.ndarray, dict[str, float] | None, dict[str, Any] | None
]
"""What a worker sends back of a run: label, seed, metrics, JCTs, idle seconds, the
shares of the candidates followed (plain data, not the account's rounds), and the
per-queue figures of a workload with queues."""


def _pool_run(args: tuple[Workload, SchedulerSpec, int]) -> _PoolRun:
    workload, spec, seed = args
    out = _simulate(workload, make_scheduler(spec), seed, spec)
    jobs = out.jobs
    return spec.title, seed, out.metrics, jobs.jct, jobs.idle_inserted, out.shares, out.queues


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
    shares_per_seed: tuple[Mapping[str, float], ...] = ()
    """Per seed, the fraction of the run each candidate was followed (a self-tuning
    scheduler's, `RunOutcome.shares`); empty for any other scheduler."""
    queues_per_seed: tuple[Mapping[str, Any], ...] = ()
    """Per seed, the per-queue figures and Jain's index (`RunOutcome.queues`); empty for
    a pool of one queue."""

    @property
    def shares(self) -> dict[str, float] | None:
        """The mean over seeds of `shares_per_seed` (`policy.account.mean_shares`),
        largest first; None for a scheduler that follows none."""
        return mean_shares(self.shares_per_seed) if self.shares_per_seed else None

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
        if self.shares_per_seed:
            out["followed"] = self.shares
            out["followed_per_seed"] = [dict(f) for f in self.shares_per_seed]
        if self.queues_per_seed:
            out["queues_per_seed"] = [dict(q) for q in self.queues_per_seed]
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
    seeds = config.seed_list
    workloads = {seed: build(config.workload, seed, config.options) for seed in seeds}
    tasks = [(workloads[seed], s, seed) for seed in seeds for s in config.schedulers]
    metrics: dict[tuple[str, int], RunMetrics] = {}
    jcts: dict[tuple[str, int], np.ndarray] = {}
    idles: dict[tuple[str, int], np.ndarray] = {}
    followed: dict[tuple[str, int], dict[str, float]] = {}
    queues: dict[tuple[str, int], dict[str, Any]] = {}

    def report(done: int, total: int, task: tuple[Workload, SchedulerSpec, int]) -> None:
        if progress is not None:
            progress(done, total, task[1].title, task[2])

    for name, seed, m, jct, idle, share, queued in run_tasks(
        _pool_run, tasks, config.jobs, report, lambda task: task, pool
    ):
        metrics[name, seed] = m
        jcts[name, seed] = jct
        idles[name, seed] = idle
        if share is not None:
            followed[name, seed] = share
        if queued is not None:
            queues[name, seed] = queued

    first = workloads[seeds[0]]
    rigid = is_rigid(first)
    summary_fields = RIGID_SUMMARY_FIELDS if rigid else SUMMARY_FIELDS
    base = config.baseline_name
    base_runs = [metrics[base, s] for s in seeds]
    results = []
    for name in config.labels:
        runs = tuple(metrics[name, s] for s in seeds)
        summary = {
            f: mean_ci([getattr(r, f) for r in runs], config.confidence) for f in summary_fields
        }
        rel = _paired(runs, base_runs, "avg_jct", config.confidence)
        results.append(
            SchedulerResult(
                name=name,
                runs=runs,
                jct=tuple(jcts[name, s] for s in seeds),
                summary=summary,
                vs_baseline=rel,
                is_baseline=name == base,
                idle=tuple(idles[name, s] for s in seeds),
                bsld_vs_baseline=(
                    _paired(runs, base_runs, "avg_bsld", config.confidence) if rigid else None
                ),
                shares_per_seed=tuple(followed[name, s] for s in seeds if (name, s) in followed),
                queues_per_seed=tuple(queues[name, s] for s in seeds if (name, s) in queues),
            )
        )
    counts = [len(workloads[s].jobs) for s in seeds]
    setting = describe_setting(config.workload, config.options.to_kwargs(), first, counts)
    return Comparison(config, tuple(results), first.num_executors, setting, rigid)


def _paired(
    runs: Sequence[RunMetrics], base: Sequence[RunMetrics], metric: str, confidence: float
) -> Estimate:
    """`metric`'s change against the baseline's runs on the same seeds."""
    values = [getattr(r, metric) for r in runs]
    return paired_relative_change(values, [getattr(r, metric) for r in base], confidence)
