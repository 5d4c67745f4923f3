"""The Gymnasium environment's spaces: the policy's observation padded, and its actions.

Observation
-----------
The learned policy's `idlegate.policy.features.Observation` (where every column is
documented), padded to fixed sizes: S stage rows, J job rows, E edges (the env's
``max_stages``, ``max_jobs``, ``max_edges``), L cap levels (1..K, or ``max_cap_levels``
geometric levels for a large cluster K), I idle levels (G + 1, or 1 without the idle
head). Rows ``num_stages`` and beyond (jobs: ``num_jobs``; edges: ``num_edges``) are
padding: zero features, index 0, mask 0. A ``Dict`` of:

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
num_stages     [1]         i64     valid stage rows
num_jobs       [1]         i64     valid job rows
num_edges      [1]         i64     valid edges
=============  ==========  ======  ===================================================

Outside a decision (an episode's last observation) every mask is 0. A state with more
jobs, stage rows or edges than the limits is cut to the longest prefix of whole jobs
(arrival order) that fits: an *overflow*. `model_inputs` turns an observation back into
the policy model's inputs (`policy.features.MODEL_INPUTS`), bit for bit.

Action
------
``MultiDiscrete([S + 1, L, I])``: (stage row, or S for WAIT; cap level; idle level),
what the policy's `ActionChoice` means (`idlegate.policy.actions`): idle level g > 0 puts the
stage into an idle slot of r · l · g / G seconds (l: its task duration; the cap level is
then ignored), g = 0 launches it with the job capped at ``cap_levels[c]`` executors
(raised for a gang stage so all its tasks start); WAIT ignores the other two.

Legal actions: the row has ``stage_mask`` 1 (or is S with ``wait_mask`` 1); g > 0 only
where ``idle_mask`` is 1; for a launch, ``cap_mask[stage_job[row], c]`` is 1.
`sample_legal_action` draws one uniformly at each level. `EnvSpaces.action_masks` gives
MaskablePPO one mask per part, each allowing the values some legal action uses, so a
combination may still be illegal. `EnvSpaces.repair` maps any action to the nearest
legal one: the legal row (WAIT counting as row S), then the legal cap level, nearest to
the given one, ties to the lower; an idle level > 0 where the stage may not idle becomes
0 (out-of-range idle levels are clipped).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Final

import numpy as np
from gymnasium import spaces

from idlegate.errors import IdlegateError
from idlegate.policy.actions import WAIT_CHOICE, ActionChoice, ActionConfig
from idlegate.policy.columns import num_job_features, num_stage_features
from idlegate.policy.features import (
    MODEL_INPUTS,
    FeatureConfig,
    Observation,
    cap_levels,
    num_global_features,
)

_LOG1P_MAX: Final = math.ceil(math.log1p(np.finfo(np.float64).max))
"""An upper bound of log1p over finite float64 numbers (710)."""

_ROWS: Final = {
    "stage_x": "num_stages",
    "job_x": "num_jobs",
    "edge_src": "num_edges",
    "edge_dst": "num_edges",
    "stage_job": "num_stages",
}
"""Arrays copied from the policy's Observation, and the count of their valid rows."""

_MASKS: Final = {"stage_mask": "num_stages", "idle_mask": "num_stages", "cap_mask": "num_jobs"}
"""The same for the masks, copied only at a decision."""


