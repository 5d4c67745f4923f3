"""Conformal widening of the forecast's interval (sim.forecast_calibration)."""

from __future__ import annotations

import numpy as np
import pytest

from idlegate.sim.forecast import Span
from idlegate.sim.forecast_calibration import (
    COVERAGE,
    FINISH_PRIOR,
    LIVE_COLD,
    LIVE_MIN_SCORES,
    MIN_SCORES,
    START_PRIOR,
    START_PRIOR_INVENTED,
    WINDOW,
    Calibration,
    calibrations,
    cold_margin,
    upper_quantile,
)
from idlegate.sim.task_times import TaskTimes


def test_no_widening_before_enough_scores() -> None:
    cal = Calibration()
    for _ in range(MIN_SCORES - 1):
        cal.record(Span(10.0, 20.0, 30.0), 0.0, 50.0)
    assert cal.margin() is None
    assert cal.widen(Span(10.0, 20.0, 30.0), 0.0) == Span(10.0, 20.0, 30.0)


def test_a_prior_widens_until_the_scores_take_over() -> None:
    # cold: the prior 0.5 s per second ahead; a forecast 100 s ahead widens by 50 s a side
    cal = Calibration(prior=0.5)
    assert cal.margin() == 0.5
    assert cal.widen(Span(90.0, 100.0, 120.0), 0.0) == Span(40.0, 100.0, 170.0)
    # MIN_SCORES scores of -0.5 (10 s inside an interval 20 s ahead): their quantile
    for _ in range(MIN_SCORES):
        cal.record(Span(10.0, 20.0, 30.0), 0.0, 20.0)
    assert cal.margin() == -0.5


def test_misses_widen_in_proportion_to_the_lead_time() -> None:
    # every past forecast looked 20 s ahead (median 20, made at 0) and the actual came
    # 10 s past its high: score 10 / 20 = 0.5, so Q = 0.5 s per second ahead
    cal = Calibration()
    for _ in range(40):
        cal.record(Span(10.0, 20.0, 30.0), 0.0, 40.0)
    assert cal.margin() == 0.5
    # a forecast 100 s ahead widens by 50 s on each side; the start no earlier than now
    assert cal.widen(Span(90.0, 100.0, 120.0), 0.0) == Span(40.0, 100.0, 170.0)
    assert cal.widen(Span(90.0, 100.0, 120.0), 0.0, earliest=60.0) == Span(60.0, 100.0, 170.0)


def test_the_margin_is_the_conformal_quantile_and_may_narrow() -> None:
    # scores -0.5 (inside, 10 s from the edge, 20 s ahead) ×9 and one miss of +1.0:
    # n = 10 is below MIN_SCORES, so 30 of them: ⌈31 × 0.8⌉ = 25th smallest
    cal = Calibration()
    for _ in range(27):
        cal.record(Span(10.0, 20.0, 30.0), 0.0, 20.0)  # (−10 / 20 = −0.5)
    for _ in range(3):
        cal.record(Span(10.0, 20.0, 30.0), 0.0, 50.0)  # (+20 / 20 = 1.0)
    assert cal.margin() == -0.5
    # narrowing stops at the median
    assert cal.widen(Span(10.0, 20.0, 30.0), 0.0) == Span(20.0, 20.0, 20.0)


def test_the_coverage_picks_the_quantile() -> None:
    # scores 0.0, 0.1, ..., 2.9 (30 of them): the ⌈31 × 0.8⌉ = 25th smallest is 2.4, and
    # with coverage 0.9 the ⌈31 × 0.9⌉ = 28th, 2.7
    low, high = Calibration(), Calibration(coverage=0.9)
    for i in range(30):
        for cal in (low, high):
            cal.record(Span(0.0, 10.0, 10.0), 0.0, 10.0 + i)  # (i / 10 past its high)
    assert low.margin() == pytest.approx(2.4) and high.margin() == pytest.approx(2.7)
    with pytest.raises(ValueError, match="share in"):
        Calibration(coverage=1.0)


def test_a_resumed_calibration_keeps_the_older_scores_ahead_and_the_newest_window():
    older, now = Calibration(), Calibration()
    older.scores.extend([0.1] * (WINDOW - 1) + [0.2])
    now.scores.append(0.3)
    now.resume(older)
    assert len(now.scores) == WINDOW and list(now.scores)[-2:] == [0.2, 0.3]


