"""The portfolio scheduler: selection with a margin, the tuning search, replay rounds,
cold start, delivered quality (the replay's delay) and determinism."""

from __future__ import annotations

import itertools
import math
from dataclasses import replace
from typing import Any

import numpy as np
import pytest

from idlegate.errors import IdlegateError
from idlegate.evaluation.comparison import WorkloadOptions, build
from idlegate.policy import SchedulerSpec, check_params, make_scheduler, model_files
from idlegate.policy.portfolio import (
    Choice,
    PortfolioScheduler,
    beyond_noise,
    candidate_specs,
    portfolio_config,
    select,
    won,
)
from idlegate.policy.portfolio.arrivals import ArrivalWatch
from idlegate.policy.portfolio.prior import Prior, features_error, load_prior, workload_features
from idlegate.policy.portfolio.rounds import round_confidence, standing, threshold
from idlegate.sim.cluster import Cluster
from idlegate.sim.engine import JobArrival, Workload, simulate
from idlegate.sim.history import simulate_history, write_history
from idlegate.sim.workloads import build_workload
from tests.helpers import dag, tpch_traces

# -- selection with a margin ------------------------------------------------------------


def test_the_best_replaces_the_followed_only_beyond_the_margin():
    scores = {"fair": 100.0, "srpt": 97.0, "fifo": 120.0}
    assert select(scores, "fair", 0.05) == ("fair", "srpt", "kept")  # 3 % < 5 %
    assert select(scores, "fair", 0.02) == ("srpt", "fair", "best")  # 3 % > 2 %
    assert select(scores, "srpt", 0.02) == ("srpt", "fair", "best")  # already the best
    assert select(scores, "fifo", 0.0) == ("srpt", "fair", "best")


def test_a_followed_candidate_without_a_score_or_failed_is_always_replaced():
    assert select({"fair": 100.0, "srpt": 99.9}, "learned:default", 0.5)[0] == "srpt"
    assert select({"fair": math.inf, "srpt": 1e9}, "fair", 0.5)[0] == "srpt"


def test_ties_keep_the_followed_candidate_else_go_to_the_first():
    assert select({"a": 1.0, "b": 1.0}, "c", 0.0) == ("a", "b", "best")
    assert select({"a": 1.0, "b": 1.0}, "b", 0.0) == ("b", "a", "best")
    assert select({"a": 1.0, "b": 1.0}, "b", 0.0, protected=False)[0] == "b"
    assert select({"a": 1.0}, "a", 0.0) == ("a", None, "best")
    with pytest.raises(IdlegateError):
        select({}, "a", 0.0)


def test_an_unprotected_candidate_gives_way_to_any_better_score():
    scores = {"fair": 100.0, "srpt": 99.0}
    assert select(scores, "fair", 0.05)[0] == "fair"
    assert select(scores, "fair", 0.05, protected=False)[0] == "srpt"


def test_only_an_outright_win_protects():
    assert won({"a": 1.0, "b": 2.0}, "a")
    assert not won({"a": 1.0, "b": 1.0}, "a")  # a tie is no evidence
    assert not won({"a": 1.0, "b": 2.0}, "b")


def test_the_choice_says_what_is_followed_and_why():
    choice = Choice("srpt", 642.0, "fair", 734.0, 48, "best", "srpt", {"srpt": 642.0})
    assert choice.text == "following srpt: 642 s vs fair 734 s over the last 48 workflows"
    data = choice.to_dict()
    assert (data["candidate"], data["runner_up"], data["workflows"]) == ("srpt", "fair", 48)
    assert (data["score"], data["runner_up_score"]) == (642.0, 734.0)


# -- the noise rule: a lead must exceed the window's own noise -------------------------


def _per_workflow(**jcts: list[float]) -> tuple[dict[str, float], dict[str, np.ndarray]]:
    arrays = {c: np.array(v) for c, v in jcts.items()}
    return {c: float(np.mean(v)) for c, v in arrays.items()}, arrays


def test_a_lead_within_the_noise_or_a_tie_does_not_move_the_followed_candidate():
    # fifo and fair tie (the same decisions), 4 % ahead of learned on the mean, but one
    # workflow of eight makes all of it: within two standard errors
    scores, jcts = _per_workflow(
        learned=[10, 10, 10, 10, 10, 10, 10, 50],
        fifo=[10, 10, 10, 10, 10, 10, 10, 36.4],
        fair=[10, 10, 10, 10, 10, 10, 10, 36.4],
    )
    assert select(scores, "learned", 0.02, protected=False) == ("fifo", "fair", "best")
    kept = select(scores, "learned", 0.02, protected=False, jcts=jcts, confidence=2.0)
    assert kept == ("learned", "fifo", "noise")


def test_a_lead_beyond_the_noise_moves_it_to_the_best_of_those_that_beat_it():
    # srpt is ahead on every workflow; sjf-cp is ahead on the mean by more, but by one
    # workflow: srpt is the one that beats the followed candidate beyond the noise
    scores, jcts = _per_workflow(
        learned=[10, 12, 11, 13, 10, 12, 11, 13],
        srpt=[9, 11, 10, 12, 9, 11, 10, 12],
        **{"sjf-cp": [10, 12, 11, 13, 10, 12, 11, 1]},
    )
    assert select(scores, "learned", 0.02, protected=False, jcts=jcts, confidence=2.0) == (
        "srpt",
        "sjf-cp",
        "best",
    )
    assert beyond_noise(jcts, "learned", "srpt", 2.0)
    assert not beyond_noise(jcts, "learned", "sjf-cp", 2.0)
    assert beyond_noise(jcts, "learned", "sjf-cp", 0.0)  # 0: any lead counts
    assert not beyond_noise({c: v[:1] for c, v in jcts.items()}, "learned", "srpt", 2.0)


def test_the_threshold_grows_with_the_challengers_compared():
    # Bonferroni on the one-sided normal: 1.645 standard errors (5 %) for one challenger,
    # Φ⁻¹(1 − 0.05 / 5) = 2.326 for five; one standard error (15.9 %) for fourteen
    # candidates (13 challengers): Φ⁻¹(1 − 0.1587 / 13) = 2.251
    assert threshold(1.6448536, 1) == 1.6448536
    assert threshold(1.6448536, 5) == pytest.approx(2.3263479, abs=1e-6)
    assert threshold(1.0, 13) == pytest.approx(2.2506376, abs=1e-6)
    assert threshold(0.0, 13) == 0.0  # no noise rule stays none


def _four_challengers() -> tuple[dict[str, float], dict[str, np.ndarray]]:
    """srpt leads learned by 1.5 standard errors of the paired differences, fifo, fair
    and sjf trail it: four challengers of learned."""
    return _per_workflow(
        learned=[10, 10, 10, 10, 10, 10, 10, 10],
        srpt=[9, 9, 9, 9, 9, 9, 6, 12.5],
        fifo=[11] * 8,
        fair=[12] * 8,
        sjf=[13] * 8,
    )


