"""The typed training configuration, its presets, and loading it from YAML.

`TrainConfig` is a `Config` (`idlegate.config`): the docstring under each field says
what it means, and its top-level settings are also `idlegate train`'s flags. Its
``model`` section is the network's own `ModelConfig` (with ``features`` and ``actions``
inside). A YAML file holds any subset of the fields: its values are merged, key by
key and section by section, over a preset (the file's own ``preset:`` key, else the one
given on the command line, else ``quick``), so a file only has to say what differs::

    preset: quick
    iterations: 200
    workload: {name: tpch-like, options: {num_executors: 10, num_stream: 60, load: 0.85}}
    curriculum: {initial_mean_seconds: 300}

Unknown keys, wrong types and out-of-range values are errors that name the field
(`load_config` raises an `IdlegateError` sentence, the CLI prints it).

A new `workload` replaces the preset's whole workload section (and, unless the file
also gives `validation.workload`, validation then uses the new training workload).

The presets (``quick``, ``full``, ``default``, ``cluster``) are plain data in
`training.presets`, whose docstring describes each one and its measured wall time;
`PRESETS` is re-exported here.

A cluster's own history (``idlegate train --preset cluster --history HISTORY``) becomes
the `history` section and the training workload, the history's train part replayed on
its pool (`training.history`); validation replays the same part. ``idlegate advise`` reports on
the rest.
"""

from __future__ import annotations

import copy
import hashlib
import json
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import ConfigDict, Field, field_validator, model_validator

from idlegate.config import Config, Flag
from idlegate.documents import YamlLoader, YamlRefusal
from idlegate.errors import IdlegateError
from idlegate.policy.heuristics import SCHEDULERS
from idlegate.policy.model_config import ModelConfig
from idlegate.sim.resources import ResourceVector
from idlegate.sim.workloads import workload_config
from idlegate.textfiles import check_writable_dir, read_text
from idlegate.training.history import HistorySource
from idlegate.training.presets import PRESETS


class WorkloadSpec(Config):
    """A workload of `idlegate.sim.workloads`: its registry name and generator options."""

    name: str = "tpch-like"
    """Workload name: synthetic, tpch, tpch-like, mixed or file."""
    options: dict[str, Any] = Field(default_factory=dict)
    """Options of the workload generator (e.g. num_executors, num_stream, load);
    `idlegate simulate --help` and `sim.workloads` list them per workload."""
    resources: ResourceVector | None = None
    """The pool's resources beyond its executors (its pods), e.g. cpu=32,memory=128Gi:
    a task starts only where its stage's requests fit (`idlegate.sim.pool`). None: a
    pods-only pool, as `simulate`'s --resources."""

    @model_validator(mode="after")
    def _valid_options(self) -> WorkloadSpec:
        try:
            workload_config(self.name, **self.options)
        except IdlegateError as exc:
            raise ValueError(str(exc)) from None
        return self

    def key(self) -> str:
        """A stable text identity (used to cache built workloads per seed)."""
        key: dict[str, Any] = {"name": self.name, "options": self.options}
        if self.resources is not None:
            key["resources"] = self.resources.format()
        return json.dumps(key, sort_keys=True)


