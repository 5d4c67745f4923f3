"""The GNN policy: layers on hand-built graphs, masked heads, acting, checkpoints."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from idlegate.errors import IdlegateError  # noqa: E402
from idlegate.policy.actions import (  # noqa: E402
    WAIT_CHOICE,
    ActionChoice,
    ActionConfig,
    choice_log_prob,
    choose,
    decode,
    idle_delay,
    idle_slot,
)
from idlegate.policy.columns import FEATURE_SCHEMA_VERSION, FeatureConfig  # noqa: E402
from idlegate.policy.features import Featurizer, Observation, compute_features  # noqa: E402
from idlegate.policy.model import (  # noqa: E402
    GlobalSummary,
    JobSummary,
    LevelHead,
    MessagePassing,
    PolicyNet,
    batch_observations,
    checkpoint_dict,
    evaluate_batch,
    index_add,
    load_checkpoint,
    masked_log_softmax,
    model_from_checkpoint,
    save_checkpoint,
)
from idlegate.policy.model_config import ModelConfig  # noqa: E402
from idlegate.sim.cluster import Cluster  # noqa: E402
from idlegate.sim.engine import simulate  # noqa: E402
from idlegate.sim.protocol import WAIT, Decision  # noqa: E402
from idlegate.sim.workloads import build_workload  # noqa: E402
from idlegate.training.rollout import RecordingPolicy, torch_evaluator  # noqa: E402
from tests.helpers import dag, gang_workload  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def draw(
    model: PolicyNet, obs: Observation, rng: np.random.Generator | None = None
) -> ActionChoice:
    """The torch model's choice at `obs`: a draw from `rng`, or the argmax without one."""
    with torch.no_grad():
        outputs = [t.numpy() for t in model.run(obs)]
    return choose(obs, *outputs, greedy=rng is None, rng=rng)


def recording(model: PolicyNet, greedy: bool = False) -> RecordingPolicy:
    """The torch model as a scheduler that records its decisions."""
    cfg = model.config
    return RecordingPolicy(torch_evaluator(model), cfg.features, cfg.actions, greedy=greedy)


def reference_entropy(obs: Observation, choice: ActionChoice, outputs: list[np.ndarray]) -> float:
    """The entropy of the parts of a decision that were chosen, from one observation's
    outputs in numpy (what `evaluate_batch` computes for a batch)."""
    stage_logp, cap_logp, idle_logp, wait_logp = outputs

    def h(logp: np.ndarray) -> float:
        return float(-(np.exp(logp) * logp).sum())

    total = h(np.concatenate([stage_logp, wait_logp]))
    if choice.is_wait:
        return total
    slot = idle_slot(obs, choice.stage_row)
    if slot >= 0 and idle_logp.shape[1] > 1:
        total += h(idle_logp[slot])
    if choice.cap_index >= 0:
        total += h(cap_logp[obs.stage_job[choice.stage_row]])
    return total


# diamond a -> {b, c} -> d as rows 0..3; messages go child -> parent
DIAMOND_SRC = torch.tensor([1, 2, 3, 3])
DIAMOND_DST = torch.tensor([0, 0, 1, 2])


def identity_linear(layer: torch.nn.Linear) -> None:
    with torch.no_grad():
        layer.weight.copy_(torch.eye(layer.out_features, layer.in_features))
        if layer.bias is not None:
            layer.bias.zero_()


def test_message_passing_sums_descendants_with_identity_weights() -> None:
    x = torch.tensor([[1.0, 0], [2, 0], [4, 0], [8, 1]])
    mp = MessagePassing(2, steps=2, slope=1.0)  # slope 1: the activation is the identity
    identity_linear(mp.f)
    identity_linear(mp.g)
    h = mp(x, DIAMOND_SRC, DIAMOND_DST)
    # h_v = x_v + Σ children h_c: d = 8, b = 2 + 8, c = 4 + 8, a = 1 + 10 + 12
    torch.testing.assert_close(h[:, 0], torch.tensor([23.0, 10, 12, 8]))
    torch.testing.assert_close(h[:, 1], torch.tensor([2.0, 1, 1, 1]))  # d reaches a twice
    one_step = MessagePassing(2, steps=1, slope=1.0)
    one_step.load_state_dict(mp.state_dict())
    # one step only reaches direct children: a = 1 + 2 + 4
    torch.testing.assert_close(
        one_step(x, DIAMOND_SRC, DIAMOND_DST)[:, 0], torch.tensor([7.0, 10, 12, 8])
    )


