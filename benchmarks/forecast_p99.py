"""Does a decision's p99 move with forecasts on? Pairs of the scale benchmark, in turn.

    python -m benchmarks.forecast_p99 [--pairs 4] [--scale 0.1] [--pool nodes|fixed]
        [--forecasts 5] [--forecast-workers process|thread] [--json]

(the defaults as shown; from the repository root, with the ``dev`` and ``operator``
extras, as ``benchmarks/scale.py``, whose harness it runs: `make .venv/.dev`)

`python -m benchmarks.scale --forecasts 5` runs the operator once with forecasts off, then
once with them on: one pair, always in that order, and from one run to the next a
decision's p99 moved by more than the forecasts could be seen to move it
(docs/research/forecasts.md, "Cost in the operator"). This runs `--pairs` pairs in ABBA order (off
then on, on then off, ...: a drift over the session falls on both sides alike), each run
on a fresh test API server and cluster as `benchmarks/scale.py`'s (`scale.cluster`,
`scale.run`), and prints per run the decision's p99 of wall and of CPU (the deciding
thread's, `idlegate_decision_cpu_seconds`), then per figure:

* the pairs' differences, on − off, their median and range, and how many were above 0;
* a 90 % interval of their mean (a percentile bootstrap over the pairs, seeded);
* the spread of the off runs alone (max − min): how far a p99 moves with nothing changed.

What "unchanged" can mean here is that the interval holds 0 and is no wider than the off
runs' spread; a p99 read from the operator's histogram is interpolated within its
buckets, so it moves in steps (see `scale.quantile`).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from statistics import median
from typing import Any

import numpy as np

from idlegate.flags import description, missing_extra, one_line

try:  # (the scale benchmark's harness needs the dev extra, the operator its own)
    from benchmarks import scale
except ModuleNotFoundError as exc:
    if __name__ != "__main__":
        raise
    if exc.name in ("tests", "benchmarks"):
        sys.exit("Error: run it from the repository root: python -m benchmarks.forecast_p99")
    error = missing_extra(exc)
    if error is None:
        raise
    sys.exit(f"Error: {one_line(error)}")

FIGURES = ("decision_p99_ms", "decision_cpu_p99_ms", "wall_over_3ms", "cpu_over_0.3ms")
"""The figures compared: `scale.run`'s p99s, and the share of decisions over a bound of
the histograms' buckets (3 ms of wall, 0.3 ms of CPU: each above either p99 in every run
of docs/research/forecasts.md's table, so a tail that grows shows in them, read exactly)."""


def over(buckets: list[tuple[float, float]], bound: float) -> float | None:
    """The share of a histogram's count (`scale.histogram`'s cumulative buckets) above
    `bound`, one of its buckets' upper bounds."""
    if not buckets or not buckets[-1][1]:
        return None
    within = dict(buckets)[bound]
    return 1.0 - within / buckets[-1][1]


def one_run(args: argparse.Namespace, forecasts: bool) -> dict[str, Any]:
    """One run of the scale benchmark (the module docstring), forecasts on or off."""
    nodes = round(scale.NODES_FULL * args.scale)
    extra = (
        (
            *("--forecast-interval", f"{args.forecasts:g}"),
            *("--forecast-workers", args.forecast_workers),
        )
        if forecasts
        else ()
    )
    with scale.cluster(nodes) as (api, namespace), tempfile.NamedTemporaryFile("w+") as log:
        report = scale.run(
            args.scale, "fair", args.pool, 0, 0, [], log, api, namespace, nodes, 0, extra
        )
        api.assert_no_internal_errors()
    if report["phases"] != {"Succeeded": report["workflows"]}:
        raise SystemExit(f"a workflow did not succeed: {report['phases']}")
    return report


def interval(diffs: list[float], seed: int = 0, draws: int = 10_000) -> tuple[float, float]:
    """A 90 % percentile-bootstrap interval of the mean of `diffs` (resampled with
    replacement, `draws` times, from a generator seeded with `seed`)."""
    rng = np.random.default_rng(seed)
    values = np.asarray(diffs, dtype=float)
    means = rng.choice(values, size=(draws, len(values)), replace=True).mean(axis=1)
    low, high = np.quantile(means, [0.05, 0.95])
    return float(low), float(high)


