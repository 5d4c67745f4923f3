"""A Gymnasium environment over the simulator: one step per scheduling decision.

Importing this module registers ``idlegate/DagScheduling-v0`` (`ENV_ID`)::

    import gymnasium
    import idlegate.training.env  # noqa: F401  (registers the id)

    env = gymnasium.make(
        "idlegate/DagScheduling-v0",
        workload="tpch-like",
        workload_options={"num_stream": 50, "num_executors": 20},
        max_time=600.0,
    )
    obs, info = env.reset(seed=0)

``gymnasium.make("idlegate.training.env:idlegate/DagScheduling-v0", ...)`` imports the
module itself. The module needs gymnasium (the ``train`` extra) and never loads torch;
importing ``idlegate`` loads neither. Options: `EnvConfig` (keyword arguments of
``make``). Stable-Baselines3's ``PPO("MultiInputPolicy", env)`` trains on it, and
sb3-contrib's ``MaskablePPO`` with `DagSchedulingEnv.action_masks` (docs/gym.md).

Dynamics
--------
An episode is one run of the simulator's `idlegate.sim.engine.Engine` on the workload,
with the agent deciding: ``reset`` runs the engine to its first decision point, and each
``step`` hands it one decision (`Engine.decide`) and runs on to the next. At a
scheduling event the agent is asked again and again until it says WAIT or no free
executor or runnable stage remains, as the engine asks any scheduler. Task
durations, moving delays and everything else are the engine's, so an agent making a
policy's choices gets exactly what ``simulate`` reports for that policy (tested with the
shipped policy).

Observation and action: `idlegate.training.env_spaces` (the policy's features padded to
`EnvConfig.max_stages`, ``max_jobs``, ``max_edges``; ``MultiDiscrete([S + 1, L, I])``:
stage row or WAIT, cap level, idle level). An illegal action is, with
``illegal_action="repair"`` (the default, so unmasked agents and the checkers run),
replaced by the nearest legal one (`EnvSpaces.repair`); ``info["repaired"]`` tells and
``info["applied_action"]`` gives what was carried out. With ``illegal_action="raise"``
it raises IdlegateError instead, and the decision stays open. A state that overflows
the observation at a decision ends the episode there (``truncated``) with
``info["overflow"]``, since the agent could not see every choice; a workload with a DAG
that can never fit, or whose first decision overflows, raises IdlegateError at
``reset``.

Reward
------
r_k = −(I(t_{k+1}) − I(t_k)) / `EnvConfig.reward_scale`, where I(t) = ∫₀ᵗ (jobs in
system) ds is the cluster's ``jobs_time_integral``, t_k the time of this decision and
t_{k+1} that of the next (or the episode's end): the reward `training.math` gives the
trainer's rollouts (the same numbers, tested). Over a whole episode the undiscounted
return is minus the sum of the JCTs (the first decision comes at the first arrival).

Episode end
-----------
``terminated`` when every job of the workload has finished; ``truncated`` at the
episode's end time T (``max_time``, or with ``mean_episode_time`` the first arrival
plus an exponential draw, Decima's memoryless termination, whichever is earlier) or on
overflow. The final observation's masks are all 0. The final ``info`` adds ``metrics``
(the run's `idlegate.sim.metrics.RunMetrics` up to the end, as ``run_metrics`` reports
them for ``simulate``), ``avg_jct`` (of the finished jobs; NaN if none) and
``unfinished`` (jobs in the system; jobs yet to arrive are not counted). Gymnasium's
``max_episode_steps`` bounds the number of decisions.

Seeding
-------
``reset(seed=s)`` seeds the environment's one Generator, ``self.np_random``
(Gymnasium's rule); each reset draws from it the workload's arrival seed (a named
workload is rebuilt per episode; a `Workload` object stays fixed), the simulation's
seed (task durations) and, with ``mean_episode_time``, T. Same seed and same actions:
same episode. ``reset(options={"workload_seed": w, "sim_seed": s})`` fixes either seed
(the episode then matches ``simulate(build_workload(name, w, **options), policy, s)``;
fixing ``workload_seed`` alone gives Decima's several rollouts of one arrival sequence).
"""

from __future__ import annotations

import math
from typing import Any, Final, Literal

import gymnasium
import numpy as np
from pydantic import ConfigDict, Field, InstanceOf, StrictInt, model_validator

from idlegate.config import Config, Positive
from idlegate.errors import IdlegateError, reject_unknown
from idlegate.policy.actions import ActionConfig, decode
from idlegate.policy.features import FeatureConfig, Featurizer, Observation
from idlegate.sim.engine import Engine, Workload
from idlegate.sim.metrics import run_metrics
from idlegate.sim.workloads import build_workload
from idlegate.training.env_spaces import EnvSpaces, choice_to_action

