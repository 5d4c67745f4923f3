"""Training the split-window agent (Deep Back-Filling) with PPO, in one file.

The agent (`idlegate.policy.window`: observation, actions, the ONNX contract) is trained
on rigid-job episodes: sequences of `num_jobs` jobs from the seeded `lublin` generator,
or windows of an SWF trace's train part. One iteration:

1. **Rollouts.** `sequences` job sequences, each simulated `rollouts` times with the
   current policy drawing its actions (`RecordingWindow`); every decision keeps
   (slots, cluster, action, log-probability, value, time).
2. **Rewards** between decisions (`reward_terms`, `window_rewards`). Decision d covers
   [t_d, t_{d+1}) (the last one until the last job ends) and earns

       r_d = −(w_idle · I_d + w_queue · Q_d + w_wait · W_d) / num_jobs

   * I_d, idle capacity: ∫ free executors / K dt while some job waits, in hours
     (machine-hours left idle next to a queue: what backfilling recovers);
   * Q_d, queue length: ∫ waiting jobs dt, in hours (job-hours of waiting; summed over
     the episode it is the total wait, so Q alone optimises the average wait);
   * W_d, waiting time relative to size: ∫ Σ_waiting 1 / max(r_j, 10 s) dt (the bounded
     slowdown the waiting jobs accrue, with r_j the requested time).

   Defaults w_idle = 1, w_queue = 1, w_wait = 0 (the target is the average wait; W is
   there for bsld-oriented runs). Dividing by the episode's jobs keeps returns per job.
3. **Advantages** (`advantage`): by default the return-to-go minus the mean, over the
   rollouts of the same sequence, of their return-to-go at the same time (the
   input-dependent baseline of `training.math`, as the DAG policy's training); or
   GAE(γ, λ) with the value head. Each sequence's advantages are divided by their own
   standard deviation (loads differ tenfold between sequences).
4. **PPO update**: `ppo_clip_loss` (`training.math`) + value MSE, a few epochs of
   minibatches, stopped early when `approx_kl` passes `target_kl`.
5. Every `eval_every` iterations, the greedy policy runs on `validation_seeds` held-out
   episodes; the weights with the lowest average wait are kept and exported.

Seeds: training episodes draw workload seeds from [10^6, 2·10^6) and validation uses
2·10^6 + i, so evaluation on small seeds (e.g. 1000–1029) is held out.

``idlegate train-window --m-head 8 --m-tail 8 --out w.onnx`` runs it (torch lives here
only; the exported model runs with onnxruntime in `policy.window`).
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from idlegate.errors import IdlegateError
from idlegate.policy.window import (
    CAN_START,
    CLUSTER_FEATURES,
    PRESENT,
    RUNNING,
    SLOT_FEATURES,
    WINDOW_FEATURE_VERSION,
    WINDOW_FORMAT,
    WindowObserver,
    greedy_action,
    resolve,
    start_job,
)
from idlegate.sim.engine import SimResult, Workload, simulate
from idlegate.sim.metrics import BSLD_MIN_RUN, run_metrics
from idlegate.sim.protocol import WAIT, Action, ClusterView
from idlegate.training.config import WindowTrainConfig
from idlegate.training.math import (
    advantages,
    gae,
    returns_to_go,
    time_baselines,
    to_tensor,
)
from idlegate.training.ppo import PPOSettings, UpdateStats, ppo_update
from idlegate.training.window_net import NumpyWindowNet, WindowDecisions, WindowNet

TRAIN_SEED_BASE = 1_000_000
VALIDATION_SEED_BASE = 2_000_000
HOUR = 3600.0


def episode_workload(config: WindowTrainConfig, seed: int) -> Workload:
    """The episode of workload seed `seed`: `num_jobs` Lublin jobs or an SWF window."""
    from idlegate.sim.workloads import build_workload

    if config.workload == "swf":
        return build_workload("swf", seed, path=config.file, num_jobs=config.num_jobs, part="train")
    return build_workload("lublin", seed, num_jobs=config.num_jobs)


# ---------------------------------------------------------------------------------------
# Rollouts


@dataclass
class Episode:
    """One simulated episode's decisions (arrays of length D) and its per-job outcome."""

    slots: np.ndarray
    cluster: np.ndarray
    actions: np.ndarray
    log_probs: np.ndarray
    values: np.ndarray
    times: np.ndarray
    rewards: np.ndarray = field(default_factory=lambda: np.zeros(0))
    advantages: np.ndarray = field(default_factory=lambda: np.zeros(0))
    returns: np.ndarray = field(default_factory=lambda: np.zeros(0))
    end_time: float = math.nan
    """When the episode's last job finished."""
    avg_wait: float = math.nan
    avg_bsld: float = math.nan


