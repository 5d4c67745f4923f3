"""The reports of `idlegate compare`: markdown table, JSON, and the files in ``--out``."""

from __future__ import annotations

import json
import math
from pathlib import Path

from idlegate.evaluation.comparison import Comparison, SchedulerResult
from idlegate.evaluation.files import check_out_dir, write_text
from idlegate.evaluation.plots import plot_jct_cdf
from idlegate.policy.account import followed_line
from idlegate.sim.metrics import Estimate

__all__ = [
    "caption",
    "fmt_change",
    "fmt_estimate",
    "fmt_number",
    "fmt_relative",
    "followed_lines",
    "followed_markdown",
    "markdown_table",
    "source_line",
    "table_headers",
    "table_rows",
    "to_markdown",
    "write_json",
    "write_markdown",
    "write_reports",
]


def fmt_number(value: float, digits: int = 1) -> str:
    """`value` with thousands separators and `digits` decimals; "n/a" if not finite."""
    if not math.isfinite(value):
        return "n/a"
    return f"{value:,.{digits}f}"


def fmt_estimate(est: Estimate, digits: int = 1, scale: float = 1.0) -> str:
    """ "mean ± half-width" of `est` × `scale` (the mean alone for fewer than 2 samples)."""
    m = fmt_number(est.mean * scale, digits)
    if est.n < 2 or not math.isfinite(est.half_width):
        return m
    return f"{m} ± {fmt_number(est.half_width * scale, digits)}"


def fmt_relative(r: SchedulerResult, est: Estimate | None = None) -> str:
    """The % column: `r`'s paired change against the baseline, or "baseline".

    `est` is the change to show (default: the average JCT's, ``r.vs_baseline``)."""
    if r.is_baseline:
        return "baseline"
    return fmt_change(r.vs_baseline if est is None else est)


def fmt_change(est: Estimate) -> str:
    """A paired relative change as the % column writes it: "-8.2 % ± 2.6"."""
    sign = "+" if est.mean > 0 else ""
    text = f"{sign}{est.mean * 100:.1f} %"
    if est.n >= 2 and math.isfinite(est.half_width):
        text += f" ± {est.half_width * 100:.1f}"
    return text


_Column = tuple[str, str, int, float]
"""(header, summary field, decimals, scale) of one table column."""

_COLUMNS: tuple[_Column, ...] = (
    ("avg JCT (s)", "avg_jct", 1, 1.0),
    ("p95 JCT (s)", "p95_jct", 1, 1.0),
    ("makespan (s)", "makespan", 0, 1.0),
    ("utilisation (%)", "utilisation", 1, 100.0),
    ("overhead (%)", "overhead", 1, 100.0),
    ("JCT / bound", "lb_ratio", 2, 1.0),
)

# Rigid jobs are judged by wait and bounded slowdown (SchedInspector, Deep Back-Filling);
# the moving delay is 0 and the DAG lower bound says little about a gang's wait, so
# overhead and JCT / bound give way to them.
_RIGID_COLUMNS: tuple[_Column, ...] = (
    ("avg wait (s)", "avg_wait", 0, 1.0),
    ("avg bsld", "avg_bsld", 1, 1.0),
    ("max bsld", "max_bsld", 1, 1.0),
    ("utilisation (%)", "utilisation", 1, 100.0),
    ("avg JCT (s)", "avg_jct", 0, 1.0),
    ("makespan (s)", "makespan", 0, 1.0),
)


def _columns(cmp: Comparison) -> tuple[_Column, ...]:
    return _RIGID_COLUMNS if cmp.rigid else _COLUMNS


def _resources(cmp: Comparison) -> list[str]:
    """The resources beyond pods the runs' pools count, in order (none: pods-only)."""
    names: dict[str, None] = {}
    for r in cmp.results:
        for run in r.runs:
            names.update(dict.fromkeys(run.utilisation_by_resource or ()))
    return list(names)


def _gated(cmp: Comparison) -> bool:
    """Some row ran behind a pods-only gate (`idlegate.sim.gate`): it has pods pended."""
    return any(run.pods_pended is not None for r in cmp.results for run in r.runs)


def _preempting(cmp: Comparison) -> bool:
    """Some run stopped tasks to give quota back (a queue's `preemption`): work was lost."""
    return any(run.preempted for r in cmp.results for run in r.runs)


def _mean(values: list[float], digits: int, scale: float = 1.0) -> str:
    """The mean over seeds, "–" for a row without the value."""
    return fmt_number(sum(values) / len(values) * scale, digits) if values else "–"


def _pool_cells(cmp: Comparison, r: SchedulerResult) -> list[str]:
    """A resource pool's cells of row `r`: each resource's utilisation (mean over seeds)
    and, behind a pods-only gate, the pods pended per run; where tasks were preempted, the
    share of the executor-seconds run that they lost."""
    cells = [
        _mean([(u.utilisation_by_resource or {}).get(n, 0.0) for u in r.runs], 1, 100.0)
        for n in _resources(cmp)
    ]
    if _gated(cmp):
        cells.append(_mean([u.pods_pended for u in r.runs if u.pods_pended is not None], 0))
    if _preempting(cmp):
        cells.append(_mean([u.lost_share for u in r.runs], 2, 100.0))
    return cells


