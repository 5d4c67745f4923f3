"""The forecaster (sim.forecast): known answers on tiny pools, seeds, and what it refuses."""

from __future__ import annotations

from math import inf
from typing import Any

import pytest

from idlegate.policy import make_scheduler
from idlegate.sim.admission import Admission
from idlegate.sim.cluster import Cluster
from idlegate.sim.dag import Dag
from idlegate.sim.durations import MeasuredDurations
from idlegate.sim.engine import Engine, Fidelity, JobArrival, Workload
from idlegate.sim.forecast import (
    MEDIAN,
    START_UNSEEN,
    PoolForecast,
    Span,
    WorkflowForecast,
    WorkflowUnavailable,
    forecast,
    quantile,
    start_quantile,
)
from idlegate.sim.protocol import ClusterView, Job, Stage
from idlegate.sim.queues import QueueSpec
from idlegate.sim.rollout import Future
from tests.helpers import chain, workload


def state_at(w: Workload, t: float, rule: str = "fifo") -> Cluster:
    """The cluster of `w` run under `rule` up to time `t` (its events at `t` applied)."""
    engine = Engine.for_workload(w, make_scheduler(rule), 0)
    engine.run(t)
    return engine.cluster


def entry(f: PoolForecast, job_id: int) -> WorkflowForecast:
    out = f.of(job_id)
    assert isinstance(out, WorkflowForecast), out
    return out


def test_one_executor_b_starts_when_a_ends_exactly() -> None:
    # A (20 s) runs from 0; at t=10 it has 10 s left and B (5 s) waits: B starts at +10
    # and finishes at +15, in every replay, when durations are the estimates
    w = workload((0.0, "a", chain(20.0)), (1.0, "b", chain(5.0)))
    f = forecast(state_at(w, 10.0), make_scheduler("fifo"), seed=3, replays=5)
    a, b = entry(f, 0), entry(f, 1)
    assert a.start == Span(0.0, 0.0, 0.0) and a.position is None
    assert a.finish == Span(20.0, 20.0, 20.0)
    assert b.start == Span(20.0, 20.0, 20.0) and b.position == 1
    assert b.finish == Span(25.0, 25.0, 25.0)
    assert f.replays == 5 and f.now == 10.0


def test_the_pools_scheduler_orders_the_queue() -> None:
    # one executor busy until 10; B (8 s) arrived before C (2 s): FIFO starts B first,
    # SJF starts C first; the positions stay in arrival order either way
    w = workload((0.0, "a", chain(10.0)), (1.0, "b", chain(8.0)), (2.0, "c", chain(2.0)))
    fifo = forecast(state_at(w, 5.0), make_scheduler("fifo"), replays=1)
    sjf = forecast(state_at(w, 5.0), make_scheduler("sjf-cp"), replays=1)
    assert (entry(fifo, 1).start.median, entry(fifo, 2).start.median) == (10.0, 18.0)
    assert (entry(sjf, 2).start.median, entry(sjf, 1).start.median) == (10.0, 12.0)
    assert [entry(fifo, j).position for j in (1, 2)] == [1, 2]


INDEXES = ("shapes", "shares", "_orders", "_marks", "_alone", "_result", "_views")
"""The indexes of the jobs kept from them (`Cluster.touch`) and the results made once
a question (the admission's and its views): not the state."""


def whole_state(cluster: Cluster) -> Any:
    """Everything a cluster holds, its jobs' and stages' every slot included, as plain
    values (a job or stage by its id, any other object as itself), indexes aside."""

    path: set[int] = set()

    def plain(value: Any) -> Any:
        if isinstance(value, Cluster):
            return "cluster"
        if isinstance(value, Dag):  # (immutable, shared with the forks; its caches aside)
            return ("dag", id(value))
        if isinstance(value, Job):
            return ("job", value.id)
        if isinstance(value, Stage):
            return ("stage", value.job.id, value.index)
        if isinstance(value, dict):
            return [(plain(k), plain(v)) for k, v in value.items()]
        if isinstance(value, list | tuple):
            return [plain(v) for v in value]
        if hasattr(value, "__dict__") and not callable(value) and id(value) not in path:
            path.add(id(value))  # (an object met again on its own path: by its type)
            fields = {k: v for k, v in vars(value).items() if k not in INDEXES}
            found = (type(value).__name__, plain(fields))
            path.discard(id(value))
            return found
        return value if id(value) not in path else type(value).__name__

    def slots(obj: Any, skip: str) -> dict[str, Any]:
        return {n: plain(getattr(obj, n)) for n in type(obj).__slots__ if n != skip}

    jobs = [(slots(j, "stages"), [slots(s, "job") for s in j.stages]) for j in cluster.jobs]
    kept = {k: plain(v) for k, v in vars(cluster).items() if k not in INDEXES}
    return jobs, kept