ENV_ID: Final = "idlegate/DagScheduling-v0"
"""The id this module registers with Gymnasium."""

SEED_RANGE: Final = 2**63
"""Seeds drawn from ``np_random`` lie in [0, SEED_RANGE)."""


class EnvConfig(Config):
    """The environment's options (keyword arguments of ``gymnasium.make``)."""

    model_config = ConfigDict(title="the environment")

    workload: str | InstanceOf[Workload] = "tpch-like"
    """A workload name (`idlegate.sim.workloads.WORKLOADS`, rebuilt with a new arrival
    seed each episode) or a fixed `Workload`."""
    workload_options: dict[str, Any] = Field(default_factory=dict)
    """Options of the named workload, validated by its own model (e.g. num_stream,
    num_executors, load); not allowed with a `Workload` object."""
    max_time: float = Field(math.inf, gt=0)
    """Simulated seconds after which the episode is truncated (inf: until all jobs end)."""
    mean_episode_time: Positive | None = None
    """If set, each episode ends (truncated) at the first arrival plus an exponential
    draw of this mean, or at max_time if earlier (Decima's memoryless termination)."""
    max_jobs: StrictInt = Field(64, ge=1)
    """J: job rows of the observation."""
    max_stages: StrictInt = Field(512, ge=1)
    """S: stage rows of the observation (incomplete stages of all jobs in the system)."""
    max_edges: StrictInt = Field(1024, ge=1)
    """E: edges of the observation (between incomplete stages)."""
    features: FeatureConfig = FeatureConfig()
    """How features are computed (a FeatureConfig or its dict); match the policy's."""
    actions: ActionConfig = ActionConfig()
    """Idle levels, idle ratio, WAIT (an ActionConfig or its dict); match the policy's."""
    reward_scale: Positive = 1.0
    """Rewards are divided by this (job-seconds per reward unit)."""
    illegal_action: Literal["repair", "raise"] = "repair"
    """What an illegal action does: replaced by the nearest legal one, or IdlegateError."""

    @model_validator(mode="after")
    def _options_name_a_workload(self) -> EnvConfig:
        if isinstance(self.workload, Workload) and self.workload_options:
            raise ValueError(
                "workload_options apply to a named workload; build the Workload with them instead"
            )
        return self