def test_a_lead_beyond_one_standard_error_among_many_challengers_is_luck():
    # srpt's 1.5 standard errors: enough against one challenger, not against the best
    # of four (threshold(1, 4) = 1.75)
    scores, jcts = _four_challengers()
    pair = select(scores, "learned", 0.02, protected=False, jcts=jcts, confidence=1.0)
    assert pair[0] == "srpt"
    many = select(scores, "learned", 0.02, protected=False, jcts=jcts, confidence=1.0, correct=True)
    assert many == ("learned", "srpt", "noise")


def test_the_priors_candidate_leads_without_the_correction_for_the_challengers():
    # srpt's 1.5 standard errors are luck among four challengers, but not when srpt is
    # the candidate the prior named before the round (no race chose it)
    scores, jcts = _four_challengers()
    args = {"protected": False, "jcts": jcts, "confidence": 1.0, "correct": True}
    assert select(scores, "learned", 0.02, **args, named="fifo")[0] == "learned"
    assert select(scores, "learned", 0.02, **args, named="srpt")[0] == "srpt"
    # (the noise a kept round reports is measured the same way)
    assert round_confidence(scores, "learned", 1.0, True, "srpt", "srpt") == 1.0
    assert round_confidence(scores, "learned", 1.0, True, "fifo", "srpt") == threshold(1.0, 4)
    # ... and within one standard error it is noise all the same
    scores, jcts = _per_workflow(learned=[10] * 8, srpt=[9, 9, 9, 9, 9, 9, 6, 16.5])
    args["jcts"] = jcts
    assert select(scores, "learned", 0.02, **args, named="srpt")[2] == "noise"


def test_early_rounds_come_back_to_the_priors_candidate_on_its_uncorrected_lead():
    # tpch-15s, 100 workflows, tuning seed 2002: the early rounds on 8 and 16 arrivals
    # leave fair, the prior's candidate, for fair?scale=0.5; on 32 fair leads by 7.8 %,
    # within the noise corrected for fourteen challengers. Corrected, the stream stays
    # away from fair until the round on 40 finished workflows and ends 13.9 % behind it;
    # with the prior's candidate named before the round, it comes back at 32 arrivals
    tpch = tpch_traces()
    options = WorkloadOptions(num_executors=50, interarrival=15.0, tpch_dir=tpch, num_jobs=100)
    workload = build("tpch", 2002, options)
    fair = _simulated(workload, "fair", 2002)[0]
    corrected, _ = _simulated(workload, "portfolio?uncorrected=false&guard=none", 2002)
    assert corrected / fair - 1 > 0.10
    named, brain = _simulated(workload, "portfolio", 2002)
    back = [c for c in brain.rounds if c.early and c.workflows == 32]
    assert [c.candidate for c in back] == ["fair"]
    assert named / fair - 1 < 0.03


def _simulated(workload: Workload, spec: str, seed: int) -> tuple[float, Any]:
    """`spec`'s mean JCT on `workload` simulated with `seed`, and the scheduler that ran."""
    brain = make_scheduler(spec)
    result = simulate(workload, brain, seed=seed)
    return float(np.mean([r.jct for r in result.records])), brain


def test_an_early_round_corrects_for_the_fifteen_candidates_it_compares():
    # argo-shapes, 100 workflows, seed 1003 (held out): the prior starts srpt?cap=0.9,
    # the stream's best (its mean JCT is plain srpt's: no job there is held by the cap).
    # Without the correction the early round at 32 arrivals leaves it for the luckiest of
    # fifteen (weighted-fair?alpha=0.5, 3.1 % ahead, more than one standard error), and
    # the stream ends 21 % behind srpt; with it the rounds keep srpt?cap=0.9. (The
    # present check would keep it too, so it is off for the run without the correction.)
    workload = build("argo-shapes", 1003, WorkloadOptions(extra={"num_jobs": 100}))
    srpt = _simulated(workload, "srpt", 1003)[0]
    lucky, brain = _simulated(
        workload, "portfolio?correction=none&present=false&unfinished=false&guard=none", 1003
    )
    rounds = brain.rounds
    assert [c.candidate for c in rounds if c.early][-1] == "weighted-fair?alpha=0.5"
    assert lucky / srpt - 1 > 0.2
    kept, brain = _simulated(workload, "portfolio", 1003)
    rounds = brain.rounds
    early = [c for c in rounds if c.early]
    assert early[-1].workflows == 32 and early[-1].reason == "noise"
    assert {c.candidate for c in rounds} == {"srpt?cap=0.9"}
    assert kept == pytest.approx(srpt)


def test_the_margin_holds_the_prior_candidate_in_the_first_rounds_on_finished_workflows():
    # push, 100 workflows, seed 2001 (a tuning seed): the prior starts on the analytic idle
    # rule over sjf-cp, the stream's best, kept by the early rounds; the first round on 40
    # finished workflows finds sjf-cp 1.7 % ahead beyond one standard error. Unheld, the
    # prior's candidate gives way ("which no margin protected") and the stream ends 3.5 %
    # behind the idle rule; held (`hold`), the 2 % margin keeps it throughout
    workload = build("push", 2001, WorkloadOptions(extra={"num_jobs": 100}))
    idle = "analytic?min_gain=0:sjf-cp"
    best = _simulated(workload, idle, 2001)[0]
    unheld, brain = _simulated(workload, "portfolio?hold=false&unfinished=false&guard=none", 2001)
    first = next(c for c in brain.rounds if c.workflows and not c.early)
    assert (first.workflows, first.previous, first.candidate) == (40, idle, "sjf-cp")
    assert first.margin is None
    assert unheld / best - 1 > 0.03
    held, brain = _simulated(workload, "portfolio?unfinished=false&guard=none", 2001)
    rounds = brain.rounds
    first = next(c for c in rounds if c.workflows and not c.early)
    assert (first.workflows, first.candidate, first.reason, first.margin) == (
        40,
        idle,
        "kept",
        0.02,
    )
    assert all(c.margin is None for c in rounds if c.early)  # (early rounds: noise rule only)
    assert {c.candidate for c in rounds} == {idle}
    assert held == pytest.approx(best)


