"""The admission stage (idlegate.sim.admission) on hand-built pools: traces of who started
when, worked out by hand."""

from __future__ import annotations

import pytest

from idlegate.errors import IdlegateError
from idlegate.policy import make_scheduler
from idlegate.sim.admission_baselines import Admitted
from idlegate.sim.dag import Dag
from idlegate.sim.engine import Engine, JobArrival, Workload, simulate
from idlegate.sim.queue_metrics import allowed_overshoot, alone, queue_figures
from idlegate.sim.queues import QueueSpec, queues_from
from idlegate.sim.resources import ResourceVector
from idlegate.sim.workloads import build_workload


def one(tasks: int, seconds: float) -> Dag:
    return Dag(("s",), (tasks,), (seconds,), ((),), ((),), (False,))


def pods(n: int) -> ResourceVector:
    return ResourceVector({"pods": n * 1000})


def queue(name: str, n: int, **kw) -> QueueSpec:
    return QueueSpec(name, pods(n), **kw)


def finish(result) -> dict[str, float]:
    return {r.name: r.finish for r in result.records}


def run(jobs, queues, executors=4, spec="fifo", **kw):
    workload = Workload("t", tuple(jobs), executors, queues=tuple(queues))
    return simulate(workload, make_scheduler(spec), 0, **kw)


def test_a_queue_borrows_what_another_leaves_idle_and_gives_it_back_without_preemption():
    # a: 3 one-task jobs of 10 s at t=0, quota 2 of 4, borrows the idle 2 of b.
    # b: one 2-task job of 10 s at t=1: b's quota is busy with a's borrowed tasks until
    # t=10 (never preempted), then b starts both at once, before a's third job.
    jobs = [JobArrival(0.0, f"a{i}", one(1, 10.0), queue="a") for i in range(5)]
    jobs.append(JobArrival(1.0, "b", one(2, 10.0), queue="b"))
    result = run(jobs, [queue("a", 2), queue("b", 2)])
    done = finish(result)
    assert done["b"] == 20.0  # both of b's tasks at t=10
    # a ran 4 tasks at t=0 (2 own + 2 borrowed), then only its own 2 at t=10
    assert sorted(done[f"a{i}"] for i in range(5)) == [10.0, 10.0, 10.0, 10.0, 20.0]


def test_without_queues_the_same_jobs_run_in_arrival_order():
    # a0-a3 at t=0; at t=10 a4, a5, a6 and one of b's tasks; b's second at t=20
    jobs = [JobArrival(0.0, f"a{i}", one(1, 10.0), queue="a") for i in range(7)]
    jobs.append(JobArrival(1.0, "b", one(2, 10.0), queue="b"))
    plain = run(jobs, [queue("a", 2), queue("b", 2)], spec="admission?mode=none:fifo")
    assert finish(plain)["b"] == 30.0
    queued = run(jobs, [queue("a", 2), queue("b", 2)])
    assert finish(queued)["b"] == 20.0  # its quota back at t=10, both tasks at once
    assert sorted(v for k, v in finish(queued).items() if k != "b") == [10, 10, 10, 10, 20, 20, 30]


def test_a_lending_limit_keeps_part_of_an_idle_quota_free():
    jobs = [JobArrival(0.0, f"a{i}", one(1, 10.0), queue="a") for i in range(4)]
    b = QueueSpec("b", pods(2), lending_limit=pods(1))
    result = run(jobs, [queue("a", 2), b])
    # a may borrow only 1 of b's 2: three tasks at t=0, the fourth at t=10
    assert sorted(finish(result).values()) == [10.0, 10.0, 10.0, 20.0]


def test_a_borrowing_limit_caps_what_a_queue_takes_beyond_its_quota():
    jobs = [JobArrival(0.0, f"a{i}", one(1, 10.0), queue="a") for i in range(4)]
    a = QueueSpec("a", pods(1), borrowing_limit=pods(1))
    result = run(jobs, [a, queue("b", 3)])
    # a: 1 own + 1 borrowed at a time
    assert sorted(finish(result).values()) == [10.0, 10.0, 20.0, 20.0]


def test_within_a_queue_a_higher_priority_workflow_goes_first():
    jobs = [
        JobArrival(0.0, "low", one(1, 10.0), queue="a", priority=0),
        JobArrival(0.0, "high", one(1, 10.0), queue="a", priority=5),
    ]
    result = run(jobs, [queue("a", 1)], executors=1)
    assert finish(result) == {"high": 10.0, "low": 20.0}


