"""The admission's reclaim (issue 82, item 1): a queue under its nominal quota whose ready
task does not fit takes lent quota back, the plan's stops applied by the cluster in the
simulator (`Cluster.decide_once`) and handed to the operator's evictions; never with the
settings at their default. Event traces of hand-built cases, on the engine's clock."""

from __future__ import annotations

import random

import pytest

from idlegate.api.podsecurity import NamespacePolicy
from idlegate.api.queueing import QueueFile
from idlegate.api.settings import Settings
from idlegate.operator.core.core import Core
from idlegate.operator.core.events import Admit
from idlegate.operator.core.intents import Confirmed, EvictPod
from idlegate.operator.metrics import Metrics
from idlegate.policy import make_scheduler
from idlegate.sim import reclaim_plan
from idlegate.sim.admission import Admission
from idlegate.sim.admission_result import Reason
from idlegate.sim.cluster import Cluster
from idlegate.sim.dag import Dag
from idlegate.sim.engine import JobArrival
from idlegate.sim.protocol import Decision
from idlegate.sim.queues import Preemption, QueueSpec
from idlegate.sim.resources import ResourceVector
from idlegate.sim.spec import parse_workflow
from tests.helpers import chain, dag
from tests.reclaim_helpers import engine_of, events, marked, of, reasons
from tests.test_operator_core import T0, pod, said, stage, taken, workflow

ANY = Preemption(reclaim="Any")


def two_queues(reclaim: Preemption = ANY) -> tuple[QueueSpec, ...]:
    """Queue ``a`` lends nothing back by itself; queue ``b`` (2 of 4 pods) may reclaim."""
    return (QueueSpec("a", {"pods": 2000}), QueueSpec("b", {"pods": 2000}, preemption=reclaim))


def lent(*owner: JobArrival, reclaim: Preemption = ANY, victims: str = "least", grace: float = 0):
    """Queue a runs X (two tasks, at 0 s), Y (at 10 s) and Z (at 20 s), all of 200 s, on
    the 4 pods: Y and Z on b's idle quota; then `owner` (b's) arrives; a lent task is
    spared `grace` seconds."""
    jobs = [
        JobArrival(0.0, "X", chain(200.0, tasks=2), queue="a"),
        JobArrival(10.0, "Y", chain(200.0), queue="a"),
        JobArrival(20.0, "Z", chain(200.0), queue="a"),
        *owner,
    ]
    policy = "fifo" if victims == "least" else f"admission?victims={victims}:fifo"
    if grace:
        policy = f"admission?grace={grace:g}:fifo"
    return engine_of(*jobs, executors=4, policy=policy, queues=two_queues(reclaim))


def test_an_owner_under_its_quota_stops_the_borrowed_task_that_lost_least_and_starts():
    engine = lent(JobArrival(100.0, "B", chain(5.0), queue="b"))
    engine.run()
    # at 100 s Z's task (80 s run) is stopped, not Y's (90 s) nor X's (within a's quota)
    assert events(engine, "preempted") == [(100.0, "preempted", 2, 0, (3, 80.0))]
    launches = [(t, j) for t, _k, j, _s, _i in events(engine, "launch")]
    assert (100.0, 3) in launches  # (B's task starts at once)
    assert (105.0, 2) in launches  # (Z's task again, once B's ends: a borrows again)
    assert len(engine.cluster.done) == 4 and not engine.cluster.jobs
    assert engine.cluster.preempted_seconds == 80.0


def test_with_the_settings_at_their_default_nothing_is_stopped_and_the_owner_waits():
    engine = lent(JobArrival(100.0, "B", chain(5.0), queue="b"), reclaim=Preemption())
    assert engine.cluster.admission is not None
    assert engine.cluster.admission.reclaimer is None  # (no reclaim phase at all)
    engine.run()
    assert not events(engine, "preempted")
    (b_start,) = [t for t, _k, j, _s, _i in events(engine, "launch") if j == 3]
    assert b_start == 200.0  # (X's tasks end first)


def test_a_run_where_no_queue_borrows_is_the_same_with_reclaim_on():
    def run(reclaim: Preemption) -> list[tuple]:
        jobs = [
            JobArrival(0.0, "A", chain(5.0, 7.0, tasks=2), queue="a"),
            JobArrival(1.0, "B", chain(3.0, tasks=2), queue="b"),
        ]
        engine = engine_of(*jobs, executors=4, queues=two_queues(reclaim))
        engine.run()
        assert engine.trace is not None
        return engine.trace

    assert run(ANY) == run(Preemption())


def test_kueue_like_victims_stop_every_running_task_of_the_workflow():
    jobs = [
        JobArrival(0.0, "X", chain(200.0, tasks=2), queue="a"),
        JobArrival(10.0, "W", chain(200.0, tasks=2), queue="a"),
        JobArrival(100.0, "B", chain(5.0), queue="b"),
    ]
    for victims, stopped in (("least", 1), ("kueue", 2)):
        policy = "fifo" if victims == "least" else f"admission?victims={victims}:fifo"
        engine = engine_of(*jobs, executors=4, policy=policy, queues=two_queues())
        engine.run()
        assert [e[2] for e in events(engine, "preempted")] == [1] * stopped


