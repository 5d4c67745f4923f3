"""The commands that run the simulator: ``simulate``, ``compare``, ``demo``, ``advise``,
``evaluate``, and ``operator`` (`idlegate.cli` imports this module only when one of them
runs: `idlegate.cli_lazy`)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Annotated, Any, Final

import typer

from idlegate.api.settings import Settings
from idlegate.errors import IdlegateError
from idlegate.evaluation.advise import AdviseConfig
from idlegate.evaluation.comparison import CompareConfig, WorkloadOptions, run_one
from idlegate.evaluation.console import (
    print_compare,
    render_followed,
    render_queues,
    render_run_table,
    run_compare,
    stdout_console,
)
from idlegate.evaluation.suites import (
    DEMO_EXECUTORS,
    DEMO_LOAD,
    DEMO_STREAMED_JOBS,
    DEMO_WORKLOAD,
    EvaluateConfig,
)
from idlegate.flags import Given, flags, user_errors

app = typer.Typer(rich_markup_mode=None)

DEMO_SCHEDULERS: tuple[str, ...] = (
    *("fifo", "lcfs", "random", "sjf-cp", "srpt", "fair", "weighted-fair"),
    *("learned:default", "default"),
)
"""The demo's rows: the rules, the shipped ONNX policy, and `default`, the portfolio that
follows the best of them on replays of its own recent workflows (docs/brain.md)."""
DEMO_SEEDS = 5


# -- the options that are no config's ---------------------------------------------------

OutOpt = Annotated[Path | None, typer.Option("--out", help="Write the reports here.")]
HISTORY_FORMATS: Final = "(.jsonl: JSON Lines, .json: JSON, else YAML)"
"""How a history file's name picks its format (`sim.history.write_history`)."""


def history_out(more: str = "") -> Any:
    """The ``--out``/``-o`` option of a history command that writes to standard output
    by default; `more` adds to its help."""
    return typer.Option(
        "--out",
        "-o",
        help=f"Write the history here {HISTORY_FORMATS}; default: YAML on standard output." + more,
    )


