"""REINFORCE with input-dependent baselines, Decima style — the whole algorithm in one file.

One iteration k (`train`):

1. draw an arrival-sequence seed (never a validation seed), a memoryless episode end
   T ~ Exp(mean_k) with mean_k = min(initial + k·increment, maximum) (the curriculum),
   and N rollout seeds — all from the run's seeded Generator;
2. run the N rollouts of that one arrival sequence in parallel (`training.rollout`);
   each records per decision the observation, the choice, t_k and I(t_k);
3. rewards r_k = −(I(t_{k+1}) − I(t_k)) / scale, returns-to-go R_k = Σ γ^{i−k} r_i,
   baselines b_k^i = mean over the N rollouts of their R at time t_k^i, advantages
   A = R − b (optionally scaled to unit std) — `training.math`;
4. recompute log π(a_k|s_k) and H(π(·|s_k)) with gradients in batches of
   `learner_batch` decisions (`PolicyDecisions`, through `policy.model.evaluate_batch`),
   accumulate the gradient of L = −(1/D) Σ A·log π − β_k (1/D) Σ H, clip its norm, one
   Adam step (`training.ppo.reinforce_update`); β_k decays linearly to a floor;
5. every `validation.every` iterations: the greedy policy on the fixed validation seeds
   (whole episodes), average JCT logged next to the heuristics' (computed once).

With ``algorithm: ppo`` step 4 is PPO's epochs of clipped minibatch steps instead
(`training.ppo.ppo_update`, KL checked per minibatch); everything else — rollouts, advantages, validation, checkpoints, the
log — is this loop.

Before iteration 0 an optional behaviour-cloning warm start (`training.warm_start`, fitted
by `training.bc`) imitates a heuristic. Outputs in `out_dir`: `train_log.csv` (one row per
iteration, `training.log`),
`checkpoint.pt` (resumable: model, optimizer, iteration, Generator state, config),
`best.pt` (best validation JCT), `final.pt`, `policy.onnx` (best, exported),
`summary.json`.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from pydantic import ValidationError
from rich.console import Console

from idlegate.errors import IdlegateError
from idlegate.policy.actions import ActionChoice
from idlegate.policy.features import Observation
from idlegate.policy.model import (
    PolicyNet,
    evaluate_batch,
    load_checkpoint,
    model_from_checkpoint,
    save_checkpoint,
)
from idlegate.progress import stderr_progress
from idlegate.sim.workloads import build_workload
from idlegate.textfiles import check_out_dir, check_writable_dir
from idlegate.training import math as rl
from idlegate.training.adapter import adapt, freeze_base
from idlegate.training.config import RUN_ONLY_FIELDS, TrainConfig
from idlegate.training.log import IterationStats, TrainLog, say
from idlegate.training.ppo import (
    ActionEvaluation,
    PPOSettings,
    UpdateStats,
    ppo_update,
    reinforce_update,
)
from idlegate.training.rollout import (
    EvalResult,
    EvalTask,
    PolicyBlob,
    Rollout,
    RolloutRunner,
    RolloutTask,
    make_blob,
)
from idlegate.training.seeds import SEED_RANGE, draw_seed, workload_ref
from idlegate.training.warm_start import warm_start

CHECKPOINT = "checkpoint.pt"


@dataclass
class TrainResult:
    """What `train` returns (and writes to summary.json)."""

    out_dir: str
    iterations: int
    wall_seconds: float
    reference_jct: dict[str, float]
    initial_val_jct: float
    """Validation JCT before RL (after the warm start, if any)."""
    best_val_jct: float
    best_iteration: int
    final_val_jct: float
    bc: dict[str, Any] | None = None
    history: list[IterationStats] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out.pop("history")
        return out


# ---------------------------------------------------------------------------------------
# small pieces


def validate(
    runner: RolloutRunner, blob: PolicyBlob | None, config: TrainConfig, scheduler: str | None
) -> float:
    """Mean over the validation seeds of the average JCT of whole episodes (greedy policy)."""
    spec = config.validation_workload
    tasks = [EvalTask(workload_ref(spec, s), s, scheduler) for s in config.validation.seeds]
    results: list[EvalResult] = runner.run(blob, tasks)
    return float(np.mean([r.avg_jct for r in results]))


def returns_and_advantages(
    rollouts: Sequence[Rollout], config: TrainConfig
) -> tuple[list[np.ndarray], list[np.ndarray], list[np.ndarray]]:
    """(returns, baselines, advantages) per rollout for one arrival sequence."""
    rewards = [
        rl.rewards_from_integrals(r.integrals, r.end_integral, config.reward_scale)
        for r in rollouts
    ]
    returns = [rl.returns_to_go(x, config.gamma) for x in rewards]
    baselines = rl.time_baselines(
        [r.times for r in rollouts], returns, [r.end_time for r in rollouts], config.baseline
    )
    adv = rl.advantages(returns, baselines, normalize=config.normalize_advantages)
    return returns, baselines, adv


class PolicyDecisions:
    """The DAG policy bound to an update's decisions (an `Agent` of `training.ppo`)."""

    def __init__(
        self, model: PolicyNet, observations: Sequence[Observation], choices: Sequence[ActionChoice]
    ) -> None:
        self.model, self.observations, self.choices = model, observations, choices

    def parameters(self) -> Iterator[torch.nn.Parameter]:
        return self.model.parameters()

    def evaluate(self, rows: np.ndarray) -> ActionEvaluation:
        at = rows.tolist()
        observations = [self.observations[i] for i in at]
        return ActionEvaluation(
            *evaluate_batch(self.model, observations, [self.choices[i] for i in at])
        )


