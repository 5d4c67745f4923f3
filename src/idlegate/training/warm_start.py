"""The behaviour-cloning warm start before iteration 0 of `idlegate train` (``bc`` section).

Teacher episodes of a heuristic are recorded in the rollout workers, the model is fitted
to them in this process (`training.bc`), then each DAgger round records the policy's own
episodes labelled by the teacher and fits again on everything so far.
"""

from __future__ import annotations

import math
import time
from dataclasses import asdict
from typing import Any

import numpy as np
from rich.console import Console

from idlegate.policy.model import PolicyNet
from idlegate.progress import stderr_progress
from idlegate.training.bc import (
    BCReport,
    Demonstrations,
    behaviour_cloning,
    merge_demonstrations,
    record_demonstrations,
)
from idlegate.training.config import TrainConfig
from idlegate.training.log import say
from idlegate.training.rollout import CustomTask, RolloutRunner, export_onnx_bytes
from idlegate.training.seeds import draw_seed, workload_ref


def warm_start(
    model: PolicyNet,
    config: TrainConfig,
    runner: RolloutRunner,
    seq: np.random.SeedSequence,
    forbidden: set[int],
    console: Console,
    show_progress: bool = False,
) -> BCReport:
    """Record teacher episodes in the workers, then fit the model (in this process)."""
    bc = config.bc
    t0 = time.perf_counter()
    rng = np.random.default_rng(seq)
    demos = _record(model, config, runner, rng, forbidden)
    say(
        console,
        f"behaviour cloning: {len(demos.observations)} decisions of {bc.heuristic} "
        f"from {bc.episodes} episodes ({time.perf_counter() - t0:.0f} s)",
    )
    report = _fit(model, demos, config, rng, console, show_progress, f"cloning {bc.heuristic}")
    for round_ in range(1, bc.dagger_rounds + 1):
        actor = export_onnx_bytes(model)
        visited = _record(model, config, runner, rng, forbidden, actor)
        say(
            console,
            f"DAgger round {round_}: the policy (avg JCT {visited.avg_jct:.2f} s) visited "
            f"{len(visited.observations)} states, labelled by {bc.heuristic}",
        )
        demos = merge_demonstrations([demos, visited], teacher_avg_jct=demos.avg_jct)
        report = _fit(model, demos, config, rng, console, show_progress, f"DAgger round {round_}")
    report = BCReport(**{**asdict(report), "seconds": time.perf_counter() - t0})
    loss = report.losses[-1] if report.losses else math.nan
    say(
        console,
        f"behaviour cloning: imitation accuracy {report.accuracy:.1%} (stage "
        f"{report.stage_accuracy:.1%}), cross-entropy {loss:.3f}, {report.seconds:.0f} s",
    )
    return report


def _record(
    model: PolicyNet,
    config: TrainConfig,
    runner: RolloutRunner,
    rng: np.random.Generator,
    forbidden: set[int],
    actor_onnx: bytes | None = None,
) -> Demonstrations:
    """`bc.episodes` episodes labelled by the teacher, in the workers; with `actor_onnx`
    (a DAgger round) that policy acts and the teacher only labels."""
    bc = config.bc
    kwargs: tuple[tuple[str, Any], ...] = (
        ("heuristic", bc.heuristic),
        ("model_config", model.config.model_dump()),
        ("max_time", bc.episode_seconds if bc.episode_seconds is not None else math.inf),
    )
    if actor_onnx is not None:
        kwargs += (("actor_onnx", actor_onnx),)
    specs = config.training_workloads
    tasks = []
    for episode in range(bc.episodes):
        seed = draw_seed(rng, forbidden)
        ref = workload_ref(specs[episode % len(specs)], seed)
        tasks.append(CustomTask(ref, seed, record_demonstrations, kwargs))
    return merge_demonstrations(runner.run(None, tasks))


def _fit(
    model: PolicyNet,
    demos: Demonstrations,
    config: TrainConfig,
    rng: np.random.Generator,
    console: Console,
    show_progress: bool,
    what: str,
) -> BCReport:
    """`training.bc.behaviour_cloning` with a progress bar named `what`."""
    bc = config.bc
    with stderr_progress(what, bc.epochs, enabled=show_progress, stream=console.file) as bar:

        def epoch_done(epoch: int, loss: float) -> None:
            bar(epoch + 1, bc.epochs, f"cross-entropy {loss:.3f}")

        return behaviour_cloning(
            model,
            demos,
            epochs=bc.epochs,
            batch_size=bc.batch_size,
            lr=bc.lr,
            rng=rng,
            progress=epoch_done,
        )
