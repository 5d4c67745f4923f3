"""Preemption decided on forecasts in the operator (issue 82, item 3): a ``decide: Forecast``
queue's stops are asked, kept pending while the replay process judges them, and evicted
on a verdict that lets them go ahead, or withdrawn on one that declines; with no verdict
(the judge raised, or its deadline passed first) the rules' answer is evicted, loudly.
On the core's own clock (each event handed with its time): no process, no wall clock."""

from __future__ import annotations

import pickle
from typing import Any

from idlegate.api.queueing import QueueFile
from idlegate.api.settings import Settings
from idlegate.api.task_pods import Owner
from idlegate.operator.core.core import Core
from idlegate.operator.core.events import Admit, PodSeen, Schedule
from idlegate.operator.core.intents import Confirmed, EvictPod, PostEvent, SetTimer
from idlegate.operator.core.judging import WAIT, Judged, JudgeStops, judge_stops
from idlegate.operator.metrics import Metrics
from idlegate.policy import make_scheduler
from idlegate.sim.queues import queues_from
from idlegate.sim.reclaim_plan import RECHECK
from idlegate.sim.reclaim_verdict import DECLINED, ReclaimVerdict
from tests.reclaim_helpers import marked, of, reasons
from tests.test_operator_core import T0, pod, stage, workflow

X = stage("a", 4, 60.0)
"""The lender's stage: four tasks, two of them on queue b's idle quota; they end within
the judge's horizon (`reclaim_forecast.HORIZON`), so its replays see the owner start."""


def lent(
    decide: str = "Forecast", bound: float | None = None, owner_at: float = T0 + 20
) -> tuple[Core, list[Any]]:
    """Queue a (2 of the 4 pods) lends b's quota to x's four tasks, started at T0 and seen
    running at T0 + 6; at `owner_at`, y (one task of 5 s) comes to queue b, whose `decide`
    says how its stops are decided. What the core answered since y came."""
    b: dict[str, Any] = {"name": "b", "nominal": {"pods": 2}}
    b["preemption"] = {"reclaim": "Any", "decide": decide}
    if bound is not None:
        b["waitBound"] = bound
    queues = QueueFile(queues_from([{"name": "a", "nominal": {"pods": 2}}, b]))
    scheduler = make_scheduler("fifo")
    core = Core(Settings(pool_size=4, queues=queues), scheduler, metrics=Metrics(4, scheduler.name))
    core.spec = "fifo"  # (the replay process builds the policy from its spec)
    core.handle(Admit(workflow("x", X), queue=0), T0)
    y = Admit(workflow("y", stage("b", 1, 5.0)), queue=1)
    out = core.handle(y, owner_at) if owner_at == T0 else []
    for i in range(4):
        out += core.handle(PodSeen(pod("x", X, i, "Running", executor=i)), T0 + 6)
    return core, out + core.handle(y, owner_at) if owner_at > T0 else out


def asked(out: list[Any]) -> tuple[JudgeStops, SetTimer]:
    (ask,) = of(out, JudgeStops)
    (timer,) = [t for t in of(out, SetTimer) if t.key == f"judge:{ask.token}"]
    return ask, timer


def evicted(core: Core, out: list[Any]) -> str:
    """The Preempted Event's message once `out`'s one eviction is taken."""
    (evict,) = of(out, EvictPod)
    body = pod("x", X, evict.executor, "Running", executor=evict.executor)
    taken = core.handle(Confirmed(evict, marked(body, evict)), T0 + 22)
    (message,) = [e.message for e in of(taken, PostEvent) if e.reason == "Preempted"]
    return message


def fallbacks(core: Core, why: str) -> float:
    return core.metrics.value("idlegate_preemption_fallbacks_total", queue="b", why=why)


