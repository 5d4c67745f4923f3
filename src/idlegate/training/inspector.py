"""Train the SchedInspector-style inspector with PPO and export it to ONNX (one file, CleanRL style).

The inspector (`idlegate.policy.inspector`) accepts or rejects the pick of a rigid base
scheduler (``easy:sjf``, ``strict:sjf``, …). Training follows SchedInspector (Zhang et
al., HPDC 2022):

* **Episodes**: windows ("sequences") of `sequence_length` (256) consecutive jobs of an
  SWF trace, starting at a seeded random job of its *train part* (the first
  `train_fraction`, 20 %, of its jobs); the rest of the trace is left for testing
  (`benchmarks/inspector.py`). Validation windows come from the train part too, drawn
  from their own seed. With `lublin_share` > 0 that share of the windows comes from the
  Lublin–Feitelson model instead (`lublin_window`: a machine size from
  `lublin_executors` and a load from `lublin_interarrival` per window), so the
  inspector sees other machine sizes and loads than the trace's; the test part's
  Lublin windows use other seeds.
* **Reward**: one per episode, the percentage reward on the window's average bounded
  slowdown (``reward="bsld"``) or average wait (``"wait"``), R = (b − s) / max(b, s),
  b the base heuristic alone on the same window (computed once per window and cached),
  s the inspected run; R ∈ (−1, 1), > 0 when the inspector helps.
* **Advantage** (`advantage`), two estimators:

  - ``probes`` (the default): run the window with the current policy's greedy
    decisions, then rerun it `probes` times, each time replaying the first k decisions
    and flipping the k-th (k drawn at random), the rest greedy again. The simulation of
    rigid jobs is deterministic, so the rerun reaches the same state; R(rerun) − R(greedy)
    is the flipped action's advantage at that state (and its negative the greedy
    action's). One step of policy iteration per probe, with a per-decision signal.
  - ``rollouts``: sample `rollouts` runs per window; every decision of a run gets its
    R minus the mean R of the window's runs (an input-dependent baseline). One number
    for a few hundred decisions: in our runs this converged to "always reject", the
    reject rule (docs/inspector.md).

  Either way the advantages are divided by the iteration's standard deviation.
* **Update**: PPO's clipped objective (`training.math.ppo_clip_loss`), `epochs` passes in
  minibatches, stopping early when `approx_kl` exceeds `target_kl`. With probes the
  decisions are chosen, not sampled, so the ratio to the old policy acts as a trust
  region rather than as an importance weight.
* **Start**: the output bias rejects with probability `initial_reject` (0.9), so the
  untrained greedy inspector is the reject rule and the probes ask where to accept.
* **Model**: an MLP over the inspector's features, hidden 32-16-8 (tanh), two logits
  (accept, reject). Rollouts run it in numpy with the current weights (no torch per
  decision); the update recomputes the sampling log-probabilities in torch.

The best model by the validation windows' mean R (greedy decisions) is exported to
`out` after each improvement, so a stopped run leaves its best model. Usage::

    idlegate train-inspector --file ../shared/data/swf/lublin_256.swf --base easy:sjf \\
        --out out/insp.onnx --time-limit 1200
"""

from __future__ import annotations

import copy
import json
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final, Literal

import numpy as np
import torch
from torch import nn

from idlegate.errors import IdlegateError
from idlegate.policy.inspector import (
    FEATURE_NAMES,
    FEATURE_VERSION,
    INPUT_NAME,
    NUM_FEATURES,
    ONNX_FORMAT,
    OUTPUT_NAME,
    REJECT,
    InspectorScheduler,
    make_base,
)
from idlegate.policy.onnx_export import check_parity, save_onnx
from idlegate.policy.onnx_export import onnx_bytes as export_bytes
from idlegate.policy.rigid import RejectScheduler
from idlegate.sim.engine import Workload, simulate
from idlegate.sim.metrics import RunMetrics, run_metrics
from idlegate.sim.swf import read_swf, trace_part
from idlegate.sim.workloads import build_workload
from idlegate.training.config import InspectorConfig
from idlegate.training.inspector_net import (
    InspectorDecisions,
    InspectorNet,
    NumpyMlp,
    ReplayJudge,
    RuleJudge,
    SamplingJudge,
)
from idlegate.training.math import to_tensor
from idlegate.training.ppo import PPOSettings, ppo_update