class EnvSpaces:
    """The observation and action spaces for S, J, E and a cluster of K executors."""

    def __init__(
        self,
        max_stages: int,
        max_jobs: int,
        max_edges: int,
        num_executors: int,
        features: FeatureConfig,
        actions: ActionConfig,
    ) -> None:
        self.max_stages, self.max_jobs, self.max_edges = max_stages, max_jobs, max_edges
        self.actions = actions
        self.cap_levels = cap_levels(num_executors, features.max_cap_levels)
        s, j, e, levels = max_stages, max_jobs, max_edges, len(self.cap_levels)
        # every feature is a fraction, a flag, a clipped load or log1p of an amount >= 0
        # (a float64, so below 710); -1 allows log1p's rounding just below 0
        high = max(_LOG1P_MAX, features.load_clip)
        self.observation = spaces.Dict(
            {
                "stage_x": spaces.Box(-1.0, high, (s, num_stage_features(features)), np.float32),
                "job_x": spaces.Box(-1.0, high, (j, num_job_features(features)), np.float32),
                "global_x": spaces.Box(-1.0, high, (num_global_features(features),), np.float32),
                "edge_src": spaces.Box(0, s - 1, (e,), np.int64),
                "edge_dst": spaces.Box(0, s - 1, (e,), np.int64),
                "stage_job": spaces.Box(0, j - 1, (s,), np.int64),
                "stage_mask": spaces.MultiBinary(s),
                "idle_mask": spaces.MultiBinary(s),
                "wait_mask": spaces.MultiBinary(1),
                "cap_x": spaces.Box(0.0, 1.0, (levels,), np.float32),
                "cap_mask": spaces.MultiBinary((j, levels)),
                # shape (1,), not (): SB3's policies flatten every entry from dimension 1
                "num_stages": spaces.Box(0, s, (1,), np.int64),
                "num_jobs": spaces.Box(0, j, (1,), np.int64),
                "num_edges": spaces.Box(0, e, (1,), np.int64),
            }
        )
        self.action = spaces.MultiDiscrete([s + 1, levels, actions.num_idle_levels], np.int64)

    def pad(self, obs: Observation, deciding: bool) -> tuple[dict[str, np.ndarray], bool]:
        """`obs` padded (masks only when `deciding` and it fits), and whether it overflowed."""
        jobs, edges = _fit(obs, self.max_jobs, self.max_stages, self.max_edges)
        overflow = jobs < obs.num_jobs
        deciding = deciding and not overflow
        counts = {"num_stages": obs.offsets[jobs], "num_jobs": jobs, "num_edges": edges}
        out = {k: np.zeros(v.shape, v.dtype) for k, v in self.observation.items()}
        for key, count in (_ROWS | (_MASKS if deciding else {})).items():
            out[key][: counts[count]] = getattr(obs, key)[: counts[count]]
        for key, count in counts.items():
            out[key][0] = count
        out["global_x"][:] = obs.global_x[0]
        out["cap_x"][:] = obs.cap_x
        out["wait_mask"][0] = deciding and obs.wait_mask[0] and self.actions.wait_action
        return out, overflow

    def repair(self, obs: Observation, action: np.ndarray) -> tuple[ActionChoice, list[str]]:
        """The nearest legal `ActionChoice` to `action` at the decision `obs`, and what was
        illegal."""
        values = np.asarray(action).reshape(-1)
        if values.shape != (3,) or not np.issubdtype(values.dtype, np.integer):
            raise IdlegateError(
                f"an action is 3 whole numbers (stage row or WAIT, cap level, idle level), "
                f"got {action!r}"
            )
        row, cap, idle = (int(v) for v in values)
        problems = []
        rows = np.flatnonzero(obs.stage_mask)
        if obs.wait_mask[0] and self.actions.wait_action:
            rows = np.append(rows, self.max_stages)
        if row not in rows:
            problems.append(f"row {row} is not allowed (allowed: {rows.tolist()})")
            row = _nearest(rows, row)
        if row == self.max_stages:
            return WAIT_CHOICE, problems
        idle_levels = self.actions.num_idle_levels
        if idle != 0 and not (obs.idle_mask[row] and 0 < idle < idle_levels):
            problems.append(f"idle level {idle} is not allowed for row {row}")
            idle = min(max(idle, 0), idle_levels - 1) if obs.idle_mask[row] else 0
        if idle > 0:
            return ActionChoice(row, idle, -1), problems
        caps = np.flatnonzero(obs.cap_mask[obs.stage_job[row]])
        if cap not in caps:
            problems.append(f"cap level {cap} is not allowed for row {row} ({caps.tolist()})")
            cap = _nearest(caps, cap)
        return ActionChoice(row, 0, cap), problems

    def action_masks(self, padded: Mapping[str, np.ndarray]) -> np.ndarray:
        """MaskablePPO's masks of a padded observation: rows, cap levels, idle levels.

        Each part allows the values some legal action uses (WAIT's row among the rows;
        cap level 0 when only WAIT is legal, as it is ignored then).
        """
        launch = padded["stage_mask"].astype(bool)
        caps = padded["cap_mask"][np.unique(padded["stage_job"][launch])].any(axis=0)
        caps[0] |= not caps.any()
        idle = np.ones(self.actions.num_idle_levels, bool)
        idle[1:] = padded["idle_mask"].any()
        return np.concatenate([launch, padded["wait_mask"].astype(bool), caps, idle])


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


def _nearest(allowed: np.ndarray, value: int) -> int:
    """The entry of sorted non-empty `allowed` nearest to `value` (ties: the lower)."""
    return int(allowed[int(np.argmin(np.abs(allowed - value)))])


def model_inputs(obs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The policy model's inputs (`MODEL_INPUTS`, unpadded, model dtypes) of an observation.

    Wrap them in ``types.SimpleNamespace(**inputs)`` to call `OnnxPolicy.evaluate` and
    `policy.actions.choose` on them.
    """
    n, j, e = (int(obs[key][0]) for key in ("num_stages", "num_jobs", "num_edges"))
    inputs = {
        "stage_x": obs["stage_x"][:n],
        "job_x": obs["job_x"][:j],
        "global_x": obs["global_x"].reshape(1, -1),
        "edge_src": obs["edge_src"][:e],
        "edge_dst": obs["edge_dst"][:e],
        "stage_job": obs["stage_job"][:n],
        "stage_mask": obs["stage_mask"][:n].astype(bool),
        "idle_rows": np.flatnonzero(obs["idle_mask"][:n]).astype(np.int64),
        "cap_x": obs["cap_x"],
        "cap_mask": obs["cap_mask"][:j].astype(bool),
        "wait_mask": obs["wait_mask"].astype(bool),
    }
    return {name: inputs[name] for name in MODEL_INPUTS}


def choice_to_action(choice: ActionChoice, max_stages: int) -> np.ndarray:
    """The env action of a policy `ActionChoice` (WAIT: row S; an idle choice's cap level: 0)."""
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