def test_message_passing_equals_the_bottom_up_recursion() -> None:
    torch.manual_seed(0)
    # a 5-stage DAG (depth 4): 0 <- 1 <- 2 <- 4 and 0 <- 3 <- 4 (child -> parent edges)
    src = torch.tensor([1, 3, 2, 4, 4])
    dst = torch.tensor([0, 0, 1, 2, 3])
    children = {0: [1, 3], 1: [2], 2: [4], 3: [4], 4: []}
    x = torch.randn(5, 6)
    mp = MessagePassing(6, steps=3, slope=0.2)  # depth − 1 steps suffice
    act = torch.nn.functional.leaky_relu
    e: dict[int, torch.Tensor] = {}
    for v in (4, 3, 2, 1, 0):  # reverse topological order
        summed = sum((act(mp.f(e[c]), 0.2) for c in children[v]), torch.zeros(6))
        e[v] = act(x[v] + mp.g(summed), 0.2)
    want = torch.stack([e[v] for v in range(5)])
    with torch.no_grad():
        torch.testing.assert_close(mp(x, src, dst), want)
        more = MessagePassing(6, steps=7, slope=0.2)
        more.load_state_dict(mp.state_dict())
        torch.testing.assert_close(more(x, src, dst), want)  # a fixed point after depth − 1


def test_message_passing_without_edges_is_elementwise() -> None:
    mp = MessagePassing(3, steps=4, slope=0.2)
    x = torch.randn(2, 3)
    empty = torch.zeros(0, dtype=torch.int64)
    with torch.no_grad():
        want = torch.nn.functional.leaky_relu(x + mp.g.bias, 0.2)
        torch.testing.assert_close(mp(x, empty, empty), want)


def test_job_and_global_summaries_pool_by_job() -> None:
    e = torch.tensor([[1.0, 2], [3, 4], [5, 6]])
    stage_job = torch.tensor([0, 0, 1])
    js = JobSummary(2, job_dim=3, slope=1.0)
    identity_linear(js.f)
    identity_linear(js.g)
    with torch.no_grad():
        js.job.weight.zero_()
    y = js(e, torch.zeros(2, 3), stage_job)
    torch.testing.assert_close(y, torch.tensor([[4.0, 6], [5, 6]]))
    gs = GlobalSummary(2, global_dim=4, slope=1.0)
    identity_linear(gs.f)
    identity_linear(gs.g)
    with torch.no_grad():
        gs.glob.weight.zero_()
    torch.testing.assert_close(gs(y, torch.zeros(1, 4)), torch.tensor([[9.0, 12]]))


def test_index_add_sums_repeats_and_has_the_right_gradient() -> None:
    base = torch.zeros(3, 2, dtype=torch.float64)
    values = torch.randn(4, 2, dtype=torch.float64, requires_grad=True)
    rows = torch.tensor([[0], [2], [0], [0]])
    out = index_add(base, rows, values)
    torch.testing.assert_close(out[0], values[[0, 2, 3]].sum(0))
    torch.testing.assert_close(out[1], torch.zeros(2, dtype=torch.float64))
    assert torch.autograd.gradcheck(lambda v: index_add(base, rows, v), (values,))


def test_masked_log_softmax_gives_masked_entries_zero_probability() -> None:
    scores = torch.tensor([[3.0, 1.0, -2.0, 50.0], [1.0, 2.0, 3.0, 4.0]])
    mask = torch.tensor([[True, True, False, False], [False, False, False, False]])
    p = masked_log_softmax(scores, mask).exp()
    assert p[0, 2] == 0 and p[0, 3] == 0  # exactly zero, even for the largest score
    torch.testing.assert_close(p[0, :2].sum(), torch.tensor(1.0))
    assert torch.isfinite(p[1]).all()  # an all-masked row stays finite


