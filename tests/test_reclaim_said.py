"""Issue 93, item 4: preemption a user can follow. Why a claimant's queue stopped nothing
is recorded where it is decided (the reclaimer: its patience, a declined verdict, the
budget, a refused eviction) and its waiting workflows' reason reads it; a declined
verdict is an Event on the claimant's waiting workflow and a count by verdict; a
PodDisruptionBudget's refusal is a Warning Event and a count, and nothing is said to be
stopping after it."""

from __future__ import annotations

from typing import Any

from idlegate.operator.core.core import Core
from idlegate.operator.core.intents import EvictPod, PostEvent, Refused
from idlegate.operator.core.judging import Judged
from idlegate.policy import make_scheduler
from idlegate.sim.admission import Admission
from idlegate.sim.cluster import Cluster
from idlegate.sim.dag import Dag
from idlegate.sim.engine import decision_round
from idlegate.sim.protocol import Job
from idlegate.sim.queues import queues_from
from idlegate.sim.reclaim_ledger import Calm
from idlegate.sim.reclaim_plan import NONE_CHOSEN, RECHECK
from idlegate.sim.reclaim_verdict import DECLINED, ReclaimVerdict
from idlegate.sim.resources import ResourceVector
from idlegate.sim.spec import parse_workflow
from tests.reclaim_helpers import of
from tests.test_operator_core import T0
from tests.test_operator_judging import asked, lent


def job(seconds: float) -> Dag:
    stage = {"name": "s", "tasks": 1, "taskDurationSeconds": seconds, "resources": {"cpu": "1"}}
    return Dag.from_spec(parse_workflow({"stages": [stage]}))


def lending(
    per_minute: int | None = None, patience: float | None = None, at: float = 1.0
) -> tuple[Cluster, Job]:
    """4 CPU: queue b (2 CPU, reclaim Any) runs one task of 10 s, queue a three of 100 s
    (one on b's quota); at `at` b's next task (1 CPU) waits, no CPU free."""
    b: dict[str, Any] = {"name": "b", "nominal": {"cpu": 2}, "preemption": {"reclaim": "Any"}}
    raw = [{"name": "a", "nominal": {"cpu": 2}, "borrowingLimit": {"cpu": 2}}, b]
    cluster = Cluster(100, resources=ResourceVector.parse("cpu=4"))
    cluster.admission = Admission(queues_from(raw), cluster.capacity, cluster.resource_names)
    reclaimer = cluster.admission.reclaimer
    assert reclaimer is not None
    if per_minute is not None:
        reclaimer.ledger.calm = Calm(per_minute=per_minute)
        reclaimer.ledger._recent.extend([0.5] * per_minute)  # (spent in the last minute)
    if patience is not None:
        reclaimer.ledger.calm = Calm(patience=patience)
    fifo = make_scheduler("fifo")
    cluster.add_job(job(10), 0.0).queue = 1
    for _ in range(3):
        cluster.add_job(job(100), 0.0).queue = 0
    list(decision_round(cluster, fifo, 0.0))
    waiting = cluster.add_job(job(10), at)
    waiting.queue = 1
    cluster.touch(waiting)
    list(decision_round(cluster, fifo, at))
    return cluster, waiting


def reason_of(cluster: Cluster, job: Job) -> str:
    entry = cluster.admission_result().of(job)
    assert entry is not None
    return entry.message


def test_a_queue_waiting_on_its_patience_says_its_own_tasks_count_as_room_coming() -> None:
    # the issue: b sat at 3 of 8 CPU, its own 10-s tasks counted as room coming, unsaid
    cluster, waiting = lending()
    assert reason_of(cluster, waiting).endswith(
        "or are stopped (reclaim: Any; none is stopped now: its patience holds 30 s more, "
        "as 1 running task(s) are expected to end within it and give the room, 1 of them "
        "its own queue's, counted as room coming)"
    )


def test_no_task_the_rules_let_it_stop_is_said_in_the_wait() -> None:
    # without patience, at 70 s: a's tasks of 100 s are near their end, which the rules spare
    cluster, waiting = lending(patience=0.0, at=70.0)
    assert reason_of(cluster, waiting).endswith(f"none is stopped now: {NONE_CHOSEN})")


def test_a_spent_budget_of_stops_is_said_in_the_wait() -> None:
    cluster, waiting = lending(per_minute=2)
    assert "none is stopped now: the pool's budget of 2 stop(s) a minute is spent" in (
        reason_of(cluster, waiting)
    )


def reason_in(core: Core, name: str) -> str:
    entry = core.cluster.admission_result().of(core.workflows[("default", name)].job)
    assert entry is not None
    return entry.message


def test_a_declined_verdict_is_an_event_on_the_waiting_workflow_and_counted() -> None:
    # the issue: b held 6 of its 8 CPU for 30 s with no Event, log line or metric saying why
    core, out = lent()
    ask, _ = asked(out)
    no = ReclaimVerdict(DECLINED, 1.0, 20.0, 0.0, 2)
    out = core.handle(Judged(ask.token, verdict=no), T0 + 21)
    (said,) = [e for e in of(out, PostEvent) if e.reason == "PreemptionDeclined"]
    assert said.owner.name == "y" and said.type == "Normal"
    assert said.message == (
        f"No task was stopped for queue 'b': {no.sentence()}. It waits for the borrowed "
        f"tasks to end; stops for it are not judged again for {RECHECK:.0f} s."
    )
    assert core.metrics.value("idlegate_reclaim_verdicts_total", queue="b", case="declined") == 1
    assert reason_in(core, "y") == (
        "all 4 executors of the pool are busy; none is stopped for queue b now: the forecast "
        "declined its stops (they would cost more than they save), and they are not judged "
        f"again for {RECHECK:.0f} s"
    )


def test_a_disruption_budgets_refusal_is_a_warning_and_the_wait_says_the_budget_refused() -> None:
    # the issue: a 429 showed only as a log line; the waiting workflows said tasks "are
    # being stopped... it starts as they end" while nothing was being stopped
    core, out = lent(decide="Rules")
    evicts = of(out, EvictPod)
    assert evicts and "being stopped" in reason_in(core, "y")
    refused = 0
    while evicts:  # (each refusal has the next task asked, until none is left to ask)
        out = core.handle(Refused(evicts.pop(), 429, "TooManyRequests", "budget"), T0 + 21)
        refused += 1
        (warning,) = [e for e in of(out, PostEvent) if e.reason == "StopRefused"]
        assert warning.type == "Warning" and warning.owner.name == "x"
        assert "a PodDisruptionBudget refused its eviction" in warning.message
        evicts += of(out, EvictPod)
    reclaimer = core.cluster.admission.reclaimer  # type: ignore[union-attr]
    assert reclaimer.stopping_for("b") == 0
    refusals = core.metrics.value("idlegate_preemption_refusals_total", queue="b", status="429")
    assert refusals == refused
    said = reason_in(core, "y")
    assert "being stopped" not in said
    assert "none is stopped for queue b now: the last stop asked, of pod x-a-" in said
    assert "was not taken: a PodDisruptionBudget refused its eviction (budget)" in said
