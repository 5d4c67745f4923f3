"""The ``idlegate`` command line: simulate one run, compare schedulers, train, run the operator.

The options of `compare`, `evaluate`, `train`, `train-inspector`, `train-window` and
`operator` are the fields of their configs (`idlegate.flags`): each command turns the
flags given into its typed config and runs it. Errors a user can fix
(:class:`~idlegate.errors.IdlegateError`) are caught at this edge and printed as one line
``Error: <message>`` on stderr with exit code 1; usage errors keep typer's exit code 2.
Anything else escaping is a bug and shows a traceback.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, Final

import typer
from rich.console import Console

from idlegate import __version__
from idlegate.api.podsecurity import Level
from idlegate.api.settings import Settings
from idlegate.api.status import HISTORY_SAMPLES
from idlegate.cli_forecast import forecast_app
from idlegate.cli_whatif import register as register_what_if
from idlegate.dashboard.commands import register as register_dashboard
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
from idlegate.flags import Given, flags, missing_extra, one_line, user_errors
from idlegate.training.config import InspectorConfig, TrainConfig, WindowTrainConfig

app = typer.Typer(
    name="idlegate",
    help="Idle-aware DAG workflow scheduling: simulate and compare schedulers.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    # plain help: rich's tables cut long flag names at 80 columns (and when piped)
    rich_markup_mode=None,
)

DEMO_SCHEDULERS: tuple[str, ...] = (
    *("fifo", "lcfs", "random", "sjf-cp", "srpt", "fair", "weighted-fair"),
    *("learned:default", "default"),
)
"""The demo's rows: the rules, the shipped ONNX policy, and `default`, the portfolio that
follows the best of them on replays of its own recent workflows (docs/brain.md)."""
DEMO_SEEDS = 5


def _stdout() -> Console:
    """Console for results (`stdout_console`: the terminal's width, COLUMNS, else 120)."""
    return stdout_console()


# -- the options that are no config's ---------------------------------------------------

OutOpt = Annotated[Path | None, typer.Option("--out", help="Write the reports here.")]
_HISTORY_FORMATS: Final = "(.jsonl: JSON Lines, .json: JSON, else YAML)"
"""How a history file's name picks its format (`sim.history.write_history`)."""


def _history_out(more: str = "") -> Any:
    """The ``--out``/``-o`` option of a history command that writes to standard output
    by default; `more` adds to its help."""
    return typer.Option(
        "--out",
        "-o",
        help=f"Write the history here {_HISTORY_FORMATS}; default: YAML on standard output." + more,
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
def version() -> None:
    """Print the idlegate version."""
    typer.echo(f"idlegate {__version__}")


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
        console = _stdout()
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
        print_compare(_stdout(), cmp, paths, elapsed)


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
        print_compare(_stdout(), *run_compare(config, out))


@app.command("operator")
@flags(settings=Settings)
def operator_command(
    settings: Given,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Debug logging.")] = False,
) -> None:
    """Run the Kubernetes operator: DagWorkflows in, policy-released task pods out."""
    from idlegate.operator.main import run

    run(Settings(**settings), verbose=verbose)


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


history_app = typer.Typer(
    help="History files: export the cluster's, import Airflow's runs or Alibaba's trace, "
    "or simulate one (docs/workloads.md).",
    no_args_is_help=True,
    rich_markup_mode=None,
)
app.add_typer(history_app, name="history")
register_what_if(forecast_app)  # (`idlegate forecast FILE`: idlegate.cli_whatif)
app.add_typer(forecast_app, name="forecast")


@history_app.command("export")
# long: one typer declaration per flag; the work is api.history.export
def history_export(
    source: Annotated[
        str | None,
        typer.Argument(
            metavar="DOCUMENT",
            help="Read DagWorkflows from this document instead of the API: - for standard "
            "input (kubectl get dwf -A -o json | idlegate history export -), or a file.",
        ),
    ] = None,
    out: Annotated[Path | None, _history_out()] = None,
    from_sink: Annotated[
        Path | None,
        typer.Option(
            "--from-sink",
            help="Read the operator's --history-file and its rotated files (history.jsonl: "
            "history.1.jsonl, history.2.jsonl, ... too).",
        ),
    ] = None,
    namespace: Annotated[
        list[str] | None,
        typer.Option(
            "--namespace",
            "-n",
            help="Live workflows of this namespace (repeatable); default: the current context's.",
        ),
    ] = None,
    all_namespaces: Annotated[
        bool, typer.Option("--all-namespaces", "-A", help="Live workflows of every namespace.")
    ] = False,
    since: Annotated[
        str | None,
        typer.Option(
            "--since",
            help="Only workflows that arrived in this last span (7d, 36h, 90m, 600s) or "
            "since this RFC 3339 time.",
        ),
    ] = None,
    kubeconfig: Annotated[
        Path | None,
        typer.Option(
            "--kubeconfig",
            help="A kubeconfig file; default: in-cluster, else $KUBECONFIG or ~/.kube/config.",
        ),
    ] = None,
) -> None:
    """Write the finished workflows' history file: live DagWorkflows, a sink or a document."""
    with user_errors():
        from idlegate.api.history import export
        from idlegate.cli_live import live_workflows

        workflows, note = export(
            out=out,
            source=source,
            sink=from_sink,
            live=lambda namespaces: live_workflows(kubeconfig, namespaces),
            namespaces=namespace or (),
            all_namespaces=all_namespaces,
            since=since,
        )
    if note is not None:
        typer.echo(f"note: {note}", err=True)
    where = f" to {out}" if out is not None else ""
    typer.echo(f"{len(workflows)} finished workflow(s) exported{where}.", err=True)


@history_app.command("airflow")
# long: one typer declaration per flag; the work is integrations.airflow.import_history
def history_airflow(
    url: Annotated[
        str, typer.Option("--url", help="Airflow's API server, e.g. http://airflow:8080.")
    ],
    dag: Annotated[list[str], typer.Option("--dag", help="A DAG id (repeatable).")],
    out: Annotated[Path | None, _history_out(" With --raw, the DAG exports as JSON.")] = None,
    runs: Annotated[
        int, typer.Option("--runs", min=1, help="The most recent finished runs per DAG.")
    ] = 25,
    username: Annotated[
        str | None,
        typer.Option(
            "--username",
            envvar="AIRFLOW_USERNAME",
            help="Log in as this user (its password: AIRFLOW_PASSWORD or --password-file).",
        ),
    ] = None,
    password_file: Annotated[
        Path | None,
        typer.Option(
            "--password-file", help="A file holding the password (else AIRFLOW_PASSWORD)."
        ),
    ] = None,
    token_file: Annotated[
        Path | None,
        typer.Option("--token-file", help="A file holding an API token (JWT; else AIRFLOW_TOKEN)."),
    ] = None,
    api: Annotated[
        str, typer.Option("--api", help="auto, v2 (Airflow 3) or v1 (Airflow 2).")
    ] = "auto",
    raw: Annotated[
        bool,
        typer.Option(
            "--raw",
            help="Write the DAG exports (the REST API's answers) instead of history "
            "records: what idlegate lint and simulate -w file read too.",
        ),
    ] = False,
) -> None:
    """Import the history of Airflow DAGs: their last finished runs, each task instance's
    duration, as a history file for advise, simulate -w file and the operator's start."""
    with user_errors():
        from idlegate.evaluation.files import write_text
        from idlegate.integrations.airflow import AirflowClient, import_history, read_auth
        from idlegate.sim.history import check_history_out, history_text, write_history

        if api not in ("auto", "v1", "v2"):
            raise IdlegateError(f"--api must be auto, v1 or v2, got {api!r}")
        if out is not None:  # (a file either way; before the runs are fetched, not after)
            check_history_out(out)
        auth = read_auth(username, password_file, token_file)
        found = import_history(AirflowClient(url, auth, api=api), dag, runs)
        text = json.dumps(found.exports, indent=1) + "\n" if raw else history_text(found.workflows)
        if out is None:
            typer.echo(text, nl=False)
        elif raw:
            write_text(out, text)
        else:
            write_history(out, found.workflows)
    for note in found.notes:
        typer.echo(f"note: {note}", err=True)
    where = f" to {out}" if out is not None else ""
    what = f"{len(found.exports)} DAG export(s)" if raw else f"{len(found.workflows)} run(s)"
    typer.echo(f"{what} of {len(dag)} DAG(s) written{where}.", err=True)


@history_app.command("alibaba")
def history_alibaba(
    batch_tasks: Annotated[
        Path,
        typer.Argument(
            metavar="BATCH_TASK.CSV",
            help="The trace's batch_task.csv (cluster-trace-v2018), or a part of it.",
        ),
    ],
    out: Annotated[Path | None, _history_out()] = None,
    queue: Annotated[
        str | None,
        typer.Option(
            "--queue",
            help="Every workflow's queueName (the trace names no team), for a replay with "
            "--queues.",
        ),
    ] = None,
) -> None:
    """Convert Alibaba's 2018 batch trace to a history file: each job whose tasks all
    Terminated a workflow, arriving at its first task's start, each task a stage of its
    instances running its measured span; replay it with simulate -w file (docs/workloads.md)."""
    with user_errors():
        from idlegate.progress import stderr_progress
        from idlegate.sim import history

        if out is not None:
            history.check_history_out(out)  # (before minutes of reading, not after)
        with stderr_progress(batch_tasks.name, None) as bar:
            found = history.read_batch_tasks(batch_tasks, bar)
        if not found.workflows:
            raise IdlegateError(found.none_converted(str(batch_tasks)))
        workflows = found.workflows if queue is None else history.in_queue(found.workflows, queue)
        if out is None:
            typer.echo(history.history_text(workflows), nl=False)
        else:
            history.write_history(out, workflows)
    written = f" Written to {out}." if out is not None else ""
    typer.echo(f"{found.summary()}.{written}", err=True)


@history_app.command("simulate")
@flags(options=WorkloadOptions)
def history_simulate(
    options: Given,
    out: Annotated[Path, typer.Option("--out", help=f"Write the history here {_HISTORY_FORMATS}.")],
    workload: WorkloadOpt = "k8s-batch",
    scheduler: Annotated[
        str,
        typer.Option("--scheduler", "-s", help="The scheduler spec the simulated cluster runs."),
    ] = "fair",
    seed: Annotated[int, typer.Option("--seed", help="Seed of arrivals and durations.")] = 0,
) -> None:
    """Make a history without a cluster: a workload run in the simulator, recorded as the
    operator records finished workflows (arrival, DAG, measured durations, JCT, policy,
    pool size).

    Each stage keeps its estimate (taskDurationSeconds) beside the durations drawn
    (measuredDurationSeconds). No lower bound is computed here; that of simulate and
    compare is over the estimates by design (the ones schedulers see), so a replay whose
    draws run shorter than the estimates can show a JCT / lower bound ratio below 1.
    """
    from idlegate.evaluation.comparison import build, check_names
    from idlegate.policy import SchedulerSpec, make_scheduler
    from idlegate.progress import stderr_progress
    from idlegate.sim.history import check_history_out, simulate_history, write_history

    check_history_out(out)  # (before the run, not after)
    check_names(workload)
    spec = SchedulerSpec.parse(scheduler)
    built = build(workload, seed, WorkloadOptions(**options))
    with stderr_progress("simulating: arrivals", None) as update:
        history = simulate_history(
            built,
            make_scheduler(spec),
            seed,
            spec.format(),
            lambda arrived, total: update(arrived, total, ""),
        )
    write_history(out, history)
    typer.echo(
        f"{len(history)} workflow(s) of {workload} run by {spec} written to {out}.", err=True
    )


@app.command()
@flags(defaults=False, settings=TrainConfig, options=WorkloadOptions)
# long: the flags of train that are no config field are declared here
def train(
    settings: Given,
    options: Given,
    config: Annotated[
        Path | None,
        typer.Option("--config", help="YAML file of settings, merged over the preset."),
    ] = None,
    workload: Annotated[
        str | None,
        typer.Option(
            "--workload",
            "-w",
            help="Train on this workload (replaces the config's workload; validation uses "
            "it too), e.g. --workload file --file history.yaml.",
        ),
    ] = None,
    history: Annotated[
        Path | None,
        typer.Option(
            "--history",
            help="Train on the first part of this cluster history (with --preset cluster; "
            "--executors overrides its recorded poolSize); idlegate advise reports on the "
            "rest.",
        ),
    ] = None,
    train_fraction: Annotated[
        float,
        typer.Option(
            "--train-fraction",
            min=0.01,
            max=0.99,
            help="With --history: train on the workflows of this first fraction of its span.",
        ),
    ] = 0.7,
) -> None:
    """Train the learned policy (BC warm start, then REINFORCE) and write checkpoints.

    Every setting below overrides the preset's and the config file's.
    """
    from idlegate.sim.workloads.kinds import check_option_names
    from idlegate.training.config import load_config
    from idlegate.training.reinforce import train as run_training

    given = WorkloadOptions(**options)
    if given.resources is not None:
        raise IdlegateError(
            "--resources: a training workload's pool of resources is given in a config file "
            "(workload.resources, as --preset resources does; docs/resources.md)"
        )
    opts = given.to_kwargs()
    preset = settings.pop("preset", None)
    if history is not None:
        settings |= history_training(history, train_fraction, workload, opts)
    else:
        settings["workload"] = train_workload(workload, opts)
    with given.as_given():
        if workload is not None and history is None:
            # an option the flags' workload does not take, said as simulate and compare
            # say it (with the options -o takes); its values the config checks
            check_option_names(workload, opts)
        cfg = load_config(config, preset, **settings)
    result = run_training(cfg)
    console = _stdout()
    refs = ", ".join(f"{k} {v:.2f}" for k, v in result.reference_jct.items())
    console.print(
        f"trained {result.iterations} iterations in {result.wall_seconds:.0f} s; "
        f"validation avg JCT: learned {result.best_val_jct:.2f} (best, iteration "
        f"{result.best_iteration}), {refs}",
        highlight=False,
    )
    console.print(f"wrote {result.out_dir}/best.pt and policy.onnx", highlight=False)


def train_workload(name: str | None, options: dict[str, Any]) -> dict[str, Any] | None:
    """The training config's `workload` section from `train`'s flags (None: keep the config's)."""
    if name is None:
        if options:
            raise IdlegateError(
                "workload flags (--executors, --load, --file, --option, ...) replace the "
                "training workload, so they need --workload too (e.g. --workload file "
                "--file history.yaml)"
            )
        return None
    return {"name": name, "options": options}


def history_training(
    path: Path, train_fraction: float, workload: str | None, options: dict[str, Any]
) -> dict[str, Any]:
    """`train`'s settings for --history: its history section and train-part workload."""
    from idlegate.training.history import history_settings, history_source

    pool = options.pop("num_executors", None)
    if workload is not None or options:
        raise IdlegateError(
            "--history replays the history itself; drop --workload and the workload "
            "options (only --executors, the pool size, applies)"
        )
    return history_settings(history_source(path, train_fraction, pool))


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
    with open_runs_pool(settings.jobs, ray) as pool, stderr_progress(what) as bar:
        advice = run_advise(
            history,
            settings,
            lambda done, total, name, seed: bar(done, total, f"{name} seed {seed}"),
            pool,
        )
    typer.echo(to_markdown(advice))
    from idlegate.api.forecast_book import accuracy
    from idlegate.sim.history import load_history

    if (said := accuracy(load_history(history))) is not None:  # (the operator's sink has them)
        typer.echo(said)
    for p in (write_advice(advice, out) if out is not None else {}).values():
        typer.echo(f"wrote {p}", err=True)


@app.command("export-onnx")
def export_onnx_command(
    checkpoint: Annotated[
        Path, typer.Argument(metavar="CHECKPOINT", help="A checkpoint written by idlegate train.")
    ],
    output: Annotated[
        Path, typer.Argument(metavar="OUTPUT.ONNX", help="Where to write the ONNX policy.")
    ],
) -> None:
    """Export a trained checkpoint as an ONNX policy (for the operator and `OnnxPolicy`)."""
    with user_errors():
        from idlegate.policy.onnx_export import export_onnx

        meta = export_onnx(checkpoint, output)
        typer.echo(
            f"wrote {output} (feature schema {meta['idlegate.feature_schema_version']}, "
            f"G={meta['idlegate.idle_levels']}, config {meta['idlegate.config_hash']})"
        )


@app.command("train-inspector")
@flags(settings=InspectorConfig)
def train_inspector_command(settings: Given) -> None:
    """Train a SchedInspector-style inspector with PPO and export it (docs/inspector.md)."""
    from idlegate.training.inspector import train_inspector

    result = train_inspector(InspectorConfig(**settings), progress=lambda line: typer.echo(line))
    typer.echo(
        f"trained {result.iterations} iterations in {result.wall_seconds:.0f} s; validation "
        f"bsld: base {result.base_val_bsld:.1f}, reject rule {result.reject_val_bsld:.1f}, "
        f"inspector {result.best_val_bsld:.1f} "
        f"(R {result.best_reward:+.3f}, iteration {result.best_iteration}); wrote {result.out}"
    )


@app.command("train-window")
@flags(settings=WindowTrainConfig)
def train_window_command(
    settings: Given,
    out: Annotated[Path, typer.Option("--out", help="Where to write the ONNX model.")],
) -> None:
    """Train the split-window agent (Deep Back-Filling) with PPO and export it (docs/window.md)."""
    from idlegate.training.window import train_window

    result = train_window(WindowTrainConfig(**settings), out, log=typer.echo)
    typer.echo(
        f"trained {result.iterations} iterations in {result.wall_seconds:.0f} s; best "
        f"validation avg wait {result.best_val_wait:.0f} s (iteration "
        f"{result.best_iteration}); wrote {result.out}"
    )


@app.command()
@flags(config=EvaluateConfig)
def evaluate(config: Given, out: OutOpt = None, ray: RayOpt = None) -> None:
    """Evaluate learned policies against the baselines on paired seeds (mean ± 95 % CI).

    --out gets evaluation.md/.json, per-workload reports and plots.
    """
    from idlegate.evaluation.console import run_cli

    run_cli(EvaluateConfig(**config), out, ray)


register_dashboard(app)  # (`visibility` and `dashboard`: idlegate.dashboard.commands)


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
