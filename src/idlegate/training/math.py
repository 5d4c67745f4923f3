"""The arithmetic of REINFORCE with input-dependent baselines (numpy, and torch for the loss).

Notation for one rollout with K decisions at times t_0 ≤ t_1 ≤ … ≤ t_{K−1}, ending at
T (all jobs done, or the memoryless termination time):

* I(t) = ∫₀ᵗ (jobs in system) ds, the cluster's `jobs_time_integral`;
* reward of decision k: r_k = −(I(t_{k+1}) − I(t_k)) / scale with t_K = T, i.e. minus the
  job-seconds spent until the next decision. Σ_k r_k = −(I(T) − I(t_0)) / scale, so
  maximising the undiscounted return minimises the total time jobs spend in the system,
  hence the average JCT for a fixed set of jobs (Decima §5.3; Duan & Wu's reward);
* return-to-go: R_k = Σ_{i ≥ k} γ^{i−k} r_i;
* input-dependent baseline (Mao et al., "Variance reduction for RL in input-driven
  environments", ICLR 2019): N rollouts of the *same* arrival sequence; the baseline of
  decision k of rollout i is b_k^i = (1/N) Σ_j R^j(t_k^i), where R^j(t) is rollout j's
  return-to-go read at time t (interpolated over its decision times, see
  `interpolate_returns`);
* advantage: A_k^i = R_k^i − b_k^i, optionally divided by the standard deviation over
  the iteration's decisions;
* loss: L = −(1/D) Σ A_k log π(a_k|s_k) − β (1/D) Σ H(π(·|s_k)) over D decisions.

PPO (Schulman et al., "Proximal Policy Optimization Algorithms", 2017) reuses the same
advantages on several passes over one iteration's decisions, so it weighs them by the
probability ratio ρ_k = π_θ(a_k|s_k) / π_old(a_k|s_k) of the current to the sampling
policy and clips it (`ppo_clip_loss`); `approx_kl` estimates how far θ has moved.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import numpy as np
import torch
from torch import Tensor

from idlegate.errors import IdlegateError

Interpolation = Literal["step", "linear"]


def rewards_from_integrals(
    integrals: np.ndarray, end_integral: float, scale: float = 1.0
) -> np.ndarray:
    """r_k = −(I_{k+1} − I_k) / scale with I_K = `end_integral`: [K] integrals → [K] rewards.

    >>> rewards_from_integrals(np.array([0.0, 2.0, 2.0]), 7.0).tolist()
    [-2.0, -0.0, -5.0]
    """
    i = np.asarray(integrals, dtype=np.float64)
    if i.ndim != 1:
        raise IdlegateError(f"integrals must be one-dimensional, got shape {i.shape}")
    nxt = np.append(i[1:], float(end_integral))
    return -(nxt - i) / scale


def returns_to_go(rewards: np.ndarray, gamma: float = 1.0) -> np.ndarray:
    """R_k = Σ_{i ≥ k} γ^{i−k} r_i for [K] rewards (R_k = r_k + γ R_{k+1}, R_K = 0).

    >>> returns_to_go(np.array([1.0, 2.0, 3.0])).tolist()
    [6.0, 5.0, 3.0]
    >>> returns_to_go(np.array([1.0, 2.0, 4.0]), 0.5).tolist()
    [3.0, 4.0, 4.0]
    """
    r = np.asarray(rewards, dtype=np.float64)
    if gamma == 1.0:
        return np.cumsum(r[::-1])[::-1].copy()
    out = np.empty_like(r)
    acc = 0.0
    for k in range(len(r) - 1, -1, -1):
        acc = r[k] + gamma * acc
        out[k] = acc
    return out


def interpolate_returns(
    times: np.ndarray,
    returns: np.ndarray,
    query: np.ndarray,
    kind: Interpolation = "step",
) -> np.ndarray:
    """One rollout's return-to-go R(t) at the `query` times, from its [K] decision `times`.

    `times` must be sorted (ties allowed). Append the rollout's end time with return 0
    to make R(t) = 0 after the episode ended (`time_baselines` does).

    * ``step`` — piecewise constant: R(t) = R_k of the last decision with t_k ≤ t
      (the first decision's value before t_0);
    * ``linear`` — Decima's code (`get_piecewise_linear_fit_baseline`): R_k at a decision
      time (the first of tied ones), linear in between, constant beyond the ends.
    """
    t = np.asarray(times, dtype=np.float64)
    r = np.asarray(returns, dtype=np.float64)
    q = np.asarray(query, dtype=np.float64)
    if t.shape != r.shape or t.ndim != 1 or t.size == 0:
        raise IdlegateError("times and returns must be equal-length non-empty vectors")
    if kind == "step":
        idx = np.searchsorted(t, q, side="right") - 1
        return r[np.clip(idx, 0, t.size - 1)]
    if kind != "linear":
        raise IdlegateError(f"unknown interpolation {kind!r}; use 'step' or 'linear'")
    idx = np.searchsorted(t, q, side="left")
    hi = np.clip(idx, 0, t.size - 1)
    lo = np.clip(idx - 1, 0, t.size - 1)
    exact = t[hi] == q
    inside = (idx > 0) & (idx < t.size) & ~exact
    span = np.where(inside, t[hi] - t[lo], 1.0)
    frac = np.where(inside, (q - t[lo]) / span, 1.0)
    return np.where(inside, r[lo] + frac * (r[hi] - r[lo]), r[hi])


def time_baselines(
    times: Sequence[np.ndarray],
    returns: Sequence[np.ndarray],
    end_times: Sequence[float] | None = None,
    kind: Interpolation = "step",
) -> list[np.ndarray]:
    """Input-dependent baselines for N rollouts of one arrival sequence.

    b_k^i = (1/N) Σ_j R^j(t_k^i), each R^j read by `interpolate_returns` over rollout j's
    decision times, extended (when `end_times` is given) by the point (T_j, 0): after
    its end a rollout has nothing left to collect. Rollouts without decisions count
    with R = 0. Returns one [K_i] array per rollout.
    """
    n = len(times)
    if n != len(returns) or (end_times is not None and len(end_times) != n):
        raise IdlegateError("times, returns and end times must list the same rollouts")
    curves: list[tuple[np.ndarray, np.ndarray] | None] = []
    for j in range(n):
        t = np.asarray(times[j], dtype=np.float64)
        r = np.asarray(returns[j], dtype=np.float64)
        if end_times is not None:
            t = np.append(t, float(end_times[j]))
            r = np.append(r, 0.0)
        curves.append((t, r) if t.size else None)
    out = []
    for i in range(n):
        q = np.asarray(times[i], dtype=np.float64)
        total = np.zeros(q.shape)
        for curve in curves:
            if curve is not None:
                total += interpolate_returns(curve[0], curve[1], q, kind)
        out.append(total / n)
    return out


def advantages(
    returns: Sequence[np.ndarray],
    baselines: Sequence[np.ndarray],
    normalize: bool = False,
    eps: float = 1e-8,
) -> list[np.ndarray]:
    """A = R − b per rollout; with `normalize`, all divided by their pooled std (+ eps).

    Only the scale changes: the baseline already centres them, and a common positive
    factor keeps every sign.
    """
    adv = [
        np.asarray(r, np.float64) - np.asarray(b, np.float64)
        for r, b in zip(returns, baselines, strict=True)
    ]
    if normalize:
        pooled = np.concatenate(adv) if adv else np.zeros(0)
        std = float(pooled.std()) if pooled.size else 0.0
        adv = [a / (std + eps) for a in adv]
    return adv


def policy_gradient_loss(
    log_probs: Tensor,
    advantages: Tensor,
    entropies: Tensor,
    entropy_weight: float,
    count: int | None = None,
) -> Tensor:
    """L = −(1/D) Σ A_k log π(a_k|s_k) − β (1/D) Σ H_k, with D = `count` (default: len).

    Give `count` = all decisions of the update when calling this per chunk and summing
    the chunks' gradients: the sum of the chunks' losses is then the full loss.
    """
    d = float(count if count is not None else log_probs.numel())
    if d <= 0:
        raise IdlegateError("the policy-gradient loss needs at least one decision")
    adv = advantages.to(log_probs.dtype).detach()
    return -(adv * log_probs).sum() / d - entropy_weight * entropies.sum() / d


def ppo_clip_loss(
    log_probs: Tensor,
    old_log_probs: Tensor,
    advantages: Tensor,
    clip: float,
    entropies: Tensor,
    entropy_weight: float,
    count: int | None = None,
) -> Tensor:
    """PPO's clipped surrogate: L = −(1/D) Σ min(ρ_k A_k, clip(ρ_k, 1−ε, 1+ε) A_k) − β (1/D) Σ H_k.

    ρ_k = exp(log π_θ − log π_old), ε = `clip`, D = `count` (default: len; give the
    minibatch size when summing chunks' gradients, as `policy_gradient_loss`). The min
    makes it a pessimistic bound: a ratio pushed beyond 1 ± ε in the advantage's
    direction earns nothing more (and gets no gradient), one pushed the other way
    is never clipped. At ρ = 1 its gradient is REINFORCE's.
    """
    d = float(count if count is not None else log_probs.numel())
    if d <= 0:
        raise IdlegateError("the PPO loss needs at least one decision")
    if not clip > 0:
        raise IdlegateError(f"the PPO clip range must be positive, got {clip}")
    adv = advantages.to(log_probs.dtype).detach()
    ratio = torch.exp(log_probs - old_log_probs.to(log_probs.dtype).detach())
    surrogate = torch.minimum(ratio * adv, torch.clamp(ratio, 1.0 - clip, 1.0 + clip) * adv)
    return -surrogate.sum() / d - entropy_weight * entropies.sum() / d


def value_loss(values: Tensor, returns: Tensor, count: int | None = None) -> Tensor:
    """(1/D) Σ (V_k − R_k)², D = `count` (default: len; per chunk as `policy_gradient_loss`)."""
    d = float(count if count is not None else values.numel())
    return ((values - returns.to(values.dtype).detach()) ** 2).sum() / d


def categorical(log_probs: Tensor, actions: Tensor) -> tuple[Tensor, Tensor]:
    """([B] log π(a_b), [B] entropy H_b) of [B, A] log-probabilities and [B] actions.

    Entries with probability 0 (a masked action's log-probability is a large negative
    number, never −inf) add 0 · log p = 0 to the entropy.

    >>> lp = torch.log(torch.tensor([[0.5, 0.5], [1.0, 1e-30]]))
    >>> taken, h = categorical(lp, torch.tensor([1, 0]))
    >>> [round(float(x), 4) for x in taken], [round(float(x), 4) for x in h]
    ([-0.6931, 0.0], [0.6931, 0.0])
    """
    chosen = log_probs.gather(1, actions.unsqueeze(1)).squeeze(1)
    return chosen, -(log_probs.exp() * log_probs).sum(dim=-1)


def gae(rewards: np.ndarray, values: np.ndarray, gamma: float, lam: float) -> np.ndarray:
    """GAE(γ, λ) advantages of one finished episode (the value after its last step is 0).

    δ_k = r_k + γ V_{k+1} − V_k; A_k = δ_k + γλ A_{k+1}.

    >>> gae(np.array([1.0, 1.0]), np.array([0.5, 0.5]), 1.0, 1.0).tolist()
    [1.5, 0.5]
    >>> gae(np.array([1.0, 1.0]), np.array([0.5, 0.5]), 1.0, 0.0).tolist()
    [1.0, 0.5]
    """
    adv = np.zeros(len(rewards))
    running = 0.0
    for k in range(len(rewards) - 1, -1, -1):
        next_value = values[k + 1] if k + 1 < len(rewards) else 0.0
        delta = rewards[k] + gamma * next_value - values[k]
        running = delta + gamma * lam * running
        adv[k] = running
    return adv


def approx_kl(log_probs: Tensor, old_log_probs: Tensor) -> float:
    """KL(π_old ‖ π_θ) estimated on the sampled actions: mean of (ρ − 1) − log ρ.

    The low-variance, never negative estimator (J. Schulman, "Approximating KL
    divergence", 2020); unbiased because the actions were drawn from π_old. 0 for ρ = 1.
    """
    if log_probs.numel() == 0:
        return 0.0
    log_ratio = (log_probs - old_log_probs).detach().double()
    return float((torch.expm1(log_ratio) - log_ratio).mean())


def clip_fraction(log_probs: Tensor, old_log_probs: Tensor, clip: float) -> float:
    """Share of decisions whose ratio ρ lies outside [1 − ε, 1 + ε] (0 for none)."""
    if log_probs.numel() == 0:
        return 0.0
    ratio = torch.exp((log_probs - old_log_probs).detach())
    return float(((ratio - 1.0).abs() > clip).double().mean())


def entropy_weight_at(iteration: int, initial: float, decay: float, minimum: float) -> float:
    """β_k = max(minimum, initial − k·decay) (linear decay to a floor, as Decima)."""
    return max(minimum, initial - iteration * decay)


def curriculum_mean(iteration: int, initial: float, increment: float, maximum: float) -> float:
    """Mean episode length of iteration k: min(maximum, initial + k·increment)."""
    return min(maximum, initial + iteration * increment)


def explained_variance(returns: np.ndarray, baselines: np.ndarray) -> float:
    """1 − Var(R − b) / Var(R): how much of the return the baseline predicts (1 is perfect)."""
    var = float(np.var(returns))
    return float("nan") if var == 0 else 1.0 - float(np.var(returns - baselines)) / var


def to_tensor(values: np.ndarray) -> Tensor:
    """float32 tensor of a numpy array (copy)."""
    return torch.as_tensor(np.asarray(values, dtype=np.float32))
