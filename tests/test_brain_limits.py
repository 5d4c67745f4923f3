"""A brain that knows what it does not know: a lead carried by one or two workflows is no
lead, workflows like none the prior knows get its safest candidate over all it knows,
and a learned candidate is followed only within the range it was trained on."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pytest

from idlegate.evaluation.comparison import WorkloadOptions, build
from idlegate.policy import make_scheduler
from idlegate.policy.portfolio import Choice, PortfolioConfig, ReplayRequest, Scores, select
from idlegate.policy.portfolio import prior as prior_module
from idlegate.policy.portfolio import scheduler as portfolio_scheduler
from idlegate.policy.portfolio.decision import play_round
from idlegate.policy.portfolio.prior import (
    Prior,
    TrainedRange,
    distance,
    features_error,
    load_prior,
    workload_features,
)
from idlegate.policy.portfolio.rounds import carried
from idlegate.policy.portfolio.state import Window
from idlegate.sim.cluster import Cluster
from idlegate.sim.engine import JobArrival, Workload, simulate
from idlegate.sim.workloads import build_workload
from tests.helpers import alibaba_trace, dag, tpch_traces

# -- a lead carried by a few workflows --------------------------------------------------


def _carried_window() -> dict[str, np.ndarray]:
    """40 workflows: fair finishes two huge ones sooner and loses a little on every other
    one (a production trace's window: one job of tens of thousands of tasks is its mean)."""
    srpt = np.array([1000.0, 900.0] + [10.0] * 38)
    fair = np.array([100.0, 100.0] + [10.3] * 38)
    return {"srpt": srpt, "fair": fair}


def test_a_lead_carried_by_two_workflows_is_not_a_lead():
    jcts = _carried_window()
    scores = {c: float(np.mean(v)) for c, v in jcts.items()}
    assert scores["fair"] < 0.3 * scores["srpt"]  # fair "leads" by more than 70 %
    race = {"jcts": jcts, "confidence": 1.0}
    # the noise rule alone lets it through (the two gains are beyond one standard error)
    assert select(scores, "srpt", 0.02, **race)[0] == "fair"
    assert select(scores, "srpt", 0.02, **race, carriers=2) == ("srpt", "fair", "carried")
    assert carried(jcts, "srpt", "fair", 2) and not carried(jcts, "srpt", "fair", 0)


def test_a_lead_spread_over_the_window_survives_dropping_its_largest_gains():
    rng = np.random.default_rng(0)
    srpt = rng.uniform(10, 20, 40)
    fair = srpt * 0.9 + rng.normal(0, 0.2, 40)
    jcts = {"srpt": srpt, "fair": fair}
    scores = {c: float(np.mean(v)) for c, v in jcts.items()}
    assert not carried(jcts, "srpt", "fair", 2)
    assert select(scores, "srpt", 0.02, jcts=jcts, confidence=1.0, carriers=2)[0] == "fair"
    assert not carried({"a": np.ones(4), "b": np.zeros(4)}, "a", "b", 2)  # (too few to judge)


def test_a_round_kept_on_a_carried_lead_says_so():
    jcts = _carried_window()
    scores = {c: float(np.mean(v)) for c, v in jcts.items()}
    request = ReplayRequest((), 10, 0.0, "srpt", 0, 0.0)
    choice = play_round(
        request,
        PortfolioConfig(candidates=("srpt", "fair"), tune=False),
        lambda _, specs: Scores({s: scores[s] for s in specs}, 40, 0, {}, {}, jcts),
    )
    assert (choice.candidate, choice.reason, choice.carriers) == ("srpt", "carried", 2)
    assert choice.why == "kept srpt: fair was 74.1 % better, but carried by 2 of the 40 workflows"
    free = play_round(
        request,
        PortfolioConfig(candidates=("srpt", "fair"), tune=False, carriers=None),
        lambda _, specs: Scores({s: scores[s] for s in specs}, 40, 0, {}, {}, jcts),
    )
    assert free.candidate == "fair"


# -- the prior's range -------------------------------------------------------------------

FAR = (9.0, 9.0, 9.0, 9.0)
"""Features no workflow of the tests is near."""


def _prior(learned: TrainedRange | None = None) -> Prior:
    losses = {
        "a": {"srpt": (0.0, 0.0), "fair": (0.5, 0.9), "learned:default": (0.1, 0.3)},
        "b": {"srpt": (0.2, 0.25), "fair": (0.0, 0.0), "learned:default": (0.05, 0.4)},
    }
    return Prior({"a": FAR, "b": tuple(x + 0.5 for x in FAR)}, losses, 1.0, learned)


def _run(monkeypatch: pytest.MonkeyPatch, prior: Prior, spec: str) -> Sequence[Choice]:
    monkeypatch.setattr(portfolio_scheduler, "load_prior", lambda: prior)
    brain = make_scheduler(spec)
    simulate(build_workload("synthetic", 3, num_jobs=30), brain, seed=3)
    return brain.rounds


def test_the_safest_overall_is_the_smallest_worst_loss_over_every_workload():
    assert _prior().safest_overall(["srpt", "fair", "learned:default"]) == "srpt"
    assert _prior().safest_overall(["fair", "learned:default"]) == "learned:default"
    assert _prior().safest((1.0, 0.0, 0.0, 3.0), ["srpt", "fair"]) is None  # like neither


def test_workflows_unlike_any_the_prior_knows_get_its_safest_over_all_it_knows(monkeypatch):
    spec = "portfolio?candidates=srpt+fair+learned&early=none"
    first = _run(monkeypatch, _prior(), spec)[0]
    assert (first.candidate, first.reason) == ("srpt", "unlike")
    assert first.why == (
        "following srpt: the workflows so far are unlike any the prior knows, and it is the "
        "safest over every workload the prior knows"
    )
    assert first.text == (
        "following srpt (the shipped prior's safest candidate over every workload it knows: "
        "the workflows arrived so far are like none of them)"
    )
    # before the rule: the start (the shipped learned policy), on workflows it knows nothing of
    before = make_scheduler(spec + "&unlike=start")  # (the prior `_run` patched in)
    simulate(build_workload("synthetic", 3, num_jobs=30), before, seed=3)
    assert before.rounds == [] and before.following == "learned:default"


# -- a learned candidate's range ---------------------------------------------------------


def _outside() -> TrainedRange:
    # (the synthetic workload's 4 executors are log 4 = 1.39: below a range from 10 up)
    return TrainedRange("{}", (2.3, -1.0, -1.0, -5.0), (4.0, 10.0, 10.0, 10.0))


def test_a_learned_candidate_is_not_followed_outside_its_training_range(monkeypatch):
    spec = "portfolio?candidates=srpt+fair+learned&min_window=10&window=10&every=5"
    rounds = _run(monkeypatch, _prior(_outside()), spec)
    replayed = [c for c in rounds if c.scores]
    assert replayed and all("learned:default" not in c.scores for c in replayed)
    assert all(c.untrained == ("learned:default",) for c in replayed)
    assert all(c.candidate != "learned:default" for c in rounds)
    # without the rule it is replayed (and may be followed) on these workflows
    free = _run(monkeypatch, _prior(_outside()), spec + "&trained_range=false")
    assert any("learned:default" in c.scores for c in free)


def test_a_followed_learned_candidate_gives_way_when_the_window_leaves_its_range():
    scores = {"srpt": 10.0, "fair": 12.0, "learned:default": 5.0}
    request = ReplayRequest(
        (), 10, 0.0, "learned:default", 0, 0.0, untrained=frozenset({"learned:default"})
    )
    seen: list[str] = []

    def replay(_: ReplayRequest, specs: Sequence[str]) -> Scores:
        seen.extend(specs)
        return Scores({s: scores[s] for s in specs}, 8, 0, {})

    config = PortfolioConfig(candidates=("srpt", "fair", "learned"), tune=False)
    choice = play_round(request, config, replay)
    assert "learned:default" not in seen
    assert (choice.candidate, choice.reason) == ("srpt", "untrained")
    assert choice.why == (
        "switched to srpt: learned:default is outside the range it was trained on, and srpt "
        "is the round's best of the others"
    )


def test_a_range_holds_within_its_box_and_the_features_error():
    box = TrainedRange("{}", (0.0, 0.0), (1.0, 1.0))
    assert box.holds((0.5, 1.0)) and not box.holds((0.5, 1.2))
    assert box.holds((0.5, 1.2), error=0.25)


# -- the report --------------------------------------------------------------------------


def test_simulates_report_names_what_a_round_did_not_replay_and_why():
    from idlegate.evaluation.console import render_followed

    unlike = {"at": 0.0, "candidate": "srpt", "reason": "unlike", "workflows": 0}
    unlike |= {"score": None, "runner_up": None, "runner_up_score": None, "left_out": []}
    kept = {**unlike, "at": 300.0, "reason": "carried", "best": "fair", "carriers": 2}
    kept |= {"workflows": 40, "score": 30.0, "runner_up": "fair", "runner_up_score": 10.0}
    kept |= {"scores": {"srpt": 30.0, "fair": 10.0}, "previous": "srpt"}
    kept |= {"untrained": ["learned:default"], "left_out": ["fifo"]}
    account = {"start": "learned:default", "rounds": [unlike, kept], "switches": 1}
    table = render_followed(account | {"time_followed": {"srpt": 400.0}})
    assert table.title == "Followed: 1 round, 1 lookup of the prior, 0 switches"
    said = list(table.columns[1].cells)
    assert said[0].startswith("following srpt: the workflows so far are unlike any the prior")
    assert said[1] == (
        "kept srpt: fair was 66.7 % better, but carried by 2 of the 40 workflows; not "
        "replayed: learned:default, outside the range it was trained on; left out: fifo, "
        "whose standing trails the leader's"
    )


def test_the_shipped_priors_learned_range_is_the_shipped_policys():
    # (a new default.onnx trained on other workloads needs its range measured again:
    # python benchmarks/brain_prior.py ...; docs/brain.md)
    import onnxruntime

    from idlegate.policy import DEFAULT_POLICY_PATH

    prior = load_prior()
    assert prior is not None and prior.learned is not None
    meta = onnxruntime.InferenceSession(str(DEFAULT_POLICY_PATH)).get_modelmeta()
    assert prior.learned.trained_on == meta.custom_metadata_map["idlegate.trained_on"]


def _first(workload: Workload, arrived: int) -> tuple[tuple[float, ...], float]:
    """The features of `workload`'s first `arrived` workflows and their standard error,
    as a lookup of the prior compares them (benchmarks/brain_prior.py's reach check)."""
    dags = [j.dag for j in sorted(workload.jobs, key=lambda j: j.time)[:arrived]]
    return workload_features(dags, workload.num_executors), features_error(dags)


def _followable() -> list[str]:
    brain = make_scheduler("portfolio")
    assert isinstance(brain, portfolio_scheduler.PortfolioScheduler)
    return brain._followable()


def test_the_shipped_prior_names_srpt_with_a_reserve_for_alibabas_streams():
    # the first 32 workflows of each tuning stream of the suite's alibaba-0.85 (100
    # workflows; python benchmarks/brain_prior.py builds the prior on them): srpt?cap=0.9,
    # which keeps a tenth of the pool for arrivals while a huge job runs
    options = WorkloadOptions(
        num_executors=100, load=0.85, alibaba_dir=alibaba_trace(), extra={"num_jobs": 100}
    )
    prior, allowed = load_prior(), _followable()
    assert prior is not None
    for seed in range(2000, 2010):
        features, error = _first(build("alibaba", seed, options), 32)
        assert prior.safest(features, allowed, error) == "srpt?cap=0.9", seed


def test_mixeds_first_workflows_do_not_reach_alibabas_entry_on_another_pool(monkeypatch):
    # mixed-0.5 (50 executors), tuning seed 2001, its first 4 workflows: a mean of one-task
    # jobs and TPC-H DAGs far from the mix's, by chance. With the pool weighed like a
    # workflow feature they are nearest to Alibaba's streams (100 executors) and the
    # stream would start on Alibaba's candidate; weighed twice (`POOL_WEIGHT`), they
    # find the mix
    options = WorkloadOptions(
        num_executors=50,
        interarrival=25.0,
        alpha=0.5,
        tpch_dir=tpch_traces(),
        extra={"init": 1, "num_stream": 99, "dags": "tpch"},
    )
    features, error = _first(build("mixed", 2001, options), 4)
    prior, allowed = load_prior(), _followable()
    assert prior is not None
    assert prior.neighbours(features) == []  # (found within the standard error)
    assert prior.neighbours(features, error) == ["mixed-0.5"]
    assert prior.safest(features, allowed, error) == "fair"
    monkeypatch.setattr(prior_module, "POOL_WEIGHT", 1.0)
    assert prior.neighbours(features) == ["alibaba-0.85"]  # (within the reach outright)
    assert prior.safest(features, allowed, error) == "srpt?cap=0.9"


def test_a_distance_weighs_the_pool_and_widens_only_the_workflows_features():
    a, b = (0.0, 0.0, 0.0, 0.0), (2.0, 3.0, 0.0, 4.0)  # pool 2 (weighed: 4), workflows 5
    assert distance(a, b) == pytest.approx(math.sqrt(41.0))
    assert distance(b, a, 2.0) == pytest.approx(5.0)  # (the workflows' 5 less 2)
    assert distance(a, b, 9.0) == pytest.approx(4.0)  # (never below 0: the pool alone)


# -- a change of size beyond the noise of heavy-tailed work -------------------------------


def _sized(prefix: str, log_work: Sequence[float]) -> list[JobArrival]:
    """One-task workflows of the given log work (task-seconds)."""
    return [
        JobArrival(float(i), f"{prefix}{i}", dag(("a", 1, float(np.exp(w)), [])))
        for i, w in enumerate(log_work)
    ]


def _window_after(before: list[JobArrival], recent: list[JobArrival]) -> Window:
    window = Window()
    window.add(before, 200)
    window.since_round = 0  # (a round on `before`: `recent` are the new ones)
    window.add(recent, 200)
    return window


def test_heavy_tailed_work_wandering_is_no_change_of_size():
    # a production trace's spread of log work (about 3): two draws of ten from one
    # workload whose geometric means happen to be 4.5 times apart
    spread = np.array([-1.5, -1.0, -0.5, -0.2, 0.0, 0.0, 0.2, 0.5, 1.0, 1.5]) * 3
    before = _sized("a", spread)
    recent = _sized("b", spread + 1.5)
    assert _window_after(before, recent).changed_size(3.0)  # (the factor alone: a change)
    assert not _window_after(before, recent).changed_size(3.0, noise=3.0)
    brain = make_scheduler("portfolio?replayer=worker&records=fed&min_window=2")
    assert isinstance(brain, portfolio_scheduler.PortfolioScheduler)
    brain.record(before)
    brain.request(Cluster(1))
    brain.record(recent)
    assert not brain._window.changed  # (the default: `change_noise` 3)


def test_a_change_of_size_beyond_the_noise_is_still_seen():
    spread = np.array([-0.2, -0.1, 0.0, 0.0, 0.1, 0.2, -0.1, 0.1, 0.0, 0.0])
    before = _sized("a", spread)
    recent = _sized("b", spread + np.log(100.0))  # 100 times the work, a narrow spread
    assert _window_after(before, recent).changed_size(3.0, noise=3.0)


# -- the heavy workflows still running --------------------------------------------------


def _heavy_request(heavy: bool, unfinished: bool = False) -> ReplayRequest:
    """A round on 40 finished one-task workflows of 2 s, while a workflow of 2,000 tasks
    and one of a single task are still running (`unfinished`: every one of them replayed
    too, issue 71's rounds)."""
    brain = make_scheduler(
        "portfolio?candidates=srpt+fair&tune=false&replayer=worker&records=fed"
        f"&heavy={heavy}&unfinished={unfinished}"
    )
    assert isinstance(brain, portfolio_scheduler.PortfolioScheduler)
    view = Cluster(4)
    view.add_job(dag(("a", 2000, 2.0, [])), 0.0, "ns/huge", payload=object())
    view.add_job(dag(("a", 1, 2.0, [])), 1.0, "ns/small", payload=object())
    brain.decide(view)
    brain.record(_sized("done", [np.log(2.0)] * 40))
    return brain.request(view)


def test_simulates_report_names_the_heavy_workflows_a_round_replayed_still_running():
    from idlegate.evaluation.console import render_followed

    won = {"at": 300.0, "candidate": "fair?scale=0.5", "reason": "best", "workflows": 41}
    won |= {"score": 10.0, "runner_up": "srpt", "runner_up_score": 30.0, "left_out": []}
    won |= {"scores": {"fair?scale=0.5": 10.0, "srpt": 30.0}, "previous": "fair?scale=0.5"}
    won |= {"running": 1, "heavy": 1}
    account = {"start": "srpt", "rounds": [won], "switches": 0, "time_followed": {}}
    said = list(render_followed(account).columns[1].cells)
    assert said[1] == (
        "kept fair?scale=0.5: 66.7 % better than srpt; replayed 1 workflow still running, "
        "heavier than every finished one of the window"
    )


def test_a_round_replays_the_running_workflows_heavier_than_its_finished_ones():
    # a rule capping a huge job's share finishes it last: without it in the window, the
    # replays cannot see what it costs the uncapped rules
    request = _heavy_request(True)
    names = [a.name for a in request.window]
    assert "ns/huge" in names and "ns/small" not in names
    assert request.running == request.heavy == 1
    assert "ns/huge" not in [a.name for a in _heavy_request(False).window]


# -- a switch follows the round's best ----------------------------------------------------


def _passed_and_best() -> dict[str, np.ndarray]:
    """40 workflows: srpt leads fair by 5 % on every one (beyond the noise); sjf leads it
    by 10 % on the mean, gaining 1,300 s on half of them and losing 1,000 s on the other
    half (within the noise)."""
    fair = np.array([2000.0, 1000.0] * 20)
    return {"fair": fair, "srpt": 0.95 * fair, "sjf": np.array([700.0, 2000.0] * 20)}


def test_a_switch_follows_the_rounds_best_once_another_challenger_passed():
    jcts = _passed_and_best()
    scores = {c: float(np.mean(v)) for c, v in jcts.items()}
    race = {"jcts": jcts, "confidence": 1.0, "carriers": 2}
    assert scores["sjf"] < scores["srpt"] < scores["fair"]
    assert select(scores, "fair", 0.02, **race) == ("srpt", "sjf", "best")
    assert select(scores, "fair", 0.02, **race, switch="best") == ("sjf", "srpt", "best")
    # alone, sjf's lead within the noise moves nothing, either way
    alone = {c: scores[c] for c in ("fair", "sjf")}
    for switch in ("passed", "best"):
        assert select(alone, "fair", 0.02, **race, switch=switch) == ("fair", "sjf", "noise")


def test_a_round_with_switch_best_says_it_switched_to_the_best():
    jcts = _passed_and_best()
    scores = {c: float(np.mean(v)) for c, v in jcts.items()}
    request = ReplayRequest((), 10, 0.0, "fair", 0, 0.0)
    brain = make_scheduler("portfolio?switch=best&candidates=fair+srpt+sjf&tune=false")
    choice = play_round(
        request,
        brain.config,
        lambda _, specs: Scores({s: scores[s] for s in specs}, 40, 0, {}, {}, jcts),
    )
    assert (choice.candidate, choice.reason, choice.previous) == ("sjf", "best", "fair")
    assert choice.why == "switched to sjf: 10 % better than fair, beyond the 2 % margin"