def update_decisions(
    model: PolicyNet,
    rollouts: Sequence[Rollout],
    adv: Sequence[np.ndarray],
    config: TrainConfig,
    rng: np.random.Generator,
) -> tuple[PolicyDecisions, torch.Tensor]:
    """(the agent, [D] advantages) of the update: the rollouts' decisions pooled — all of
    them, or a uniform sample of `config.max_update_decisions` (drawn from `rng`) in the
    rollouts' order."""
    observations = [o for r in rollouts for o in r.observations]
    choices = [c for r in rollouts for c in r.choice_list()]
    advantages = np.concatenate(adv) if adv else np.zeros(0)
    limit = config.max_update_decisions
    if limit is not None and len(observations) > limit:
        index = np.sort(rng.choice(len(observations), size=limit, replace=False)).tolist()
        observations = [observations[i] for i in index]
        choices = [choices[i] for i in index]
        advantages = advantages[index]
    return PolicyDecisions(model, observations, choices), rl.to_tensor(advantages)


def algorithm_update(
    model: PolicyNet,
    optimizer: torch.optim.Optimizer,
    rollouts: Sequence[Rollout],
    adv: Sequence[np.ndarray],
    config: TrainConfig,
    entropy_weight: float,
    rng: np.random.Generator,
) -> UpdateStats:
    """Step 4 with `config.algorithm`: REINFORCE's one step or PPO's epochs (`training.ppo`)."""
    agent, advantages = update_decisions(model, rollouts, adv, config, rng)
    clip = config.grad_clip if config.grad_clip is not None else math.inf
    if config.algorithm == "reinforce":
        return reinforce_update(
            agent, optimizer, advantages, entropy_weight, clip, config.learner_batch
        )
    settings = PPOSettings(
        epochs=config.ppo.epochs,
        minibatch=config.ppo.minibatch_size,
        clip=config.ppo.clip,
        entropy_weight=entropy_weight,
        max_grad_norm=clip,
        target_kl=config.ppo.target_kl,
        kl_check="minibatch",
        chunk=config.learner_batch,
    )
    return ppo_update(agent, optimizer, advantages, settings, rng)


def _check_resume(ckpt: dict[str, Any], config: TrainConfig) -> None:
    stored = _with_defaults(dict(ckpt.get("training_config") or {}))
    current = config.training_dict()
    for k in RUN_ONLY_FIELDS:
        stored.pop(k, None)
        current.pop(k, None)
    diff = _differing(stored, current)
    if diff:
        raise IdlegateError(
            f"cannot resume: the config differs from the checkpoint's in {', '.join(diff)}; "
            "resume with the same settings (only workers, iterations, out_dir and "
            "checkpoint_every may change) or start a new run in another --out"
        )


def _differing(a: dict[str, Any], b: dict[str, Any]) -> list[str]:
    """The keys whose values differ between `a` and `b` (missing counts as None), sorted."""
    return sorted(k for k in a.keys() | b.keys() if a.get(k) != b.get(k))


def _with_defaults(stored: dict[str, Any]) -> dict[str, Any]:
    """`stored` with the settings added since it was written filled in with their defaults.

    A checkpoint written before a setting existed then still resumes when the run keeps
    that setting's default; data that no longer validates is compared as it is.
    """
    try:
        return TrainConfig.model_validate(stored).training_dict()
    except ValidationError:
        return stored