def test_level_head_fixed_levels_path_equals_the_general_one() -> None:
    torch.manual_seed(1)
    head = LevelHead(8, 5, 0.2)
    rows, z, levels = torch.randn(7, 8), torch.randn(1, 8), torch.linspace(0, 1, 5)
    with torch.no_grad():
        torch.testing.assert_close(head.forward_fixed(rows, z, levels), head(rows, z, levels))


# ---------------------------------------------------------------------------------------
# the whole model on real states


def busy_state() -> Cluster:
    """K=5; job 0 holds 2 executors on its first stage, job 1 waits; job 2 is a gang of 3."""
    c = Cluster(5)
    a = c.add_job(dag(("a", 4, 2.0, []), ("b", 2, 1.0, ["a"]), ("c", 3, 1.0, ["a"])), 0.0)
    c.apply(Decision(a.stages[0], 2), 0.0)
    c.add_job(dag(("x", 2, 1.0, []), ("y", 1, 3.0, ["x"])), 0.5)
    c.add_job(dag(("g", 3, 2.0, [], True)), 1.0)
    c.advance(1.0)
    return c


def wait_state() -> Cluster:
    """K=6; job 0 holds its fair share (3 of 6) with tasks left, job 1's only stage idles.

    Both jobs have tasks to launch (n = 2, share 3), the only launchable stage belongs to
    job 0, which holds 3: fair would WAIT here, so WAIT is legal.
    """
    c = Cluster(6)
    a = c.add_job(dag(("a", 6, 2.0, [])), 0.0)
    c.apply(Decision(a.stages[0], 3), 0.0)
    b = c.add_job(dag(("x", 2, 1.0, [])), 0.5)
    c.apply(Decision(b.stages[0], 1, 5.0), 0.5)
    c.advance(1.0)
    return c


def test_heads_respect_every_mask() -> None:
    torch.manual_seed(2)
    obs = compute_features(busy_state())
    with torch.no_grad():
        stage_logp, cap_logp, idle_logp, wait_logp = PolicyNet().run(obs)
    p_stage, p_cap, p_idle = stage_logp.exp(), cap_logp.exp(), idle_logp.exp()
    assert (p_stage[~torch.from_numpy(obs.stage_mask)] == 0).all()
    # job 1 holds nothing (below its share) and may launch, so WAIT is not allowed
    assert obs.wait_mask.tolist() == [False] and wait_logp.exp().item() == 0
    torch.testing.assert_close(p_stage.sum(), torch.tensor(1.0))
    # the cap head only scores levels above what each job holds (job 0 holds 2)
    cap_mask = torch.from_numpy(obs.cap_mask)
    assert cap_mask[0].tolist() == [False, False, True, True, True]
    assert (p_cap[~cap_mask] == 0).all()
    torch.testing.assert_close(p_cap.sum(1), torch.ones(3))
    # idle levels only for the stages that may idle: the first stages of jobs 1 and 2
    assert [obs.stage(r).name for r in obs.idle_rows] == ["x", "g"]
    assert obs.idle_rows.tolist() == np.flatnonzero(obs.idle_mask).tolist()
    assert idle_logp.shape == (2, 5)
    torch.testing.assert_close(p_idle.sum(1), torch.ones(2))


def test_without_idle_head_every_decision_launches() -> None:
    config = ModelConfig(actions=ActionConfig(idle_head=False))
    obs = compute_features(busy_state())
    with torch.no_grad():
        _, _, idle_logp, _ = PolicyNet(config).run(obs)
    assert idle_logp.shape == (len(obs.idle_rows), 1) and not idle_logp.any()
    rng = np.random.default_rng(0)
    for _ in range(20):
        choice = draw(PolicyNet(config), obs, rng)
        assert choice.idle_level == 0


