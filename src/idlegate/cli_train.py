"""The training commands: ``train``, ``export-onnx``, ``train-inspector`` and
``train-window`` (imported only when one of them runs: `idlegate.cli_lazy`)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from idlegate.errors import IdlegateError
from idlegate.evaluation.comparison import WorkloadOptions
from idlegate.evaluation.console import stdout_console
from idlegate.flags import Given, flags, user_errors
from idlegate.training.config import InspectorConfig, TrainConfig, WindowTrainConfig

app = typer.Typer(rich_markup_mode=None)


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
    console = stdout_console()
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
        from idlegate.textfiles import check_out_file

        check_out_file(output, "the ONNX policy", (".onnx",))  # (not any file it is given)
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
