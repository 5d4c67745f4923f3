"""Side-by-side comparison of schedulers on common random numbers, and its reports.

Every scheduler runs on the *same* arrival sequences: for each seed the workload is built
once with ``build_workload(name, seed, **options)`` and each scheduler is simulated on it
with ``simulate(workload, scheduler, seed=seed)``. Differences between schedulers are then
paired per seed (:func:`~idlegate.sim.metrics.paired_relative_change`), which cancels the
seed-to-seed variation of the workload itself.

Runs are independent; with ``jobs > 1`` they are spread over a process pool. Each run is
a pure function of (workload, scheduler, seed), so the results do not depend on ``jobs``.
"""

from __future__ import annotations

import json
import math
import multiprocessing
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from contextlib import contextmanager
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from idlegate import __version__
from idlegate.errors import IdlegateError
from idlegate.policy import make_scheduler
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
from idlegate.sim.workloads import WORKLOADS, build_workload

if TYPE_CHECKING:
    from rich.table import Table

__all__ = [
    "SUMMARY_FIELDS",
    "CompareConfig",
    "Comparison",
    "ProgressCallback",
    "RunOutcome",
    "SchedulerResult",
    "WorkloadOptions",
    "build",
    "check_names",
    "check_out_dir",
    "markdown_table",
    "parse_names",
    "plot_jct_cdf",
    "render_comparison_table",
    "render_run_table",
    "run_comparison",
    "run_one",
    "split_entry",
    "to_markdown",
    "write_json",
    "write_markdown",
    "write_reports",
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
    "mean_jobs_in_system",
    "idle_inserted",
    "lb_ratio",
)
"""RunMetrics fields summarised as mean ± CI over seeds."""


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


def split_entry(entry: str) -> tuple[str, str]:
    """A compared scheduler ``LABEL=SPEC`` or ``SPEC`` as (label, spec).

    SPEC is anything `idlegate.policy.make_scheduler` accepts ("fair", "analytic:fair",
    "learned:out/model.onnx"); the label names its row (default: the spec itself), e.g.
    ``"learned-no-idle=learned:out/no_idle.onnx"``.
    """
    label, sep, spec = entry.partition("=")
    if not sep or ":" in label or "/" in label:  # "=" inside a spec's path: no label
        return entry.strip(), entry.strip()
    label, spec = label.strip(), spec.strip()
    if not label or not spec:
        raise IdlegateError(f"scheduler {entry!r}: write LABEL=SPEC, e.g. learned=learned:m.onnx")
    return label, spec


@dataclass(frozen=True)
class CompareConfig:
    """What to compare: schedulers × seeds on one workload.

    Each scheduler is a spec or ``LABEL=SPEC`` (:func:`split_entry`); rows and the
    baseline go by label.
    """

    workload: str
    schedulers: tuple[str, ...]
    seeds: tuple[int, ...] = (0, 1, 2)
    baseline: str | None = None
    """Scheduler the % column is relative to; None: "fair" if compared, else the first."""
    options: WorkloadOptions = field(default_factory=WorkloadOptions)
    jobs: int = 1
    """Worker processes (1: run in this process)."""
    confidence: float = 0.95

    def __post_init__(self) -> None:
        if not self.schedulers:
            raise IdlegateError("no scheduler to compare; pass at least one name")
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
        return tuple(split_entry(s)[0] for s in self.schedulers)

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
            "schedulers": list(self.schedulers),
            "seeds": list(self.seeds),
            "baseline": self.baseline_name,
            "confidence": self.confidence,
        }


# ---------------------------------------------------------------------------------------
# Running


def check_names(workload: str, schedulers: Iterable[str]) -> None:
    """Raise IdlegateError naming the known choices if a workload or scheduler is unknown."""
    if workload not in WORKLOADS:
        raise IdlegateError(f"unknown workload {workload!r}; choose one of: {', '.join(WORKLOADS)}")
    for s in schedulers:
        make_scheduler(split_entry(s)[1])  # raises IdlegateError naming the valid schedulers


def build(workload: str, seed: int, options: WorkloadOptions | None = None) -> Workload:
    """Build the arrival sequence of `workload` for `seed` (only the given options are passed)."""
    kwargs = (options or WorkloadOptions()).to_kwargs()
    return build_workload(workload, seed, **kwargs)


@dataclass(frozen=True, eq=False)
class RunOutcome:
    """One simulated run: its aggregates and its per-job metrics."""

    metrics: RunMetrics
    jobs: JobMetrics


def _simulate(workload: Workload, scheduler: str, seed: int) -> RunOutcome:
    result = simulate(workload, make_scheduler(split_entry(scheduler)[1]), seed=seed)
    jm = job_metrics(result)
    return RunOutcome(run_metrics(result, jm), jm)