def table_rows(cmp: Comparison) -> list[list[str]]:
    """The comparison table's cells, one row per scheduler (rich and markdown share them).

    The % column is the paired change of the average bounded slowdown for a rigid
    workload, of the average JCT otherwise. On a resource pool each resource's
    utilisation follows the utilisation of the executors (`_pool_cells`)."""
    rows = []
    for r in cmp.results:
        cells = [r.name]
        cells += [fmt_estimate(r.summary[f], d, s) for _, f, d, s in _columns(cmp)]
        cells += _pool_cells(cmp, r)
        cells.append(fmt_relative(r, r.bsld_vs_baseline if cmp.rigid else None))
        rows.append(cells)
    return rows


def table_headers(cmp: Comparison) -> list[str]:
    """The comparison table's column headers."""
    relative = "avg bsld" if cmp.rigid else "avg JCT"
    return [
        "scheduler",
        *(h for h, *_ in _columns(cmp)),
        *(f"{n} (%)" for n in _resources(cmp)),
        *(["pods pended"] if _gated(cmp) else []),
        *(["work lost (%)"] if _preempting(cmp) else []),
        f"{relative} vs {cmp.config.baseline_name}",
    ]


def caption(cmp: Comparison) -> str:
    """One sentence saying what the table measured and how to read it."""
    c = cmp.config
    pct = round(c.confidence * 100)
    setting = cmp.setting.summary() if cmp.setting else f"{cmp.num_executors} executors"
    head = (
        f"workload {c.workload}, {setting}, {c.seeds} seed(s) "
        f"(same arrivals for every scheduler); mean ± {pct} % CI over seeds, "
        "% vs baseline paired per seed; "
    )
    if cmp.rigid:
        return head + (
            "rigid jobs: wait = start - arrival, bsld = max(1, (wait + run) / max(run, 10)), "
            "max bsld the mean over seeds of each run's largest; utilisation counts running "
            "tasks; the highlighted row has the lowest avg JCT, i.e. the lowest avg wait "
            "(run times do not depend on the scheduler)"
        )
    pool = ""
    if _resources(cmp):
        pool = "; a resource's % is the share of it that running tasks requested (mean over seeds)"
    if _gated(cmp):
        pool += (
            ", pods pended the pods per run a pods-only gate released that did not fit the cluster"
        )
    if _preempting(cmp):
        pool += (
            "; work lost (%) the executor-seconds of preempted tasks over those run "
            "(mean over seeds; each stopped task ran again)"
        )
    return head + (
        "utilisation counts task execution only, overhead the moving delay (warm-up stays "
        "in task time)" + pool
    )


def source_line(cmp: Comparison) -> str | None:
    """Where the jobs came from (trace directory and sizes, file, or generator)."""
    return None if cmp.setting is None else f"jobs: {cmp.setting.source}"


def followed_lines(cmp: Comparison) -> list[str]:
    """One line per self-tuning row (a portfolio): the share of the run each candidate
    was followed, averaged over the seeds (`policy.account.followed_line`)."""
    return [
        followed_line(r.name, r.shares, len(r.shares_per_seed))
        for r in cmp.results
        if r.shares is not None
    ]


def followed_markdown(cmp: Comparison) -> list[str]:
    """`followed_lines` as a markdown list and a blank line (none: no line)."""
    lines = [f"- {line}" for line in followed_lines(cmp)]
    return [*lines, ""] if lines else []


def markdown_table(cmp: Comparison) -> str:
    """The comparison table alone as GitHub markdown lines (the best row in bold)."""
    headers = table_headers(cmp)
    lines = [
        "| " + " | ".join(headers) + " |",
        "|" + "|".join([":---", *["---:"] * (len(headers) - 1)]) + "|",
    ]
    best = cmp.best.name
    for r, cells in zip(cmp.results, table_rows(cmp), strict=True):
        if r.name == best:
            cells = [f"**{c}**" for c in cells]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def to_markdown(cmp: Comparison) -> str:
    """The comparison table as GitHub markdown, with a one-line caption."""
    source = source_line(cmp)
    lines = [
        f"# Scheduler comparison: {cmp.config.workload}",
        "",
        caption(cmp) + ".",
        "",
        *([source + ".", ""] if source else []),
        markdown_table(cmp),
        "",
        *followed_markdown(cmp),
    ]
    return "\n".join(lines)


def write_json(cmp: Comparison, path: str | Path, include_jct: bool = True) -> Path:
    """Write :meth:`Comparison.to_dict` as indented JSON (NaN written as null)."""
    return write_text(path, json.dumps(cmp.to_dict(include_jct), indent=2) + "\n")


def write_markdown(cmp: Comparison, path: str | Path) -> Path:
    """Write :func:`to_markdown`."""
    return write_text(path, to_markdown(cmp))


def write_reports(cmp: Comparison, out_dir: str | Path) -> dict[str, Path]:
    """Write compare.json, compare.md and jct_cdf.png into `out_dir` (created if needed)."""
    out = check_out_dir(out_dir)
    paths = {
        "json": write_json(cmp, out / "compare.json"),
        "markdown": write_markdown(cmp, out / "compare.md"),
        "cdf": plot_jct_cdf(cmp, out / "jct_cdf.png"),
    }
    return {name: p for name, p in paths.items() if p is not None}  # None: no matplotlib
