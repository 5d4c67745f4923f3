"""The analytic idle rule: its formulas (against Theorem 1, the simulator and Monte Carlo),
its estimates, when it may idle, and full simulator runs (legal, deterministic, measured).
"""

from __future__ import annotations

import inspect
import math
from dataclasses import replace
from typing import Any

import numpy as np
import pytest

from idlegate.errors import IdlegateError
from idlegate.policy.analytic import (
    CONFIG_FIELDS,
    AnalyticIdleConfig,
    AnalyticIdleScheduler,
    best_idle,
    estimate_arrivals,
    expected_first_release,
    expected_gain,
    expected_later_cost,
    expected_pair_cost,
    later_cost,
    make_analytic,
    pair_cost,
)
from idlegate.policy.heuristics import SCHEDULERS, SjfCpScheduler, make_scheduler
from idlegate.sim.cluster import Cluster
from idlegate.sim.engine import SimResult, Workload, simulate
from idlegate.sim.protocol import Decision
from idlegate.sim.workloads import build_workload
from tests.helpers import Scripted, chain, idle_once, jcts, sjf_rule, workload

SKEWED = {"short_seconds": 2, "long_seconds": 50, "long_fraction": 0.1}
"""A two-type mix with many short jobs: where reserving an executor can pay."""


def avg_jct(result: SimResult) -> float:
    return float(np.mean([r.jct for r in result.records]))


# ---------------------------------------------------------------------------------------
# the deterministic pair model is Theorem 1, and the simulator agrees with it


@pytest.mark.parametrize("l1", [1, 2, 3, 5, 8, 20])
def test_pair_cost_is_theorem_1(l1):
    """Some slot helps iff l2 < l1 and 0 < δ < (l1 − l2)/2; the best drop is l1 − l2 − 2δ."""
    for l2 in [0.5, 1, 2, 4, 7, 9]:
        for delta in np.arange(0.25, 12, 0.5):
            base = pair_cost(0.0, delta, l1, l2)
            drops = [base - pair_cost(d, delta, l1, l2) for d in np.arange(0.125, 2 * l1, 0.125)]
            helps = l2 < l1 and delta < (l1 - l2) / 2
            assert (max(drops) > 1e-12) == helps, (l1, l2, delta)
            if helps:
                assert max(drops) == pytest.approx(l1 - l2 - 2 * delta)


@pytest.mark.parametrize(("l1", "l2", "delta"), [(20, 4, 2), (8, 1, 1.5), (5, 7, 1), (9, 3, 4)])
def test_pair_cost_matches_the_simulator(l1, l2, delta):
    """One executor, J1 at t=10, J2 at t=10+δ: the summed JCTs are `pair_cost`."""
    w = workload((10, "J1", chain(l1)), (10 + delta, "J2", chain(l2)))
    assert sum(jcts(simulate(w, Scripted(sjf_rule))).values()) == pair_cost(0, delta, l1, l2)
    for d in [0.75, 1.25, 2.75, 4.25, 9.75]:  # never equal to δ: ties go to SJF in the cluster
        total = sum(jcts(simulate(w, idle_once("J1", 0, d))).values())
        assert total == pytest.approx(pair_cost(d, delta, l1, l2)), d


def test_motivating_example():
    """A 20 s at t=0, B 4 s at t=2: 21 s average without a slot, 15 s with d = 2."""
    assert pair_cost(0, 2, 20, 4) / 2 == 21
    assert pair_cost(2.0001, 2, 20, 4) / 2 == pytest.approx(15, abs=1e-3)


# ---------------------------------------------------------------------------------------
# the closed forms against Monte Carlo

CASES = [  # l1, l2 atoms, rate, release
    (50.0, [10.0, 50.0], 0.05, math.inf),
    (50.0, [2.0, 2.0, 50.0], 0.45, 12.5),
    (20.0, [4.0, 30.0], 0.5, 3.0),
    (20.0, [1.0, 4.0, 30.0], 0.01, math.inf),
    (50.0, [2.0], 0.45, 40.0),
]


