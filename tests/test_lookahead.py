"""The lookahead planner (policy.lookahead)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace

import numpy as np
import pytest

from idlegate.errors import IdlegateError
from idlegate.policy import make_scheduler
from idlegate.policy.lookahead import FAST_PLANNING, LookaheadConfig, LookaheadScheduler, effect
from idlegate.sim.cluster import Cluster
from idlegate.sim.engine import JobArrival, simulate
from idlegate.sim.protocol import WAIT, Decision
from idlegate.sim.rollout import Future
from idlegate.sim.workloads import build_workload
from tests.helpers import chain, workload


class KnownFuture(LookaheadScheduler):
    """A planner that is told the future (to test the planning, not the estimates)."""

    arrivals: tuple[JobArrival, ...] = ()

    def sample_futures(self, view, horizon):
        return [Future(tuple(a for a in self.arrivals if a.time > view.now), 0)]


def planner(spec: str, **options) -> LookaheadScheduler:
    p = make_scheduler(spec, **options)
    assert isinstance(p, LookaheadScheduler)
    return p


def test_spec_and_parameters():
    p = planner("lookahead:srpt", samples=3, candidates="fair+sjf-cp", mode="decision")
    assert p.name == "lookahead?samples=3&candidates=fair+sjf-cp&mode=decision:srpt"
    assert p.config.samples == 3 and p.config.candidates == ("fair", "sjf-cp")
    assert make_scheduler("lookahead:learned:default").name.startswith("lookahead:")


def test_a_planners_name_says_its_options_so_two_rows_differ():
    fast = "lookahead?max_decisions=100&race=0.05:learned:default"
    assert planner(fast).name == fast
    assert planner("lookahead:srpt").name == "lookahead:srpt"
    assert planner("lookahead?margin=0.1:srpt").name != planner("lookahead?margin=0.2:srpt").name
    both = planner("lookahead?horizon=60:srpt", candidates=("fair", "analytic:sjf-cp"))
    assert both.name == "lookahead?horizon=60&candidates=fair+analytic:sjf-cp:srpt"
    assert planner("lookahead?race=0.05:srpt", name="mine").name == "mine"


@pytest.mark.parametrize(
    ("spec", "options", "message"),
    [
        ("lookahead:", {}, "needs a base scheduler"),
        ("lookahead:nope", {}, "unknown scheduler 'nope'"),
        ("lookahead:fair", {"depth": 2}, "no parameter 'depth'"),
        ("lookahead:fair", {"samples": 0}, "samples: Input should be greater than or equal to 1"),
        ("lookahead:fair", {"horizon": -1}, "horizon: Input should be greater than 0"),
        ("lookahead:fair", {"mode": "tree"}, "mode: Input should be 'decision' or 'switch'"),
        ("lookahead:fair", {"candidates": "fair+bogus"}, "unknown scheduler 'bogus'"),
    ],
)
def test_bad_specs_are_sentences(spec, options, message):
    with pytest.raises(IdlegateError, match=message):
        make_scheduler(spec, **options)


def test_effect_ignores_caps_that_start_the_same_executors():
    c = Cluster(2)
    c.add_job(chain(5.0), 0.0, "a")
    stage = c.jobs[0].stages[0]
    assert effect(c, Decision(stage, 1)) == effect(c, Decision(stage, 2)) == (stage.key, 1, 0.0)
    assert effect(c, WAIT) == ("wait",)
    assert effect(c, Decision(stage, 1, 3.0)) == (stage.key, 0, 3.0)


def motivating(mode: str) -> tuple[KnownFuture, object]:
    w = workload((0.0, "A", chain(20.0)), (2.0, "B", chain(4.0)))
    p = planner("lookahead:srpt", mode=mode, horizon=100.0, idle_levels=10, candidates="fair")
    p.__class__ = KnownFuture
    p.arrivals = w.jobs  # type: ignore[attr-defined]
    return p, w


def test_decision_mode_inserts_the_idle_slot_that_pays_when_it_knows_the_future():
    """DESIGN.md's example: a 2 s slot before A (idle level 1 of 10 = 2 s) gives 26 and 4."""
    p, w = motivating("decision")
    result = simulate(w, p, 0)
    assert {r.name: r.jct for r in result.records} == {"A": 26.0, "B": 4.0}
    assert p.stats.idles == 1 and p.stats.planned >= 1


def test_switch_mode_follows_a_policy_and_plans_only_when_the_jobs_change():
    p, w = motivating("switch")
    result = simulate(w, p, 0)
    assert result.unfinished == 0
    # planned at A's arrival, B's arrival and A's completion at most
    assert 1 <= p.stats.planned <= 3


def test_a_planner_with_nothing_to_choose_does_not_simulate():
    p = planner("lookahead:srpt", mode="decision", candidates="srpt", wait=False, idle_levels=0)
    w = build_workload("tpch-like", 1, num_executors=4, num_stream=5)
    simulate(w, p, 0)
    assert p.stats.planned == 0 and p.stats.rollouts == 0