class ValidationSpec(Config):
    """Greedy evaluation of the policy on fixed arrival sequences never used in training."""

    workload: WorkloadSpec | None = None
    """The validation workload; default: the training workload's generator and options
    (whole episodes, no memoryless termination)."""
    seeds: tuple[Annotated[int, Field(ge=0)], ...] = Field(
        tuple(range(1_000_000, 1_000_008)), min_length=1
    )
    """Arrival-sequence seeds of the validation set; training never draws them."""
    every: int = Field(5, ge=1)
    """Validate every this many iterations (and at the end)."""
    reference_schedulers: tuple[str, ...] = ("fifo", "fair", "sjf-cp")
    """Heuristics whose validation average JCT is computed once, for reference."""

    @field_validator("reference_schedulers")
    @classmethod
    def _known_schedulers(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        bad = [s for s in value if s not in SCHEDULERS]
        if bad:
            raise ValueError(f"unknown scheduler {bad[0]!r}; valid names: {', '.join(SCHEDULERS)}")
        return value

    @field_validator("seeds")
    @classmethod
    def _distinct(cls, value: tuple[int, ...]) -> tuple[int, ...]:
        if len(set(value)) != len(value):
            raise ValueError("validation seeds must be distinct")
        return value


class EntropySpec(Config):
    """Entropy bonus β·H(π(·|s)), decayed linearly per iteration to a floor."""

    weight: float = Field(0.02, ge=0)
    """β at iteration 0."""
    decay: float = Field(0.0002, ge=0)
    """Subtracted from β every iteration."""
    minimum: float = Field(0.001, ge=0)
    """β never goes below this."""


class CurriculumSpec(Config):
    """Memoryless episode termination (Decima): each iteration's rollouts stop at
    max_time ~ Exp(mean), mean_k = min(initial + k·increment, maximum)."""

    enabled: bool = True
    """False: every rollout runs its whole arrival sequence."""
    initial_mean_seconds: float = Field(600.0, gt=0)
    """Mean episode length (simulated s) at iteration 0."""
    increment_seconds: float = Field(20.0, ge=0)
    """Growth of the mean per iteration."""
    max_mean_seconds: float = Field(4000.0, gt=0)
    """Ceiling of the mean episode length."""


class BCSpec(Config):
    """Behaviour-cloning warm start: imitate a heuristic before the RL phase."""

    enabled: bool = True
    """Run the warm start (skipped on resume)."""
    heuristic: str = "sjf-cp"
    """The teacher: any scheduler spec but random, e.g. sjf-cp, fair or the planner
    lookahead:srpt (whose WAITs and idle slots become labels too)."""
    episodes: int = Field(8, ge=1)
    """Teacher episodes recorded."""
    episode_seconds: float | None = Field(None, gt=0)
    """Stop each teacher episode here (None: whole sequence)."""
    epochs: int = Field(10, ge=0)
    """Passes over the recorded decisions."""
    batch_size: int = Field(256, ge=1)
    """Decisions per gradient step."""
    lr: float = Field(3e-3, gt=0)
    """Adam learning rate of the warm start."""
    dagger_rounds: int = Field(0, ge=0)
    """DAgger rounds after the first fit: the policy acts (greedily) for `episodes` more
    episodes, the teacher labels the states it visits, and the model is fitted again on
    all decisions so far (0: plain behaviour cloning)."""

    @field_validator("heuristic")
    @classmethod
    def _known(cls, value: str) -> str:
        # parsed only: the warm start builds the teacher once, when it runs
        from idlegate.policy import SchedulerSpec

        try:
            kind = SchedulerSpec.parse(value).kind
        except IdlegateError as exc:
            raise ValueError(f"the BC teacher {value!r} is not a scheduler: {exc}") from None
        if kind == "random":
            raise ValueError("the BC teacher cannot be random: it has nothing to teach")
        return value


class PPOSpec(Config):
    """PPO's update (`training.ppo`), used when ``algorithm: ppo``: several epochs of
    clipped minibatch steps over each iteration's decisions."""

    clip: float = Field(0.2, gt=0, lt=1)
    """ε: the probability ratio π/π_old is clipped to [1 − ε, 1 + ε]."""
    epochs: int = Field(4, ge=1)
    """Passes over the iteration's decisions (each reshuffled)."""
    minibatch_size: int = Field(2048, ge=1)
    """Decisions per optimizer step (computed in chunks of learner_batch)."""
    target_kl: float | None = Field(0.02, gt=0)
    """Stop the iteration's remaining steps once the KL(π_old ‖ π) estimate of a
    minibatch, measured before its step, exceeds this (None: always run every epoch)."""


class TrainConfig(Config):
    """Everything `idlegate train` needs; one run = f(config) (see `training.reinforce`)."""

    model_config = ConfigDict(title="the training config")

    preset: str | None = None
    """The preset a config file's settings are merged over: quick (≤ 10 min), full,
    default (the shipped policy's), cluster (a cluster's history: needs --history), idle
    (distils the oracle planner; docs/research/idle.md) or resources (the shipped policy's resource
    adapter; docs/resources.md); a file's own preset key, else quick."""
    seed: int = Field(0, ge=0)
    """Seeds model init and every random draw."""
    workload: WorkloadSpec = WorkloadSpec()
    """The training workload (arrival sequences)."""
    mixture: tuple[WorkloadSpec, ...] = ()
    """More training workloads: teacher and RL episodes cycle over [workload, *mixture]
    (one policy for several clusters and job mixes)."""
    validation: ValidationSpec = ValidationSpec()
    """Fixed validation set and reference runs."""
    model: ModelConfig = ModelConfig()
    """The policy network and its feature and action spaces (`policy.model.ModelConfig`)."""
    iterations: int = Field(100, ge=0)
    """RL iterations."""
    algorithm: Literal["reinforce", "ppo"] = "reinforce"
    """The RL update: reinforce (one policy-gradient step per iteration) or ppo (epochs
    of clipped minibatch steps, see the ppo section); both use the input-dependent
    baseline's advantages."""
    ppo: PPOSpec = PPOSpec()
    """PPO's settings (used when algorithm is ppo)."""
    init_checkpoint: str | None = None
    """Start from this checkpoint's weights (e.g. an earlier run's bc.pt or best.pt; its
    model settings must match) instead of a fresh model; the BC warm start is then
    skipped."""
    base_policy: str | None = None
    """An exported policy (a .onnx path, or default: the shipped one) whose weights the
    model starts from and keeps: only the resource adapter (`policy.model.ResourceAdapter`;
    model.features.resource_features must be true) is trained, by the BC warm start and
    any iterations, so on a pods-only pool the result answers as the base does."""
    rollouts_per_sequence: int = Field(8, ge=2)
    """N rollouts of the same arrival sequence per iteration (the input-dependent
    baseline averages over them)."""
    workers: int = Field(2, ge=1, le=64)
    """Rollout worker processes (1: in-process)."""
    mp_context: Literal["forkserver", "spawn"] = "forkserver"
    """How worker processes start."""
    ray: str | None = None
    """Run rollouts, teacher labelling and validation on Ray instead of `workers` local
    processes: auto (a new local instance on all cores) or a running cluster's head
    address host:port (each node needs idlegate and the files named on the command
    line). Needs pip install 'idlegate[ray]'."""
    rollout_backend: Literal["onnx", "torch"] = "onnx"
    """Inference in rollouts: onnx (the model exported each iteration, ~5x faster) or
    torch. Log-probs for the update are always recomputed in torch."""
    lr: float = Field(1e-3, gt=0)
    """Adam learning rate."""
    betas: tuple[Annotated[float, Field(ge=0, lt=1)], Annotated[float, Field(ge=0, lt=1)]] = (
        0.9,
        0.999,
    )
    """Adam betas."""
    grad_clip: float | None = Field(1.0, gt=0)
    """Clip the gradient's global norm (None: no clipping)."""
    gamma: float = Field(1.0, gt=0, le=1)
    """Per-decision discount (1: average JCT)."""
    reward_scale: float = Field(1.0, gt=0)
    """Rewards −Δ∫jobs dt are divided by this."""
    normalize_advantages: bool = True
    """Divide the iteration's advantages by their std."""
    baseline: Literal["step", "linear"] = "step"
    """Interpolating other rollouts' returns-to-go at a decision time: step (piecewise
    constant) or linear (Decima's code)."""
    entropy: EntropySpec = EntropySpec()
    """Entropy bonus."""
    curriculum: CurriculumSpec = CurriculumSpec()
    """Episode-length curriculum."""
    learner_batch: int = Field(2048, ge=1)
    """Decisions per forward/backward pass of the update."""
    max_update_decisions: int | None = Field(None, ge=1)
    """Use at most this many decisions (a uniform sample) per update; bounds the
    learner's cost on long episodes (None: all)."""
    learner_threads: int = Field(1, ge=1, le=64)
    """torch threads of the learner's update."""
    bc: BCSpec = BCSpec()
    """Behaviour-cloning warm start."""
    out_dir: Annotated[str, Flag("--out")] = "out/train"
    """Output directory: checkpoints, CSV log and summary."""
    checkpoint_every: int = Field(10, ge=1)
    """Write checkpoint.pt every this many iterations."""
    resume: bool = False
    """Continue the run in out_dir from its checkpoint.pt (same config)."""
    history: HistorySource | None = None
    """The cluster history trained on (`idlegate train --history`; its train part is
    the workload), named in the exported model's metadata; None: not a history."""

    @model_validator(mode="after")
    def _cluster_needs_history(self) -> TrainConfig:
        if self.preset == "cluster" and self.history is None:
            raise ValueError(
                "preset cluster trains on a cluster's own history: give --history HISTORY "
                "(a history file: idlegate history export or idlegate history simulate)"
            )
        if self.history is not None and self.preset != "cluster":
            raise ValueError(
                "--history trains with --preset cluster; add --preset cluster, or train "
                "another preset on the file with --workload file --file HISTORY"
            )
        return self

    @property
    def training_workloads(self) -> tuple[WorkloadSpec, ...]:
        """The training workloads, in the order episodes cycle over them."""
        return (self.workload, *self.mixture)

    @property
    def validation_workload(self) -> WorkloadSpec:
        """The validation workload (the training one unless given)."""
        return self.validation.workload or self.workload

    def training_dict(self) -> dict[str, Any]:
        """The config as plain JSON data (stored in checkpoints)."""
        return self.model_dump(mode="json")

    def fingerprint(self) -> str:
        """Hash of everything that changes the training trace (not workers, out_dir, resume)."""
        data = self.training_dict()
        for k in RUN_ONLY_FIELDS:
            data.pop(k, None)
        return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()[:16]


RUN_ONLY_FIELDS: tuple[str, ...] = (
    "preset",
    "workers",
    "mp_context",
    "ray",
    "out_dir",
    "resume",
    "iterations",
    "checkpoint_every",
)
"""Fields that may differ when resuming: they do not change the trace of an iteration."""


ATOMIC_KEYS: frozenset[str] = frozenset({"workload", "options"})
"""Sections replaced as a whole, never merged key by key (options of another workload
would mix, e.g. a preset's num_stream with a file's num_jobs)."""


def merge(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    """`override` over `base`, recursively for nested mappings except `ATOMIC_KEYS`.

    Lists and workload sections are replaced. A new training `workload` without a
    `validation.workload` also resets the validation workload to "the training one".
    """
    out = copy.deepcopy(base)
    for k, v in override.items():
        if isinstance(v, dict) and isinstance(out.get(k), dict) and k not in ATOMIC_KEYS:
            out[k] = merge(out[k], v)
        else:
            out[k] = copy.deepcopy(v)
    given = override.get("validation")
    keeps = isinstance(given, dict) and "workload" in given
    if "workload" in override and not keeps and isinstance(out.get("validation"), dict):
        out["validation"]["workload"] = None
    return out


def load_config(
    path: str | Path | None = None, preset: str | None = None, **overrides: Any
) -> TrainConfig:
    """The config of YAML file `path` over its preset (file key, else `preset`, else quick).

    `overrides` (e.g. out_dir, workers, resume from CLI flags; None values are ignored)
    are applied last. IdlegateError for an out_dir that cannot be a directory.
    """
    data: dict[str, Any] = {}
    if path is not None:
        p = Path(path)
        try:  # (missing, a directory, not UTF-8: one sentence each, `read_text`'s)
            text = read_text(p, "config file", "give a YAML mapping of settings")
            loaded = yaml.load(text, Loader=YamlLoader)
        except YamlRefusal as exc:
            raise IdlegateError(f"config file {exc.at(repr(str(p)))}") from None
        except yaml.YAMLError as exc:
            raise IdlegateError(f"config file {str(p)!r} is not valid YAML: {exc}") from None
        if loaded is not None and not isinstance(loaded, dict):
            raise IdlegateError(
                f"config file {str(p)!r} must hold a mapping of settings, "
                f"not a {type(loaded).__name__}"
            )
        if not loaded:  # (an empty file would train the preset, as if no file were given)
            raise IdlegateError(
                f"config file {str(p)!r} holds no setting; give at least one (e.g. preset: "
                "quick), or leave --config out to train the preset"
            )
        data = loaded
    base_name = data.get("preset") or preset or "quick"
    if preset is not None and data.get("preset") not in (None, preset):
        raise IdlegateError(
            f"the config file says preset {data['preset']!r} but --preset is {preset!r}; "
            "give one of them"
        )
    if base_name not in PRESETS:
        raise IdlegateError(f"unknown preset {base_name!r}; choose one of: {', '.join(PRESETS)}")
    merged = merge(PRESETS[base_name], data)
    merged = merge(merged, {k: v for k, v in overrides.items() if v is not None})
    source = f"config file {str(path)!r}" if path is not None else f"preset {base_name!r}"
    if any(v is not None for v in overrides.values()):
        source += " with the flags given"  # the flag is what is wrong, not the preset
    config = TrainConfig.of(merged, source)
    check_writable_dir(config.out_dir, "a training run")  # (before the run, not as it writes)
    return config


class InspectorConfig(Config):
    """Everything a training run of the inspector depends on (`training.inspector`)."""

    model_config = ConfigDict(title="the inspector's training")

    trace: Annotated[str, Flag("--file")]
    """The SWF trace; windows come from its train part."""
    base: str = "easy:sjf"
    """The rigid base: ORDER, strict:ORDER or easy:ORDER."""
    out: str = "out/inspector.onnx"
    """Where the ONNX model goes."""
    seed: int = Field(0, ge=0)
    """Seeds the weights and the windows drawn."""
    iterations: int = Field(200, ge=1)
    """PPO iterations at most."""
    time_limit: float = Field(0.0, ge=0)
    """Stop after this many seconds of wall time (0: none)."""
    sequence_length: int = Field(256, ge=2)
    """Jobs per window."""
    train_fraction: float = Field(0.2, gt=0, lt=1)
    """Share of the trace's first jobs to train on."""
    requested_time: Literal["run", "trace"] = "run"
    """run: requested time = run time (SchedInspector's setting); trace: the trace's
    requested times."""
    reward: Literal["bsld", "wait"] = "bsld"
    """The metric of the percentage reward: the window's average bounded slowdown or its
    average wait."""
    lublin_share: float = Field(0.0, ge=0, le=1)
    """Share of training windows drawn from the Lublin model instead of the trace (a
    mixture of machine sizes and loads)."""
    lublin_executors: tuple[int, ...] = Field((64, 128, 256, 512), min_length=1)
    """Machine sizes of the Lublin windows (one drawn per window)."""
    lublin_interarrival: tuple[float, ...] = Field((0.5, 0.75, 1.0, 1.5), min_length=1)
    """Inter-arrival scales of the Lublin windows (below 1: more load; one per window)."""
    advantage: Literal["probes", "rollouts"] = "probes"
    """probes: run each window greedily and flip `probes` of its decisions, each rerun's
    R minus the greedy run's R is the flipped decision's advantage; rollouts: sample
    `rollouts` runs per window, every decision gets its run's R minus the window's mean R."""
    probes: int = Field(12, ge=1)
    """Decisions flipped per window (probes)."""
    sequences: int = Field(4, ge=1)
    """Windows per iteration."""
    rollouts: int = Field(8, ge=1)
    """Sampled rollouts per window (their mean R is the baseline)."""
    ask: Literal["blocked", "all"] = "blocked"
    """blocked: inspect only picks that cannot start now; all: every pick."""
    max_rejections: int = Field(72, ge=0)
    """Rejections per job at most."""
    interval: float = Field(600.0, gt=0)
    """Seconds without an event that count as a rejection."""
    initial_reject: float = Field(0.9, gt=0, lt=1)
    """Probability of rejecting at the start (the output bias): near 1 the first rollouts
    stay close to the reject rule and differ by a few accepts, which the per-window
    baseline can credit."""
    warm_start_delay: float | None = Field(None, gt=0)
    """Before PPO, clone (behaviour cloning) the hand-set rule 'accept a blocked pick iff
    it could start within this many seconds' on warm_start_sequences train windows;
    None: no warm start."""
    warm_start_sequences: int = Field(16, ge=1)
    """Train windows whose decisions the warm start clones."""
    warm_start_steps: int = Field(300, ge=1)
    """Full-batch Adam steps of the warm start."""
    hidden: tuple[int, ...] = Field((32, 16, 8), min_length=1)
    """Hidden layer widths of the MLP."""
    learning_rate: float = Field(3e-3, gt=0)
    """Adam's step size."""
    epochs: int = Field(4, ge=1)
    """PPO passes over an iteration's decisions."""
    minibatch: int = Field(64, ge=1)
    """Decisions per gradient step."""
    clip: float = Field(0.2, gt=0, lt=1)
    """PPO's clip range ε."""
    entropy_weight: float = Field(0.001, ge=0)
    """Entropy bonus β."""
    target_kl: float = Field(0.03, ge=0)
    """Stop an update's passes beyond this KL (0: never)."""
    max_grad_norm: float = Field(0.5, gt=0)
    """Gradient norm clip."""
    validation_sequences: int = Field(16, ge=1)
    """Train-part windows of the greedy validation."""
    validate_every: int = Field(5, ge=1)
    """Validate every N iterations."""


class WindowTrainConfig(Config):
    """Settings of one split-window training run (`training.window`; every field has a
    default)."""

    model_config = ConfigDict(title="the split-window training")

    m_head: int = Field(8, ge=0, le=256)
    """Head slots (oldest waiting jobs)."""
    m_tail: int = Field(8, ge=0, le=256)
    """Tail slots (newest waiting jobs); 0: head-only."""
    iterations: int = Field(100, ge=1, le=100_000)
    """PPO iterations."""
    seed: int = Field(0, ge=0)
    """Seeds the weights, draws and episode seeds."""
    workload: Annotated[Literal["lublin", "swf"], Flag("-w")] = "lublin"
    """lublin: the generator; swf: windows of --file's train part."""
    file: str | None = None
    """The SWF trace (workload swf only)."""
    num_jobs: Annotated[int, Flag("--jobs-count")] = Field(256, ge=8, le=100_000)
    """Jobs per episode."""
    sequences: int = Field(2, ge=1, le=1000)
    """Job sequences per iteration."""
    rollouts: int = Field(4, ge=1, le=100)
    """Rollouts of each sequence (differing draws)."""
    advantage: Literal["time", "gae"] = "time"
    """time: return minus the mean over the sequence's rollouts of their return at the
    same time (input-dependent baseline); gae: GAE with the value head."""
    w_idle: float = Field(1.0, ge=0)
    """Weight of idle capacity (I)."""
    w_queue: float = Field(1.0, ge=0)
    """Weight of queue length (Q)."""
    w_wait: float = Field(0.0, ge=0)
    """Weight of size-relative waiting (W)."""
    gamma: float = Field(1.0, gt=0, le=1)
    """Discount per decision (1: none; below 1 rewards extra forwards, which push costs
    to later decisions)."""
    gae_lambda: float = Field(0.95, ge=0, le=1)
    """GAE's λ."""
    learning_rate: float = Field(1e-3, gt=0, le=1)
    """Adam's step size."""
    clip: float = Field(0.2, gt=0, lt=1)
    """PPO clip range ε."""
    epochs: int = Field(4, ge=1, le=100)
    """PPO epochs per iteration."""
    minibatch: int = Field(256, ge=8)
    """Decisions per minibatch."""
    target_kl: float = Field(0.03, gt=0)
    """Stop an iteration's epochs when approx KL exceeds it."""
    entropy_weight: float = Field(0.01, ge=0)
    """Entropy bonus β."""
    value_weight: float = Field(0.5, ge=0)
    """Weight of the value loss."""
    max_grad_norm: float = Field(0.5, gt=0)
    """Gradient norm clip."""
    hidden: int = Field(32, ge=4, le=1024)
    """Width of the hidden layers."""
    eval_every: int = Field(5, ge=1)
    """Iterations between greedy validation runs."""
    validation_seeds: int = Field(4, ge=1, le=1000)
    """Held-out episodes per validation."""
    time_limit: float = Field(1200.0, gt=0)
    """Wall-time cap in seconds; training stops after this."""

    @model_validator(mode="after")
    def _check(self) -> WindowTrainConfig:
        if self.m_head + self.m_tail < 1:
            raise ValueError("the window needs at least one slot: m_head + m_tail >= 1")
        if self.workload == "swf" and not self.file:
            raise ValueError("workload swf needs an SWF trace: give file (--file)")
        if self.workload == "lublin" and self.file:
            raise ValueError("file (--file) is for workload swf; lublin is generated")
        return self
