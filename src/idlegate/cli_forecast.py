"""``idlegate forecast``: how right the forecasts of starts and finishes are (docs/forecast.md).

Registered from `idlegate.cli` as a sub-command group; its options mirror ``simulate``'s.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, cast, get_args

import typer

from idlegate.api.pool_spec import no_queues
from idlegate.cli_whatif import register as register_what_if
from idlegate.errors import IdlegateError
from idlegate.evaluation.comparison import CompareConfig, WorkloadOptions, build
from idlegate.evaluation.console import stdout_console
from idlegate.evaluation.files import check_out_dir
from idlegate.evaluation.forecast_eval import Arrivals, EvalSettings, evaluate
from idlegate.evaluation.forecast_report import markdown, render, report, unavailable_reasons
from idlegate.flags import Given, flags, user_errors
from idlegate.progress import stderr_progress
from idlegate.sim.forecast import BUDGET, HIGH, LOW, MEDIAN

forecast_app = typer.Typer(
    help="Forecasts of when waiting workflows start and finish (docs/forecast.md).\n\n"
    "idlegate forecast FILE is short for idlegate forecast what-if FILE.",
    no_args_is_help=True,
    rich_markup_mode=None,
)

HELD_OUT_SEEDS = (100, 101, 102)
"""The default seeds, apart from those the tests and benchmarks use (0-9): the forecaster's
constants were set before any run on them."""


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
            "seeds its constants were not fitted to.",
        ),
    ] = None,
    replays: Annotated[
        int, typer.Option("--replays", "-m", help="Replays per forecast (M), at least 1.")
    ] = 20,
    every: Annotated[
        float | None,
        typer.Option(
            "--every",
            help="Also forecast every waiting workflow every this many seconds (default: "
            "only at each workflow's arrival).",
        ),
    ] = None,
    arrivals: Annotated[
        str,
        typer.Option(
            "--arrivals",
            help="Arrivals not seen yet in the replays: none (not invented), poisson (drawn "
            "at the pool's recent arrival rate), queues (drawn per queue at its recent rate, "
            "into it; a run with queues only: -w teams, --queues) or oracle (the run's own, which no forecaster knows: to measure what "
            "not knowing them costs).",
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
    start_quantile: Annotated[
        float | None,
        typer.Option(
            "--start-quantile",
            help="The quantile of the replays' starts a waiting workflow's forecast start "
            "is (0.1 to 0.9). Default: as the operator's pool takes it, 0.75 when --arrivals "
            "is none (replays that invent no arrivals start early by what later arrivals "
            "delay), else 0.5, their median (docs/forecast.md).",
        ),
    ] = None,
    budget: Annotated[
        int,
        typer.Option(
            "--budget",
            help="Events a refresh's replays may simulate, the first replay always whole: "
            f"the operator's, {BUDGET:,}, by default (a long queue gets fewer replays); 0: "
            "every replay (-m) runs.",
        ),
    ] = BUDGET,
    as_json: Annotated[bool, typer.Option("--json", help="Print all figures as JSON.")] = False,
    out_dir: Annotated[
        Path | None,
        typer.Option("--out", help="Also write forecast.json and forecast.md (the table) here."),
    ] = None,
) -> None:
    """Score the forecasts on simulated runs against what happened.

    Forecast each workflow at its arrival (with --every, also every so often while it
    waits) during simulated runs, then compare with what happened: the forecast beside position × admission rate (Kueue's suggestion), an
    exponential moving average of recent waits, and a plan with declared durations
    (Slurm's --start). Errors are in seconds and as a share of the actual wait or JCT."""
    with user_errors():
        if arrivals not in get_args(Arrivals):
            raise IdlegateError(
                f"--arrivals is one of none, poisson, queues or oracle, not {arrivals!r}"
            )
        if durations not in ("model", "measured"):
            raise IdlegateError(f"--durations is model or measured, not {durations!r}")
        if replays < 1:
            raise IdlegateError(f"--replays (-m) is a whole number of at least 1, not {replays}")
        if budget < 0:
            raise IdlegateError(
                f"--budget is a number of events, 0 for none, not {budget}; e.g. {BUDGET}"
            )
        if every is not None and not every >= 1.0:
            raise IdlegateError(f"--every is a number of seconds of at least 1, not {every}")
        if start_quantile is not None and not LOW <= start_quantile <= HIGH:
            raise IdlegateError(
                f"--start-quantile is a quantile from {LOW} to {HIGH}, not {start_quantile}"
            )
        if out_dir is not None:  # (before the runs: a folder that cannot be made loses none)
            check_out_dir(out_dir)
        settings = EvalSettings(
            workload,
            scheduler,
            WorkloadOptions(**options),
            replays=replays,
            every=every,
            arrivals=cast(Arrivals, arrivals),
            durations="model" if durations == "model" else "measured",
            start_quantile=start_quantile,
            budget=budget or None,
        )
        chosen = list(seeds or HELD_OUT_SEEDS)
        if arrivals == "queues":
            check_queues(workload, chosen[0], settings.options)
        with stderr_progress("forecasting") as update:  # (checkpoints: `evaluate` counts them)
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
        "start_quantile": settings.start_at,
        "budget": settings.budget,
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
    console = stdout_console()  # (the table and the sentences at its width: issue 80)
    console.print(render(figs, console.width))
    refreshes = sum(r.refreshes for r in runs)
    at = settings.start_at
    quantile = "their median" if at == MEDIAN else f"their {at:g} quantile"
    console.print(
        f"\n{workload}, {scheduler}, {seeds_text(chosen)}: {refreshes} "
        f"refreshes of {replays} replays{within(settings.budget)}, arrivals {arrivals}, "
        f"durations {durations}"
        f", a waiting workflow's start at {quantile}; start "
        "and finish errors as medians and p90s, in seconds and as a share of the actual "
        "wait / JCT.",
        highlight=False,
        markup=False,
    )
    for why, n in unavailable_reasons(runs).items():
        console.print(f"unavailable {n}×, {why}", highlight=False, markup=False)


def check_queues(workload: str, seed: int, options: WorkloadOptions) -> None:
    """Refuse ``--arrivals queues`` on a run without queues, as the operator refuses
    ``--forecast-arrivals queues`` (`api.pool_spec.no_queues`): the run has queues when its
    workload built for `seed` has them (``-w teams``, ``--queues FILE``,
    ``-o queues=teams``), which the evaluation's pool then admits through."""
    if not build(workload, seed, options).queues:
        raise IdlegateError(
            no_queues("--arrivals queues", f"the workload {workload}", "--queues FILE")
        )


def within(budget: int | None) -> str:
    """How the footer says a refresh's budget of events."""
    return "" if budget is None else f" within {budget:,} events"


def seeds_text(seeds: list[int]) -> str:
    """``seed 100`` or ``seeds 100, 101, 102``, as the footer names them."""
    return ("seed " if len(seeds) == 1 else "seeds ") + ", ".join(map(str, seeds))


register_what_if(forecast_app)  # (`idlegate forecast FILE`: idlegate.cli_whatif)
app = typer.Typer(rich_markup_mode=None)
"""The command line's ``forecast`` group (`idlegate.cli_lazy` loads it from here)."""
app.add_typer(forecast_app, name="forecast")
