"""A round's replays, shared and cut (`policy.portfolio.runs`, issue 79 item 4): rules
that decide alike on the window are replayed once, and a replay that can no longer
change the round stops early, the round's answer the same."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np
import pytest

from idlegate.policy import make_scheduler
from idlegate.policy.portfolio import PortfolioScheduler, ReplayRequest, replay_portfolio
from idlegate.policy.portfolio import runs as runs_module
from idlegate.policy.portfolio.decision import play_round
from idlegate.policy.portfolio.runs import CUT, Runs
from idlegate.sim.engine import simulate
from idlegate.sim.protocol import Action, ClusterView
from idlegate.sim.workloads import build_workload

# 40 k8s-batch workflows at load 0.9 on 40 executors: srpt and the idle rule over it make
# the same decisions there; fifo is 4.8 % behind srpt, fair 26 %
WINDOW = build_workload("k8s-batch", 1, num_jobs=40, load=0.9)


@pytest.fixture
def replays(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The lead of every replay run, in order."""
    led: list[str] = []
    simulate = runs_module._simulate

    def counted(workload: Any, scheduler: Any, seed: int, limit: float | None, test: Any) -> Any:
        led.append(scheduler.name)
        return simulate(workload, scheduler, seed, limit, test)

    monkeypatch.setattr(runs_module, "_simulate", counted)
    return led


def alone(spec: str, scheduler: Any = None) -> Any:
    """`spec` replayed on its own."""
    scheduler = scheduler or make_scheduler(spec)
    return replay_portfolio(WINDOW.jobs, {spec: scheduler}, WINDOW.num_executors, 0)


def test_rules_that_decide_alike_share_one_replay_and_score_as_if_alone(replays):
    specs = ["srpt", "analytic?min_gain=0:srpt", "fifo"]
    own = {s: alone(s) for s in specs}
    replays.clear()
    schedulers = {s: make_scheduler(s) for s in specs}
    scores = replay_portfolio(WINDOW.jobs, schedulers, WINDOW.num_executors, 0)
    assert replays == ["srpt", "fifo"]  # (three candidates, two replays)
    for s in specs:
        assert scores.means[s] == own[s].means[s]
        assert np.array_equal(scores.jcts[s], own[s].jcts[s])
        assert scores.decisions[s] == own[s].decisions[s]
    # (the events are counted as if each were replayed alone: the modelled cost is the same)
    assert scores.events == sum(o.events for o in own.values())
    assert len(set(scores.means.values())) == 2 and not scores.cut


def test_a_shared_replay_gives_each_rule_the_runs_random_stream_as_its_own_would():
    specs = {"random": make_scheduler("random"), "random again": make_scheduler("random")}
    scores = replay_portfolio(WINDOW.jobs, specs, WINDOW.num_executors, 0)
    own = alone("random")
    assert scores.means == {"random": own.means["random"], "random again": own.means["random"]}


class Breaks:
    """srpt until its sixth decision, then it raises."""

    name = "breaks"

    def __init__(self) -> None:
        self.srpt = make_scheduler("srpt")
        self.asked = 0

    def reset(self, rng: Any) -> None:
        self.srpt.reset(rng)
        self.asked = 0

    def decide(self, view: ClusterView) -> Action:
        self.asked += 1
        if self.asked > 5:
            raise RuntimeError("broke at its sixth decision")
        return self.srpt.decide(view)


def test_a_rule_that_fails_where_its_lead_did_not_fails_on_its_own():
    schedulers = {"srpt": make_scheduler("srpt"), "breaks": Breaks()}
    scores = replay_portfolio(WINDOW.jobs, schedulers, WINDOW.num_executors, 0)
    assert scores.means["srpt"] == alone("srpt").means["srpt"]
    assert scores.means["breaks"] == float("inf")
    assert scores.failed["breaks"] == "RuntimeError: broke at its sixth decision"


def request(following: str, workload: Any = WINDOW, **given: Any) -> ReplayRequest:
    pool = workload.num_executors
    return ReplayRequest(workload.jobs, pool, 0.0, following, 0, 0.0, new=40, **given)