def _load_initial_weights(model: PolicyNet, config: TrainConfig) -> None:
    """Copy `config.init_checkpoint`'s weights into `model` (same model settings required)."""
    path = config.init_checkpoint
    ckpt = load_checkpoint(path)  # type: ignore[arg-type]
    ours = model.config.model_dump()
    theirs = ckpt.get("model_config") or {}
    diff = _differing(ours, theirs)
    if diff:
        raise IdlegateError(
            f"init_checkpoint {path!r} was trained with other model settings ({', '.join(diff)} "
            "differ); use the same model section as that run, or train from scratch"
        )
    model.load_state_dict(ckpt["state_dict"])
    model.eval()


# ---------------------------------------------------------------------------------------
# the loop


ProgressHook = Callable[[IterationStats], None]


def train(
    config: TrainConfig,
    *,
    console: Console | None = None,
    show_progress: bool | None = None,
    on_iteration: ProgressHook | None = None,
) -> TrainResult:
    """Train a policy as `config` says; write logs and checkpoints to `config.out_dir`.

    `console` (default: stderr) gets one line per validation, and the progress
    (`idlegate.progress`: live on a terminal, else a line every 30 s) unless
    `show_progress` is False.
    """
    console = console or Console(stderr=True)
    if show_progress is None:
        show_progress = True
    _prepare_out_dir(config)
    threads_before = torch.get_num_threads()
    torch.set_num_threads(config.learner_threads)
    try:
        run = _Run(config, console)
        with RolloutRunner(config.workers, config.mp_context, ray=config.ray) as runner:
            log = run.open_log(runner)
            if not config.resume:
                run.warm_up(runner, log, show_progress)
            run.loop(runner, log, show_progress, on_iteration)
            result = run.finish()
    finally:
        torch.set_num_threads(threads_before)
    (run.out / "summary.json").write_text(
        json.dumps({**result.to_dict(), "config": config.training_dict()}, indent=2) + "\n"
    )
    return result


def _prepare_out_dir(config: TrainConfig) -> None:
    """Fail now on a run that would clash with `out_dir` or on a workload that cannot be
    built; then create `out_dir`."""
    out = check_writable_dir(config.out_dir, "a training run")
    ckpt_path = out / CHECKPOINT
    if ckpt_path.exists() and not config.resume:
        raise IdlegateError(
            f"{str(out)!r} already holds a training run; pass --resume to continue it or "
            "choose another --out"
        )
    if config.resume and not ckpt_path.exists():
        raise IdlegateError(f"nothing to resume: {str(ckpt_path)!r} does not exist")
    for spec in (*config.training_workloads, config.validation_workload):
        try:
            build_workload(spec.name, config.validation.seeds[0], **spec.options)
        except IdlegateError as exc:
            raise IdlegateError(
                f"{exc} (in a training config, workload options go under "
                "workload.options, e.g. tpch_dir)"
            ) from None
    check_out_dir(out, "a training run")  # (one that cannot be made: a sentence)