def test_same_seed_same_run_and_the_planner_never_loses_a_job():
    w = build_workload("tpch-like", 2, num_executors=5, num_stream=12, load=0.9)
    runs = [simulate(w, planner("lookahead:fair", samples=2), 7) for _ in range(2)]
    assert runs[0].unfinished == 0
    assert [r.jct for r in runs[0].records] == [r.jct for r in runs[1].records]


def test_sampled_futures_use_seen_jobs_and_the_estimated_rate():
    c = Cluster(4)
    d = chain(3.0)
    for t in np.arange(0.0, 50.0, 5.0):  # one arrival every 5 s
        c.add_job(d, float(t), f"j{t}")
    p = planner("lookahead:fair", samples=50, horizon=100.0)
    p.reset(np.random.default_rng(0))
    p._observe(c)
    futures = p.sample_futures(c, 100.0)
    counts = [len(f.arrivals) for f in futures]
    assert 12 < np.mean(counts) < 28  # ~20 expected at rate 0.2/s (the prior pulls a little)
    assert all(a.dag is d and c.now < a.time <= c.now + 100.0 for f in futures for a in f.arrivals)
    assert len({f.seed for f in futures}) == 50


def test_config_defaults_are_valid():
    assert LookaheadConfig().mode == "switch"


class DriverObject:
    """A payload that is no duration model, like the operator's Workflow."""


def operator_like_cluster(n: int = 3) -> Cluster:
    """Jobs as the operator adds them: its own objects as payloads."""
    c = Cluster(4)
    for i in range(n):
        c.add_job(chain(3.0, 2.0), float(i), f"w{i}", DriverObject())
    return c


def test_a_planner_plans_for_jobs_whose_payload_is_no_duration_model():
    """The issue's operator bug: every decision raised AttributeError ('sample')."""
    c = operator_like_cluster()
    p = planner("lookahead:srpt")
    p.reset(np.random.default_rng(0))
    c.needs_schedule = False
    while (step := c.decide_once(p, c.now)) is not None and step[0] is not WAIT:
        pass
    assert p.stats.planned == 1 and c.free_executors < 4


def test_worker_mode_only_follows_and_adopts_a_fresh_plan_but_drops_a_stale_one():
    c = operator_like_cluster()
    p = planner("lookahead:srpt", planner="worker", candidates="fair")
    p.reset(np.random.default_rng(0))
    assert p.decide(c) is not None and p.stats.planned == 0 and p.following == "srpt"
    assert p.needs_plan(c)
    request = p.request(c)
    assert not p.needs_plan(c) and request.fork is not c
    plan = p.plan(request)
    assert set(plan.costs) == {"srpt", "fair"} and plan.key == (0, 1, 2)
    assert plan.expected_change("fair") == pytest.approx(
        plan.costs[plan.choice] / plan.costs["fair"] - 1
    )
    assert p.adopt(plan, c) and p.following == plan.choice and p.stats.planned == 1
    c.add_job(chain(1.0), 5.0, "late", DriverObject())
    assert p.needs_plan(c) and not p.adopt(plan, c) and p.stats.dropped == 1


def test_worker_mode_needs_switch_mode():
    with pytest.raises(IdlegateError, match="only in switch mode"):
        planner("lookahead:srpt", planner="worker", mode="decision")


def test_a_plan_made_in_another_thread_is_the_plan_made_here():
    """Plans touch only their request and the rollout schedulers (ONNX sessions too)."""
    w = build_workload("tpch-like", 3, num_executors=6, num_stream=8, load=0.9)
    c = Cluster(6)
    for a in w.jobs[:4]:
        c.add_job(a.dag, a.time, a.name, a.durations)
    p = planner("lookahead:learned:default", planner="worker")
    p.reset(np.random.default_rng(0))
    p.decide(c)
    request = p.request(c)
    here = p.plan(request)
    with ThreadPoolExecutor(1) as pool:
        there = pool.submit(p.plan, request).result()
    assert there.costs == here.costs and there.choice == here.choice
    assert len(c.jobs) == 4 and c.jobs[0].payload is w.jobs[0].durations


def test_planning_delay_defers_each_switch_and_drops_plans_the_jobs_outran():
    w = build_workload("tpch-like", 2, num_executors=5, num_stream=12, load=0.9)
    sync = planner("lookahead:fair")
    r0 = simulate(w, sync, 7)
    assert sync.stats.switches > 0
    never = planner("lookahead:fair", planning_delay=1e9)
    r1 = simulate(w, never, 7)  # the one plan is never ready: fair all along
    assert never.stats.switches == 0 and never.stats.planned == 0
    assert [r.jct for r in r1.records] == [
        r.jct for r in simulate(w, make_scheduler("fair"), 7).records
    ]
    late = planner("lookahead:fair", planning_delay=5.0)
    r2 = simulate(w, late, 7)
    assert r2.unfinished == 0 and late.stats.dropped > 0
    assert late.stats.planned < sync.stats.planned and r0.unfinished == 0