def test_forecasting_leaves_the_cluster_as_it_was() -> None:
    # the promise (`forecast`'s docstring): the cluster is left as it is, each replay on
    # a fork; compared whole (every job's and stage's slot, every executor, the clock,
    # the queues' admission), not a few fields; with queues too (its positions are read)
    w = workload((0.0, "a", chain(20.0)), (1.0, "b", chain(5.0)), (2.0, "c", chain(3.0)))
    for queued in (False, True):
        cluster = state_at(w, 10.0)
        if queued:
            specs = (QueueSpec("a", {"pods": 1000}),)
            cluster.admission = Admission(specs, cluster.capacity, cluster.resource_names)
            cluster.admission_result()  # (its question open, as a live pool's is)
        before = whole_state(cluster)
        made = forecast(cluster, make_scheduler("fifo"), replays=3)
        assert made.replays == 3 and whole_state(cluster) == before


def test_positions_are_the_order_the_policy_starts_them_in() -> None:
    # a position is the admission's order: priority, then the policy's own order where
    # it says one (sjf-cp: the shortest critical path), else arrival (fifo)
    w = workload(
        (0.0, "a", chain(20.0)), (1.0, "b", chain(5.0)), (2.0, "c", chain(1.0)), executors=1
    )
    for rule, order in (("fifo", [None, 1, 2]), ("sjf-cp", [None, 2, 1])):
        cluster = state_at(w, 3.0, rule)
        f = forecast(cluster, make_scheduler(rule), replays=1)
        assert [entry(f, j).position for j in (0, 1, 2)] == order
        assert [cluster.admission_result().position(j) for j in cluster.jobs] == order
        assert [entry(f, j).start.median for j in (1, 2)] == (
            [20.0, 25.0] if rule == "fifo" else [21.0, 20.0]
        )


class Spread:
    """Each task lasts 1, 2, …, 10 s with equal odds (a duration model)."""

    def sample(self, stage: int, job_executors: int, first: bool, moved: bool, u: Any) -> float:
        return float(int(u.next() * 10) + 1)


WAVES = Fidelity(moving_delay=0.0)
"""Tasks last their model's draws (a synthetic workload's default runs the estimates)."""


def spread_workload() -> Workload:
    jobs = (JobArrival(0.0, "a", chain(5.0), Spread()), JobArrival(0.5, "b", chain(5.0), Spread()))
    return Workload("spread", jobs, 1, WAVES)


def test_same_seed_same_forecast_and_an_interval_from_the_draws() -> None:
    cluster = state_at(spread_workload(), 0.5)
    one = forecast(cluster, make_scheduler("fifo"), seed=7, replays=200)
    assert one == forecast(cluster, make_scheduler("fifo"), seed=7, replays=200)
    assert one != forecast(cluster, make_scheduler("fifo"), seed=8, replays=200)
    b = entry(one, 1)
    # A has run 0.5 s of a 1..10 s draw: it ends at 1..10, B 1..10 s after it
    assert 1.0 <= b.start.low < b.start.median < b.start.high <= 10.0
    assert b.start.high < b.finish.high <= 20.0


def test_a_running_task_outlives_what_it_has_run() -> None:
    # at t=6 A's draw must exceed 6 s: it ends at 7..10 (never before now)
    w = Workload("spread", (JobArrival(0.0, "a", chain(5.0), Spread()),), 1, WAVES)
    engine = Engine.for_workload(w, make_scheduler("fifo"), 6)
    engine.run(6.0)
    assert engine.cluster.jobs  # (seed 6's draw: A runs past t=6)
    f = forecast(engine.cluster, make_scheduler("fifo"), seed=2, replays=100)
    assert entry(f, 0).finish.low >= 7.0 and entry(f, 0).finish.high <= 10.0


def test_invented_arrivals_delay_who_they_overtake() -> None:
    # SJF: a 1 s job arriving at t=9 overtakes B (5 s) when A ends at 20
    w = workload((0.0, "a", chain(20.0)), (1.0, "b", chain(5.0)))
    cluster = state_at(w, 10.0)
    future = Future((JobArrival(12.0, "new", chain(1.0)),), 4)
    f = forecast(cluster, make_scheduler("sjf-cp"), futures=[future])
    assert entry(f, 1).start.median == 21.0 and f.replays == 1