class _Run:
    """One training run's state between iterations (what checkpoint.pt keeps of it)."""

    def __init__(self, config: TrainConfig, console: Console) -> None:
        self.config, self.console = config, console
        self.out = Path(config.out_dir)
        self.start_wall = time.perf_counter()
        self.bc_seq, rl_seq = np.random.SeedSequence(config.seed).spawn(2)
        self.rng = np.random.default_rng(rl_seq)
        self.forbidden = set(config.validation.seeds)
        torch.manual_seed(config.seed)
        self.model = PolicyNet(config.model)
        if config.base_policy is not None:
            adapt(self.model, config.base_policy)
        self.model.eval()
        self.optimizer = self._adam()
        self.start_iter = 0
        self.elapsed_before = 0.0
        self.best_val, self.best_iter = math.inf, -1
        self.initial_val = math.nan
        self.bc_info: dict[str, Any] | None = None
        self.references: dict[str, float] = {}
        self.history: list[IterationStats] = []
        if config.resume:
            self._resume(load_checkpoint(self.out / CHECKPOINT))

    def _adam(self) -> torch.optim.Optimizer:
        trained = [p for p in self.model.parameters() if p.requires_grad]
        return torch.optim.Adam(trained, lr=self.config.lr, betas=self.config.betas)

    def _resume(self, ckpt: dict[str, Any]) -> None:
        _check_resume(ckpt, self.config)
        self.model = model_from_checkpoint(ckpt)
        if self.config.base_policy is not None:
            freeze_base(self.model)
        self.optimizer = self._adam()
        self.optimizer.load_state_dict(ckpt["optimizer"])
        self.rng.bit_generator.state = ckpt["rng_state"]
        torch.set_rng_state(ckpt["torch_rng_state"])
        self.start_iter = int(ckpt["iteration"])
        self.elapsed_before = float(ckpt.get("wall_seconds", 0.0))
        self.best_val = float(ckpt.get("best_val_jct", math.inf))
        self.best_iter = int(ckpt.get("best_iteration", -1))
        self.initial_val = float(ckpt.get("initial_val_jct", math.nan))
        self.references = dict(ckpt.get("reference_jct", {}))
        self.bc_info = ckpt.get("bc")
        say(self.console, f"resuming {self.out} at iteration {self.start_iter}")

    def wall(self) -> float:
        return self.elapsed_before + time.perf_counter() - self.start_wall

    def snapshot(self, iteration: int) -> dict[str, Any]:
        """checkpoint.pt's keys besides the model's."""
        return {
            "optimizer": self.optimizer.state_dict(),
            "iteration": iteration,
            "rng_state": self.rng.bit_generator.state,
            "torch_rng_state": torch.get_rng_state(),
            "training_config": self.config.training_dict(),
            "config_fingerprint": self.config.fingerprint(),
            "wall_seconds": self.wall(),
            "best_val_jct": self.best_val,
            "best_iteration": self.best_iter,
            "initial_val_jct": self.initial_val,
            "reference_jct": self.references,
            "bc": self.bc_info,
        }

    def open_log(self, runner: RolloutRunner) -> TrainLog:
        """The CSV log, after the reference heuristics' validation (once per run)."""
        if not self.references:
            for name in self.config.validation.reference_schedulers:
                self.references[name] = validate(runner, None, self.config, name)
            text = ", ".join(f"{k} {v:.2f}" for k, v in self.references.items())
            say(self.console, f"validation avg JCT of the heuristics: {text}")
        keep = self.start_iter if self.config.resume else None
        return TrainLog(self.out / "train_log.csv", self.references, keep)

    def warm_up(self, runner: RolloutRunner, log: TrainLog, show_progress: bool) -> None:
        """Iteration 0 of a new run: the starting weights (another run's, or the BC warm
        start's), validated and saved as the first best.pt."""
        config, model = self.config, self.model
        if config.init_checkpoint is not None:
            _load_initial_weights(model, config)
            say(self.console, f"starting from the weights of {config.init_checkpoint}")
        elif config.bc.enabled:
            report = warm_start(
                model, config, runner, self.bc_seq, self.forbidden, self.console, show_progress
            )
            self.bc_info = asdict(report)
            save_checkpoint(model, self.out / "bc.pt", training_config=config.training_dict())
        self.initial_val = validate(runner, make_blob(model, config.rollout_backend), config, None)
        self.best_val, self.best_iter = self.initial_val, 0
        save_checkpoint(
            model, self.out / "best.pt", training_config=config.training_dict(), iteration=0
        )
        stats = IterationStats(0, self.wall(), val_avg_jct=self.initial_val)
        log.append(stats)
        self.history.append(stats)
        cloned = config.bc.enabled and config.init_checkpoint is None
        warm = " (after the BC warm start)" if cloned else ""
        say(self.console, f"iteration 0: validation avg JCT {self.initial_val:.2f}{warm}")

    def loop(
        self,
        runner: RolloutRunner,
        log: TrainLog,
        show_progress: bool,
        on_iteration: ProgressHook | None,
    ) -> None:
        """The iterations left, each validated, logged and checkpointed when due."""
        config = self.config
        with stderr_progress(
            "training",
            config.iterations,
            start=self.start_iter,  # (a resumed run's earlier iterations took no time here)
            enabled=show_progress,
            stream=self.console.file,
        ) as bar:
            for it in range(self.start_iter, config.iterations):
                stats = _iteration(
                    self.model, self.optimizer, runner, config, self.rng, self.forbidden, it
                )
                n = it + 1
                if n % config.validation.every == 0 or n == config.iterations:
                    self._validate(runner, stats, n)
                stats.wall_seconds = self.wall()
                log.append(stats)
                self.history.append(stats)
                if on_iteration is not None:
                    on_iteration(stats)
                if n % config.checkpoint_every == 0 or n == config.iterations:
                    save_checkpoint(self.model, self.out / CHECKPOINT, **self.snapshot(n))
                info = f"return {stats.mean_return:.4g}  best val {self.best_val:.2f}"
                bar(n, config.iterations, info)

    def _validate(self, runner: RolloutRunner, stats: IterationStats, n: int) -> None:
        """Step 5: the greedy policy on the validation seeds; best.pt when it improved."""
        blob = make_blob(self.model, self.config.rollout_backend)
        stats.val_avg_jct = validate(runner, blob, self.config, None)
        if stats.val_avg_jct < self.best_val:
            self.best_val, self.best_iter = stats.val_avg_jct, n
            save_checkpoint(
                self.model,
                self.out / "best.pt",
                training_config=self.config.training_dict(),
                iteration=n,
            )
        say(
            self.console,
            f"iteration {n}: validation avg JCT {stats.val_avg_jct:.2f} "
            f"(best {self.best_val:.2f} at {self.best_iter}), return "
            f"{stats.mean_return:.4g}, entropy {stats.entropy:.3f}, {self.wall():.0f} s",
        )

    def finish(self) -> TrainResult:
        """final.pt, checkpoint.pt if no iteration wrote it, policy.onnx; the result."""
        config = self.config
        if config.iterations == 0 or self.start_iter >= config.iterations:
            last = max(self.start_iter, config.iterations)
            save_checkpoint(self.model, self.out / CHECKPOINT, **self.snapshot(last))
        save_checkpoint(self.model, self.out / "final.pt", training_config=config.training_dict())
        validated = [s.val_avg_jct for s in self.history if not math.isnan(s.val_avg_jct)]
        _export_best(self.out, self.console)
        return TrainResult(
            out_dir=str(self.out),
            iterations=config.iterations,
            wall_seconds=self.wall(),
            reference_jct=self.references,
            initial_val_jct=self.initial_val,
            best_val_jct=self.best_val,
            best_iteration=self.best_iter,
            final_val_jct=validated[-1] if validated else self.best_val,
            bc=self.bc_info,
            history=self.history,
        )