def test_a_switch_on_a_short_window_must_hold_over_the_rounds_before_it():
    # argo-shapes, 100 workflows, seed 1009 (held out): srpt?cap=0.9, the prior's, is
    # 0.4 % behind the top of the round on 40 finished workflows (fair?scale=2 2.0 %
    # behind it); the next, 11 workflows later, puts fair?scale=2 5.4 % ahead, beyond the
    # margin and the noise, and the stream ends 11 % behind srpt?cap=0.9 (15 % behind
    # srpt, the stream's best). Over both rounds, weighted by their new workflows,
    # srpt?cap=0.9 still leads (`confirm`): it is kept
    workload = build("argo-shapes", 1009, WorkloadOptions(extra={"num_jobs": 100}))
    capped = _simulated(workload, "srpt?cap=0.9", 1009)[0]
    fooled, brain = _simulated(
        workload, "portfolio?confirm=false&unfinished=false&guard=none", 1009
    )
    moved = next(c for c in brain.rounds if c.candidate != c.previous and c.workflows)
    assert (moved.workflows, moved.previous, moved.candidate) == (
        51,
        "srpt?cap=0.9",
        "fair?scale=2",
    )
    assert fooled / capped - 1 > 0.1
    kept, brain = _simulated(workload, "portfolio?unfinished=false&guard=none", 1009)
    held = next(c for c in brain.rounds if c.workflows == 51)
    assert (held.candidate, held.reason) == ("srpt?cap=0.9", "unconfirmed")
    assert held.why == (
        "kept srpt?cap=0.9: fair?scale=2 was 5.4 % better in this round,"
        " but not over the rounds before it"
    )
    assert kept == pytest.approx(capped)


def test_a_candidate_a_round_chose_leaves_on_a_rounds_evidence_alone():
    # argo-shapes, 100 workflows, seed 1000 (held out): the round on 40 finished workflows
    # leaves srpt?cap=0.9, the prior's, for fair?scale=2 (7.5 % ahead); the round on 67
    # (and one still running, heavier than every finished one: `heavy`) finds srpt (tied
    # with srpt?cap=0.9) 6.5 % ahead of it, and the stream ends 2.4 % behind srpt?cap=0.9,
    # its best. Held against the standings, which fair?scale=2 leads after its two
    # rounds, srpt would not come back and the stream would end 7.9 % behind
    # srpt?cap=0.9 (benchmarks/variants/confirm-every-followed-candidate.patch); only the
    # prior's candidate is held so (`confirm`). (The present check keeps the first switch
    # from happening at all, so it is off here: this is `confirm`'s scenario.)
    workload = build("argo-shapes", 1000, WorkloadOptions(extra={"num_jobs": 100}))
    capped = _simulated(workload, "srpt?cap=0.9", 1000)[0]
    mean, brain = _simulated(workload, "portfolio?present=false&unfinished=false&guard=none", 1000)
    moves = [
        (c.workflows, c.candidate, c.reason) for c in brain.rounds if c.candidate != c.previous
    ]
    assert moves[0] == (0, "srpt?cap=0.9", "prior")
    assert moves[1:3] == [(40, "fair?scale=2", "best"), (68, "srpt", "best")]
    assert mean / capped - 1 < 0.03


def test_a_standing_weighs_each_round_by_its_new_workflows():
    rounds = [(40, {"srpt": 0.0, "fair": 0.026}), (11, {"srpt": 0.057, "fair": 0.0})]
    assert standing(rounds, "srpt") == pytest.approx(11 * 0.057 / 51)
    assert standing(rounds, "fair") == pytest.approx(40 * 0.026 / 51)
    assert standing(rounds, "fifo") == math.inf  # (scored by none)


def test_the_trap_of_a_tie_on_the_first_window_of_a_short_stream():
    # follow, 100 one-task jobs on 4 executors, seed 2002: the round at 40 workflows
    # finds fifo tied with fair ahead of learned:default, within the noise. Following
    # fifo ended 3.7 % behind sjf; learned:default alone ties sjf.
    workload = build_workload("follow", 2002, num_jobs=100)
    sjf = _simulated(workload, "sjf", 2002)[0]
    fooled, brain = _simulated(
        workload,
        "portfolio?confidence=0&carriers=none&early=none&prior=false&unfinished=false&guard=none",
        2002,
    )
    assert brain.rounds[0].workflows == 40 and brain.rounds[0].candidate == "fifo"
    assert fooled / sjf - 1 > 0.03
    safe, brain = _simulated(
        workload, "portfolio?early=none&prior=false&unfinished=false&guard=none", 2002
    )
    rounds = brain.rounds
    assert rounds[0].candidate == "learned:default" and rounds[0].reason == "noise"
    assert rounds[0].noise is not None and "within the window's noise" in rounds[0].why
    assert abs(safe / sjf - 1) < 0.005
    with_early = _simulated(workload, "portfolio?prior=false", 2002)[0]
    assert abs(with_early / sjf - 1) < 0.005


# -- known answers of whole rounds -------------------------------------------------------


def _fed(candidates: str, **options: object) -> PortfolioScheduler:
    options.setdefault("min_window", 2)  # (rounds are asked for by hand, on small windows)
    options.setdefault("confidence", 0)  # (windows of a few workflows: the margin's tests)
    extra = "".join(f"&{k}={v}" for k, v in options.items())
    spec = f"portfolio?candidates={candidates}&replayer=worker&records=fed&start=fifo{extra}"
    brain = make_scheduler(spec)
    assert isinstance(brain, PortfolioScheduler)
    return brain


def _round(brain: PortfolioScheduler, window: list[JobArrival], executors: int) -> Choice:
    brain.record(window)
    view = Cluster(executors)
    request = brain.request(view)
    choice = brain.replay(request)
    brain.adopt(choice)
    return choice


def test_a_round_finds_srpt_when_a_short_job_arrives_with_a_long_one():
    # one executor, both at t=0: FIFO runs the long job first (JCTs 10 and 11), SRPT the
    # short one (1 and 11)
    window = [
        JobArrival(0.0, "long", dag(("a", 1, 10.0, []))),
        JobArrival(0.0, "short", dag(("a", 1, 1.0, []))),
    ]
    brain = _fed("fifo+srpt", tune="false")  # (untuned: srpt?cap=0.9 would tie srpt here)
    choice = _round(brain, window, executors=1)
    assert choice.scores == {"fifo": 10.5, "srpt": 6.0}
    assert (choice.candidate, choice.runner_up, choice.workflows) == ("srpt", "fifo", 2)
    assert brain.following == "srpt" and brain.switches == 1


def test_the_margin_protects_an_outright_winner_but_not_the_cold_start_or_a_tie():
    # (untuned: srpt?cap=0.9 would tie srpt on one executor, and a tie of the two is not
    # the tie of the followed candidate with another this test is about)
    window = [
        JobArrival(0.0, "long", dag(("a", 1, 10.0, []))),
        JobArrival(0.0, "short", dag(("a", 1, 1.0, []))),
    ]
    brain = _fed("fifo+srpt", margin=0.9, tune="false")  # srpt is 43 % better: within the margin
    assert _round(brain, window, executors=1).candidate == "srpt"  # from the cold start
    tied = _fed("srpt+fifo", margin=0.9, tune="false")  # on fifo; a tie keeps it, unprotected
    tie = [JobArrival(0.0, "one", dag(("a", 1, 1.0, [])))]
    first = _round(tied, tie, executors=1)
    assert first.scores == {"srpt": 1.0, "fifo": 1.0}
    assert (first.candidate, first.reason) == ("fifo", "best")
    assert _round(tied, window, executors=1).candidate == "srpt"  # the margin did not hold
    brain = _fed("fifo+srpt", margin=0.9, tune="false")
    brain.adopt(Choice("fifo", 10.5, "srpt", 6.0, 2, "best", "fifo", {"fifo": 1.0}))
    choice = _round(brain, window, executors=1)  # fifo won a round: the margin holds
    assert (choice.candidate, choice.reason, choice.best) == ("fifo", "kept", "srpt")


