"""A live pool's own task times (issue 80, "Calibrate live"): what the operator learns of its
tasks' start latency and stretch as they end, how a forecast's replays draw from it, and how
far off its average may be (`idlegate.sim.task_times`)."""

from __future__ import annotations

import math
import statistics

import numpy as np
import pytest

from idlegate.policy import make_scheduler
from idlegate.sim.cluster import Cluster
from idlegate.sim.durations import MeasuredDurations, Uniforms
from idlegate.sim.forecast import WorkflowForecast, forecast
from idlegate.sim.task_times import (
    EVIDENCE,
    LiveTimes,
    TaskTimes,
    censored_lognormal,
    kaplan_meier,
)
from tests.helpers import chain


def test_a_task_gives_its_latency_and_its_stretch_once_it_ended() -> None:
    times = TaskTimes()
    times.record(10.0, 15.0, 12.0)  # (released, Running 3 s later, ran 12 s of 10 declared)
    times.record(20.0, 20.0, None)  # (never seen Running: all of it ran)
    times.record(0.0, 5.0, 5.0)  # (declares nothing: no stretch to learn)
    assert list(times.seen) == [(3.0, 1.2), (0.0, 1.0)]
    assert not times.ready
    for _ in range(EVIDENCE - 2):
        times.record(10.0, 10.0, 10.0)
    assert times.ready


def test_each_task_is_scored_against_what_the_tasks_before_it_predicted() -> None:
    """A task's time, as it ends, against the 10th-90th percentiles of what the pool's
    tasks before it predicted (each latency with each stretch, as a replay pairs them),
    from the third on: the evidence a cold pool's intervals are widened by (issue 80)."""
    times = TaskTimes()
    times.record(10.0, 10.0, 8.0)  # (latency 2, stretch 0.8: none before it, not scored)
    times.record(10.0, 14.0, 12.0)  # (2, 1.2: one before it, no spread, not scored)
    assert not times.told
    # 2 + 0.8 · 10 and 2 + 1.2 · 10, each twice: [10, 10, 14, 14], linearly interpolated
    assert times.predict(10.0) == pytest.approx((10.0, 12.0, 14.0))
    assert times.predict(20.0) == pytest.approx((18.0, 22.0, 26.0))
    times.record(10.0, 15.0, 13.0)
    assert list(times.told) == [pytest.approx((10.0, 12.0, 14.0, 15.0))]
    times.record(0.0, 5.0, 5.0)  # (declares nothing: nothing predicted of it)
    assert len(times.told) == 1


def test_kaplan_meier_weighs_what_ended_and_leaves_the_rest_to_what_still_runs() -> None:
    # five tasks: 1 ended; 1.5 runs still (known only to exceed it); 2 ended; 3 and 4 run
    values, cumulative = kaplan_meier(
        [(1.0, True), (1.5, False), (2.0, True), (3.0, False), (4.0, False)]
    )
    # (3 and 4, still running, lie past what they have run: where the fit puts them)
    assert values[:2] == (1.0, 2.0) and values[2] >= 3.0 and values[3] >= 4.0
    # 1/5 at 1; of the 3 left at risk past 1.5, 2 gets a third of 4/5; 3 and 4 share the rest
    assert cumulative == pytest.approx((0.2, 0.2 + 0.8 / 3, 0.2 + 0.8 / 3 + 0.8 / 3, 1.0))
    assert kaplan_meier([(1.0, True), (2.0, True)]) == ((1.0, 2.0), (0.5, 1.0))
    assert kaplan_meier([(1.0, False)]) == ((), ())  # (none ended: nothing known)


def mean_stretch(times: LiveTimes) -> float:
    weights = np.diff(np.asarray((0.0, *times.cumulative)))
    return float(np.dot(weights, times.stretches))


