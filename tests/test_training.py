"""Training: known answers for the RL arithmetic, determinism, masking, BC and a learning test."""

from __future__ import annotations

import csv
import math
import pickle
import statistics
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from idlegate.errors import IdlegateError  # noqa: E402
from idlegate.policy.actions import ActionChoice, ActionConfig  # noqa: E402
from idlegate.policy.columns import FeatureConfig  # noqa: E402
from idlegate.policy.heuristics import make_scheduler  # noqa: E402
from idlegate.policy.model import PolicyNet, load_checkpoint  # noqa: E402
from idlegate.policy.model_config import ModelConfig  # noqa: E402
from idlegate.sim.dag import Dag  # noqa: E402
from idlegate.sim.engine import JobArrival, Workload, simulate  # noqa: E402
from idlegate.sim.spec import parse_workflow  # noqa: E402
from idlegate.sim.workloads import build_workload  # noqa: E402
from idlegate.training import math as rl  # noqa: E402
from idlegate.training.bc import (  # noqa: E402
    Imitator,
    behaviour_cloning,
    merge_demonstrations,
    record_demonstrations,
)
from idlegate.training.config import (  # noqa: E402
    PRESETS,
    TrainConfig,
    load_config,
)
from idlegate.training.reinforce import train  # noqa: E402
from idlegate.training.rollout import (  # noqa: E402
    PackedObservations,
    RecordingPolicy,
    evaluate_episode,
    export_onnx_bytes,
    onnx_evaluator,
    run_rollout,
    torch_evaluator,
)
from tests.helpers import chain, jcts, tiny_train_config, workload  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_torch_thread")


# ---------------------------------------------------------------------------------------
# the arithmetic: known answers


def test_rewards_are_minus_the_integral_increments():
    # jobs-in-system integral at three decisions, then at the end of the episode
    r = rl.rewards_from_integrals(np.array([0.0, 4.0, 4.0, 10.0]), 25.0)
    np.testing.assert_allclose(r, [-4.0, 0.0, -6.0, -15.0])
    assert r.sum() == -25.0  # the whole episode's job-seconds
    np.testing.assert_allclose(rl.rewards_from_integrals(np.array([2.0]), 12.0, scale=5), [-2.0])


def test_returns_to_go_known_answers():
    np.testing.assert_allclose(rl.returns_to_go(np.array([-1.0, -2.0, -3.0])), [-6, -5, -3])
    # γ = 0.5: R2 = 4, R1 = 2 + 2 = 4, R0 = 1 + 2 = 3
    np.testing.assert_allclose(rl.returns_to_go(np.array([1.0, 2.0, 4.0]), 0.5), [3, 4, 4])
    assert rl.returns_to_go(np.zeros(0)).size == 0


def test_step_and_linear_interpolation():
    t = np.array([0.0, 10.0, 10.0, 20.0])
    r = np.array([-30.0, -20.0, -15.0, -5.0])
    q = np.array([-1.0, 0.0, 5.0, 10.0, 15.0, 20.0, 99.0])
    # step: the last decision at or before t (the last of tied ones)
    np.testing.assert_allclose(
        rl.interpolate_returns(t, r, q, "step"), [-30, -30, -30, -15, -15, -5, -5]
    )
    # linear (Decima's code): first of tied points at a tie, linear in between
    np.testing.assert_allclose(
        rl.interpolate_returns(t, r, q, "linear"), [-30, -30, -25, -20, -10, -5, -5]
    )


def test_time_baseline_on_hand_made_rollouts():
    # rollout A: decisions at 0, 10 with returns -10, -4, ends at 20
    # rollout B: decisions at 0, 5, 15 with returns -20, -12, -2, ends at 30
    times = [np.array([0.0, 10.0]), np.array([0.0, 5.0, 15.0])]
    returns = [np.array([-10.0, -4.0]), np.array([-20.0, -12.0, -2.0])]
    b = rl.time_baselines(times, returns, end_times=[20.0, 30.0], kind="step")
    # at t=0: (-10 + -20)/2; at t=10: A -4, B (last decision 5) -12
    np.testing.assert_allclose(b[0], [-15.0, -8.0])
    # B at 0, 5, 15: A reads -10, -10, -4 (its decision at 10); B its own values
    np.testing.assert_allclose(b[1], [-15.0, -11.0, -3.0])
    # after A's end (t=20) A contributes 0: query B's curve at 25 via a third rollout
    b3 = rl.time_baselines(
        [*times, np.array([25.0])], [*returns, np.array([-1.0])], [20.0, 30.0, 26.0]
    )
    np.testing.assert_allclose(b3[2], [(0.0 - 2.0 - 1.0) / 3])


