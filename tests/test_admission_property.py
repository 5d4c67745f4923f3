"""On random pools, queues and workflows, the admission's result (`AdmissionResult`) shows
exactly what the admission decides: every position, every stage it marks startable, and
every entry's reason the one its phase decided (hypothesis)."""

from __future__ import annotations

from math import inf

from hypothesis import given, settings
from hypothesis import strategies as st

from idlegate.errors import IllegalDecisionError
from idlegate.policy import make_scheduler
from idlegate.sim.admission import Admission
from idlegate.sim.admission_result import AdmissionResult, Reason
from idlegate.sim.admission_snapshot import group_of
from idlegate.sim.cluster import Cluster
from idlegate.sim.dag import Dag
from idlegate.sim.engine import decision_round
from idlegate.sim.protocol import Action, Decision, Stage
from idlegate.sim.queues import QueueSpec


class Says:
    """A scheduler that answers `action` whatever it is asked (a driver's given answer)."""

    name = "says"

    def __init__(self, action: Action) -> None:
        self.action = action

    def reset(self, rng: object) -> None:
        pass

    def decide(self, view: object) -> Action:
        return self.action


def dag(first: int, second: int, gang: bool) -> Dag:
    if not second:
        return Dag(("s1",), (first,), (3.0,), ((),), ((),), (gang,))
    return Dag(("s1", "s2"), (first, second), (3.0, 5.0), ((), (0,)), ((1,), ()), (gang, False))


@st.composite
def pools(draw: st.DrawFn) -> tuple[Cluster, str]:
    """A pool with random queues and workflows after a few random rounds and task ends."""
    k = draw(st.integers(2, 8))
    count = draw(st.integers(1, 3))
    bound = draw(st.sampled_from([inf, 4.0]))
    specs = []
    for i in range(count):
        nominal = draw(st.one_of(st.none(), st.integers(0, k)))
        borrow = draw(st.one_of(st.none(), st.integers(0, 3)))
        specs.append(
            QueueSpec(
                f"q{i}",
                {} if nominal is None else {"pods": nominal * 1000},
                borrowing_limit=None if borrow is None else {"pods": borrow * 1000},
                priority=draw(st.integers(0, 1)),
                wait_bound=bound,
            )
        )
    cluster = Cluster(k)
    cluster.admission = Admission(specs, cluster.capacity, cluster.resource_names)
    policy = draw(st.sampled_from(["fifo", "srpt", "fair"]))
    scheduler = make_scheduler(policy)
    workflows = st.tuples(
        st.integers(0, count - 1), st.integers(0, 2), st.integers(1, 3), st.integers(0, 2)
    )
    for q, priority, first, second in draw(st.lists(workflows, min_size=1, max_size=8)):
        gang = draw(st.booleans()) and first <= k
        job = cluster.add_job(dag(first, second, gang), 0.0)
        job.queue, job.priority = q, priority
    now = 0.0
    list(decision_round(cluster, scheduler, now))
    for pick in draw(st.lists(st.integers(0, 50), max_size=6)):
        running = cluster.running_tasks()
        now += 1.0
        if running:
            cluster.task_finished(running[pick % len(running)][0], now)
        else:
            cluster.advance(now)
        list(decision_round(cluster, scheduler, now))
    return cluster, policy


def twin_stage(twin: Cluster, stage: Stage) -> Stage:
    job = next(j for j in twin.jobs if j.id == stage.job.id)
    return job.stages[stage.index]


def launched(cluster: Cluster, stage: Stage, cap: int) -> int | None:
    """Tasks a driver's decision to start `stage` (cap `cap`) launches on a fork of
    `cluster`; None if the admission refuses it (or nothing may start)."""
    twin = cluster.fork()
    theirs = twin_stage(twin, stage)
    try:
        step = twin.decide_once(Says(Decision(theirs, cap)), twin.now)
    except IllegalDecisionError:
        return None
    if step is None or not step[1]:
        return None
    return len(step[1])