RayOpt = Annotated[
    str | None,
    typer.Option(
        "--ray",
        help="Run the simulations on Ray instead of local processes (--jobs is then unused): "
        "auto (a new local instance on all cores) or a running cluster's head address "
        "host:port (each node needs idlegate and the files named on the command line). "
        "Needs pip install 'idlegate[ray]'.",
    ),
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print the result as JSON.")]
WorkloadOpt = Annotated[
    str, typer.Option("--workload", "-w", help=CompareConfig.model_fields["workload"].description)
]


@app.command()
@flags(options=WorkloadOptions)
def simulate(
    options: Given,
    workload: WorkloadOpt = "tpch-like",
    scheduler: Annotated[
        str,
        typer.Option(
            "--scheduler",
            "-s",
            help="Scheduler spec, e.g. default (the portfolio), fair, sjf-cp, analytic:fair, "
            "learned:PATH.onnx.",
        ),
    ] = "default",
    seed: Annotated[int, typer.Option("--seed", help="Seed of arrivals and durations.")] = 0,
    as_json: JsonOpt = False,
) -> None:
    """Simulate one scheduler on one workload and print its metrics (a self-tuning
    scheduler also prints what it followed, round by round, and why)."""
    from idlegate.progress import stderr_progress

    with stderr_progress("simulating: arrivals", None) as update:
        out = run_one(
            workload,
            scheduler,
            seed,
            WorkloadOptions(**options),
            lambda arrived, total: update(arrived, total, ""),
        )
    if as_json:
        followed = {} if out.followed is None else {"followed": out.followed}
        typer.echo(
            json.dumps({**out.metrics.to_dict(), **followed, **(out.queues or {})}, indent=2)
        )
    else:
        console = stdout_console()
        console.print(render_run_table(out.metrics))
        if out.followed is not None:
            console.print(render_followed(out.followed, console.width))
        if out.queues is not None:
            console.print(render_queues(out.queues, console.width))


@app.command()
@flags(config=CompareConfig, options=WorkloadOptions)
def compare(
    config: Given, options: Given, out: OutOpt = None, ray: RayOpt = None, as_json: JsonOpt = False
) -> None:
    """Compare schedulers on the same arrival sequences over several seeds.

    --out gets compare.json, compare.md and jct_cdf.png; --json prints the comparison as
    JSON (summaries, runs, setting; no table).
    """
    settings = CompareConfig(**config, options=options)
    cmp, paths, elapsed = run_compare(settings, out, ray)
    if as_json:
        typer.echo(json.dumps(cmp.to_dict(include_jct=False), indent=2))
        for p in paths.values():  # stdout stays one JSON document
            typer.echo(f"wrote {p}", err=True)
    else:
        print_compare(stdout_console(), cmp, paths, elapsed)


def _default_jobs() -> int:
    return max(1, min(4, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 1))


@app.command()
def demo(
    out: Annotated[
        Path, typer.Option("--out", help="Where to write the table, JSON and CDF plot.")
    ] = Path("out/demo"),
    jobs: Annotated[
        int | None, typer.Option("--jobs", "-j", help="Worker processes (default: CPUs, ≤ 4).")
    ] = None,
) -> None:
    """Compare the heuristics, the shipped learned policy and default on TPC-H-like DAGs.

    Seven heuristics, the bundled ONNX policy (learned:default) and default (the
    portfolio, which follows the best of them on replays of its recent workflows), 50
    executors, 1 + 100 streamed jobs at offered load 0.85, 5 seeds: a table of mean ± 95 %
    CI and the JCT CDF in --out. No data needed.
    """
    with user_errors():
        # as compare says it (the config would name its field: 'the comparison: jobs')
        if jobs is not None and jobs < 1:
            raise IdlegateError(
                f"-j/--jobs: Input should be greater than or equal to 1 (given {jobs})"
            )
        config = CompareConfig(
            workload=DEMO_WORKLOAD,
            schedulers=DEMO_SCHEDULERS,
            seeds=DEMO_SEEDS,
            baseline="fair",
            options=WorkloadOptions(
                num_executors=DEMO_EXECUTORS,
                load=DEMO_LOAD,
                extra={"num_stream": DEMO_STREAMED_JOBS},
            ),
            jobs=jobs if jobs is not None else _default_jobs(),
        )
        print_compare(stdout_console(), *run_compare(config, out))


@app.command("operator")
@flags(settings=Settings)
def operator_command(
    settings: Given,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Debug logging.")] = False,
) -> None:
    """Run the Kubernetes operator: DagWorkflows in, policy-released task pods out."""
    from idlegate.operator.main import run

    run(Settings(**settings), verbose=verbose)


def _history_file(path: Path) -> Path:
    """The history argument, checked as click reads it: before the options' values, which
    the command checks after (a wrong file is reported first)."""
    from idlegate.sim.history import check_history_file

    with user_errors():
        check_history_file(path)
    return path


@app.command()
@flags(config=AdviseConfig)
def advise(
    config: Given,
    history: Annotated[
        Path,
        typer.Argument(
            metavar="HISTORY",
            help="A history file (idlegate history export or history simulate).",
            callback=_history_file,
        ),
    ],
    out: OutOpt = None,
    ray: RayOpt = None,
) -> None:
    """Replay a cluster's history under every candidate and recommend what to run.

    Reports on the last part of the history (--train-fraction), paired against what the
    cluster ran; --out gets advise.md/.json, jct_cdf.png and jct_by_hour.png.
    """
    from idlegate.evaluation.advise import run_advise
    from idlegate.evaluation.advise_report import to_markdown, write_advice
    from idlegate.evaluation.files import check_out_dir
    from idlegate.evaluation.pool import open_runs_pool
    from idlegate.progress import stderr_progress

    settings = AdviseConfig(**config)
    if out is not None:
        check_out_dir(out)  # fail before the runs, not after
    # (the progress says what it replays once the history loaded: else one line of error)
    what = f"replaying {history.name} ({settings.seeds} seeds per candidate)"
    with open_runs_pool(settings.jobs, ray) as pool, stderr_progress(what, warmup=True) as bar:
        advice = run_advise(
            history,
            settings,
            lambda done, total, name, seed: bar(done, total, f"{name} seed {seed}"),
            pool,
        )
    typer.echo(to_markdown(advice))
    from idlegate.operator.forecasting.book import accuracy
    from idlegate.sim.history import load_history

    if (said := accuracy(load_history(history))) is not None:  # (the operator's sink has them)
        typer.echo(said)
    for p in (write_advice(advice, out) if out is not None else {}).values():
        typer.echo(f"wrote {p}", err=True)


@app.command()
@flags(config=EvaluateConfig)
def evaluate(config: Given, out: OutOpt = None, ray: RayOpt = None) -> None:
    """Evaluate learned policies against the baselines on paired seeds (mean ± 95 % CI).

    --out gets evaluation.md/.json, per-workload reports and plots.
    """
    from idlegate.evaluation.console import run_cli

    run_cli(EvaluateConfig(**config), out, ray)
