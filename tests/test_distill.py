"""Distilling the lookahead planner: any scheduler spec as the teacher, workload mixtures."""

from __future__ import annotations

import pytest

pytest.importorskip("torch")

from idlegate.errors import IdlegateError
from idlegate.policy.actions import WAIT_CHOICE
from idlegate.policy.columns import ARRIVAL_FEATURES, NUM_GLOBAL_FEATURES
from idlegate.policy.model_config import ModelConfig
from idlegate.sim.workloads import build_workload
from idlegate.training.bc import record_demonstrations
from idlegate.training.config import TrainConfig, load_config


def test_the_teacher_may_be_any_spec_but_random(tmp_path):
    ok = TrainConfig.model_validate({"bc": {"heuristic": "lookahead:srpt"}})
    assert ok.bc.heuristic == "lookahead:srpt"
    for bad, needle in [("random", "nothing to teach"), ("lookahead:nope", "unknown scheduler")]:
        p = tmp_path / "bad.yaml"
        p.write_text(f"bc: {{heuristic: '{bad}'}}\n")
        with pytest.raises(IdlegateError, match=needle):
            load_config(p)


def test_a_mixture_lists_the_training_workloads_in_cycle_order(tmp_path):
    p = tmp_path / "mix.yaml"
    p.write_text(
        "workload: {name: tpch-like, options: {num_executors: 5, num_stream: 4}}\n"
        "mixture:\n"
        "  - {name: synthetic, options: {load: 0.6}}\n"
        "  - {name: bursty, options: {num_stream: 9}}\n"
    )
    cfg = load_config(p)
    assert [w.name for w in cfg.training_workloads] == ["tpch-like", "synthetic", "bursty"]
    p.write_text("mixture: [{name: synthetic, options: {bogus: 1}}]\n")
    with pytest.raises(IdlegateError, match="bogus"):
        load_config(p)


def test_the_planner_labels_the_states_of_an_episode():
    """Every recorded label is a legal choice; the planner's WAITs become WAIT choices."""
    # seed 2: fair, followed by the planner here, waits twice in this episode
    w = build_workload("tpch-like", 2, num_executors=5, num_stream=8, load=0.9)
    demos = record_demonstrations(
        w, 0, heuristic="lookahead:fair", model_config=ModelConfig().model_dump()
    )
    assert demos.observations and len(demos.choices) == len(demos.observations)
    assert demos.avg_jct > 0
    assert WAIT_CHOICE in demos.choices
    for obs, choice in zip(demos.observations, demos.choices, strict=True):
        if choice == WAIT_CHOICE:
            assert obs.wait_mask[0]
        else:
            assert obs.stage_mask[choice.stage_row]


def test_the_export_says_what_a_policy_was_trained_on():
    import json

    from idlegate.policy.onnx_export import trained_on
    from idlegate.training.config import PRESETS

    cfg = TrainConfig.model_validate(PRESETS["default"]).training_dict()
    summary = json.loads(trained_on(cfg))
    assert summary["preset"] == "default" and summary["teacher"] == "lookahead:srpt"
    assert [w["name"] for w in summary["workloads"]] == [
        w.name for w in TrainConfig.model_validate(PRESETS["default"]).training_workloads
    ]
    assert trained_on(None) == ""


def test_the_oracle_teacher_is_told_the_future_and_labels_idle_slots():
    """The Imitator passes the simulator's arrivals on to the oracle planner (without
    them it raises), and the student's labels include idle levels."""
    from idlegate.training.presets import IDLE_TEACHER, PRESETS

    w = build_workload("follow", 0, num_executors=2, load=0.7, num_jobs=16)
    demos = record_demonstrations(
        w, 0, heuristic=IDLE_TEACHER, model_config=PRESETS["idle"]["model"]
    )
    assert demos.choices and demos.avg_jct > 0
    assert any(c.idle_level > 0 for c in demos.choices)
    width = {o.global_x.shape[1] for o in demos.observations}
    assert width == {NUM_GLOBAL_FEATURES + len(ARRIVAL_FEATURES)}


def test_a_policy_with_arrival_features_exports_with_parity(tmp_path):
    from idlegate.policy import make_scheduler
    from idlegate.policy.features import MODEL_INPUTS
    from idlegate.policy.model import PolicyNet
    from idlegate.policy.onnx_export import check_parity, example_inputs, policy_onnx
    from idlegate.sim.engine import simulate

    cfg = ModelConfig.of({"features": {"arrival_features": True}})
    net = PolicyNet(cfg)
    data, _ = policy_onnx(net)
    inputs = example_inputs(global_width=NUM_GLOBAL_FEATURES + len(ARRIVAL_FEATURES), seed=3)
    arrays = {name: t.numpy() for name, t in zip(MODEL_INPUTS, inputs, strict=True)}
    assert check_parity(net, data, arrays) < 1e-4
    path = tmp_path / "arrivals.onnx"
    path.write_bytes(data)
    w = build_workload("follow", 1, num_executors=2, load=0.7, num_jobs=20)
    assert simulate(w, make_scheduler(f"learned:{path}"), 1).unfinished == 0
