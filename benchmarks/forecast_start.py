"""Which quantile of the replays a waiting workflow's start should be, and how sure the
figure is (docs/research/forecasts.md, "Against the targets": k8s-batch's start).

    .venv/bin/python benchmarks/forecast_start.py [-w k8s-batch] [--seeds 0-29]
        [--arrivals none] [--quantiles 0.5,0.6,0.7,0.75,0.8,0.9] [--against 0.5]
        [--boot 10000] [--json]

Runs `idlegate forecast evaluate`'s runs (`evaluation.forecast_eval.evaluate_seed`, the
same forecasts, one seed after the other) and keeps every replay's start of each
forecast made while its workflow waited, so that one run scores the start as any
quantile of the replays would have given it (`sim.forecast.forecast`'s
`start_quantile`): a quantile's figure here is what ``--start-quantile Q`` prints as the
``forecast``/``calibrated`` rows' start med (the same replays; only the point read off
them differs). Printed per quantile: the median of |start − actual| ÷ the actual wait
over the forecasts whose workflow waited ≥ 60 s (the target's set) and its 90 %
bootstrap interval, by resampling forecasts and by resampling seeds (the forecasts of
one seed move together: a burst that overtakes one overtakes its neighbours); and,
paired with `--against`'s quantile on the very same forecasts, the difference's 90 %
interval (seeds resampled) and the share of forecasts it made better.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import Any

import numpy as np

import idlegate.sim.forecast as sim_forecast
from idlegate.evaluation import forecast_eval
from idlegate.evaluation.forecast_report import WAITED
from idlegate.flags import description
from idlegate.sim.forecast import quantile

Sampled = dict[tuple[int, float, int], list[float]]
"""(seed, time made, job id) → the replays' starts of a workflow waiting then."""


def sampled_runs(
    settings: forecast_eval.EvalSettings, seeds: Sequence[int]
) -> tuple[list[forecast_eval.SeedRun], Sampled]:
    """Each seed's run, and the replays' starts of every waiting workflow's forecast (kept
    by wrapping `sim.forecast._summary`, which every forecast's spans go through)."""
    kept: Sampled = {}
    at = {"seed": 0, "now": 0.0}
    summary = sim_forecast._summary

    def keep(job, position, starts, finishes, horizon, start_quantile=0.5):
        if len(starts) > 1 and job.first_start is None:  # (the plan of one replay: not ours)
            kept[(int(at["seed"]), at["now"], job.id)] = sorted(starts)
        return summary(job, position, starts, finishes, horizon, start_quantile)

    forecast = forecast_eval.forecast

    def marked(cluster, scheduler, **kw):
        at["now"] = cluster.now  # (`_summary` is given the job, not the time)
        return forecast(cluster, scheduler, **kw)

    runs = []
    sim_forecast._summary = keep
    forecast_eval.forecast = marked
    try:
        for seed in seeds:
            at["seed"] = seed
            runs.append(forecast_eval.evaluate_seed(settings, seed))
    finally:
        sim_forecast._summary = summary
        forecast_eval.forecast = forecast
    return runs, kept


def scored(
    runs: Sequence[forecast_eval.SeedRun], kept: Sampled
) -> list[tuple[int, list[float], float, float]]:
    """(seed, replays' starts, actual start, actual wait) of each scored start forecast."""
    out = []
    for run in runs:
        for p in run.predictions:
            if p.method != "calibrated" or p.started:
                continue
            actual = run.actual[p.job_id]
            wait = actual.first_start - actual.arrival
            if wait >= WAITED:
                out.append(
                    (run.seed, kept[(run.seed, p.made_at, p.job_id)], actual.first_start, wait)
                )
    return out


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=description(__doc__))
    ap.add_argument("-w", "--workload", default="k8s-batch")
    ap.add_argument("--seeds", default="0-29", help="FIRST-LAST (inclusive)")
    ap.add_argument("--arrivals", default="none", choices=("none", "poisson", "oracle"))
    ap.add_argument("--quantiles", default="0.5,0.6,0.7,0.75,0.8,0.9")
    ap.add_argument("--against", type=float, default=0.5)
    ap.add_argument("--boot", type=int, default=10_000)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    first, _, last = args.seeds.partition("-")
    seeds = list(range(int(first), int(last or first) + 1))
    qs = [float(q) for q in args.quantiles.split(",")]
    settings = forecast_eval.EvalSettings(args.workload, arrivals=args.arrivals)
    runs, kept = sampled_runs(settings, seeds)
    rows = scored(runs, kept)
    seed_of = np.array([s for s, *_ in rows])
    by_seed = [np.flatnonzero(seed_of == s) for s in np.unique(seed_of)]
    rng = np.random.default_rng(0)

    def errors(q: float) -> np.ndarray:
        return np.array([abs(quantile(x, q) - start) / wait for _, x, start, wait in rows])

    base = errors(args.against)
    out: list[dict[str, Any]] = []
    for q in qs:
        e = errors(q)
        by_forecast, by_seeds, paired = [], [], []
        for _ in range(args.boot):
            by_forecast.append(np.median(e[rng.integers(len(e), size=len(e))]))
            pick = np.concatenate(
                [by_seed[i] for i in rng.integers(len(by_seed), size=len(by_seed))]
            )
            by_seeds.append(np.median(e[pick]))
            paired.append(np.median(e[pick]) - np.median(base[pick]))
        out.append(
            {
                "quantile": q,
                "n": len(e),
                "start_rel_median": float(np.median(e)),
                "ci90_forecasts": [float(v) for v in np.quantile(by_forecast, [0.05, 0.95])],
                "ci90_seeds": [float(v) for v in np.quantile(by_seeds, [0.05, 0.95])],
                "paired_diff_ci90_seeds": [float(v) for v in np.quantile(paired, [0.05, 0.95])],
                "better_share": float(np.mean(e < base)),
            }
        )
    if args.json:
        print(
            json.dumps(
                {"seeds": seeds, "arrivals": args.arrivals, "against": args.against, "rows": out},
                indent=2,
            )
        )
        return 0
    pct = lambda v: f"{100 * v:5.1f}"  # noqa: E731
    print(
        f"{args.workload}, arrivals {args.arrivals}, seeds {args.seeds}: start error ÷ wait (waited ≥ 60 s)"
    )
    for r in out:
        lo, hi = r["ci90_forecasts"]
        slo, shi = r["ci90_seeds"]
        dlo, dhi = r["paired_diff_ci90_seeds"]
        print(
            f"q {r['quantile']:<5} n {r['n']:>4}  median {pct(r['start_rel_median'])} %  "
            f"90 % by forecasts [{pct(lo)}, {pct(hi)}]  by seeds [{pct(slo)}, {pct(shi)}]  "
            f"vs q {args.against}: [{pct(dlo)}, {pct(dhi)}] points, better on {100 * r['better_share']:.0f} %"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