def _mc_pair_and_later(d, l1, atoms, rate, release, rng, n=100_000):
    """Samples of (pair cost, summed waits of the later arrivals), simulated directly."""
    delta = rng.exponential(1 / rate, n)
    l2 = rng.choice(np.asarray(atoms), n)
    during = delta < d
    start = np.where(during, np.maximum(d, np.minimum(delta + l2, release)), d)
    j2_wait = np.where(during, 0.0, np.maximum(0.0, np.minimum(d + l1, release) - delta))
    pair = (start + l1) + (l2 + j2_wait)
    # later arrivals: Poisson after δ; those in [max(δ, start), min(start + l1, R)) wait
    lo = np.maximum(delta, start)
    hi = np.minimum(start + l1, release)
    span = np.maximum(hi - lo, 0.0)
    k = rng.poisson(rate * span)
    who = np.repeat(np.arange(n), k)
    t = lo[who] + rng.random(who.size) * span[who]
    later = np.bincount(who, weights=hi[who] - t, minlength=n)
    return pair, later


@pytest.mark.parametrize(("l1", "atoms", "rate", "release"), CASES)
def test_closed_forms_match_monte_carlo(l1, atoms, rate, release):
    rng = np.random.default_rng(7)
    for d in [0.0, 1.0, 5.0, 15.0]:
        pair, later = _mc_pair_and_later(d, l1, atoms, rate, release, rng)
        grid = np.array([[d]])
        exact_pair = expected_pair_cost(grid, l1, np.array(atoms)[None, :], rate, release).mean()
        exact_later = expected_later_cost(grid, l1, np.array(atoms)[None, :], rate, release).mean()
        for sample, exact in ((pair, exact_pair), (later, exact_later)):
            se = sample.std() / math.sqrt(sample.size)
            assert abs(sample.mean() - exact) <= 4.5 * se + 1e-9, (d, sample.mean(), exact, se)


def test_scalar_costs_agree_with_their_expectations_on_a_fine_grid():
    """E over δ of `pair_cost`/`later_cost` by quadrature equals the closed forms."""
    l1, l2, rate, release = 30.0, 6.0, 0.2, 17.0
    delta = np.linspace(0.0, 300.0, 300_001)
    w = rate * np.exp(-rate * delta)
    for d in [0.0, 3.0, 12.0, 25.0]:
        pair = np.array([pair_cost(d, x, l1, l2, release) for x in delta[::10]])
        later = np.array([later_cost(d, x, l1, l2, rate, release) for x in delta[::10]])
        ww = w[::10]
        step = delta[10] - delta[0]
        assert np.trapezoid(pair * ww, dx=step) == pytest.approx(
            float(expected_pair_cost(d, l1, l2, rate, release)), rel=2e-3
        )
        assert np.trapezoid(later * ww, dx=step) == pytest.approx(
            float(expected_later_cost(d, l1, l2, rate, release)), rel=2e-3, abs=1e-6
        )


def test_gain_limits():
    # a next arrival almost surely right now (λ → ∞): the deterministic δ = 0 of Theorem 1
    assert float(expected_gain(2.0, 20.0, [4.0], 1e4, stream=False)) == pytest.approx(8.0, 1e-3)
    # no arrival to wait for (λ → 0): the slot only delays J1, G(d) → −d/2
    assert float(expected_gain(6.0, 20.0, [4.0], 1e-9)) == pytest.approx(-3.0, rel=1e-6)
    # a next job as long as J1 never makes a slot worth it
    assert np.all(expected_gain(np.linspace(0.1, 10, 20), 20.0, [20.0], 0.5, stream=False) < 0)


def test_stream_term_never_favours_idling_on_one_machine():
    """With R = ∞ (nothing else busy), charging the later arrivals leaves no positive gain."""
    rng = np.random.default_rng(0)
    for _ in range(500):
        l1 = rng.uniform(1, 100)
        l2 = rng.uniform(0.01, 1) * l1
        rate = 10 ** rng.uniform(-3, 1)
        d = rng.uniform(0, 1) * l1
        assert float(expected_gain(d, l1, [l2], rate)) <= 1e-9


def test_best_idle_picks_the_grid_maximum():
    cfg = AnalyticIdleConfig(grid_size=8, max_idle_fraction=0.5, stream_cost=False)
    d, gain = best_idle(20.0, [1.0, 2.0], 0.5, cfg)
    grid = 0.5 * 20.0 * np.arange(1, 9) / 8
    gains = expected_gain(grid, 20.0, [1.0, 2.0], 0.5, stream=False)
    assert d == grid[int(np.argmax(gains))] and gain == pytest.approx(gains.max())
    assert gain > 0
    assert best_idle(0.0, [1.0], 0.5, cfg) == (0.0, 0.0)


# ---------------------------------------------------------------------------------------
# online estimates


