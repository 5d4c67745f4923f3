"""The ``idlegate`` command line: simulate one run, compare schedulers, run the demo.

Errors a user can fix (:class:`~idlegate.errors.IdlegateError`) are caught here, at the
edge, and printed as one line ``Error: <message>`` on stderr with exit code 1; usage
errors keep typer's exit code 2. Anything else escaping is a bug and shows a traceback.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console

from idlegate import __version__
from idlegate.errors import IdlegateError
from idlegate.evaluation.comparison import CompareConfig, WorkloadOptions, run_one
from idlegate.evaluation.console import print_compare, render_run_table, run_compare
from idlegate.evaluation.suites import (
    DEMO_EXECUTORS,
    DEMO_LOAD,
    DEMO_STREAMED_JOBS,
    DEMO_WORKLOAD,
    parse_list,
)
from idlegate.operator.podsecurity import Level

app = typer.Typer(
    name="idlegate",
    help="Idle-aware DAG workflow scheduling: simulate and compare schedulers.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

DEMO_SCHEDULERS: tuple[str, ...] = (
    "fifo",
    "lcfs",
    "random",
    "sjf-cp",
    "srpt",
    "fair",
    "weighted-fair",
    "learned=default",
)
DEMO_SEEDS = 5


@contextmanager
def _user_errors() -> Iterator[None]:
    """Turn an IdlegateError into one line on stderr and exit code 1 (and only that type)."""
    try:
        yield
    except IdlegateError as e:
        typer.echo(f"Error: {_one_line(e)}", err=True)
        raise typer.Exit(1) from None


def _one_line(error: IdlegateError) -> str:
    return " ".join(str(error).split()) or type(error).__name__


def _stdout() -> Console:
    """Console for results: the terminal's width, or 120 columns when piped (no 80-col wrap)."""
    console = Console()
    return console if console.is_terminal else Console(width=120)


# -- shared workload options -----------------------------------------------------------

WorkloadOpt = Annotated[
    str,
    typer.Option(
        "--workload", "-w", help="Workload: synthetic, bursty, tpch, tpch-like, mixed, file."
    ),
]
ExecutorsOpt = Annotated[
    int | None, typer.Option("--executors", "-k", help="Executors in the cluster (K).")
]
InterarrivalOpt = Annotated[
    float | None, typer.Option("--interarrival", help="Mean seconds between job arrivals.")
]
LoadOpt = Annotated[
    float | None, typer.Option("--load", help="Target offered load (instead of --interarrival).")
]
JobsCountOpt = Annotated[
    int | None, typer.Option("--jobs-count", help="Total jobs in the arrival sequence.")
]
TpchDirOpt = Annotated[
    Path | None,
    typer.Option("--tpch-dir", help="Directory of TPC-H traces (workload tpch)."),
]
FileOpt = Annotated[Path | None, typer.Option("--file", help="Workload file (workload file).")]
AlphaOpt = Annotated[
    float | None, typer.Option("--alpha", help="Fraction of synthetic jobs (workload mixed).")
]
OptionOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--option",
        "-o",
        help="Any other workload option as KEY=VALUE (repeatable), e.g. "
        "size_distribution=pareto, burstiness=20 (options per workload: docs/workloads.md).",
    ),
]
RayOpt = Annotated[
    str | None,
    typer.Option(
        "--ray",
        help="Run the simulations on Ray instead of local processes (--jobs/--workers are "
        "then unused): auto (a new local instance on all cores) or a running cluster's head "
        "address host:port (each node needs idlegate and the files named on the command "
        "line). Needs pip install 'idlegate\\[ray]'.",  # \[: rich markup would eat [ray]
    ),
]


# -- commands --------------------------------------------------------------------------


def _workload_options(
    executors: int | None,
    interarrival: float | None,
    load: float | None,
    jobs_count: int | None,
    tpch_dir: Path | None,
    file: Path | None,
    alpha: float | None,
    options: list[str] | None = None,
) -> WorkloadOptions:
    """The workload flags shared by `simulate`, `compare` and `train`, as build_workload options."""
    return WorkloadOptions(
        num_executors=executors,
        interarrival=interarrival,
        load=load,
        num_jobs=jobs_count,
        tpch_dir=tpch_dir,
        path=file,
        alpha=alpha,
        extra=_key_values(options),
    )