def test_identical_rollouts_have_zero_advantage_and_better_ones_positive():
    t = np.array([0.0, 1.0, 2.0])
    same = rl.time_baselines([t, t], [np.array([-3.0, -2, -1])] * 2, [3.0, 3.0])
    adv = rl.advantages([np.array([-3.0, -2, -1])] * 2, same)
    assert all(np.all(a == 0) for a in adv)
    good, bad = np.array([-1.0, -0.5, -0.2]), np.array([-5.0, -3.0, -1.0])
    base = rl.time_baselines([t, t], [good, bad], [3.0, 3.0])
    a_good, a_bad = rl.advantages([good, bad], base, normalize=True)
    assert np.all(a_good > 0) and np.all(a_bad < 0)
    np.testing.assert_allclose(np.concatenate([a_good, a_bad]).std(), 1.0, rtol=1e-6)


def test_policy_gradient_loss_and_its_gradient_direction():
    logits = torch.zeros(3, requires_grad=True)
    logp = torch.log_softmax(logits, 0)
    adv = torch.tensor([2.0, 0.0, -1.0])
    ent = torch.tensor([0.5, 0.5, 0.5])
    loss = rl.policy_gradient_loss(logp, adv, ent, entropy_weight=0.1)
    # −(2·log⅓ − log⅓)/3 − 0.1·1.5/3
    assert loss.item() == pytest.approx(-(math.log(1 / 3)) / 3 - 0.05, rel=1e-6)
    loss.backward()
    # gradient descent raises the logit of the positive-advantage action most
    step = -logits.grad
    assert step[0] > step[1] > step[2]
    # chunks with a shared count add up to the whole
    whole = rl.policy_gradient_loss(logp.detach(), adv, ent, 0.1)
    parts = rl.policy_gradient_loss(logp.detach()[:2], adv[:2], ent[:2], 0.1, count=3)
    parts = parts + rl.policy_gradient_loss(logp.detach()[2:], adv[2:], ent[2:], 0.1, count=3)
    assert parts.item() == pytest.approx(whole.item())


def test_schedules():
    assert rl.entropy_weight_at(0, 0.1, 0.01, 0.02) == 0.1
    assert rl.entropy_weight_at(5, 0.1, 0.01, 0.02) == pytest.approx(0.05)
    assert rl.entropy_weight_at(50, 0.1, 0.01, 0.02) == 0.02
    assert rl.curriculum_mean(0, 100, 10, 150) == 100
    assert rl.curriculum_mean(3, 100, 10, 150) == 130
    assert rl.curriculum_mean(30, 100, 10, 150) == 150


def test_rollout_rewards_sum_to_the_jobs_time_integral():
    wl = build_workload("synthetic", seed=3, num_executors=2, num_jobs=15)
    model = PolicyNet(ModelConfig(actions=ActionConfig(idle_head=False)))
    cfg = model.config
    policy = RecordingPolicy(torch_evaluator(model), cfg.features, cfg.actions)
    full = run_rollout(policy, wl, seed=3, arrival_seed=3)
    rewards = rl.rewards_from_integrals(full.integrals, full.end_integral)
    assert full.jobs_done == full.jobs_total == 15
    # Σ r = −∫ jobs dt from the first decision (t=0, first arrival) = −Σ JCT
    assert -rewards.sum() == pytest.approx(full.jct_sum)
    cut = run_rollout(policy, wl, seed=3, arrival_seed=3, max_time=100.0)
    assert cut.end_time == 100.0 and cut.times.max() <= 100.0
    # same seed: the cut episode is a prefix of the full one
    np.testing.assert_array_equal(cut.choices, full.choices[: cut.decisions])


# ---------------------------------------------------------------------------------------
# config


def test_presets_validate(tmp_path):
    from idlegate.policy import make_scheduler
    from idlegate.sim.history import simulate_history, write_history
    from idlegate.sim.workloads import build_workload
    from idlegate.training.history import history_settings, history_source

    w = build_workload("k8s-batch", 0, num_jobs=20)
    path = write_history(
        tmp_path / "h.jsonl", simulate_history(w, make_scheduler("fair"), 0, "fair")
    )
    for name in PRESETS:
        # the cluster preset trains on a history, which it must be given
        extra = history_settings(history_source(path)) if name == "cluster" else {}
        cfg = load_config(preset=name, **extra)
        assert cfg.preset == name
        assert cfg.model.actions.idle_head
        assert not set(cfg.validation.seeds) & {0}