def run_one(
    workload: str, scheduler: str, seed: int = 0, options: WorkloadOptions | None = None
) -> RunOutcome:
    """Build `workload` for `seed` and simulate `scheduler` on it."""
    check_names(workload, [scheduler])
    return _simulate(build(workload, seed, options), scheduler, seed)


def _pool_run(
    args: tuple[Workload, str, int],
) -> tuple[str, int, RunMetrics, np.ndarray, np.ndarray]:
    workload, scheduler, seed = args
    out = _simulate(workload, scheduler, seed)
    return scheduler, seed, out.metrics, out.jobs.jct, out.jobs.idle_inserted


@dataclass(frozen=True, eq=False)
class SchedulerResult:
    """One scheduler's runs (in seed order) and their summaries over seeds."""

    name: str
    runs: tuple[RunMetrics, ...]
    jct: tuple[np.ndarray, ...]
    """Per seed, the JCT of every finished job (by job id)."""
    summary: Mapping[str, Estimate]
    """Mean ± CI over seeds of each field in SUMMARY_FIELDS."""
    vs_baseline: Estimate
    """Paired relative change of the average JCT against the baseline (−0.1: 10 % lower)."""
    is_baseline: bool = False
    idle: tuple[np.ndarray, ...] = ()
    """Per seed, the deliberate idle seconds inserted before each finished job (by job id)."""

    def to_dict(self, include_jct: bool = True) -> dict[str, Any]:
        """JSON-ready dict."""
        out: dict[str, Any] = {
            "is_baseline": self.is_baseline,
            "summary": {k: v.to_dict() for k, v in self.summary.items()},
            "avg_jct_vs_baseline": self.vs_baseline.to_dict(),
            "runs": [r.to_dict() for r in self.runs],
        }
        if include_jct:
            out["jct"] = [a.tolist() for a in self.jct]
        return out


@dataclass(frozen=True, eq=False)
class Comparison:
    """The outcome of :func:`run_comparison`."""

    config: CompareConfig
    results: tuple[SchedulerResult, ...]
    num_executors: int

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
            "best": self.best.name,
            "schedulers": {r.name: r.to_dict(include_jct) for r in self.results},
        }


def run_comparison(config: CompareConfig, progress: ProgressCallback | None = None) -> Comparison:
    """Run every scheduler of `config` on every seed's workload and summarise."""
    check_names(config.workload, config.schedulers)
    workloads = {seed: build(config.workload, seed, config.options) for seed in config.seeds}
    tasks = [(workloads[seed], s, seed) for seed in config.seeds for s in config.schedulers]
    total = len(tasks)
    metrics: dict[tuple[str, int], RunMetrics] = {}
    jcts: dict[tuple[str, int], np.ndarray] = {}
    idles: dict[tuple[str, int], np.ndarray] = {}

    def collect(item: tuple[str, int, RunMetrics, np.ndarray, np.ndarray]) -> None:
        name, seed, m, jct, idle = item
        metrics[name, seed] = m
        jcts[name, seed] = jct
        idles[name, seed] = idle
        if progress is not None:
            progress(len(metrics), total, split_entry(name)[0], seed)

    workers = min(config.jobs, total)
    if workers <= 1:
        for task in tasks:
            collect(_pool_run(task))
    else:
        with ProcessPoolExecutor(workers, mp_context=_mp_context()) as pool:
            futures = [pool.submit(_pool_run, t) for t in tasks]
            for fut in as_completed(futures):
                collect(fut.result())

    base = config.baseline_name
    base_entry = config.schedulers[config.labels.index(base)]
    base_avg = [metrics[base_entry, s].avg_jct for s in config.seeds]
    results = []
    for entry, name in zip(config.schedulers, config.labels, strict=True):
        runs = tuple(metrics[entry, s] for s in config.seeds)
        summary = {
            f: mean_ci([getattr(r, f) for r in runs], config.confidence) for f in SUMMARY_FIELDS
        }
        rel = paired_relative_change([r.avg_jct for r in runs], base_avg, config.confidence)
        results.append(
            SchedulerResult(
                name=name,
                runs=runs,
                jct=tuple(jcts[entry, s] for s in config.seeds),
                summary=summary,
                vs_baseline=rel,
                is_baseline=name == base,
                idle=tuple(idles[entry, s] for s in config.seeds),
            )
        )
    k = workloads[config.seeds[0]].num_executors
    return Comparison(config, tuple(results), k)


def _mp_context() -> multiprocessing.context.BaseContext:
    # forkserver: no fork of a process that has threads (a progress bar refreshes in one);
    # preloading the package makes each worker start in milliseconds.
    methods = multiprocessing.get_all_start_methods()
    if "forkserver" in methods:
        ctx = multiprocessing.get_context("forkserver")
        ctx.set_forkserver_preload(["idlegate.compare"])
        return ctx
    return multiprocessing.get_context("spawn")


