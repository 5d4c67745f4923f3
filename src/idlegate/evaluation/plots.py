"""The PNG plots: the JCT CDF of a comparison, the Fig. 6 idle sweep, the training curve.

matplotlib (the ``plots`` extra) is imported, with the Agg backend, only when a plot is
drawn. Without it a plot is skipped with a one-line note on stderr and its function
returns None: the reports around it are still written.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path
from typing import Any

import numpy as np

from idlegate.evaluation.comparison import Comparison
from idlegate.evaluation.files import write_file
from idlegate.evaluation.sweep import SweepResult
from idlegate.evaluation.training_log import TrainingCurve
from idlegate.sim.metrics import Estimate

__all__ = ["plot_idle_sweep", "plot_jct_by_hour", "plot_jct_cdf", "plot_training_curve"]


def plot_jct_cdf(cmp: Comparison, path: str | Path, title: str | None = None) -> Path | None:
    """Plot the JCT CDF, pooled over seeds, one line per scheduler, as a PNG at `path`.

    `title` replaces the default one (workload, executors, seeds).
    """
    figure = _figure(Path(path), 1, 1, (7, 4.5))
    if figure is None:
        return None
    fig, axes = figure
    ax = axes[0][0]
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
        f"{cmp.config.seeds} seed(s) pooled"
    )
    ax.legend(loc="lower right", fontsize="small")
    fig.tight_layout()
    return _save(fig, Path(path))


def plot_jct_by_hour(
    cmp: Comparison,
    arrivals: np.ndarray,
    path: str | Path,
    recorded: tuple[np.ndarray, np.ndarray] | None = None,
    title: str | None = None,
) -> Path | None:
    """The average JCT of the jobs arriving in each hour, pooled over seeds, one line per
    scheduler (and the `recorded` (arrival, JCT) pairs as a dashed line), as a PNG.

    `arrivals` are the jobs' arrival times in seconds, by job id: every run of `cmp` must
    have finished every job (a replay without a time limit does).
    """
    figure = _figure(Path(path), 1, 1, (8, 4.5))
    if figure is None:
        return None
    fig, axes = figure
    ax = axes[0][0]
    hours = np.floor(np.asarray(arrivals, dtype=float) / 3600).astype(int)
    for r in cmp.results:
        jct = np.concatenate(r.jct) if r.jct else np.empty(0)
        if jct.size != hours.size * len(r.jct):
            continue  # a run left jobs unfinished: its JCTs do not line up with arrivals
        xs, ys = _hourly(np.tile(hours, len(r.jct)), jct)
        ax.plot(xs, ys, marker="o", markersize=3, linewidth=1.3, label=r.name)
    if recorded is not None:
        xs, ys = _hourly(np.floor(recorded[0] / 3600).astype(int), recorded[1])
        ax.plot(xs, ys, "k--", marker="x", linewidth=1.3, label="recorded")
    ax.set_xlabel("hour of arrival (from the first reported arrival)")
    ax.set_ylabel("average JCT (s)")
    ax.set_ylim(bottom=0)
    ax.grid(True, alpha=0.3)
    ax.set_title(title or f"Average JCT by hour of arrival — {cmp.config.workload}")
    ax.legend(fontsize="small", ncol=2)
    fig.tight_layout()
    return _save(fig, Path(path))


def _hourly(hours: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(hours that have values, the mean value of each)."""
    present = np.unique(hours)
    return present, np.asarray([values[hours == h].mean() for h in present])


def _figure(path: Path, rows: int, cols: int, size: tuple[float, float]) -> Any | None:
    """(figure, rows x cols axes) for `path`, or None once the user is told that plotting
    needs the plots extra."""
    try:
        import matplotlib
    except ImportError:
        print(
            f"skipped {path}: plots need matplotlib (pip install 'idlegate[plots]')",
            file=sys.stderr,
        )
        return None
    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    fig = Figure(figsize=size, dpi=120)
    return fig, fig.subplots(rows, cols, squeeze=False)


def _save(fig: Any, path: Path) -> Path:
    return write_file(path, lambda p: fig.savefig(p, format="png"))


def _errorbar(ax: Any, xs: list[float], ests: list[Estimate], label: str) -> None:
    ys = [e.mean for e in ests]
    err = [e.half_width if math.isfinite(e.half_width) else 0.0 for e in ests]
    ax.errorbar(xs, ys, yerr=err, marker="o", capsize=3, linewidth=1.5, label=label)


def plot_idle_sweep(sweep: SweepResult, path: str | Path) -> Path | None:
    """The Fig. 6 plot: idle per long job (top) and per decision (bottom) against the
    arrival rate (left) and the long-job length (right), one line per scheduler."""
    figure = _figure(Path(path), 2, 2, (10, 7))
    if figure is None:
        return None
    fig, axes = figure
    columns = (
        ("rate", "arrival rate (jobs/s)"),
        ("long_seconds", f"long-job work (executor-s), load {sweep.config.long_load}"),
    )
    rows = (
        ("idle_per_long_job", "idle inserted per long job (s)"),
        ("idle_per_decision", "idle inserted per decision (s)"),
    )
    for j, (param, xlabel) in enumerate(columns):
        for i, (stat, ylabel) in enumerate(rows):
            ax = axes[i][j]
            for name in sweep.schedulers:
                pts = sweep.series(name, param)
                if pts:
                    _errorbar(ax, [p.value for p in pts], [getattr(p, stat) for p in pts], name)
            ax.set_xlabel(xlabel)
            ax.set_ylabel(ylabel)
            ax.grid(True, alpha=0.3)
            ax.set_ylim(bottom=0)
    axes[0][0].legend(fontsize="small")
    fig.suptitle("Idle slots inserted on the synthetic two-type workload (mean ± 95 % CI)")
    fig.tight_layout()
    return _save(fig, Path(path))


def plot_training_curve(curve: TrainingCurve, path: str | Path) -> Path | None:
    """Validation average JCT against iteration, with the reference heuristics as lines."""
    figure = _figure(Path(path), 1, 1, (7, 4.5))
    if figure is None:
        return None
    fig, axes = figure
    ax = axes[0][0]
    ax.plot(curve.iterations, curve.values, marker="o", linewidth=1.6, label="learned (greedy)")
    for i, (name, value) in enumerate(sorted(curve.references.items())):
        ax.axhline(value, linestyle="--", linewidth=1.0, color=f"C{i + 1}", label=name)
    ax.set_xlabel(curve.iteration_column)
    ax.set_ylabel(f"validation average JCT (s) [{curve.value_column}]")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize="small")
    ax.set_title(f"Training curve — {curve.path.name}")
    fig.tight_layout()
    return _save(fig, Path(path))
