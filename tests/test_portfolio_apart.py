"""A portfolio's round and a planner's plan made apart (`policy.apart`): in the
operator's replay process they give the owner's own answers, and a round past its CPU
budget is cut, said and counted, the candidate kept."""

from __future__ import annotations

import numpy as np
import pytest

from idlegate.api.task_pods import Owner
from idlegate.operator.forecasting.process import ReplayProcess
from idlegate.policy import make_scheduler
from idlegate.policy.apart import budget_check, plan_apart, play_apart
from idlegate.policy.portfolio import PortfolioScheduler
from idlegate.policy.portfolio.replay import ReplayRequest, RoundCut
from idlegate.policy.portfolio.rounds import Choice
from idlegate.sim.cluster import Cluster
from idlegate.sim.engine import simulate
from idlegate.sim.workloads import build_workload
from tests.operator_fakes import harness, stage

# rounds every 5 finished workflows over 3 candidates, no noise rule: a told replay of 40
# k8s-batch workflows at load 0.9 switches from fifo to srpt (asserted), so the leader
# sequence says something
SPEC = (
    "portfolio?candidates=fifo+srpt+fair&start=fifo&min_window=5&every=5&tune=false"
    "&confidence=0&prior=false&far=none&carriers=none&rest=none"
)


def told(replay: object = None) -> tuple[PortfolioScheduler, list[ReplayRequest]]:
    """A portfolio run inline through 40 k8s-batch workflows (seed 3, load 0.9), its rounds played
    by `replay(config, request)` if given, else by itself; its requests, in order."""
    brain = make_scheduler(SPEC)
    assert isinstance(brain, PortfolioScheduler)
    requests: list[ReplayRequest] = []
    own = brain.replay

    def recorded(request: ReplayRequest, check: object = None) -> Choice:
        requests.append(request)
        return own(request) if replay is None else replay(brain.config, request)  # type: ignore[operator]

    brain.replay = recorded  # type: ignore[method-assign]
    simulate(build_workload("k8s-batch", 3, num_jobs=40, load=0.9), brain, seed=3)
    return brain, requests


def leaders(brain: PortfolioScheduler) -> list[tuple[str, dict[str, float]]]:
    return [(c.candidate, dict(c.scores)) for c in brain.rounds]


def test_rounds_in_the_replay_process_follow_the_same_leaders_as_inline():
    inline, requests = told()
    assert len({c for c, _ in leaders(inline)}) >= 2  # (it switched: the sequence tells)
    process = ReplayProcess()
    try:
        apart, again = told(lambda config, r: process.call(play_apart, config, r, None).result())
    finally:
        process.close()
    assert leaders(apart) == leaders(inline)
    assert [r.seed for r in again] == [r.seed for r in requests]


def test_a_round_apart_is_the_owners_round_of_the_same_request():
    inline, requests = told()
    brain = make_scheduler(SPEC)
    for request, choice in zip(requests, inline.rounds, strict=True):
        other = play_apart(brain.config, request, None)  # type: ignore[attr-defined]
        assert (other.candidate, other.reason, dict(other.scores)) == (
            choice.candidate,
            choice.reason,
            dict(choice.scores),
        )


def test_the_budget_check_cuts_past_its_seconds_of_its_clock():
    now = [10.0]
    check = budget_check(2.0, clock=lambda: now[0])
    now[0] = 12.0
    check()  # (2 s spent: within)
    now[0] = 12.5
    with pytest.raises(RoundCut, match=r"cut after 2\.5 s of CPU, beyond its budget of 2 s"):
        check()


def test_a_cut_round_stops_before_the_next_replay_and_keeps_no_choice():
    _, requests = told()
    brain = make_scheduler(SPEC)
    calls = []

    def check() -> None:
        calls.append(1)
        if len(calls) > 2:
            raise RoundCut("spent")

    with pytest.raises(RoundCut):
        brain.replay(requests[-1], check)  # type: ignore[attr-defined]
    assert len(calls) == 3  # (two candidates replayed, the third never started)


@pytest.mark.asyncio
@pytest.mark.parametrize("workers", ["process", "thread"])
async def test_a_round_past_its_budget_is_cut_said_and_counted_the_candidate_kept(workers):
    spec = "portfolio?candidates=fifo+srpt&start=fifo&min_window=2&every=2&tune=false"
    h = harness(pool=1, scheduler=make_scheduler(spec), round_budget=1e-9, forecast_workers=workers)
    pod = Owner("idlegate-system", "operator-0", "pod-uid", kind="Pod", api_version="v1")
    h.bridge.core.reporter = pod
    h.bridge.use_worker()  # (as a bridge given its reporter builds it)
    brain = h.bridge.core.scheduler
    assert (h.bridge.planning.process is not None) == (workers == "process")
    await h.submit("long", {"stages": [stage("a", duration=100.0)]})
    for name in ("s1", "s2", "s3"):
        await h.submit(name, {"stages": [stage("a", duration=1.0)]})
    await h.run_to_completion()
    await h.bridge.planning.idle()
    await h.settle()
    assert h.metrics.value("idlegate_rounds_cut_total") >= 1
    assert brain.following == "fifo" and not brain.rounds
    cut = [e for e in h.kube.events if e["reason"] == "RoundCut"]
    assert cut and cut[0]["type"] == "Warning"
    assert cut[0]["involvedObject"]["name"] == "operator-0"
    assert "beyond its budget of 1e-09 s" in cut[0]["message"]
    assert "keeps following fifo" in cut[0]["message"]


def test_a_plan_made_in_the_replay_process_is_the_plan_made_here():
    # (the planner's rollouts touch only the request and the rollout schedulers, which the
    # process builds again from the spec: tests/test_lookahead.py, the same in a thread)
    w = build_workload("tpch-like", 3, num_executors=6, num_stream=8, load=0.9)
    cluster = Cluster(6)
    for a in w.jobs[:4]:
        cluster.add_job(a.dag, a.time, a.name, a.durations)
    spec = "lookahead?planner=worker&candidates=fair:srpt"
    planner = make_scheduler(spec)
    planner.reset(np.random.default_rng(0))
    planner.decide(cluster)
    request = planner.request(cluster)
    here = planner.plan(request)
    process = ReplayProcess()
    try:
        there = process.call(plan_apart, spec, planner.config, request, None).result()
    finally:
        process.close()
    assert (there.costs, there.choice) == (here.costs, here.choice)
    assert set(here.costs) == {"srpt", "fair"}