def test_the_wait_bound_starts_an_overdue_task_before_smaller_ones_overtake_it():
    # one executor kept busy by 4 s jobs every 4 s; SRPT never picks the 50 s job
    jobs = [JobArrival(4.0 * i, f"small{i}", one(1, 4.0), queue="a") for i in range(30)]
    jobs.insert(1, JobArrival(1.0, "big", one(1, 50.0), queue="a"))
    unbounded = run(jobs, [queue("a", 1)], executors=1, spec="srpt")
    assert finish(unbounded)["big"] == 170.0  # after every small one
    q = queue("a", 1, wait_bound=30.0)
    bounded = run(jobs, [q], executors=1, spec="srpt", record_tasks=True)
    big = next(t for t in bounded.tasks if t.job == 1)
    # overdue at t=31; the small job running then (started at 28) ends at t=32
    assert big.start == 32.0
    assert (0, 31.0, 32.0) in bounded.queues.overdue
    assert allowed_overshoot(31.0, bounded.tasks) == 1.0
    figures = queue_figures(Workload("t", tuple(jobs), 1, queues=(q,)), bounded)
    # the small jobs that queued up behind it are overdue too, each within its allowance
    assert figures[0].overdue > 1 and figures[0].beyond_allowed == 0


def test_a_bound_passing_with_nothing_else_happening_still_starts_the_task():
    # the analytic rule may idle; a bound is a timer of its own (the engine's event)
    jobs = [JobArrival(0.0, "a", one(1, 10.0), queue="a")]
    never = make_scheduler("fifo")

    class Waits:
        name = "waits"

        def reset(self, rng):
            never.reset(rng)

        def decide(self, view):
            from idlegate.sim.protocol import WAIT

            return WAIT

    workload = Workload("t", tuple(jobs), 1, queues=(queue("a", 1, wait_bound=7.0),))
    result = simulate(workload, Waits(), 0)
    assert finish(result) == {"a": 17.0}  # started by the bound at t=7


def chain(first: int, second: int, seconds: float) -> Dag:
    """Two stages in a row: `first` tasks, then `second` tasks, each of `seconds`."""
    return Dag(
        ("s1", "s2"),
        (first, second),
        (seconds, seconds),
        ((), (0,)),
        ((1,), ()),
        (False, False),
    )


def test_kueue_admits_whole_workflows_where_queues_admit_tasks():
    # queue a: 2 pods, no borrowing. "chain" runs 1 task then 2: Kueue reserves its widest
    # stage (2, all of a's quota) for its whole run, so "one" waits until it ends (t=20)
    # although a pod of a's quota is idle meanwhile; idlegate's queues start "one" at t=0
    jobs = [
        JobArrival(0.0, "chain", chain(1, 2, 10.0), queue="a"),
        JobArrival(0.0, "one", one(1, 10.0), queue="a"),
    ]
    a = QueueSpec("a", pods(2), borrowing_limit={"pods": 0})  # (no borrowing: 0 kept)
    kueue = finish(run(jobs, [a, queue("b", 2)], spec="admission?mode=kueue:fifo"))
    assert kueue == {"chain": 20.0, "one": 30.0}
    for spec in ("fifo", "admission?mode=drf:fifo", "admission?mode=none:fifo"):
        assert finish(run(jobs, [a, queue("b", 2)], spec=spec)) == {"chain": 20.0, "one": 10.0}


def test_drf_gives_the_next_task_to_the_queue_of_the_lowest_share():
    jobs = [JobArrival(0.0, f"a{i}", one(1, 10.0), queue="a") for i in range(4)]
    jobs += [JobArrival(0.0, f"b{i}", one(1, 10.0), queue="b") for i in range(4)]
    result = run(jobs, [queue("a", 2), queue("b", 2)], spec="admission?mode=drf:fifo")
    done = finish(result)
    assert sorted(done[f"a{i}"] for i in range(4)) == [10.0, 10.0, 20.0, 20.0]
    assert sorted(done[f"b{i}"] for i in range(4)) == [10.0, 10.0, 20.0, 20.0]


def test_the_same_seed_gives_the_same_run_with_queues():
    workload = build_workload("teams", 3, scenario="large", num_jobs=8, wait_bound=100)
    a = simulate(workload, make_scheduler("srpt"), 3, trace=True)
    b = simulate(workload, make_scheduler("srpt"), 3, trace=True)
    assert a.trace == b.trace and a.queues == b.queues


def test_one_queue_with_no_quota_runs_as_no_queues():
    plain = build_workload("tpch-like", 5, num_executors=10, num_jobs=15)
    one_queue = Workload(
        plain.name, plain.jobs, plain.num_executors, plain.fidelity, queues=(QueueSpec("default"),)
    )
    a = simulate(plain, make_scheduler("srpt"), 5, trace=True)
    b = simulate(one_queue, make_scheduler("srpt"), 5, trace=True)
    assert a.trace == b.trace


