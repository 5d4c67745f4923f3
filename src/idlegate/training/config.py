"""The typed training configuration, its presets, and loading it from YAML.

`TrainConfig` is a pydantic v2 model; every field carries its meaning as a
``description`` (`config_reference()` lists them all as a commented YAML skeleton).
A YAML file holds any subset of the fields: its values are merged, key by
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

The presets (``quick``, ``full``, ``default``) are plain data in `training.presets`,
whose docstring describes each one and its measured wall time; `PRESETS` is
re-exported here.
"""

from __future__ import annotations

import copy
import hashlib
import json
from dataclasses import fields as dc_fields
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from idlegate.errors import IdlegateError
from idlegate.policy.actions import ActionConfig
from idlegate.policy.features import FeatureConfig
from idlegate.policy.heuristics import SCHEDULERS
from idlegate.policy.model import ModelConfig
from idlegate.sim.workloads import workload_config
from idlegate.training.presets import PRESETS

_FEATURE_DEFAULTS = {f.name: f.default for f in dc_fields(FeatureConfig)}
_ACTION_DEFAULTS = {f.name: f.default for f in dc_fields(ActionConfig)}
_MODEL_DEFAULTS = {
    f.name: f.default for f in dc_fields(ModelConfig) if f.name not in ("features", "actions")
}


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class WorkloadSpec(_Section):
    """A workload of `idlegate.sim.workloads`: its registry name and generator options."""

    name: str = Field(
        default="tpch-like",
        description="Workload name: synthetic, tpch, tpch-like, mixed or file.",
    )
    options: dict[str, Any] = Field(
        default_factory=dict,
        description="Options of the workload generator (e.g. num_executors, num_stream, load); "
        "`idlegate simulate --help` and `sim.workloads` list them per workload.",
    )

    @model_validator(mode="after")
    def _valid_options(self) -> WorkloadSpec:
        try:
            workload_config(self.name, **self.options)
        except IdlegateError as exc:
            raise ValueError(str(exc)) from None
        return self

    def key(self) -> str:
        """A stable text identity (used to cache built workloads per seed)."""
        return json.dumps({"name": self.name, "options": self.options}, sort_keys=True)


class ValidationSpec(_Section):
    """Greedy evaluation of the policy on fixed arrival sequences never used in training."""

    workload: WorkloadSpec | None = Field(
        default=None,
        description="The validation workload; default: the training workload's generator and "
        "options (whole episodes, no memoryless termination).",
    )
    seeds: tuple[int, ...] = Field(
        default=tuple(range(1_000_000, 1_000_008)),
        min_length=1,
        description="Arrival-sequence seeds of the validation set; training never draws them.",
    )
    every: int = Field(
        default=5, ge=1, description="Validate every this many iterations (and at the end)."
    )
    reference_schedulers: tuple[str, ...] = Field(
        default=("fifo", "fair", "sjf-cp"),
        description="Heuristics whose validation average JCT is computed once, for reference.",
    )

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
        if any(s < 0 for s in value):
            raise ValueError("validation seeds must be >= 0")
        if len(set(value)) != len(value):
            raise ValueError("validation seeds must be distinct")
        return value