def test_the_tuning_search_gives_small_jobs_more_under_weighted_fair():
    # two executors, a 10-task job and a 2-task job at t=0: alpha > 0 gives the big job
    # both executors first (JCTs 5 and 6), alpha < 0 one each (2 and 6)
    window = [
        JobArrival(0.0, "big", dag(("a", 10, 1.0, []))),
        JobArrival(0.0, "small", dag(("a", 2, 1.0, []))),
    ]
    brain = _fed("weighted-fair")
    choice = _round(brain, window, executors=2)
    grid = candidate_specs(brain.config)
    assert grid[0] == "weighted-fair" and set(choice.scores) == set(grid)
    assert choice.scores["weighted-fair?alpha=1"] == 5.5
    assert choice.scores["weighted-fair?alpha=-2"] == 4.0
    assert choice.candidate in (
        "weighted-fair",
        "weighted-fair?alpha=-2",
        "weighted-fair?alpha=-0.5",
    )
    assert choice.score == 4.0


def test_without_tuning_only_the_default_values_are_replayed():
    brain = _fed("weighted-fair+fair+analytic", tune="false")
    window = [JobArrival(0.0, "one", dag(("a", 2, 1.0, [])))]
    choice = _round(brain, window, executors=2)
    assert set(choice.scores) == {"weighted-fair", "fair", "analytic?min_gain=0:weighted-fair"}


def test_a_candidate_that_fails_in_the_replay_scores_infinity_and_is_not_followed():
    window = [JobArrival(0.0, "one", dag(("a", 1, 1.0, [])))]
    brain = _fed("fifo+srpt")
    brain._replayers["srpt"] = _Failing()
    choice = _round(brain, window, executors=1)
    assert choice.scores["srpt"] == math.inf and choice.candidate == "fifo"
    assert choice.to_dict()["scores"]["srpt"] is None


class _Failing:
    name = "failing"

    def reset(self, rng: object) -> None:
        pass

    def decide(self, view: object) -> object:
        raise RuntimeError("broken")


# -- the spec ---------------------------------------------------------------------------


def test_the_spec_parses_formats_and_checks_its_options(tmp_path):
    text = "portfolio?candidates=srpt+fair&window=50&margin=0.05"
    spec = SchedulerSpec.parse(text)
    assert spec.format() == text
    config, _ = portfolio_config(spec, {})
    assert (config.candidates, config.window, config.margin) == (("srpt", "fair"), 50, 0.05)
    check_params(text)
    for bad in ("portfolio?candidates=srpt+bogus", "portfolio?window=1", "portfolio?horizon=3"):
        with pytest.raises(IdlegateError):
            check_params(bad)
    with pytest.raises(IdlegateError, match="policy"):
        check_params("portfolio?candidates=trained")
    with pytest.raises(IdlegateError, match="window=30 is below min_window=40"):
        check_params("portfolio?window=30")  # (no round would ever run)
    check_params("portfolio?window=30&min_window=30")
    with pytest.raises(IdlegateError, match="runs over the round's best rule"):
        check_params("portfolio?candidates=analytic+learned")
    with pytest.raises(IdlegateError, match="does not exist"):
        make_scheduler(f"portfolio?policy={tmp_path / 'missing.onnx'}")
    assert len(model_files("portfolio")) == 1  # the shipped policy
    assert model_files("portfolio?candidates=srpt&start=srpt") == ()


# -- standings: leaving out the candidates that trail -----------------------------------


def _scored(scores: dict[str, float], new: int) -> Choice:
    best = min(scores, key=scores.__getitem__)
    return Choice(best, scores[best], None, None, new, "best", best, scores, new=new)


def test_standings_weigh_each_round_by_its_new_workflows_from_window_on():
    brain = _fed("fifo+srpt+fair", window=4, drop=0.05)
    brain.adopt(_scored({"srpt": 100.0, "fair": 110.0, "fifo": 120.0}, new=2))
    assert brain.standings() == {}  # 2 new workflows < window: no standing yet
    assert brain.dropped() == frozenset()
    brain.adopt(_scored({"srpt": 100.0, "fair": 100.0, "fifo": 130.0}, new=6))
    standing = brain.standings()  # (2 x 0.1 + 6 x 0) / 8, (2 x 0.2 + 6 x 0.3) / 8
    assert standing == pytest.approx({"srpt": 0.0, "fair": 0.025, "fifo": 0.275})
    assert brain.dropped() == {"fifo"}  # trails the leader srpt by 27.5 % > 5 %


def test_a_candidate_far_behind_is_left_out_from_min_window_on():
    # (on Alibaba's trace fifo, srpt and most rules run 5-20 times the leader's JCT in
    # every round: replaying them until `window` workflows of evidence is most of a round)
    # (fair, 40 % behind twice, would rest: `rest` is tests/test_round_rest.py's)
    brain = _fed("fifo+srpt+fair", window=200, min_window=40, far=0.5, rest="none")
    brain.adopt(_scored({"srpt": 100.0, "fair": 140.0, "fifo": 160.0}, new=30))
    assert brain.dropped() == frozenset()  # 30 new workflows < min_window
    brain.adopt(_scored({"srpt": 100.0, "fair": 140.0, "fifo": 160.0}, new=10))
    assert brain.standings() == {}  # (`drop` still needs 200)
    assert brain.dropped() == {"fifo"}  # 60 % behind > 50 %; fair, 40 %, stays
    brain = _fed("fifo+srpt+fair", window=200, min_window=40, far="none", rest="none")
    brain.adopt(_scored({"srpt": 100.0, "fair": 140.0, "fifo": 160.0}, new=40))
    assert brain.dropped() == frozenset()


def test_the_leader_the_followed_and_their_base_rule_are_never_left_out():
    brain = _fed("fifo+srpt+analytic", window=2, drop=0.01)
    brain.adopt(_scored({"analytic?min_gain=0:fifo": 90.0, "fifo": 100.0, "srpt": 120.0}, 5))
    assert brain.following == "analytic?min_gain=0:fifo"
    assert brain.dropped() == {"srpt"}  # fifo trails by 11 %, but the leader stands on it
    brain = _fed("fifo+srpt", window=2, drop=0.01)  # follows fifo (the start)
    brain.adopt(_scored({"fifo": 120.0, "srpt": 100.0}, 5))
    brain.choice = replace(brain.choice, candidate="fifo")  # (as if a margin had kept it)
    assert brain.dropped() == frozenset()


