"""PPO: the clipped objective and KL estimate on known answers, and tiny training runs."""

from __future__ import annotations

import csv
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from idlegate.errors import IdlegateError

torch = pytest.importorskip("torch", reason="PPO needs the train extra (torch)")

from idlegate.policy.model import PolicyNet, load_checkpoint  # noqa: E402
from idlegate.sim.workloads import build_workload  # noqa: E402
from idlegate.training import math as rl  # noqa: E402
from idlegate.training.config import TrainConfig  # noqa: E402
from idlegate.training.ppo import (  # noqa: E402
    ActionEvaluation,
    PPOSettings,
    ppo_update,
    reinforce_update,
)
from idlegate.training.reinforce import (  # noqa: E402
    algorithm_update,
    returns_and_advantages,
    train,
    update_decisions,
)
from idlegate.training.rollout import (  # noqa: E402
    RecordingPolicy,
    Rollout,
    run_rollout,
    torch_evaluator,
)
from tests.helpers import tiny_train_config  # noqa: E402

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


def test_value_loss_and_categorical_known_answers():
    v, r = torch.tensor([1.0, 3.0]), torch.tensor([0.0, 1.0])
    assert float(rl.value_loss(v, r)) == 2.5  # (1 + 4) / 2
    assert float(rl.value_loss(v, r, count=5)) == 1.0
    logp = torch.log(torch.tensor([[0.25, 0.75], [0.5, 0.5]]))
    taken, entropy = rl.categorical(logp, torch.tensor([1, 0]))
    assert taken.tolist() == pytest.approx([math.log(0.75), math.log(0.5)])
    h = -(0.25 * math.log(0.25) + 0.75 * math.log(0.75))
    assert entropy.tolist() == pytest.approx([h, math.log(2)])


def test_gae_known_answers():
    rewards, values = np.array([1.0, 2.0, 3.0]), np.array([0.5, 1.0, 1.5])
    # λ = 1, γ = 1: returns-to-go minus the value
    assert rl.gae(rewards, values, 1.0, 1.0).tolist() == pytest.approx([5.5, 4.0, 1.5])
    # λ = 0: one-step TD errors
    assert rl.gae(rewards, values, 0.5, 0.0).tolist() == pytest.approx(
        [1 + 0.5 * 1.0 - 0.5, 2 + 0.5 * 1.5 - 1.0, 3 - 1.5]
    )


# ---------------------------------------------------------------------------------------
# the one update loop, on a toy agent


class Bandit:
    """A two-armed softmax policy (and a value) per state: D stored decisions of `states`
    one-hot states and `actions` taken."""

    def __init__(self, actions: list[int], states: int = 2) -> None:
        torch.manual_seed(0)
        self.net = torch.nn.Linear(states, 3)  # two logits and a value
        self.x = torch.eye(states)[torch.arange(len(actions)) % states]
        self.actions = torch.tensor(actions)
        self.calls: list[int] = []

    def parameters(self):
        return self.net.parameters()

    def evaluate(self, rows: np.ndarray) -> ActionEvaluation:
        self.calls.append(len(rows))
        out = self.net(self.x[torch.as_tensor(rows)])
        logp = torch.log_softmax(out[:, :2], dim=-1)
        return ActionEvaluation(
            *rl.categorical(logp, self.actions[torch.as_tensor(rows)]), out[:, 2]
        )


def _settings(**over: Any) -> PPOSettings:
    return PPOSettings(**{"epochs": 3, "minibatch": 4, "clip": 0.2, "entropy_weight": 0.01, **over})


def _run(agent: Bandit, settings: PPOSettings, **kwargs: Any):
    optimizer = torch.optim.SGD(agent.parameters(), lr=0.5)
    adv = torch.tensor([1.0, -1.0, 0.5, -0.5, 1.0, -1.0])
    return ppo_update(agent, optimizer, adv, settings, np.random.default_rng(0), **kwargs)


