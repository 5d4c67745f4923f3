"""A portfolio round's outcome in words: one known answer per sentence, then the sentences
of real rounds and of `simulate`'s report."""

from __future__ import annotations

import itertools
import json
import math
from typing import Any

import pytest
from typer.testing import CliRunner

from idlegate.cli import app
from idlegate.policy import make_scheduler
from idlegate.policy.account import SENTENCES, case, sentence
from idlegate.policy.portfolio import Choice, PortfolioScheduler
from idlegate.sim.cluster import Cluster
from idlegate.sim.engine import JobArrival
from tests.helpers import dag

SCORES = {"fair": 100.0, "srpt": 98.7, "fifo": 120.0}


def _round(**fields: Any) -> dict[str, Any]:
    return {"candidate": "fair", "previous": "fair", "scores": SCORES, **fields}


# (case, the round's fields, its sentence): one per entry of SENTENCES
KNOWN: list[tuple[str, dict[str, Any], str]] = [
    (
        "cold start",
        {"reason": "cold start", "candidate": "learned:default"},
        "started with learned:default: no workflow finished yet",
    ),
    (
        "prior",  # (the shipped prior's choice for the workflows arrived, before a round)
        {"reason": "prior", "candidate": "analytic?min_gain=0:sjf-cp"},
        "started with analytic?min_gain=0:sjf-cp: the shipped prior's safest candidate for the workflows arrived so far",
    ),
    (
        "change",  # (the prior's choice for the workflows arrived since a change of workload)
        {"reason": "change", "candidate": "srpt"},
        "following srpt: the workflows arriving changed, and it is the shipped prior's safest candidate for the new ones",
    ),
    (
        "prior history",
        _round(
            reason="prior history", candidate="srpt", workflows=48, prior=40, source="history sink"
        ),
        "started with srpt: the best on the last 48 workflows (40 from the history sink)",
    ),
    (
        "switched",
        _round(
            reason="best",
            previous="fair",
            candidate="srpt",
            scores={"fair": 100.0, "srpt": 95.9},
            margin=0.02,
        ),
        "switched to srpt: 4.1 % better than fair, beyond the 2 % margin",
    ),
    (
        "switched, unprotected",
        _round(reason="best", previous="fair", candidate="srpt", margin=None),
        "switched to srpt: 1.3 % better than fair, which no margin protected",
    ),
    (
        "switched, failed",
        _round(reason="best", candidate="srpt", scores={"fair": math.inf, "srpt": 1.0}),
        "switched to srpt: fair failed in the replay",
    ),
    (
        "switched, not replayed",
        _round(reason="best", previous="learned:default", candidate="srpt"),
        "switched to srpt: learned:default was not replayed",
    ),
    (
        "kept",
        _round(reason="kept", best="srpt", margin=0.02),
        "kept fair: srpt was 1.3 % better, within the 2 % margin",
    ),
    (
        "noise",  # (a rule that keeps a lead within the window's noise says so)
        _round(reason="noise", best="srpt", noise=0.024),
        "kept fair: srpt was 1.3 % better, within the window's noise of 2.4 %",
    ),
    (
        "unlike",  # (workflows like none the prior knows: its safest over all it knows)
        {"reason": "unlike", "candidate": "srpt"},
        "following srpt: the workflows so far are unlike any the prior knows, and it is the safest over every workload the prior knows",
    ),
    (
        "carried",  # (a lead that two workflows carry, `carriers`)
        _round(reason="carried", best="srpt", carriers=2, workflows=40),
        "kept fair: srpt was 1.3 % better, but carried by 2 of the 40 workflows",
    ),
    (
        "untrained",  # (a learned candidate outside its training range, `trained_range`)
        _round(reason="untrained", previous="learned:default", candidate="srpt"),
        "switched to srpt: learned:default is outside the range it was trained on, and srpt is the round's best of the others",
    ),
    (
        "unconfirmed",  # (a switch the rounds before it do not bear out, `confirm`)
        _round(reason="unconfirmed", best="srpt"),
        "kept fair: srpt was 1.3 % better in this round, but not over the rounds before it",
    ),
    (
        "present",  # (a switch that would cost more from the pool as it is, `present`)
        _round(
            reason="present",
            runner_up="srpt",
            workflows=40,
            present={"fair": 2000.0, "srpt": 2500.0},
            present_jobs=7,
        ),
        "kept fair: srpt was 1.3 % better over the last 40 workflows, but would cost 25 % more from the 7 workflows in the pool now",
    ),
    (
        "present, failed",  # (the challenger's rollout raised: infinite cost, None in JSON)
        _round(
            reason="present",
            runner_up="srpt",
            workflows=40,
            present={"fair": 2000.0, "srpt": None},
            present_jobs=7,
        ),
        "kept fair: srpt was 1.3 % better over the last 40 workflows, but failed when rolled out from the 7 workflows in the pool now",
    ),
    (
        "guarded",  # (a lead over the prior's safest within the guard's standard errors)
        _round(
            reason="guarded",
            candidate="srpt?cap=0.9",
            previous="srpt?cap=0.9",
            runner_up="fair",
            scores={"srpt?cap=0.9": 100.0, "fair": 90.0},
            safe="srpt?cap=0.9",
            guard=2.0,
            guard_z=1.43,
            stream=-0.01,
        ),
        "kept srpt?cap=0.9: fair was 10 % better, but its lead over srpt?cap=0.9, the prior's safest, was 1.4 standard errors, not the guard's 2.0",
    ),
    (
        "guarded, stream",  # (a lead the rounds before do not bear out against the safest)
        _round(
            reason="guarded",
            candidate="srpt?cap=0.9",
            previous="srpt?cap=0.9",
            runner_up="fair",
            scores={"srpt?cap=0.9": 100.0, "fair": 90.0},
            safe="srpt?cap=0.9",
            guard=2.0,
            guard_z=3.1,
            stream=0.054,
        ),
        "kept srpt?cap=0.9: fair was 10 % better, but over the stream so far it is 5.4 % behind srpt?cap=0.9, the prior's safest",
    ),
    (
        "guard",  # (a followed candidate behind the safest over what it affected)
        _round(
            reason="guard",
            candidate="srpt?cap=0.9",
            previous="fair?scale=0.5",
            safe="srpt?cap=0.9",
            behind=0.062,
            affected=75,
        ),
        "came back to srpt?cap=0.9, the prior's safest: fair?scale=0.5 was 6.2 % behind it over the 75 workflows arrived since it was followed",
    ),
    (
        "tied",
        _round(reason="best", runner_up="srpt", scores={"fair": 98.7, "srpt": 98.7}),
        "kept fair: tied with srpt",
    ),
    (
        "won",
        _round(reason="best", candidate="srpt", previous="srpt", runner_up="fair"),
        "kept srpt: 1.3 % better than fair",
    ),
    (
        "alone",
        _round(reason="best", runner_up=None, scores={"fair": 100.0}),
        "kept fair: the only candidate replayed",
    ),
    (
        "best",  # (a round whose previous candidate is unknown)
        _round(reason="best", previous=None),
        "following fair, the round's best",
    ),
]