def test_racing_drops_candidates_behind_after_the_first_future():
    c = Cluster(2)
    c.add_job(chain(30.0, 30.0), 0.0, "long", DriverObject())
    for i in range(4):
        c.add_job(chain(1.0), 0.0, f"short{i}", DriverObject())
    p = planner("lookahead:srpt", planner="worker", race=0.0, samples=3, horizon=100.0)
    p.reset(np.random.default_rng(0))
    # futures without arrivals: a raced-out cost is a lower bound of a future like the others
    request = p.request(c)
    request = replace(request, futures=tuple(Future((), f.seed) for f in request.futures))
    plan = p.plan(request)
    assert plan.raced_out and plan.choice not in plan.raced_out
    assert all(plan.costs[n] > plan.costs[plan.choice] for n in plan.raced_out)


def test_above_the_plan_window_a_plan_simulates_the_window_and_the_holders():
    c = Cluster(4)
    for i in range(100):
        c.add_job(chain(1.0 + i % 7), 0.0, f"w{i}", DriverObject())
    c.needs_schedule = False
    fair = make_scheduler("fair")
    while (step := c.decide_once(fair, 0.0)) is not None and step[0] is not WAIT:
        pass
    holders = {j.id for j in c.jobs if j.held}
    p = planner("lookahead:srpt", planner="worker", plan_window=50)
    p.reset(np.random.default_rng(0))
    fork = p.request(c).fork
    assert holders <= {j.id for j in fork.jobs} and len(fork.jobs) <= 32 + len(holders)
    assert fork.free_executors == c.free_executors and len(c.jobs) == 100
    everything = planner("lookahead:srpt", planner="worker", plan_window=None)
    everything.reset(np.random.default_rng(0))
    assert len(everything.request(c).fork.jobs) == 100


def test_a_plan_out_of_budget_keeps_the_futures_simulated_by_then():
    c = operator_like_cluster()
    p = planner("lookahead:srpt", planner="worker", samples=4)
    p.reset(np.random.default_rng(0))
    request = p.request(c)
    assert p.plan(request).futures == 4
    hurried = p.plan(request, budget=0.0)
    assert hurried.futures == 1 and not hurried.raced_out and set(hurried.costs) == set(p._rollout)


class _FakeClock:
    """Wall seconds that advance by `step` at every reading."""

    def __init__(self, step: float) -> None:
        self.now, self.step = 0.0, step

    def __call__(self) -> float:
        self.now += self.step
        return self.now


def test_a_plan_that_overruns_its_budget_is_abandoned_not_applied_late():
    c = operator_like_cluster()
    p = planner("lookahead:srpt", planner="worker", candidates="fair", samples=2)
    p.reset(np.random.default_rng(0))
    p.clock = _FakeClock(step=1.0)  # every reading a second later: any plan takes seconds
    request = replace(p.request(c), following="fair")  # so any choice would be a switch
    late = p.plan(request, budget=0.5)
    assert late.overran and late.seconds > 0.5
    assert not p.adopt(late, c) and p.following == "srpt"
    assert p.stats.overran == 1 and p.stats.dropped == 1
    assert not p.needs_plan(c)  # the job set is the same: no plan again at once
    p.clock = _FakeClock(step=1e-6)
    on_time = p.plan(request, budget=0.5)
    assert not on_time.overran and p.adopt(on_time, c) and p.stats.overran == 1
    assert not p.plan(request).overran  # no budget, no overrun


def test_fast_planning_options_make_a_valid_planner():
    p = planner("lookahead:srpt", **FAST_PLANNING)
    assert p.config.max_decisions == FAST_PLANNING["max_decisions"]
    assert LookaheadConfig().max_decisions is None and LookaheadConfig().race is None


def test_in_switch_mode_the_margin_keeps_the_followed_policy_unless_another_gains_more():
    c = Cluster(2)
    c.add_job(chain(30.0, 30.0), 0.0, "long", DriverObject())
    for i in range(4):
        c.add_job(chain(1.0), 0.0, f"short{i}", DriverObject())
    p = planner("lookahead:srpt", planner="worker", candidates="fair", horizon=100.0)
    p.reset(np.random.default_rng(0))
    request = replace(p.request(c), following="fair")
    free = p.plan(request)
    gain = 1.0 - free.costs["srpt"] / free.costs["fair"]
    assert free.choice == "srpt" and gain > 0.01  # SRPT empties the short jobs first
    p.config = p.config.model_copy(update={"margin": gain + 0.01})
    assert p.plan(request).choice == "fair"  # the gain is below the margin: stay
    p.config = p.config.model_copy(update={"margin": gain - 0.01})
    assert p.plan(request).choice == "srpt"