class RecordingWindow:
    """The policy as a Scheduler that draws its actions and records every decision.

    It copies the model's weights at construction (`NumpyWindowNet`): build one per
    episode after each update.
    """

    name = "window-training"

    def __init__(self, model: WindowNet, rng: np.random.Generator, greedy: bool = False) -> None:
        self.net = NumpyWindowNet(model)
        self.observer = WindowObserver(model.m_head, model.m_tail)
        self.rng = rng
        self.greedy = greedy
        self.steps: list[tuple[np.ndarray, np.ndarray, int, float, float, float]] = []

    def reset(self, rng: Any) -> None:
        self.steps = []

    def decide(self, view: ClusterView) -> Action:
        obs = self.observer(view)
        logp, value = self.net(obs.slots, obs.cluster)
        if self.greedy:
            action = greedy_action(logp)
        else:  # inverse-CDF draw (Generator.choice is slower per call)
            cdf = np.cumsum(np.exp(logp))
            action = min(int(np.searchsorted(cdf, self.rng.random() * cdf[-1])), logp.size - 1)
        self.steps.append((obs.slots, obs.cluster, action, float(logp[action]), value, view.now))
        job = resolve(obs, action)
        return WAIT if job is None else start_job(job, view)


def run_episode(
    model: WindowNet, workload: Workload, rng: np.random.Generator, *, greedy: bool = False
) -> tuple[Episode, SimResult]:
    """Simulate `workload` with the policy: its decisions (rewards still empty) and the run."""
    policy = RecordingWindow(model, rng, greedy)
    result = simulate(workload, policy, 0)
    if result.unfinished:
        raise IdlegateError(f"a training episode left {result.unfinished} jobs unfinished")
    metrics = run_metrics(result)
    steps = policy.steps
    m = model.m_head + model.m_tail
    return Episode(
        slots=np.stack([s[0] for s in steps]) if steps else np.zeros((0, m, SLOT_FEATURES)),
        cluster=np.stack([s[1] for s in steps]) if steps else np.zeros((0, CLUSTER_FEATURES)),
        actions=np.asarray([s[2] for s in steps], dtype=np.int64),
        log_probs=np.asarray([s[3] for s in steps]),
        values=np.asarray([s[4] for s in steps]),
        times=np.asarray([s[5] for s in steps]),
        avg_wait=metrics.avg_wait,
        avg_bsld=metrics.avg_bsld,
    ), result


# ---------------------------------------------------------------------------------------
# Rewards


def _step_integral(
    points: np.ndarray, up: np.ndarray, down: np.ndarray, weights: np.ndarray
) -> np.ndarray:
    """Values on [points[i], points[i+1]) of Σ_j w_j · 1[up_j ≤ t < down_j] (points sorted)."""
    order_up, order_down = np.argsort(up), np.argsort(down)
    cum_up = np.concatenate([[0.0], np.cumsum(weights[order_up])])
    cum_down = np.concatenate([[0.0], np.cumsum(weights[order_down])])
    started = cum_up[np.searchsorted(up[order_up], points[:-1], side="right")]
    ended = cum_down[np.searchsorted(down[order_down], points[:-1], side="right")]
    return started - ended