# ---------------------------------------------------------------------------------------
# Math


def percentage_reward(base: float, inspected: float) -> float:
    """SchedInspector's R = (base − inspected) / max(base, inspected) (0 if both are 0).

    >>> percentage_reward(100.0, 50.0), percentage_reward(50.0, 100.0)
    (0.5, -0.5)
    """
    top = max(base, inspected)
    return 0.0 if top == 0 else (base - inspected) / top


def group_advantages(rewards: np.ndarray) -> np.ndarray:
    """[S, N] rewards of N rollouts of S windows → each minus its window's mean."""
    r = np.asarray(rewards, dtype=np.float64)
    return r - r.mean(axis=1, keepdims=True)


# ---------------------------------------------------------------------------------------
# Episodes


@dataclass
class InspectedRun:
    """One inspected run of a window: its metrics, its reward metric and its decisions."""

    bsld: float
    wait: float
    utilisation: float
    score: float
    """The reward's metric (`InspectorConfig.reward`): avg bsld or avg wait."""
    features: list[np.ndarray]
    actions: list[int]


LUBLIN_SALT: Final = {"train": 0, "test": 1}
"""Seeds Lublin windows apart by part, so test windows are never trained on."""


def lublin_window(
    index: int, part: Literal["train", "test"], cfg: InspectorConfig | None = None
) -> Workload:
    """The `index`-th Lublin-model window of `part`: machine size and load drawn from
    `cfg.lublin_executors` and `cfg.lublin_interarrival` (the defaults without `cfg`),
    then `cfg.sequence_length` jobs of the model, all seeded by (index, part)."""
    cfg = cfg or InspectorConfig(trace="")
    rng = np.random.default_rng([index, LUBLIN_SALT[part]])
    executors = int(rng.choice(cfg.lublin_executors))
    scale = float(rng.choice(cfg.lublin_interarrival))
    return build_workload(
        "lublin",
        seed=rng,
        num_jobs=cfg.sequence_length,
        num_executors=executors,
        interarrival_scale=scale,
    )


class Windows:
    """The training windows of one part and the base's metrics on each (cached).

    A window is a key: k >= 0 the window of the trace's part starting at its k-th job,
    k < 0 the Lublin-model window ``lublin_window(-1 - k, part)``.
    """

    def __init__(self, cfg: InspectorConfig, part: Literal["train", "test"]) -> None:
        self.cfg = cfg
        self.part = part
        jobs = trace_part(read_swf(cfg.trace), part, cfg.train_fraction)
        self.count = len(jobs) - cfg.sequence_length + 1
        if self.count < 1:
            raise IdlegateError(
                f"the {part} part of {cfg.trace} has {len(jobs)} jobs, fewer than a window of "
                f"{cfg.sequence_length}; use a longer trace or a shorter --sequence-length"
            )
        self._workloads: dict[int, Workload] = {}
        self._base: dict[int, RunMetrics] = {}
        make_base(cfg.base)  # a wrong base fails here, before any simulation

    def draw(self, rng: np.random.Generator, n: int) -> list[int]:
        """`n` window keys: a Lublin window with probability `lublin_share`, else a trace
        window uniform over those that fit."""
        share = self.cfg.lublin_share
        return [
            -1 - int(rng.integers(2**31 - 1))
            if share > 0 and rng.random() < share
            else int(rng.integers(self.count))
            for _ in range(n)
        ]

    def workload(self, start: int) -> Workload:
        w = self._workloads.get(start)
        if w is None:
            if start < 0:
                w = lublin_window(-1 - start, self.part, self.cfg)
            else:
                w = build_workload(
                    "swf",
                    path=self.cfg.trace,
                    num_jobs=self.cfg.sequence_length,
                    start=start,
                    part=self.part,
                    train_fraction=self.cfg.train_fraction,
                    requested_time=self.cfg.requested_time,
                )
            self._workloads[start] = w
        return w

    def base_metrics(self, start: int) -> RunMetrics:
        """The base heuristic alone on the window (computed once)."""
        m = self._base.get(start)
        if m is None:
            result = simulate(self.workload(start), make_base(self.cfg.base), 0)
            m = self._base[start] = run_metrics(result)
        return m

    def base_bsld(self, start: int) -> float:
        """The base heuristic's average bsld on the window."""
        return self.base_metrics(start).avg_bsld

    def base_score(self, start: int) -> float:
        """The base heuristic's reward metric on the window."""
        return self.score(self.base_metrics(start))

    def score(self, metrics: RunMetrics) -> float:
        """The reward's metric of a run: its average bsld or average wait."""
        return metrics.avg_wait if self.cfg.reward == "wait" else metrics.avg_bsld

    def reject_bsld(self, start: int) -> float:
        """The reject rule's average bsld on the window (the inspector that always rejects)."""
        cfg = self.cfg
        rule = RejectScheduler(
            make_base(cfg.base), max_rejections=cfg.max_rejections, interval=cfg.interval
        )
        return run_metrics(simulate(self.workload(start), rule, 0)).avg_bsld

    def run(self, start: int, judge: SamplingJudge | ReplayJudge | RuleJudge) -> InspectedRun:
        """The window under the inspector with `judge`."""
        cfg = self.cfg
        scheduler = InspectorScheduler(
            make_base(cfg.base),
            judge,
            ask=cfg.ask,
            max_rejections=cfg.max_rejections,
            interval=cfg.interval,
        )
        m = run_metrics(simulate(self.workload(start), scheduler, 0))
        return InspectedRun(
            m.avg_bsld, m.avg_wait, m.utilisation, self.score(m), judge.features, judge.actions
        )


