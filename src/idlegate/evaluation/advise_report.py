"""The report of `idlegate advise`: its table, markdown, JSON and plots in ``--out``.

The cells come from the comparison's summaries (`compare_report`'s formatting), so the
advice reads like every other table of idlegate; the row 'recorded' is what the cluster
measured for the same workflows (one sample, no interval): beside the replay of what
the cluster ran, it shows how closely the simulator reproduces the cluster.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from idlegate.evaluation.advise import Advice
from idlegate.evaluation.compare_report import fmt_estimate, fmt_number, fmt_relative
from idlegate.evaluation.files import check_out_dir, write_text
from idlegate.evaluation.plots import plot_jct_by_hour, plot_jct_cdf

__all__ = ["advice_caption", "advice_headers", "advice_rows", "to_markdown", "write_advice"]

RECORDED = "recorded"
"""The row of the JCTs the cluster measured."""


def advice_headers(advice: Advice) -> list[str]:
    """The table's column headers."""
    return [
        "scheduler",
        "avg JCT (s)",
        "p95 JCT (s)",
        "max JCT (s)",
        f"avg JCT vs {advice.cluster}",
    ]


def advice_rows(advice: Advice) -> list[list[str]]:
    """The table's cells: one row per candidate, then the recorded row if any."""
    rows = []
    for r in advice.comparison.results:
        rows.append(
            [
                r.name,
                fmt_estimate(r.summary["avg_jct"]),
                fmt_estimate(r.summary["p95_jct"]),
                fmt_estimate(advice.max_jct(r)),
                fmt_relative(r),
            ]
        )
    jct = advice.recorded_jct
    if jct.size:
        rows.append(
            [
                f"{RECORDED} ({jct.size} workflows)",
                fmt_number(float(jct.mean())),
                fmt_number(float(np.percentile(jct, 95))),
                fmt_number(float(jct.max())),
                "measured",
            ]
        )
    return rows


def advice_caption(advice: Advice) -> str:
    """One sentence saying what was replayed and how to read the table."""
    cfg = advice.config
    pct = round(cfg.confidence * 100)
    split = (
        f" ({advice.train_workflows} earlier workflow(s) left for training)"
        if advice.train_workflows
        else ""
    )
    return (
        f"{advice.path.name}: {len(advice.reported)} workflows of {advice.part}{split}, "
        f"replayed at their recorded arrivals on a pool of {advice.pool_size}; mean ± "
        f"{pct} % CI over {cfg.seeds} seeds, each resampling the measured task durations; "
        f"the change column is paired per seed against {advice.cluster}, what the cluster "
        "ran"
    )


def to_markdown(advice: Advice) -> str:
    """The whole report as GitHub markdown."""
    headers = advice_headers(advice)
    best = advice.comparison.best.name
    lines = [
        f"# idlegate advise: {advice.path.name}",
        "",
        advice_caption(advice) + ".",
        "",
        "| " + " | ".join(headers) + " |",
        "|" + "|".join([":---", *["---:"] * (len(headers) - 1)]) + "|",
    ]
    for cells in advice_rows(advice):
        if cells[0] == best:
            cells = [f"**{c}**" for c in cells]
        lines.append("| " + " | ".join(cells) + " |")
    lines += ["", advice.recommendation.text, ""]
    facts = advice.facts
    lines.append(
        f"History: {facts.workflows:,} workflows over {facts.span_seconds / 3600:.1f} h, "
        f"sha256 {facts.sha256[:16]}."
    )
    lines += [f"Note: {n}." for n in advice.notes]
    lines.append("")
    return "\n".join(lines)


def write_advice(advice: Advice, out_dir: str | Path) -> dict[str, Path]:
    """Write advise.md, advise.json, jct_cdf.png and jct_by_hour.png into `out_dir`."""
    out = check_out_dir(out_dir)
    title = (
        f"JCT CDF — {advice.path.name}, {len(advice.reported)} workflows, pool {advice.pool_size}"
    )
    paths = {
        "markdown": write_text(out / "advise.md", to_markdown(advice)),
        "json": write_text(out / "advise.json", json.dumps(advice.to_dict(), indent=2) + "\n"),
        "cdf": plot_jct_cdf(advice.comparison, out / "jct_cdf.png", title),
        "hourly": plot_jct_by_hour(
            advice.comparison,
            advice.arrivals,
            out / "jct_by_hour.png",
            recorded=_recorded_points(advice),
            title=f"Average JCT by hour of arrival — {advice.path.name}, "
            f"{len(advice.reported)} workflows",
        ),
    }
    return {name: p for name, p in paths.items() if p is not None}  # None: no matplotlib


def _recorded_points(advice: Advice) -> tuple[np.ndarray, np.ndarray] | None:
    """(arrival from the part's start, JCT) of the recorded successful workflows."""
    ok = [w for w in advice.reported if w.jct is not None and w.outcome != "Failed"]
    if not ok:
        return None
    start = min(w.arrival or 0.0 for w in advice.reported)
    times = np.asarray([(w.arrival or 0.0) - start for w in ok], dtype=float)
    return times, np.asarray([w.jct for w in ok], dtype=float)