def test_the_model_section_is_the_model_config():
    cfg = TrainConfig.of(
        {"model": {"actions": {"wait_action": False}, "features": {"load_clip": 2}}}
    )
    assert cfg.model == ModelConfig(
        actions=ActionConfig(wait_action=False), features=FeatureConfig(load_clip=2.0)
    )


def test_the_shipped_configs_load():
    configs = sorted(
        (Path(__file__).parents[1] / "src" / "idlegate" / "training" / "configs").glob("*.yaml")
    )
    assert len(configs) >= 5
    for path in configs:
        cfg = load_config(path)
        assert cfg.out_dir and cfg.out_dir.startswith("out/"), path
        if "-no-" in path.stem:  # an ablation turns one part off
            assert not (cfg.model.actions.idle_head and cfg.model.features.cp_features), path


def test_the_policy_iteration_config_distils_the_planner_over_the_default():
    cfg = load_config(
        Path(__file__).parents[1]
        / "src"
        / "idlegate"
        / "training"
        / "configs"
        / "default-round2.yaml"
    )
    assert cfg.preset == "default" and cfg.iterations == 0
    assert cfg.bc.heuristic == "lookahead:learned:default"
    assert cfg.bc.dagger_rounds == 2 and len(cfg.training_workloads) == 6


def test_yaml_config_merges_over_the_preset(tmp_path):
    p = tmp_path / "c.yaml"
    p.write_text("preset: quick\niterations: 7\ncurriculum: {initial_mean_seconds: 50}\n")
    cfg = load_config(p, workers=1)
    assert cfg.iterations == 7 and cfg.workers == 1
    assert cfg.curriculum.initial_mean_seconds == 50
    assert cfg.curriculum.increment_seconds == PRESETS["quick"]["curriculum"]["increment_seconds"]


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("iterashuns: 3\n", "iterashuns: is not a known setting"),
        ("lr: -1\n", "lr: Input should be greater than 0"),
        ("workload: {name: synthetic, options: {bogus: 1}}\n", "has no option 'bogus'"),
        ("bc: {heuristic: random}\n", "BC teacher"),
        ("- a list\n", "must hold a mapping"),
        ("preset: huge\n", "unknown preset 'huge'"),
        ("model: {actions: {idle_levels: 0}}\n", "model.actions.idle_levels"),
    ],
)
def test_bad_configs_are_clear_user_errors(tmp_path, text, needle):
    p = tmp_path / "bad.yaml"
    p.write_text(text)
    with pytest.raises(IdlegateError, match=None) as err:
        load_config(p)
    assert needle in str(err.value)


# ---------------------------------------------------------------------------------------
# masking: sampled rollouts never make an illegal decision


def _gang_workload(seed: int) -> Workload:
    rng = np.random.default_rng(seed)
    jobs = []
    t = 0.0
    for i in range(12):
        stages = [
            {"name": "a", "tasks": int(rng.integers(1, 4)), "taskDurationSeconds": 2.0},
            {"name": "g", "tasks": int(rng.integers(1, 4)), "taskDurationSeconds": 3.0,
             "gang": True, "dependsOn": ["a"]},
            {"name": "b", "tasks": int(rng.integers(1, 6)), "taskDurationSeconds": 1.0},
            {"name": "c", "tasks": 2, "taskDurationSeconds": 4.0, "gang": bool(i % 2),
             "dependsOn": ["g", "b"]},
        ]  # fmt: skip
        jobs.append(JobArrival(t, f"j{i}", Dag.from_spec(parse_workflow({"stages": stages}))))
        t += float(rng.exponential(4.0))
    return Workload("gang", tuple(jobs), 4)


