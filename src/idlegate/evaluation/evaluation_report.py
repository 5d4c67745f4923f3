"""The reports of `idlegate evaluate`: evaluation.md, evaluation.json and the per-workload files.

Outputs in ``--out`` (:func:`write_evaluation`): per workload ``<key>/compare.json``,
``<key>/compare.md`` and ``<key>/jct_cdf.png`` (compare's formats);
``evaluation.json`` and ``evaluation.md`` (all workloads, the headline deltas, where idle
slots fired, the models); ``idle_sweep.png`` (Fig. 6) and ``training_curve.png`` when a
training log is given.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path

from idlegate import __version__
from idlegate.evaluation.compare_report import (
    followed_markdown,
    markdown_table,
    write_json,
    write_markdown,
)
from idlegate.evaluation.comparison import Comparison
from idlegate.evaluation.files import check_out_dir, write_text
from idlegate.evaluation.headlines import HEADLINES, Headline
from idlegate.evaluation.plots import plot_idle_sweep, plot_jct_cdf, plot_training_curve
from idlegate.evaluation.running import CaseResult, Evaluation, model_info
from idlegate.evaluation.suites import BASELINES
from idlegate.evaluation.sweep import SweepResult
from idlegate.sim.metrics import Estimate

__all__ = ["headline_rows", "idle_rows", "to_markdown", "write_evaluation"]


def _pct(est: Estimate | None) -> str:
    if est is None or not math.isfinite(est.mean):
        return "n/a"
    text = f"{est.mean * 100:+.1f} %"
    if est.n >= 2 and math.isfinite(est.half_width):
        text += f" ± {est.half_width * 100:.1f}"
    return text


def _headline_cell(h: Headline, case: CaseResult) -> str:
    value = case.headlines.get(h.key)
    if value is None:
        return "—"
    mark = {True: " ✓", False: " ✗", None: ""}[h.met(case.case.family, value.estimate)]
    versus = f" (vs {value.reference})" if h.reference is None else ""
    return _pct(value.estimate) + mark + versus


def _target_text(h: Headline) -> str:
    sign = "≤" if h.at_most else "≥"
    parts = []
    for family, t in h.targets.items():
        where = "elsewhere" if family == "*" else family
        parts.append(f"{where} {sign} {t * 100:+.0f} %")
    return ", ".join(parts)


def idle_rows(ev: Evaluation) -> tuple[list[str], list[list[str]]]:
    """Where idle slots fired: headers (workload, then every scheduler that fired one
    anywhere) and one row per run workload, each cell "delayed / jobs, seconds"."""
    names: dict[str, None] = {}
    for c in ev.cases:
        for name, use in c.idle.items():
            if use.delayed_jobs:
                names[name] = None
    rows = []
    for c in ev.cases:
        if c.skipped:
            continue
        idle = c.idle
        cells = []
        for name in names:
            use = idle.get(name)
            cells.append(
                "—"
                if use is None
                else f"{use.delayed_jobs} / {use.jobs} jobs, {use.seconds:,.0f} s"
            )
        rows.append([c.case.key, *cells])
    return ["workload", *names], rows


def headline_rows(ev: Evaluation) -> list[list[str]]:
    """One row per workload: its title and the headline cells (skipped rows say so)."""
    rows = []
    for c in ev.cases:
        if c.skipped:
            rows.append([c.case.key, *(["skipped"] * len(HEADLINES))])
        else:
            rows.append([c.case.key, *(_headline_cell(h, c) for h in HEADLINES)])
    return rows


def _md_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join(["---"] * len(headers)) + "|"]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return lines


def _caption(ev: Evaluation, cmp: Comparison) -> str:
    pct = round(ev.config.confidence * 100)
    setting = cmp.setting.summary() if cmp.setting else f"{cmp.num_executors} executors"
    source = f" Jobs: {cmp.setting.source}." if cmp.setting else ""
    return (
        f"{setting}, {cmp.config.seeds} seeds; mean ± {pct} % CI "
        f"over seeds; % vs {cmp.config.baseline_name} paired per seed; JCT / bound = average "
        "JCT over the average of max(critical path, work / K); utilisation counts task "
        f"execution only, overhead the moving delay.{source}"
    )


def _sweep_lines(sweep: SweepResult) -> list[str]:
    rows = []
    order = {name: i for i, name in enumerate(sweep.schedulers)}
    params = {"rate": 0, "long_seconds": 1}
    for p in sorted(sweep.points, key=lambda p: (order[p.scheduler], params[p.parameter], p.value)):
        x = f"{p.value:.4f} jobs/s" if p.parameter == "rate" else f"{p.value:g} s long"
        rows.append(
            [
                p.scheduler,
                x,
                f"{p.load:g}",
                _est(p.idle_per_long_job, 2),
                _est(p.idle_per_decision, 3),
                _est(p.delayed_long_fraction, 2),
                _est(p.avg_jct, 1),
            ]
        )
    headers = [
        "scheduler",
        "swept value",
        "load",
        "idle / long job (s)",
        "idle / decision (s)",
        "long jobs delayed",
        "avg JCT (s)",
    ]
    return _md_table(headers, rows)


def _est(e: Estimate, digits: int) -> str:
    if not math.isfinite(e.mean):
        return "n/a"
    if e.n >= 2 and math.isfinite(e.half_width):
        return f"{e.mean:.{digits}f} ± {e.half_width:.{digits}f}"
    return f"{e.mean:.{digits}f}"


# long: the report's sections in the order a reader meets them; each is a few lines
def to_markdown(ev: Evaluation) -> str:
    """The combined report: models, headline deltas, each workload's table, the plots."""
    cfg = ev.config
    seeds = cfg.seed_list
    lines = [
        "# idlegate evaluation",
        "",
        f"Regenerate with `{cfg.command_line()}` (idlegate {__version__}, suite {cfg.suite}).",
        "",
        f"Seeds {seeds[0]}–{seeds[-1]} ({len(seeds)}): every scheduler runs on the same "
        "arrival sequence per seed, so differences are paired per seed. Evaluation seeds must "
        "never be training or validation seeds of the evaluated models.",
        "",
        "## Models",
        "",
    ]
    model_rows = []
    for m in cfg.models:
        info = model_info(ev.models.get(m.title, {}))
        model_rows.append(
            [
                m.title,
                f"`{m.format(label=False)}`",
                _yes_no(info["idle_head"]),
                _yes_no(info["cp_features"]),
                str(info["idle_levels"] or "?"),
            ]
        )
    lines += _md_table(["label", "spec", "idle head", "CP/width features", "G"], model_rows)
    lines += [
        "",
        "## Headline deltas (average JCT, paired per seed)",
        "",
        *_md_table(["workload", *(h.title for h in HEADLINES)], headline_rows(ev)),
        "",
        "Each cell is subject / reference − 1 (negative: the subject's average JCT is lower). "
        "Targets (✓ met / ✗ not met, by the mean): "
        + "; ".join(f"{h.title}: {_target_text(h)}" for h in HEADLINES)
        + ". The best heuristic is the baseline (any of "
        + ", ".join(b for b, _ in BASELINES)
        + ") with the lowest mean average JCT on that workload. — : a label is missing "
        "(name the models learned, learned-no-idle, learned-no-cp, lookahead, "
        "lookahead-base with --schedulers).",
        "",
        *_idle_lines(ev),
        "## Workloads",
        "",
    ]
    for c in ev.cases:
        lines += [f"### {c.case.title}", ""]
        if c.comparison is None:
            lines += [f"*{c.case.skip_reason}*", ""]
            continue
        lines += [
            _caption(ev, c.comparison),
            "",
            markdown_table(c.comparison),
            "",
            *followed_markdown(c.comparison),
            f"![JCT CDF, {c.case.key}]({c.case.key}/jct_cdf.png)",
            "",
        ]
    if ev.sweep is not None:
        sw = ev.sweep.config
        lines += [
            "## Idle length against arrival rate and long-job length (Fig. 6)",
            "",
            f"Synthetic two-type workload; loads {', '.join(map(str, sw.loads))} (plotted at "
            f"their arrival rates) and long-job work {', '.join(f'{x:g}' for x in sw.long_seconds)}"
            f" executor-s at load {sw.long_load} (the arrival rate follows the load).",
            "",
            "![idle sweep](idle_sweep.png)",
            "",
            *_sweep_lines(ev.sweep),
            "",
        ]
    if ev.training is not None:
        tr = ev.training
        last = f"{tr.values[-1]:.1f} s" if tr.values else "n/a"
        lines += [
            "## Training curve",
            "",
            f"From `{tr.path}` ({len(tr.values)} validation points; last {last}).",
            "",
            "![training curve](training_curve.png)",
            "",
        ]
    return "\n".join(lines)


