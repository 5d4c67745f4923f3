"""``idlegate forecast``: how right the forecasts of starts and finishes are (docs/forecast.md).

Registered from `idlegate.cli` as a sub-command group; its options mirror ``simulate``'s.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from idlegate.evaluation.comparison import CompareConfig, WorkloadOptions
from idlegate.evaluation.console import stderr_progress
from idlegate.evaluation.forecast_eval import EvalSettings, evaluate
from idlegate.evaluation.forecast_report import markdown, render, report, unavailable_reasons
from idlegate.flags import Given, flags, user_errors

forecast_app = typer.Typer(
    help="Forecasts of when waiting workflows start and finish (docs/forecast.md).",
    no_args_is_help=True,
    rich_markup_mode=None,
)

HELD_OUT_SEEDS = (100, 101, 102)
"""The default seeds: none of those the forecaster was tuned on (0-9)."""


@forecast_app.command("evaluate")
@flags(options=WorkloadOptions)
# long: one typer declaration per flag; the work is evaluation.forecast_eval.evaluate
def forecast_evaluate(
    options: Given,
    workload: Annotated[
        str,
        typer.Option("--workload", "-w", help=CompareConfig.model_fields["workload"].description),
    ] = "k8s-batch",
    scheduler: Annotated[
        str,
        typer.Option("--scheduler", "-s", help="The scheduler spec the simulated pool runs."),
    ] = "default",
    seeds: Annotated[
        list[int] | None,
        typer.Option(
            "--seed",
            help="Seed of arrivals and durations (repeatable); default: 100, 101, 102, "
            "seeds the forecaster was not tuned on.",
        ),
    ] = None,
    replays: Annotated[
        int, typer.Option("--replays", "-m", min=1, help="Replays per forecast (M).")
    ] = 20,
    every: Annotated[
        float | None,
        typer.Option(
            "--every",
            min=1.0,
            help="Also forecast every waiting workflow every this many seconds (default: "
            "only at each workflow's arrival).",
        ),
    ] = None,
    arrivals: Annotated[
        str,
        typer.Option(
            "--arrivals",
            help="Arrivals not seen yet in the replays: none (not invented) or poisson (drawn "
            "at the pool's recent arrival rate).",
        ),
    ] = "none",
    durations: Annotated[
        str,
        typer.Option(
            "--durations",
            help="What replays draw task durations from: model (the workload's own) or "
            "measured (what an operator has: the stage's tasks ended so far, else the "
            "declared estimate).",
        ),
    ] = "model",
    as_json: Annotated[bool, typer.Option("--json", help="Print all figures as JSON.")] = False,
    out_dir: Annotated[
        Path | None,
        typer.Option("--out", help="Also write forecast.json and forecast.md (the table) here."),
    ] = None,
) -> None:
    """Forecast each workflow at its arrival during simulated runs, then compare with what
    happened: the forecast beside position × admission rate (Kueue's suggestion), an
    exponential moving average of recent waits, and a plan with declared durations
    (Slurm's --start). Errors are in seconds and as a share of the actual wait or JCT."""
    with user_errors():
        if arrivals not in ("none", "poisson"):
            raise typer.BadParameter(f"--arrivals: none or poisson, not {arrivals!r}")
        if durations not in ("model", "measured"):
            raise typer.BadParameter(f"--durations: model or measured, not {durations!r}")
        settings = EvalSettings(
            workload,
            scheduler,
            WorkloadOptions(**options),
            replays=replays,
            every=every,
            arrivals="none" if arrivals == "none" else "poisson",
            durations="model" if durations == "model" else "measured",
        )
        chosen = list(seeds or HELD_OUT_SEEDS)
        with stderr_progress("forecasting", len(chosen), as_json=as_json) as update:
            runs = evaluate(settings, chosen, update)
    figs = report(runs)
    out = {
        "workload": workload,
        "scheduler": scheduler,
        "seeds": chosen,
        "replays": replays,
        "every": every,
        "arrivals": arrivals,
        "durations": durations,
        "refreshes": sum(r.refreshes for r in runs),
        "figures": {f.method: f.to_dict() for f in figs},
        "unavailable": unavailable_reasons(runs),
    }
    if out_dir is not None:
        out_dir.mkdir(parents=True, exist_ok=True)
        (out_dir / "forecast.json").write_text(json.dumps(out, indent=2) + "\n")
        (out_dir / "forecast.md").write_text(markdown(figs))
    if as_json:
        typer.echo(json.dumps(out, indent=2))
        return
    typer.echo(render(figs))
    refreshes = sum(r.refreshes for r in runs)
    typer.echo(
        f"\n{workload}, {scheduler}, seeds {', '.join(map(str, chosen))}: {refreshes} "
        f"forecasts of {replays} replays, arrivals {arrivals}, durations {durations}; start and finish errors as "
        "medians and p90s, in seconds and as a share of the actual wait / JCT."
    )
    for why, n in unavailable_reasons(runs).items():
        typer.echo(f"unavailable {n}×, {why}")