# ---------------------------------------------------------------------------------------
# Reports


def _fmt(value: float, digits: int = 1) -> str:
    if not math.isfinite(value):
        return "n/a"
    return f"{value:,.{digits}f}"


def _fmt_est(est: Estimate, digits: int = 1, scale: float = 1.0) -> str:
    m = _fmt(est.mean * scale, digits)
    if est.n < 2 or not math.isfinite(est.half_width):
        return m
    return f"{m} ± {_fmt(est.half_width * scale, digits)}"


def _fmt_rel(r: SchedulerResult) -> str:
    if r.is_baseline:
        return "baseline"
    est = r.vs_baseline
    sign = "+" if est.mean > 0 else ""
    text = f"{sign}{est.mean * 100:.1f} %"
    if est.n >= 2 and math.isfinite(est.half_width):
        text += f" ± {est.half_width * 100:.1f}"
    return text


_COLUMNS: tuple[tuple[str, str, int, float], ...] = (
    ("avg JCT (s)", "avg_jct", 1, 1.0),
    ("p95 JCT (s)", "p95_jct", 1, 1.0),
    ("makespan (s)", "makespan", 0, 1.0),
    ("utilisation (%)", "utilisation", 1, 100.0),
    ("JCT / bound", "lb_ratio", 2, 1.0),
)


def _rows(cmp: Comparison) -> list[list[str]]:
    rows = []
    for r in cmp.results:
        cells = [r.name]
        cells += [_fmt_est(r.summary[f], d, s) for _, f, d, s in _COLUMNS]
        cells.append(_fmt_rel(r))
        rows.append(cells)
    return rows


def _headers(cmp: Comparison) -> list[str]:
    return ["scheduler", *(h for h, *_ in _COLUMNS), f"avg JCT vs {cmp.config.baseline_name}"]


def _caption(cmp: Comparison) -> str:
    c = cmp.config
    pct = round(c.confidence * 100)
    return (
        f"workload {c.workload}, {cmp.num_executors} executors, {len(c.seeds)} seed(s) "
        f"(same arrivals for every scheduler); mean ± {pct} % CI over seeds, "
        "% vs baseline paired per seed"
    )


def render_comparison_table(cmp: Comparison) -> Table:
    """A rich Table: one row per scheduler, mean ± CI, the best average JCT in bold."""
    from rich.table import Table

    table = Table(title="Scheduler comparison", caption=_caption(cmp))
    for i, h in enumerate(_headers(cmp)):
        table.add_column(h, justify="left" if i == 0 else "right", no_wrap=i == 0)
    best = cmp.best.name
    for r, cells in zip(cmp.results, _rows(cmp), strict=True):
        table.add_row(*cells, style="bold green" if r.name == best else None)
    return table


def render_run_table(m: RunMetrics) -> Table:
    """A rich Table of one run's metrics."""
    from rich.table import Table

    table = Table(
        title=f"{m.scheduler} on {m.workload}",
        caption=f"seed {m.seed}, {m.num_executors} executors",
    )
    table.add_column("metric")
    table.add_column("value", justify="right")
    rows = [
        ("jobs finished", str(m.jobs)),
        ("jobs unfinished", str(m.unfinished)),
        ("average JCT (s)", _fmt(m.avg_jct, 2)),
        ("median JCT (s)", _fmt(m.median_jct, 2)),
        ("p95 JCT (s)", _fmt(m.p95_jct, 2)),
        ("p99 JCT (s)", _fmt(m.p99_jct, 2)),
        ("max JCT (s)", _fmt(m.max_jct, 2)),
        ("makespan (s)", _fmt(m.makespan, 2)),
        ("utilisation (%)", _fmt(m.utilisation * 100, 1)),
        ("mean jobs in system", _fmt(m.mean_jobs_in_system, 2)),
        ("idle inserted (s)", _fmt(m.idle_inserted, 2)),
        ("avg JCT lower bound (s)", _fmt(m.lb_avg_jct, 2)),
        ("avg JCT / lower bound", _fmt(m.lb_ratio, 3)),
        ("scheduling decisions", str(m.decisions)),
    ]
    for name, value in rows:
        table.add_row(name, value)
    return table


def markdown_table(cmp: Comparison) -> str:
    """The comparison table alone as GitHub markdown lines (the best row in bold)."""
    headers = _headers(cmp)
    lines = [
        "| " + " | ".join(headers) + " |",
        "|" + "|".join([":---", *["---:"] * (len(headers) - 1)]) + "|",
    ]
    best = cmp.best.name
    for r, cells in zip(cmp.results, _rows(cmp), strict=True):
        if r.name == best:
            cells = [f"**{c}**" for c in cells]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def to_markdown(cmp: Comparison) -> str:
    """The comparison table as GitHub markdown, with a one-line caption."""
    lines = [
        f"# Scheduler comparison: {cmp.config.workload}",
        "",
        _caption(cmp) + ".",
        "",
        markdown_table(cmp),
        "",
    ]
    return "\n".join(lines)