# (a flood: teams' first 30 workflows, submitted at once; the window's JCT so far grows
# from the first event on: srpt 116 s, sjf-cp 154 s, fair 206 s)
FLOOD = replace(build_workload("teams", 1, num_jobs=60), queues=())
FLOOD = replace(FLOOD, jobs=FLOOD.jobs[:30])


@pytest.mark.parametrize(
    ("workload", "other"), [(WINDOW, "fifo"), (FLOOD, "sjf-cp")], ids=["spread", "flood"]
)
def test_a_round_cuts_a_replay_that_cannot_change_its_answer(replays, workload, other):
    spec = f"portfolio?candidates={other}+srpt+fair&tune=false&prior=false&start=srpt&cut_unjudged=false&cut_behind=false"
    brain = make_scheduler(spec)
    assert isinstance(brain, PortfolioScheduler)
    cut = brain.replay(request("srpt", workload))
    assert replays == ["srpt", other, "fair"]  # (the one followed first)

    def whole(r: ReplayRequest, specs: Any) -> Any:  # (every replay to its end)
        schedulers = {s: make_scheduler(s) for s in specs}
        return replay_portfolio(r.window, schedulers, r.num_executors, r.seed)

    full = play_round(request("srpt", workload), brain.config, whole)
    same = ("candidate", "reason", "runner_up", "runner_up_score", "best", "why")
    assert {k: getattr(cut, k) for k in same} == {k: getattr(full, k) for k in same}
    assert cut.cut == ("fair",) and not full.cut and cut.to_dict()["cut"] == ["fair"]
    # fair's score is at least its bound, past the reference (srpt's score, the other's
    # higher); the estimate tells it is well behind
    reference = max(full.scores["srpt"], full.scores[other])
    assert (1 + CUT) * reference <= cut.scores["fair"] * (1 + 1e-9)
    assert {c: cut.scores[c] for c in ("srpt", other)} == {
        c: full.scores[c] for c in ("srpt", other)
    }
    assert cut.modelled_seconds < full.modelled_seconds  # (its replay stopped early)
    # never cut: the guard's safest (its per-workflow JCTs are weighed), and a candidate
    # the standings have not judged yet (they remember its score)
    for kept in ({"safe": "fair"}, {"exact": frozenset({"fair"})}):
        again = brain.replay(request("srpt", workload, **kept))
        assert not again.cut and again.scores["fair"] == full.scores["fair"]


def test_a_candidate_is_judged_once_the_standings_hold_min_window_workflows_of_it():
    from idlegate.policy.portfolio.rounds import Choice
    from idlegate.policy.portfolio.state import Standings

    standings = Standings()
    specs = ["srpt", "fair", "fifo"]
    assert standings.unjudged(specs, 40) == frozenset(specs)
    scores = {"srpt": 10.0, "fair": 13.0}
    standings.remember(Choice("srpt", 10.0, "fair", 13.0, 25, "best", scores=scores, new=25), 1000)
    assert standings.unjudged(specs, 40) == frozenset(specs)  # (25 workflows of evidence)
    standings.remember(Choice("srpt", 10.0, "fair", 13.0, 25, "best", scores=scores, new=25), 1000)
    assert standings.unjudged(specs, 40) == {"fifo"}  # (50: srpt and fair judged)


def test_no_cut_before_the_one_followed_and_another_are_known(replays):
    schedulers = {s: make_scheduler(s) for s in ("srpt", "fair")}
    runs = Runs(WINDOW.jobs, schedulers.__getitem__, 40, 0, first="srpt", shared=["srpt", "fair"])
    scores = runs.scores(["srpt", "fair"])
    assert not scores.cut  # (fair would be the runner-up whatever its score)
    assert scores.means["fair"] == alone("fair").means["fair"]


