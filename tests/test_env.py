"""The Gymnasium environment: API conformance, seeding, masks, and agreement with simulate."""

from __future__ import annotations

import dataclasses
import math
import subprocess
import sys
import types
import warnings

import numpy as np
import pytest

gymnasium = pytest.importorskip("gymnasium", reason="the environment needs the train extra")

from gymnasium.utils.env_checker import check_env  # noqa: E402

from idlegate.errors import IdlegateError  # noqa: E402
from idlegate.policy import DEFAULT_POLICY_PATH, make_scheduler  # noqa: E402
from idlegate.policy.actions import choose  # noqa: E402
from idlegate.policy.onnx_runtime import OnnxPolicy  # noqa: E402
from idlegate.sim.engine import simulate  # noqa: E402
from idlegate.sim.metrics import run_metrics  # noqa: E402
from idlegate.sim.workloads import build_workload  # noqa: E402
from idlegate.training.env import ENV_ID, DagSchedulingEnv, EnvConfig  # noqa: E402
from idlegate.training.env_spaces import (  # noqa: E402
    choice_to_action,
    model_inputs,
    sample_legal_action,
)

SMALL = {"num_stream": 10, "num_executors": 5}
"""A small TPC-H-like workload: 11 jobs on 5 executors (a few hundred decisions)."""


def small_env(**options) -> DagSchedulingEnv:
    return DagSchedulingEnv(workload="tpch-like", workload_options=SMALL, **options)


def run_random(env, seed: int, agent_seed: int = 0, **reset_options):
    """A random agent acting within the masks: every step's (obs, reward, info), to the end."""
    obs, info = env.reset(seed=seed, **reset_options)
    rng = np.random.default_rng(agent_seed)
    steps = [(obs, 0.0, info)]
    while True:
        obs, reward, terminated, truncated, info = env.step(
            sample_legal_action(obs, env.action_space, rng)
        )
        steps.append((obs, reward, info))
        if terminated or truncated:
            return steps, terminated, truncated


def test_make_registers_the_id_and_the_env_checker_passes():
    env = gymnasium.make(ENV_ID, workload="tpch-like", workload_options=SMALL)
    assert isinstance(env.unwrapped, DagSchedulingEnv)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the checker reports problems as warnings
        check_env(env.unwrapped)
    env.close()


