"""Being overtaken (issue 80, item 1): a live pool whose replays invent no arrivals raises a
waiting workflow's interval tops by the later arrivals that may go ahead of it, counted
from the pool's own arrival events (`sim.forecast_overtake`). Known answers of the math,
then the pool's request and the replays' result."""

from __future__ import annotations

import math

import pytest

from idlegate.api.task_pods import Owner
from idlegate.operator.forecasting.request import ForecastRequest, compute
from idlegate.policy.heuristics import SrptScheduler
from idlegate.sim.cluster import Cluster
from idlegate.sim.durations import MeasuredDurations
from idlegate.sim.forecast import PoolForecast, Span, WorkflowForecast
from idlegate.sim.forecast_overtake import (
    EXACT,
    Overtake,
    arrival_events,
    count_quantile,
    size_of,
    widen,
)
from idlegate.sim.task_times import EVIDENCE, TaskTimes
from tests.helpers import chain
from tests.operator_fakes import stage
from tests.test_forecast_refresh import T0, Held, refresh_of


def test_a_burst_is_one_arrival_event():
    # (chained: 1 s and 1.5 s apart join, 8 s and 18.1 s apart do not; any order)
    assert arrival_events([30.0, 0.0, 11.9, 1.0, 2.5, 10.0]) == [0.0, 10.0, 30.0]
    assert arrival_events([0.0, 2.0]) == [0.0, 2.0]  # (a gap of exactly 2 s: two events)
    assert arrival_events([]) == []


def test_the_count_quantile_is_the_negative_binomials():
    # NB(1, s) is geometric: P(N ≤ k) = 1 − (1 − s)^(k + 1); at s = ½, 0.9 first at k = 3
    assert count_quantile(1, 0.5) == 3
    # NB(2, ½): P(N = k) = (k + 1) / 2^(k + 2); the sums .25 .5 .6875 .8125 .8906 .9375
    assert count_quantile(2, 0.5) == 5
    assert count_quantile(2, 0.5, 0.89) == 4
    assert count_quantile(3, 1.0) == 0  # (a rate known to be 0 over the wait: none)
    with pytest.raises(ValueError, match="shape is > 0"):
        count_quantile(0, 0.5)


def test_past_its_exact_range_the_count_quantile_is_near_the_sums():
    shape, s = 50.0, 0.1  # (mean 450, past `EXACT`)
    assert shape * (1 - s) / s > EXACT
    # the sum, in logs (the terms underflow at s^50)
    log_p, total, k = shape * math.log(s), 0.0, 0
    while True:
        total += math.exp(log_p)
        if total >= 0.9:
            break
        log_p += math.log((k + shape) / (k + 1) * (1 - s))
        k += 1
    assert count_quantile(shape, s) == pytest.approx(k, rel=0.02)


def dags(*works: float) -> list[tuple[float, float, int]]:
    return [size_of(chain(w)) for w in works]


def test_a_pool_without_a_gap_between_two_events_has_no_rate():
    burst = [(0.0, 100.0), (1.0, 100.0), (2.5, 50.0)]
    assert Overtake.of(burst, 30.0, dags(100, 50), 4) is None
    assert Overtake.of([*burst, (60.0, 10.0)], 30.0, dags(100), 4) is None  # (later: unseen)
    assert Overtake.of([*burst, (60.0, 10.0)], 90.0, [], 4) is None  # (nothing to copy)
    found = Overtake.of([*burst, (60.0, 10.0)], 90.0, dags(100, 50), 4)
    # n = 1 event after the first, T = 90 s from the first to now
    assert found == Overtake(1, 90.0, ((100.0, 100.0, 0), (50.0, 50.0, 0)), 4.0)