def test_the_rule_under_an_analytic_candidate_that_stays_is_not_left_out():
    # (a round tries the analytic rule over its best rule: were fifo, the only rule under
    # it, left out, the analytic candidate would vanish from the rounds though it stays)
    brain = _fed("fifo+srpt+analytic", window=2, drop=0.05)
    brain.adopt(_scored({"srpt": 100.0, "analytic?min_gain=0:fifo": 101.0, "fifo": 120.0}, 5))
    assert brain.following == "srpt"
    assert brain.dropped() == frozenset()  # fifo trails by 20 %, the analytic rule by 1 %
    brain = _fed("fifo+srpt+analytic", window=2, drop=0.05)
    brain.adopt(_scored({"srpt": 100.0, "analytic?min_gain=0:fifo": 110.0, "fifo": 120.0}, 5))
    assert brain.dropped() == {"analytic?min_gain=0:fifo", "fifo"}  # both trail


def test_a_left_out_candidate_comes_back_when_its_rounds_leave_the_memory():
    brain = _fed("fifo+srpt", window=4, drop=0.05, memory=8)
    brain.adopt(_scored({"srpt": 100.0, "fifo": 150.0}, new=4))
    assert brain.dropped() == {"fifo"}
    brain.adopt(_scored({"srpt": 100.0}, new=4))  # fifo left out of this round
    assert brain.dropped() == {"fifo"}
    brain.adopt(_scored({"srpt": 100.0}, new=4))  # the first round leaves the memory
    assert brain.standings() == {"srpt": 0.0} and brain.dropped() == frozenset()


def test_a_round_leaves_out_what_trails_and_says_so():
    window = [
        JobArrival(0.0, "long", dag(("a", 1, 10.0, []))),
        JobArrival(0.0, "short", dag(("a", 1, 1.0, []))),
    ]
    brain = _fed("fifo+srpt+fair", window=2, drop=0.05, tune="false")
    first = _round(brain, window, executors=1)
    assert set(first.scores) == {"fifo", "srpt", "fair"} and first.left_out == ()
    assert first.new == 2  # the first round's window is all new
    brain.record([JobArrival(float(t), f"n{t}", dag(("a", 1, 1.0, []))) for t in (1, 2, 3)])
    second = brain.replay(brain.request(Cluster(1)))
    assert second.new == 2  # 3 finished since, but the round replays a window of 2
    assert second.left_out == ("fair", "fifo")  # both 75 % behind srpt in the first round
    assert set(second.scores) == {"srpt"} and second.to_dict()["left_out"] == ["fair", "fifo"]


def test_a_round_replays_the_analytic_candidate_followed_over_another_rule():
    window = [
        JobArrival(0.0, "long", dag(("a", 1, 10.0, []))),
        JobArrival(0.0, "short", dag(("a", 1, 1.0, []))),
    ]
    brain = _fed("fifo+srpt+analytic", window=2, tune="false")
    brain.choice = replace(brain.choice, candidate="analytic?min_gain=0:fifo")  # (a round chose)
    choice = _round(brain, window, executors=1)
    # srpt is this round's best rule, so the analytic rule is tried over srpt, and the
    # one followed, over fifo, is replayed too: no switch without its score
    assert set(choice.scores) == {
        "fifo",
        "srpt",
        "analytic?min_gain=0:srpt",
        "analytic?min_gain=0:fifo",
    }
    assert choice.scores["analytic?min_gain=0:fifo"] == choice.scores["fifo"] == 10.5


def test_a_change_of_workload_brings_every_candidate_back():
    brain = _fed("fifo+srpt", window=40, drop=0.05, every=100, period="none")
    brain.record(_jobs("s", 40, 1.0))
    brain.request(Cluster(1))  # (a round: the next records are new)
    brain.adopt(_scored({"srpt": 100.0, "fifo": 150.0}, new=40))
    assert brain.dropped() == {"fifo"}
    brain.record(_jobs("big", 10, 100.0))  # 100 times the work: another workload
    assert brain.dropped() == frozenset()


def test_after_a_change_of_workload_a_round_replays_only_the_workflows_since():
    brain = _fed("fifo+srpt", window=200, every=100, period="none")
    brain.record(_jobs("s", 40, 1.0))
    _fed_round(brain)
    brain.record(_jobs("big", 12, 100.0))  # 100 times the work: another workload
    request = brain.request(Cluster(1))
    assert [a.name for a in request.window] == [f"big{i}" for i in range(12)]
    assert request.new == 12 and request.running == 0  # (fed: no running workflow known)


# -- runs in the simulator --------------------------------------------------------------

CHEAP = (
    "portfolio?candidates=fifo+srpt+fair&start=fair&window=40&min_window=10&every=10&prior=false"
)


def _run(spec: str, seed: int = 3, jobs: int = 150):
    workload = build_workload("k8s-batch", seed, num_jobs=jobs)
    brain = make_scheduler(spec)
    result = simulate(workload, brain, seed=seed)
    return brain, result


def test_same_seed_same_result():
    (a, ra), (b, rb) = _run(CHEAP), _run(CHEAP)
    assert [r.finish for r in ra.records] == [r.finish for r in rb.records]
    assert [c.to_dict() | {"cpu_seconds": 0} for c in a.rounds] == [
        c.to_dict() | {"cpu_seconds": 0} for c in b.rounds
    ]
    assert len(a.rounds) >= 5  # rounds did happen


def test_a_round_takes_effect_only_after_its_replay_delay():
    prompt, _ = _run(CHEAP + "&replay_delay=0")
    assert prompt.rounds and prompt.rounds[0].reason != "cold start"
    never, result = _run(CHEAP + "&replay_delay=1e9")
    assert never.rounds == [] and never.following == "fair"  # every choice still pending
    fair = simulate(build_workload("k8s-batch", 3, num_jobs=150), make_scheduler("fair"), 3)
    assert [r.finish for r in result.records] == [r.finish for r in fair.records]


def test_the_account_splits_the_run_by_when_each_choice_took_effect():
    brain = make_scheduler("portfolio?candidates=srpt+fair&start=fair&replay_delay=5")
    assert isinstance(brain, PortfolioScheduler)
    for at, candidate in ((100.0, "srpt"), (300.0, "srpt"), (600.0, "fair")):
        brain.adopt(Choice(candidate, 1.0, None, None, 10, "best", at=at))
    assert brain.followed_from() == [
        (0.0, "fair"),
        (105.0, "srpt"),
        (305.0, "srpt"),
        (605.0, "fair"),
    ]
    assert brain.time_followed(1000.0) == {"srpt": 500.0, "fair": 500.0}
    assert brain.time_followed(200.0) == {"fair": 105.0, "srpt": 95.0}
    account = brain.account(1000.0)
    assert (account["start"], account["switches"], len(account["rounds"])) == ("fair", 2, 3)


