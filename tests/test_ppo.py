"""PPO: the clipped objective and KL estimate on known answers, and tiny training runs."""

from __future__ import annotations

import math

import numpy as np
import pytest

from idlegate.errors import IdlegateError

torch = pytest.importorskip("torch", reason="PPO needs the train extra (torch)")

from idlegate.training import math as rl  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_torch_thread")


# ---------------------------------------------------------------------------------------
# the arithmetic: known answers


def _ratios(*values: float) -> torch.Tensor:
    """log π_θ of decisions whose old log-probability is 0, so that ρ = `values`."""
    return torch.log(torch.tensor(values, dtype=torch.float64)).requires_grad_(True)


def test_clipped_surrogate_known_answer():
    logp = _ratios(1.5, 0.5, 1.0, 1.1, 0.5, 1.5)
    old = torch.zeros(6, dtype=torch.float64)
    adv = torch.tensor([1.0, 1.0, -1.0, -2.0, -1.0, -1.0], dtype=torch.float64)
    ent = torch.tensor([1.0, 2.0, 3.0, 4.0, 0.0, 0.0], dtype=torch.float64)
    loss = rl.ppo_clip_loss(logp, old, adv, 0.2, ent, entropy_weight=0.1)
    # min(ρA, clip(ρ)A): 1.2 (capped gain), 0.5, −1, −2.2, −0.8 (capped loss), −1.5
    surrogate = 1.2 + 0.5 - 1.0 - 2.2 - 0.8 - 1.5
    assert loss.item() == pytest.approx(-surrogate / 6 - 0.1 * 10 / 6)
    loss.backward()
    # d/dlog π of −ρA/D where the unclipped term is the min, 0 where the clipped one is
    expected = [0.0, -0.5 / 6, 1.0 / 6, 2.2 / 6, 0.0, 1.5 / 6]
    np.testing.assert_allclose(logp.grad.numpy(), expected, atol=1e-12)


def test_at_ratio_one_the_ppo_gradient_is_reinforces():
    logits = torch.tensor([0.3, -0.2, 0.1], requires_grad=True)
    adv = torch.tensor([2.0, 0.5, -1.0])
    ent = torch.tensor([0.4, 0.4, 0.4])
    old = torch.log_softmax(logits, 0).detach()
    rl.ppo_clip_loss(torch.log_softmax(logits, 0), old, adv, 0.2, ent, 0.0).backward()
    ppo_grad = logits.grad.clone()
    logits.grad = None
    rl.policy_gradient_loss(torch.log_softmax(logits, 0), adv, ent, 0.0).backward()
    torch.testing.assert_close(ppo_grad, logits.grad)
    # chunks with a shared count add up to the whole minibatch, as for REINFORCE
    logp = torch.log_softmax(logits, 0).detach() + 0.3
    whole = rl.ppo_clip_loss(logp, old, adv, 0.2, ent, 0.1)
    parts = rl.ppo_clip_loss(logp[:2], old[:2], adv[:2], 0.2, ent[:2], 0.1, count=3)
    parts = parts + rl.ppo_clip_loss(logp[2:], old[2:], adv[2:], 0.2, ent[2:], 0.1, count=3)
    assert parts.item() == pytest.approx(whole.item())


def test_ppo_loss_rejects_bad_input():
    one = torch.zeros(1)
    with pytest.raises(IdlegateError, match="at least one decision"):
        rl.ppo_clip_loss(torch.zeros(0), torch.zeros(0), torch.zeros(0), 0.2, torch.zeros(0), 0)
    with pytest.raises(IdlegateError, match="clip range must be positive"):
        rl.ppo_clip_loss(one, one, one, 0.0, one, 0.0)


def test_kl_estimate_known_answers():
    assert rl.approx_kl(torch.zeros(3), torch.zeros(3)) == 0.0
    assert rl.approx_kl(torch.zeros(0), torch.zeros(0)) == 0.0
    # ρ = 2 and ρ = 1: ((2 − 1 − ln 2) + 0) / 2
    got = rl.approx_kl(torch.tensor([math.log(2.0), 0.0]), torch.zeros(2))
    assert got == pytest.approx((1 - math.log(2.0)) / 2, rel=1e-6)
    # on actions sampled from π_old it estimates KL(π_old ‖ π_θ) without bias
    p = torch.tensor([0.5, 0.3, 0.2], dtype=torch.float64)
    q = torch.tensor([0.2, 0.5, 0.3], dtype=torch.float64)
    exact = float((p * (p / q).log()).sum())
    gen = torch.Generator().manual_seed(0)
    draws = torch.multinomial(p, 200_000, replacement=True, generator=gen)
    estimate = rl.approx_kl(q.log()[draws], p.log()[draws])
    assert estimate == pytest.approx(exact, rel=0.03)


def test_clip_fraction_counts_ratios_outside_the_range():
    logp = torch.log(torch.tensor([1.5, 0.5, 1.0, 1.1]))
    assert rl.clip_fraction(logp, torch.zeros(4), 0.2) == 0.5
    assert rl.clip_fraction(torch.zeros(0), torch.zeros(0), 0.2) == 0.0
