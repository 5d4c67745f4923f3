"""The planner's future sources and the conditional arrival model (policy.futures,
policy.arrival_model)."""

from __future__ import annotations

from importlib.resources import files

import numpy as np
import pytest

from idlegate.errors import IdlegateError
from idlegate.policy import make_scheduler
from idlegate.policy.arrival_model import (
    Arrival,
    ConditionalModel,
    DetectedSchedule,
    FuturesConfig,
    Hawkes,
    detect_schedule,
    fit_hawkes,
    kernel_cdf,
    pairs,
    sample_lags,
    schedule_mass,
    size_breaks,
    size_class,
    stem,
)
from idlegate.policy.futures import OracleSource, Selector, history_arrivals, make_source
from idlegate.policy.lookahead import LookaheadScheduler
from idlegate.sim.cluster import Cluster
from idlegate.sim.engine import simulate
from idlegate.sim.workloads import build_workload
from tests.helpers import chain, workload

HISTORY = str(files("idlegate.training") / "examples" / "history.yaml")  # from any directory


def arrivals_of(workload) -> list[Arrival]:
    return [Arrival(a.time, a.dag.total_work, stem(a.name), a) for a in workload.jobs]


# -- the math: known answers ----------------------------------------------------------------


def test_stem_drops_an_index_or_a_generated_suffix():
    assert stem("etl-report-7") == "etl-report"
    assert stem("etl-report-x7k2q") == "etl-report"
    assert stem("long-12") == "long"
    assert stem("nightly") == "nightly"


def test_size_breaks_cut_at_the_widest_log_gaps():
    assert size_breaks([10, 10, 11, 95, 100], 3, 2.0) == pytest.approx([(11 * 95) ** 0.5])
    assert size_breaks([1, 10, 100], 3, 2.0) == pytest.approx([10**0.5, 1000**0.5])
    assert size_breaks([10, 12, 15], 3, 2.0) == []  # no jump of 2x: one class
    assert size_breaks([1, 100], 1, 2.0) == []
    assert size_class(5.0, [30.0]) == 0 and size_class(50.0, [30.0]) == 1


def test_detect_schedule_needs_regular_gaps():
    assert detect_schedule([0, 100, 200, 300], 4, 0.2) == DetectedSchedule(
        100.0, 2.0
    )  # spread floor
    assert detect_schedule([0, 100, 205, 300], 4, 0.2).period == pytest.approx(100.0)
    assert detect_schedule([0, 10, 200, 210], 4, 0.2) is None
    assert detect_schedule([0, 100, 200], 4, 0.2) is None


def test_schedule_mass_counts_expected_runs():
    s = DetectedSchedule(100.0, 1.0)
    assert schedule_mass(s, 0.0, 0.0, 350.0) == pytest.approx(3.0)
    assert schedule_mass(s, 0.0, 0.0, 100.0) == pytest.approx(0.5)
    assert schedule_mass(s, 0.0, 150.0, 180.0) == pytest.approx(0.0, abs=1e-9)


def test_kernel_cdf_is_piecewise_linear():
    h = np.array([0.5, 0.25, 0.25])  # bins of 2 s
    assert kernel_cdf(h, 2.0, np.array([-1.0, 0.0, 1.0, 2.0, 3.0, 6.0, 9.0])).tolist() == (
        pytest.approx([0.0, 0.0, 0.25, 0.5, 0.625, 1.0, 1.0])
    )


def test_pairs_are_the_ordered_pairs_within_the_lag():
    parent, child = pairs(np.array([0.0, 1.0, 1.0, 5.0]), 2.0)
    assert list(zip(parent.tolist(), child.tolist(), strict=True)) == [(0, 1), (0, 2), (1, 2)]


def test_sample_lags_respect_the_elapsed_time():
    rng = np.random.default_rng(0)
    lags = sample_lags(np.array([0.5, 0.5, 0.0]), 10.0, 12.0, 500, rng)
    assert lags.min() >= 12.0 and lags.max() <= 20.0
    assert len(sample_lags(np.array([1.0, 0.0]), 10.0, 15.0, 5, rng)) == 0