def test_sampled_choices_are_legal_and_their_log_prob_matches() -> None:
    torch.manual_seed(3)
    model = PolicyNet()
    rng = np.random.default_rng(0)
    seen_idle = seen_launch = False
    for _ in range(40):
        c = busy_state()
        obs = compute_features(c)
        choice = draw(model, obs, rng)
        log_prob, entropy = evaluate_batch(model, [obs], [choice])
        outputs = [t.detach().numpy() for t in model.run(obs)]
        assert log_prob.item() == pytest.approx(choice_log_prob(obs, choice, *outputs), abs=1e-5)
        assert entropy.item() >= 0 and log_prob.requires_grad
        decision = decode(obs, choice, model.config.actions)
        assert decision is not WAIT  # not allowed in this state
        c.apply(decision, 1.0)  # raises IllegalDecisionError if the mask let anything slip
        seen_idle |= decision.idle_delay > 0
        seen_launch |= decision.idle_delay == 0
    assert seen_idle and seen_launch
    log_prob.sum().backward()
    assert model.stage_head.out.weight.grad is not None


def test_decode_raises_gang_caps_and_keeps_caps_when_idling() -> None:
    c = busy_state()
    c.advance(1.0)
    obs = compute_features(c)
    gang_row = obs.num_stages - 1
    assert obs.stage(gang_row).gang and obs.stage_mask[gang_row]
    # cap level 1 for a gang of 3 becomes held + tasks = 3
    decision = decode(obs, ActionChoice(gang_row, 0, 0), ActionConfig())
    assert decision.parallelism_cap == 3 and decision.idle_delay == 0
    c.apply(decision, 1.0)
    # idling job 1's first stage (length 1 s) at level 2 of G=4, r=2: 2 · 1 · 2/4 = 1 s
    obs = compute_features(c)
    row = obs.row_of(c.jobs[1].stages[0])
    decision = decode(obs, ActionChoice(row, 2, -1), ActionConfig(idle_ratio=2.0))
    assert decision.idle_delay == pytest.approx(1.0) and decision.parallelism_cap == 0
    assert idle_delay(10.0, 4, ActionConfig(idle_levels=4)) == 10.0


def test_choose_greedy_and_sampled() -> None:
    obs = compute_features(busy_state())
    n = obs.num_stages
    stage_logp = np.full(n, -1e9, dtype=np.float32)
    allowed = np.flatnonzero(obs.stage_mask)
    stage_logp[allowed] = np.log(1 / len(allowed))
    stage_logp[allowed[-1]] += 0.1
    cap_logp = np.where(obs.cap_mask, 0.0, -1e9).astype(np.float32)
    idle_logp = np.zeros((len(obs.idle_rows), 5), dtype=np.float32)
    greedy = choose(obs, stage_logp, cap_logp, idle_logp)
    assert greedy.stage_row == allowed[-1] and greedy.idle_level == 0
    rng = np.random.default_rng(0)
    rows = {
        choose(obs, stage_logp, cap_logp, idle_logp, greedy=False, rng=rng).stage_row
        for _ in range(200)
    }
    assert rows == set(allowed.tolist())  # every allowed stage, nothing else


def test_entropy_of_a_model_that_scores_everything_alike() -> None:
    obs = compute_features(busy_state())
    model = PolicyNet()
    with torch.no_grad():
        for p in model.parameters():
            p.zero_()  # every stage, cap level and idle level scores 0: uniform choices
    k = int(obs.stage_mask.sum())  # WAIT is not allowed here
    row = next(r for r in np.flatnonzero(obs.stage_mask) if idle_slot(obs, r) < 0)
    job = int(obs.stage_job[row])
    caps = int(obs.cap_mask[job].sum())
    cap = int(np.flatnonzero(obs.cap_mask[job])[0])
    log_prob, entropy = evaluate_batch(model, [obs], [ActionChoice(int(row), 0, cap)])
    assert log_prob.item() == pytest.approx(-np.log(k) - np.log(caps), abs=1e-6)
    assert entropy.item() == pytest.approx(np.log(k) + np.log(caps), abs=1e-6)


# ---------------------------------------------------------------------------------------
# full runs: masking keeps every decision legal