@pytest.mark.parametrize("idle_head", [True, False])
def test_sampled_rollouts_only_make_legal_decisions(idle_head):
    cfg = ModelConfig(actions=ActionConfig(idle_head=idle_head, idle_levels=3))
    checked = idle = 0
    for seed in range(12):
        torch.manual_seed(seed)
        model = PolicyNet(cfg)
        with torch.no_grad():  # sharpen the random policy so it explores extreme choices
            for p in model.parameters():
                p.mul_(4.0)
        onnx = bool(seed % 2)
        evaluator = onnx_evaluator(export_onnx_bytes(model)) if onnx else torch_evaluator(model)
        wl = _gang_workload(seed) if seed % 3 else build_workload("tpch-like", seed, num_jobs=6)
        policy = RecordingPolicy(evaluator, cfg.features, cfg.actions)
        # simulate raises IllegalDecisionError on any illegal decision
        ro = run_rollout(policy, wl, seed=seed, arrival_seed=seed)
        assert ro.jobs_done == ro.jobs_total
        for obs, (row, level, cap) in zip(ro.observations, ro.choice_list(), strict=True):
            if row < 0:  # WAIT: only while some executor is busy
                assert obs.wait_mask[0] and level == 0 and cap == -1
                checked += 1
                continue
            assert obs.stage_mask[row]
            if level > 0:
                assert idle_head and row in obs.idle_rows.tolist() and cap == -1
            else:
                assert obs.cap_mask[obs.stage_job[row], cap]
            checked += 1
            idle += level > 0
    assert checked > 300
    assert (idle > 0) == idle_head


# ---------------------------------------------------------------------------------------
# behaviour cloning


def test_bc_reaches_high_imitation_accuracy():
    cfg = ModelConfig()
    parts = [
        record_demonstrations(
            build_workload("synthetic", s, num_executors=2, num_jobs=40, tasks_per_job=2),
            s,
            heuristic="sjf-cp",
            model_config=cfg.model_dump(),
        )
        for s in range(6)
    ]
    demos = merge_demonstrations(parts)
    torch.manual_seed(0)
    model = PolicyNet(cfg)
    report = behaviour_cloning(
        model, demos, epochs=25, batch_size=64, lr=1e-2, rng=np.random.default_rng(0)
    )
    assert report.samples == len(demos.choices) > 200
    assert report.losses[-1] < report.losses[0]
    assert report.accuracy >= 0.9, report


def test_a_teachers_waits_become_wait_choices_only_where_wait_is_legal():
    # fair holds executors back once every job has its share: those answers are WAITs
    workload = build_workload("tpch-like", 1, num_executors=10, init=4, num_stream=6)
    demos = record_demonstrations(
        workload, 1, heuristic="fair", model_config=ModelConfig().model_dump()
    )
    waits = [(o, c) for o, c in zip(demos.observations, demos.choices, strict=True) if c.is_wait]
    assert waits and len(waits) < len(demos.choices)
    assert all(o.wait_mask[0] for o, _ in waits)
    no_wait = ModelConfig(actions=ActionConfig(wait_action=False)).model_dump()
    launches_only = record_demonstrations(workload, 1, heuristic="fair", model_config=no_wait)
    assert not any(c.is_wait for c in launches_only.choices)
    assert len(launches_only.choices) == len(demos.choices) - len(waits)


def _last_stage_first(obs) -> ActionChoice:
    """A stub actor: the last launchable stage row, at its job's lowest legal cap."""
    row = int(np.flatnonzero(obs.stage_mask)[-1])
    return ActionChoice(row, 0, int(np.flatnonzero(obs.cap_mask[obs.stage_job[row]])[0]))


def test_dagger_carries_out_the_actors_choices_and_records_the_teachers():
    # one executor, A (10 s) and B (5 s) at t = 0: FIFO would run A first; the actor runs
    # B first, and both recorded labels still name A, the teacher's pick in each state
    cfg = ModelConfig()
    imitator = Imitator(make_scheduler("fifo"), cfg.features, cfg.actions, _last_stage_first)
    wl = workload((0.0, "A", chain(10)), (0.0, "B", chain(5)))
    assert jcts(simulate(wl, imitator, seed=0)) == {"A": 15.0, "B": 5.0}
    assert [o.num_jobs for o in imitator.observations] == [2, 1]
    assert [
        int(o.stage_job[c.stage_row])
        for o, c in zip(imitator.observations, imitator.choices, strict=True)
    ] == [0, 0]


def test_dagger_episodes_follow_the_exported_policy():
    torch.manual_seed(3)
    model = PolicyNet(ModelConfig())
    wl = build_workload("tpch-like", 2, num_executors=10, init=3, num_stream=5)
    onnx = export_onnx_bytes(model)
    visited = record_demonstrations(
        wl, 2, heuristic="fair", model_config=model.config.model_dump(), actor_onnx=onnx
    )
    cfg = model.config
    greedy = RecordingPolicy(onnx_evaluator(onnx), cfg.features, cfg.actions, greedy=True)
    own = evaluate_episode(greedy, wl, 2, "learned")
    assert visited.avg_jct == pytest.approx(own.avg_jct)  # the policy's run, not fair's
    taught = record_demonstrations(wl, 2, heuristic="fair", model_config=cfg.model_dump())
    assert visited.avg_jct != pytest.approx(taught.avg_jct)
    assert len(visited.choices) == len(visited.observations) > 0