def test_rounds_come_by_the_clock_as_well_as_by_finished_workflows():
    base = "portfolio?candidates=srpt+fair&start=fair&min_window=10&every=100000&early=none&prior=false"
    by_clock, _ = _run(base + "&period=600")
    assert len(by_clock.rounds) >= 3
    times = [c.at for c in by_clock.rounds]
    assert all(later - earlier >= 600 for earlier, later in itertools.pairwise(times))
    never, _ = _run(base + "&period=none")
    assert never.rounds == []


def test_a_prior_history_chooses_before_the_first_decision(tmp_path):
    past = build_workload("k8s-batch", 7, num_jobs=60)
    path = write_history(tmp_path / "past.jsonl", simulate_history(past, make_scheduler("fair")))
    spec = f"portfolio?candidates=fifo+srpt&history={path}&every=1000&period=none"
    brain, _ = _run(spec, jobs=40)
    (first,) = brain.rounds
    assert first.reason == "prior history" and first.workflows == 60
    assert first.candidate == min(first.scores, key=first.scores.__getitem__)


def test_every_job_that_finishes_is_recorded_once():
    spec = "portfolio?candidates=srpt&start=srpt&window=1000&every=100000&period=none"
    brain, result = _run(spec, jobs=80)
    seen = [a.name for a in brain.finished]
    assert len(seen) == len(set(seen)) and len(seen) >= len(result.records) - 2
    # those not seen yet finished after the last decision: the last ones to finish
    by_finish = [r.name for r in sorted(result.records, key=lambda r: r.finish)]
    assert set(seen) == set(by_finish[: len(seen)])


def test_the_followed_candidate_decides():
    brain = make_scheduler("portfolio?candidates=srpt&start=srpt&every=100000")
    workload = build_workload("k8s-batch", 1, num_jobs=60)
    ours, srpt = simulate(workload, brain, 1), simulate(workload, make_scheduler("srpt"), 1)
    assert [r.finish for r in ours.records] == [r.finish for r in srpt.records]
    assert np.isfinite([r.jct for r in ours.records]).all()


def _fed_round(brain: PortfolioScheduler, executors: int = 1) -> Choice:
    choice = brain.replay(brain.request(Cluster(executors)))
    brain.adopt(choice)
    return choice


def _jobs(prefix: str, count: int, seconds: float) -> list[JobArrival]:
    return [JobArrival(float(i), f"{prefix}{i}", dag(("a", 1, seconds, []))) for i in range(count)]


def _mix(prefix: str, count: int, big: float) -> list[JobArrival]:
    return [
        JobArrival(float(i), f"{prefix}{i}", dag(("a", 1, big if i % 2 else 1.0, [])))
        for i in range(count)
    ]


def test_rounds_back_off_while_nothing_switches_and_a_change_of_size_restores_the_pace():
    def settled(big: float = 1.0) -> PortfolioScheduler:
        # `big` != 1: every other job that size, a two-size mix
        brain = _fed("srpt", backoff=4, min_window=2, every=10, period="none")
        brain.record(_mix("s", 20, big))
        _fed_round(brain)  # fifo (the start) -> srpt: the first pace
        brain.record(_mix("t", 10, big))
        assert brain.needs_replay(0.0)
        _fed_round(brain)  # srpt kept: the next round after 20
        return brain

    same = settled()
    same.record(_jobs("u", 10, 1.0))
    assert not same.needs_replay(0.0)
    same.record(_jobs("v", 10, 1.0))
    assert same.needs_replay(0.0)
    bigger = settled()
    bigger.record(_jobs("big", 10, 100.0))  # 100 times the work: the workload changed
    assert bigger.needs_replay(0.0)
    mixed = settled(big=100.0)  # half small, half big; now 7 big of 10: the same mix
    mixed.record(_jobs("m", 7, 100.0) + _jobs("n", 3, 1.0))
    assert not mixed.needs_replay(0.0)
    flat = _fed("srpt", backoff=1, min_window=2, every=10, period="none")  # every 10
    flat.record(_jobs("s", 20, 1.0))
    _fed_round(flat)
    flat.record(_jobs("t", 10, 1.0))
    _fed_round(flat)
    flat.record(_jobs("u", 10, 1.0))
    assert flat.needs_replay(0.0)


def test_a_seeded_window_replays_at_once_and_says_where_it_came_from():
    brain = _fed("fifo+srpt", min_window=4, window=6)
    brain.record(_jobs("live", 1, 1.0))
    brain.seed(_jobs("old", 3, 1.0) + _jobs("old", 1, 1.0) + _jobs("live", 1, 1.0), "history sink")
    assert [a.name for a in brain.finished] == ["old0", "old1", "old2", "live0"]  # once each
    assert brain.needs_replay(0.0)  # min_window reached: at once
    first = _fed_round(brain)
    assert (first.reason, first.workflows, first.prior, first.source) == (
        "prior history", 4, 3, "history sink"
    )  # fmt: skip
    assert first.replayed == {"workflows": 4, "prior": 3, "source": "history sink"}
    brain.record(_jobs("new", 3, 1.0))  # the window keeps 6: the oldest seeded leave first
    second = _fed_round(brain)
    assert (second.reason, second.workflows, second.prior) == ("best", 6, 2)
    few = _fed("fifo+srpt", min_window=4)
    few.seed(_jobs("old", 2, 1.0), "history sink")
    assert not few.needs_replay(0.0) and len(few.finished) == 2  # below min_window: they wait


# -- the start: the shipped prior, looked up by the workflows arrived --------------------


def _prior() -> Prior:
    features = {"dags-a": (3.9, 6.6, 2.0, -0.7), "dags-b": (3.9, 5.8, 2.0, -0.3)}
    losses = {  # fair is best on a, srpt on b; learned is 10 % behind on both
        "dags-a": {"fair": (0.0, 0.0), "srpt": (1.0, 1.5), "learned:default": (0.1, 0.12)},
        "dags-b": {"fair": (0.8, 1.2), "srpt": (0.0, 0.0), "learned:default": (0.1, 0.11)},
    }
    return Prior(features, losses)


def test_the_prior_picks_the_candidate_safe_on_every_workload_alike():
    prior, allowed = _prior(), ["fair", "srpt", "learned:default"]
    # between the two: neither's best is safe on the other
    assert prior.neighbours((3.9, 6.2, 2.0, -0.5)) == ["dags-a", "dags-b"]
    assert prior.safest((3.9, 6.2, 2.0, -0.5), allowed) == "learned:default"
    assert prior.safest((3.9, 6.2, 2.0, -0.5), ["fair", "srpt"]) == "fair"  # 1.2 < 1.5
    # with only one within reach, its best
    assert prior.safest((3.9, 7.0, 2.0, -0.7), allowed) == "fair"
    # like neither: no answer (the scheduler follows its start)
    assert prior.safest((1.4, 0.0, 0.0, 3.0), allowed) is None