def test_the_loop_runs_every_epoch_and_chunks_add_up_to_the_minibatch():
    whole = Bandit([0, 1, 0, 1, 1, 0])
    stats = _run(whole, _settings())
    assert stats.steps == 3 * 2 and stats.entropy == pytest.approx(math.log(2), abs=0.1)
    assert stats.approx_kl > 0 and 0 <= stats.clip_fraction <= 1
    chunked = Bandit([0, 1, 0, 1, 1, 0])
    again = _run(chunked, _settings(chunk=1))
    assert max(chunked.calls) == 1 and again.steps == stats.steps
    for a, b in zip(whole.parameters(), chunked.parameters(), strict=True):
        torch.testing.assert_close(a, b)  # the same steps, up to rounding


def test_the_kl_stops_a_pass_or_a_minibatch():
    # after each pass: the first pass always runs (2 steps), then the KL stops the rest
    assert _run(Bandit([0, 1, 0, 1, 1, 0]), _settings(target_kl=1e-12)).steps == 2
    # before each step: the first minibatch meets π_old exactly (KL 0), the second does not
    early = _run(Bandit([0, 1, 0, 1, 1, 0]), _settings(target_kl=1e-12, kl_check="minibatch"))
    assert early.steps == 1 and early.approx_kl > 1e-12


def test_the_value_loss_and_sampled_log_probs_enter_the_loss():
    plain = _run(Bandit([0, 1, 0, 1, 1, 0]), _settings(epochs=1, minibatch=6))
    returns = torch.full((6,), 10.0)
    valued = _run(Bandit([0, 1, 0, 1, 1, 0]), _settings(epochs=1, minibatch=6, value_weight=1.0),
                  returns=returns)  # fmt: skip
    assert valued.loss > plain.loss + 50  # (V − 10)² with V near 0
    # π_old far below π_θ: every ratio is clipped, so the surrogate has no gradient
    sampled = torch.full((6,), -20.0)
    clipped = _run(Bandit([0, 1, 0, 1, 1, 0]), _settings(epochs=1, minibatch=6),
                   sampled_log_probs=sampled)  # fmt: skip
    assert clipped.clip_fraction == 1.0


def test_no_decisions_means_no_step():
    agent = Bandit([])
    optimizer = torch.optim.SGD(agent.parameters(), lr=0.5)
    empty = torch.zeros(0)
    for stats in (
        ppo_update(agent, optimizer, empty, _settings(), np.random.default_rng(0)),
        reinforce_update(agent, optimizer, empty, 0.01),
    ):
        assert stats.steps == 0 and math.isnan(stats.entropy)


# ---------------------------------------------------------------------------------------
# the DAG policy's update and the training loop


def tiny_config(out: Path, **over: Any) -> TrainConfig:
    """The shared tiny run with PPO, seed 7 and no warm start (seconds)."""
    ppo = {"seed": 7, "algorithm": "ppo", "bc": {"enabled": False}}
    return tiny_train_config(out, **{**ppo, "ppo": {"epochs": 3, "minibatch_size": 64}, **over})


def _rollouts(config: TrainConfig) -> tuple[PolicyNet, list[Rollout]]:
    """A fresh model (seeded: the same weights on every call) and three rollouts of one
    arrival sequence, in this process."""
    torch.manual_seed(0)
    model = PolicyNet(config.model)
    cfg = model.config
    spec = config.workload
    wl = build_workload(spec.name, 3, **spec.options)
    policy = RecordingPolicy(torch_evaluator(model), cfg.features, cfg.actions)
    return model, [run_rollout(policy, wl, seed=s, arrival_seed=3) for s in (11, 12, 13)]


