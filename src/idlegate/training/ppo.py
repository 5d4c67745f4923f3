"""The policy update of every learned agent: one PPO loop, and REINFORCE's single step.

The DAG policy (`training.reinforce`), the inspector (`training.inspector`) and the
split-window agent (`training.window`) each bind their network to one iteration's stored
decisions as an `Agent`; the update needs nothing else from them. What differs between
them is configuration (`PPOSettings`), not code.

`ppo_update` on D decisions with advantages A (Schulman et al., 2017; each trainer
computes and scales its own A):

1. log π_old(a_k|s_k): the log-probabilities recorded when the actions were sampled
   (`sampled_log_probs`), or else recomputed once without gradients; either way kept
   fixed. The mean entropy of π_old over the D decisions is what `UpdateStats.entropy`
   reports;
2. `epochs` passes: shuffle the decisions (the run's Generator) and cut them into
   minibatches of `minibatch`; per minibatch evaluate log π_θ, H and (for an agent with a
   value head) V with gradients, in chunks of `chunk` decisions whose gradients add up to
   the minibatch's (each chunk's loss is divided by the minibatch size), and take one
   optimizer step on L = −mean min(ρA, clip(ρ, 1 ± ε)A) − β·mean H + c·mean (V − R)²
   (`training.math.ppo_clip_loss`) with the gradient norm clipped;
3. early stop on KL(π_old ‖ π_θ) above `target_kl` (`training.math.approx_kl`), measured
   per `kl_check`: ``minibatch`` — on each minibatch before its step, which is then not
   taken (the DAG policy); ``epoch`` — on every decision after each pass, which ends the
   passes (the inspector and the window agent).

`reinforce_update` is REINFORCE's one step on the same agent: the gradient of
L = −(1/D) Σ A log π − β (1/D) Σ H over all D decisions (in chunks), clipped, one step.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Literal, NamedTuple, Protocol

import numpy as np
import torch
from torch import Tensor

from idlegate.training import math as rl


class ActionEvaluation(NamedTuple):
    """What an agent says about some of its stored decisions under its current weights."""

    log_probs: Tensor
    """[B] log π(a|s) of the stored actions."""
    entropy: Tensor
    """[B] entropy of π(·|s) at the stored states."""
    values: Tensor | None = None
    """[B] the value head's estimate V(s); None for an agent without one."""


class Agent(Protocol):
    """A policy bound to one iteration's D stored decisions (rows 0..D−1)."""

    def parameters(self) -> Iterator[torch.nn.Parameter]:
        """The weights the optimizer steps."""
        ...

    def evaluate(self, rows: np.ndarray) -> ActionEvaluation:
        """The decisions `rows` (indices into the stored ones) under the current weights,
        with gradients unless the caller disabled them."""
        ...


@dataclass(frozen=True)
class PPOSettings:
    """One agent's choices for `ppo_update` (each trainer maps its config onto these)."""

    epochs: int
    """Passes over the decisions at most."""
    minibatch: int
    """Decisions per optimizer step."""
    clip: float
    """ε of the clipped surrogate."""
    entropy_weight: float
    """β of the entropy bonus."""
    max_grad_norm: float = math.inf
    """The gradient's global norm is clipped to this (inf: measured, never clipped)."""
    target_kl: float | None = None
    """Stop early when the KL estimate exceeds this (None: never)."""
    kl_check: Literal["minibatch", "epoch"] = "epoch"
    """When the KL is measured (module docstring, step 3)."""
    value_weight: float = 0.0
    """c: weight of the value loss (agents with a value head)."""
    chunk: int | None = None
    """Decisions per forward/backward pass (None: the whole minibatch)."""

    @classmethod
    def of(cls, config: Any, **override: Any) -> PPOSettings:
        """The settings a trainer's config names alike (epochs, minibatch, clip,
        entropy_weight, max_grad_norm, target_kl), then `override`."""
        names = ("epochs", "minibatch", "clip", "entropy_weight", "max_grad_norm", "target_kl")
        return cls(**{**{name: getattr(config, name) for name in names}, **override})


@dataclass(frozen=True)
class UpdateStats:
    """What one iteration's update reports (NaN: not measured)."""

    loss: float
    """The loss of the update (PPO: mean over its optimizer steps)."""
    entropy: float
    """Mean entropy of the policy on the update's decisions, before the update."""
    grad_norm: float
    """Gradient norm before clipping (PPO: mean over the steps)."""
    steps: int
    """Optimizer steps taken (REINFORCE: 1; PPO: fewer than all on a KL stop; 0: no
    decisions)."""
    approx_kl: float = math.nan
    """PPO: KL(π_old ‖ π) at the last check (`PPOSettings.kl_check`)."""
    clip_fraction: float = math.nan
    """PPO: share of the ratios outside 1 ± ε on that check's decisions."""


NO_DECISIONS = UpdateStats(0.0, math.nan, 0.0, steps=0)
"""The report of an update that had nothing to learn from."""