def test_a_workload_much_farther_than_the_nearest_is_not_alike():
    # tpch-15s, 100 workflows, seed 1003 (held out): the first 8 workflows are 0.23 from
    # the TPC-H workloads and 0.97 from the TPC-H-like one, all within the reach of 1;
    # counted alike, the safest over the three was learned:default (fair is 116 % behind
    # on TPC-H-like's worst tuning seed), and the stream ended 8.8 % behind fair
    here = (3.9, 6.0, 2.0, -0.5)
    at = lambda d: (3.9, 6.0, 2.0, -0.5 + d)  # noqa: E731
    prior = Prior({"tpch": at(0.23), "tpch-like": at(0.97)}, {})
    assert prior.neighbours(here) == ["tpch"]  # 0.97 > 3 x 0.23
    assert Prior({"tpch": at(0.23), "like": at(0.6)}, {}).neighbours(here) == ["tpch", "like"]
    assert Prior({"same": at(0.0), "near": at(0.2)}, {}).neighbours(here) == ["same", "near"]


def test_a_few_workflows_of_a_mix_find_the_mix_within_their_standard_error():
    # mixed-0.5, seed 1004: its first 16 workflows (one-task jobs and TPC-H's DAGs)
    # have mean features 1.55 from the mix's, beyond the reach of 1, and the brain
    # followed learned:default (its start) into an early round that left it for
    # weighted-fair?alpha=-2, 6.8 % behind fair on the stream; their standard error
    # (1.05) brings the mix within reach, and with it fair. The DAGs are the traces'
    # (mixed takes TPC-H-like ones without them, whose error is under 1): skip without
    tpch_traces()
    workload = build("mixed", 1004, WorkloadOptions(extra={"num_jobs": 100, "dags": "tpch"}))
    dags = [job.dag for job in workload.jobs[:16]]
    features = workload_features(dags, workload.num_executors)
    prior, allowed = load_prior(), ["fair", "srpt", "learned:default"]
    assert prior is not None and prior.safest(features, allowed) is None
    assert 1.0 < features_error(dags) < 1.1
    assert prior.safest(features, allowed, features_error(dags)) == "fair"
    assert features_error(dags[:1]) == 0.0


def test_a_prior_that_cannot_be_read_is_no_prior(tmp_path, caplog):
    bad = tmp_path / "prior.json"
    bad.write_text('{"workloads": {"a": {"features": [1]}}}')  # no losses
    with caplog.at_level("WARNING"):
        assert load_prior(bad) is None
    assert "cannot be read" in caplog.text and "brain_prior.py" in caplog.text


def test_the_shipped_prior_starts_follow_on_the_idle_rule_from_the_first_decision():
    # follow, 100 jobs, seed 2003: learned:default (the cold start) and every round on
    # 40+ finished workflows keep it, 11 % behind the analytic idle rule over sjf-cp;
    # the prior finds the workflows like those of follow, push and recurring, where
    # that rule is the safe one, and follows it from the first decision
    workload = build_workload("follow", 2003, num_jobs=100)
    cold = _simulated(workload, "portfolio?prior=false", 2003)[0]
    started, brain = _simulated(workload, "portfolio", 2003)
    first = brain.rounds[0]
    assert (first.reason, first.candidate) == ("prior", "analytic?min_gain=0:sjf-cp")
    assert first.at == brain.followed_from()[1][0] < 20  # the first arrival's decision
    assert "prior's safest" in first.text
    assert started / cold - 1 < -0.08


def test_a_start_the_user_gives_wins_over_the_shipped_prior():
    # the same follow stream, where the prior picks the analytic idle rule at the first
    # decision (above); with start=srpt typed, srpt is followed and the prior stays unread
    brain = make_scheduler("portfolio?start=srpt&early=none")
    simulate(build_workload("follow", 2003, num_jobs=20), brain, seed=2003)
    assert brain.following == "srpt"
    assert [c.reason for c in brain.rounds] == []


def test_early_rounds_replay_the_workflows_arrived_before_forty_have_finished():
    # TPC-H-like DAGs at load 0.85 on 50 executors, seed 1: on finished workflows alone
    # the first round (40 finished, at 336 s) moves fifo to srpt; the early round at 16
    # arrivals (6 of them running) finds srpt beyond the noise at 97 s
    workload = build_workload("tpch-like", 1, num_jobs=60, load=0.85)
    base = "portfolio?candidates=fifo+srpt&start=fifo&prior=false&unfinished=false&guard=none"
    late, brain = _simulated(workload, base + "&early=none", 1)
    assert [(c.candidate, c.workflows, c.early) for c in brain.rounds[:1]] == [("srpt", 40, False)]
    early, brain = _simulated(workload, base, 1)
    assert [c.workflows for c in brain.rounds if c.early] == [8, 16, 32]
    switch = next(c for c in brain.rounds if c.candidate == "srpt")
    assert switch.early and switch.running > 0 and switch.at < 300
    assert f"({switch.running} still running)" in switch.text
    assert early / late - 1 < -0.05


def _shift_run(spec: str) -> tuple[PortfolioScheduler, float, float]:
    """`spec` on 40 TPC-H-like DAGs, then 20 k8s-batch pods (seed 1): the brain, the
    switch's time and when the tenth pod finished."""
    workload = build_workload("shift", 1, first_jobs=40, second_jobs=20)
    brain = make_scheduler(spec)
    assert isinstance(brain, PortfolioScheduler)
    result = simulate(workload, brain, seed=1)
    switch = min(j.time for j in workload.jobs if j.name.startswith("2:"))
    pods = sorted(r.finish for r in result.records if r.name.startswith("2:"))
    return brain, switch, pods[9]


def test_a_change_seen_in_the_arrivals_rereads_the_prior_before_ten_pods_finish():
    # with no round before 100 finished workflows, only the arrivals can tell the pods
    # came: the third pod (329 s, 24 s after the switch) completes the run of foreign
    # ones, half an hour before the tenth pod finishes (2,081 s), and the prior is read
    # for them; unwatched, the last lookup is the DAGs' (at 32 s: srpt, as for the pods)
    spec = "portfolio?candidates=srpt+fair&tune=false&early=none&min_window=100"
    brain, switch, tenth = _shift_run(spec)
    change = next(c for c in brain.rounds if c.reason == "change")
    assert change.candidate == "srpt"
    assert switch <= change.at < switch + 60 < tenth
    assert brain.following == "srpt" and "arriving changed" in change.why
    blind, _, _ = _shift_run(spec + "&watch=false")
    assert [c.reason for c in blind.rounds] == ["prior", "prior"]
    assert all(c.at < switch for c in blind.rounds)