class ModelSection(_Section):
    """The network and its feature/action spaces (`policy.model.ModelConfig`)."""

    embed_dim: int = Field(
        default=_MODEL_DEFAULTS["embed_dim"], ge=1, description="D: embedding width."
    )
    hidden_dim: int = Field(
        default=_MODEL_DEFAULTS["hidden_dim"], ge=1, description="Hidden width of the stage head."
    )
    level_hidden_dim: int = Field(
        default=_MODEL_DEFAULTS["level_hidden_dim"],
        ge=1,
        description="Hidden width of the cap and idle heads.",
    )
    mp_steps: int = Field(
        default=_MODEL_DEFAULTS["mp_steps"],
        ge=0,
        description="T: message-passing steps (cover the DAG depth).",
    )
    negative_slope: float = Field(
        default=_MODEL_DEFAULTS["negative_slope"], description="Leaky-ReLU slope."
    )
    idle_head: bool = Field(
        default=_ACTION_DEFAULTS["idle_head"],
        description="False: no deliberate idle slots (the Decima ablation).",
    )
    idle_levels: int = Field(
        default=_ACTION_DEFAULTS["idle_levels"],
        ge=1,
        description="G: idle lengths d = r·l·g/G, g = 0..G.",
    )
    idle_ratio: float = Field(
        default=_ACTION_DEFAULTS["idle_ratio"],
        gt=0,
        description="r: the longest idle slot in stage lengths.",
    )
    wait_action: bool = Field(
        default=_ACTION_DEFAULTS["wait_action"],
        description="False: no WAIT action; the policy launches whenever it is asked.",
    )
    cp_features: bool = Field(
        default=_FEATURE_DEFAULTS["cp_features"],
        description="False: zero the critical-path/average-width features (the ablation).",
    )
    time_unit: float = Field(
        default=_FEATURE_DEFAULTS["time_unit"],
        gt=0,
        description="Seconds per unit before the features' log1p.",
    )
    arrival_window: int = Field(
        default=_FEATURE_DEFAULTS["arrival_window"],
        ge=2,
        description="Recent arrivals behind the arrival-rate and job-size features.",
    )
    max_cap_levels: int = Field(
        default=_FEATURE_DEFAULTS["max_cap_levels"],
        ge=2,
        description="Most parallelism-cap levels (geometric above this many executors).",
    )
    load_clip: float = Field(
        default=_FEATURE_DEFAULTS["load_clip"],
        gt=0,
        description="Upper clip of the offered-load feature.",
    )

    def to_model_config(self) -> ModelConfig:
        """The `ModelConfig` this section describes."""
        data = self.model_dump()
        features = {k: data.pop(k) for k in list(data) if k in _FEATURE_DEFAULTS}
        actions = {k: data.pop(k) for k in list(data) if k in _ACTION_DEFAULTS}
        return ModelConfig.from_dict({**data, "features": features, "actions": actions})


class EntropySpec(_Section):
    """Entropy bonus β·H(π(·|s)), decayed linearly per iteration to a floor."""

    weight: float = Field(default=0.02, ge=0, description="β at iteration 0.")
    decay: float = Field(default=0.0002, ge=0, description="Subtracted from β every iteration.")
    minimum: float = Field(default=0.001, ge=0, description="β never goes below this.")


class CurriculumSpec(_Section):
    """Memoryless episode termination (Decima): each iteration's rollouts stop at
    max_time ~ Exp(mean), mean_k = min(initial + k·increment, maximum)."""

    enabled: bool = Field(
        default=True, description="False: every rollout runs its whole arrival sequence."
    )
    initial_mean_seconds: float = Field(
        default=600.0, gt=0, description="Mean episode length (simulated s) at iteration 0."
    )
    increment_seconds: float = Field(
        default=20.0, ge=0, description="Growth of the mean per iteration."
    )
    max_mean_seconds: float = Field(
        default=4000.0, gt=0, description="Ceiling of the mean episode length."
    )


class BCSpec(_Section):
    """Behaviour-cloning warm start: imitate a heuristic before the RL phase."""

    enabled: bool = Field(default=True, description="Run the warm start (skipped on resume).")
    heuristic: str = Field(
        default="sjf-cp",
        description="The teacher: any scheduler spec but random, e.g. sjf-cp, fair or the "
        "planner lookahead:srpt (whose WAITs and idle slots become labels too).",
    )
    episodes: int = Field(default=8, ge=1, description="Teacher episodes recorded.")
    episode_seconds: float | None = Field(
        default=None, gt=0, description="Stop each teacher episode here (None: whole sequence)."
    )
    epochs: int = Field(default=10, ge=0, description="Passes over the recorded decisions.")
    batch_size: int = Field(default=256, ge=1, description="Decisions per gradient step.")
    lr: float = Field(default=3e-3, gt=0, description="Adam learning rate of the warm start.")
    dagger_rounds: int = Field(
        default=0,
        ge=0,
        description="DAgger rounds after the first fit: the policy acts (greedily) for "
        "`episodes` more episodes, the teacher labels the states it visits, and the model "
        "is fitted again on all decisions so far (0: plain behaviour cloning).",
    )

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