def test_rate_estimate_follows_the_log():
    cfg = AnalyticIdleConfig(window=200)
    rng = np.random.default_rng(1)
    times = np.cumsum(rng.exponential(4.0, 200))
    log = [(float(t), 10.0) for t in times]
    est = estimate_arrivals(log, float(times[-1]), 1, cfg)
    assert est.rate == pytest.approx(0.25, rel=0.15)
    assert est.works.tolist() == [10.0] * 200
    # a long silence since the last arrival lowers the estimate
    assert estimate_arrivals(log, float(times[-1]) + 2000, 1, cfg).rate < est.rate / 2
    # only the window counts
    small = estimate_arrivals(log, float(times[-1]), 1, AnalyticIdleConfig(window=5))
    assert small.works.size == 5


def test_rate_prior_at_the_start_and_with_a_batch():
    cfg = AnalyticIdleConfig(prior_load=0.5, prior_strength=2.0)
    # one job of 40 s work on 4 executors: λ₀ = 0.5 · 4 / 40
    assert estimate_arrivals([(0.0, 40.0)], 0.0, 4, cfg).rate == pytest.approx(0.05)
    assert estimate_arrivals([(0.0, 40.0)], 0.0, 4, AnalyticIdleConfig(prior_rate=2.0)).rate == 2.0
    # jobs submitted together at t=0 are not a burst of zero gaps
    batch = [(0.0, 40.0)] * 10
    assert estimate_arrivals(batch, 0.0, 4, cfg).rate == pytest.approx(0.05)
    with pytest.raises(IdlegateError):
        estimate_arrivals([], 0.0, 4, cfg)


def test_expected_first_release():
    c = Cluster(3)
    assert expected_first_release(c.jobs) == math.inf
    job = c.add_job(chain(10), 0.0)
    c.apply(Decision(job.stages[0], 3), 0.0)  # one task on one executor: U(0, 10) left
    assert expected_first_release(c.jobs) == pytest.approx(5.0, rel=1e-3)
    wide = c.add_job(chain(6, tasks=2), 0.0)
    c.apply(Decision(wide.stages[0], 2), 0.0)  # two more executors, 6 s tasks
    # E[min(U(0,10), U(0,6), U(0,6))] = ∫_0^6 (1 − t/10)(1 − t/6)² dt
    t = np.linspace(0, 6, 100_001)
    expect = np.trapezoid((1 - t / 10) * (1 - t / 6) ** 2, t)
    assert expected_first_release(c.jobs) == pytest.approx(expect, rel=1e-3)


# ---------------------------------------------------------------------------------------
# when the rule may consider a slot


def _launch(cluster: Cluster, job_index: int, cap: int | None = None) -> Decision:
    job = cluster.jobs[job_index]
    return Decision(job.runnable[0], cap or cluster.num_executors)


def test_explain_only_where_the_executors_would_really_idle():
    sched = AnalyticIdleScheduler("sjf-cp")
    c = Cluster(2)
    c.add_job(chain(50), 0.0)
    assert sched.explain(c, _launch(c, 0)) is None  # 1 task, 2 free: one stays free anyway
    c = Cluster(1)
    c.add_job(chain(50), 0.0)
    ev = sched.explain(c, _launch(c, 0))
    assert ev is not None and ev.executors == 1 and ev.l1 == 50.0 and ev.release == math.inf
    c.add_job(chain(10), 0.0)
    assert sched.explain(c, _launch(c, 0)) is None  # another job could use the executor
    c = Cluster(1)
    first = c.add_job(chain(50), 0.0)
    c.apply(Decision(first.stages[0], 1, 5.0), 0.0)  # in an idle slot
    c.add_job(chain(50), 1.0)
    assert sched.explain(c, _launch(c, 1)) is None  # one slot at a time
    c.idle_expired(first.stages[0], 5.0)
    assert sched.explain(c, Decision(first.stages[0], 1)) is None  # delayed once already
    assert sched.explain(c, Decision(first.stages[0], 1, 2.0)) is None  # the base's own slot


def test_decide_returns_the_base_decision_or_the_same_stage_delayed():
    sched = AnalyticIdleScheduler("sjf-cp", AnalyticIdleConfig(stream_cost=False))
    c = Cluster(1)
    for i in range(5):  # five short jobs, 1 s apart, each done before the next
        short = c.add_job(chain(1.0), float(i))
        c.apply(Decision(short.stages[0], 1), float(i))
        c.task_finished(0, i + 1.0)
    job = c.add_job(chain(40.0), 5.0)
    action = sched.decide(c)
    assert isinstance(action, Decision) and action.stage is job.stages[0]
    assert action.idle_delay > 0 and action.parallelism_cap >= job.held
    assert sched.idles == 1 and sched.idle_seconds == action.idle_delay
    sched.reset(np.random.default_rng(0))
    assert sched.idles == 0 and sched.idle_seconds == 0.0