def _idle_lines(ev: Evaluation) -> list[str]:
    headers, rows = idle_rows(ev)
    lines = ["## Idle slots fired", ""]
    if len(headers) == 1:
        return [*lines, "No scheduler inserted an idle slot on any workload.", ""]
    return [
        *lines,
        "Jobs delayed by a deliberate idle slot / finished jobs, and the idle seconds "
        "inserted, summed over all seeds; only schedulers that idled somewhere are shown.",
        "",
        *_md_table(headers, rows),
        "",
    ]


def _yes_no(value: bool | None) -> str:
    return "?" if value is None else "yes" if value else "no"


def write_evaluation(ev: Evaluation, out_dir: str | Path) -> dict[str, Path]:
    """Write every report of `ev` into `out_dir` (created if needed); name → path."""
    out = check_out_dir(out_dir)
    paths: dict[str, Path | None] = {}  # a plot is None without matplotlib
    for c in ev.cases:
        if c.comparison is None:
            continue
        d = out / c.case.key
        paths[f"{c.case.key}/json"] = write_json(c.comparison, d / "compare.json")
        paths[f"{c.case.key}/markdown"] = write_markdown(c.comparison, d / "compare.md")
        paths[f"{c.case.key}/cdf"] = plot_jct_cdf(
            c.comparison, d / "jct_cdf.png", title=f"JCT CDF — {c.case.title}"
        )
    if ev.sweep is not None:
        paths["idle_sweep"] = plot_idle_sweep(ev.sweep, out / "idle_sweep.png")
    if ev.training is not None:
        paths["training_curve"] = plot_training_curve(ev.training, out / "training_curve.png")
    text = json.dumps(ev.to_dict(), indent=2, allow_nan=False)
    paths["json"] = write_text(out / "evaluation.json", text + "\n")
    paths["markdown"] = write_text(out / "evaluation.md", to_markdown(ev))
    return {name: p for name, p in paths.items() if p is not None}