def test_hawkes_intensity_and_mass_by_hand():
    hk = Hawkes(np.array([0.1]), np.array([[2.0]]), np.array([[[1.0, 0.0]]]), 5.0)
    times, classes = np.array([0.0]), np.array([0])
    # 2 children over the first 5 s: intensity 0.1 + 2/5
    assert hk.intensity(np.array([0.0, 3.0]), np.array([0, 0]), 1) == pytest.approx(0.5)
    assert hk.mass(times, classes, 0.0, 10.0) == pytest.approx(0.1 * 10 + 2.0)
    assert hk.mass(times, classes, 2.5, 10.0) == pytest.approx(0.1 * 7.5 + 1.0)


def test_em_finds_children_and_no_children():
    rng = np.random.default_rng(1)
    parents = np.sort(rng.random(300) * 30_000)
    kids = parents + 5.0 + rng.random(300) * 5.0  # each parent: one child 5-10 s later
    times = np.concatenate([parents, kids])
    classes = np.concatenate([np.ones(300, int), np.zeros(300, int)])
    order = np.argsort(times, kind="stable")
    cfg = FuturesConfig()
    hk = fit_hawkes(times[order], classes[order], 2, 30_000.0, cfg)
    assert hk.alpha[1, 0] == pytest.approx(1.0, abs=0.1)
    assert hk.alpha[0, 1] < 0.1 and hk.alpha[1, 1] < 0.1
    assert hk.mu[1] == pytest.approx(0.01, rel=0.15)
    plain = np.sort(rng.random(400) * 40_000)
    hk = fit_hawkes(plain, np.zeros(400, int), 1, 40_000.0, cfg)
    assert hk.alpha[0, 0] < 0.15 and hk.mu[0] == pytest.approx(0.01, rel=0.15)


# -- the model on the structured workloads --------------------------------------------------


def held_out_gain(name: str, **options) -> float:
    """Conditional − Poisson held-out log-likelihood per arrival, fit on the first 150."""
    w = build_workload(name, 3, num_executors=2, load=0.7, num_jobs=200, **options)
    arr = arrivals_of(w)
    m = ConditionalModel().fit(arr[:150])
    start, end = arr[149].time, arr[-1].time
    gain = m.log_likelihood(arr, start, end) - m.poisson_log_likelihood(arr, start, end)
    return gain / 50


def test_conditional_predicts_follow_push_and_recurring_better():
    assert held_out_gain("follow") > 0.2
    assert held_out_gain("push") > 0.2
    assert held_out_gain("recurring") > 0.5


def test_on_poisson_arrivals_conditional_gains_nothing():
    assert held_out_gain("follow", uncorrelated=1.0) < 0.05


def test_recurring_schedules_are_found_and_sampled():
    arr = arrivals_of(build_workload("recurring", 0, num_executors=4, load=0.7, num_jobs=120))
    m = ConditionalModel().fit(arr)
    assert {"dashboard", "ingest", "ingest-report", "train"} <= set(m.schedules)
    now = arr[-1].time
    last = max(a.time for a in arr if a.stem == "dashboard")
    drawn = m.sample(now, 2 * m.schedules["dashboard"].period, np.random.default_rng(0))
    dash = [t for t, job in drawn if stem(job.name) == "dashboard"]
    assert dash and abs(dash[0] - (last + m.schedules["dashboard"].period)) < 10


def test_after_a_long_job_its_session_is_expected():
    arr = arrivals_of(build_workload("follow", 3, num_executors=2, load=0.7, num_jobs=200))
    m = ConditionalModel().fit(arr)
    rng = np.random.default_rng(0)
    long_job = max(arr, key=lambda a: a.work)
    after = arr[-1].time + 1.0
    with_long = m.fit([*arr, long_job._replace(time=after)], after)
    shorts_after = np.mean(
        [
            sum(job.dag.total_work < 30 for t, job in with_long.sample(after, 30, rng))
            for _ in range(200)
        ]
    )
    m.fit(arr, after)
    shorts_plain = np.mean(
        [sum(job.dag.total_work < 30 for t, job in m.sample(after, 30, rng)) for _ in range(200)]
    )
    assert shorts_after > shorts_plain + 1.5