def test_a_young_lent_task_is_spared_where_an_older_one_would_do():
    # at 70 s: Z (50 s run) is within a 60 s grace, Y (60 s) is not: Y's is stopped
    engine = lent(JobArrival(70.0, "B", chain(5.0), queue="b"), grace=60.0)
    engine.run()
    assert events(engine, "preempted") == [(70.0, "preempted", 1, 0, (2, 60.0))]
    # with no grace (the default) the least work lost: Z's
    engine = lent(JobArrival(70.0, "B", chain(5.0), queue="b"))
    engine.run()
    assert events(engine, "preempted") == [(70.0, "preempted", 2, 0, (3, 50.0))]


def test_a_gangs_tasks_are_no_candidates():
    # G (a gang of two, from 10 s) borrows b's quota; at 100 s B claims: G's tasks would
    # lose least, but a gang runs as one: one of X's is stopped
    jobs = [
        JobArrival(0.0, "X", chain(1000.0, tasks=2), queue="a"),
        JobArrival(10.0, "G", dag(("g", 2, 1000.0, [], True)), queue="a"),
        JobArrival(100.0, "B", chain(5.0), queue="b"),
    ]
    engine = engine_of(*jobs, executors=4, queues=two_queues())
    engine.run(200.0)
    assert [(t, j) for t, _k, j, _s, _i in events(engine, "preempted")] == [(100.0, 0)]


def test_handed_to_a_driver_the_stops_are_asked_once_and_carried_out_by_it():
    # the operator's case: `stopper` takes the plan's stops; the machine stops nothing
    # until the driver says (the eviction taken), and the same room is not asked again
    engine = lent(JobArrival(100.0, "B", chain(5.0), queue="b"))
    handed = []
    engine.cluster.stopper = handed.append
    engine.run(150.0)
    assert [(h.executors, h.queue, h.reason, h.lost) for h in handed] == [
        ((3,), "b", "Reclaim", 80.0)
    ]
    assert handed[0].spare == (2, 0, 1)  # (the next cheapest, if an eviction is refused)
    assert not events(engine, "preempted") and engine.cluster.busy == 4
    engine.stop(handed[0].executors, started=handed[0].starts)
    assert [(t, j) for t, _k, j, _s, _i in events(engine, "launch")][-1] == (150.0, 3)
    engine.run()
    assert len(handed) == 1 and len(engine.cluster.done) == 4


def test_a_stop_asked_and_not_carried_out_frees_its_room_for_a_while_only():
    # the driver takes the stop at 100 s and never carries it out: at 200 s (a round:
    # C arrives) its room counts as free, nothing more is asked; past `PENDING_FOR`
    # (D arrives at 450 s) it is forgotten, and B, still waiting, asks again: for Y's task,
    # Z's being in the cooldown of the stop asked
    jobs = [
        JobArrival(0.0, "X", chain(1000.0, tasks=2), queue="a"),
        JobArrival(10.0, "Y", chain(1000.0), queue="a"),
        JobArrival(20.0, "Z", chain(1000.0), queue="a"),
        JobArrival(100.0, "B", chain(5.0), queue="b"),
        JobArrival(200.0, "C", chain(5.0), queue="a"),
        JobArrival(100.0 + reclaim_plan.PENDING_FOR + 50, "D", chain(5.0), queue="a"),
    ]
    engine = engine_of(*jobs, executors=4, queues=two_queues())
    handed: list[tuple[float, tuple[int, ...]]] = []
    engine.cluster.stopper = lambda r: handed.append((engine.cluster.now, r.executors))
    engine.run(1000.0)
    assert handed == [(100.0, (3,)), (450.0, (2,))]


def test_a_stop_run_again_is_no_candidate_in_its_cooldown():
    # Z's task stopped at 100 s runs again from 105 s (B's ended); at 200 s C claims: Z's
    # rerun (95 s run) would lose least, but it is in its stop's cooldown: Y's goes
    jobs = [
        JobArrival(0.0, "X", chain(1000.0, tasks=2), queue="a"),
        JobArrival(10.0, "Y", chain(1000.0), queue="a"),
        JobArrival(20.0, "Z", chain(1000.0), queue="a"),
        JobArrival(100.0, "B", chain(5.0), queue="b"),
        JobArrival(200.0, "C", chain(5.0), queue="b"),
    ]
    engine = engine_of(*jobs, executors=4, queues=two_queues())
    engine.run(300.0)
    assert [(t, j) for t, _k, j, _s, _i in events(engine, "preempted")] == [(100.0, 2), (200.0, 1)]
    assert (105.0, "launch", 2, 0, (1, 1)) in events(engine, "launch")
    (z,) = [e for e, stage, _start in engine.cluster.running_tasks() if stage.job.id == 2]
    assert engine.cluster.rerun_of(z) == 100.0  # (the stage's next launch after its stop)