def test_the_stops_wait_pending_for_the_verdict_then_are_evicted_with_its_clause() -> None:
    core, out = lent()
    ask, timer = asked(out)
    assert not of(out, EvictPod)  # (nothing evicted while the judge replays)
    assert timer.at == T0 + 20 + WAIT and timer.fire == Judged(ask.token)
    reclaimer = core.cluster.admission.reclaimer  # type: ignore[union-attr]
    assert len(reclaimer.pending) == 1 and reclaimer.stopping_for("b") == 1
    # the question crosses to the process as plain data; its judge is the simulator's
    question = pickle.loads(pickle.dumps(ask.question))
    verdict = judge_stops(question)
    assert verdict.stops and verdict.pairs > 0
    out = core.handle(Judged(ask.token, verdict=verdict), T0 + 21)
    message = evicted(core, out)
    assert message.endswith(f"{verdict.sentence()[0].upper()}{verdict.sentence()[1:]}.")
    assert "on forecasts" in message
    assert not fallbacks(core, "failed") and not fallbacks(core, "late")


def test_a_declined_verdict_withdraws_the_stops_and_the_queue_waits_its_recheck() -> None:
    core, out = lent()
    ask, _ = asked(out)
    reclaimer = core.cluster.admission.reclaimer  # type: ignore[union-attr]
    no = ReclaimVerdict(DECLINED, 1.0, 20.0, 0.0, 2)
    out = core.handle(Judged(ask.token, verdict=no), T0 + 21)
    assert not of(out, EvictPod) and not of(out, JudgeStops)  # (not asked again at once)
    assert reclaimer.pending == {} and reclaimer.ledger.left(T0 + 21) == 20
    assert reclaimer.declined[1] == T0 + 21 + RECHECK


def test_a_judge_that_raises_gives_the_rules_answer_with_a_warning_and_a_metric() -> None:
    core, out = lent()
    core.reporter = reporter = Owner("default", "pool", "uid-pool", kind="ExecutorPool")
    ask, _ = asked(out)
    out = core.handle(Judged(ask.token, error="BrokenProcessPool: it died"), T0 + 21)
    (warning,) = [e for e in of(out, PostEvent) if e.reason == "PreemptionFallback"]
    assert warning.type == "Warning" and warning.owner == reporter
    assert "the forecast's judge failed (BrokenProcessPool: it died)" in warning.message
    assert fallbacks(core, "failed") == 1
    assert "Decided by the rules: the forecast's judge failed" in evicted(core, out)


def test_a_verdict_past_its_deadline_finds_the_rules_answer_carried_out() -> None:
    core, out = lent()
    ask, timer = asked(out)
    out = core.handle(timer.fire, timer.at)  # (the deadline's timer fires first)
    assert fallbacks(core, "late") == 1
    assert "gave no verdict within 10 s" in evicted(core, out)
    verdict = judge_stops(ask.question)
    assert not of(core.handle(Judged(ask.token, verdict=verdict), timer.at + 1), EvictPod)


def test_a_plan_that_no_longer_holds_is_withdrawn_and_nothing_is_evicted() -> None:
    core, out = lent()
    ask, _ = asked(out)
    victim = ask.question.plan.executors[0]
    core.handle(PodSeen(pod("x", X, victim, "Succeeded", executor=victim)), T0 + 21)
    out = core.handle(Judged(ask.token, verdict=judge_stops(ask.question)), T0 + 22)
    assert not of(out, EvictPod) and "Preempted" not in reasons(out)
    assert core.cluster.admission.reclaimer.pending == {}  # type: ignore[union-attr]


def test_a_wait_bound_due_first_is_the_verdicts_deadline() -> None:
    core, out = lent(bound=5.0)
    _, timer = asked(out)
    assert timer.at == T0 + 25  # (y's bound falls due before WAIT has passed)
    out = core.handle(timer.fire, timer.at)
    assert "within 5 s, before the queue's wait bound fell due" in evicted(core, out)


def test_a_task_past_its_wait_bound_is_not_judged_its_stops_go_at_once() -> None:
    # y comes with x: x's tasks, started at that instant, are no candidates yet; when
    # the pool asks again, y is past its bound
    core, _ = lent(bound=5.0, owner_at=T0)
    out = core.handle(Schedule(force=True), T0 + 6)  # (as the bound's own timer would)
    assert not of(out, JudgeStops)
    assert "Decided by the rules: a task of the queue is past its wait bound" in evicted(core, out)


def test_a_rules_queue_evicts_at_once_as_before() -> None:
    core, out = lent(decide="Rules")
    assert core.judging is None and not of(out, JudgeStops)
    message = evicted(core, out)
    assert "forecast" not in message and "rules" not in message