def validate(windows: Windows, starts: list[int], mlp: NumpyMlp) -> tuple[float, float]:
    """(mean R, mean bsld) of greedy decisions over the windows `starts`."""
    rewards, bslds = [], []
    for s in starts:
        ep = windows.run(s, ReplayJudge(mlp))
        rewards.append(percentage_reward(windows.base_score(s), ep.score))
        bslds.append(ep.bsld)
    return statistics.fmean(rewards), statistics.fmean(bslds)


def warm_start(
    net: InspectorNet, windows: Windows, cfg: InspectorConfig, rng: np.random.Generator
) -> tuple[int, float]:
    """Fit the net to `RuleJudge(cfg.warm_start_delay)`'s decisions on its own runs.

    Returns (decisions cloned, the net's agreement with the rule on them).
    """
    assert cfg.warm_start_delay is not None  # the caller checks
    xs: list[np.ndarray] = []
    ys: list[int] = []
    for s in windows.draw(rng, cfg.warm_start_sequences):
        judge = RuleJudge(cfg.warm_start_delay)
        windows.run(s, judge)
        xs += judge.features
        ys += judge.actions
    if not ys:
        raise IdlegateError("the warm start saw no decision; use more warm_start_sequences")
    x, y = to_tensor(np.stack(xs)), torch.as_tensor(ys, dtype=torch.long)
    optimizer = torch.optim.Adam(net.parameters(), lr=1e-2)
    for _ in range(cfg.warm_start_steps):
        loss = nn.functional.cross_entropy(net(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    with torch.no_grad():
        agreement = float((net(x).argmax(dim=1) == y).double().mean())
    return len(ys), agreement


@dataclass
class DecisionBatch:
    """An iteration's decisions: [D, F] features, [D] actions, [D] advantages, mean R."""

    features: list[np.ndarray] = field(default_factory=list)
    actions: list[int] = field(default_factory=list)
    advantages: list[float] = field(default_factory=list)
    reward: float = 0.0
    note: str = ""
    """What the progress line says about the decisions (reject share, or better flips)."""


def rollout_batch(
    windows: Windows,
    starts: list[int],
    mlp: NumpyMlp,
    cfg: InspectorConfig,
    rng: np.random.Generator,
) -> DecisionBatch:
    """`cfg.rollouts` sampled runs per window; each decision gets its run's R minus the mean."""
    rewards = np.zeros((len(starts), cfg.rollouts))
    episodes: list[list[InspectedRun]] = []
    for i, s in enumerate(starts):
        row = []
        for j in range(cfg.rollouts):
            ep = windows.run(s, SamplingJudge(mlp, rng))
            rewards[i, j] = percentage_reward(windows.base_score(s), ep.score)
            row.append(ep)
        episodes.append(row)
    adv = group_advantages(rewards) if cfg.rollouts > 1 else rewards
    batch = DecisionBatch(reward=float(rewards.mean()))
    for i, row in enumerate(episodes):
        for j, ep in enumerate(row):
            batch.features += ep.features
            batch.actions += ep.actions
            batch.advantages += [float(adv[i, j])] * len(ep.actions)
    rejects = sum(a == REJECT for a in batch.actions)
    batch.note = f"reject {rejects / max(1, len(batch.actions)):.2f}"
    return batch


def probe_batch(
    windows: Windows,
    starts: list[int],
    mlp: NumpyMlp,
    cfg: InspectorConfig,
    rng: np.random.Generator,
) -> DecisionBatch:
    """Greedy run per window, then `cfg.probes` reruns each flipping one of its decisions.

    A flip of decision k with rerun reward R_k against the greedy run's R gives two
    samples at the same state: the flipped action with advantage R_k − R and the greedy
    one with R − R_k.
    """
    batch = DecisionBatch()
    rewards = []
    for s in starts:
        base = windows.base_score(s)
        greedy = windows.run(s, ReplayJudge(mlp))
        r = percentage_reward(base, greedy.score)
        rewards.append(r)
        count = len(greedy.actions)
        for k in rng.choice(count, size=min(cfg.probes, count), replace=False).tolist():
            flipped = 1 - greedy.actions[k]
            ep = windows.run(s, ReplayJudge(mlp, [*greedy.actions[:k], flipped]))
            if not np.array_equal(ep.features[k], greedy.features[k]):
                raise IdlegateError(
                    f"a rerun of window {s} did not reach decision {k}'s state again; the "
                    "simulation of rigid jobs must be deterministic for probes (use "
                    "advantage='rollouts' otherwise)"
                )
            gain = percentage_reward(base, ep.score) - r
            batch.features += [greedy.features[k], greedy.features[k]]
            batch.actions += [flipped, greedy.actions[k]]
            batch.advantages += [gain, -gain]
    batch.reward = statistics.fmean(rewards)
    gains = batch.advantages[::2]
    batch.note = f"better flips {sum(g > 0 for g in gains)}/{len(gains)}"
    return batch


# ---------------------------------------------------------------------------------------
# Export


def onnx_bytes(net: InspectorNet, cfg: InspectorConfig, iterations: int) -> bytes:
    """The net as an ONNX inspector with its metadata (`policy.inspector.METADATA_KEYS`)."""
    trained_on = {
        "trace": Path(cfg.trace).name,
        "base": cfg.base,
        "iterations": iterations,
        "seed": cfg.seed,
        "sequence_length": cfg.sequence_length,
        "train_fraction": cfg.train_fraction,
        "requested_time": cfg.requested_time,
        "reward": cfg.reward,
        "lublin_share": cfg.lublin_share,
        **(
            {
                "lublin_executors": cfg.lublin_executors,
                "lublin_interarrival": cfg.lublin_interarrival,
            }
            if cfg.lublin_share > 0
            else {}
        ),
    }
    return export_bytes(
        copy.deepcopy(net),  # the training net keeps its mode
        (torch.zeros(1, NUM_FEATURES),),
        input_names=[INPUT_NAME],
        output_names=[OUTPUT_NAME],
        dynamic_axes={INPUT_NAME: {0: "batch"}, OUTPUT_NAME: {0: "batch"}},
        metadata={
            "idlegate.format": ONNX_FORMAT,
            "idlegate.inspector.feature_version": str(FEATURE_VERSION),
            "idlegate.inspector.features": ",".join(FEATURE_NAMES),
            "idlegate.inspector.ask": cfg.ask,
            "idlegate.inspector.max_rejections": str(cfg.max_rejections),
            "idlegate.inspector.interval": repr(float(cfg.interval)),
            "idlegate.inspector.trained_on": json.dumps(trained_on, sort_keys=True),
        },
        doc="idlegate inspector: accept/reject logits of a rigid base's pick",
    )


def export_inspector(net: InspectorNet, cfg: InspectorConfig, iterations: int) -> Path:
    """Write the net to `cfg.out` after the parity check; returns the path."""
    data = onnx_bytes(net, cfg, iterations)
    x = np.random.default_rng(0).random((256, NUM_FEATURES), dtype=np.float32)
    check_parity(net, data, {INPUT_NAME: x})
    return save_onnx(data, cfg.out)


# ---------------------------------------------------------------------------------------
# The loop


@dataclass(frozen=True)
class InspectorResult:
    """A finished run: iterations done, wall time, the best validation R and where it went."""

    iterations: int
    wall_seconds: float
    best_reward: float
    best_iteration: int
    base_val_bsld: float
    reject_val_bsld: float
    best_val_bsld: float
    out: Path


def _learn(
    net: InspectorNet,
    optimizer: torch.optim.Optimizer,
    windows: Windows,
    cfg: InspectorConfig,
    rng: np.random.Generator,
) -> str:
    """One iteration's batch and PPO update (none without a signal); what it reports."""
    starts = windows.draw(rng, cfg.sequences)
    collect = probe_batch if cfg.advantage == "probes" else rollout_batch
    batch = collect(windows, starts, NumpyMlp(net), cfg, rng)
    a = np.asarray(batch.advantages)
    acts = np.asarray(batch.actions)
    line = f"R {batch.reward:+.3f}  decisions {len(acts):5d}"
    if len(acts) and a.std() > 0:
        agent = InspectorDecisions(net, np.stack(batch.features), acts)
        stats = ppo_update(
            agent,
            optimizer,
            to_tensor(a / a.std()),
            PPOSettings.of(cfg, target_kl=cfg.target_kl or None),
            rng,
        )
        line += f"  {batch.note}  kl {stats.approx_kl:.4f}  clip {stats.clip_fraction:.2f}"
    return line


def train_inspector(
    cfg: InspectorConfig, progress: Callable[[str], None] = print
) -> InspectorResult:
    """Train with PPO (see the module docstring); `progress` gets one line per iteration."""
    start_time = time.perf_counter()
    torch.set_num_threads(1)  # one small MLP: more threads only contend for the cores
    torch.manual_seed(cfg.seed)
    rng = np.random.default_rng(cfg.seed)
    windows = Windows(cfg, "train")
    val_starts = windows.draw(np.random.default_rng([cfg.seed, 1]), cfg.validation_sequences)
    net = InspectorNet(cfg.hidden, cfg.initial_reject)
    if cfg.warm_start_delay is not None:
        cloned, agreement = warm_start(net, windows, cfg, rng)
        progress(
            f"warm start: cloned 'accept iff it starts within {cfg.warm_start_delay:g} s' on "
            f"{cloned} decisions, agreement {agreement:.3f}"
        )
    optimizer = torch.optim.Adam(net.parameters(), lr=cfg.learning_rate)
    base_val = statistics.fmean(windows.base_bsld(s) for s in val_starts)
    reject_val = statistics.fmean(windows.reject_bsld(s) for s in val_starts)
    best_reward, best_bsld = validate(windows, val_starts, NumpyMlp(net))
    best_iteration = 0
    out = export_inspector(net, cfg, 0)
    progress(
        f"validation: base {cfg.base} bsld {base_val:.1f}, reject rule {reject_val:.1f}, "
        f"initial inspector {best_bsld:.1f} (R {best_reward:+.3f}) on {len(val_starts)} windows"
    )
    done = 0
    for it in range(1, cfg.iterations + 1):
        line = f"iter {it:4d}  " + _learn(net, optimizer, windows, cfg, rng)
        done = it
        if it % cfg.validate_every == 0 or it == cfg.iterations:
            reward, bsld = validate(windows, val_starts, NumpyMlp(net))
            line += f"  val R {reward:+.3f} bsld {bsld:.1f}"
            if reward > best_reward:
                best_reward, best_bsld, best_iteration = reward, bsld, it
                export_inspector(net, cfg, it)
                line += " (best, saved)"
        elapsed = time.perf_counter() - start_time
        progress(f"{line}  {elapsed:.0f}s")
        if cfg.time_limit and elapsed > cfg.time_limit:
            progress(f"time limit of {cfg.time_limit:.0f} s reached")
            break
    return InspectorResult(
        iterations=done,
        wall_seconds=time.perf_counter() - start_time,
        best_reward=best_reward,
        best_iteration=best_iteration,
        base_val_bsld=base_val,
        reject_val_bsld=reject_val,
        best_val_bsld=best_bsld,
        out=out,
    )
