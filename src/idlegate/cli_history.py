"""The ``history`` commands: export the cluster's history, import Airflow's runs or
Alibaba's trace, or simulate one (imported only when one runs: `idlegate.cli_lazy`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, cast

import typer

from idlegate.cli_run import HISTORY_FORMATS, WorkloadOpt, history_out
from idlegate.errors import IdlegateError
from idlegate.evaluation.comparison import WorkloadOptions
from idlegate.flags import Given, flags, user_errors

app = typer.Typer(rich_markup_mode=None)

history_app = typer.Typer(
    help="History files: export the cluster's, import Airflow's runs or Alibaba's trace, "
    "or simulate one (docs/workloads.md).",
    no_args_is_help=True,
    rich_markup_mode=None,
)
app.add_typer(history_app, name="history")


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
    out: Annotated[Path | None, history_out()] = None,
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
    out: Annotated[Path | None, history_out(" With --raw, the DAG exports as JSON.")] = None,
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
        from idlegate.integrations.airflow import (
            AirflowClient,
            ApiVersion,
            import_history,
            read_auth,
        )
        from idlegate.sim.history import check_history_out, history_text, write_history

        if api not in ("auto", "v1", "v2"):
            raise IdlegateError(f"--api must be auto, v1 or v2, got {api!r}")
        if out is not None:  # (a file either way; before the runs are fetched, not after)
            check_history_out(out)
        auth = read_auth(username, password_file, token_file)
        found = import_history(AirflowClient(url, auth, api=cast(ApiVersion, api)), dag, runs)
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
    out: Annotated[Path | None, history_out()] = None,
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
    out: Annotated[Path, typer.Option("--out", help=f"Write the history here {HISTORY_FORMATS}.")],
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