# ---------------------------------------------------------------------------------------
# the training loop


def _trace(out: Path) -> list[dict[str, str]]:
    with (out / "train_log.csv").open() as f:
        rows = list(csv.DictReader(f))
    drop = ("wall_seconds", "rollout_seconds", "update_seconds")
    return [{k: v for k, v in r.items() if k not in drop} for r in rows]


def _weights(path: Path) -> dict[str, torch.Tensor]:
    return load_checkpoint(path)["state_dict"]


def test_same_seed_same_trace_with_one_or_two_workers(tmp_path):
    one = train(tiny_train_config(tmp_path / "w1"), show_progress=False)
    two = train(tiny_train_config(tmp_path / "w2", workers=2), show_progress=False)
    assert _trace(tmp_path / "w1") == _trace(tmp_path / "w2")
    assert len(_trace(tmp_path / "w1")) == 3  # iteration 0 (after BC), 1, 2
    a, b = _weights(tmp_path / "w1" / "final.pt"), _weights(tmp_path / "w2" / "final.pt")
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert one.reference_jct == two.reference_jct
    assert one.best_val_jct <= one.initial_val_jct
    assert (tmp_path / "w1" / "policy.onnx").is_file()


def test_resume_continues_the_same_trace(tmp_path):
    train(
        tiny_train_config(tmp_path / "straight", iterations=3, bc={"enabled": False}),
        show_progress=False,
    )
    train(
        tiny_train_config(tmp_path / "split", iterations=2, bc={"enabled": False}),
        show_progress=False,
    )
    with pytest.raises(IdlegateError, match="already holds a training run"):
        train(tiny_train_config(tmp_path / "split", iterations=3), show_progress=False)
    with pytest.raises(IdlegateError, match=r"config differs .* in lr"):
        train(
            tiny_train_config(
                tmp_path / "split", iterations=3, lr=0.5, resume=True, bc={"enabled": False}
            ),
            show_progress=False,
        )
    train(
        tiny_train_config(tmp_path / "split", iterations=3, resume=True, bc={"enabled": False}),
        show_progress=False,
    )
    assert _trace(tmp_path / "straight") == _trace(tmp_path / "split")
    a = _weights(tmp_path / "straight" / "checkpoint.pt")
    b = _weights(tmp_path / "split" / "checkpoint.pt")
    assert all(torch.equal(a[k], b[k]) for k in a)


def test_resume_accepts_a_checkpoint_written_before_a_setting_existed(tmp_path):
    train(
        tiny_train_config(tmp_path / "old", iterations=1, bc={"enabled": False}),
        show_progress=False,
    )
    path = tmp_path / "old" / "checkpoint.pt"
    ckpt = torch.load(path, weights_only=False)
    del ckpt["training_config"]["model"]["features"]["load_clip"]  # as if written before load_clip
    torch.save(ckpt, path)
    resumed = tiny_train_config(tmp_path / "old", iterations=2, resume=True, bc={"enabled": False})
    train(resumed, show_progress=False)
    assert [r["iteration"] for r in _trace(tmp_path / "old")] == ["0", "1", "2"]
    ckpt["training_config"]["model"]["features"]["load_clip"] = (
        9.0  # a non-default value still differs
    )
    torch.save(ckpt, path)
    with pytest.raises(IdlegateError, match=r"config differs .* in model"):
        train(
            tiny_train_config(tmp_path / "old", iterations=3, resume=True, bc={"enabled": False}),
            show_progress=False,
        )


def test_dagger_rounds_add_the_policys_states_to_the_demonstrations(tmp_path):
    plain = train(tiny_train_config(tmp_path / "bc", iterations=0), show_progress=False)
    dagger = tiny_train_config(
        tmp_path / "dagger", iterations=0, bc={"episodes": 2, "epochs": 1, "dagger_rounds": 2}
    )
    more = train(dagger, show_progress=True)  # the fits report per epoch
    assert plain.bc is not None and more.bc is not None
    assert more.bc["samples"] > 2 * plain.bc["samples"]  # two rounds of about as many
    assert more.bc["teacher_avg_jct"] == plain.bc["teacher_avg_jct"]