def test_a_waiting_workflows_finish_is_widened_by_its_starts_margin_over_its_wait():
    # cold, the start's prior 0.3 and the finish's 0.05: a workflow forecast at 0 to start
    # at 100 and finish at 300 is widened by 0.3 × 100 (its wait) + 0.05 × 200 (its run),
    # 40 s a side, not 0.05 × 300 = 15 s
    pair = calibrations()
    assert (pair["start"].prior, pair["finish"].prior) == (START_PRIOR, FINISH_PRIOR) == (0.3, 0.05)
    waits, ends = Span(80.0, 100.0, 120.0), Span(280.0, 300.0, 320.0)
    assert pair["finish"].widen(ends, 0.0, 0.0, start=waits) == pytest.approx(
        Span(240.0, 300.0, 360.0)
    )
    # started (no start given), or due now: the finish's own prior over the whole lead
    assert pair["finish"].widen(ends, 0.0, 0.0) == pytest.approx(Span(265.0, 300.0, 335.0))
    now = Span(0.0, 0.0, 0.0)
    assert pair["finish"].widen(ends, 0.0, 0.0, start=now) == pytest.approx(
        Span(265.0, 300.0, 335.0)
    )
    # the start's margin is its quantile once it has scores: 20 of 0.5 (10 s past the
    # high, 20 s ahead) make it 0.5, so 0.5 × 100 + 0.05 × 200 = 60 s a side
    for _ in range(MIN_SCORES):
        pair["start"].record(Span(10.0, 20.0, 30.0), 0.0, 40.0)
    assert pair["finish"].widen(ends, 0.0, 0.0, start=waits) == pytest.approx(
        Span(220.0, 300.0, 380.0)
    )
    # once the finish has scores of its own their quantile alone widens it, over the
    # whole lead: 20 of 0.1 (30 s past a high 300 s ahead), 0.1 × 300 = 30 s a side
    for _ in range(MIN_SCORES):
        pair["finish"].record(Span(280.0, 300.0, 320.0), 0.0, 350.0)
    assert pair["finish"].widen(ends, 0.0, 0.0, start=waits) == pytest.approx(
        Span(250.0, 300.0, 350.0)
    )


def test_a_calibration_without_an_earlier_one_ignores_the_start():
    cal = Calibration(prior=0.05)
    ends = Span(280.0, 300.0, 320.0)
    assert cal.widen(ends, 0.0, start=Span(100.0, 100.0, 100.0)) == cal.widen(ends, 0.0)


def test_a_live_pool_has_no_fitted_prior_and_takes_its_own_scores_as_soon_as_they_say_anything() -> (
    None
):
    """A pool that learns its own task times (issue 80) is widened by its own forecasts'
    scores, not by a prior fitted on the simulator's runs, from the fourth: the fewest whose
    conformal quantile, ⌈(n + 1) · 0.8⌉-th, exists (with four, their largest). Before them
    its start widens by the stated cold default, a quarter of the lead a side, and a
    waiting workflow's finish by that over its wait (before: the replays' bare interval,
    which held 7-55 % of a cold pool's starts live)."""
    fresh = calibrations(live=True)
    assert fresh["start"].prior == LIVE_COLD == 0.25 and fresh["finish"].prior is None
    assert fresh["start"].least == fresh["finish"].least == LIVE_MIN_SCORES == 4
    assert calibrations(invented=True, live=True)["start"].prior == LIVE_COLD
    start = fresh["start"]
    # cold: a start 100 s ahead, [90, 100, 120] made at 0, widens by 25 s a side
    assert start.widen(Span(90.0, 100.0, 120.0), 0.0, earliest=0.0) == Span(65.0, 100.0, 145.0)
    # its finish (its start 100 s ahead, the run 50 s more) by 25 s, the run's part 0
    assert fresh["finish"].widen(
        Span(140.0, 150.0, 170.0), 0.0, start=Span(90.0, 100.0, 120.0)
    ) == Span(115.0, 150.0, 195.0)
    for actual in (40.0, 30.0, 50.0):  # (10, 0 and 20 s past its top, 20 s ahead)
        start.record(Span(10.0, 20.0, 30.0), 0.0, actual)
    assert start.margin() == LIVE_COLD
    start.record(Span(10.0, 20.0, 30.0), 0.0, 20.0)
    assert start.margin() == 1.0  # (20 / 20: the largest of the four)
    # a waiting workflow's finish follows its start's margin over its wait
    assert fresh["finish"].widen(Span(90.0, 100.0, 110.0), 0.0, start=Span(40.0, 50.0, 60.0)) == (
        Span(40.0, 100.0, 160.0)
    )
    # four scores well inside narrow it below the cold default
    inside = calibrations(live=True)["start"]
    for _ in range(4):
        inside.record(Span(10.0, 20.0, 30.0), 0.0, 20.0)  # (−10 / 20 = −0.5)
    assert inside.margin() == -0.5