def _key_values(pairs: list[str] | None) -> dict[str, str]:
    """`--option KEY=VALUE` flags as a dict (the workload's config validates the values)."""
    out: dict[str, str] = {}
    for pair in pairs or []:
        key, sep, value = pair.partition("=")
        key = key.strip().replace("-", "_")
        if not sep or not key:
            raise IdlegateError(
                f"--option {pair!r}: write KEY=VALUE, e.g. size_distribution=pareto"
            )
        if key in out:
            raise IdlegateError(f"--option {key} is given twice; give each option once")
        out[key] = value.strip()
    return out


@app.command()
def version() -> None:
    """Print the idlegate version."""
    typer.echo(f"idlegate {__version__}")


@app.command()
def simulate(
    workload: WorkloadOpt = "tpch-like",
    scheduler: Annotated[
        str, typer.Option("--scheduler", "-s", help="Scheduler spec, e.g. fair, learned:default.")
    ] = "fair",
    seed: Annotated[int, typer.Option("--seed", help="Seed of arrivals and durations.")] = 0,
    executors: ExecutorsOpt = None,
    interarrival: InterarrivalOpt = None,
    load: LoadOpt = None,
    jobs_count: JobsCountOpt = None,
    tpch_dir: TpchDirOpt = None,
    file: FileOpt = None,
    alpha: AlphaOpt = None,
    option: OptionOpt = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the metrics as JSON.")] = False,
) -> None:
    """Simulate one scheduler on one workload and print its metrics."""
    with _user_errors():
        opts = _workload_options(
            executors, interarrival, load, jobs_count, tpch_dir, file, alpha, option
        )
        out = run_one(workload, scheduler, seed, opts)
        if as_json:
            typer.echo(json.dumps(out.metrics.to_dict(), indent=2))
        else:
            _stdout().print(render_run_table(out.metrics))