def test_a_stage_without_an_estimate_is_unavailable_with_why() -> None:
    w = workload((0.0, "a", chain(20.0)), (1.0, "b", chain(5.0)))
    cluster = state_at(w, 10.0)
    cluster.jobs[1].payload = MeasuredDurations([float("nan")])  # (the operator's, no estimate)
    f = forecast(cluster, make_scheduler("fifo"), replays=2)
    assert all(isinstance(e, WorkflowUnavailable) for e in f.workflows)
    assert "stage 0 of workflow 'b' has no duration estimate" in f.of(1).reason  # type: ignore[union-attr]
    cluster.jobs[1].payload = MeasuredDurations([float("nan")], [[3.0]])
    assert entry(forecast(cluster, make_scheduler("fifo"), replays=2), 1).finish.median == 23.0


class Broken:
    name = "broken"

    def reset(self, rng: Any) -> None:
        pass

    def decide(self, view: ClusterView) -> Any:
        raise RuntimeError("no model loaded")


def test_a_scheduler_that_raises_makes_every_forecast_unavailable() -> None:
    w = workload((0.0, "a", chain(20.0)), (1.0, "b", chain(5.0)))
    f = forecast(state_at(w, 10.0), Broken(), replays=2)
    reasons = {e.reason for e in f.workflows if isinstance(e, WorkflowUnavailable)}
    assert reasons == {"the scheduler broken raised RuntimeError: no model loaded"}


def test_beyond_the_horizon_is_unavailable_not_a_guess() -> None:
    w = workload((0.0, "a", chain(20.0)), (1.0, "b", chain(5.0)))
    f = forecast(state_at(w, 10.0), make_scheduler("fifo"), horizon=5.0, replays=2)
    assert entry(f, 0).finish.median == inf
    assert "later than the forecast's horizon (5 s ahead)" in f.of(1).reason  # type: ignore[union-attr]


def test_quantile_interpolates_as_numpy_and_inf_stays_inf() -> None:
    assert quantile([1.0, 2.0, 3.0, 4.0], 0.5) == 2.5
    assert quantile([4.0, 1.0, 3.0, 2.0, 5.0], 0.9) == pytest.approx(4.6)
    assert quantile([1.0, inf], 0.5) == inf
    assert quantile([1.0, 2.0, inf], 0.5) == 2.0


def test_a_budget_of_events_stops_adding_replays() -> None:
    # each replay here simulates a few events; a budget of 1 lets only the first one run
    cluster = state_at(spread_workload(), 0.5)
    assert forecast(cluster, make_scheduler("fifo"), replays=6).replays == 6
    capped = forecast(cluster, make_scheduler("fifo"), replays=6, budget=1)
    assert capped.replays == 1
    b = entry(capped, 1)
    assert b.start.low == b.start.median == b.start.high  # (one replay: no interval)


def test_no_replay_starts_that_would_end_past_the_budget() -> None:
    # every replay here simulates the same events (each task's end): within 2.5 replays'
    # events two replays run, not a third that would end past the budget (the rule
    # before issue 96 stopped only once the budget was reached: three); within exactly
    # two, two
    cluster = state_at(spread_workload(), 0.5)
    fifo = make_scheduler("fifo")
    each = forecast(cluster, fifo, replays=1).events
    assert each > 1 and forecast(cluster, fifo, replays=3).events == 3 * each
    capped = forecast(cluster, fifo, replays=6, budget=int(2.5 * each))
    assert capped.replays == 2 and capped.events == 2 * each
    assert forecast(cluster, fifo, replays=6, budget=2 * each).replays == 2


class Ticking:
    """A fake CPU clock: each reading is `step` seconds after the last (one reading at the
    start of the replays and one after each: each replay "takes" `step`)."""

    def __init__(self, step: float) -> None:
        self.step, self.t = step, -step

    def __call__(self) -> float:
        self.t += self.step
        return self.t


def test_a_budget_of_cpu_seconds_starts_no_replay_that_would_end_past_it() -> None:
    cluster = state_at(spread_workload(), 0.5)
    fifo = make_scheduler("fifo")
    # 0.15 s a replay within 1 s: the sixth ends at 0.9, a seventh would at 1.05
    capped = forecast(cluster, fifo, replays=20, seconds=1.0, clock=Ticking(0.15))
    assert capped.replays == 6
    # fewer replays of the same streams, never a guess: what six replays give
    assert capped.workflows == forecast(cluster, fifo, replays=6).workflows
    # the first runs whole even when it alone takes more than the budget
    assert forecast(cluster, fifo, replays=20, seconds=0.1, clock=Ticking(5.0)).replays == 1
    assert forecast(cluster, fifo, replays=20, seconds=None, clock=Ticking(5.0)).replays == 20
    # the core reads no clock of its own: a budget of seconds comes with the caller's
    with pytest.raises(ValueError, match="needs the clock that measures them"):
        forecast(cluster, fifo, replays=20, seconds=1.0)


