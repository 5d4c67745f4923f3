"""The sequential test that cuts a losing replay sooner (`policy.portfolio.sequential`,
issue 79 item 4): its math with known answers, its error rate on the model it states,
and a round whose losing replay it stops before the sure bound does."""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

import numpy as np
import pytest

from idlegate.errors import IdlegateError
from idlegate.policy import make_scheduler
from idlegate.policy.portfolio import PortfolioConfig, PortfolioScheduler, ReplayRequest
from idlegate.policy.portfolio import runs as runs_module
from idlegate.policy.portfolio.runs import CUT, ReplayOptions, Runs
from idlegate.policy.portfolio.sequential import (
    GRID,
    LOOK_AT,
    RunningTest,
    area_so_far,
    losing,
    t_quantile,
)
from idlegate.sim.workloads import build_workload


def test_the_t_quantile_a_look_needs_has_known_values():
    # (tables: t at 0.975 with 10 degrees 2.2281, at 0.99 with 15 2.6025, at 0.999 with
    # 15 3.733 and 30 3.385, at 0.9995 with 15 4.073; the normal's 1.6449 at 0.95 as the
    # degrees grow)
    assert t_quantile(0.975, 10) == pytest.approx(2.2281, abs=2e-3)
    assert t_quantile(0.99, 15) == pytest.approx(2.6025, abs=2e-3)
    assert t_quantile(0.95, 10**6) == pytest.approx(1.6449, abs=1e-4)
    assert len(LOOK_AT) == 12 and LOOK_AT[0] == GRID // 4
    assert t_quantile(0.999, 15) == pytest.approx(3.733, abs=1e-3)
    assert t_quantile(0.999, 30) == pytest.approx(3.385, abs=1e-3)
    assert t_quantile(0.9995, 15) == pytest.approx(4.073, abs=1e-3)
    with pytest.raises(IdlegateError, match="fraction"):
        t_quantile(0.3, 5)


def test_a_straight_running_difference_is_cut_when_its_drift_passes_the_threshold():
    straight = [0.2 * j / GRID for j in range(1, LOOK_AT[0] + 1)]  # (σ̂ = 0, μ̂ = 0.2)
    assert losing(straight, 0.1, 0.01)
    assert not losing(straight, 0.25, 0.01)
    assert not losing(straight[:-1], 0.0, 0.01)  # (before the first look)


def test_a_noisy_running_difference_needs_its_lead_beyond_t_standard_errors():
    # 16 increments alternating 0.01 and 0.03 at τ = 1/4: μ̂ = 0.32 / 0.25 = 1.28; their
    # deviations ±0.01 give σ̂² = 16e-4 / (15/64); the prediction's error
    # σ̂ √((1 − τ)/τ) = 0.0826 × √3 = 0.1431; at 1 % over 12 looks t(15) is 3.82 (between
    # the tables' 3.733 at 0.999 and 4.073 at 0.9995), so the threshold must be below
    # 1.28 − 0.547 = 0.733
    d = list(np.cumsum([0.01, 0.03] * 8))
    t = t_quantile(1 - 0.01 / 12, 15)
    edge = 1.28 - t * math.sqrt(16e-4 / (15 / 64)) * math.sqrt(3)
    assert edge == pytest.approx(0.733, abs=0.002)
    assert losing(d, edge - 0.001, 0.01)
    assert not losing(d, edge + 0.001, 0.01)


def test_the_followed_replays_area_and_its_grid():
    arrivals, jcts = np.array([0.0, 10.0]), np.array([5.0, 20.0])
    assert area_so_far(12.0, arrivals, jcts) == 7.0
    assert area_so_far(100.0, arrivals, jcts) == 25.0
    # two workflows from 0 for 10 s: the area grows 2 a second, so A_f = j/64 × 20 at 10j/64
    test = RunningTest.of(np.zeros(2), np.array([10.0, 10.0]), 0.01)
    assert test is not None and test.whole == 20.0
    assert test.times == pytest.approx([10 * j / GRID for j in range(1, GRID)], abs=1e-6)
    assert test.difference(32, 12.0) == pytest.approx(0.1)  # (12 − 10, over 20)
    assert RunningTest.of(np.zeros(1), np.zeros(1), 0.01) is None


def test_its_error_rate_holds_on_the_model_it_states():
    """Brownian running differences whose drift is the threshold: the share of them cut
    while their whole ends within it is at most the stated rate (Bonferroni over the looks
    is conservative); one well past it is cut nearly always."""
    rng = np.random.default_rng(7)
    error, threshold, sigma, paths = 0.05, 0.1, 0.2, 2000
    step = 1.0 / GRID
    noise = sigma * math.sqrt(step) * rng.standard_normal((paths, GRID))

    def cuts(drift: float) -> np.ndarray:
        out = []
        for path in np.cumsum(drift * step + noise, axis=1):
            out.append(any(losing(list(path[:j]), threshold, error) for j in LOOK_AT))
        return np.array(out)

    at = cuts(threshold)
    within = np.cumsum(threshold * step + noise, axis=1)[:, -1] <= threshold
    assert np.mean(at & within) <= error
    assert np.mean(cuts(threshold + 0.5)) > 0.9


# a flood: teams' first 30 workflows, submitted at once (as tests/test_round_runs.py's)
FLOOD = build_workload("teams", 1, num_jobs=60)
FLOOD_JOBS = FLOOD.jobs[:30]