@app.command()
def compare(
    workload: WorkloadOpt = "tpch-like",
    schedulers: Annotated[
        str,
        typer.Option(
            "--schedulers",
            help="Comma-separated scheduler specs (fair, analytic:BASE, learned:PATH.onnx, "
            "default, ...), each optionally LABEL=SPEC.",
        ),
    ] = "fifo,fair,sjf-cp,weighted-fair",
    seeds: Annotated[int, typer.Option("--seeds", help="Number of seeds (paired runs).")] = 5,
    first_seed: Annotated[int, typer.Option("--first-seed", help="First seed.")] = 0,
    baseline: Annotated[
        str | None,
        typer.Option("--baseline", help='Reference of the % column (default "fair").'),
    ] = None,
    out: Annotated[
        Path | None,
        typer.Option("--out", help="Write compare.json, compare.md, jct_cdf.png here."),
    ] = None,
    jobs: Annotated[int, typer.Option("--jobs", "-j", help="Worker processes.")] = 1,
    ray: RayOpt = None,
    executors: ExecutorsOpt = None,
    interarrival: InterarrivalOpt = None,
    load: LoadOpt = None,
    jobs_count: JobsCountOpt = None,
    tpch_dir: TpchDirOpt = None,
    file: FileOpt = None,
    alpha: AlphaOpt = None,
    option: OptionOpt = None,
    as_json: Annotated[
        bool,
        typer.Option(
            "--json", help="Print the comparison as JSON (summaries, runs, setting; no table)."
        ),
    ] = False,
) -> None:
    """Compare schedulers on the same arrival sequences over several seeds."""
    with _user_errors():
        if seeds < 1:
            raise IdlegateError(f"--seeds must be at least 1, got {seeds}")
        config = CompareConfig(
            workload=workload,
            schedulers=parse_list(schedulers),
            seeds=tuple(range(first_seed, first_seed + seeds)),
            baseline=baseline,
            options=_workload_options(
                executors, interarrival, load, jobs_count, tpch_dir, file, alpha, option
            ),
            jobs=jobs,
        )
        cmp, paths, elapsed = run_compare(config, out, ray)
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
    ] = Path("idlegate-demo"),
    jobs: Annotated[
        int | None, typer.Option("--jobs", "-j", help="Worker processes (default: CPUs, ≤ 4).")
    ] = None,
) -> None:
    """Compare the heuristics and the shipped learned policy on TPC-H-like DAGs (no data needed).

    Seven heuristics and the bundled ONNX policy, 50 executors, 1 + 100 streamed jobs at
    offered load 0.85, 5 seeds: a table of mean ± 95 % CI and the JCT CDF in --out.
    """
    with _user_errors():
        config = CompareConfig(
            workload=DEMO_WORKLOAD,
            schedulers=DEMO_SCHEDULERS,
            seeds=tuple(range(DEMO_SEEDS)),
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
def operator_command(
    pool_size: Annotated[
        int,
        typer.Option(
            "--pool-size", help="Executors: task pods that may run at once, cluster-wide."
        ),
    ],
    scheduler: Annotated[
        str | None,
        typer.Option(
            "--scheduler",
            "-s",
            help="A scheduler spec as for `simulate` (fair, analytic:fair, "
            "learned:PATH.onnx, a bare PATH.onnx); default: the spec default, the bundled "
            "ONNX policy, or fair with a warning if it is missing or broken.",
        ),
    ] = None,
    namespace: Annotated[
        list[str] | None,
        typer.Option("--namespace", "-n", help="Serve only this namespace (repeatable)."),
    ] = None,
    standalone: Annotated[
        bool, typer.Option("--standalone", help="No kopf peering (one replica owns the pool).")
    ] = False,
    metrics_port: Annotated[
        int, typer.Option("--metrics-port", help="Prometheus /metrics port.")
    ] = 9090,
    health_port: Annotated[int, typer.Option("--health-port", help="/healthz port.")] = 8080,
    kubeconfig: Annotated[
        Path | None,
        typer.Option("--kubeconfig", help="Kubeconfig; default: in-cluster, else $KUBECONFIG."),
    ] = None,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Debug logging.")] = False,
) -> None:
    """Run the Kubernetes operator: DagWorkflows in, policy-released task pods out."""
    with _user_errors():
        from idlegate.operator.main import run
        from idlegate.operator.settings import Settings

        settings = Settings(
            pool_size=pool_size,
            policy=scheduler,
            namespaces=tuple(namespace or ()),
            standalone=standalone,
            metrics_port=metrics_port,
            health_port=health_port,
            kubeconfig=kubeconfig,
        )
        run(settings, verbose=verbose)


@app.command()
def lint(
    files: Annotated[
        list[str],
        typer.Argument(
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
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as JSON.")] = False,
) -> None:
    """Check DagWorkflow manifests offline with the operator's checks; exit 1 if any fails."""
    with _user_errors():
        from idlegate.operator.lint import lint_paths
        from idlegate.operator.podsecurity import NamespacePolicy, parse_service_accounts

        policy = NamespacePolicy(pod_security, parse_service_accounts(allowed_service_accounts))
        report = lint_paths(files, pool_size=pool_size, policy=policy)
    if as_json:
        typer.echo(json.dumps(report.to_json(), indent=2))
    else:
        for problem in report.problems:
            typer.echo(str(problem))
        for note in report.notes:
            typer.echo(f"note: {note}", err=True)
        typer.echo(report.summary(), err=True)
    if not report.ok:
        raise typer.Exit(1)


@app.command()
def train(
    preset: Annotated[
        str | None, typer.Option("--preset", help="Base settings: quick (≤ 10 min) or full.")
    ] = None,
    config: Annotated[
        Path | None,
        typer.Option("--config", help="YAML file of settings, merged over the preset."),
    ] = None,
    out: Annotated[
        Path | None, typer.Option("--out", help="Output directory (default: the config's).")
    ] = None,
    workers: Annotated[
        int | None, typer.Option("--workers", help="Rollout worker processes.")
    ] = None,
    ray: RayOpt = None,
    iterations: Annotated[
        int | None, typer.Option("--iterations", help="REINFORCE iterations (override).")
    ] = None,
    resume: Annotated[
        bool, typer.Option("--resume", help="Continue the run in --out from checkpoint.pt.")
    ] = False,
    workload: Annotated[
        str | None,
        typer.Option(
            "--workload",
            "-w",
            help="Train on this workload (replaces the config's workload; validation uses "
            "it too), e.g. --workload file --file history.yaml.",
        ),
    ] = None,
    executors: ExecutorsOpt = None,
    interarrival: InterarrivalOpt = None,
    load: LoadOpt = None,
    jobs_count: JobsCountOpt = None,
    file: FileOpt = None,
    option: OptionOpt = None,
) -> None:
    """Train the learned policy (BC warm start, then REINFORCE) and write checkpoints."""
    with _user_errors():
        from idlegate.training.config import load_config
        from idlegate.training.reinforce import train as run_training

        opts = _workload_options(
            executors, interarrival, load, jobs_count, None, file, None, option
        ).to_kwargs()
        cfg = load_config(
            config,
            preset,
            out_dir=str(out) if out is not None else None,
            workers=workers,
            ray=ray,
            iterations=iterations,
            resume=resume or None,
            workload=train_workload(workload, opts),
        )
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


@app.command("export-onnx")
def export_onnx_command(
    checkpoint: Annotated[Path, typer.Argument(help="A checkpoint written by idlegate train.")],
    output: Annotated[Path, typer.Argument(help="Where to write the ONNX policy.")],
) -> None:
    """Export a trained checkpoint as an ONNX policy (for the operator and `OnnxPolicy`)."""
    with _user_errors():
        from idlegate.policy.onnx_export import export_onnx

        meta = export_onnx(checkpoint, output)
        typer.echo(
            f"wrote {output} (feature schema {meta['idlegate.feature_schema_version']}, "
            f"G={meta['idlegate.idle_levels']}, config {meta['idlegate.config_hash']})"
        )


@app.command("train-inspector")
def train_inspector_command(
    file: Annotated[Path, typer.Option("--file", help="The SWF trace (trains on its first 20 %).")],
    base: Annotated[
        str, typer.Option("--base", help="The rigid base: ORDER, strict:ORDER or easy:ORDER.")
    ] = "easy:sjf",
    out: Annotated[Path, typer.Option("--out", help="Where to write the ONNX inspector.")] = Path(
        "out/inspector.onnx"
    ),
    iterations: Annotated[int | None, typer.Option("--iterations", help="PPO iterations.")] = None,
    seed: Annotated[int | None, typer.Option("--seed", help="Weights and windows seed.")] = None,
    time_limit: Annotated[
        float | None, typer.Option("--time-limit", help="Stop after this many seconds.")
    ] = None,
    sequences: Annotated[
        int | None, typer.Option("--sequences", help="Windows per iteration.")
    ] = None,
    rollouts: Annotated[int | None, typer.Option("--rollouts", help="Rollouts per window.")] = None,
    ask: Annotated[
        str | None, typer.Option("--ask", help="blocked (default) or all: which picks to inspect.")
    ] = None,
    advantage: Annotated[
        str | None, typer.Option("--advantage", help="probes (default) or rollouts.")
    ] = None,
    warm_start_delay: Annotated[
        float | None,
        typer.Option(
            "--warm-start-delay",
            help="First clone 'accept a blocked pick iff it starts within S s' (seconds).",
        ),
    ] = None,
) -> None:
    """Train a SchedInspector-style inspector with PPO and export it (docs/inspector.md)."""
    with _user_errors():
        from idlegate.training.inspector import load_inspector_config, train_inspector

        cfg = load_inspector_config(
            trace=str(file),
            base=base,
            out=str(out),
            iterations=iterations,
            seed=seed,
            time_limit=time_limit,
            sequences=sequences,
            rollouts=rollouts,
            ask=ask,
            advantage=advantage,
            warm_start_delay=warm_start_delay,
        )
        result = train_inspector(cfg, progress=lambda line: typer.echo(line))
        typer.echo(
            f"trained {result.iterations} iterations in {result.wall_seconds:.0f} s; validation "
            f"bsld: base {result.base_val_bsld:.1f}, reject rule {result.reject_val_bsld:.1f}, "
            f"inspector {result.best_val_bsld:.1f} "
            f"(R {result.best_reward:+.3f}, iteration {result.best_iteration}); wrote {result.out}"
        )


@app.command("train-window")
def train_window_command(
    out: Annotated[Path, typer.Option("--out", help="Where to write the ONNX model.")],
    m_head: Annotated[int, typer.Option("--m-head", help="Head slots (oldest jobs).")] = 8,
    m_tail: Annotated[int, typer.Option("--m-tail", help="Tail slots (newest); 0: head-only.")] = 8,
    iterations: Annotated[int | None, typer.Option("--iterations", help="PPO iterations.")] = None,
    seed: Annotated[int | None, typer.Option("--seed", help="Weights and episodes seed.")] = None,
    workload: Annotated[
        str | None, typer.Option("--workload", "-w", help="lublin (default) or swf.")
    ] = None,
    file: Annotated[Path | None, typer.Option("--file", help="The SWF trace (swf).")] = None,
    jobs_count: JobsCountOpt = None,
    time_limit: Annotated[
        float | None, typer.Option("--time-limit", help="Stop after this many seconds.")
    ] = None,
) -> None:
    """Train the split-window agent (Deep Back-Filling) with PPO and export it (docs/window.md)."""
    with _user_errors():
        from idlegate.training.window import make_config, train_window

        cfg = make_config(
            m_head=m_head,
            m_tail=m_tail,
            iterations=iterations,
            seed=seed,
            workload=workload,
            file=str(file) if file is not None else None,
            num_jobs=jobs_count,
            max_minutes=time_limit / 60 if time_limit is not None else None,
        )
        result = train_window(cfg, out, log=typer.echo)
        typer.echo(
            f"trained {result.iterations} iterations in {result.wall_seconds:.0f} s; best "
            f"validation avg wait {result.best_val_wait:.0f} s (iteration "
            f"{result.best_iteration}); wrote {result.out}"
        )


@app.command()
def evaluate(
    schedulers: Annotated[
        list[str],
        typer.Option(
            "--schedulers",
            help="Scheduler specs to evaluate, each optionally LABEL=SPEC (repeatable or "
            "comma-separated), e.g. learned=a.onnx learned-no-idle=b.onnx "
            "lookahead=lookahead:srpt lookahead-base=srpt.",
        ),
    ],
    suite: Annotated[
        str, typer.Option("--suite", help="quick (1-2 min) or full (the issue's workloads).")
    ] = "quick",
    seeds: Annotated[
        int | None, typer.Option("--seeds", help="Seeds per workload (default 3 quick, 10 full).")
    ] = None,
    first_seed: Annotated[
        int,
        typer.Option("--first-seed", help="First seed; never one the models trained on."),
    ] = 1000,
    out: Annotated[
        Path | None,
        typer.Option("--out", help="Write evaluation.md/.json, per-workload reports, plots."),
    ] = None,
    jobs: Annotated[int, typer.Option("--jobs", "-j", help="Worker processes.")] = 1,
    ray: RayOpt = None,
    tpch_dir: TpchDirOpt = None,
    workloads: Annotated[
        str | None,
        typer.Option(
            "--workloads", help="Only these workloads (keys or families), comma-separated."
        ),
    ] = None,
    training_log: Annotated[
        Path | None,
        typer.Option("--training-log", help="A training CSV (train_log.csv) to plot."),
    ] = None,
    sweep: Annotated[
        bool, typer.Option("--sweep/--no-sweep", help="Run the idle-length sweep (Fig. 6).")
    ] = True,
) -> None:
    """Evaluate learned policies against the baselines on paired seeds (mean ± 95 % CI)."""
    with _user_errors():
        from idlegate.evaluation.console import run_cli
        from idlegate.evaluation.suites import EvaluateConfig

        config = EvaluateConfig(
            models=parse_list(schedulers),
            suite=suite,
            seeds=seeds,
            first_seed=first_seed,
            jobs=jobs,
            tpch_dir=tpch_dir,
            workloads=parse_list(workloads) if workloads is not None else None,
            training_log=training_log,
            sweep=sweep,
        )
        run_cli(config, out, ray)


def main(argv: list[str] | None = None) -> None:
    """Console-script entry point (``idlegate``, ``python -m idlegate``)."""
    run: Callable[..., Any] = app
    try:
        run(args=argv if argv is not None else sys.argv[1:], prog_name="idlegate")
    except IdlegateError as e:  # raised outside a command (the commands catch their own)
        typer.echo(f"Error: {_one_line(e)}", err=True)
        sys.exit(1)
