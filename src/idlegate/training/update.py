"""What REINFORCE's and PPO's updates share: the decisions they learn from and their report.

`training.reinforce` (one policy-gradient step) and `training.ppo` (epochs of clipped
minibatch steps) both pool an iteration's rollouts with `update_decisions` and report an
`UpdateStats`; the training loop in `training.reinforce` calls either.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from idlegate.policy.actions import Choice
from idlegate.training.config import TrainConfig
from idlegate.training.rollout import Rollout, StoredObservation


@dataclass(frozen=True)
class UpdateStats:
    """What one iteration's update reports (NaN: the algorithm does not measure it)."""

    loss: float
    """The loss of the update (PPO: mean over its minibatch steps)."""
    entropy: float
    """Mean entropy of the policy on the update's decisions (before the update)."""
    grad_norm: float
    """Gradient norm before clipping (PPO: mean over the steps)."""
    steps: int
    """Optimizer steps taken (REINFORCE: 1; PPO: fewer than its epochs' on a KL stop; 0:
    no decisions)."""
    approx_kl: float = math.nan
    """PPO: KL(π_old ‖ π) estimated on the last minibatch, before its step."""
    clip_fraction: float = math.nan
    """PPO: share of that minibatch's ratios outside 1 ± clip."""


def update_decisions(
    rollouts: Sequence[Rollout],
    adv: Sequence[np.ndarray],
    config: TrainConfig,
    rng: np.random.Generator,
) -> tuple[list[StoredObservation], list[Choice], np.ndarray, np.ndarray]:
    """(observations, choices, advantages, index) of the update: the rollouts' decisions
    pooled, and the sorted positions to learn from — all of them, or a uniform sample of
    `config.max_update_decisions` (drawn from `rng`)."""
    observations = [o for r in rollouts for o in r.observations]
    choices = [c for r in rollouts for c in r.choice_list()]
    advantages = np.concatenate(adv) if adv else np.zeros(0)
    index = np.arange(len(observations))
    limit = config.max_update_decisions
    if limit is not None and len(index) > limit:
        index = np.sort(rng.choice(len(index), size=limit, replace=False))
    return observations, choices, advantages, index