def test_the_tasks_still_running_keep_a_bursts_quick_first_ends_from_making_it_early() -> None:
    """In a burst the tasks that end first are the quick ones; those still running, seen
    Running for longer than they declare, say the stretch is more than those alone."""
    times = TaskTimes()
    for stretch in (0.7, 0.75, 0.8, 0.85, 0.9, 0.7, 0.75, 0.8, 0.85, 0.9):
        times.record(10.0, 10.0 * stretch, 10.0 * stretch)
    alone = times.frozen()
    assert mean_stretch(alone) == pytest.approx(0.8)
    censored = times.frozen([(12.0, 10.0)] * 10)  # (ten more, running 12 s of 10 declared)
    # (at least what the ten have run: half the weight at 1.2 or beyond)
    assert mean_stretch(censored) > 0.4 + 0.5 * 1.2
    assert censored.latencies == alone.latencies == (0.0,) * 10


def burst(rng: np.random.Generator, tasks: int) -> tuple[np.ndarray, LiveTimes]:
    """`tasks` of 10 s declared with lognormal stretches (σ 0.3 on the log), started
    together and seen when the quicker half has ended: what a cold burst's first refresh
    knows (the rest running, each a lower bound)."""
    stretches = np.exp(0.3 * rng.standard_normal(tasks))
    now = float(np.median(stretches)) * 10.0
    times = TaskTimes()
    for s in stretches[stretches * 10.0 <= now]:
        times.record(10.0, 10.0 * s, 10.0 * s)
    return stretches, times.frozen([(now, 10.0)] * int(np.sum(stretches * 10.0 > now)))


def mean_log_stretch(times: LiveTimes) -> float:
    weights = np.diff(np.asarray((0.0, *times.cumulative)))
    return float(np.dot(weights, np.log(times.stretches)))