def test_fit_needs_two_arrivals():
    with pytest.raises(IdlegateError, match="at least 2 arrivals"):
        ConditionalModel().fit([])


def test_fit_offline_from_a_history_file():
    arr = history_arrivals(HISTORY)
    assert len(arr) >= 2 and arr == sorted(arr, key=lambda a: a.time)
    m = ConditionalModel().fit(arr)
    assert sum(len(js) for js in m.templates.values()) == len(arr)


# -- selection by evidence and the sources --------------------------------------------------


def prequential(name: str, **options) -> Selector:
    arr = arrivals_of(build_workload(name, 5, num_executors=2, load=0.7, num_jobs=150, **options))
    sel = Selector(ConditionalModel())
    for i in range(2, len(arr) + 1):
        sel.update(arr[:i], arr[i - 1].time)
    return sel


def test_auto_picks_conditional_on_follow_and_poisson_on_poisson():
    assert prequential("push").conditional_wins()
    assert prequential("follow").conditional_wins()
    assert not prequential("follow", uncorrelated=1.0).conditional_wins()


def test_selector_waits_for_enough_arrivals():
    sel = Selector(ConditionalModel(FuturesConfig(min_arrivals=50)))
    arr = arrivals_of(build_workload("follow", 0, num_executors=2, load=0.7, num_jobs=40))
    sel.update(arr, arr[-1].time)
    assert sel.fitted_at is None and sel.advantage() is None and not sel.conditional_wins()


def test_oracle_is_a_scheduler_spec_told_by_the_simulator():
    w = build_workload("follow", 1000, num_executors=2, load=0.7, num_jobs=40)
    p = make_scheduler("lookahead?mode=decision&futures=oracle:sjf")
    assert isinstance(p, LookaheadScheduler) and isinstance(p.futures, OracleSource)
    seen = []
    original = p.sample_futures

    def spy(view, horizon):
        out = original(view, horizon)
        seen.append((view.now, out))
        return out

    p.sample_futures = spy  # type: ignore[method-assign]
    assert simulate(w, p, 1000).unfinished == 0
    now, futures = seen[0]
    assert [a.time for a in futures[0].arrivals] == [a.time for a in w.jobs if a.time > now]


def test_oracle_without_the_simulator_says_so():
    p = make_scheduler("lookahead?mode=decision&futures=oracle:sjf")
    c = Cluster(2)
    with pytest.raises(IdlegateError, match="only the simulator knows"):
        p.sample_futures(c, 10.0)


@pytest.mark.parametrize("kind", ["conditional", "auto"])
def test_conditional_planners_run_and_repeat(kind):
    w = build_workload("follow", 1, num_executors=2, load=0.7, num_jobs=60)
    spec = f"lookahead?mode=decision&futures={kind}:sjf"
    runs = [simulate(w, make_scheduler(spec), 7) for _ in range(2)]
    assert runs[0].unfinished == 0
    assert [r.jct for r in runs[0].records] == [r.jct for r in runs[1].records]


def test_a_history_prior_fits_from_the_first_decision():
    source = make_source("conditional", FuturesConfig(min_arrivals=2), history=HISTORY)
    assert len(source.arrivals) == len(history_arrivals(HISTORY))
    assert max(a.time for a in source.arrivals) < 0  # the past before the run
    c = Cluster(2)
    job = c.add_job(chain(10.0), 0.0, "adhoc-1")
    source.observe(job)
    futures = source.futures(c, [job], 50.0, 2, np.random.default_rng(0))
    assert source.used_model == 1 and len(futures) == 2


# -- the expected future and idle candidates at arrivals --------------------------------


