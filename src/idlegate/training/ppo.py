"""PPO on the input-dependent baseline's advantages — the update step in one file.

``algorithm: ppo`` in a training config swaps REINFORCE's single gradient step for
this; every other part of an iteration is `training.reinforce`'s loop (rollouts of one
arrival sequence in the workers, the memoryless-termination curriculum, validation,
checkpoints, resume, the CSV log). One update (`ppo_update`), on the iteration's D
decisions (all, or the `max_update_decisions` sample):

1. log π_old(a_k|s_k) of the taken actions, recomputed once in torch without
   gradients and then kept fixed (the rollouts sampled with the same weights, in ONNX);
   the mean entropy of π_old is what the log reports;
2. ``ppo.epochs`` times: shuffle the decisions (the run's Generator) and cut them into
   minibatches of ``ppo.minibatch_size``; per minibatch evaluate log π_θ and H with
   gradients (in chunks of `learner_batch`), estimate KL(π_old ‖ π_θ) — above
   ``ppo.target_kl`` the update stops here, before stepping — else take one Adam step on
   the clipped surrogate L = −mean min(ρA, clip(ρ, 1 ± ε)A) − β·mean H
   (`training.math.ppo_clip_loss`) with the gradient norm clipped as REINFORCE's.

Advantages. PPO is usually paired with a learned value head and GAE. Here the
advantages are REINFORCE's: returns-to-go minus the input-dependent baseline (the mean
over the N rollouts of the same arrival sequence of their return-to-go at the same
time), scaled to unit std when `normalize_advantages`. Why: in this problem most of
the return's variance comes from the arrival sequence, which the baseline removes
exactly because every rollout of an iteration shares it, whereas a value head would
have to predict it from the state (Mao et al., ICLR 2019); the model and its ONNX
outputs stay as they are, so a BC or DAgger checkpoint (`init_checkpoint`) starts a
PPO run unchanged and the exported policy is the same graph. GAE(λ = 1) over these
baseline values would give the same advantages; λ < 1 would need a value estimate
that does not contain the rollout's own return, which this baseline does.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import torch

from idlegate.policy.actions import Choice
from idlegate.policy.model import PolicyNet, evaluate_batch
from idlegate.training import math as rl
from idlegate.training.config import TrainConfig
from idlegate.training.rollout import Rollout, StoredObservation
from idlegate.training.update import UpdateStats, update_decisions


def ppo_update(
    model: PolicyNet,
    optimizer: torch.optim.Optimizer,
    rollouts: Sequence[Rollout],
    adv: Sequence[np.ndarray],
    config: TrainConfig,
    entropy_weight: float,
    rng: np.random.Generator,
) -> UpdateStats:
    """Steps 1-2 of the module docstring on one iteration's rollouts and advantages."""
    observations, choices, advantages, index = update_decisions(rollouts, adv, config, rng)
    if len(index) == 0:
        return UpdateStats(0.0, math.nan, 0.0, steps=0)
    ppo = config.ppo
    model.train()
    old, entropy = _log_probs(model, observations, choices, index, config.learner_batch)
    old_at = dict(zip(index.tolist(), range(len(index)), strict=True))
    clip = config.grad_clip if config.grad_clip is not None else math.inf
    losses: list[float] = []
    norms: list[float] = []
    kl = clipped = math.nan
    stop = False
    for _ in range(ppo.epochs):
        order = rng.permutation(index)
        for start in range(0, len(order), ppo.minibatch_size):
            batch = order[start : start + ppo.minibatch_size]
            rows = torch.as_tensor([old_at[i] for i in batch.tolist()])
            optimizer.zero_grad()
            loss_total = 0.0
            new_parts: list[torch.Tensor] = []
            for part in range(0, len(batch), config.learner_batch):
                at = batch[part : part + config.learner_batch].tolist()
                sub = rows[part : part + config.learner_batch]
                log_prob, ent = evaluate_batch(
                    model,
                    [observations[i] for i in at],  # type: ignore[misc]
                    [choices[i] for i in at],
                )
                loss = rl.ppo_clip_loss(
                    log_prob,
                    old[sub],
                    rl.to_tensor(advantages[at]),
                    ppo.clip,
                    ent,
                    entropy_weight,
                    count=len(batch),
                )
                loss.backward()
                loss_total += loss.item()
                new_parts.append(log_prob.detach())
            new = torch.cat(new_parts)
            kl = rl.approx_kl(new, old[rows])
            clipped = rl.clip_fraction(new, old[rows], ppo.clip)
            if ppo.target_kl is not None and kl > ppo.target_kl:
                stop = True  # π moved far enough from the policy that sampled the data
                break
            norms.append(float(torch.nn.utils.clip_grad_norm_(model.parameters(), clip)))
            optimizer.step()
            losses.append(loss_total)
        if stop:
            break
    optimizer.zero_grad()
    model.eval()
    return UpdateStats(
        loss=float(np.mean(losses)) if losses else math.nan,
        entropy=entropy,
        grad_norm=float(np.mean(norms)) if norms else math.nan,
        steps=len(losses),
        approx_kl=kl,
        clip_fraction=clipped,
    )


def _log_probs(
    model: PolicyNet,
    observations: Sequence[StoredObservation],
    choices: Sequence[Choice],
    index: np.ndarray,
    chunk: int,
) -> tuple[torch.Tensor, float]:
    """(log π(a|s) of the decisions at `index`, in that order; their mean entropy), no grad."""
    parts: list[torch.Tensor] = []
    entropy_total = 0.0
    with torch.no_grad():
        for start in range(0, len(index), chunk):
            at = index[start : start + chunk].tolist()
            log_prob, ent = evaluate_batch(
                model,
                [observations[i] for i in at],  # type: ignore[misc]
                [choices[i] for i in at],
            )
            parts.append(log_prob)
            entropy_total += ent.sum().item()
    return torch.cat(parts), entropy_total / len(index)


__all__ = ["ppo_update"]