def test_a_pool_that_follows_its_nodes_is_bounded_by_the_cpu_budget_too() -> None:
    from tests.test_fork_nodes import running_at

    _, cluster = running_at(3.0, "fair")
    fair = make_scheduler("fair")
    whole = forecast(cluster, fair, replays=20, budget=10_000)
    assert whole.replays == 20  # (a few events a replay: the events' budget is not reached)
    # where one replay takes what the budget allows (1.8 s at 200 waiting), it is the only one
    one = forecast(cluster, fair, replays=20, budget=10_000, seconds=0.2, clock=Ticking(1.8))
    assert one.replays == 1
    assert one.workflows == forecast(cluster, fair, replays=1).workflows


def test_a_start_quantile_picks_the_replays_start_and_moves_the_finish_as_much() -> None:
    # one executor, A (20 s) runs until 20, B (5 s) waits under SJF; the four replays'
    # futures bring 0, 1, 2, 3 one-second jobs before 20 that overtake B: B starts at
    # 20, 21, 22, 23 and finishes 5 s later
    w = workload((0.0, "a", chain(20.0)), (1.0, "b", chain(5.0)))
    cluster = state_at(w, 10.0)
    futures = [
        Future(tuple(JobArrival(12.0 + k, f"new-{k}", chain(1.0)) for k in range(n)), n)
        for n in range(4)
    ]
    median = entry(forecast(cluster, make_scheduler("sjf-cp"), futures=futures), 1)
    late = forecast(cluster, make_scheduler("sjf-cp"), futures=futures, start_quantile=0.75)
    b = entry(late, 1)
    assert median.start == Span(20.3, 21.5, 22.7)
    assert b.start == Span(20.3, 22.25, 22.7)  # (0.75 × 3 = 2.25: a quarter past 22)
    assert median.finish == Span(25.3, 26.5, 27.7)
    # the finish read as much later as the start (0.75 s): its ends stay the replays'
    assert b.finish == Span(25.3, 27.25, 27.7)
    assert entry(late, 0).start == Span(0.0, 0.0, 0.0)  # (a started one's start is known)
    for outside in (0.05, 0.95):
        with pytest.raises(ValueError, match="start_quantile is a quantile in"):
            forecast(cluster, make_scheduler("sjf-cp"), futures=futures, start_quantile=outside)


def test_a_late_start_moves_the_finish_as_late_and_never_onto_the_start() -> None:
    # B (5 s) waits behind A (20 s) under SJF; replays 0-3 bring 0, 0, 0 and 10 one-second
    # jobs that overtake it: B starts at 20, 20, 20, 30 and ends 5 s later. The starts'
    # 0.9 quantile (27.0) is 7 s past their median (20.0): the finish is read 7 s past
    # the finishes' median (25.0), at 32.0, its run (5 s) after the start; before issue
    # 96 it was raised to the start alone (27.0), a finish without its run
    w = workload((0.0, "a", chain(20.0)), (1.0, "b", chain(5.0)))
    cluster = state_at(w, 10.0)
    futures = [
        Future(tuple(JobArrival(12.0 + k / 10, f"new-{k}", chain(1.0)) for k in range(n)), i)
        for i, n in enumerate((0, 0, 0, 10))
    ]
    b = entry(forecast(cluster, make_scheduler("sjf-cp"), futures=futures, start_quantile=0.9), 1)
    assert b.start.median == pytest.approx(27.0)
    assert b.finish.median == pytest.approx(32.0) and b.finish.high >= b.finish.median
    assert b.finish.low == 25.0  # (the interval's ends stay the replays')
    # at the median (replays that invent arrivals) the finish is the replays' own
    median = entry(forecast(cluster, make_scheduler("sjf-cp"), futures=futures), 1)
    assert median.finish.median == 25.0 and median.start.median == 20.0


def test_the_start_quantile_is_later_only_where_no_arrivals_are_invented() -> None:
    assert start_quantile(invented=False) == START_UNSEEN == 0.75
    assert start_quantile(invented=True) == MEDIAN == 0.5