def test_the_expected_future_holds_the_session_a_long_job_brings():
    arr = arrivals_of(build_workload("follow", 3, num_executors=2, load=0.7, num_jobs=200))
    long_job = max(arr, key=lambda a: a.work)
    after = arr[-1].time + 100.0  # past every earlier arrival's lags
    m = ConditionalModel().fit([*arr, long_job._replace(time=after)], after)
    drawn = m.expected(after, 30.0, 64, np.random.default_rng(0))
    plain = ConditionalModel().fit(arr, after).expected(after, 30.0, 64, np.random.default_rng(0))

    def shorts(future: list) -> int:
        return sum(job.dag.total_work < 30 for _, job in future)

    # 80 % of long jobs bring 3-4 short ones, most within 30 s: 2-3 more expected
    assert 2 <= shorts(drawn) - shorts(plain) <= 4
    assert all(after < t <= after + 30.0 for t, _ in drawn)
    assert [t for t, _ in drawn] == sorted(t for t, _ in drawn)
    again = m.expected(after, 30.0, 64, np.random.default_rng(0))
    assert [t for t, _ in again] == [t for t, _ in drawn]


def test_the_expected_count_is_the_rounded_mean_count():
    # a scheduled stem every 100 s: one run expected in the next 100 s, at its time
    times = [100.0 * i for i in range(6)]
    arr = [Arrival(t, 50.0, "nightly", f"job-{i}") for i, t in enumerate(times)]
    m = ConditionalModel(FuturesConfig(min_arrivals=2)).fit(arr, 520.0)
    drawn = m.expected(520.0, 100.0, 32, np.random.default_rng(1))
    assert len(drawn) == 1 and abs(drawn[0][0] - 600.0) < 5.0 and drawn[0][1] == "job-5"


def test_the_expected_source_plans_on_one_future_and_none_without_evidence():
    source = make_source("expected")
    w = build_workload("follow", 5, num_executors=2, load=0.7, num_jobs=80)
    c = Cluster(2)
    jobs = [c.add_job(a.dag, a.time, a.name, a.durations) for a in w.jobs]
    for job in jobs[:20]:
        source.observe(job)
    c.now = jobs[19].arrival
    # too few arrivals scored yet: no future, the planner keeps BASE's pick
    assert source.futures(c, jobs[:20], 100.0, 4, np.random.default_rng(0)) == []
    offered = []
    for i in range(20, 80):
        source.observe(jobs[i])
        c.now = jobs[i].arrival
        futures = source.futures(c, jobs[: i + 1], 100.0, 4, np.random.default_rng(0))
        assert len(futures) == (1 if source.selector.conditional_wins() else 0)
        offered += [(c.now, f) for f in futures]
    assert source.used_model == len(offered) > 0
    for now, future in offered:
        assert all(now < a.time <= now + 100.0 for a in future.arrivals)


def test_idle_candidates_end_at_the_next_arrivals():
    """DESIGN.md's example with no idle levels: the slot that ends at B's arrival (2 s)."""
    w = workload((0.0, "A", chain(20.0)), (2.0, "B", chain(4.0)))
    options = "mode=decision&futures=oracle&horizon=100&idle_levels=0&wait=false&candidates=fair"
    without = make_scheduler(f"lookahead?{options}:srpt")
    assert {r.name: r.jct for r in simulate(w, without, 0).records} == {"A": 20.0, "B": 22.0}
    p = make_scheduler(f"lookahead?{options}&idle_at_arrivals=1:srpt")
    assert {r.name: r.jct for r in simulate(w, p, 0).records} == {"A": 26.0, "B": 4.0}
    assert p.stats.idles == 1


@pytest.mark.parametrize("mode", ["decision", "switch"])
def test_without_a_future_to_offer_the_planner_follows_its_base(mode):
    # 12 arrivals: the expected source has nothing fitted yet, so no future at all
    w = build_workload("follow", 2, num_executors=2, load=0.7, num_jobs=12)
    p = make_scheduler(f"lookahead?mode={mode}&futures=expected:analytic:sjf")
    alone = simulate(w, make_scheduler("analytic:sjf"), 2)
    planned = simulate(w, p, 2)
    assert [r.jct for r in planned.records] == [r.jct for r in alone.records]
    assert p.stats.changed == 0
