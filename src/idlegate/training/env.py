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
    rng = np.random.default_rng(0)
    done = False
    while not done:
        action = sample_legal_action(obs, env.action_space, rng)
        obs, reward, terminated, truncated, info = env.step(action)
        done = terminated or truncated

``gymnasium.make("idlegate.training.env:idlegate/DagScheduling-v0", ...)`` imports the
module itself. The module needs gymnasium (the ``train`` extra) and never loads torch;
importing ``idlegate`` loads neither. Options: `EnvConfig` (keyword arguments of
``make``).

Dynamics
--------
An episode is one `idlegate.sim.engine.simulate` run of the workload, with the agent as
its scheduler. The simulator asks its scheduler for a decision at every scheduling
event, again and again, until the answer is WAIT or no free executor or runnable stage
remains (`Cluster.schedule`); each question is one observation, answered by one
``step``. Task durations, moving delays and everything else are the simulator's, so an
agent that makes a policy's choices gets exactly what ``simulate`` reports for that
policy (tested with the shipped policy).

Observation
-----------
The learned policy's features (`idlegate.policy.features`, where every column is
documented), padded to fixed sizes: S = `EnvConfig.max_stages` stage rows, J =
`EnvConfig.max_jobs` job rows, E = `EnvConfig.max_edges` edges, L cap levels (1..K, or
``max_cap_levels`` geometric levels for a large cluster K), I idle levels (G + 1, or 1
without the idle head). Rows ``num_stages`` and beyond (jobs: ``num_jobs``; edges:
``num_edges``) are padding: zero features, index 0, mask 0. A ``Dict`` of:

=============  ==========  ======  ===================================================
key            shape       dtype   meaning
=============  ==========  ======  ===================================================
stage_x        [S, 11]     f32     stage features (incomplete stages, jobs in arrival
                                   order, each job's stages in DAG order)
job_x          [J, 12]     f32     job features, one row per job in the system
global_x       [10]        f32     global features
edge_src       [E]         i64     child stage row of each edge
edge_dst       [E]         i64     parent stage row of each edge
stage_job      [S]         i64     job row of each stage row
stage_mask     [S]         i8      1: the stage may be launched or idled now
idle_mask      [S]         i8      1: the stage may idle now (idle level > 0)
wait_mask      [1]         i8      1: WAIT is allowed now
cap_x          [L]         f32     the cap levels as fractions of K
cap_mask       [J, L]      i8      1: cap level l is allowed for job j (above what the
                                   job holds)
num_stages     []          i64     valid stage rows
num_jobs       []          i64     valid job rows
num_edges      []          i64     valid edges
=============  ==========  ======  ===================================================

`model_inputs` turns an observation back into the policy model's inputs
(`policy.features.MODEL_INPUTS`), bit for bit.

Overflow: a state with more jobs, stage rows or edges than the limits is cut to the
longest prefix of whole jobs (arrival order) that fits, and ``info["overflow"]`` is
True. If that happens at a decision, the episode ends there (``truncated``), since the
agent could not see every choice; raise the limits for such workloads. A workload with
a DAG that can never fit, or whose very first decision overflows, raises IdlegateError
at ``reset``.

Action
------
``MultiDiscrete([S + 1, L, I])``: (stage row, or S for WAIT; cap level; idle level).
It means what the policy's `Choice` means (`idlegate.policy.actions`): idle level g > 0
puts the stage into an idle slot of r · l · g / G seconds (l: its task duration; the
cap level is then ignored), g = 0 launches it with the job capped at ``cap_levels[c]``
executors (raised for a gang stage so all its tasks start); WAIT ignores the other two.

Legal actions: the row has ``stage_mask`` 1 (or is S with ``wait_mask`` 1); g > 0 only
where ``idle_mask`` is 1; for a launch, ``cap_mask[stage_job[row], c]`` is 1.
`sample_legal_action` draws one uniformly at each level. An illegal action is, with
``illegal_action="repair"`` (the default, so unmasked agents and Gymnasium's checker
run), replaced by the nearest legal one: the legal row (WAIT counting as row S), then
the legal cap level, nearest to the given one, ties to the lower; an idle level > 0
where the stage may not idle becomes 0 (out-of-range idle levels are clipped).
``info["repaired"]`` tells, and ``info["applied_action"]`` gives what was carried out.
With ``illegal_action="raise"`` it raises IdlegateError instead.

Reward
------
r_k = −(I(t_{k+1}) − I(t_k)) / `EnvConfig.reward_scale`, where I(t) = ∫₀ᵗ (jobs in
system) ds is the cluster's ``jobs_time_integral``, t_k the time of this decision and
t_{k+1} that of the next (or the episode's end): the reward `training.math` gives the
trainer's rollouts (the same numbers, tested). The undiscounted return is minus the
job-seconds spent in the system from the first decision on; over a whole episode that
is minus the sum of the JCTs (the first decision comes at the first arrival).

Episode end
-----------
``terminated`` when every job of the workload has finished; ``truncated`` at the
episode's end time T (``max_time``, or with ``mean_episode_time`` the first arrival
plus an exponential draw, Decima's memoryless termination, whichever is earlier) or on
overflow. The final observation shows the state at the end with all masks 0. The final
``info`` adds ``avg_jct`` (mean JCT of the finished jobs; NaN if none), ``unfinished``
(jobs in the system at the end; jobs yet to arrive are not counted) and, unless the
episode ended on overflow, ``metrics``: the run's `idlegate.sim.metrics.RunMetrics`,
what ``run_metrics`` reports for ``simulate``. Gymnasium's ``max_episode_steps`` bounds
the number of decisions.

Seeding
-------
``reset(seed=s)`` seeds the environment's one Generator, ``self.np_random``
(Gymnasium's rule); each reset draws from it the workload's arrival seed (a named
workload is rebuilt per episode; a `Workload` object stays fixed), the simulation's
seed (task durations) and, with ``mean_episode_time``, T. Same seed and same actions:
same episode. ``reset(options={"workload_seed": w, "sim_seed": s})`` fixes either seed
(the episode then matches ``simulate(build_workload(name, w, **options), policy, s)``;
fixing ``workload_seed`` alone gives Decima's several rollouts of one arrival sequence).

How it runs
-----------
The simulation runs in a helper thread as a coroutine: the agent's `_AgentScheduler`
hands each question to the caller's thread and blocks until ``step`` hands back the
answer, so exactly one of the two threads runs at any time and runs are deterministic.
This runs the very ``simulate`` every other scheduler runs, rather than a second event
loop that would have to be kept in step with the engine. ``close``, ``reset`` and
garbage collection stop an unfinished episode's thread.
"""

from __future__ import annotations

import math
import queue
import threading
import weakref
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any, Final, Literal

import gymnasium
import numpy as np
from gymnasium import spaces

from idlegate.errors import IdlegateError, reject_unknown
from idlegate.policy.actions import WAIT_CHOICE, ActionConfig, Choice, decode
from idlegate.policy.features import (
    MODEL_INPUTS,
    NUM_GLOBAL_FEATURES,
    NUM_JOB_FEATURES,
    NUM_STAGE_FEATURES,
    FeatureConfig,
    Featurizer,
    Observation,
    cap_levels,
)
from idlegate.sim.cluster import Cluster
from idlegate.sim.engine import SimResult, Workload, simulate
from idlegate.sim.metrics import run_metrics
from idlegate.sim.protocol import Action, ClusterView
from idlegate.sim.workloads import build_workload

# One module on purpose (Issue 12 §2): the first 134 lines are the env's reference (dynamics,
# observation, action, reward), next to the code they describe; the code is the Gymnasium
# env and its observation packing (padding, masks, action decoding), which change together.
ENV_ID: Final = "idlegate/DagScheduling-v0"
"""The id this module registers with Gymnasium."""

SEED_RANGE: Final = 2**63
"""Seeds drawn from ``np_random`` lie in [0, SEED_RANGE)."""

_LOG1P_MAX: Final = math.ceil(math.log1p(np.finfo(np.float64).max))
"""An upper bound of log1p over finite float64 numbers (710)."""


@dataclass(frozen=True)
class EnvConfig:
    """The environment's options (keyword arguments of ``gymnasium.make``)."""

    workload: str | Workload = "tpch-like"
    """A workload name (`idlegate.sim.workloads.WORKLOADS`, rebuilt with a new arrival
    seed each episode) or a fixed `Workload`."""
    workload_options: Mapping[str, Any] = field(default_factory=dict)
    """Options of the named workload, validated by its own model (e.g. num_stream,
    num_executors, load); not allowed with a `Workload` object."""
    max_time: float = math.inf
    """Simulated seconds after which the episode is truncated (inf: until all jobs end)."""
    mean_episode_time: float | None = None
    """If set, each episode ends (truncated) at the first arrival plus an exponential
    draw of this mean, or at max_time if earlier (Decima's memoryless termination)."""
    max_jobs: int = 64
    """J: job rows of the observation."""
    max_stages: int = 512
    """S: stage rows of the observation (incomplete stages of all jobs in the system)."""
    max_edges: int = 1024
    """E: edges of the observation (between incomplete stages)."""
    features: FeatureConfig = field(default_factory=FeatureConfig)
    """How features are computed (a FeatureConfig or its dict); match the policy's."""
    actions: ActionConfig = field(default_factory=ActionConfig)
    """Idle levels, idle ratio, WAIT (an ActionConfig or its dict); match the policy's."""
    reward_scale: float = 1.0
    """Rewards are divided by this (job-seconds per reward unit)."""
    illegal_action: Literal["repair", "raise"] = "repair"
    """What an illegal action does: replaced by the nearest legal one, or IdlegateError."""

    def __post_init__(self) -> None:
        if isinstance(self.features, Mapping):
            object.__setattr__(self, "features", FeatureConfig.from_dict(dict(self.features)))
        if isinstance(self.actions, Mapping):
            object.__setattr__(self, "actions", ActionConfig.from_dict(dict(self.actions)))
        if not isinstance(self.workload, str | Workload):
            raise IdlegateError(
                f"workload must be a workload name or a Workload, got {self.workload!r}"
            )
        if isinstance(self.workload, Workload) and self.workload_options:
            raise IdlegateError(
                "workload_options apply to a named workload; build the Workload with them instead"
            )
        if not isinstance(self.workload_options, Mapping):
            raise IdlegateError(
                f"workload_options must be a mapping, got {self.workload_options!r}"
            )
        if not self.max_time > 0:  # also rejects NaN
            raise IdlegateError(f"max_time must be > 0 seconds, got {self.max_time!r}")
        mean = self.mean_episode_time
        if mean is not None and not (0 < mean < math.inf):
            raise IdlegateError(f"mean_episode_time must be a number > 0, got {mean!r}")
        for name in ("max_jobs", "max_stages", "max_edges"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise IdlegateError(f"{name} must be a whole number >= 1, got {value!r}")
        if not (0 < self.reward_scale < math.inf):
            raise IdlegateError(f"reward_scale must be a number > 0, got {self.reward_scale!r}")
        if self.illegal_action not in ("repair", "raise"):
            raise IdlegateError(
                f"illegal_action must be 'repair' or 'raise', got {self.illegal_action!r}"
            )

    @classmethod
    def from_options(cls, options: Mapping[str, Any]) -> EnvConfig:
        """The config of keyword `options`; IdlegateError naming an unknown one."""
        reject_unknown(options, (f.name for f in fields(cls)), "the environment", noun="option")
        return cls(**options)


# ---------------------------------------------------------------------------------------
# the simulation as a coroutine


class _Abandoned(Exception):
    """Raised inside the simulation thread to unwind an episode nobody will finish."""


_STOP: Final = object()
"""Handed to the simulation thread instead of an action: abandon the episode."""


class _AgentScheduler:
    """The `Scheduler` that `simulate` asks: it hands each question to the env's thread."""

    name = "gym-agent"

    def __init__(self, to_env: queue.SimpleQueue[Any], to_sim: queue.SimpleQueue[Any]) -> None:
        self.to_env = to_env
        self.to_sim = to_sim

    def reset(self, rng: Any) -> None:
        """Nothing to do: the agent's randomness is its own."""

    def decide(self, view: ClusterView) -> Action:
        self.to_env.put(("decide", view))
        answer = self.to_sim.get()
        if answer is _STOP:
            raise _Abandoned
        return answer


class _Episode:
    """One `simulate` run in a helper thread, advanced one decision at a time.

    Messages to the caller: ``("decide", cluster)`` (the simulation waits for an
    action), ``("done", SimResult)`` or ``("error", exception)``.
    """

    def __init__(self, workload: Workload, seed: int, max_time: float) -> None:
        self.to_env: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self.to_sim: queue.SimpleQueue[Any] = queue.SimpleQueue()
        agent = _AgentScheduler(self.to_env, self.to_sim)
        self.thread = threading.Thread(
            target=self._run,
            args=(workload, agent, seed, max_time),
            name="idlegate-gym-simulation",
            daemon=True,
        )
        self.thread.start()

    def _run(self, workload: Workload, agent: _AgentScheduler, seed: int, max_time: float) -> None:
        try:
            result = simulate(workload, agent, seed=seed, max_time=max_time)
        except _Abandoned:
            return
        except BaseException as exc:  # handed to the caller's thread, which raises it
            self.to_env.put(("error", exc))
            return
        self.to_env.put(("done", result))

    def receive(self) -> tuple[str, Any]:
        kind, payload = self.to_env.get()
        if kind == "error":
            raise payload
        return kind, payload

    def answer(self, action: Action) -> tuple[str, Any]:
        """Hand `action` to the waiting simulation; its next message."""
        self.to_sim.put(action)
        return self.receive()

    def stop(self) -> None:
        """Unwind the simulation if it still waits for an action (idempotent)."""
        if self.thread.is_alive():
            self.to_sim.put(_STOP)
            self.thread.join()


# ---------------------------------------------------------------------------------------
# observations


def _fit(obs: Observation, max_jobs: int, max_stages: int, max_edges: int) -> tuple[int, int]:
    """(jobs, edges) of the longest prefix of whole jobs within the limits."""
    offsets = obs.offsets
    jobs = min(obs.num_jobs, max_jobs)
    while offsets[jobs] > max_stages:
        jobs -= 1
    # a job's edges join its own rows and come after the earlier jobs' edges
    edges = int(np.count_nonzero(obs.edge_src < offsets[jobs]))
    while edges > max_edges:
        jobs -= 1
        edges = int(np.count_nonzero(obs.edge_src < offsets[jobs]))
    return jobs, edges


def model_inputs(obs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The policy model's inputs (`MODEL_INPUTS`, unpadded, model dtypes) of an observation.

    Wrap them in ``types.SimpleNamespace(**inputs)`` to call `OnnxPolicy.evaluate` and
    `policy.actions.choose` on them.
    """
    n, j, e = int(obs["num_stages"]), int(obs["num_jobs"]), int(obs["num_edges"])
    idle_mask = obs["idle_mask"][:n].astype(bool)
    inputs = {
        "stage_x": obs["stage_x"][:n],
        "job_x": obs["job_x"][:j],
        "global_x": obs["global_x"].reshape(1, -1),
        "edge_src": obs["edge_src"][:e],
        "edge_dst": obs["edge_dst"][:e],
        "stage_job": obs["stage_job"][:n],
        "stage_mask": obs["stage_mask"][:n].astype(bool),
        "idle_rows": np.flatnonzero(idle_mask).astype(np.int64),
        "cap_x": obs["cap_x"],
        "cap_mask": obs["cap_mask"][:j].astype(bool),
        "wait_mask": obs["wait_mask"].astype(bool),
    }
    return {name: inputs[name] for name in MODEL_INPUTS}


def choice_to_action(choice: Choice, max_stages: int) -> np.ndarray:
    """The env action of a policy `Choice` (WAIT: row S; an idle choice's cap level: 0)."""
    row = max_stages if choice.is_wait else choice.stage_row
    return np.array([row, max(choice.cap_index, 0), choice.idle_level], dtype=np.int64)


def sample_legal_action(
    obs: Mapping[str, np.ndarray], action_space: spaces.MultiDiscrete, rng: np.random.Generator
) -> np.ndarray:
    """A legal action drawn uniformly at each level: row or WAIT, then idle level, then cap."""
    stage_slots, _, idle_levels = (int(x) for x in action_space.nvec)
    wait_row = stage_slots - 1
    rows = np.flatnonzero(obs["stage_mask"])
    if obs["wait_mask"][0]:
        rows = np.append(rows, wait_row)
    if rows.size == 0:
        raise IdlegateError("this observation allows no action (it is an episode's last)")
    row = int(rng.choice(rows))
    if row == wait_row:
        return np.array([row, 0, 0], dtype=np.int64)
    idle = int(rng.integers(idle_levels)) if obs["idle_mask"][row] else 0
    caps = np.flatnonzero(obs["cap_mask"][obs["stage_job"][row]])
    return np.array([row, int(rng.choice(caps)), idle], dtype=np.int64)


def _nearest(allowed: np.ndarray, value: int) -> int:
    """The entry of sorted non-empty `allowed` nearest to `value` (ties: the lower)."""
    return int(allowed[int(np.argmin(np.abs(allowed - value)))])


# ---------------------------------------------------------------------------------------


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
        self.config = config if config is not None else EnvConfig.from_options(options)
        cfg = self.config
        # built once here to validate the options and learn the cluster size K
        probe = self._workload(0)
        self.num_executors = probe.num_executors
        self.cap_levels = cap_levels(self.num_executors, cfg.features.max_cap_levels)
        s, j, e = cfg.max_stages, cfg.max_jobs, cfg.max_edges
        levels = len(self.cap_levels)
        # every feature is a fraction, a flag, a clipped load or log1p of an amount >= 0
        # (a float64, so below 710); -1 allows log1p's rounding just below 0
        features_box = {
            "low": -1.0,
            "high": max(_LOG1P_MAX, cfg.features.load_clip),
            "dtype": np.float32,
        }
        self.observation_space = spaces.Dict(
            {
                "stage_x": spaces.Box(shape=(s, NUM_STAGE_FEATURES), **features_box),
                "job_x": spaces.Box(shape=(j, NUM_JOB_FEATURES), **features_box),
                "global_x": spaces.Box(shape=(NUM_GLOBAL_FEATURES,), **features_box),
                "edge_src": spaces.Box(0, s - 1, (e,), np.int64),
                "edge_dst": spaces.Box(0, s - 1, (e,), np.int64),
                "stage_job": spaces.Box(0, j - 1, (s,), np.int64),
                "stage_mask": spaces.MultiBinary(s),
                "idle_mask": spaces.MultiBinary(s),
                "wait_mask": spaces.MultiBinary(1),
                "cap_x": spaces.Box(0.0, 1.0, (levels,), np.float32),
                "cap_mask": spaces.MultiBinary((j, levels)),
                "num_stages": spaces.Box(0, s, (), np.int64),
                "num_jobs": spaces.Box(0, j, (), np.int64),
                "num_edges": spaces.Box(0, e, (), np.int64),
            }
        )
        self.action_space = spaces.MultiDiscrete(
            [s + 1, levels, cfg.actions.num_idle_levels], dtype=np.int64
        )
        self.featurizer = Featurizer(cfg.features)
        self._episode: _Episode | None = None
        self._stopper: weakref.finalize | None = None
        self._cluster: Cluster | None = None
        self._obs: Observation | None = None
        self._integral = 0.0
        self._jobs_total = 0

    # -- Gymnasium API -------------------------------------------------------------------

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        super().reset(seed=seed)
        self._stop()
        opts = dict(options or {})
        reject_unknown(opts, ("workload_seed", "sim_seed"), "reset", noun="option")
        draws = self.np_random.integers(SEED_RANGE, size=2)
        workload_seed = int(opts.get("workload_seed", draws[0]))
        sim_seed = int(opts.get("sim_seed", draws[1]))
        workload = self._workload(workload_seed)
        self._check_sizes(workload)
        end = self._end_time(workload)
        self._jobs_total = len(workload.jobs)
        self.featurizer.reset()
        self._episode = _Episode(workload, sim_seed, end)
        self._stopper = weakref.finalize(self, self._episode.stop)
        try:
            kind, payload = self._episode.receive()
        except BaseException:  # the simulation failed, or the wait was interrupted
            self._stop()
            raise
        if kind != "decide":  # an episode starts with the first arrival's decision
            raise IdlegateError("the episode ended before its first decision")
        self._cluster = payload
        obs, overflow = self._observe(decision=True)
        if overflow:
            self._stop()
            raise IdlegateError(
                f"the first decision already has {len(payload.jobs)} jobs, more than the "
                "observation holds "
                f"(max_jobs={self.config.max_jobs}, max_stages={self.config.max_stages}, "
                f"max_edges={self.config.max_edges}); raise those limits"
            )
        self._integral = self._cluster.jobs_time_integral
        info = self._info(overflow)
        fixed = isinstance(self.config.workload, Workload)
        info.update(workload_seed=None if fixed else workload_seed, sim_seed=sim_seed, max_time=end)
        return obs, info

    def step(
        self, action: np.ndarray
    ) -> tuple[dict[str, np.ndarray], float, bool, bool, dict[str, Any]]:
        if self._episode is None or self._obs is None:
            raise IdlegateError("the episode is over (or never began); call reset() first")
        choice, repaired = self._choice(action)
        try:
            kind, payload = self._episode.answer(decode(self._obs, choice, self.config.actions))
        except BaseException:  # the simulation failed, or the wait was interrupted
            self._stop()
            raise
        applied = choice_to_action(choice, self.config.max_stages)
        cluster = self._cluster
        assert cluster is not None
        if kind == "decide":
            obs, overflow = self._observe(decision=True)
            terminated, truncated = False, overflow
            if overflow:
                self._stop()
            integral = cluster.jobs_time_integral
        else:
            result: SimResult = payload
            self._stop()  # the thread has ended or is ending: this only tidies up
            obs, overflow = self._observe(decision=False)
            terminated = result.unfinished == 0 and len(result.records) == self._jobs_total
            truncated = not terminated
            integral = result.jobs_time_integral
        reward = -(integral - self._integral) / self.config.reward_scale
        self._integral = integral
        info = self._info(overflow)
        info.update(repaired=repaired, applied_action=applied)
        if kind == "done":
            metrics = run_metrics(result)
            info.update(metrics=metrics, avg_jct=metrics.avg_jct, unfinished=result.unfinished)
        elif overflow:
            jcts = [r.jct for r in sorted(cluster.done, key=lambda r: r.id)]
            info.update(
                avg_jct=float(np.mean(jcts)) if jcts else math.nan,
                unfinished=len(cluster.jobs),
            )
        return obs, float(reward), terminated, truncated, info

    def close(self) -> None:
        self._stop()
        super().close()

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
            dag = job.dag
            edges = sum(len(p) for p in dag.parents)
            if dag.num_stages > cfg.max_stages or edges > cfg.max_edges:
                raise IdlegateError(
                    f"job {job.name!r} has {dag.num_stages} stages and {edges} edges, more than "
                    f"an observation holds (max_stages={cfg.max_stages}, "
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

    def _observe(self, decision: bool) -> tuple[dict[str, np.ndarray], bool]:
        """The padded observation of the cluster now, and whether it overflowed.

        `decision`: the simulation waits for an action. Otherwise, or on overflow (which
        ends the episode), it is a final observation: masks all 0.
        """
        cfg = self.config
        assert self._cluster is not None
        obs = self.featurizer(self._cluster)
        jobs, e = _fit(obs, cfg.max_jobs, cfg.max_stages, cfg.max_edges)
        overflow = jobs < obs.num_jobs
        decision = decision and not overflow
        self._obs = obs if decision else None
        n = obs.offsets[jobs]
        s, j = cfg.max_stages, cfg.max_jobs
        levels = len(self.cap_levels)
        out = {
            "stage_x": np.zeros((s, NUM_STAGE_FEATURES), np.float32),
            "job_x": np.zeros((j, NUM_JOB_FEATURES), np.float32),
            "global_x": obs.global_x[0].copy(),
            "edge_src": np.zeros(cfg.max_edges, np.int64),
            "edge_dst": np.zeros(cfg.max_edges, np.int64),
            "stage_job": np.zeros(s, np.int64),
            "stage_mask": np.zeros(s, np.int8),
            "idle_mask": np.zeros(s, np.int8),
            "wait_mask": np.zeros(1, np.int8),
            "cap_x": obs.cap_x.copy(),
            "cap_mask": np.zeros((j, levels), np.int8),
            "num_stages": np.array(n, np.int64),
            "num_jobs": np.array(jobs, np.int64),
            "num_edges": np.array(e, np.int64),
        }
        out["stage_x"][:n] = obs.stage_x[:n]
        out["job_x"][:jobs] = obs.job_x[:jobs]
        out["edge_src"][:e] = obs.edge_src[:e]
        out["edge_dst"][:e] = obs.edge_dst[:e]
        out["stage_job"][:n] = obs.stage_job[:n]
        if decision:
            out["stage_mask"][:n] = obs.stage_mask[:n]
            out["idle_mask"][:n] = obs.idle_mask[:n]
            out["wait_mask"][0] = bool(obs.wait_mask[0]) and cfg.actions.wait_action
            out["cap_mask"][:jobs] = obs.cap_mask[:jobs]
        return out, overflow

    def _info(self, overflow: bool) -> dict[str, Any]:
        cluster = self._cluster
        assert cluster is not None
        return {
            "time": cluster.now,
            "jobs_in_system": len(cluster.jobs),
            "jobs_done": len(cluster.done),
            "jobs_total": self._jobs_total,
            "overflow": overflow,
        }

    def _choice(self, action: np.ndarray) -> tuple[Choice, bool]:
        """The legal `Choice` for `action` (repaired or refused if illegal), and if it was."""
        obs = self._obs
        assert obs is not None
        values = np.asarray(action).reshape(-1)
        if values.shape != (3,) or not np.issubdtype(values.dtype, np.integer):
            raise IdlegateError(
                f"an action is 3 whole numbers (stage row or WAIT, cap level, idle level), "
                f"got {action!r}"
            )
        row, cap, idle = (int(v) for v in values)
        wait_row = self.config.max_stages
        problems = []
        rows = np.flatnonzero(obs.stage_mask)
        if obs.wait_mask[0] and self.config.actions.wait_action:
            rows = np.append(rows, wait_row)
        if row not in rows:
            problems.append(f"row {row} is not allowed (allowed: {rows.tolist()})")
            row = _nearest(rows, row)
        if row == wait_row:
            return self._verdict(WAIT_CHOICE, problems)
        idle_levels = self.config.actions.num_idle_levels
        if idle != 0 and not (obs.idle_mask[row] and 0 < idle < idle_levels):
            problems.append(f"idle level {idle} is not allowed for row {row}")
            idle = min(max(idle, 0), idle_levels - 1) if obs.idle_mask[row] else 0
        if idle > 0:
            return self._verdict(Choice(row, idle, -1), problems)
        caps = np.flatnonzero(obs.cap_mask[obs.stage_job[row]])
        if cap not in caps:
            problems.append(f"cap level {cap} is not allowed for row {row} ({caps.tolist()})")
            cap = _nearest(caps, cap)
        return self._verdict(Choice(row, 0, cap), problems)

    def _verdict(self, choice: Choice, problems: list[str]) -> tuple[Choice, bool]:
        if problems and self.config.illegal_action == "raise":
            raise IdlegateError(
                f"illegal action: {'; '.join(problems)}; act within the observation's masks "
                "(see sample_legal_action) or use illegal_action='repair'"
            )
        return choice, bool(problems)

    def _stop(self) -> None:
        """Abandon the running episode, if any (its thread unwinds and ends)."""
        if self._stopper is not None:
            self._stopper()
        self._stopper = None
        self._episode = None
        self._obs = None


if ENV_ID not in gymnasium.registry:
    gymnasium.register(id=ENV_ID, entry_point="idlegate.training.env:DagSchedulingEnv")