def decided(admission: Admission, cluster: Cluster, stage: Stage) -> set[Reason]:
    """The reasons the phases' own state allows for `stage` held back (the oracle): what
    phase 3 (its queue's entitlement), 4 (a task past its bound, forced or blocking),
    5 (the queues served and the shapes they may start), 6 (the top priority) and 7
    (the reservation, the pool's room) decided, read from their state, not the entry."""
    q, need = stage.job.queue, (stage.tasks - stage.launched if stage.gang else 1)
    key = group_of(stage)
    if cluster.fits_no_node(stage) is not None:
        return {Reason.NO_NODE_FITS}
    live = cluster.free_executors > 0 and not cluster.beyond
    plan = admission.plan
    forced = plan.forced if live else None
    if forced is not None and forced.stage is not stage:
        return {Reason.RESERVATION}
    if admission.entitled_for(q, key.amounts)[1] < need:
        return {Reason.BORROWING_LIMIT, Reason.COHORT_FULL}
    blocked = plan.blocked.get(q)
    if blocked is not None and blocked is not stage:
        return {Reason.RESERVATION}
    fit = {Reason.FREE_RESOURCES, Reason.NO_NODE_FITS}
    if blocked is stage or forced is not None:
        return fit
    if q not in plan.served or key not in plan.allowed.get(q, ()):
        return {Reason.QUOTA}
    if plan.top[q] != key.priority:
        return {Reason.PRIORITY}
    if plan.reserve is not None and not plan.room(stage):
        return {Reason.RESERVATION}
    return fit


def check(cluster: Cluster, result: AdmissionResult) -> None:
    admission = cluster.admission
    assert admission is not None
    waiting = {j for j in cluster.jobs if j.runnable}
    shown = [w.job for q in result.queues for w in q.entries()]
    assert sorted(j.id for j in shown) == sorted(j.id for j in waiting)
    for q, queue in enumerate(result.queues):
        assert [w.position for w in queue.waiting] == list(range(1, len(queue.waiting) + 1))
        assert all(w.job.first_start is None for w in queue.waiting)
        assert all(w.position is None and w.job.first_start is not None for w in queue.started)
        priorities = [w.job.priority for w in queue.waiting]
        assert priorities == sorted(priorities, reverse=True)  # (priority first)
        assert all(w.job.queue == q for w in queue.entries())
        for w in queue.entries():
            assert w.message.strip()
            assert (w.reason is None) == bool(w.may_start)
            for stage in w.job.runnable:
                tasks = w.may_start.get(stage)
                hold = w.holds.get(stage)
                assert (tasks is None) == (hold is not None)
                if hold is not None:  # (the reason its phase decided)
                    assert hold.reason in decided(admission, cluster, stage), hold
                done = launched(cluster, stage, w.job.held + (tasks or 1))
                if result.forced is not None:
                    if stage is result.forced:
                        assert tasks is not None and done is not None
                    else:
                        assert tasks is None  # (the forced decision is made instead)
                    continue
                if tasks is None:
                    assert done is None, f"{stage.name} of {w.job.name} started but was not shown"
                else:
                    assert done is not None and 1 <= done <= tasks


@settings(max_examples=80, deadline=None)
@given(pools())
def test_the_result_shows_exactly_what_the_admission_decides(state: tuple[Cluster, str]) -> None:
    cluster, _policy = state
    assert cluster.admission is not None
    result = cluster.admission_result()
    assert result is cluster.admission_result()  # (made once a question)
    check(cluster, result)


def test_a_stage_shown_startable_is_started_by_the_policy_in_one_case():
    # (a known state, so the property's machinery is seen to start something)
    cluster = Cluster(2)
    specs = (QueueSpec("a", {"pods": 1000}), QueueSpec("b", {"pods": 1000}))
    cluster.admission = Admission(specs, cluster.capacity, ())
    a = cluster.add_job(dag(1, 0, False), 0.0)
    b = cluster.add_job(dag(1, 0, False), 0.0)
    b.queue = 1
    result = cluster.admission_result()
    assert result is not None
    assert result.startable() == {a.stages[0]: 1, b.stages[0]: 1}
    check(cluster, result)