# ---------------------------------------------------------------------------------------
# configuration and registry


def test_config_validation():
    for bad in [
        {"window": 0},
        {"window": 2.5},
        {"grid_size": 0},
        {"prior_rate": 0.0},
        {"prior_rate": math.inf},
        {"prior_load": -1.0},
        {"prior_strength": 0},
        {"max_idle_fraction": 0.0},
        {"min_gain": -0.1},
        {"account_busy": "yes"},
        {"stream_cost": 1},
    ]:
        with pytest.raises(IdlegateError):
            AnalyticIdleConfig(**bad)
    with pytest.raises(IdlegateError):
        AnalyticIdleScheduler(SjfCpScheduler(), alpha=1.0)
    with pytest.raises(IdlegateError):
        AnalyticIdleScheduler("no-such-heuristic")


def test_registry_entry(monkeypatch):
    """The line proposed for the registry: SCHEDULERS["analytic"] = make_analytic."""
    monkeypatch.setitem(SCHEDULERS, "analytic", make_analytic)
    s = make_scheduler("analytic", base="fair")
    assert isinstance(s, AnalyticIdleScheduler) and s.name == "analytic+fair"
    assert make_scheduler("analytic").name == "analytic+sjf-cp"
    s = make_scheduler("analytic", base="weighted-fair", base_params={"alpha": 0.0}, window=7)
    assert s.name == "analytic+weighted-fair" and s.config.window == 7
    assert s.base.alpha == 0.0
    with pytest.raises(IdlegateError, match="no parameter 'windw'"):
        make_scheduler("analytic", windw=3)
    with pytest.raises(IdlegateError):
        make_scheduler("analytic", grid_size=0)
    params = list(inspect.signature(make_analytic).parameters)
    assert params == ["base", "base_params", *CONFIG_FIELDS]


# ---------------------------------------------------------------------------------------
# full runs: legal, deterministic, and what the rule does


def _run_pair(w: Workload, base: str, seed: int, **cfg: object) -> tuple[SimResult, SimResult, int]:
    """(analytic run, base run, idle slots inserted); both runs must finish every job."""
    sched = make_analytic(base, **cfg)
    analytic = simulate(w, sched, seed=seed)
    baseline = simulate(w, make_scheduler(base), seed=seed)
    assert analytic.unfinished == 0 and baseline.unfinished == 0
    assert sum(r.idle_inserted for r in analytic.records) == pytest.approx(sched.idle_seconds)
    return analytic, baseline, sched.idles


def _records(r: SimResult) -> list[tuple[float, float, float]]:
    return [(x.arrival, x.finish, x.idle_inserted) for x in r.records]


@pytest.mark.parametrize("base", ["sjf-cp", "fair"])
@pytest.mark.parametrize(
    ("name", "options"),
    [
        ("synthetic", {"load": 0.8, "num_executors": 1}),
        ("synthetic", {"load": 0.8, "num_executors": 2, **SKEWED}),
        ("synthetic", {"load": 0.6, "num_executors": 4, **SKEWED}),
        ("tpch-like", {"num_stream": 60}),
        ("tpch-like", {"num_stream": 60, "num_executors": 10}),
    ],
)
def test_full_runs_are_legal_and_deterministic(base, name, options):
    """simulate() raises on any illegal decision; twice the same run, the same records."""
    w = build_workload(name, 3, **options)
    for cfg in ({}, {"stream_cost": False}):
        first, _, _ = _run_pair(w, base, 3, **cfg)
        again = simulate(w, make_analytic(base, **cfg), seed=3)
        assert _records(first) == _records(again)


def test_idles_on_the_motivating_kind_of_workload():
    """1 executor: short jobs every 2 s, then a 20 s job and a 1 s job right after it.

    The pure pair rule (a burst, then silence: Theorem 1's setting) idles before the long
    job and lowers the average JCT; the stream-aware default does not idle on one machine.
    """
    jobs = [(2.0 * i, f"s{i}", chain(1)) for i in range(10)]
    w = workload(*jobs, (20.0, "L", chain(20)), (21.0, "B", chain(1)))
    pair, base, idles = _run_pair(w, "sjf-cp", 0, stream_cost=False)
    assert idles == 1 and pair.records[10].idle_inserted > 1.0
    assert jcts(pair)["B"] == 1.0 and avg_jct(pair) < avg_jct(base)
    stream, _, idles = _run_pair(w, "sjf-cp", 0)
    assert idles == 0 and _records(stream) == _records(base)