def test_the_delay_is_the_count_ahead_times_the_smaller_arrivals_work():
    sizes = ((10.0, 5.0, 0), (20.0, 30.0, 0), (30.0, 1.0, 0), (40.0, 2.0, 0))
    o = Overtake(events=1, exposure=100.0, sizes=sizes, executors=10.0)
    # key 35: three of four smaller (p = ¾); over a 100 s wait s = 100 / (100 + 75) = 4/7,
    # and 1 − (3/7)^(k + 1) ≥ 0.9 first at k = 2: two arrivals of their mean 20 s of work
    # on 10 executors
    assert o.delay("remaining_work", 35.0, 100.0) == pytest.approx(2 * 20.0 / 10.0)
    assert o.delay("total_work", 35.0, 100.0) == pytest.approx(4.0)
    # by critical path the smaller (cp 1, 2, 5) are the works 30, 40, 10
    assert o.delay("remaining_cp", 6.0, 100.0) == pytest.approx(2 * (80.0 / 3) / 10.0)
    assert o.delay("remaining_work", 10.0, 100.0) == 0.0  # (none smaller: a tie waits)
    assert o.delay(None, 35.0, 100.0) == 0.0  # (no order: none goes ahead)
    assert o.delay("remaining_work", 35.0, 0.0) == 0.0  # (no wait)
    # a longer wait, a higher count: s = 100 / 850, 1 − (1 − s)^(k + 1) ≥ 0.9 at k = 18
    assert o.delay("remaining_work", 35.0, 1000.0) == pytest.approx(18 * 2.0)


def test_a_later_arrival_of_higher_priority_goes_ahead_under_any_rule():
    # issue 93: the order the admission starts workflows in, priority first, then the key
    sizes = ((10.0, 5.0, 0), (20.0, 30.0, 0), (30.0, 1.0, 5), (40.0, 2.0, 0))
    o = Overtake(events=1, exposure=100.0, sizes=sizes, executors=10.0)
    # key 15 at priority 0: the 30 of priority 5 and the 10 go ahead (p = ½), s = 2/3,
    # 1 − (1/3)^(k + 1) ≥ 0.9 first at k = 2: two of their mean 20 s on 10 executors
    assert o.delay("remaining_work", 15.0, 100.0) == pytest.approx(2 * 20.0 / 10.0)
    # no order key: the one of priority 5 alone (p = ¼, s = 0.8, k = 1)
    assert o.delay(None, 15.0, 100.0) == pytest.approx(30.0 / 10.0)
    assert o.delay("remaining_work", 15.0, 100.0, priority=5) == 0.0  # (30 > 15: behind)
    assert o.delay("remaining_work", 35.0, 100.0, priority=5) == pytest.approx(3.0)
    assert o.delay(None, 15.0, 100.0, priority=9) == 0.0


def test_a_waiting_workflow_is_raised_by_higher_priority_arrivals_under_fifo():
    cluster = Cluster(1)
    cluster.add_job(chain(100.0), 0.0, "running")
    waiting = cluster.add_job(chain(100.0), 0.0, "waiting")
    cluster.decide_once(SrptScheduler(), 0.0)
    result = PoolForecast(
        0.0,
        1,
        (WorkflowForecast(1, "waiting", 0, 1, Span(90, 100, 110), Span(190, 200, 210)),),
    )
    o = Overtake(1, 100.0, ((50.0, 50.0, 0), (100.0, 100.0, 1000)), 1.0)
    (entry,) = widen(result, cluster, o, None).workflows
    assert isinstance(entry, WorkflowForecast)
    assert entry.start.high == 110 + o.delay(None, 0.0, 100.0) > 110
    waiting.priority = 1000  # (of the same priority: none goes ahead under fifo)
    (entry,) = widen(result, cluster, o, None).workflows
    assert entry == result.workflows[0]


def test_only_waiting_workflows_tops_are_raised():
    cluster = Cluster(1)
    cluster.add_job(chain(100.0), 0.0, "running")
    cluster.add_job(chain(100.0), 0.0, "waiting")
    cluster.decide_once(SrptScheduler(), 0.0)
    started, waiting = cluster.jobs
    assert started.first_start == 0.0 and waiting.first_start is None
    result = PoolForecast(
        0.0,
        1,
        (
            WorkflowForecast(0, "running", 0, None, Span(0, 0, 0), Span(90, 100, 110)),
            WorkflowForecast(1, "waiting", 0, 1, Span(90, 100, 110), Span(190, 200, 210)),
        ),
    )
    o = Overtake(1, 100.0, ((50.0, 50.0, 0), (100.0, 100.0, 0)), 1.0)
    late = o.delay("remaining_work", 100.0, 100.0)
    assert late > 0
    raised = widen(result, cluster, o, "remaining_work")
    assert raised.workflows[0] == result.workflows[0]
    entry = raised.workflows[1]
    assert isinstance(entry, WorkflowForecast)
    assert entry.start == Span(90, 100, 110 + late)  # (the point and the bottom stay)
    assert entry.finish == Span(190, 200, 210 + late)
    assert widen(result, cluster, o, None) is result


