"""Preemption decided on forecasts (issue 82, item 3): a ``decide: Forecast`` queue's
stops go ahead only where a replay with and without them says they pay, or the owner's
wait bound would otherwise be broken; past the budget, the rules' answer. Hand-built
cases whose replays are exact (durations as declared), on the engine's clock."""

from __future__ import annotations

import functools
from types import SimpleNamespace

import pytest

from idlegate.api.crd import render_crd
from idlegate.api.notices import preempted
from idlegate.api.pool_spec import parse_pool_spec, pool_spec_problems
from idlegate.errors import IdlegateError
from idlegate.policy import make_scheduler
from idlegate.sim.engine import Engine, JobArrival, Workload
from idlegate.sim.queues import Preemption, QueueSpec, queues_from
from idlegate.sim.reclaim_forecast import ForecastJudge, _decided, _Run, forecast_judge
from idlegate.sim.reclaim_ledger import Calm
from idlegate.sim.reclaim_plan import RECHECK
from idlegate.sim.reclaim_verdict import BOUND, CUT, DECLINED, PAYS, ReclaimVerdict, counts
from tests.helpers import chain
from tests.reclaim_helpers import events

FORECAST = Preemption(reclaim="Any", decide="Forecast")
RAW = "admission?patience=0&ending=0:fifo"
"""The rules without patience or the ending rule (`idlegate.sim.reclaim_patience`: at
190 s, X's tasks end within 10 s, so the rules would wait for them and ask no judge)."""


def lent(
    owner_at: float,
    *,
    decide: str = "Forecast",
    bound: float | None = None,
    policy: str = RAW,
    judge: object = forecast_judge,
) -> Engine:
    """Queue a runs X (two tasks, at 0 s), Y (at 10 s) and Z (at 20 s), all of 200 s, on
    the 4 pods, Y and Z on b's idle quota; b's owner B (one task of 5 s) arrives at
    `owner_at`. Without a stop B starts at 200 s, as X's tasks end."""
    b = QueueSpec(
        "b",
        {"pods": 2000},
        preemption=Preemption(reclaim="Any", decide=decide),
        **({} if bound is None else {"wait_bound": bound}),
    )
    jobs = (
        JobArrival(0.0, "X", chain(200.0, tasks=2), queue="a"),
        JobArrival(10.0, "Y", chain(200.0), queue="a"),
        JobArrival(20.0, "Z", chain(200.0), queue="a"),
        JobArrival(owner_at, "B", chain(5.0), queue="b"),
    )
    w = Workload("test", jobs, 4, queues=(QueueSpec("a", {"pods": 2000}), b))
    maker = judge if judge is not None else None
    return Engine.for_workload(
        w,
        make_scheduler(policy),
        0,
        trace=True,
        judge=maker,  # type: ignore[arg-type]
    )


def verdicts(engine: Engine) -> list[ReclaimVerdict]:
    admission = engine.cluster.admission
    assert admission is not None and admission.reclaimer is not None
    return admission.reclaimer.verdicts


def b_start(engine: Engine) -> float:
    (start,) = [t for t, _k, j, _s, _i in events(engine, "launch") if j == 3]
    return start


def test_a_stop_that_saves_the_owner_more_than_it_loses_goes_ahead():
    engine = lent(100.0)
    engine.run()
    # Z (80 s run) stopped at 100 s: B ends at 105 s, not 205 s (still waiting at the
    # replay's horizon, 200 s, it is counted as ending its 5 s of work after it): 100 s
    # saved > 80 lost
    assert events(engine, "preempted") == [(100.0, "preempted", 2, 0, (3, 80.0))]
    assert b_start(engine) == 100.0
    (verdict,) = verdicts(engine)
    assert verdict == ReclaimVerdict(PAYS, 100.0, 80.0, 0.0, 2, verdict.events)
    assert verdict.sentence() == (
        "decided on forecasts: the owners' forecast wait falls by 100 s, more than the 20 s "
        "the 80 executor-seconds lost are worth (0.25 s each)"
    )


def test_a_stop_that_loses_more_than_it_saves_is_declined_and_the_owner_waits():
    engine = lent(190.0)
    engine.run()
    # Z has run 170 s; B would wait only until 200 s: 10 s saved, not more than 170 lost
    # are worth (42.5 s)
    assert not events(engine, "preempted")
    assert b_start(engine) == 200.0
    assert [(v.case, v.gain, v.lost) for v in verdicts(engine)] == [(DECLINED, 10.0, 170.0)]
    assert verdicts(engine)[0].sentence() == (
        "declined on forecasts: the owners' forecast wait falls by 10 s, not more than the "
        "42 s the 170 executor-seconds lost are worth (0.25 s each)"
    )
    # the rules alone stop Z
    rules = lent(190.0, decide="Rules")
    rules.run()
    assert events(rules, "preempted") == [(190.0, "preempted", 2, 0, (3, 170.0))]
    assert verdicts(rules) == []