def test_reserves_the_last_executor_when_another_frees_soon():
    """2 executors: one busy with a long job, short jobs streaming in, a second long job.

    The default (stream-aware) rule keeps the free executor for the short jobs and lets the
    long one wait for the release; this lowers the average JCT.
    """
    jobs = [(0.0, "L0", chain(50))]
    jobs += [(0.5 + 1.5 * i, f"s{i}", chain(1)) for i in range(20)]
    jobs += [(30.2, "L1", chain(50))]
    jobs += [(31.0 + 1.5 * i, f"t{i}", chain(1)) for i in range(10)]
    w = workload(*sorted(jobs, key=lambda j: j[0]), executors=2)
    analytic, base, idles = _run_pair(w, "sjf-cp", 0)
    assert idles == 1
    assert avg_jct(analytic) < 0.6 * avg_jct(base)


@pytest.mark.parametrize("executors", [1, 2])
@pytest.mark.parametrize("stream_cost", [True, False])
def test_never_idles_when_arrivals_are_rare(executors, stream_cost):
    for seed in range(3):
        w = build_workload(
            "synthetic",
            seed,
            interarrival=2000,
            num_executors=executors,
            num_stream=30,
            short_seconds=2,
            long_seconds=50,
            long_fraction=0.3,
        )
        analytic, base, idles = _run_pair(w, "sjf-cp", seed, stream_cost=stream_cost)
        assert idles == 0 and _records(analytic) == _records(base)


def test_paired_comparison_with_the_base(capsys):
    """Average JCT vs the base on common random numbers (reported, not asserted).

    Asserted: every run is legal (simulate completes), and on one executor the default
    rule never idles, so it is exactly its base there.
    """
    lines = []
    for executors, options in [(1, {}), (2, {}), (1, SKEWED), (2, SKEWED), (4, SKEWED)]:
        for load in (0.6, 0.8):
            changes, total_idles = [], 0
            for seed in range(5):
                w = build_workload(
                    "synthetic", 100 + seed, load=load, num_executors=executors, **options
                )
                analytic, base, idles = _run_pair(w, "sjf-cp", 100 + seed)
                changes.append(100 * (avg_jct(analytic) - avg_jct(base)) / avg_jct(base))
                total_idles += idles
                if executors == 1:
                    assert idles == 0 and _records(analytic) == _records(base)
            kind = "skewed" if options else "two-type"
            lines.append(
                f"{kind} K={executors} load={load}: {np.mean(changes):+.2f}% "
                f"(per seed {', '.join(f'{c:+.1f}' for c in changes)}), {total_idles} slots"
            )
    with capsys.disabled():
        print("\nanalytic+sjf-cp vs sjf-cp, avg JCT change:\n  " + "\n  ".join(lines))


def test_one_evaluation_serves_every_threshold_each_applying_its_own():
    # five short jobs then a long one: a slot of gain G; thresholds below and above G/l1
    c = Cluster(1)
    for i in range(5):
        short = c.add_job(chain(1.0), float(i))
        c.apply(Decision(short.stages[0], 1), float(i))
        c.task_finished(0, i + 1.0)
    job = c.add_job(chain(40.0), 5.0)
    low = AnalyticIdleScheduler("sjf-cp", AnalyticIdleConfig(stream_cost=False))
    decision = Decision(job.runnable[0], 1)
    ev = low.explain(c, decision)
    assert ev is not None and ev.inserted and ev.gain > 0
    above = ev.gain / ev.l1 * 1.01
    high = AnalyticIdleScheduler("sjf-cp", AnalyticIdleConfig(stream_cost=False, min_gain=above))
    assert high.evaluation_key == low.evaluation_key  # (alike but for the threshold)
    own = high.base

    class SharingBase:  # (as a shared replay's base: the evaluation of the rule alike)
        def decide(self, view: Any) -> Any:
            return own.decide(view)

        def reset(self, rng: Any) -> None:
            own.reset(rng)

        def shared_evaluation(self, member: Any, view: Any, decision: Any) -> Any:
            assert member is high
            return low.evaluate(view, decision)

    high.base = SharingBase()
    shared = high.explain(c, decision)
    assert shared is not None and not shared.inserted and shared.gain == ev.gain
    assert shared == replace(ev, inserted=False)
    other = AnalyticIdleScheduler("sjf-cp", AnalyticIdleConfig(stream_cost=True))
    assert other.evaluation_key != low.evaluation_key