def reward_terms(
    decision_times: np.ndarray,
    arrival: np.ndarray,
    start: np.ndarray,
    finish: np.ndarray,
    size: np.ndarray,
    requested: np.ndarray,
    num_executors: int,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(I, Q, W) per decision, in seconds-based units (see the module docstring).

    Decision d covers [t_d, t_{d+1}), the last one [t_{D−1}, max(finish)). Per job:
    arrival a, start s, finish f, executors n and requested time r; job j waits on
    [a, s) and holds n executors on [s, f). I_d = ∫ (1 − busy/K) · 1[queue > 0] dt,
    Q_d = ∫ queue dt, W_d = ∫ Σ_waiting 1/max(r, 10) dt, all over d's interval.
    """
    t = np.asarray(decision_times, dtype=float)
    if t.size == 0:
        return np.zeros(0), np.zeros(0), np.zeros(0)
    end = max(float(np.max(finish)), float(t[-1]))
    points = np.unique(np.concatenate([t, arrival, start, finish, [end]]))
    points = points[(points >= t[0]) & (points <= end)]
    widths = np.diff(points)
    ones = np.ones_like(arrival, dtype=float)
    queue = _step_integral(points, arrival, start, ones)
    busy = _step_integral(points, start, finish, size.astype(float))
    slow = _step_integral(points, arrival, start, 1.0 / np.maximum(requested, BSLD_MIN_RUN))
    idle = np.clip(1.0 - busy / num_executors, 0.0, 1.0) * (queue > 0)

    def per_decision(rate: np.ndarray) -> np.ndarray:
        cum = np.concatenate([[0.0], np.cumsum(rate * widths)])
        at = cum[np.searchsorted(points, np.append(t, end))]
        return np.diff(at)

    return per_decision(idle), per_decision(queue), per_decision(slow)


def window_rewards(
    config: WindowTrainConfig, episode: Episode, result: SimResult, workload: Workload
) -> np.ndarray:
    """r_d = −(w_idle · I_d / h + w_queue · Q_d / h + w_wait · W_d) / jobs, h = 3600 s."""
    jobs = {i: a.dag for i, a in enumerate(workload.jobs)}
    records = result.records
    arrival = np.asarray([r.arrival for r in records])
    start = np.asarray([r.first_start for r in records])
    finish = np.asarray([r.finish for r in records])
    size = np.asarray([jobs[r.id].average_width for r in records])
    requested = np.asarray([jobs[r.id].critical_path for r in records])
    idle, queue, slow = reward_terms(
        episode.times, arrival, start, finish, size, requested, workload.num_executors
    )
    cost = config.w_idle * idle / HOUR + config.w_queue * queue / HOUR + config.w_wait * slow
    return -cost / len(records)


# ---------------------------------------------------------------------------------------
# PPO update


def update(
    model: WindowNet,
    optimizer: torch.optim.Optimizer,
    episodes: list[Episode],
    config: WindowTrainConfig,
    rng: np.random.Generator,
) -> UpdateStats:
    """PPO on the episodes' decisions, advantages standardised over the iteration."""

    def cat(name: str) -> np.ndarray:
        return np.concatenate([getattr(e, name) for e in episodes])

    agent = WindowDecisions(model, cat("slots"), cat("cluster"), cat("actions"))
    adv = cat("advantages")
    return ppo_update(
        agent,
        optimizer,
        to_tensor((adv - adv.mean()) / (adv.std() + 1e-8)),
        PPOSettings.of(config, value_weight=config.value_weight),
        rng,
        returns=to_tensor(cat("returns")),
        sampled_log_probs=to_tensor(cat("log_probs")),
    )


# ---------------------------------------------------------------------------------------
# Export


def export_window(model: WindowNet, out: str | Path, config: WindowTrainConfig) -> dict[str, str]:
    """Write `model` as the ONNX window model at `out` (metadata as `policy.window` reads it).

    Checks parity: onnxruntime and torch agree within 1e-4 on random legal-ish inputs,
    else IdlegateError.
    """
    from idlegate.policy.onnx_export import check_parity, onnx_bytes, save_onnx

    model = model.eval()
    m = model.m_head + model.m_tail
    slots, cluster = _example_inputs(m, np.random.default_rng(0), batch=3)
    metadata = {
        "idlegate.format": WINDOW_FORMAT,
        "idlegate.window.feature_version": str(WINDOW_FEATURE_VERSION),
        "idlegate.window.m_head": str(model.m_head),
        "idlegate.window.m_tail": str(model.m_tail),
        "idlegate.window.training": json.dumps(config.model_dump(), sort_keys=True),
    }
    data = onnx_bytes(
        model,
        (torch.from_numpy(slots), torch.from_numpy(cluster)),
        input_names=["slots", "cluster"],
        output_names=["logp", "value"],
        dynamic_axes={"slots": {0: "batch"}, "cluster": {0: "batch"}, "logp": {0: "batch"}},
        metadata=metadata,
        doc="idlegate split-window agent (pick a head/tail slot or forward)",
    )
    slots, cluster = _example_inputs(m, np.random.default_rng(1), batch=16)
    check_parity(model, data, {"slots": slots, "cluster": cluster})
    save_onnx(data, out)
    return metadata


def _example_inputs(m: int, rng: np.random.Generator, batch: int) -> tuple[np.ndarray, ...]:
    """Random feature batches in [0, 1] with random presence, startability and running."""
    slots = rng.random((batch, m, SLOT_FEATURES)).astype(np.float32)
    slots[..., PRESENT] = (rng.random((batch, m)) < 0.7).astype(np.float32)
    slots[..., CAN_START] = (rng.random((batch, m)) < 0.5).astype(np.float32)
    slots *= slots[..., PRESENT : PRESENT + 1]
    cluster = rng.random((batch, CLUSTER_FEATURES)).astype(np.float32)
    cluster[:, RUNNING] = 1.0
    return slots, cluster


# ---------------------------------------------------------------------------------------
# The training loop


@dataclass
class WindowTrainResult:
    """The outcome of `train_window`."""

    iterations: int
    best_iteration: int
    best_val_wait: float
    """Average wait (s) of the greedy policy on the validation episodes at its best."""
    wall_seconds: float
    out: Path


def _validate(model: WindowNet, config: WindowTrainConfig) -> float:
    """Average wait (s) of the greedy policy over the validation episodes."""
    rng = np.random.default_rng(0)
    waits = []
    for i in range(config.validation_seeds):
        workload = episode_workload(config, VALIDATION_SEED_BASE + i)
        episode, _ = run_episode(model, workload, rng, greedy=True)
        waits.append(episode.avg_wait)
    return float(np.mean(waits))


def train_window(
    config: WindowTrainConfig, out: str | Path, log: Callable[[str], None] = print
) -> WindowTrainResult:
    """Train with PPO (module docstring), export the best weights to `out` (ONNX)."""
    from idlegate.policy.onnx_export import check_onnx_out

    check_onnx_out(out)  # (before the run: it is written at the end)
    started = time.monotonic()
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        torch.manual_seed(config.seed)
        rng = np.random.default_rng(config.seed)
        model = WindowNet(config.m_head, config.m_tail, config.hidden)
        optimizer = torch.optim.Adam(model.parameters(), lr=config.learning_rate)
        best_wait, best_iteration = _validate(model, config), 0
        best_state = {k: v.clone() for k, v in model.state_dict().items()}
        log(f"iteration 0: validation avg wait {best_wait:.0f} s (untrained)")
        done = 0
        for it in range(1, config.iterations + 1):
            episodes = []
            for _ in range(config.sequences):
                seed = int(rng.integers(TRAIN_SEED_BASE, VALIDATION_SEED_BASE))
                workload = episode_workload(config, seed)
                group = []
                for _ in range(config.rollouts):
                    episode, result = run_episode(model, workload, rng)
                    episode.rewards = window_rewards(config, episode, result, workload)
                    episode.end_time = result.end_time
                    group.append(episode)
                _advantages(group, config)
                episodes.extend(group)
            stats = update(model, optimizer, episodes, config, rng)
            done = it
            line = (
                f"iteration {it}/{config.iterations}: rollout avg wait "
                f"{np.mean([e.avg_wait for e in episodes]):.0f} s, "
                f"{sum(len(e.actions) for e in episodes)} decisions, kl {stats.approx_kl:.4f}, "
                f"entropy {stats.entropy:.3f}"
            )
            out_of_time = time.monotonic() - started > config.time_limit
            if it % config.eval_every == 0 or it == config.iterations or out_of_time:
                wait = _validate(model, config)
                line += f", validation avg wait {wait:.0f} s"
                if wait < best_wait:
                    best_wait, best_iteration = wait, it
                    best_state = {k: v.clone() for k, v in model.state_dict().items()}
                    line += " (best)"
            log(line)
            if out_of_time:
                log(f"stopped after {it} iterations: the {config.time_limit:g}-second time limit")
                break
        model.load_state_dict(best_state)
        export_window(model, out, config)
        return WindowTrainResult(
            done, best_iteration, best_wait, time.monotonic() - started, Path(out)
        )
    finally:
        torch.set_num_threads(threads)


def _advantages(group: list[Episode], config: WindowTrainConfig) -> None:
    """Fill the advantages and returns of the rollouts of one sequence.

    ``time``: A_k = R_k − b_k with b_k the mean over the group of each rollout's return
    at t_k (`training.math.time_baselines`); ``gae``: `gae` with the value head. Either
    way the group's advantages are then divided by their pooled standard deviation
    (loads differ tenfold between sequences, and a heavy one would drown the rest).
    """
    returns = [returns_to_go(e.rewards, config.gamma) for e in group]
    if config.advantage == "time":
        baselines = time_baselines([e.times for e in group], returns, [e.end_time for e in group])
        adv = advantages(returns, baselines, normalize=True)
    else:
        raw = [gae(e.rewards, e.values, config.gamma, config.gae_lambda) for e in group]
        adv = advantages(raw, [np.zeros_like(a) for a in raw], normalize=True)
    for e, a, r in zip(group, adv, returns, strict=True):
        e.advantages, e.returns = a, r


__all__ = [
    "Episode",
    "RecordingWindow",
    "WindowTrainResult",
    "export_window",
    "reward_terms",
    "train_window",
    "window_rewards",
]