def ppo_update(
    agent: Agent,
    optimizer: torch.optim.Optimizer,
    advantages: Tensor,
    settings: PPOSettings,
    rng: np.random.Generator,
    *,
    returns: Tensor | None = None,
    sampled_log_probs: Tensor | None = None,
) -> UpdateStats:
    """Steps 1-3 of the module docstring on the agent's decisions ([D] `advantages`;
    `returns`: the value targets of an agent with a value head)."""
    d = len(advantages)
    if d == 0:
        return NO_DECISIONS
    s = settings
    with torch.no_grad():
        old, entropy = _evaluate_all(agent, d, s.chunk)
    if sampled_log_probs is not None:
        old = sampled_log_probs
    losses: list[float] = []
    norms: list[float] = []
    kl = clipped = math.nan
    stop = False
    for _ in range(s.epochs):
        order = rng.permutation(d)
        for start in range(0, d, s.minibatch):
            rows = order[start : start + s.minibatch]
            optimizer.zero_grad()
            loss, new = _minibatch_gradient(agent, rows, old, advantages, returns, s)
            if s.kl_check == "minibatch":
                kl, clipped = rl.approx_kl(new, old[rows]), rl.clip_fraction(new, old[rows], s.clip)
                stop = s.target_kl is not None and kl > s.target_kl
                if stop:
                    break  # π moved far enough from the policy that sampled the data
            norms.append(float(torch.nn.utils.clip_grad_norm_(agent.parameters(), s.max_grad_norm)))
            optimizer.step()
            losses.append(loss)
        if s.kl_check == "epoch":
            with torch.no_grad():
                new, _ = _evaluate_all(agent, d, s.chunk)
            kl, clipped = rl.approx_kl(new, old), rl.clip_fraction(new, old, s.clip)
            stop = s.target_kl is not None and kl > s.target_kl
        if stop:
            break
    optimizer.zero_grad()
    return UpdateStats(
        loss=float(np.mean(losses)) if losses else math.nan,
        entropy=entropy,
        grad_norm=float(np.mean(norms)) if norms else math.nan,
        steps=len(losses),
        approx_kl=kl,
        clip_fraction=clipped,
    )


def reinforce_update(
    agent: Agent,
    optimizer: torch.optim.Optimizer,
    advantages: Tensor,
    entropy_weight: float,
    max_grad_norm: float = math.inf,
    chunk: int | None = None,
) -> UpdateStats:
    """One Adam step on the policy-gradient loss of all the agent's decisions."""
    d = len(advantages)
    optimizer.zero_grad()
    if d == 0:
        return NO_DECISIONS
    loss_total = entropy_total = 0.0
    for rows in _chunks(np.arange(d), chunk):
        ev = agent.evaluate(rows)
        loss = rl.policy_gradient_loss(
            ev.log_probs, advantages[rows], ev.entropy, entropy_weight, d
        )
        loss.backward()
        loss_total += loss.item()
        entropy_total += ev.entropy.sum().item()
    norm = float(torch.nn.utils.clip_grad_norm_(agent.parameters(), max_grad_norm))
    optimizer.step()
    return UpdateStats(loss_total, entropy_total / d, norm, steps=1)


def _minibatch_gradient(
    agent: Agent,
    rows: np.ndarray,
    old: Tensor,
    advantages: Tensor,
    returns: Tensor | None,
    s: PPOSettings,
) -> tuple[float, Tensor]:
    """Add the minibatch's gradient to the weights'; (its loss, its detached log-probs)."""
    total = 0.0
    parts: list[Tensor] = []
    for part in _chunks(rows, s.chunk):
        ev = agent.evaluate(part)
        loss = rl.ppo_clip_loss(
            ev.log_probs,
            old[part],
            advantages[part],
            s.clip,
            ev.entropy,
            s.entropy_weight,
            count=len(rows),
        )
        if ev.values is not None and returns is not None:
            loss = loss + s.value_weight * rl.value_loss(ev.values, returns[part], len(rows))
        loss.backward()
        total += loss.item()
        parts.append(ev.log_probs.detach())
    return total, torch.cat(parts)


def _evaluate_all(agent: Agent, d: int, chunk: int | None) -> tuple[Tensor, float]:
    """(log π of every stored decision, in order; their mean entropy)."""
    parts: list[Tensor] = []
    entropy_total = 0.0
    for rows in _chunks(np.arange(d), chunk):
        ev = agent.evaluate(rows)
        parts.append(ev.log_probs)
        entropy_total += ev.entropy.sum().item()
    return torch.cat(parts), entropy_total / d


def _chunks(rows: np.ndarray, size: int | None) -> Iterator[np.ndarray]:
    """`rows` cut into consecutive pieces of `size` (None: one piece)."""
    step = size or max(len(rows), 1)
    for start in range(0, len(rows), step):
        yield rows[start : start + step]


__all__ = [
    "ActionEvaluation",
    "Agent",
    "PPOSettings",
    "UpdateStats",
    "ppo_update",
    "reinforce_update",
]