def test_a_bursts_first_refresh_knows_the_typical_stretch_though_only_the_quick_ended() -> None:
    """Counting each running task at what it has run (the least it takes) put half the
    weight at the median: the mean log stretch came out ≈ 0.3 · φ(0) · 2 / 2 ≈ 0.12 low, and
    every forecast of the burst shared it (issue 80). The fitted tail puts it back."""
    rng = np.random.default_rng(3)
    for tasks in (40, 400):
        stretches, times = burst(rng, tasks)
        truth = float(np.mean(np.log(stretches)))
        assert mean_log_stretch(times) == pytest.approx(truth, abs=0.05)
        floor = times.stretches[len(times.stretches) // 2 :]
        assert min(floor) >= float(np.median(stretches))  # (never below what they ran)


def test_the_censored_lognormal_fit_recovers_a_known_distribution() -> None:
    rng = np.random.default_rng(4)
    logs = 0.2 + 0.5 * rng.standard_normal(4000)
    bound = float(np.median(logs))
    observed = [(math.exp(v), True) if v <= bound else (math.exp(bound), False) for v in logs]
    mu, sigma = censored_lognormal(observed) or (0.0, 0.0)
    assert (mu, sigma) == (pytest.approx(0.2, abs=0.03), pytest.approx(0.5, abs=0.03))
    assert censored_lognormal([(1.0, True), (1.0, True), (2.0, False)]) is None  # (no spread)


def spread(times: LiveTimes, draws: int = 4000) -> float:
    """The spread of the factor each replay draws on the stretch (`LiveTimes.begin`)."""
    rng = np.random.default_rng(0)
    factors = []
    for _ in range(draws):
        times.begin(rng)
        factors.append(math.log(times.shift[1]))
    return statistics.stdev(factors)


def test_a_replays_error_of_the_average_narrows_as_tasks_end() -> None:
    rng = np.random.default_rng(1)
    stretches = np.exp(0.3 * rng.standard_normal(400))

    def learned(n: int) -> LiveTimes:
        times = TaskTimes()
        for s in stretches[:n]:
            times.record(10.0, 2.0 + 10.0 * s, 10.0 * s)
        return times.frozen()

    def error(n: int) -> float:
        """The standard error of the mean log stretch of the first `n`."""
        return statistics.stdev(np.log(stretches[:n])) / math.sqrt(n)

    few, many = spread(learned(10)), spread(learned(200))
    assert few == pytest.approx(error(10) * 1.83 / 1.645, rel=0.1)  # (Student's t, 9 d.f.)
    assert many == pytest.approx(error(200), rel=0.1)
    assert few > 2 * many
    one = learned(1)
    one.begin(rng)
    assert one.shift == (0.0, 1.0, 0.0)  # (one task: no spread to say how far off it is)


def test_a_task_draws_a_latency_and_a_stretch_of_the_pools() -> None:
    times = LiveTimes((2.0, 4.0), (0.5, 1.5), (0.5, 1.0), shift=(1.0, 2.0, 0.0))
    assert times.draw(10.0, iter((0.0, 0.0)).__next__) == 3.0 + 0.5 * 2.0 * 10.0
    assert times.draw(10.0, iter((0.9, 0.9)).__next__) == 5.0 + 1.5 * 2.0 * 10.0
    assert times.draw(10.0, iter((0.0, 0.5)).__next__) == 3.0 + 1.5 * 2.0 * 10.0


def test_a_round_pairs_its_releases_with_the_rooms_freed_latest_first() -> None:
    """A dispatch delay is a freed room's end seen to the round that released a task into
    it: a round's releases take the rooms freed since the last releasing round, the
    latest first; a round that released none leaves them to a later one while work waits
    (a pool that follows its nodes sees a room once it read them); the rooms a releasing
    round left untaken, or any once nothing waits, waited on no round and are dropped, so
    a room freed long ago (a stage no room fits) is never a long delay."""
    times = TaskTimes()
    times.dispatched(5.0, 2, False)  # (an arrival into an idle pool: no room freed, no delay)
    assert not times.delays
    for end in (10.0, 11.0, 12.0):
        times.freed(end)
    times.dispatched(12.5, 0, True)  # (the nodes not read again yet: nothing released)
    times.dispatched(13.0, 2, True)  # (two released: the two latest rooms, 1 s and 2 s)
    assert list(times.delays) == [1.0, 2.0] and not times.free  # (10's room: dropped)
    times.dispatched(20.0, 1, True)  # (no room freed since: not a delay)
    times.freed(30.0)
    times.dispatched(30.5, 0, False)  # (nothing waits: 30's room waited on nothing)
    assert not times.free
    times.freed(40.0)
    times.dispatched(41.0, 3, True)
    assert list(times.delays) == [1.0, 2.0, 1.0]
    assert times.frozen().delays == (1.0, 2.0, 1.0)


def test_a_stages_start_draws_a_dispatch_delay_and_a_task_going_on_draws_none() -> None:
    times = LiveTimes((2.0,), (1.0,), (1.0,), delays=(1.0, 5.0), shift=(0.0, 1.0, 0.5))
    assert times.draw(10.0, iter((0.0, 0.0)).__next__) == 12.0  # (going on: none)
    assert times.draw(10.0, iter((0.0, 0.0, 0.0)).__next__, first=True) == 12.0 + 1.5
    assert times.draw(10.0, iter((0.0, 0.0, 0.9)).__next__, first=True) == 12.0 + 5.5
    assert LiveTimes((2.0,), (1.0,), (1.0,)).delay(iter(()).__next__) == 0.0  # (none seen)
    late = LiveTimes((2.0,), (1.0,), (1.0,), delays=(1.0,), shift=(0.0, 1.0, -3.0))
    assert late.delay(iter((0.0,)).__next__) == 0.0  # (never before the end)
    u = Uniforms(np.random.default_rng(0))
    live = MeasuredDurations([10.0, 20.0], [[], [7.0]]).frozen(times)
    assert live.sample(1, 1, False, False, u) == 7.0  # (measured, going on: none)
    assert live.sample(1, 1, True, False, u) in (7.0 + 1.5, 7.0 + 5.5)  # (a stage's start)


def test_a_replays_error_of_the_average_delay_narrows_as_rounds_pass() -> None:
    rng = np.random.default_rng(3)
    drawn = rng.uniform(0.0, 2.0, 50)

    def shifts(n: int) -> float:
        times = LiveTimes((2.0,), (1.0,), (1.0,), 1, tuple(drawn[:n]))
        out = []
        for _ in range(400):
            times.begin(rng)
            out.append(times.shift[2])
        return statistics.stdev(out)

    few, many = shifts(5), shifts(50)
    sd = statistics.stdev(drawn[:5]) / math.sqrt(5)
    assert few == pytest.approx(sd * 2.13 / 1.645, rel=0.15)  # (Student's t, 4 d.f.)
    assert few > 2 * many


def test_a_stage_with_nothing_measured_draws_from_the_pools_times_else_as_before() -> None:
    u = Uniforms(np.random.default_rng(0))
    plain = MeasuredDurations([10.0, 20.0], [[], [7.0]])
    assert plain.sample(0, 1, False, False, u) == 10.0  # (its estimate, as before)
    live = plain.frozen(LiveTimes((1.0,), (2.0,), (1.0,)))
    assert live.sample(0, 1, False, False, u) == 1.0 + 2.0 * 10.0
    assert live.sample(1, 1, False, False, u) == 7.0  # (measured on its own stage)
    assert live.frozen().times is live.times  # (a copy keeps what it draws from)


def queue(times: LiveTimes | None) -> Cluster:
    """A pool of one executor, ten one-task workflows of 10 s declared, waiting."""
    cluster = Cluster(1)
    for i in range(10):
        model = MeasuredDurations([10.0], times=times)
        cluster.add_job(chain(10.0), 0.0, f"w{i}", model)
    return cluster


def test_a_forecast_follows_the_pools_own_task_times_and_how_well_they_are_known() -> None:
    fifo = make_scheduler("fifo")
    declared = forecast(queue(None), fifo, seed=0, replays=40)
    last = declared.of(9)
    assert last.start.low == last.start.median == last.start.high == 90.0

    def learned(n: int) -> LiveTimes:
        times = TaskTimes()
        rng = np.random.default_rng(2)
        for s in np.exp(0.3 * rng.standard_normal(n)):
            times.record(10.0, 3.0 + 15.0 * s, 15.0 * s)  # (3 s latency, half again as long)
        return times.frozen()

    few = forecast(queue(learned(10)), fifo, seed=0, replays=40).of(9)
    many = forecast(queue(learned(200)), fifo, seed=0, replays=40).of(9)
    for found in (few, many):  # (nine tasks ahead, each about 3 + 15 s)
        assert 130.0 < found.start.median < 190.0
    assert few.start.high - few.start.low > 1.5 * (many.start.high - many.start.low)


def test_a_waiting_workflow_starts_a_dispatch_delay_later_per_run_of_tasks_ahead() -> None:
    """Each run of tasks on the one executor ends a dispatch delay before the next
    workflow's release (the operator's round), the running one's too: the tenth of ten
    one-task workflows starts after nine tasks and nine delays. Without the delay it would
    start nine delays early, as the live pool's forecasts did (issue 80)."""
    fifo = make_scheduler("fifo")
    exact = dict(latencies=(2.0,), stretches=(1.0,), cumulative=(1.0,), ended=200)
    plain = forecast(queue(LiveTimes(**exact)), fifo, seed=0, replays=5).of(9)  # type: ignore[arg-type]
    assert plain.start.median == pytest.approx(9 * 12.0)
    delayed = LiveTimes(**exact, delays=(3.0,) * 50)  # type: ignore[arg-type]
    found = forecast(queue(delayed), fifo, seed=0, replays=5).of(9)
    assert isinstance(found, WorkflowForecast)
    assert found.start.low == found.start.median == pytest.approx(9 * (12.0 + 3.0))
    running = queue(delayed)
    running.decide_once(fifo, 0.0)  # (the first runs since 0: it, too, ends 3 s late)
    assert forecast(running, fifo, seed=0, replays=5).of(9).start.median == pytest.approx(135.0)  # type: ignore[union-attr]


def test_the_median_is_known_once_half_of_the_tasks_run_have_ended_by_their_stretch() -> None:
    # issue 97: a cold burst's first forecasts were made at its 10th end, the quick ones
    # of a wave whose rest still ran: their middle was an extrapolation
    times = TaskTimes()
    for _ in range(EVIDENCE):
        times.record(10.0, 8.0, 8.0)  # (ten quick ones, 0.8 of what they declare)
    running = [(9.0, 10.0)] * 14  # (fourteen running, past 0.9 of it already)
    assert times.ready and not times.median_known(running)  # (10 of 24: 14/24 left)
    assert times.median_known(running[:8])  # (10 of 18 ended below the rest: 8/18 left)
    assert times.median_known()