@pytest.mark.parametrize("greedy", [False, True])
def test_untrained_torch_policy_runs_a_tpch_like_workload(greedy: bool) -> None:
    torch.manual_seed(4)
    workload = build_workload(
        "tpch-like", seed=2, num_executors=8, init=2, num_stream=8, interarrival=6
    )
    policy = recording(PolicyNet(), greedy=greedy)
    result = simulate(workload, policy, seed=0)
    assert result.unfinished == 0 and len(result.records) == 10
    waits = sum(choice.is_wait for choice in policy.choices)
    assert len(policy.choices) == len(policy.observations) == result.decisions + waits
    if not greedy:
        assert sum(r.idle_inserted for r in result.records) > 0


def test_untrained_torch_policy_runs_gang_stages_and_coarse_caps() -> None:
    torch.manual_seed(5)
    config = ModelConfig(features=FeatureConfig(max_cap_levels=3), mp_steps=3)
    result = simulate(gang_workload(7), recording(PolicyNet(config)), seed=1)
    assert result.unfinished == 0


@pytest.mark.parametrize("idle_head", [True, False])
def test_batched_evaluation_equals_one_at_a_time(idle_head: bool) -> None:
    torch.manual_seed(8)
    model = PolicyNet(ModelConfig(actions=ActionConfig(idle_head=idle_head)))
    steps = []
    for executors, seed in ((8, 1), (5, 2)):  # different K: cap levels of different lengths
        workload = build_workload(
            "tpch-like", seed=seed, num_executors=executors, init=3, num_stream=3, interarrival=4
        )
        policy = recording(model)
        simulate(workload, policy, seed=seed)
        steps += list(zip(policy.observations, policy.choices, strict=True))[::7]
    observations = [obs for obs, _ in steps]  # the stored form, as training keeps them
    choices = [choice for _, choice in steps]
    assert any(c.idle_level > 0 for c in choices) == idle_head
    log_prob, entropy = evaluate_batch(model, observations, choices)
    assert log_prob.shape == entropy.shape == (len(steps),)
    with torch.no_grad():
        for b, (obs, choice) in enumerate(zip(observations, choices, strict=True)):
            outputs = [t.numpy() for t in model.run(obs)]
            want_lp = choice_log_prob(obs, choice, *outputs)
            assert log_prob[b].item() == pytest.approx(want_lp, abs=1e-5)
            want_h = reference_entropy(obs, choice, outputs)
            assert entropy[b].item() == pytest.approx(want_h, abs=1e-5)
    (-log_prob.mean() - 0.01 * entropy.mean()).backward()
    assert all(p.grad is not None for p in model.stage_head.parameters())
    batch = batch_observations(observations[:2])
    assert batch.graphs.count == 2 and batch.inputs[0].shape[0] == sum(
        o.num_stages for o in observations[:2]
    )


# ---------------------------------------------------------------------------------------
# checkpoints


def test_checkpoint_round_trip(tmp_path) -> None:
    torch.manual_seed(6)
    config = ModelConfig(embed_dim=8, actions=ActionConfig(idle_levels=3, idle_ratio=0.5))
    model = PolicyNet(config)
    path = save_checkpoint(model, tmp_path / "ck" / "policy.pt", training_config={"lr": 1e-3})
    ckpt = load_checkpoint(path)
    assert ckpt["feature_schema_version"] == FEATURE_SCHEMA_VERSION
    assert ckpt["training_config"] == {"lr": 1e-3}
    again = model_from_checkpoint(ckpt)
    assert again.config == config and again.config.config_hash() == config.config_hash()
    obs = Featurizer(config.features)(busy_state())
    with torch.no_grad():
        for a, b in zip(model.run(obs), again.run(obs), strict=True):
            torch.testing.assert_close(a, b)