def test_the_dag_update_runs_its_epochs_or_stops_on_the_kl_target(tmp_path):
    config = tiny_config(tmp_path, ppo={"epochs": 3, "minibatch_size": 64, "target_kl": None})
    model, rollouts = _rollouts(config)
    _, _, adv = returns_and_advantages(rollouts, config)
    decisions = sum(r.decisions for r in rollouts)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    rng = np.random.default_rng(0)
    full = algorithm_update(model, optimizer, rollouts, adv, config, 0.01, rng)
    assert full.steps == 3 * math.ceil(decisions / 64)
    assert full.approx_kl > 0 and 0 <= full.clip_fraction <= 1 and full.entropy > 0
    assert any(not torch.equal(before[k], v) for k, v in model.state_dict().items())
    # the first minibatch meets π_old exactly (KL 0); the next one has moved past 1e-12
    strict = tiny_config(tmp_path, ppo={"epochs": 3, "minibatch_size": 64, "target_kl": 1e-12})
    model, rollouts = _rollouts(strict)
    _, _, adv = returns_and_advantages(rollouts, strict)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    rng = np.random.default_rng(0)
    early = algorithm_update(model, optimizer, rollouts, adv, strict, 0.01, rng)
    assert early.steps == 1 and early.approx_kl > 1e-12


def test_update_decisions_samples_at_most_the_limit_in_rollout_order(tmp_path):
    config = tiny_config(tmp_path, max_update_decisions=5)
    model, rollouts = _rollouts(config)
    _, _, adv = returns_and_advantages(rollouts, config)
    agent, advantages = update_decisions(model, rollouts, adv, config, np.random.default_rng(0))
    pooled = np.concatenate(adv)
    assert len(agent.observations) == len(agent.choices) == len(advantages) == 5
    positions = [int(np.flatnonzero(pooled.astype(np.float32) == a)[0]) for a in advantages]
    assert positions == sorted(positions)


def _log(out: Path) -> list[dict[str, str]]:
    with (out / "train_log.csv").open() as f:
        rows = list(csv.DictReader(f))
    drop = ("wall_seconds", "rollout_seconds", "update_seconds")
    return [{k: v for k, v in r.items() if k not in drop} for r in rows]


@pytest.mark.slow
def test_a_ppo_run_from_a_warm_start_logs_checkpoints_and_resumes(tmp_path):
    warm = train(
        tiny_config(
            tmp_path / "bc", algorithm="reinforce", iterations=0, bc={"episodes": 2, "epochs": 1}
        ),
        show_progress=False,
    )
    init = str(tmp_path / "bc" / "bc.pt")
    straight = train(tiny_config(tmp_path / "straight", init_checkpoint=init), show_progress=False)
    assert straight.initial_val_jct == warm.initial_val_jct  # the warm start's weights
    rows = _log(tmp_path / "straight")
    assert [r["iteration"] for r in rows] == ["0", "1", "2"]
    for row in rows[1:]:
        assert int(row["update_steps"]) >= 1
        assert float(row["approx_kl"]) >= 0 and row["val_avg_jct"]
    ckpt = load_checkpoint(tmp_path / "straight" / "checkpoint.pt")
    assert ckpt["iteration"] == 2 and ckpt["training_config"]["algorithm"] == "ppo"
    assert (tmp_path / "straight" / "policy.onnx").is_file()

    train(tiny_config(tmp_path / "split", init_checkpoint=init, iterations=1), show_progress=False)
    with pytest.raises(IdlegateError, match=r"config differs .* in algorithm"):
        train(
            tiny_config(tmp_path / "split", algorithm="reinforce", resume=True),
            show_progress=False,
        )
    train(tiny_config(tmp_path / "split", init_checkpoint=init, resume=True), show_progress=False)
    assert _log(tmp_path / "split") == rows
    a = load_checkpoint(tmp_path / "straight" / "checkpoint.pt")["state_dict"]
    b = load_checkpoint(tmp_path / "split" / "checkpoint.pt")["state_dict"]
    assert all(torch.equal(a[k], b[k]) for k in a)