def test_the_unfinished_workflows_cost_is_said_after_the_outcome():
    fields = _round(
        reason="kept",
        best="srpt",
        margin=0.02,
        unfinished={"fair": 4210.4, "srpt": 2950.0},
        unfinished_count=12,
    )
    assert sentence(fields) == (
        "kept fair: srpt was 1.3 % better, within the 2 % margin; the 12 workflows "
        "unfinished: 4,210 s under fair, 2,950 s under srpt"
    )
    assert sentence({**fields, "unfinished_count": 0}) == sentence(
        _round(reason="kept", best="srpt", margin=0.02)
    )


def test_every_sentence_has_a_known_answer():
    assert sorted(k for k, *_ in KNOWN) == sorted(SENTENCES)


@pytest.mark.parametrize(("key", "fields", "said"), KNOWN, ids=[k for k, *_ in KNOWN])
def test_each_outcome_in_words(key: str, fields: dict[str, Any], said: str) -> None:
    assert case(fields) == key
    assert sentence(fields) == said


def test_figures_are_said_as_given_or_as_a_question_mark():
    assert sentence(_round(reason="kept", best="srpt", margin=0.0004)).endswith(
        "within the 0.04 % margin"
    )
    unknown = {"reason": "some new reason", "candidate": "srpt"}
    assert sentence(unknown) == "following srpt (some new reason)"
    assert sentence(_round(reason="kept", best="srpt")).endswith("within the ? margin")