def summary(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Per figure of `FIGURES`: the pairs' differences (on − off) and what the module
    docstring lists of them. `runs` alternate as `order` lays them out."""
    out: dict[str, Any] = {}
    offs = [r for r in runs if not r["forecasts"]]
    ons = [r for r in runs if r["forecasts"]]
    for figure in FIGURES:
        pairs = [
            (off[figure], on[figure])
            for off, on in zip(offs, ons, strict=True)
            if off[figure] is not None and on[figure] is not None
        ]
        diffs = [on - off for off, on in pairs]
        off_values = [off for off, _ in pairs]
        out[figure] = {
            "differences": diffs,
            "median": median(diffs) if diffs else None,
            "range": [min(diffs), max(diffs)] if diffs else None,
            "above_zero": sum(d > 0 for d in diffs),
            "mean_interval_90": list(interval(diffs)) if len(diffs) > 1 else None,
            "off_spread": max(off_values) - min(off_values) if off_values else None,
        }
    return out


def order(pairs: int) -> list[bool]:
    """Forecasts on (True) or off, run after run: off, on; on, off; off, on; ..."""
    return [on for i in range(pairs) for on in ((False, True) if i % 2 == 0 else (True, False))]


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(
        description=description(__doc__),
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    parser.add_argument("--pairs", type=int, default=4, help="pairs of runs, off and on")
    parser.add_argument("--scale", type=float, default=0.1, help="of the scale benchmark")
    parser.add_argument(
        "--pool", choices=sorted(scale.POOLS), default="nodes", help="as scale.py's --pool"
    )
    parser.add_argument(
        "--forecasts", type=float, default=5.0, metavar="SECONDS", help="refresh interval"
    )
    parser.add_argument(
        "--forecast-workers", choices=scale.WORKERS, default="process", help="where replays run"
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object at the end")
    args = parser.parse_args(argv)
    if args.pairs < 2:
        parser.error("--pairs must be at least 2: one pair cannot tell a change from noise")
    if not scale.WORKFLOW_CRD.exists():
        raise SystemExit(f"Error: Argo's Workflow CRD not found at {scale.WORKFLOW_CRD}")
    runs: list[dict[str, Any]] = []
    for i, on in enumerate(order(args.pairs)):
        report = one_run(args, on)
        buckets = report["decision_buckets"]
        row = {
            "forecasts": on,
            "decision_p99_ms": report["decision_p99_ms"],
            "decision_cpu_p99_ms": report["decision_cpu_p99_ms"],
            "wall_over_3ms": over(buckets["wall"], 0.003),
            "cpu_over_0.3ms": over(buckets["cpu"], 0.0003),
            "decisions": report["decisions"],
        }
        row["operator_cpu_s"] = report["operator"]["cpu_seconds"]
        row["refreshes"] = report.get("forecast_refreshes")
        runs.append(row)
        print(
            f"run {i + 1}/{2 * args.pairs}, forecasts {'on ' if on else 'off'}: decision p99 "
            f"{row['decision_p99_ms']} ms, CPU {row['decision_cpu_p99_ms']} ms; over 3 ms "
            f"{row['wall_over_3ms']:.4f}, over 0.3 ms of CPU {row['cpu_over_0.3ms']:.4f} "
            f"of {row['decisions']} decisions",
            flush=True,
        )
    result: dict[str, Any] = {"settings": vars(args), "runs": runs, "summary": summary(runs)}
    for figure, s in result["summary"].items():
        print(
            f"{figure}: on − off median {s['median']}, range {s['range']}, above 0 in "
            f"{s['above_zero']} of {len(s['differences'])} pairs, 90 % interval of the mean "
            f"{s['mean_interval_90']}; the off runs' own spread {s['off_spread']}"
        )
    if args.json:
        print(json.dumps(result))
    return result


if __name__ == "__main__":
    main()