def test_a_fork_admits_as_its_origin_does():
    workload = build_workload("teams", 4, scenario="flood", num_jobs=4, wait_bound=50)
    engine = Engine.for_workload(workload, make_scheduler("srpt"), 4)
    engine.run(until=200.0)
    origin = engine.cluster
    twin = origin.fork()
    assert twin.admission is not None and twin.admission is not origin.admission
    mine, theirs = origin.admission_result(), twin.admission_result()
    assert mine is not None and theirs is not None
    assert sum(len(q.waiting) for q in mine.queues) > 0  # (a state with work waiting)

    def seen(result):  # (the result in names: the fork's jobs are copies)
        return [
            (
                q.name,
                q.used,
                q.borrowed,
                q.lent,
                q.share,
                q.oldest_wait,
                q.why,
                [
                    (
                        w.job.name,
                        w.position,
                        sorted((s.name, n) for s, n in w.may_start.items()),
                        w.reason,
                        w.message,
                    )
                    for w in q.waiting
                ],
            )
            for q in result.queues
        ]

    assert seen(theirs) == seen(mine)
    names = {j.id: j.name for j in origin.jobs}
    for queue_since, twin_since in zip(
        origin.admission.waits_since, twin.admission.waits_since, strict=True
    ):
        assert [(names[s.job.id], s.index, t) for s, t in queue_since.items()] == [
            (names[s.job.id], s.index, t) for s, t in twin_since.items()
        ]
    # and the fork goes on as its origin does
    a, b = origin.fork(), origin.fork()
    assert a.can_schedule() == b.can_schedule() == origin.can_schedule()


def test_alone_is_the_queues_workflows_on_its_quota():
    workload = build_workload("teams", 1, scenario="steady", num_jobs=5)
    solo = alone(workload, workload.queues[1])
    assert solo.num_executors == 10 and not solo.queues
    assert {j.queue for j in solo.jobs} == {"team-b"} and len(solo.jobs) == 5


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ([{"name": "a", "nominal": {"pods": -1}}], "negative|not a quantity"),
        ([{"name": "a", "waitBound": 0}], "waitBound 0"),
        ([{"name": "a"}, {"name": "a"}], "two queues are named 'a'"),
        ([{"name": "Bad!"}], "not a DNS label"),
        ([{"name": "a", "weight": 0}], "weight"),
        ([{"name": "a", "nominal": {"pods": 1}, "lendingLimit": {"pods": 2}}], "lends at most"),
        ([{"name": "a", "colour": "red"}], r"queues\[0\]\[a\]\.colour: is not a field here"),
        ([], "non-empty list"),
    ],
)
def test_a_bad_queue_is_one_sentence(data, message):
    with pytest.raises(IdlegateError, match=message):
        queues_from(data)


def test_an_arrival_naming_a_queue_that_does_not_exist_is_refused_before_the_run():
    jobs = [JobArrival(0.0, "x", one(1, 1.0), queue="nope")]
    with pytest.raises(IdlegateError, match="queue 'nope' does not exist"):
        run(jobs, [queue("a", 1)])


def test_an_unknown_admission_mode_is_refused():
    with pytest.raises(IdlegateError, match="admission mode 'x'"):
        Admitted(make_scheduler("fifo"), "x")


def test_a_limit_of_zero_is_a_limit_of_none_not_no_limit():
    (a,) = queues_from(
        [{"name": "a", "nominal": {"pods": 1}, "borrowingLimit": {"pods": 0}}], "queues"
    )
    jobs = [JobArrival(0.0, f"a{i}", one(1, 10.0), queue="a") for i in range(2)]
    result = run(jobs, [a, queue("b", 3)])
    assert sorted(finish(result).values()) == [10.0, 20.0]  # never borrows b's idle three


def test_what_a_queues_usage_gives_is_kept_as_the_usage_moves():
    # over or under its nominal quota, and its share: kept between the usage's moves
    # (`Usage.moved`), read at every task's end; the same as worked out from the usage
    jobs = [JobArrival(0.0, f"a{i}", one(1, 10.0), queue="a") for i in range(5)]
    jobs.append(JobArrival(1.0, "b", one(2, 10.0), queue="b"))
    workload = Workload("t", tuple(jobs), 4, queues=(queue("a", 2), queue("b", 2)))
    engine = Engine.for_workload(workload, make_scheduler("fifo"), 0)
    admission = engine.cluster.admission
    seen = set()
    while engine.peek() < float("inf"):
        engine.step()
        for q, (used, nominal) in enumerate(zip(admission.used, admission.nominal, strict=True)):
            assert admission.over[q] == any(u > n for u, n in zip(used, nominal, strict=True))
            assert admission.under[q] == any(u < n for u, n in zip(used, nominal, strict=True))
            share = max(u / c for u, c in zip(used, admission.cohort, strict=True))
            assert admission.share(q) == share / admission.weight[q]
            seen.add((q, admission.over[q], admission.under[q]))
    assert {(0, True, False), (0, False, True), (1, False, True)} <= seen  # a borrowed
