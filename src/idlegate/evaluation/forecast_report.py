"""The accuracy of `idlegate forecast evaluate`'s forecasts: figures per method and the table.

Scored sets (docs/research/forecasts.md, "Accuracy, on held-out seeds"):

* **start**: forecasts made while the workflow waited (a started one's start is known)
  whose actual wait was at least `WAITED` seconds; error |forecast − actual start|, and
  that error ÷ the actual wait (arrival to start).
* **finish**: every forecast; error |forecast − actual finish|, and ÷ the actual JCT.
* **in 80 %**: the share of actual starts (of forecasts made while it waited, any wait)
  and finishes inside the forecast's 10th–90th percentile interval (the forecaster's
  only: the baselines give a point).
* **early or late**: the median of the signed error, forecast − actual, over the scored
  starts and finishes (negative: early; `Figures.start_bias_median`, in the JSON).
* **paired**: the shipped forecast's errors (``calibrated``'s median) over the very
  forecasts a method scored, (workflow, time made) for (workflow, time made): a baseline
  that gives no start for some (position × rate before its queue admitted twice) is then
  judged against the forecast on the same forecasts, not on all of them. Kept in the
  JSON (`Figures.paired_start_rel_median`, `paired_finish_rel_median`), not in the table.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from math import nan
from typing import TYPE_CHECKING, Any

import numpy as np

from idlegate.evaluation.forecast_eval import METHODS, SeedRun

if TYPE_CHECKING:
    from rich.console import JustifyMethod
    from rich.table import Table

WAITED = 60.0
"""Seconds a workflow must have waited for its start forecast to be scored (the issue's
target set: a forecast of a wait of a few seconds is right or wrong by nothing)."""


@dataclass(frozen=True)
class Figures:
    """One method's accuracy over the runs."""

    method: str
    start_n: int
    start_abs_median: float
    start_abs_p90: float
    start_rel_median: float
    """Median over forecasts of |error| ÷ the actual wait."""
    start_rel_p90: float
    finish_n: int
    finish_abs_median: float
    finish_abs_p90: float
    finish_rel_median: float
    """Median over forecasts of |error| ÷ the actual JCT."""
    finish_rel_p90: float
    start_inside: float
    """Share of actual starts inside the 80 % interval (nan: no interval)."""
    finish_inside: float
    unavailable: int
    """Forecasts this method could not make (not scored)."""
    paired_start_n: int = 0
    """Of this method's `start_n` scored starts, those the shipped forecast made too (the
    same workflow at the same time): the set the paired figures are taken over (all of
    them, unless the forecast was unavailable where this method was not)."""
    paired_start_rel_median: float = nan
    """The shipped forecast's (``calibrated``'s median) start error ÷ the actual wait, its
    median over the same forecasts this method's start scored (nan: none; for
    ``calibrated`` and ``forecast``, whose medians are the same, `start_rel_median`)."""
    paired_finish_rel_median: float = nan
    """As `paired_start_rel_median`, of the finish ÷ the actual JCT."""
    start_bias_median: float = nan
    """Median over the scored starts of forecast − actual, seconds (negative: early)."""
    finish_bias_median: float = nan
    """As `start_bias_median`, of the finishes."""

    def to_dict(self) -> dict[str, Any]:
        return {
            k: (None if isinstance(v, float) and v != v else v) for k, v in asdict(self).items()
        }


SHIPPED = "calibrated"
"""The method the paired figures hold every method against: the forecast as shipped."""


def figures(runs: Sequence[SeedRun], method: str, waited: float = WAITED) -> Figures:
    """`method`'s figures over every seed's forecasts, a start scored if its workflow
    waited at least `waited` seconds."""
    start_abs, start_rel, finish_abs, finish_rel = [], [], [], []
    start_bias: list[float] = []
    finish_bias: list[float] = []
    start_in, finish_in = [], []
    paired_start: list[float] = []
    paired_finish: list[float] = []
    for run in runs:
        shipped = {(p.job_id, p.made_at): p for p in run.predictions if p.method == SHIPPED}
        for p in run.predictions:
            if p.method != method:
                continue
            actual = run.actual[p.job_id]
            ours = shipped.get((p.job_id, p.made_at))
            f_err = abs(p.finish.median - actual.finish)
            finish_bias.append(p.finish.median - actual.finish)
            finish_abs.append(f_err)
            finish_rel.append(_share_of(f_err, actual.jct))
            finish_in.append(p.finish.low <= actual.finish <= p.finish.high)
            if ours is not None:
                paired_finish.append(_share_of(abs(ours.finish.median - actual.finish), actual.jct))
            if p.started:
                continue
            start_in.append(p.start.low <= actual.first_start <= p.start.high)
            wait = actual.first_start - actual.arrival
            if wait >= waited:
                s_err = abs(p.start.median - actual.first_start)
                start_bias.append(p.start.median - actual.first_start)
                start_abs.append(s_err)
                start_rel.append(s_err / wait)
                if ours is not None:
                    paired_start.append(abs(ours.start.median - actual.first_start) / wait)
    interval = _has_interval(runs, method)
    return Figures(
        method,
        len(start_abs),
        _q(start_abs, 0.5),
        _q(start_abs, 0.9),
        _q(start_rel, 0.5),
        _q(start_rel, 0.9),
        len(finish_abs),
        _q(finish_abs, 0.5),
        _q(finish_abs, 0.9),
        _q(finish_rel, 0.5),
        _q(finish_rel, 0.9),
        float(np.mean(start_in)) if interval and start_in else nan,
        float(np.mean(finish_in)) if interval and finish_in else nan,
        sum(1 for run in runs for m, _, _ in run.unavailable if m == method),
        len(paired_start),
        _q(paired_start, 0.5),
        _q(paired_finish, 0.5),
        _q(start_bias, 0.5),
        _q(finish_bias, 0.5),
    )


