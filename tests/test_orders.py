"""`srpt`, `sjf-cp` and `sjf` on a pods-only pool ask the cluster's index of the jobs by
their key (`sim.orders`), of the pool or of a queue: the answer of their pass over every
job, question by question."""

from __future__ import annotations

from math import nan
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import idlegate.sim.orders as orders_module
from idlegate.policy import make_scheduler
from idlegate.policy.heuristics import SCHEDULERS, _KeyedScheduler
from idlegate.sim.admission_view import QueueView
from idlegate.sim.cluster import Cluster
from idlegate.sim.dag import Dag
from idlegate.sim.engine import JobArrival, Workload, simulate
from idlegate.sim.orders import Order
from idlegate.sim.protocol import Decision
from idlegate.sim.spec import parse_workflow
from idlegate.sim.workloads import build_workload

KEYED = ("srpt", "sjf-cp", "sjf")


class Pass:
    """The cluster seen through something that is not a `Cluster`: the rule's pass over
    every job (as a queue's view takes it)."""

    def __init__(self, cluster: Cluster) -> None:
        self._cluster = cluster

    def __getattr__(self, name: str) -> Any:
        return getattr(self._cluster, name)


@pytest.fixture
def both_ways(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """Every question a keyed rule answers of a cluster, compared with its pass over every
    job; the answers."""
    answers: list[object] = []
    indexed = _KeyedScheduler.decide

    def both(self: _KeyedScheduler, view: Any) -> object:
        answer = indexed(self, view)
        if isinstance(view, Cluster):
            scanned = indexed(self, Pass(view))
            assert answer == scanned, f"{self!r} at {view.now}"
            answers.append(answer)
        return answer

    monkeypatch.setattr(_KeyedScheduler, "decide", both)
    return answers


def chain(stages: list[tuple[int, int, bool]]) -> Dag:
    """A DAG of (tasks, seconds, gang) stages, each after the one before it."""
    spec = [
        {"name": f"s{i}", "tasks": tasks, "taskDurationSeconds": seconds, "gang": gang}
        | ({"dependsOn": [f"s{i - 1}"]} if i else {})
        for i, (tasks, seconds, gang) in enumerate(stages)
    ]
    return Dag.from_spec(parse_workflow({"stages": spec}))


stage = st.tuples(st.integers(1, 4), st.sampled_from([1, 2, 3]), st.booleans())
job = st.tuples(st.integers(0, 6), st.lists(stage, min_size=1, max_size=3))


def answers_as_the_pass(scheduler: Any, executors: int, jobs: list[Any]) -> None:
    """Run `jobs` (the `job` strategy's draws) on a pods-only pool of `executors` under
    `scheduler`, asking each question of the cluster (its index) and of a `Pass` of it
    (the pass over every job): the same answer each time, and every job finishes."""
    arrivals = tuple(
        JobArrival(
            float(t), f"j{i}", chain([(min(n, executors) if g else n, d, g) for n, d, g in s])
        )
        for i, (t, s) in enumerate(sorted(jobs, key=lambda j: j[0]))
    )
    indexed = type(scheduler).decide
    asked: list[object] = []

    def both(view: Any) -> object:
        answer = indexed(scheduler, view)
        assert answer == indexed(scheduler, Pass(view)), f"{scheduler!r} at {view.now}"
        asked.append(answer)
        return answer

    scheduler.decide = both
    result = simulate(Workload("random", arrivals, executors), scheduler)
    assert result.unfinished == 0 and asked


@settings(max_examples=150, deadline=None)
@given(
    executors=st.integers(1, 6),
    jobs=st.lists(job, min_size=1, max_size=12),
    rule=st.sampled_from(KEYED),
    cap=st.sampled_from([1.0, 0.9, 0.5]),
)
def test_the_index_chooses_as_the_pass_on_random_small_pools(executors, jobs, rule, cap):
    """Random pools of 1 to 6 executors and up to 12 chains of gang and plain stages whose
    durations tie often (1, 2 or 3 s): every question's answer is the pass's (the same
    stage, the same cap, ties to the lower job id), with and without a cap."""
    scheduler = make_scheduler(rule, **({} if cap == 1.0 else {"cap": cap}))
    answers_as_the_pass(scheduler, executors, jobs)


@pytest.mark.parametrize("rule", ["srpt", "srpt?cap=0.9", "sjf-cp", "sjf"])
def test_the_index_answers_as_the_pass_on_an_overloaded_stream(both_ways, rule):
    """k8s-batch at three times the pool's capacity (many workflows waiting): each answer
    is the pass's."""
    workload = build_workload("k8s-batch", 3, num_jobs=120, load=3.0)
    simulate(workload, make_scheduler(rule), seed=3)
    assert any(isinstance(a, Decision) for a in both_ways)


@pytest.mark.parametrize("rule", ["srpt", "srpt?cap=0.9", "sjf-cp", "sjf"])
def test_behind_queues_a_queue_asks_its_own_order_and_answers_as_the_pass(monkeypatch, rule):
    """Behind the pool's queues the rule is asked of a queue's view, which holds only its
    queue's jobs: it takes that queue's order (`Cluster.order` of the queue, never the
    pool's, which holds every queue's), and each answer is its pass over the queue's jobs
    (issue 96: a flooded queue's pass was 40 % of a replay's CPU)."""
    asked: list[int | None] = []
    order = Cluster.order

    def noted(self: Cluster, key: str, queue: int | None = None) -> Order:
        asked.append(queue)
        return order(self, key, queue)

    answers: list[object] = []
    indexed = _KeyedScheduler.decide

    def both(self: _KeyedScheduler, view: Any) -> object:
        answer = indexed(self, view)
        if isinstance(view, QueueView):
            assert answer == indexed(self, Pass(view)), f"{self!r} at {view.now}"
            answers.append(answer)
        return answer

    monkeypatch.setattr(Cluster, "order", noted)
    monkeypatch.setattr(_KeyedScheduler, "decide", both)
    workload = build_workload("teams", 4, num_jobs=10)
    result = simulate(workload, make_scheduler(rule), seed=4)
    assert result.decisions and any(isinstance(a, Decision) for a in answers)
    assert asked and None not in asked


def test_a_queues_order_holds_its_own_jobs_alone():
    """Known answer: two queues' jobs in one pool; the order of queue 1 holds its job
    alone, that of the pool both, the smaller first; a job moved to queue 1 (touched, as
    a driver moving it does) joins its order."""
    cluster = Cluster(4)
    big = cluster.add_job(chain([(2, 10, False)]), 0.0)
    small = cluster.add_job(chain([(1, 1, False)]), 0.0)
    small.queue = 1
    cluster.touch(small)
    assert cluster.order("remaining_work").first(lambda j: j) is small
    assert cluster.order("remaining_work", 1).first(lambda j: j) is small
    assert cluster.order("remaining_work", 0).first(lambda j: j) is big
    assert len(cluster.order("remaining_work", 1)) == 1
    big.queue = 1
    cluster.touch(big)
    assert len(cluster.order("remaining_work", 1)) == 2
    assert cluster.order("remaining_work", 0).first(lambda j: j) is None


def test_known_answer_ties_go_to_the_lower_id_and_the_cap_skips():
    """Three jobs of the same remaining work: the first arrived is chosen; once it holds
    the cap's executors (`srpt?cap=0.5` of 4: 2), the next one is."""
    cluster = Cluster(4)
    jobs = [cluster.add_job(chain([(4, 2, False)]), 0.0) for _ in range(3)]
    srpt = make_scheduler("srpt?cap=0.5")
    first = srpt.decide(cluster)
    assert first == Decision(jobs[0].stages[0], 2)
    cluster.apply(first, 0.0)
    assert srpt.decide(cluster) == Decision(jobs[1].stages[0], 2)
    # the shorter job arriving last goes first
    short = cluster.add_job(chain([(1, 1, False)]), 0.0)
    assert srpt.decide(cluster) == Decision(short.stages[0], 2)


def test_a_gang_that_does_not_fit_is_passed_over():
    """The job with the least work is a gang of 3 with 2 executors free: the next one in
    the order is chosen, and the gang stays first in the order for later."""
    cluster = Cluster(3)
    big = cluster.add_job(chain([(1, 100, False)]), 0.0)
    cluster.apply(Decision(big.stages[0], 1), 0.0)
    gang = cluster.add_job(chain([(3, 1, True)]), 0.0)
    plain = cluster.add_job(chain([(2, 5, False)]), 0.0)
    assert make_scheduler("srpt").decide(cluster) == Decision(plain.stages[0], 3)
    assert cluster.order("remaining_work").first(lambda j: j) is gang


def test_a_question_reads_only_the_jobs_that_changed(monkeypatch):
    """With 2,000 workflows waiting, the first question reads each once; after a task ends,
    the next reads the job it changed and the one launched, not 2,000."""
    cluster = Cluster(4)
    for _ in range(2000):
        cluster.add_job(chain([(2, 10, False)]), 0.0)
    read: list[int] = []
    original = orders_module.attrgetter

    def counting(name: str) -> Any:
        get = original(name)

        def reading(job: Any) -> Any:
            read.append(1)
            return get(job)

        return reading

    monkeypatch.setattr(orders_module, "attrgetter", counting)
    srpt = make_scheduler("srpt")
    cluster.apply(srpt.decide(cluster), 0.0)  # the first job takes 2 executors
    assert len(read) == 2000
    read.clear()
    cluster.apply(srpt.decide(cluster), 0.0)  # the second takes the other 2
    cluster.task_finished(0, 10.0)
    answer = srpt.decide(cluster)
    assert isinstance(answer, Decision) and answer.stage.job is cluster.jobs[2]
    assert len(read) <= 3


def test_a_nan_key_makes_the_rule_pass_over_the_jobs():
    """A job whose remaining work is NaN: no order holds it, and the rule passes over the
    jobs (whose answer then depends on where it stands)."""
    cluster = Cluster(2)
    jobs = [cluster.add_job(chain([(1, 2, False)]), 0.0) for _ in range(3)]
    jobs[1].remaining_work = nan
    cluster.touch(jobs[1])
    order = cluster.order("remaining_work")
    assert not order.usable
    srpt = make_scheduler("srpt")
    assert srpt.decide(cluster) == srpt.decide(Pass(cluster))
    jobs[1].remaining_work = 1.0
    cluster.touch(jobs[1])
    assert order.usable and srpt.decide(cluster) == Decision(jobs[1].stages[0], 2)


def test_a_fork_builds_its_own_order():
    """A fork (made without `__init__`) has no order until asked, then its own jobs'."""
    cluster = Cluster(2)
    cluster.add_job(chain([(1, 5, False)]), 0.0)
    cluster.order("remaining_work")
    fork = cluster.fork()
    assert fork._orders is None
    assert fork.order("remaining_work").first(lambda j: j) is fork.jobs[0]


def test_each_ordered_rule_keys_by_its_attribute():
    """`order_key` is what `key` returns, for every rule that names one; a subclass with a
    key of its own is not ordered by its parent's."""
    cluster = Cluster(2)
    job = cluster.add_job(chain([(2, 3, False), (1, 4, False)]), 0.0)
    ordered = [cls for cls in SCHEDULERS.values() if getattr(cls, "order_key", None)]
    assert {cls.name for cls in ordered} == set(KEYED)
    for cls in ordered:
        assert cls().key(job) == getattr(job, cls.order_key)

    class Longest(SCHEDULERS["srpt"]):
        def key(self, job: Any) -> float:
            return -job.remaining_work

    assert Longest.order_key is None
    with pytest.raises(ValueError, match="remaining_work"):
        Order("arrival")


def test_an_order_no_rule_asks_holds_only_the_jobs_in_the_system():
    """Asked once, then never again (a portfolio following another rule): the jobs that
    finish meanwhile are not kept."""
    cluster = Cluster(1)
    cluster.add_job(chain([(1, 1, False)]), 0.0)
    order = cluster.order("remaining_work")
    assert len(order) == 1
    for i in range(50):
        done = cluster.add_job(chain([(1, 1, False)]), float(i))
        cluster.apply(Decision(done.stages[0], 1), float(i))
        cluster.task_finished(0, i + 0.5)
    assert not any(j.finish is not None for j in order.stale)
    assert not order.stale and len(order) == 1  # (the first job, never launched)