class PPOSpec(_Section):
    """PPO's update (`training.ppo`), used when ``algorithm: ppo``: several epochs of
    clipped minibatch steps over each iteration's decisions."""

    clip: float = Field(
        default=0.2,
        gt=0,
        lt=1,
        description="ε: the probability ratio π/π_old is clipped to [1 − ε, 1 + ε].",
    )
    epochs: int = Field(
        default=4, ge=1, description="Passes over the iteration's decisions (each reshuffled)."
    )
    minibatch_size: int = Field(
        default=2048,
        ge=1,
        description="Decisions per optimizer step (computed in chunks of learner_batch).",
    )
    target_kl: float | None = Field(
        default=0.02,
        gt=0,
        description="Stop the iteration's remaining steps once the KL(π_old ‖ π) estimate "
        "of a minibatch, measured before its step, exceeds this (None: always run every "
        "epoch).",
    )


class TrainConfig(_Section):
    """Everything `idlegate train` needs; one run = f(config) (see `training.reinforce`)."""

    preset: str | None = Field(
        default=None, description="The preset this config was derived from (informational)."
    )
    seed: int = Field(default=0, ge=0, description="Seeds model init and every random draw.")
    workload: WorkloadSpec = Field(
        default_factory=WorkloadSpec, description="The training workload (arrival sequences)."
    )
    mixture: tuple[WorkloadSpec, ...] = Field(
        default=(),
        description="More training workloads: teacher and RL episodes cycle over "
        "[workload, *mixture] (one policy for several clusters and job mixes).",
    )
    validation: ValidationSpec = Field(
        default_factory=ValidationSpec, description="Fixed validation set and reference runs."
    )
    model: ModelSection = Field(default_factory=ModelSection, description="The policy network.")
    iterations: int = Field(default=100, ge=0, description="REINFORCE iterations.")
    algorithm: Literal["reinforce", "ppo"] = Field(
        default="reinforce",
        description="The RL update: reinforce (one policy-gradient step per iteration) or "
        "ppo (epochs of clipped minibatch steps, see the ppo section); both use the "
        "input-dependent baseline's advantages.",
    )
    ppo: PPOSpec = Field(
        default_factory=PPOSpec, description="PPO's settings (used when algorithm is ppo)."
    )
    init_checkpoint: str | None = Field(
        default=None,
        description="Start from this checkpoint's weights (e.g. an earlier run's bc.pt or "
        "best.pt; its model settings must match) instead of a fresh model; the BC warm "
        "start is then skipped.",
    )
    rollouts_per_sequence: int = Field(
        default=8,
        ge=2,
        description="N rollouts of the same arrival sequence per iteration (the input-"
        "dependent baseline averages over them).",
    )
    workers: int = Field(
        default=2, ge=1, le=64, description="Rollout worker processes (1: in-process)."
    )
    mp_context: Literal["forkserver", "spawn"] = Field(
        default="forkserver", description="How worker processes start."
    )
    ray: str | None = Field(
        default=None,
        description="Run rollouts, teacher labelling and validation on Ray instead of "
        "`workers` local processes: auto (a new local instance) or a running cluster's "
        "head address host:port (needs pip install 'idlegate[ray]').",
    )
    rollout_backend: Literal["onnx", "torch"] = Field(
        default="onnx",
        description="Inference in rollouts: onnx (the model exported each iteration, ~5x "
        "faster) or torch. Log-probs for the update are always recomputed in torch.",
    )
    lr: float = Field(default=1e-3, gt=0, description="Adam learning rate.")
    betas: tuple[float, float] = Field(default=(0.9, 0.999), description="Adam betas.")
    grad_clip: float | None = Field(
        default=1.0, gt=0, description="Clip the gradient's global norm (None: no clipping)."
    )
    gamma: float = Field(
        default=1.0, gt=0, le=1, description="Per-decision discount (1: average JCT)."
    )
    reward_scale: float = Field(
        default=1.0, gt=0, description="Rewards −Δ∫jobs dt are divided by this."
    )
    normalize_advantages: bool = Field(
        default=True, description="Divide the iteration's advantages by their std."
    )
    baseline: Literal["step", "linear"] = Field(
        default="step",
        description="Interpolating other rollouts' returns-to-go at a decision time: step "
        "(piecewise constant) or linear (Decima's code).",
    )
    entropy: EntropySpec = Field(default_factory=EntropySpec, description="Entropy bonus.")
    curriculum: CurriculumSpec = Field(
        default_factory=CurriculumSpec, description="Episode-length curriculum."
    )
    learner_batch: int = Field(
        default=2048, ge=1, description="Decisions per forward/backward pass of the update."
    )
    max_update_decisions: int | None = Field(
        default=None,
        ge=1,
        description="Use at most this many decisions (a uniform sample) per update; bounds "
        "the learner's cost on long episodes (None: all).",
    )
    learner_threads: int = Field(
        default=1, ge=1, le=64, description="torch threads of the learner's update."
    )
    bc: BCSpec = Field(default_factory=BCSpec, description="Behaviour-cloning warm start.")
    out_dir: str = Field(default="out/train", description="Checkpoints, CSV log and summary.")
    checkpoint_every: int = Field(
        default=10, ge=1, description="Write checkpoint.pt every this many iterations."
    )
    resume: bool = Field(
        default=False, description="Continue from out_dir/checkpoint.pt (same config)."
    )

    @field_validator("betas")
    @classmethod
    def _betas(cls, value: tuple[float, float]) -> tuple[float, float]:
        if not all(0 <= b < 1 for b in value):
            raise ValueError(f"Adam betas must be in [0, 1), got {value}")
        return value

    @model_validator(mode="after")
    def _model_builds(self) -> TrainConfig:
        try:
            self.model.to_model_config()
        except IdlegateError as exc:
            raise ValueError(str(exc)) from None
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