def test_a_declined_queue_is_not_judged_again_before_its_recheck():
    engine = lent(190.0)
    engine.run(190.0 + RECHECK - 1)
    assert len(verdicts(engine)) == 1
    reclaimer = engine.cluster.admission.reclaimer  # type: ignore[union-attr]
    assert reclaimer.declined == {1: 190.0 + RECHECK}


def test_a_wait_bound_the_owner_would_break_stops_whatever_is_lost():
    # bound 5 s, no grace (the default): without the stop B starts 5 s past 190 + 5
    engine = lent(190.0, bound=5.0)
    engine.run()
    assert events(engine, "preempted") == [(190.0, "preempted", 2, 0, (3, 170.0))]
    (verdict,) = verdicts(engine)
    assert (verdict.case, verdict.gain, verdict.lost, verdict.overshoot) == (
        BOUND,
        10.0,
        170.0,
        5.0,
    )
    assert "5 s past its wait bound" in verdict.sentence()
    # with a grace of 60 s the same start is within bound + grace: declined
    graced = lent(190.0, bound=5.0, policy="admission?grace=60&patience=0&ending=0:fifo")
    graced.run()
    assert {(v.case, v.overshoot) for v in verdicts(graced)} == {(DECLINED, 0.0)}
    assert not events(graced, "preempted") and b_start(graced) == 200.0


def test_past_the_budget_the_rules_answer_and_the_verdict_says_so():
    def tiny(scheduler, seed, waves, calm):  # (one event: no replay ends within it)
        return ForecastJudge(scheduler, seed=seed, waves=waves, grace=calm.grace, events=1)

    engine = lent(195.0, judge=tiny)  # (the first step, X's end at 200 s, is 5 s ahead)
    engine.run()
    assert events(engine, "preempted") == [(195.0, "preempted", 2, 0, (3, 175.0))]
    (verdict,) = verdicts(engine)
    assert verdict.case == CUT and verdict.pairs == 0
    assert verdict.sentence().startswith("decided by the rules: the forecast's budget ran out")


def test_a_cpu_budget_needs_its_clock():
    with pytest.raises(ValueError, match="clock"):
        ForecastJudge(make_scheduler("fifo"), seconds=0.2)


def test_without_a_judge_the_rules_decide_and_a_fork_judges_nothing():
    engine = lent(150.0, judge=None)
    engine.run()
    assert events(engine, "preempted")  # (Z stopped, as by the rules)
    judged = lent(150.0)
    reclaimer = judged.cluster.admission.reclaimer  # type: ignore[union-attr]
    assert reclaimer.judge is not None and reclaimer.copy().judge is None


def test_the_verdicts_are_counted_by_case():
    got = [
        ReclaimVerdict(PAYS, 1, 0, 0, 1),
        ReclaimVerdict(DECLINED, 0, 1, 0, 1),
        ReclaimVerdict(PAYS, 2, 1, 0, 1),
    ]
    assert counts(got) == {BOUND: 0, PAYS: 2, DECLINED: 1, CUT: 0}


def test_the_preempted_event_says_which_case_held_with_both_figures():
    verdict = ReclaimVerdict(PAYS, 95.0, 80.0, 0.0, 2)
    _kind, _reason, message = preempted("s", "b", "Reclaim", 80.0, verdict.sentence())
    assert message.endswith(
        "Decided on forecasts: the owners' forecast wait falls by 95 s, more than the 20 s "
        "the 80 executor-seconds lost are worth (0.25 s each)."
    )
    assert "forecast" not in preempted("s", "b", "Reclaim", 80.0)[2]


def test_the_setting_is_read_checked_and_written_back():
    (q,) = queues_from([{"name": "b", "preemption": {"reclaim": "Any", "decide": "Forecast"}}])
    assert q.preemption == FORECAST and q.preemption.to_dict()["decide"] == "Forecast"
    assert Preemption(decide="Forecast").never  # (decide alone stops nothing)
    assert Preemption().to_dict() == {}
    with pytest.raises(IdlegateError, match="'Maybe' is not a decide setting; use Rules"):
        queues_from([{"name": "b", "preemption": {"decide": "Maybe"}}])