class DagSchedulingEnv(gymnasium.Env[dict[str, np.ndarray], np.ndarray]):
    """DAG scheduling as a Gymnasium environment (see the module docstring)."""

    metadata: dict[str, Any] = {"render_modes": []}  # noqa: RUF012 (gymnasium's class attribute)

    def __init__(
        self, config: EnvConfig | None = None, render_mode: str | None = None, **options: Any
    ) -> None:
        if render_mode is not None:
            raise IdlegateError(f"the environment has no render mode {render_mode!r}")
        if config is not None and options:
            raise IdlegateError("give either an EnvConfig or keyword options, not both")
        self.config = cfg = config if config is not None else EnvConfig(**options)
        # built once here to validate the options and learn the cluster size K
        self.num_executors = self._workload(0).num_executors
        self.spaces = EnvSpaces(
            cfg.max_stages,
            cfg.max_jobs,
            cfg.max_edges,
            self.num_executors,
            cfg.features,
            cfg.actions,
        )
        self.observation_space = self.spaces.observation
        self.action_space = self.spaces.action
        self.featurizer = Featurizer(cfg.features)
        self._engine: Engine | None = None
        """The episode's engine (None once the episode is over)."""
        self._obs: Observation | None = None
        """The policy's observation of the open decision."""
        self._padded: dict[str, np.ndarray] = {}
        """The last observation returned."""
        self._run: tuple[str, int, float] = ("", 0, 0.0)
        """(workload name, simulation seed, end time T) of the episode."""
        self._integral = 0.0
        self._jobs_total = 0

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        super().reset(seed=seed)
        self._engine = self._obs = None
        opts = dict(options or {})
        reject_unknown(opts, ("workload_seed", "sim_seed"), "reset", noun="option")
        draws = self.np_random.integers(SEED_RANGE, size=2)
        workload_seed = int(opts.get("workload_seed", draws[0]))
        sim_seed = int(opts.get("sim_seed", draws[1]))
        workload = self._workload(workload_seed)
        self._check_sizes(workload)
        end = self._end_time(workload)
        self._run, self._jobs_total = (workload.name, sim_seed, end), len(workload.jobs)
        self.featurizer.reset()
        engine = Engine.for_workload(workload, None, sim_seed, max_time=end)
        engine.run(end)
        if not engine.deciding:  # an episode starts with the first arrival's decision
            raise IdlegateError("the episode ended before its first decision")
        obs, overflow = self._observe(engine)
        if overflow:
            cfg = self.config
            raise IdlegateError(
                f"the first decision already has {len(engine.cluster.jobs)} jobs, more than "
                f"the observation holds (max_jobs={cfg.max_jobs}, max_stages="
                f"{cfg.max_stages}, max_edges={cfg.max_edges}); raise those limits"
            )
        self._engine, self._integral = engine, engine.cluster.jobs_time_integral
        fixed = isinstance(self.config.workload, Workload)
        info = self._info(engine, overflow, workload_seed=None if fixed else workload_seed)
        return obs, info | {"sim_seed": sim_seed, "max_time": end}

    def step(
        self, action: np.ndarray
    ) -> tuple[dict[str, np.ndarray], float, bool, bool, dict[str, Any]]:
        engine, decision = self._engine, self._obs
        if engine is None or decision is None:
            raise IdlegateError("the episode is over (or never began); call reset() first")
        choice, problems = self.spaces.repair(decision, action)
        if problems and self.config.illegal_action == "raise":
            raise IdlegateError(
                f"illegal action: {'; '.join(problems)}; act within the observation's masks "
                "(see sample_legal_action) or use illegal_action='repair'"
            )
        engine.decide(decode(decision, choice, self.config.actions))
        if not engine.deciding:
            engine.run(self._run[2])
        obs, overflow = self._observe(engine)
        cluster = engine.cluster
        reward = -(cluster.jobs_time_integral - self._integral) / self.config.reward_scale
        self._integral = cluster.jobs_time_integral
        applied = choice_to_action(choice, self.config.max_stages)
        info = self._info(engine, overflow, repaired=bool(problems), applied_action=applied)
        if self._obs is not None:
            return obs, float(reward), False, False, info
        metrics = run_metrics(engine.result(self._run[0], "gym-agent", self._run[1]))
        info.update(metrics=metrics, avg_jct=metrics.avg_jct, unfinished=len(cluster.jobs))
        terminated = not cluster.jobs and len(cluster.done) == self._jobs_total
        self._engine = None
        return obs, float(reward), terminated, not terminated, info

    def action_masks(self) -> np.ndarray:
        """sb3-contrib MaskablePPO's masks of the current decision (`EnvSpaces.action_masks`)."""
        return self.spaces.action_masks(self._padded)

    # -- pieces ------------------------------------------------------------------------

    def _workload(self, seed: int) -> Workload:
        cfg = self.config
        if isinstance(cfg.workload, Workload):
            return cfg.workload
        return build_workload(cfg.workload, seed, **dict(cfg.workload_options))

    def _check_sizes(self, workload: Workload) -> None:
        cfg = self.config
        if workload.num_executors != self.num_executors:
            raise IdlegateError(
                f"workload {workload.name!r} has {workload.num_executors} executors this "
                f"episode, {self.num_executors} before; the action space needs a fixed K"
            )
        for job in workload.jobs:
            edges = sum(len(p) for p in job.dag.parents)
            if job.dag.num_stages > cfg.max_stages or edges > cfg.max_edges:
                raise IdlegateError(
                    f"job {job.name!r} has {job.dag.num_stages} stages and {edges} edges, more "
                    f"than an observation holds (max_stages={cfg.max_stages}, "
                    f"max_edges={cfg.max_edges}); raise those limits"
                )

    def _end_time(self, workload: Workload) -> float:
        cfg = self.config
        first = workload.jobs[0].time
        end = cfg.max_time
        if cfg.mean_episode_time is not None:
            end = min(end, first + float(self.np_random.exponential(cfg.mean_episode_time)))
        if end < first:
            raise IdlegateError(
                f"max_time={cfg.max_time:g} s ends the episode before the first arrival "
                f"(t={first:g} s); raise it"
            )
        return end

    def _observe(self, engine: Engine) -> tuple[dict[str, np.ndarray], bool]:
        """The padded observation now and whether it overflowed; keeps the policy's own
        observation in `_obs` while a decision that fits is open."""
        obs = self.featurizer(engine.cluster)
        self._padded, overflow = self.spaces.pad(obs, engine.deciding)
        self._obs = obs if engine.deciding and not overflow else None
        return self._padded, overflow

    def _info(self, engine: Engine, overflow: bool, **more: Any) -> dict[str, Any]:
        cluster = engine.cluster
        return {
            "time": cluster.now,
            "jobs_in_system": len(cluster.jobs),
            "jobs_done": len(cluster.done),
            "jobs_total": self._jobs_total,
            "overflow": overflow,
        } | more


if ENV_ID not in gymnasium.registry:
    gymnasium.register(id=ENV_ID, entry_point="idlegate.training.env:DagSchedulingEnv")