def test_an_upper_bound_of_a_quantile_holds_as_sure_as_it_says() -> None:
    """`upper_quantile`: the k-th smallest of n, the least k with P(Binomial(n, 0.8) ≤
    k − 1) ≥ 0.9. By hand: n = 10, 1 − 0.8¹⁰ = 0.893 < 0.9, no bound; n = 11, 1 − 0.8¹¹ =
    0.914, the largest; n = 20, P(B ≤ 17) = 0.794 and P(B ≤ 18) = 0.931, the 19th."""
    assert upper_quantile(range(1, 11), 0.8, 0.9) is None
    assert upper_quantile(range(11, 0, -1), 0.8, 0.9) == 11  # (any order)
    assert upper_quantile(range(1, 21), 0.8, 0.9) == 19
    # (the median's at even odds: P(B(20, ½) ≤ 9) = 0.41, P(B ≤ 10) = 0.59, the 11th)
    assert upper_quantile(range(1, 21), 0.5, 0.5) == 11
    # drawn again and again, it is at or above the true quantile 90 % of the time or more
    rng = np.random.default_rng(7)
    for n in (11, 30, 200):
        held = [upper_quantile(rng.random(n), 0.8, 0.9) >= 0.8 for _ in range(2000)]  # type: ignore[operator]
        assert 0.9 <= np.mean(held) <= 0.97


def test_a_cold_live_pool_is_widened_by_how_far_off_its_own_tasks_came_out() -> None:
    """Before any forecast of a live pool came out, its start widens by the bound of
    `upper_quantile` (0.8 with 0.9) of its tasks' scores: how far each task's time fell
    outside what the tasks before it predicted, per second of the predicted median
    (`TaskTimes.told`); the stated `LIVE_COLD` while they are too few for a bound."""
    tasks = TaskTimes()
    for _ in range(10):  # (inside: 12 s, predicted [10, 12, 14]: −2 / 12)
        tasks.told.append((10.0, 12.0, 14.0, 12.0))
    assert cold_margin(tasks) == LIVE_COLD  # (10 scores: no bound yet)
    tasks.told.append((10.0, 12.0, 14.0, 15.2))  # (1.2 s past the top of 12 s: 0.1)
    assert cold_margin(tasks) == pytest.approx(0.1)  # (11: the largest)
    tasks.told.append((10.0, 12.0, 14.0, 12.0))
    assert cold_margin(tasks) == pytest.approx(0.1)
    more = TaskTimes()
    for _ in range(11):
        more.told.append((10.0, 12.0, 14.0, 12.0))
    assert cold_margin(more) == 0.0  # (all inside: widened by nothing, never narrowed)
    # the margin is the start's prior, and its finish follows it over the wait
    fresh = calibrations(live=True)
    fresh["start"].prior = cold_margin(tasks)
    assert fresh["start"].widen(Span(90.0, 100.0, 120.0), 0.0) == Span(80.0, 100.0, 130.0)
    assert fresh["finish"].widen(
        Span(140.0, 150.0, 170.0), 0.0, start=Span(90.0, 100.0, 120.0)
    ) == Span(130.0, 150.0, 180.0)


def start_scores(workload: str, arrivals: str, seeds: range) -> np.ndarray:
    """The scores (`Calibration.record`'s) of the raw start forecasts of waiting workflows
    of `workload`'s runs on `seeds`, as `idlegate forecast evaluate` makes them (20
    replays, with `arrivals` invented), against when each started."""
    from idlegate.evaluation.forecast_eval import EvalSettings, evaluate_seed

    scores = []
    for seed in seeds:
        run = evaluate_seed(EvalSettings(workload, arrivals=arrivals), seed)  # type: ignore[arg-type]
        for p in run.predictions:
            if p.method == "forecast" and not p.started and p.job_id in run.actual:
                scored = Calibration()
                scored.record(p.start, p.made_at, run.actual[p.job_id].first_start)
                scores.extend(scored.scores)
    return np.asarray(scores)


@pytest.mark.slow
def test_the_start_priors_hold_the_training_runs_starts_as_the_calibration_aims():
    # A refit on training seeds (k8s-batch 0-4, of the 0-29 the priors were fitted on
    # with tpch and teams; docs/research/forecasts.md): a cold pool's start interval,
    # widened by its prior, holds about COVERAGE of the starts (the 75-85 % band the fit
    # kept), far more than without a prior.
    plain = start_scores("k8s-batch", "none", range(5))
    invented = start_scores("k8s-batch", "poisson", range(5))
    for scores, prior in ((plain, START_PRIOR), (invented, START_PRIOR_INVENTED)):
        held = float(np.mean(scores <= prior))
        assert abs(held - COVERAGE) <= 0.05, (prior, held)
        assert held >= float(np.mean(scores <= 0.0)) + 0.15
    # Replays that invent arrivals spread already over part of what the prior stands for
    # (the arrivals not seen): their runs' scores are smaller, the quantile a calibration
    # takes of them too, and the plain pool's prior would hold more than the band
    # allows: hence the smaller prior where arrivals are invented.
    assert np.quantile(invented, COVERAGE) < np.quantile(plain, COVERAGE)
    assert float(np.mean(invented <= START_PRIOR)) > COVERAGE + 0.05