def two_events() -> Cluster:
    """One executor: a 100 s workflow arrived at T0 and runs; 10 s later a burst of two
    (100 s and 50 s) waits, srpt starting the 50 s one first."""
    cluster = Cluster(1)
    cluster.advance(T0)
    for name, work, at in (("w0", 100.0, T0), ("w1", 100.0, T0 + 10), ("w2", 50.0, T0 + 10)):
        cluster.advance(at)
        owner = Owner("t", name, f"uid-{name}", "DagWorkflow")
        cluster.add_job(chain(work), at, name, Held(owner, MeasuredDurations([work])))
        while cluster.decide_once(SrptScheduler(), at) is not None:
            pass
    return cluster


def live_times() -> TaskTimes:
    times = TaskTimes()
    for _ in range(EVIDENCE):
        times.record(100.0, 100.0, 100.0)  # (no latency, no stretch: the replays as declared)
    return times


def test_a_live_pool_asks_its_replays_to_count_being_overtaken():
    cluster = two_events()
    refresh, _ = refresh_of(cluster, SrptScheduler(), times=live_times())
    request = refresh.request()
    # two events (T0; the burst at T0 + 10), 10 s from the first to now
    assert request.overtake == Overtake(
        1, 10.0, ((100.0, 100.0, 0), (100.0, 100.0, 0), (50.0, 50.0, 0)), 1
    )
    plain = ForecastRequest(request.fork, request.scheduler, request.seed)
    with_it = compute(request, 4, 10_000)[0].of(1)
    without = compute(plain, 4, 10_000)[0].of(1)
    assert isinstance(with_it, WorkflowForecast) and isinstance(without, WorkflowForecast)
    # w1 waits for w0 (to T0 + 100) and w2 (to T0 + 150): a lead of 140 s, in which the
    # 50 s one (p = ⅓) comes at a rate of Gamma(1, 10): s = 10 / (10 + 140/3) = 3/17 and
    # 1 − (14/17)^(k + 1) ≥ 0.9 first at k = 11, each 50 s on the one executor
    assert without.start.median == pytest.approx(T0 + 150)
    assert with_it.start == without.start._replace(high=without.start.high + 11 * 50.0)
    assert with_it.finish == without.finish._replace(high=without.finish.high + 11 * 50.0)
    assert with_it.start.median == without.start.median  # (the forecast itself stays)
    refresh.close()


def test_a_pool_that_learns_no_task_times_or_invents_arrivals_adds_nothing():
    cluster = two_events()
    refresh, _ = refresh_of(cluster, SrptScheduler())  # (the simulator's: no live times)
    assert refresh.request().overtake is None
    refresh.close()
    invents, _ = refresh_of(cluster, SrptScheduler(), times=live_times(), arrivals="poisson")
    assert invents.request().overtake is None  # (its replays spread over arrivals already)
    invents.close()


def test_a_what_if_counts_being_overtaken_as_the_refresh_does():
    from idlegate.operator.forecasting.whatif import what_if

    cluster = two_events()
    refresh, _ = refresh_of(cluster, SrptScheduler(), times=live_times())
    body = {"kind": "DagWorkflow", "metadata": {"name": "asked"}, "spec": {"stages": [stage("a")]}}
    snap, _ = what_if(cluster, SrptScheduler(), body, 0, 0, cluster.now)
    asked, _ = refresh.for_what_if(snap)
    assert asked.overtake == refresh.request().overtake
    assert asked.overtake is not None
    refresh.close()