def test_an_executor_pool_and_lint_take_forecast_which_the_operator_judges():
    spec = {"size": 4, "queues": [{"name": "b", "preemption": {"decide": "Forecast"}}]}
    assert pool_spec_problems(spec) == []
    (queue,) = parse_pool_spec(spec, "shared").queues  # (the operator's reading)
    assert queue.preemption.decide == "Forecast"
    maybe = {"size": 4, "queues": [{"name": "b", "preemption": {"decide": "Maybe"}}]}
    assert any("'Maybe' is not a decide setting" in text for _, text in pool_spec_problems(maybe))
    schema = render_crd("ExecutorPool")["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    queue = schema["properties"]["spec"]["properties"]["queues"]["items"]
    assert queue["properties"]["preemption"]["properties"]["decide"]["enum"] == [
        "Rules",
        "Forecast",
    ]


def test_an_admission_spec_sets_the_grace():
    engine = lent(150.0, policy="admission?grace=60:fifo")
    reclaimer = engine.cluster.admission.reclaimer  # type: ignore[union-attr]
    assert reclaimer.ledger.calm == Calm(grace=60.0)
    assert reclaimer.judge.grace == 60.0  # type: ignore[union-attr]
    assert lent(150.0).cluster.admission.reclaimer.ledger.calm.grace == 0.0  # type: ignore[union-attr]
    with pytest.raises(IdlegateError, match="grace"):
        make_scheduler("admission?grace=soon:fifo")


def test_a_judge_with_a_clock_measures_each_decision():
    ticks = iter(range(1000))
    engine = lent(100.0, judge=functools.partial(forecast_judge, clock=lambda: next(ticks)))
    engine.run()
    (verdict,) = verdicts(engine)
    assert verdict.spent is not None and verdict.spent > 0


def test_a_decision_stops_at_the_pairs_that_decide_it():
    # three pairs at most: two on one side of the work lost's worth decide the median
    assert _decided([50.0, 60.0], [0.0, 0.0], 10.0, 3)
    assert _decided([5.0, 0.0], [0.0, 0.0], 10.0, 3)
    assert not _decided([50.0, 0.0], [0.0, 0.0], 10.0, 3)  # (a third pair breaks the tie)
    assert not _decided([50.0], [0.0], 10.0, 3) and not _decided([], [], 10.0, 3)
    # two late replays decide `bound`; one, with a pair to come, does not
    assert _decided([0.0, 0.0], [3.0, 1.0], 10.0, 3)
    assert not _decided([50.0, 60.0], [3.0, 0.0], 10.0, 3)


def test_the_agreeing_pairs_are_two_and_a_split_takes_a_third():
    engine = lent(100.0)
    engine.run()
    assert [v.pairs for v in verdicts(engine)] == [2]  # (both pairs save 100 s: decided)


def test_a_replay_past_its_share_of_the_budget_ends_there_and_its_pair_still_counts():
    # 2 events in all, 1 step a replay: the replay without the stop ends at its first
    # step (X's two tasks end at 200 s), 100 s ahead, and B finishes at 105 s in the one
    # with it; the pair is compared where the first ended (B's 5 s after 200 s), not cut
    def small(scheduler, seed, waves, calm):
        return ForecastJudge(scheduler, seed=seed, waves=waves, grace=calm.grace, events=2)

    engine = lent(100.0, judge=small)
    engine.run()
    (verdict,) = verdicts(engine)
    assert (verdict.case, verdict.gain, verdict.pairs) == (PAYS, 100.0, 1)


def test_an_owner_unfinished_at_the_horizon_counts_from_the_horizon():
    # a replay with no event within its horizon ends with its clock where it began: an
    # owner still in the pool finishes, at the soonest, its remaining path after the
    # horizon (190 s), not after the last event's time (90 s); where the budget cut the
    # replay short, after where it was cut
    owner = SimpleNamespace(id=7, remaining_cp=5.0)
    sim = SimpleNamespace(now=90.0, jobs=[owner], admission=None)
    run = _Run({7}, 0, 0.0)
    run.until = 190.0
    run.read(sim)  # type: ignore[arg-type]
    assert (run.end, run.left) == (190.0, {7: 195.0})
    run.cut = True
    run.read(sim)  # type: ignore[arg-type]
    assert (run.end, run.left) == (90.0, {7: 95.0})
    sim.jobs = []  # (its owners all finished: not cut short, the budget spent or not)
    run.read(sim)  # type: ignore[arg-type]
    assert not run.cut and run.left == {}