# -- real rounds --------------------------------------------------------------------------

LONG_AND_SHORT = [  # one executor: fifo's JCTs 10 and 11 (10.5), srpt's 1 and 11 (6)
    JobArrival(0.0, "long", dag(("a", 1, 10.0, []))),
    JobArrival(0.0, "short", dag(("a", 1, 1.0, []))),
]


def _brain(candidates: str, **options: object) -> PortfolioScheduler:
    extra = "".join(f"&{k}={v}" for k, v in options.items())
    brain = make_scheduler(
        f"portfolio?candidates={candidates}&replayer=worker&records=fed&start=fifo"
        f"&min_window=2&confidence=0{extra}"  # (rounds asked for by hand, on 1-2 workflows)
    )
    assert isinstance(brain, PortfolioScheduler)
    return brain


def _replayed(brain: PortfolioScheduler, window: list[JobArrival]) -> Choice:
    brain.record(window)
    choice = brain.replay(brain.request(Cluster(1)))
    brain.adopt(choice)
    return choice


def test_real_rounds_say_their_switch_their_margin_and_their_tie():
    brain = _brain("fifo+srpt", margin=0.9)
    first = _replayed(brain, LONG_AND_SHORT)  # from the cold start: no margin yet
    assert (first.previous, first.margin) == ("fifo", None)
    assert first.why == "switched to srpt: 42.9 % better than fifo, which no margin protected"
    assert first.to_dict()["reason"] == "best" and first.to_dict()["why"] == first.why

    kept = _brain("fifo+srpt", margin=0.9)
    kept.adopt(Choice("fifo", 10.5, "srpt", 6.0, 2, "best", "fifo", {"fifo": 1.0}))
    choice = _replayed(kept, LONG_AND_SHORT)  # fifo won a round: the margin holds
    assert (choice.reason, choice.margin) == ("kept", 0.9)
    assert choice.why == "kept fifo: srpt was 42.9 % better, within the 90 % margin"

    tied = _brain("srpt+fifo")
    one = _replayed(tied, [JobArrival(0.0, "one", dag(("a", 1, 1.0, [])))])
    assert one.why == "kept fifo: tied with srpt"


def test_simulate_reports_each_rounds_reason_code_and_sentence():
    # (rounds on 5 workflows: no noise rule, no prior, no early rounds)
    spec = "portfolio?candidates=fifo+srpt&start=fifo&min_window=5&every=5&confidence=0&prior=false&early=none&unfinished=false"
    r = CliRunner().invoke(
        app, ["simulate", "-w", "synthetic", "--jobs-count", "30", "-s", spec, "--json"]
    )
    assert r.exit_code == 0, r.output
    rounds = json.loads(r.stdout)["followed"]["rounds"]
    assert rounds
    assert rounds[0]["previous"] == "fifo"
    for earlier, later in itertools.pairwise(rounds):
        assert later["previous"] == earlier["candidate"]
    for data in rounds:
        assert data["reason"] in ("best", "kept")
        assert data["why"] == sentence(data) and "?" not in data["why"]
        verb = "switched to" if data["candidate"] != data["previous"] else "kept"
        assert data["why"].startswith(f"{verb} {data['candidate']}: ")
