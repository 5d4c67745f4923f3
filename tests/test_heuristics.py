"""Baseline schedulers on tiny hand-checked workloads (exact JCTs and launch traces)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from idlegate.errors import IdlegateError
from idlegate.policy import SCHEDULERS, make_scheduler
from idlegate.policy.heuristics import (
    FairScheduler,
    RandomScheduler,
    WeightedFairScheduler,
    best_stage,
)
from idlegate.sim.cluster import Cluster
from idlegate.sim.dag import Dag
from idlegate.sim.engine import Fidelity, JobArrival, SimResult, Workload, simulate
from idlegate.sim.protocol import WAIT, Action, ClusterView, Decision, Scheduler
from tests.helpers import dag

# ---------------------------------------------------------------------------------------
# builders


def one(tasks: int, duration: float) -> Dag:
    return dag(("s", tasks, duration, []))


def run(sched: Scheduler, jobs: list[tuple[float, str, Dag]], k: int, seed: int = 0) -> SimResult:
    w = Workload("t", tuple(JobArrival(t, n, d) for t, n, d in jobs), k, Fidelity.none())
    return simulate(w, sched, seed, trace=True)


def jcts(r: SimResult) -> dict[str, float]:
    assert r.unfinished == 0
    return {rec.name: rec.jct for rec in r.records}


def launches(r: SimResult) -> list[tuple[float, int, int, Any]]:
    """(time, job id, stage index, (executors started, cap)) of every launch decision."""
    assert r.trace is not None
    return [(t, j, s, info) for t, kind, j, s, info in r.trace if kind == "launch"]


# ---------------------------------------------------------------------------------------
# job-priority rules on one executor

ORDER_JOBS = [(0, "A", one(1, 3)), (1, "B", one(1, 4)), (2, "C", one(1, 1)), (2.5, "D", one(1, 2))]


@pytest.mark.parametrize(
    ("name", "expected", "order"),
    [
        ("fifo", {"A": 3, "B": 6, "C": 6, "D": 7.5}, [0, 1, 2, 3]),
        ("sjf", {"A": 3, "B": 9, "C": 2, "D": 3.5}, [0, 2, 3, 1]),
        ("sjf-cp", {"A": 3, "B": 9, "C": 2, "D": 3.5}, [0, 2, 3, 1]),
        ("srpt", {"A": 3, "B": 9, "C": 2, "D": 3.5}, [0, 2, 3, 1]),
        ("lcfs", {"A": 3, "B": 9, "C": 4, "D": 2.5}, [0, 3, 2, 1]),
    ],
)
def test_order_on_one_executor(name, expected, order):
    r = run(make_scheduler(name), ORDER_JOBS, k=1)
    assert jcts(r) == expected
    assert [j for _, j, _, _ in launches(r)] == order
    assert all(info == (1, 1) for *_, info in launches(r))  # cap = K


def test_srpt_orders_by_remaining_work_not_total_work():
    """A 2×5 s job half done (5 s left) goes before a fresh 1×6 s job; SJF takes the fresh one."""
    c = Cluster(1)
    half = c.add_job(Dag.from_spec(_one_stage(2, 5.0)), 0.0, "half")
    c.restore_progress(half, finished=[1])
    c.add_job(Dag.from_spec(_one_stage(1, 6.0)), 0.0, "fresh")
    assert make_scheduler("srpt").decide(c).stage.job.name == "half"
    assert make_scheduler("sjf").decide(c).stage.job.name == "fresh"


def _one_stage(tasks: int, duration: float):
    from idlegate.sim.spec import parse_workflow

    return parse_workflow(
        {"stages": [{"name": "a", "tasks": tasks, "taskDurationSeconds": duration}]}
    )


def test_ties_go_to_the_earlier_job_and_lcfs_to_the_later():
    jobs = [(0, "A", one(1, 2)), (0, "B", one(1, 2))]
    assert [j for _, j, _, _ in launches(run(make_scheduler("sjf"), jobs, k=1))] == [0, 1]
    assert [j for _, j, _, _ in launches(run(make_scheduler("lcfs"), jobs, k=1))] == [1, 0]


def test_sjf_cp_prefers_short_critical_path_over_small_work():
    wide = one(4, 1)  # work 4, critical path 1
    chain = dag(("a", 1, 1.5, []), ("b", 1, 1.5, ["a"]))  # work 3, critical path 3
    jobs = [(0, "wide", wide), (0, "chain", chain)]
    assert jcts(run(make_scheduler("sjf"), jobs, k=1)) == {"wide": 7, "chain": 3}
    assert jcts(run(make_scheduler("sjf-cp"), jobs, k=1)) == {"wide": 4, "chain": 7}


def test_sjf_cp_uses_the_remaining_critical_path():
    # at t=5 C's remaining critical path is 1 (< D's 3) although its total work is larger
    jobs = [(0, "C", dag(("a", 1, 5, []), ("b", 1, 1, ["a"]))), (1, "D", one(1, 3))]
    assert jcts(run(make_scheduler("sjf-cp"), jobs, k=1)) == {"C": 6, "D": 8}
    assert jcts(run(make_scheduler("sjf"), jobs, k=1)) == {"C": 9, "D": 7}


def test_within_a_job_the_largest_bottom_level_goes_first():
    d = dag(("x", 1, 1, []), ("y", 1, 3, []), ("z", 1, 3, []), ("w", 1, 1, ["x"]))
    # bottom levels: x 2, y 3, z 3, w 1 -> y (lowest index among the two 3s), z, x, w
    r = run(make_scheduler("fifo"), [(0, "J", d)], k=1)
    assert [s for _, _, s, _ in launches(r)] == [1, 2, 0, 3]


# ---------------------------------------------------------------------------------------
# fair and weighted fair


def test_fair_splits_two_by_two_and_keeps_freed_executors_local():
    a = dag(("a1", 2, 1, []), ("a2", 2, 1, ["a1"]))
    b = one(8, 1)
    r = run(make_scheduler("fair"), [(0, "A", a), (0, "B", b)], k=4)
    assert launches(r) == [
        (0, 0, 0, (2, 2)),
        (0, 1, 0, (2, 2)),
        (1, 0, 1, (2, 2)),  # A's freed executors go back to A
        (2, 1, 0, (2, 4)),  # A left: B's share is all four
    ]
    assert jcts(r) == {"A": 2, "B": 3}


def _cluster(k: int, *dags: Dag) -> tuple[Cluster, list[Any]]:
    c = Cluster(k)
    return c, [c.add_job(d, 0.0, name) for name, d in zip("ABCDE", dags, strict=False)]


def test_fair_prefers_the_job_the_free_executors_came_from():
    c, (a, b) = _cluster(4, one(4, 10), dag(("b1", 2, 1, []), ("b2", 4, 1, ["b1"])))
    c.apply(Decision(a.stages[0], 1), 0.0)
    for launch in c.apply(Decision(b.stages[0], 2), 0.0):
        assert c.task_finished(launch.executor, 1.0) is None
    # 3 free: 1 never used, 2 from B. A comes first by arrival, but B gets its own back.
    fair = FairScheduler()
    d = fair.decide(c)
    assert isinstance(d, Decision)
    assert (d.stage.key, d.parallelism_cap) == ((1, 1), 2)
    c.apply(d, 1.0)
    d = fair.decide(c)
    assert isinstance(d, Decision)
    assert (d.stage.key, d.parallelism_cap) == ((0, 0), 2)


def test_fair_skips_a_job_at_its_share_unless_keep_source():
    gen = one(4, 10)
    b = dag(("b1", 2, 1, []), ("bx", 1, 10, []), ("b2", 2, 1, ["b1"]))
    c, (a, bj, _, _) = _cluster(4, gen, b, gen, gen)
    c.apply(Decision(a.stages[0], 1), 0.0)
    c.apply(Decision(bj.stages[1], 3), 0.0)
    for launch in c.apply(Decision(bj.stages[0], 3), 0.0):
        c.task_finished(launch.executor, 1.0)
    # four active jobs: share 1; B holds 1 (bx) and has 2 local free executors
    d = FairScheduler().decide(c)
    assert isinstance(d, Decision)
    assert (d.stage.key, d.parallelism_cap) == ((2, 0), 1)
    d = FairScheduler(keep_source=True).decide(c)
    assert isinstance(d, Decision)
    assert (d.stage.key, d.parallelism_cap) == ((1, 2), 3)


def test_fair_waits_when_every_job_with_work_is_at_its_share():
    a = one(8, 1)
    b = dag(("b1", 1, 10, []), ("b2", 1, 1, ["b1"]))
    r = run(make_scheduler("fair"), [(0, "A", a), (0, "B", b)], k=4)
    # B's child stage still has to launch: B keeps its share of 2, one executor idles
    assert launches(r)[:2] == [(0, 0, 0, (2, 2)), (0, 1, 0, (1, 2))]
    assert [e for e in launches(r) if e[0] == 0] == launches(r)[:2]
    assert jcts(r) == {"A": 4, "B": 11}


def test_fair_counts_only_jobs_with_tasks_to_launch():
    r = run(make_scheduler("fair"), [(0, "A", one(8, 1)), (0, "B", one(1, 10))], k=4)
    # B's only task runs: B needs no share, A's share is all of K
    assert launches(r)[:3] == [(0, 0, 0, (2, 2)), (0, 1, 0, (1, 2)), (0, 0, 0, (1, 4))]


def test_fair_gives_a_gang_stage_wider_than_the_share_its_width():
    g = dag(("g", 3, 2, [], True), ("h", 1, 1, ["g"]))  # G keeps a task to launch
    r = run(make_scheduler("fair"), [(0, "G", g), (0, "A", one(8, 1))], k=4)
    assert launches(r)[:2] == [(0, 0, 0, (3, 3)), (0, 1, 0, (1, 2))]


def test_weighted_fair_gives_the_smaller_job_more():
    jobs = [(0, "S", one(6, 1)), (0, "L", one(12, 1))]
    r = run(make_scheduler("weighted-fair", alpha=-1), jobs, k=4)
    # weights 1/6 : 1/12 -> shares ceil(8/3) = 3 and ceil(4/3) = 2
    assert launches(r) == [(0, 0, 0, (3, 3)), (0, 1, 0, (1, 2)), (2, 1, 0, (3, 4))]
    assert jcts(r) == {"S": 2, "L": 5}
    assert jcts(run(make_scheduler("fair"), jobs, k=4)) == {"S": 3, "L": 5}


def test_weighted_fair_shares():
    c, jobs = _cluster(10, one(1, 1), one(1, 3), one(2, 3))
    assert WeightedFairScheduler(alpha=-1).shares(10, jobs) == [7, 3, 2]  # 6.67, 2.22, 1.11
    assert WeightedFairScheduler(alpha=1).shares(10, jobs) == [1, 3, 6]  # 1, 3, 6 exactly
    assert WeightedFairScheduler(alpha=0).shares(10, jobs) == [4, 4, 4]
    assert WeightedFairScheduler(alpha=-50).shares(10, jobs) == [10, 1, 1]  # no overflow
    # one of the last job's tasks finishes: remaining work 1, 3, 3 (total work still 1, 3, 6)
    (launch,) = c.apply(Decision(jobs[2].stages[0], 1), 0.0)
    c.task_finished(launch.executor, 3.0)
    assert WeightedFairScheduler(alpha=1).shares(10, jobs) == [2, 5, 5]  # 1.43, 4.29, 4.29
    assert WeightedFairScheduler(alpha=1, work="total").shares(10, jobs) == [1, 3, 6]


def test_weighted_fair_with_alpha_zero_is_fair():
    jobs = _mixed_workload(np.random.default_rng(3), 10, k=4)
    a = run(make_scheduler("weighted-fair", alpha=0), jobs, k=4)
    b = run(make_scheduler("fair"), jobs, k=4)
    assert a.trace == b.trace


# ---------------------------------------------------------------------------------------
# random


def test_random_is_reproducible_from_the_seed_and_differs_across_seeds():
    jobs = _mixed_workload(np.random.default_rng(5), 8, k=3)
    sched = make_scheduler("random")
    first = run(sched, jobs, k=3, seed=11).trace
    assert run(sched, jobs, k=3, seed=11).trace == first
    assert run(RandomScheduler(), jobs, k=3, seed=11).trace == first
    traces = {repr(run(sched, jobs, k=3, seed=s).trace) for s in range(5)}
    assert len(traces) > 1


# ---------------------------------------------------------------------------------------
# every scheduler on random workloads with gang stages


def _mixed_workload(rng: np.random.Generator, n: int, k: int) -> list[tuple[float, str, Dag]]:
    """n random DAG jobs (1-5 stages, some gang stages no wider than k), Poisson arrivals."""
    jobs, t = [], 0.0
    for i in range(n):
        stages = []
        for s in range(int(rng.integers(1, 6))):
            deps = [f"s{p}" for p in range(s) if rng.random() < 0.4]
            gang = bool(rng.random() < 0.25)
            tasks = int(rng.integers(1, k + 1)) if gang else int(rng.integers(1, 7))
            duration = float(rng.choice([0.5, 1.0, 2.0, 3.5]))
            stages.append((f"s{s}", tasks, duration, deps, gang))
        jobs.append((t, f"j{i}", dag(*stages)))
        t += float(rng.exponential(2.0))
    return jobs


class Checked:
    """Wraps a scheduler and checks each of its decisions against the rules."""

    def __init__(self, inner: Scheduler) -> None:
        self.inner = inner
        self.name = inner.name
        self.decisions = 0

    def reset(self, rng: Any) -> None:
        self.inner.reset(rng)

    def decide(self, view: ClusterView) -> Action:
        d = self.inner.decide(view)
        if d is WAIT:
            return d
        assert isinstance(d, Decision)
        stage, job = d.stage, d.stage.job
        assert stage in view.runnable_stages()
        assert d.idle_delay == 0
        assert type(d.parallelism_cap) is int
        assert job.held < d.parallelism_cap <= view.num_executors
        if stage.gang:
            assert d.parallelism_cap >= job.held + stage.tasks
        self.decisions += 1
        return d


@pytest.mark.parametrize("name", sorted(SCHEDULERS))
@pytest.mark.parametrize("fidelity", [Fidelity.none(), Fidelity()], ids=["plain", "moving"])
def test_every_scheduler_completes_mixed_workloads(name, fidelity):
    for seed in range(3):
        k = 5
        jobs = _mixed_workload(np.random.default_rng(seed), 25, k)
        w = Workload("mixed", tuple(JobArrival(t, n, d) for t, n, d in jobs), k, fidelity)
        checked = Checked(make_scheduler(name))
        r = simulate(w, checked, seed)
        assert r.unfinished == 0
        assert len(r.records) == len(jobs)
        assert r.decisions == checked.decisions
        for rec, (_, _, d) in zip(r.records, jobs, strict=True):
            assert rec.jct >= d.lower_bound_jct(k) - 1e-9


def test_best_stage_skips_gang_stages_that_do_not_fit():
    _, (j,) = _cluster(4, dag(("g", 3, 5, [], True), ("s", 1, 1, [])))
    assert best_stage(j.runnable, 4) is j.stages[0]
    assert best_stage(j.runnable, 2) is j.stages[1]


def test_no_free_executor_means_wait():
    c, (a,) = _cluster(2, one(4, 1))
    c.apply(Decision(a.stages[0], 2), 0.0)
    for name in SCHEDULERS:
        assert make_scheduler(name).decide(c) is WAIT


# ---------------------------------------------------------------------------------------
# registry


def test_registry_names_and_parameters():
    baselines = ["fifo", "sjf", "sjf-cp", "srpt", "lcfs", "fair", "weighted-fair", "random"]
    assert list(SCHEDULERS) == [
        *baselines,
        "analytic",
        *("fcfs", "saf", "srf", "f1"),
        "argo",
        "airflow",
        "portfolio",
    ]
    for name in baselines:
        assert make_scheduler(name).name == name
    assert make_scheduler("analytic").name == "analytic+sjf-cp"
    assert make_scheduler("SJF_CP").name == "sjf-cp"
    wf = make_scheduler("weighted-fair", alpha=-0.5, work="total")
    assert isinstance(wf, WeightedFairScheduler)
    assert (wf.alpha, wf.work) == (-0.5, "total")


@pytest.mark.parametrize(
    ("name", "params", "message"),
    [
        ("nope", {}, "valid names are fifo, sjf, sjf-cp, srpt, lcfs, fair, weighted-fair, random"),
        ("fair", {"alpha": -1}, "has no parameter 'alpha'; it takes keep_source"),
        ("fifo", {"cap": 3}, "it takes no parameters"),
        ("weighted-fair", {"alpha": float("nan")}, "alpha must be a finite number"),
        ("weighted-fair", {"work": "size"}, "work must be 'remaining' or 'total'"),
        ("fair", {"keep_source": 1}, "keep_source must be true or false"),
    ],
)
def test_registry_errors(name, params, message):
    with pytest.raises(IdlegateError, match=message.replace("(", r"\(")):
        make_scheduler(name, **params)