def _iteration(
    model: PolicyNet,
    optimizer: torch.optim.Optimizer,
    runner: RolloutRunner,
    config: TrainConfig,
    rng: np.random.Generator,
    forbidden: set[int],
    it: int,
) -> IterationStats:
    """Steps 1-4 of the module docstring for iteration `it`."""
    t0 = time.perf_counter()
    arrival_seed = draw_seed(rng, forbidden)
    cur = config.curriculum
    if cur.enabled:
        mean = rl.curriculum_mean(
            it, cur.initial_mean_seconds, cur.increment_seconds, cur.max_mean_seconds
        )
        max_time = float(rng.exponential(mean))
    else:
        mean, max_time = math.inf, math.inf
    seeds = rng.integers(SEED_RANGE, size=config.rollouts_per_sequence).tolist()
    specs = config.training_workloads
    ref = workload_ref(specs[it % len(specs)], arrival_seed)
    blob = make_blob(model, config.rollout_backend)
    rollouts: list[Rollout] = runner.run(blob, [RolloutTask(ref, s, max_time) for s in seeds])
    t1 = time.perf_counter()
    returns, baselines, adv = returns_and_advantages(rollouts, config)
    beta = rl.entropy_weight_at(
        it, config.entropy.weight, config.entropy.decay, config.entropy.minimum
    )
    step = algorithm_update(model, optimizer, rollouts, adv, config, beta, rng)
    t2 = time.perf_counter()
    first = [r[0] if r.size else 0.0 for r in returns]
    decisions = [r.decisions for r in rollouts]
    pooled_r = np.concatenate(returns) if returns else np.zeros(0)
    pooled_b = np.concatenate(baselines) if baselines else np.zeros(0)
    return IterationStats(
        iteration=it + 1,
        wall_seconds=math.nan,
        mean_return=float(np.mean(first)),
        mean_decisions=float(np.mean(decisions)),
        entropy=step.entropy,
        entropy_weight=beta,
        loss=step.loss,
        grad_norm=step.grad_norm,
        explained_variance=rl.explained_variance(pooled_r, pooled_b) if pooled_r.size else math.nan,
        approx_kl=step.approx_kl,
        clip_fraction=step.clip_fraction,
        update_steps=step.steps,
        idle_fraction=sum(r.idle_decisions for r in rollouts) / max(sum(decisions), 1),
        wait_fraction=sum(r.wait_decisions for r in rollouts) / max(sum(decisions), 1),
        episode_mean_seconds=mean,
        max_time=max_time,
        rollout_seconds=t1 - t0,
        update_seconds=t2 - t1,
    )


def _export_best(out: Path, console: Console) -> None:
    """Export best.pt as policy.onnx (skipped, with a note, if the export fails)."""
    try:
        from idlegate.policy.onnx_export import export_onnx

        export_onnx(out / "best.pt", out / "policy.onnx")
    except (IdlegateError, ImportError) as exc:
        say(console, f"note: policy.onnx not written ({exc})")


__all__ = [
    "TrainResult",
    "algorithm_update",
    "train",
    "update_decisions",
    "validate",
]