def _share_of(error: float, whole: float) -> float:
    """`error` as a share of `whole` (0 where the whole is 0: nothing to be wrong about)."""
    return error / whole if whole > 0 else 0.0


def _has_interval(runs: Sequence[SeedRun], method: str) -> bool:
    """Whether `method` gives intervals (a baseline's spans are points)."""
    return method in ("forecast", "calibrated")


def _q(values: Sequence[float], q: float) -> float:
    return float(np.quantile(values, q)) if values else nan


def report(runs: Sequence[SeedRun]) -> list[Figures]:
    """Every method's figures, the forecast first."""
    return [figures(runs, m) for m in METHODS]


def unavailable_reasons(runs: Sequence[SeedRun]) -> dict[str, int]:
    """Why forecasts could not be made, with how often (per method and reason)."""
    out: dict[str, int] = {}
    for run in runs:
        for method, _, why in run.unavailable:
            key = f"{method}: {why}"
            out[key] = out.get(key, 0) + 1
    return out


def render(figs: Sequence[Figures], width: int = 120) -> Table:
    """The table (`MD_COLUMNS`' columns, each header over two lines), for a console
    `width` columns wide: below `evaluation.console.NARROW` a method's start figures
    and its finish figures are two lines under the same six headers (`add_folding`'s
    stack, the fold every wide table of the CLI shares), so that at 80 columns no row is
    100 wide (issue 80) and the finish's are not mixed with the start's (issue 82).
    Percentages are of the actual wait / JCT."""
    from rich import box
    from rich.table import Table

    from idlegate.evaluation.console import add_folding

    # (one space between columns: the thirteen fit 120)
    table = Table(box=box.SIMPLE_HEAD, caption=CAPTION, collapse_padding=True, pad_edge=False)
    columns: list[tuple[str, JustifyMethod]] = [
        (head.replace(" ", "\n", 1) if i else head, "right" if i else "left")
        for i, (head, _) in enumerate(MD_COLUMNS)
    ]
    rows = [[cell(f).strip() for _, cell in MD_COLUMNS] for f in figs]
    add_folding(table, columns, rows, width=width, keep=1, stack=True)
    return table


CAPTION = (
    f"start: of workflows that waited ≥ {WAITED:g} s; med, p90: the error's median and "
    "p90, in seconds (s) and as a share of the actual wait / JCT; in 80 %: actual starts "
    "and finishes inside the forecast's 80 % interval"
)
"""Under the table (`render`): what its headers abbreviate."""


MD_COLUMNS: tuple[tuple[str, Callable[[Figures], str]], ...] = (
    ("method", lambda f: f.method),
    ("start n", lambda f: str(f.start_n)),
    ("start med s", lambda f: _s(f.start_abs_median)),
    ("start p90 s", lambda f: _s(f.start_abs_p90)),
    ("start med", lambda f: _pct(f.start_rel_median)),
    ("start p90", lambda f: _pct(f.start_rel_p90)),
    ("finish n", lambda f: str(f.finish_n)),
    ("finish med s", lambda f: _s(f.finish_abs_median)),
    ("finish p90 s", lambda f: _s(f.finish_abs_p90)),
    ("finish med", lambda f: _pct(f.finish_rel_median)),
    ("finish p90", lambda f: _pct(f.finish_rel_p90)),
    ("start in 80 %", lambda f: _share(f.start_inside)),
    ("finish in 80 %", lambda f: _share(f.finish_inside)),
)
"""The markdown table's columns, each its header and its cell of a method's figures: the
one list `markdown` writes and docs/research/forecasts.md's tables have (all of them, in this
order: tests/test_forecast_eval.py checks), so a reader's own forecast.md reads as the
page's."""

MD_HEAD = "| " + " | ".join(head for head, _ in MD_COLUMNS) + " |"
"""The markdown table's header (`markdown`)."""


def markdown(figs: Sequence[Figures]) -> str:
    """The table in markdown (``--out``'s forecast.md, which docs/research/forecasts.md checks)."""
    lines = [MD_HEAD, "|" + "---|" * len(MD_COLUMNS)]
    for f in figs:
        lines.append("| " + " | ".join(cell(f).strip() for _, cell in MD_COLUMNS) + " |")
    return "\n".join(lines) + "\n"


def _s(x: float) -> str:
    return f"{'—':>7}" if x != x else f"{x:>7.0f}" if x >= 100 else f"{x:>7.1f}"


def _pct(x: float) -> str:
    return f"{'—':>7}" if x != x else f"{100 * x:>6.0f}%" if x >= 10 else f"{100 * x:>6.1f}%"


def _share(x: float) -> str:
    return f"{'—':>5}" if x != x else f"{100 * x:>4.0f}%"
