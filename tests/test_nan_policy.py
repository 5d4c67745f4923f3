"""A policy whose outputs turn non-finite at decision time is an error there, not a
silent change of its decisions: the ONNX policy raises PolicyOutputError, the operator
falls back to its safe rule (a Warning and the error metric), and the portfolio scores
such a candidate as failed."""

from __future__ import annotations

import logging

import pytest

from idlegate.errors import PolicyOutputError
from idlegate.policy import make_scheduler
from idlegate.sim.engine import simulate
from idlegate.sim.workloads import build_workload
from tests.nan_model import nan_after

pytest.importorskip("onnxruntime")
FOLLOWING = "idlegate_policy_following"


@pytest.fixture(scope="module")
def nan_model(tmp_path_factory):
    return nan_after(tmp_path_factory.mktemp("nan") / "nan.onnx", jobs=2)


def test_the_model_loads_and_decides_while_it_sees_two_jobs(nan_model):
    # the load-time probe holds two jobs, so it cannot tell this model from a good one
    workload = build_workload("k8s-batch", 0, num_jobs=2)
    result = simulate(workload, make_scheduler(f"learned:{nan_model}"), seed=0)
    assert result.unfinished == 0


def test_non_finite_scores_raise_a_policy_error_at_decision_time(nan_model):
    workload = build_workload("tpch-like", 0, num_jobs=20)
    for spec in (f"learned:{nan_model}", f"learned:{nan_model}?starvation_factor=none"):
        with pytest.raises(PolicyOutputError) as raised:
            simulate(workload, make_scheduler(spec), seed=0)
        assert "stage_logp" in str(raised.value)


def test_the_portfolio_never_follows_a_candidate_whose_replay_fails(nan_model):
    spec = (
        f"portfolio?candidates=srpt+trained&policy={nan_model}&start=srpt"
        "&min_window=10&every=10&window=30"
    )
    brain = make_scheduler(spec)
    simulate(build_workload("k8s-batch", 2, num_jobs=80), brain, seed=2)
    assert brain.rounds
    trained = f"learned:{nan_model}"
    # scored as failed while replayed; then left out, a failure counting as 100 % behind
    # (`far`)
    assert all(c.scores[trained] == float("inf") for c in brain.rounds if trained in c.scores)
    assert trained in brain.rounds[0].scores and trained in brain.rounds[-1].left_out
    assert all(c.candidate == "srpt" for c in brain.rounds)


@pytest.mark.asyncio
async def test_in_the_operator_a_nan_model_falls_back_with_a_warning_and_the_metric(
    nan_model, caplog
):
    from tests.operator_fakes import harness, stage

    policy = make_scheduler(f"learned:{nan_model}")
    h = harness(pool=2, scheduler=policy)

    def following() -> tuple[float, float]:
        value = h.metrics.value
        return value(FOLLOWING, policy=policy.name), value(FOLLOWING, policy="fair")

    names = [f"w{i}" for i in range(5)]
    with caplog.at_level(logging.ERROR, "idlegate.operator.core.decider"):
        for name in names:  # five at once: more than two jobs, so the scores turn NaN
            await h.submit(name, {"stages": [stage("a", 2), stage("b", 1, deps=("a",))]})
        await h.finish(h.released()[0])  # a question on five jobs
        assert following() == (0, 1)  # the fallback decides
        await h.run_to_completion()
    assert following() == (1, 0)  # the last questions, on two jobs or fewer: the policy's
    # the error's message names the job count, which changes: still one traceback
    (traceback,) = [r for r in caplog.records if r.exc_info]
    assert "PolicyOutputError" in traceback.getMessage()
    assert all(h.kube.status(w)["phase"] == "Succeeded" for w in names)
    assert h.metrics.value("idlegate_policy_errors_total", policy=policy.name) > 0
    errors = [e for e in h.kube.events if e["reason"] == "PolicyError"]
    assert errors and all(e["type"] == "Warning" for e in errors)
    assert any("PolicyOutputError" in e["message"] for e in errors)