def describe_validation_error(exc: ValidationError) -> str:
    """The first few problems of a pydantic error as one sentence naming each field."""
    parts = []
    for err in exc.errors()[:5]:
        loc = ".".join(str(p) for p in err["loc"])
        msg = err["msg"].removeprefix("Value error, ")
        if err["type"] == "extra_forbidden":
            msg = "is not a known setting"
        parts.append(f"{loc}: {msg}" if loc else msg)
    more = len(exc.errors()) - 5
    return "; ".join(parts) + (f" (and {more} more)" if more > 0 else "")


def build_config(data: dict[str, Any], source: str = "the training config") -> TrainConfig:
    """Validate `data` into a `TrainConfig`, or raise an IdlegateError naming the fields."""
    try:
        return TrainConfig.model_validate(data)
    except ValidationError as exc:
        raise IdlegateError(f"{source} is invalid: {describe_validation_error(exc)}") from None


def preset_config(name: str, **overrides: Any) -> TrainConfig:
    """The preset `name` ("quick", "full") with top-level `overrides` merged in."""
    if name not in PRESETS:
        raise IdlegateError(f"unknown preset {name!r}; choose one of: {', '.join(PRESETS)}")
    return build_config(merge(PRESETS[name], overrides), f"preset {name!r}")


def load_config(
    path: str | Path | None = None, preset: str | None = None, **overrides: Any
) -> TrainConfig:
    """The config of YAML file `path` over its preset (file key, else `preset`, else quick).

    `overrides` (e.g. out_dir, workers, resume from CLI flags; None values are ignored)
    are applied last.
    """
    data: dict[str, Any] = {}
    if path is not None:
        p = Path(path)
        if not p.is_file():
            raise IdlegateError(f"config file {str(p)!r} does not exist")
        try:
            loaded = yaml.safe_load(p.read_text())
        except yaml.YAMLError as exc:
            raise IdlegateError(f"config file {str(p)!r} is not valid YAML: {exc}") from None
        if loaded is None:
            loaded = {}
        if not isinstance(loaded, dict):
            raise IdlegateError(
                f"config file {str(p)!r} must hold a mapping of settings, "
                f"not a {type(loaded).__name__}"
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
    return build_config(merged, source)


def config_reference() -> str:
    """Every setting with its default and meaning, as YAML comments (for docs and --help)."""
    lines: list[str] = []

    def walk(model: type[BaseModel], indent: str) -> None:
        for name, f in model.model_fields.items():
            ann = f.annotation
            lines.append(f"{indent}{name}:  # {f.description}")
            sub = ann if isinstance(ann, type) and issubclass(ann, BaseModel) else None
            if sub is not None and sub is not WorkloadSpec:
                walk(sub, indent + "  ")

    walk(TrainConfig, "")
    return "\n".join(lines)