def test_importing_idlegate_loads_neither_gymnasium_nor_torch_and_the_env_no_torch():
    code = (
        "import sys, idlegate, idlegate.sim.engine, idlegate.policy\n"
        "before = {m.split('.')[0] for m in sys.modules}\n"
        "import idlegate.training.env\n"
        "after = {m.split('.')[0] for m in sys.modules}\n"
        "print(sorted(before & {'gymnasium', 'torch'}), sorted(after & {'torch'}))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["[]", "[]"]


def test_the_same_seed_gives_the_same_episode_and_another_seed_another():
    a, _, _ = run_random(small_env(), seed=3)
    b, _, _ = run_random(small_env(), seed=3)
    assert len(a) == len(b)
    for (obs_a, r_a, info_a), (obs_b, r_b, info_b) in zip(a, b, strict=True):
        assert r_a == r_b and info_a["time"] == info_b["time"]
        for key in obs_a:
            np.testing.assert_array_equal(obs_a[key], obs_b[key])
    c, _, _ = run_random(small_env(), seed=4)
    assert c[0][2]["workload_seed"] != a[0][2]["workload_seed"]
    assert [s[1] for s in c] != [s[1] for s in a]


def test_a_random_agent_with_the_masks_finishes_and_its_return_is_minus_the_jct_sum():
    env = small_env()
    steps, terminated, truncated = run_random(env, seed=0)
    assert terminated and not truncated
    final = steps[-1][2]
    assert final["jobs_done"] == final["jobs_total"] == 11 and final["unfinished"] == 0
    assert not any(info.get("repaired") for _, _, info in steps)
    for obs, _, _ in steps:
        assert env.observation_space.contains(obs)
    # the first decision is at the first arrival (t=0), so the return is −Σ JCT
    jct_sum = final["metrics"].avg_jct * final["jobs_done"]
    assert -sum(r for _, r, _ in steps) == pytest.approx(jct_sum, rel=1e-12)
    assert not steps[-1][0]["stage_mask"].any() and not steps[-1][0]["wait_mask"].any()


WORKLOAD_SEED, SIM_SEED = 5, 9


def run_shipped_policy() -> tuple[list[float], dict]:
    """The shipped policy, greedy, through the env on the small workload: rewards, last info.

    It acts on the padded observation alone (`model_inputs` unpads it for the model).
    """
    policy = OnnxPolicy(DEFAULT_POLICY_PATH)
    env = small_env(features=policy.feature_config, actions=policy.action_config)
    obs, _ = env.reset(options={"workload_seed": WORKLOAD_SEED, "sim_seed": SIM_SEED})
    rewards = []
    while True:
        view = types.SimpleNamespace(**model_inputs(obs))
        choice = choose(view, *policy.evaluate(view), greedy=True)
        obs, reward, terminated, truncated, info = env.step(
            choice_to_action(choice, env.config.max_stages)
        )
        assert not info["repaired"]
        rewards.append(reward)
        if terminated or truncated:
            assert terminated
            return rewards, info


def test_the_shipped_policy_through_the_env_scores_what_simulate_reports():
    _, info = run_shipped_policy()
    workload = build_workload("tpch-like", WORKLOAD_SEED, **SMALL)
    result = simulate(workload, make_scheduler(f"learned:{DEFAULT_POLICY_PATH}"), SIM_SEED)
    expected = run_metrics(result)
    assert info["avg_jct"] == expected.avg_jct  # exactly: it is the same run
    assert info["metrics"] == dataclasses.replace(expected, scheduler="gym-agent")


def test_the_env_rewards_are_the_trainers_rollout_rewards():
    from idlegate.training.math import rewards_from_integrals
    from idlegate.training.rollout import RecordingPolicy, onnx_evaluator, run_rollout

    rewards, _ = run_shipped_policy()
    policy = OnnxPolicy(DEFAULT_POLICY_PATH)
    recorder = RecordingPolicy(
        onnx_evaluator(DEFAULT_POLICY_PATH.read_bytes()),
        policy.feature_config,
        policy.action_config,
        greedy=True,
    )
    workload = build_workload("tpch-like", WORKLOAD_SEED, **SMALL)
    rollout = run_rollout(recorder, workload, seed=SIM_SEED, arrival_seed=WORKLOAD_SEED)
    trainer = rewards_from_integrals(rollout.integrals, rollout.end_integral)
    assert rewards == trainer.tolist()


def test_max_time_and_the_memoryless_end_truncate_at_their_time():
    env = small_env(max_time=25.0)
    steps, terminated, truncated = run_random(env, seed=1)
    final = steps[-1][2]
    assert truncated and not terminated
    assert final["time"] == 25.0 and final["unfinished"] == final["jobs_in_system"] > 0
    mean_jobs = final["metrics"].mean_jobs_in_system
    assert -sum(r for _, r, _ in steps) == pytest.approx(mean_jobs * 25.0, rel=1e-12)

    env = small_env(mean_episode_time=10.0)
    ends = {env.reset(seed=s)[1]["max_time"] for s in range(5)}
    assert len(ends) == 5 and all(0 <= t < math.inf for t in ends)
    _, _, truncated = run_random(env, seed=0)
    assert truncated


def test_an_illegal_action_is_repaired_to_the_nearest_legal_one_or_refused():
    env = small_env()
    obs, _ = env.reset(seed=0)
    legal = np.flatnonzero(obs["stage_mask"])
    # a padding row far beyond the stages: the nearest legal row is the last one
    # (WAIT, row S, is not allowed at the first decision: nobody holds an executor)
    assert not obs["wait_mask"][0]
    job = obs["stage_job"][legal[-1]]
    caps = np.flatnonzero(obs["cap_mask"][job])
    _, _, _, _, info = env.step(np.array([env.config.max_stages - 1, 0, 0]))
    assert info["repaired"]
    assert info["applied_action"].tolist() == [legal[-1], caps[0], 0]

    strict = small_env(illegal_action="raise")
    obs, _ = strict.reset(seed=0)
    with pytest.raises(IdlegateError, match="illegal action: row"):
        strict.step(np.array([strict.config.max_stages - 1, 0, 0]))
    # the episode goes on after a refused action
    strict.step(sample_legal_action(obs, strict.action_space, np.random.default_rng(0)))


def test_an_overflowing_state_ends_the_episode_and_an_unobservable_dag_is_refused():
    env = DagSchedulingEnv(
        workload="tpch-like",
        workload_options={"num_stream": 40, "num_executors": 2, "load": 2.0},
        max_jobs=3,
    )
    steps, terminated, truncated = run_random(env, seed=0)
    obs, _, info = steps[-1]
    assert truncated and not terminated and info["overflow"]
    assert info["jobs_in_system"] > 3 and obs["num_jobs"] <= 3
    assert env.observation_space.contains(obs)
    with pytest.raises(IdlegateError, match="the episode is over"):
        env.step(np.zeros(3, dtype=np.int64))

    with pytest.raises(IdlegateError, match="raise those limits"):
        DagSchedulingEnv(workload="tpch-like", workload_options=SMALL, max_stages=3).reset(seed=0)


def test_options_are_checked():
    with pytest.raises(IdlegateError, match="max_stage: is not a known setting"):
        DagSchedulingEnv(max_stage=10)
    with pytest.raises(IdlegateError, match="has no option 'bogus'"):
        DagSchedulingEnv(workload_options={"bogus": 1})
    with pytest.raises(IdlegateError, match="workload_options apply to a named workload"):
        EnvConfig(workload=build_workload("tpch-like", 0, **SMALL), workload_options=SMALL)
    with pytest.raises(IdlegateError, match="reset has no option"):
        small_env().reset(options={"seed": 1})


SB3_LIMITS = {"max_stages": 256, "max_jobs": 16, "max_edges": 256}
"""Observation sizes that hold all of the small workload at once, and keep the networks small."""


def run_agent(env, model, masked: bool) -> tuple[bool, list[tuple[np.ndarray, dict]]]:
    """One episode of `model`'s deterministic actions: whether it ended, (action, info)s."""
    obs, _ = env.reset(seed=1)
    steps = []
    while True:
        masks = {"action_masks": env.action_masks()} if masked else {}
        action, _ = model.predict(obs, deterministic=True, **masks)
        obs, _, terminated, truncated, info = env.step(action)
        steps.append((action, info))
        if terminated or truncated:
            return terminated, steps


def test_stable_baselines3_checks_the_env_and_ppo_trains_on_it():
    sb3 = pytest.importorskip("stable_baselines3")
    from stable_baselines3.common.env_checker import check_env as sb3_check_env

    env = small_env(**SB3_LIMITS)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        sb3_check_env(env)
    # its only advice: flatten the two feature matrices (kept: their rows are stages, jobs)
    assert {str(w.message).split(" has ")[0] for w in caught} == {
        "Your observation stage_x",
        "Your observation job_x",
    }
    model = sb3.PPO("MultiInputPolicy", env, n_steps=64, batch_size=32, n_epochs=1, seed=0)
    model.learn(256)
    terminated, steps = run_agent(env, model, masked=False)
    assert terminated and steps[-1][1]["unfinished"] == 0


def test_maskable_ppo_trains_through_gymnasium_make_and_its_rows_are_always_legal():
    contrib = pytest.importorskip("sb3_contrib")
    env = gymnasium.make(ENV_ID, workload="tpch-like", workload_options=SMALL, **SB3_LIMITS)
    model = contrib.MaskablePPO("MultiInputPolicy", env, n_steps=64, batch_size=32, seed=0)
    model.learn(256)
    terminated, steps = run_agent(env.unwrapped, model, masked=True)
    assert terminated and steps[-1][1]["unfinished"] == 0
    # the masks are per part: the row is always legal, a cap or idle level may be repaired
    assert all(info["applied_action"][0] == action[0] for action, info in steps)
    assert any(info["applied_action"][0] == SB3_LIMITS["max_stages"] for _, info in steps)