def test_after_a_change_seen_in_the_arrivals_early_rounds_replay_the_new_workload():
    # the same stream with early rounds: after the change they replay the pods arrived
    # since it (8, then 16, most still running), not the 40 DAGs before them
    brain, _, tenth = _shift_run("portfolio?candidates=srpt+fair&tune=false&min_window=100")
    change = next(c for c in brain.rounds if c.reason == "change")
    after = [(c.workflows, c.early) for c in brain.rounds if c.at > change.at]
    assert after == [(8, True), (16, True)]
    assert all(c.running > 0 and c.at < tenth for c in brain.rounds if c.at > change.at)


def test_the_arrival_watch_finds_a_run_of_foreign_workflows_and_not_a_mix():
    one_task = [(0.0, 0.0, d) for d in (0.0, 0.5, -0.5, 0.3, -0.3) * 4]  # 20 workflows
    pods = [(2.3, 1.4, 5.3)] * 3
    watch: ArrivalWatch[int] = ArrivalWatch()
    seen = [watch.see(i, f) for i, f in enumerate([*one_task, *pods])]
    assert seen == [None] * 22 + [20]  # the third pod; the new workload from the first
    mix = [f for pair in zip(one_task, pods * 7, strict=False) for f in pair]
    watch = ArrivalWatch()
    assert [watch.see(i, f) for i, f in enumerate(mix * 3)] == [None] * len(mix) * 3
    watch = ArrivalWatch()  # an outlier or two, then the workload again: no change
    stream = [*one_task, *pods[:2], *one_task]
    assert [watch.see(i, f) for i, f in enumerate(stream)] == [None] * len(stream)


# -- records=fed: the start seen in the workflows arriving (the operator's) ---------------


def _admit(view: Cluster, brain: PortfolioScheduler, dags: list[Any], prefix: str) -> list[Any]:
    """Each of `dags` admitted to `view` with an operator's payload (its workflow object,
    not a duration model), a decision after each: the jobs."""
    jobs = []
    for i, d in enumerate(dags):
        jobs.append(view.add_job(d, view.now, f"ns/{prefix}{i}", payload=object()))
        brain.decide(view)
    return jobs


def test_a_fed_portfolio_runs_early_rounds_on_the_workflows_it_sees_arrive():
    # one executor, all at t=0: FIFO runs the long one first (mean JCT 135 s), SRPT the
    # seven short ones (56 s); none has finished, so only the arrivals can tell
    brain = _fed("fifo+srpt", min_window=40)
    view = Cluster(1)
    long, short = dag(("a", 1, 100.0, [])), dag(("a", 1, 10.0, []))
    first = _admit(view, brain, [long, *[short] * 6], "w")
    assert not brain.needs_replay(view.now)
    first += _admit(view, brain, [short], "w7")
    assert brain.needs_replay(view.now)
    request = brain.request(view)
    assert request.early and request.running == 8 == len(request.window)
    assert all(a.durations is None for a in request.window)  # (replayed at their estimates)
    choice = brain.replay(request)
    brain.adopt(choice)
    assert (choice.early, choice.candidate, choice.workflows) == (True, "srpt", 8)
    assert brain.following == "srpt" and "(8 still running)" in choice.text
    # 16 arrived: the next early round; meanwhile, with no decision since, six of the
    # first finish (the driver records them) and two are deleted: they run no more
    later = _admit(view, brain, [short] * 8, "x")
    for job in first:
        view.remove_job(job, view.now)
    brain.record([JobArrival(j.arrival, j.name, j.dag) for j in first[:6]])
    request = brain.request(view)
    assert request.early and request.running == 8
    names = [a.name for a in request.window]
    assert sorted(names) == sorted([j.name for j in first[:6] + later])
    for job in later:  # (the running set is the view's at each decision: it stays bounded)
        view.remove_job(job, view.now)
    brain.decide(view)
    assert not brain._arrivals.jobs


def test_a_fed_portfolio_counts_the_workflows_it_sees_not_the_clusters_ids():
    # a portfolio that replaces another on a cluster that ran 20 workflows (a reload): the
    # 5 it sees running are 5 arrivals, too few for an early round
    view = Cluster(4)
    for i in range(20):
        job = view.add_job(dag(("a", 1, 10.0, [])), 0.0, f"ns/old{i}")
        if i < 15:
            view.remove_job(job, 0.0)
    brain = _fed("fifo+srpt", min_window=40)
    brain.decide(view)
    assert not brain.needs_replay(view.now)
    _admit(view, brain, [dag(("a", 1, 10.0, []))] * 3, "new")
    assert brain.needs_replay(view.now) and brain.request(view).running == 8


def test_after_a_change_the_running_window_is_by_arrival_not_by_job_id():
    # twenty one-task jobs, then DAGs of 40 tasks (the change is seen at the third); among
    # them an old one-task workflow admitted late (an operator's ids follow admission: a
    # workflow read again after a restart arrived long before): the new workload's early
    # round replays the DAGs alone, as its rounds on finished workflows do
    brain = make_scheduler(
        "portfolio?candidates=srpt+fair&tune=false&replayer=worker&records=fed&min_window=40"
    )
    assert isinstance(brain, PortfolioScheduler)
    view = Cluster(4)
    one, pod = dag(("a", 1, 2.0, [])), dag(("a", 20, 60.0, []), ("b", 20, 60.0, ["a"]))
    for i in range(20):
        view.add_job(one, float(i), f"ns/old{i}", payload=object())
        brain.decide(view)
    for i in range(7):
        view.add_job(pod, 20.0 + i, f"ns/pod{i}", payload=object())
        brain.decide(view)
        if i == 3:
            view.add_job(one, 23.5, "ns/late", payload=object(), arrival=5.0)
            brain.decide(view)
    assert [c.reason for c in brain.rounds].count("change") == 1
    assert brain.needs_replay(view.now)
    request = brain.request(view)
    assert request.early
    assert sorted(a.name for a in request.window) == [f"ns/pod{i}" for i in range(7)]


def test_a_fed_portfolio_sees_a_change_in_the_workflows_arriving():
    # twenty one-task jobs, then three DAGs of 40 tasks: the third completes the run of
    # foreign ones, and the prior is read again for them (none has finished)
    brain = make_scheduler(
        "portfolio?candidates=srpt+fair&tune=false&replayer=worker&records=fed&early=none"
    )
    assert isinstance(brain, PortfolioScheduler)
    view = Cluster(4)
    jobs = [dag(("a", 1, 1.0 + i % 5, [])) for i in range(20)]
    pods = [dag(("a", 20, 60.0, []), ("b", 20, 60.0, ["a"]))] * 3
    _admit(view, brain, jobs, "job")
    assert "change" not in [c.reason for c in brain.rounds]
    _admit(view, brain, pods, "pod")
    assert [c.reason for c in brain.rounds].count("change") == 1