def test_a_stages_next_launch_after_a_stop_is_the_stopped_task_run_again():
    cluster = Cluster(4)
    job = cluster.add_job(dag(("s", 5, 100.0, [])), 0.0)
    (s,) = job.stages
    cluster.apply(Decision(s, 4), 0.0)
    assert [e for _t, e, _s, _k in cluster.running_newest({0}, 1.0)] == [3, 2, 1, 0]
    cluster.stop([1], 10.0)
    cluster.apply(Decision(s, 4), 20.0)  # (one executor free: the stopped task again)
    assert [cluster.rerun_of(e) for e in range(4)] == [None, 10.0, None, None]
    assert [e for _t, e, _s, _k in cluster.running_newest({0}, 21.0)] == [1, 3, 2, 0]
    cluster.task_finished(1, 30.0)  # (it goes on with the stage's last task: no stop's)
    assert cluster.rerun_of(1) is None


@pytest.mark.parametrize("seed", range(6))
def test_reading_the_candidates_newest_first_chooses_as_reading_them_all(monkeypatch, seed):
    # speed only: the early stop keeps the exact choice (random starts and CPU requests)
    rng = random.Random(seed)

    def job(cpu: int) -> Dag:
        requests = {"cpu": str(cpu)}
        one = {"name": "a", "tasks": 1, "taskDurationSeconds": 1000, "resources": requests}
        return Dag.from_spec(parse_workflow({"stages": [one]}))

    def plan(first: int):
        monkeypatch.setattr(reclaim_plan, "FIRST", first)
        queues = (QueueSpec("a", {"cpu": 16000}), QueueSpec("b", {"cpu": 48000}, preemption=ANY))
        cluster = Cluster(200, resources=ResourceVector.parse("cpu=64"))
        cluster.admission = Admission(queues, cluster.capacity, cluster.resource_names)
        r = random.Random(seed)
        t = 0.0
        while cluster.free_resources["cpu"] >= 4000:
            t += r.uniform(0, 5)
            started = cluster.add_job(job(r.choice((1, 2, 3))), t)
            cluster.apply(Decision(started.stages[0], 1), t)
        claim = cluster.add_job(job(rng.choice((4, 5, 7))), t + 100)
        claim.queue = 1
        cluster.touch(claim)
        cluster.advance(t + 100)
        assert cluster.can_schedule()
        got = cluster.admission.plan.reclaim
        assert got is not None
        return got.executors, got.lost  # (what is chosen; `spare` lists what was read)

    rng_state = rng.getstate()
    all_read = plan(10**6)
    rng.setstate(rng_state)
    assert plan(1) == all_read


def test_the_operator_evicts_a_plans_victims_and_the_owners_task_starts_once_taken():
    settings = Settings(pool_size=4, queues=QueueFile(two_queues()))
    core = Core(settings, make_scheduler("fifo"), metrics=Metrics(4, "fifo"))
    lender = stage("a", tasks=4, seconds=1000)  # (not about to end: the rules stop one)
    said(core, Admit(workflow("x", lender), [], NamespacePolicy(), queue=0), T0)
    taken(core)
    assert core.cluster.busy == 4  # (a borrows all of b's quota)
    said(core, Admit(workflow("y", stage("b")), [], NamespacePolicy(), queue=1), T0 + 100)
    (evict,) = of(taken(core), EvictPod)
    assert evict.name.startswith("x-a-") and core.cluster.busy == 4
    # meanwhile the owner's workflow waits for it, and says so (the visibility API's)
    y = core.workflows[("default", "y")]
    (hold,) = core.cluster.admission_result().of(y.job).holds.values()
    assert hold.reason is Reason.RECLAIMING
    assert hold.message.startswith("1 task(s) of queues above their quota are being stopped")
    index = int(evict.name.rsplit("-", 1)[1])
    body = pod("x", lender, index, "Running", executor=evict.executor)
    said(core, Confirmed(evict, marked(body, evict)), T0 + 101)
    intents = taken(core)
    assert "Preempted" in reasons(intents) and core.cluster.preempted == 1
    assert y.job.stages[0].launched == 1  # (the owner's task released on the freed pod)


def test_a_forks_stops_are_its_own_not_the_live_pools():
    # a planner's fork replays a reclaim: its ledger and its pending stops are copies
    engine = lent(JobArrival(100.0, "B", chain(5.0), queue="b"))
    handed: list = []
    engine.cluster.stopper = handed.append
    engine.run(150.0)
    live = engine.cluster.admission.reclaimer
    twin = engine.cluster.fork().admission.reclaimer
    assert twin.pending == live.pending and len(live.pending) == 1
    twin.ledger.stopped([("x",)] * 5, 150.0)
    twin.pending.clear()
    assert live.ledger.left(150.0) == twin.ledger.left(150.0) + 5 and len(live.pending) == 1