def test_a_round_replays_to_their_end_the_candidates_not_yet_judged():
    spec = (
        "portfolio?candidates=fifo+srpt+fair&tune=false&prior=false&start=srpt&min_window=5&every=5"
    )
    brain = make_scheduler(spec)
    assert isinstance(brain, PortfolioScheduler)
    requests: list[ReplayRequest] = []
    own = brain.replay

    def seen(request: ReplayRequest, check: Any = None) -> Any:
        requests.append(request)
        return own(request, check)

    brain.replay = seen  # type: ignore[method-assign]
    simulate(WINDOW, brain, seed=1)
    early = [r for r in requests if r.early]
    finished = [r for r in requests if not r.early]
    assert early and all(not r.exact for r in early)  # (they count for no standing)
    assert finished[0].exact == {"fifo", "srpt", "fair"}  # (no standing yet)
    assert not finished[-1].exact  # (each with 5 workflows of evidence and more)
    assert any(c.cut for c in brain.rounds[len(early) + 1 :])


def test_a_pure_rule_several_members_ask_answers_each_question_once(monkeypatch):
    from idlegate.policy.heuristics import SrptScheduler

    asked = {"n": 0}
    own = SrptScheduler.decide

    def counted(self: Any, view: ClusterView) -> Action:
        asked["n"] += 1
        return own(self, view)

    monkeypatch.setattr(SrptScheduler, "decide", counted)
    alone("srpt")
    questions = asked["n"]
    specs = ["analytic?min_gain=0:srpt", "srpt", "analytic?min_gain=0.2:srpt"]
    schedulers = {s: make_scheduler(s) for s in specs}
    bases = {s: getattr(schedulers[s], "base", None) for s in specs}
    asked["n"] = 0
    scores = replay_portfolio(WINDOW.jobs, schedulers, WINDOW.num_executors, 0)
    assert asked["n"] == questions  # (not three times: the idle rules' base and srpt)
    assert len(set(scores.means.values())) == 1
    assert scores.means["srpt"] == alone("srpt").means["srpt"]
    # (each idle rule has its own base again)
    assert all(getattr(schedulers[s], "base", None) is bases[s] for s in specs)


def test_a_replay_under_queues_keeps_no_ledger_and_the_same_runs():
    # the queues' ledger (borrowed, lent, fairness) is the figures', which no round reads:
    # a replay keeps none, and its workflows run as in a run that keeps it
    workload = build_workload("teams", 1, num_executors=12, num_jobs=8)
    kept = simulate(workload, make_scheduler("srpt"), seed=3)
    replayed = runs_module._simulate(workload, make_scheduler("srpt"), 3, None)
    assert [(r.name, r.jct) for r in replayed.records] == [(r.name, r.jct) for r in kept.records]
    assert sum(map(sum, kept.queues.borrowed)) > 0 and kept.queues.contended > 0
    assert sum(map(sum, replayed.queues.borrowed)) == 0 and replayed.queues.contended == 0


def test_the_idle_rule_at_each_threshold_evaluates_each_question_once(monkeypatch):
    from idlegate.policy.analytic import AnalyticIdleScheduler

    evaluated = {"n": 0}
    own = AnalyticIdleScheduler.evaluate

    def counted(self: Any, view: ClusterView, decision: Any) -> Any:
        evaluated["n"] += 1
        return own(self, view, decision)

    monkeypatch.setattr(AnalyticIdleScheduler, "evaluate", counted)
    lone = alone("analytic?min_gain=0:srpt")
    once = evaluated["n"]
    assert once > 0
    specs = ["analytic?min_gain=0:srpt", "srpt", "analytic?min_gain=0.2:srpt"]
    schedulers = {s: make_scheduler(s) for s in specs}
    evaluated["n"] = 0
    scores = replay_portfolio(WINDOW.jobs, schedulers, WINDOW.num_executors, 0)
    assert evaluated["n"] == once  # (not twice: one evaluation, each its own threshold)
    assert set(scores.means.values()) == {lone.means["analytic?min_gain=0:srpt"]}
    # (each idle rule evaluates by itself again)
    assert all("evaluate" not in vars(schedulers[s]) for s in specs)