def test_init_checkpoint_starts_from_those_weights_without_bc(tmp_path):
    first = train(tiny_train_config(tmp_path / "bc", iterations=0), show_progress=False)
    bc_weights = _weights(tmp_path / "bc" / "bc.pt")
    tuned = train(
        tiny_train_config(
            tmp_path / "tuned", iterations=0, init_checkpoint=str(tmp_path / "bc" / "bc.pt")
        ),
        show_progress=False,
    )
    assert not (tmp_path / "tuned" / "bc.pt").exists()  # no warm start of its own
    assert tuned.initial_val_jct == first.initial_val_jct
    got = _weights(tmp_path / "tuned" / "final.pt")
    assert all(torch.equal(got[k], bc_weights[k]) for k in bc_weights)
    with pytest.raises(IdlegateError, match=r"other model settings .*embed_dim"):
        train(
            tiny_train_config(
                tmp_path / "other",
                iterations=0,
                model={"embed_dim": 4},
                init_checkpoint=str(tmp_path / "bc" / "bc.pt"),
            ),
            show_progress=False,
        )


def _avg_jct(scheduler, options: dict, seeds) -> float:
    out = []
    for s in seeds:
        res = simulate(build_workload("synthetic", s, **options), scheduler, seed=s)
        out.append(statistics.fmean(r.jct for r in res.records))
    return statistics.fmean(out)


def test_learning_beats_random_on_a_learnable_workload(tmp_path):
    """One executor, short (10 s) and long (50 s) one-task jobs: shortest-first is learnable."""
    options = {"num_executors": 1, "num_jobs": 30, "load": 0.9}
    cfg = TrainConfig.of(
        {
            "seed": 4,  # its initial greedy policy is longest-job-first-like (worse than random)
            "workload": {"name": "synthetic", "options": options},
            "validation": {
                "seeds": [1_000_000, 1_000_001],
                "every": 100,
                "reference_schedulers": [],
            },
            "model": {"actions": {"idle_head": False}},
            "iterations": 40,
            "rollouts_per_sequence": 6,
            "workers": 1,
            "lr": 0.01,
            "curriculum": {"enabled": False},
            "entropy": {"weight": 0.01, "decay": 0.0, "minimum": 0.0},
            "bc": {"enabled": False},
            "out_dir": str(tmp_path / "learn"),
        }
    )
    result = train(cfg, show_progress=False)
    assert result.final_val_jct < 0.8 * result.initial_val_jct
    from idlegate.policy.model import model_from_checkpoint

    model = model_from_checkpoint(load_checkpoint(tmp_path / "learn" / "final.pt"))
    seeds = range(2_000_000, 2_000_008)
    features, actions = model.config.features, model.config.actions
    greedy = RecordingPolicy(torch_evaluator(model), features, actions, greedy=True, record=False)
    learned = _avg_jct(greedy, options, seeds)
    rand = _avg_jct(make_scheduler("random"), options, seeds)
    sjf = _avg_jct(make_scheduler("sjf"), options, seeds)
    print(f"learned {learned:.1f}, random {rand:.1f}, sjf {sjf:.1f}")
    assert learned < 0.95 * rand, (learned, rand, sjf)


def test_packed_observations_round_trip_through_pickle():
    wl = build_workload("tpch-like", seed=2, num_jobs=4, num_executors=5)
    cfg = ModelConfig()
    policy = RecordingPolicy(torch_evaluator(PolicyNet(cfg)), cfg.features, cfg.actions)
    ro = run_rollout(policy, wl, seed=2, arrival_seed=2, max_time=60.0)
    assert ro.decisions > 10
    back = pickle.loads(pickle.dumps(ro))
    for a, b in zip(policy.observations, back.observations, strict=True):
        assert a.num_jobs == b.num_jobs and a.num_stages == b.num_stages
        for name, value in {**a.inputs(), **a.as_arrays()}.items():
            np.testing.assert_array_equal(value, getattr(b, name))
            assert value.dtype == getattr(b, name).dtype
    empty = PackedObservations([])
    assert len(empty) == 0 and empty.unpack() == []


def test_a_new_workload_replaces_the_presets_and_its_validation_workload(tmp_path):
    p = tmp_path / "c.yaml"
    p.write_text("workload: {name: synthetic, options: {num_jobs: 12}}\n")
    cfg = load_config(p, "quick")
    assert cfg.workload.options == {"num_jobs": 12}
    assert cfg.validation.workload is None and cfg.validation_workload == cfg.workload
