"""The lookahead planner (policy.lookahead)."""

from __future__ import annotations

import numpy as np
import pytest

from idlegate.errors import IdlegateError
from idlegate.policy import make_scheduler
from idlegate.policy.lookahead import LookaheadConfig, LookaheadScheduler, effect
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
    assert p.name == "lookahead:srpt"
    assert p.config.samples == 3 and p.config.candidates == ("fair", "sjf-cp")
    assert make_scheduler("lookahead:learned:default").name.startswith("lookahead:")


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