def write_file(path: str | Path, write: Callable[[Path], object]) -> Path:
    """Create `path`'s directory, call `write(path)`; OSError becomes an IdlegateError."""
    p = Path(path)
    try:
        p.parent.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise IdlegateError(f"cannot create directory {p.parent}: {e.strerror}") from e
    try:
        write(p)
    except OSError as e:
        raise IdlegateError(f"cannot write {p}: {e.strerror}") from e
    return p


def write_text(path: str | Path, text: str) -> Path:
    """Write `text` (UTF-8) to `path` through `write_file`."""
    return write_file(path, lambda p: p.write_text(text, encoding="utf-8"))


def write_json(cmp: Comparison, path: str | Path, include_jct: bool = True) -> Path:
    """Write :meth:`Comparison.to_dict` as indented JSON (NaN written as null)."""
    return write_text(path, json.dumps(cmp.to_dict(include_jct), indent=2) + "\n")


def write_markdown(cmp: Comparison, path: str | Path) -> Path:
    """Write :func:`to_markdown`."""
    return write_text(path, to_markdown(cmp))


def plot_jct_cdf(cmp: Comparison, path: str | Path, title: str | None = None) -> Path:
    """Plot the JCT CDF, pooled over seeds, one line per scheduler, as a PNG at `path`.

    `title` replaces the default one (workload, executors, seeds).
    """
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    fig = Figure(figsize=(7, 4.5), dpi=120)
    ax = fig.add_subplot()
    pooled = [np.sort(np.concatenate(r.jct)) if r.jct else np.empty(0) for r in cmp.results]
    positive = np.concatenate([a[a > 0] for a in pooled]) if pooled else np.empty(0)
    log_x = positive.size > 0 and positive.max() / positive.min() > 100
    for r, xs in zip(cmp.results, pooled, strict=True):
        if xs.size == 0:
            continue
        ys = np.arange(1, xs.size + 1) / xs.size
        label = f"{r.name} (avg {r.summary['avg_jct'].mean:,.0f} s)"
        ax.step(xs, ys, where="post", label=label, linewidth=1.6)
    if log_x:
        ax.set_xscale("log")
    ax.set_xlabel("job completion time (s)" + (", log scale" if log_x else ""))
    ax.set_ylabel("fraction of jobs")
    ax.set_ylim(0, 1.0)
    ax.grid(True, alpha=0.3)
    ax.set_title(
        title
        or f"JCT CDF — {cmp.config.workload}, {cmp.num_executors} executors, "
        f"{len(cmp.config.seeds)} seed(s) pooled"
    )
    ax.legend(loc="lower right", fontsize="small")
    fig.tight_layout()
    return write_file(path, lambda p: fig.savefig(p, format="png"))


@contextmanager
def stderr_progress(
    description: str, total: int | None
) -> Iterator[Callable[[int, int, str], None]]:
    """A rich progress bar on stderr (shown only on a terminal); yields `update(done, total, what)`."""
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
    )

    err = Console(stderr=True)
    with Progress(
        TextColumn("[progress.description]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TextColumn("{task.fields[last]}"),
        console=err,
        transient=True,
        disable=not err.is_terminal,
    ) as bar:
        task = bar.add_task(description, total=total, last="")

        def update(done: int, total: int, what: str) -> None:
            bar.update(task, completed=done, total=total, last=what)

        yield update


def check_out_dir(out_dir: str | Path) -> Path:
    """Raise IdlegateError unless `out_dir` is a directory or can become one."""
    out = Path(out_dir)
    for p in (out, *out.parents):
        if p.exists():
            if not p.is_dir():
                raise IdlegateError(f"cannot write reports to {out}: {p} is not a directory")
            return out
    return out


def write_reports(cmp: Comparison, out_dir: str | Path) -> dict[str, Path]:
    """Write compare.json, compare.md and jct_cdf.png into `out_dir` (created if needed)."""
    out = check_out_dir(out_dir)
    return {
        "json": write_json(cmp, out / "compare.json"),
        "markdown": write_markdown(cmp, out / "compare.md"),
        "cdf": plot_jct_cdf(cmp, out / "jct_cdf.png"),
    }


def parse_names(text: str | Sequence[str]) -> tuple[str, ...]:
    """Split a comma-separated list of names ("fifo,fair, sjf-cp")."""
    items = text.split(",") if isinstance(text, str) else list(text)
    names = tuple(s.strip() for s in items if s.strip())
    if not names:
        raise IdlegateError("no scheduler given; pass e.g. --schedulers fifo,fair")
    return names
