"""Distilling the lookahead planner: any scheduler spec as the teacher, workload mixtures."""

from __future__ import annotations

import pytest

pytest.importorskip("torch")

from idlegate.errors import IdlegateError
from idlegate.policy.actions import WAIT_CHOICE
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