def test_a_round_cuts_a_losing_replay_sooner_with_the_test(monkeypatch: pytest.MonkeyPatch):
    events: dict[str, dict[str, int]] = {}
    simulate = runs_module._simulate

    def counted(workload: Any, scheduler: Any, seed: int, limit: Any, test: Any) -> Any:
        result = simulate(workload, scheduler, seed, limit, test)
        events.setdefault(current, {})[scheduler.name] = result.events
        return result

    monkeypatch.setattr(runs_module, "_simulate", counted)
    choices = {}
    for current in ("none", "0.01"):
        spec = (
            "portfolio?candidates=sjf-cp+srpt+fair&tune=false&prior=false&start=srpt"
            f"&cut_behind=false&cut_error={current}"
        )
        brain = make_scheduler(spec)
        assert isinstance(brain, PortfolioScheduler)
        request = ReplayRequest(tuple(FLOOD_JOBS), FLOOD.num_executors, 0.0, "srpt", 0, 0.0, new=40)
        choices[current] = brain.replay(request)
    sure, tested = choices["none"], choices["0.01"]
    assert sure.cut == tested.cut == ("fair",)
    # fair's replay stopped sooner; the round's answer is the same, its score still past
    # the reference
    assert events["0.01"]["fair"] < events["none"]["fair"]
    same = ("candidate", "reason", "runner_up", "runner_up_score", "best")
    assert {k: getattr(tested, k) for k in same} == {k: getattr(sure, k) for k in same}
    reference = max(sure.scores["srpt"], sure.scores["sjf-cp"])
    assert tested.scores["fair"] >= (1 + CUT) * reference
    assert tested.modelled_seconds < sure.modelled_seconds


@pytest.mark.parametrize("unjudged", [False, True])
def test_a_candidate_not_yet_judged_is_cut_only_with_cut_unjudged(unjudged: bool):
    spec = (
        "portfolio?candidates=sjf-cp+srpt+fair&tune=false&prior=false&start=srpt"
        f"&cut_behind=false&cut_unjudged={str(unjudged).lower()}"
    )
    brain = make_scheduler(spec)
    assert isinstance(brain, PortfolioScheduler)
    request = ReplayRequest(
        tuple(FLOOD_JOBS),
        FLOOD.num_executors,
        0.0,
        "srpt",
        0,
        0.0,
        new=40,
        exact=frozenset({"fair"}),
    )
    choice = brain.replay(request)
    assert choice.cut == (("fair",) if unjudged else ())
    # (the one followed and the guard's safest are never cut)
    again = brain.replay(replace(request, safe="fair"))
    assert not again.cut


# behind the followed one (`cut_behind`): srpt followed; on the flood's first 30 workflows
# srpt?cap=0.9 ends 0.07 % behind it (116.18 s against 116.10 s), sjf-cp 32 % behind,
# srpt?cap=1.0 ties it (the same decisions)
BEHIND = ("srpt", "sjf-cp", "srpt?cap=0.9", "srpt?cap=1.0")


def _runs(behind: bool, error: float | None) -> Runs:
    options = ReplayOptions(cut_error=error, cut_behind=behind)
    keep = frozenset({"srpt"})
    return Runs(
        FLOOD_JOBS, make_scheduler, FLOOD.num_executors, 0, options, first="srpt", keep=keep
    )


@pytest.mark.parametrize("error", [None, 0.01])
def test_a_replay_that_ends_behind_the_followed_one_is_cut_with_cut_behind(error: float | None):
    runs = _runs(False, error)
    whole = runs.scores(BEHIND)
    # (without it neither is cut: sjf-cp is the first other, so no reference is known for
    # it, and srpt?cap=0.9 is within 5 % of it)
    assert whole.cut == ()
    assert whole.means["srpt?cap=0.9"] == pytest.approx(116.1834, abs=1e-3)
    assert whole.means["sjf-cp"] == pytest.approx(153.4599, abs=1e-3)
    events = {s: runs._replays[s].events for s in BEHIND}
    behind = _runs(True, error)
    cut = behind.scores(BEHIND)
    assert cut.cut == ("sjf-cp", "srpt?cap=0.9")
    followed = whole.means["srpt"]
    assert cut.means["srpt"] == followed
    # (a tie is never cut: its replay is its whole)
    assert cut.means["srpt?cap=1.0"] == followed and "srpt?cap=1.0" in cut.jcts
    for spec in cut.cut:
        assert behind._replays[spec].events < events[spec]
        assert cut.means[spec] > followed  # (behind it, whatever the estimate)
        assert spec not in cut.jcts
    # the test cuts sooner than the sure bound at the followed one's score
    if error is not None:
        sure = _runs(True, None)
        sure.scores(BEHIND)
        for spec in cut.cut:
            assert behind._replays[spec].events < sure._replays[spec].events


def test_a_round_that_cuts_behind_the_followed_one_chooses_alike():
    choices = {}
    for behind in (False, True):
        config = PortfolioConfig(
            candidates=("sjf-cp", "srpt", "fair"),
            tune=False,
            prior=False,
            start="srpt",
            cut_behind=behind,
        )
        brain = PortfolioScheduler(config, make_scheduler)
        request = ReplayRequest(tuple(FLOOD_JOBS), FLOOD.num_executors, 0.0, "srpt", 0, 0.0, new=40)
        choices[behind] = brain.replay(request)
    before, after = choices[False], choices[True]
    # (sjf-cp, the runner-up 32 % behind, is replayed to its end without it: the first
    # candidate after the one followed, no reference beyond it is known yet)
    assert before.cut == ("fair",)
    assert after.cut == ("sjf-cp", "fair")
    same = ("candidate", "reason", "best", "runner_up")
    assert {k: getattr(after, k) for k in same} == {k: getattr(before, k) for k in same}
    # (the runner-up's score is the cut's estimate, still behind the one followed)
    assert after.runner_up_score is not None and after.runner_up_score > after.score
    assert after.modelled_seconds < before.modelled_seconds