def test_bad_checkpoints_are_user_errors(tmp_path) -> None:
    with pytest.raises(IdlegateError, match="does not exist"):
        load_checkpoint(tmp_path / "missing.pt")
    junk = tmp_path / "junk.pt"
    junk.write_text("not a checkpoint")
    with pytest.raises(IdlegateError, match="is not a checkpoint"):
        load_checkpoint(junk)
    old = checkpoint_dict(PolicyNet())
    old["feature_schema_version"] = FEATURE_SCHEMA_VERSION + 100
    torch.save(old, tmp_path / "old.pt")
    with pytest.raises(IdlegateError, match="feature schema"):
        load_checkpoint(tmp_path / "old.pt")
    with pytest.raises(IdlegateError, match="the model: depth: is not a known setting; it takes "):
        ModelConfig.of({"depth": 3})
    with pytest.raises(IdlegateError):
        ModelConfig(embed_dim=0)


# ---------------------------------------------------------------------------------------
# the WAIT action


def test_wait_is_allowed_only_where_fair_would_wait() -> None:
    c = Cluster(4)
    c.add_job(dag(("a", 2, 1.0, [])), 0.0)
    assert compute_features(c).wait_mask.tolist() == [False]  # every executor free
    assert compute_features(busy_state()).wait_mask.tolist() == [False]  # a job below share
    obs = compute_features(wait_state())
    assert obs.wait_mask.tolist() == [True]
    torch.manual_seed(0)
    with torch.no_grad():
        stage_logp, _, _, wait_logp = PolicyNet().run(obs)
    assert 0 < wait_logp.exp().item() < 1
    torch.testing.assert_close(stage_logp.exp().sum() + wait_logp.exp()[0], torch.tensor(1.0))
    # with WAIT allowed, sampled decisions include WAIT, launches and nothing illegal
    rng = np.random.default_rng(0)
    model, kinds = PolicyNet(), set()
    for _ in range(60):
        state = wait_state()
        obs = compute_features(state)
        decision = decode(obs, draw(model, obs, rng), model.config.actions)
        if decision is WAIT:
            kinds.add("wait")
        else:
            state.apply(decision, 1.0)
            kinds.add("launch")
    assert kinds == {"wait", "launch"}


def test_wait_choice_decodes_to_wait_and_its_log_prob_is_the_wait_entry() -> None:
    obs = compute_features(wait_state())
    stage_logp = np.where(obs.stage_mask, np.log(0.1), -1e9).astype(np.float32)
    wait_logp = np.array([np.log(0.9)], dtype=np.float32)
    cap_logp = np.where(obs.cap_mask, 0.0, -1e9).astype(np.float32)
    idle_logp = np.zeros((len(obs.idle_rows), 5), dtype=np.float32)
    choice = choose(obs, stage_logp, cap_logp, idle_logp, wait_logp)
    assert choice == WAIT_CHOICE and choice.is_wait
    assert decode(obs, choice, ActionConfig()) is WAIT
    assert choice_log_prob(obs, choice, stage_logp, cap_logp, idle_logp, wait_logp) == (
        pytest.approx(np.log(0.9))
    )
    # without wait_logp (a model without WAIT), the best stage is chosen
    assert not choose(obs, stage_logp, cap_logp, idle_logp).is_wait


def test_without_the_wait_action_the_policy_never_waits() -> None:
    torch.manual_seed(1)
    model = PolicyNet(ModelConfig(actions=ActionConfig(wait_action=False)))
    with torch.no_grad():
        model.wait_head.out.bias.fill_(50.0)  # WAIT would win every draw if it were allowed
    obs = compute_features(wait_state())
    with torch.no_grad():
        _, _, _, wait_logp = model.run(obs)
    assert wait_logp.exp().item() == 0.0
    rng = np.random.default_rng(0)
    assert not any(draw(model, obs, rng).is_wait for _ in range(30))


def test_a_policy_that_always_waits_still_finishes_every_job() -> None:
    # WAIT is only offered while every launchable job holds its share: jobs still progress
    torch.manual_seed(2)
    model = PolicyNet()
    with torch.no_grad():
        model.wait_head.out.bias.fill_(50.0)
    workload = build_workload("tpch-like", seed=3, num_executors=6, init=2, num_stream=4)
    policy = recording(model, greedy=True)
    result = simulate(workload, policy, seed=0)
    assert result.unfinished == 0
    assert sum(choice.is_wait for choice in policy.choices) > 0
