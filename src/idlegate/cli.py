"""The ``idlegate`` command line: simulate one run, compare schedulers, train, run the operator.

The options of `compare`, `evaluate`, `train`, `train-inspector`, `train-window` and
`operator` are the fields of their configs (`idlegate.flags`): each command turns the
flags given into its typed config and runs it. Errors a user can fix
(:class:`~idlegate.errors.IdlegateError`) are caught at this edge and printed as one line
``Error: <message>`` on stderr with exit code 1; usage errors keep typer's exit code 2.
Anything else escaping is a bug and shows a traceback.

This module holds the light commands (``version``, ``lint``, ``visibility``,
``dashboard``); the others are in modules imported only when they run (`LAZY`,
`idlegate.cli_lazy`), so that ``idlegate --help`` and the light commands start without
the simulator, the evaluation or numpy (benchmarks/cli_start.py measures it).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from typing import Annotated, Any, ClassVar, cast

import typer

from idlegate import __version__
from idlegate.api.pod_levels import Level
from idlegate.api.samples import HISTORY_SAMPLES
from idlegate.cli_lazy import Command, Lazy, LazyGroup
from idlegate.dashboard.commands import register as register_dashboard
from idlegate.errors import IdlegateError
from idlegate.flags import missing_extra, one_line, user_errors


class Commands(LazyGroup):
    """The command line's group: the heavy commands, each in its module, in the order
    ``idlegate --help`` lists them after the light ones."""

    LAZY: ClassVar[dict[str, Lazy]] = {
        "simulate": Lazy(
            "idlegate.cli_run",
            "Simulate one scheduler on one workload and print its metrics (a self-tuning "
            "scheduler also prints what it followed, round by round, and why).",
        ),
        "compare": Lazy(
            "idlegate.cli_run",
            "Compare schedulers on the same arrival sequences over several seeds.",
        ),
        "demo": Lazy(
            "idlegate.cli_run",
            "Compare the heuristics, the shipped learned policy and default on TPC-H-like DAGs.",
        ),
        "operator": Lazy(
            "idlegate.cli_run",
            "Run the Kubernetes operator: DagWorkflows in, policy-released task pods out.",
        ),
        "train": Lazy(
            "idlegate.cli_train",
            "Train the learned policy (BC warm start, then REINFORCE) and write checkpoints.",
        ),
        "advise": Lazy(
            "idlegate.cli_run",
            "Replay a cluster's history under every candidate and recommend what to run.",
        ),
        "export-onnx": Lazy(
            "idlegate.cli_train",
            "Export a trained checkpoint as an ONNX policy (for the operator and `OnnxPolicy`).",
        ),
        "train-inspector": Lazy(
            "idlegate.cli_train",
            "Train a SchedInspector-style inspector with PPO and export it (docs/inspector.md).",
        ),
        "train-window": Lazy(
            "idlegate.cli_train",
            "Train the split-window agent (Deep Back-Filling) with PPO and export it "
            "(docs/window.md).",
        ),
        "evaluate": Lazy(
            "idlegate.cli_run",
            "Evaluate learned policies against the baselines on paired seeds (mean ± 95 % CI).",
        ),
        "history": Lazy(
            "idlegate.cli_history",
            "History files: export the cluster's, import Airflow's runs or Alibaba's trace, "
            "or simulate one (docs/workloads.md).",
        ),
        "forecast": Lazy(
            "idlegate.cli_forecast",
            "Forecasts of when waiting workflows start and finish (docs/forecast.md).",
        ),
    }


app = typer.Typer(
    name="idlegate",
    cls=Commands,
    help="Idle-aware DAG workflow scheduling: simulate and compare schedulers.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    # plain help: rich's tables cut long flag names at 80 columns (and when piped)
    rich_markup_mode=None,
)
app.callback()(lambda: None)  # (a group even before a lazy command is loaded)


@app.command()
def version() -> None:
    """Print the idlegate version."""
    typer.echo(f"idlegate {__version__}")


@app.command()
def lint(
    files: Annotated[
        list[str],
        typer.Argument(
            metavar="FILE",
            help="Manifests: YAML or JSON files, directories (their *.yaml, *.yml, *.json, "
            "recursively) or - for standard input.",
        ),
    ],
    pool_size: Annotated[
        int | None,
        typer.Option(
            "--pool-size",
            min=1,
            help="Also check gang stages against this pool (as the operator).",
        ),
    ] = None,
    pool_resources: Annotated[
        str | None,
        typer.Option(
            "--pool-resources",
            help="Also check each stage's requests against a pool of these resources, "
            "e.g. cpu=8,memory=32Gi,nvidia.com/gpu=2 (the operator's --pool-resources).",
        ),
    ] = None,
    pool_nodes: Annotated[
        str | None,
        typer.Option(
            "--pool-nodes",
            help="The operator's --pool-nodes: a pool that follows the nodes this label "
            "selector picks (pool=batch,gpu,!spot). Checked as the operator reads it; the "
            "nodes are the cluster's, so no stage is checked against them (one that fits no "
            "node waits, it is not Invalid). Not with --pool-resources.",
        ),
    ] = None,
    pod_security: Annotated[
        Level,
        typer.Option(
            "--pod-security",
            help="Pod Security level the templates must meet (the target namespace's; "
            "the operator's default is baseline).",
        ),
    ] = Level.BASELINE,
    allowed_service_accounts: Annotated[
        str,
        typer.Option(
            "--allowed-service-accounts",
            help="Service accounts templates may name, comma-separated (the target "
            "namespace's idlegate.io/allowed-service-accounts annotation).",
        ),
    ] = "",
    history_samples: Annotated[
        int,
        typer.Option(
            "--history-samples",
            help="The operator's --history-samples: a workflow's size counts as many "
            "measured durations a stage in its status.",
        ),
    ] = HISTORY_SAMPLES,
    forecast_arrivals: Annotated[
        str,
        typer.Option(
            "--forecast-arrivals",
            help="The operator's --forecast-arrivals: note pools that would fall back to poisson.",
        ),
    ] = "none",
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as JSON.")] = False,
) -> None:
    """Check DagWorkflow, DagCronWorkflow and ExecutorPool manifests offline with the
    operator's checks (bare workflows as simulate -w file reads them), and print the job
    each Argo Workflow and Airflow DAG export maps to; exit 1 if any fails."""
    with user_errors():
        from idlegate.api.lint import lint_paths
        from idlegate.api.lint_pools import pool_options
        from idlegate.api.podsecurity import NamespacePolicy, parse_service_accounts

        report = lint_paths(
            files,
            pool_size=pool_size,
            policy=NamespacePolicy(pod_security, parse_service_accounts(allowed_service_accounts)),
            pool_resources=pool_options(pool_resources, pool_nodes),
            history_samples=history_samples,
            forecast_arrivals=forecast_arrivals,
        )
    out = json.dumps(report.to_json(), indent=2) if as_json else "\n".join(report.lines())
    if out:  # all on stdout, where `lint ... > report.txt` keeps it (stderr: the errors)
        typer.echo(out)
    with user_errors():
        if report.empty and not as_json:
            raise IdlegateError(report.summary())
    if not report.ok:
        raise typer.Exit(1)


register_dashboard(app)  # (`visibility` and `dashboard`: idlegate.dashboard.commands)


def commands() -> dict[str, Command]:
    """Every command of the command line by name, each module imported (for the checks
    of the whole command line: the docs', the packaging's)."""
    return cast(LazyGroup, typer.main.get_command(app)).every_command()


def main(argv: list[str] | None = None) -> None:
    """Console-script entry point (``idlegate``, ``python -m idlegate``)."""
    run: Callable[..., Any] = app
    try:
        run(args=argv if argv is not None else sys.argv[1:], prog_name="idlegate")
    except IdlegateError as e:  # raised outside a command (the commands catch their own)
        typer.echo(f"Error: {one_line(e)}", err=True)
        sys.exit(1)
    except ModuleNotFoundError as e:  # an optional dependency a command needs
        error = missing_extra(e)
        if error is None:
            raise
        typer.echo(f"Error: {one_line(error)}", err=True)
        sys.exit(1)
