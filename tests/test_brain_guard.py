"""Issue 71: the unfinished workflows count in a round, and a guard on regret keeps to
the shipped prior's safest candidate unless the evidence is large against its noise."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest

from idlegate.policy.portfolio import PortfolioConfig, ReplayRequest, Scores
from idlegate.policy.portfolio.decision import play_round
from idlegate.policy.portfolio.rounds import behind, lead_errors, unfinished_means

# -- known answers -----------------------------------------------------------------------


def test_a_lead_in_standard_errors_of_the_paired_differences():
    jcts = {"safe": np.array([10.0, 12.0, 14.0]), "other": np.array([9.0, 10.0, 11.0])}
    # differences 1, 2, 3: mean 2, standard deviation 1, standard error 1/sqrt(3)
    assert lead_errors(jcts, "safe", "other") == pytest.approx(2 * math.sqrt(3))
    assert lead_errors(jcts, "other", "safe") == pytest.approx(-2 * math.sqrt(3))
    same = {"safe": np.array([1.0, 2.0]), "other": np.array([0.0, 1.0])}
    assert lead_errors(same, "safe", "other") == math.inf  # (a lead with no spread)
    assert lead_errors({"safe": np.ones(1), "other": np.zeros(1)}, "safe", "other") is None
    assert lead_errors(jcts, "safe", "missing") is None


def test_behind_counts_only_the_workflows_arrived_since_it_was_followed():
    jcts = {"safe": np.array([100.0, 10.0, 20.0]), "fair": np.array([10.0, 12.0, 24.0])}
    times = np.array([0.0, 50.0, 60.0])
    # over all three fair is far ahead (46 s against 130 s); since t = 50 it is 20 % behind
    assert behind(jcts, times, "fair", "safe", 50.0) == (pytest.approx(0.2), 2)
    assert behind(jcts, times, "fair", "safe", 61.0) is None
    assert behind(jcts, None, "fair", "safe", 0.0) is None


def test_unfinished_means_are_those_of_the_workflows_not_finished():
    jcts = {"a": np.array([1.0, 10.0, 30.0]), "b": np.array([1.0, 20.0, 40.0])}
    late = np.array([False, True, True])
    assert unfinished_means(jcts, late, ["a", "b", None, "c"]) == {"a": 20.0, "b": 30.0}
    assert unfinished_means(jcts, np.zeros(3, dtype=bool), ["a"]) == {}
    assert unfinished_means(jcts, None, ["a"]) == {}


# -- the guard in a round ----------------------------------------------------------------

CONFIG = PortfolioConfig(candidates=("srpt", "fair"), tune=False, carriers=None)


def _round(jcts: dict[str, np.ndarray], following: str, **request: object) -> object:
    scores = {c: float(np.mean(v)) for c, v in jcts.items()}
    n = len(next(iter(jcts.values())))
    times = np.arange(n, dtype=float)
    base = ReplayRequest((), 10, 0.0, following, 0, 0.0, protected=False, new=n)
    return play_round(
        replace(base, **request),  # type: ignore[arg-type]
        CONFIG,
        lambda _, specs: Scores({s: scores[s] for s in specs}, n, 0, {}, {}, jcts, None, times),
    )


def _noisy_lead() -> dict[str, np.ndarray]:
    """40 workflows: fair 5 % ahead of srpt on the mean, the differences 25 and -15 s in
    turn (standard error 3.2 s: a lead of about 1.6 standard errors)."""
    srpt = np.full(40, 100.0)
    fair = srpt - 5.0 - 20.0 * (-1.0) ** np.arange(40)
    return {"srpt": srpt, "fair": fair}


def test_the_safest_is_left_only_on_a_lead_beyond_the_guards_standard_errors():
    jcts = _noisy_lead()
    z = lead_errors(jcts, "srpt", "fair")
    assert z is not None and 1.0 < z < 2.0  # beyond one standard error, within two
    free = _round(jcts, "srpt")  # (no safe candidate: the noise rule alone)
    assert free.candidate == "fair"  # type: ignore[attr-defined]
    guarded = _round(jcts, "srpt", safe="srpt")
    assert (guarded.candidate, guarded.reason) == ("srpt", "guarded")  # type: ignore[attr-defined]
    assert guarded.guard_z == pytest.approx(z)  # type: ignore[attr-defined]
    assert "not the guard's 2.0" in guarded.why  # type: ignore[attr-defined]


def test_the_safest_is_left_only_when_the_stream_so_far_bears_it_out():
    jcts = {"srpt": np.linspace(100, 200, 40), "fair": np.linspace(80, 160, 40)}  # 20 % lead
    assert _round(jcts, "srpt", safe="srpt").candidate == "fair"  # type: ignore[attr-defined]
    before = ((400, {"srpt": 0.0, "fair": 0.3}),)  # fair 30 % behind over 400 workflows
    kept = _round(jcts, "srpt", safe="srpt", remembered=before)
    assert (kept.candidate, kept.reason) == ("srpt", "guarded")  # type: ignore[attr-defined]
    assert kept.stream > 0  # type: ignore[attr-defined]
    assert "over the stream so far it is" in kept.why  # type: ignore[attr-defined]


def test_a_followed_candidate_behind_the_safest_since_it_was_followed_gives_way():
    # fair wins the window (two old workflows it finishes far sooner), but of the ten
    # arrived since it was followed (t >= 30) it is behind srpt on every one
    srpt = np.array([1000.0, 1000.0] + [10.0] * 38)
    fair = np.array([100.0, 100.0] + [10.0] * 28 + [12.0] * 10)
    jcts = {"srpt": srpt, "fair": fair}
    stays = _round(jcts, "fair", safe="srpt", protected=True)
    assert stays.candidate == "fair"  # type: ignore[attr-defined]
    back = _round(jcts, "fair", safe="srpt", since=30.0, protected=True)
    assert (back.candidate, back.reason, back.affected) == ("srpt", "guard", 10)  # type: ignore[attr-defined]
    assert back.behind == pytest.approx(0.2)  # type: ignore[attr-defined]
    assert back.why.startswith(  # type: ignore[attr-defined]
        "came back to srpt, the prior's safest: fair was 20 % behind it over the 10 workflows"
    )


# -- the unfinished workflows in a round -------------------------------------------------


def test_a_round_replays_every_unfinished_workflow_and_marks_them():
    from tests.test_brain_limits import _heavy_request

    heavy_only = _heavy_request(True)
    assert [a.name for a in heavy_only.window[-1:]] == ["ns/huge"]
    request = _heavy_request(True, unfinished=True)
    names = [a.name for a in request.window]
    assert sorted(names[-2:]) == ["ns/huge", "ns/small"]
    assert (request.running, request.heavy) == (2, 1)
    from idlegate.policy import make_scheduler
    from idlegate.policy.portfolio.replay import ReplayOptions, replay_portfolio

    srpt = {"srpt": make_scheduler("srpt")}
    scores = replay_portfolio(request.window, srpt, 4, 0, ReplayOptions(unfinished=request.running))
    assert scores.unfinished is not None and int(scores.unfinished.sum()) == 2
    assert scores.times is not None and list(scores.times) == sorted(scores.times)
