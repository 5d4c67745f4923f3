"""The analytic idle rule and the planner on a resource pool: a stage fits by its demand,
not by a free-executor count. A pool of 10 pods and 2 CPUs whose tasks ask 1 CPU each is
the pods-only pool of 2 executors, and each rule must decide on it as on that pool."""

from __future__ import annotations

import dataclasses

from idlegate.policy.analytic import AnalyticIdleScheduler, make_analytic
from idlegate.policy.lookahead import effect
from idlegate.sim.cluster import Cluster
from idlegate.sim.dag import Dag
from idlegate.sim.engine import JobArrival, Workload, simulate
from idlegate.sim.protocol import Decision
from idlegate.sim.resources import ResourceVector
from idlegate.sim.rollout import remaining_flow_estimate
from idlegate.sim.spec import parse_workflow

R = ResourceVector.parse


def chain(*lengths: float, tasks: int = 1, cpu: str = "1") -> Dag:
    """A chain s0 -> s1 -> ... whose tasks ask `cpu` each."""
    stages = [
        {"name": f"s{i}", "tasks": tasks, "taskDurationSeconds": d, "resources": {"cpu": cpu}}
        | ({"dependsOn": [f"s{i - 1}"]} if i else {})
        for i, d in enumerate(lengths)
    ]
    return Dag.from_spec(parse_workflow({"stages": stages}))


def test_the_analytic_rule_reserves_the_last_cpu_as_the_last_executor():
    """tests/test_analytic.py's reserve-the-last-executor workload (one long job busy,
    short jobs streaming in, a second long job) on 10 pods and 2 CPUs: the rule idles
    once, as on 2 executors, and every job ends as it does there."""
    jobs = [(0.0, "L0", chain(50))]
    jobs += [(0.5 + 1.5 * i, f"s{i}", chain(1)) for i in range(20)]
    jobs += [(30.2, "L1", chain(50))]
    jobs += [(31.0 + 1.5 * i, f"t{i}", chain(1)) for i in range(10)]
    arrivals = tuple(JobArrival(t, n, d) for t, n, d in sorted(jobs, key=lambda j: j[0]))
    pods_only = Workload("w", arrivals, 2)
    sized = dataclasses.replace(pods_only, num_executors=10, resources=R("cpu=2"))
    runs = []
    for w in (pods_only, sized):
        rule = make_analytic("sjf-cp")
        result = simulate(w, rule, seed=0)
        runs.append((rule.idles, [(r.arrival, r.finish, r.idle_inserted) for r in result.records]))
    assert runs[0][0] == 1 and runs[1] == runs[0]


def test_the_analytic_rule_idles_only_a_launch_that_takes_what_fits():
    rule = AnalyticIdleScheduler("sjf-cp")
    c = Cluster(10, resources=R("cpu=4"))
    c.add_job(chain(50, tasks=3, cpu="2"), 0.0)  # 2 of its 3 tasks fit: nothing left over
    (stage,) = c.runnable_stages()
    evaluation = rule.explain(c, Decision(stage, 10))
    assert evaluation is not None and evaluation.executors == 2
    c = Cluster(10, resources=R("cpu=4"))
    c.add_job(chain(50, tasks=1, cpu="2"), 0.0)  # 2 CPUs stay free for a newcomer
    (stage,) = c.runnable_stages()
    assert rule.explain(c, Decision(stage, 10)) is None


def test_the_planner_counts_the_tasks_that_fit():
    """Caps of 3 and 10 launch the same 2 tasks of 2 CPUs on 4: one option, not two."""
    c = Cluster(10, resources=R("cpu=4"))
    c.add_job(chain(50, tasks=5, cpu="2"), 0.0)
    (stage,) = c.runnable_stages()
    assert effect(c, Decision(stage, 3)) == effect(c, Decision(stage, 10)) == (stage.key, 2, 0.0)
    pods_only = Cluster(10)
    pods_only.add_job(chain(50, tasks=5, cpu="2"), 0.0)
    (stage,) = pods_only.runnable_stages()
    assert effect(pods_only, Decision(stage, 3)) != effect(pods_only, Decision(stage, 10))


def test_the_rollouts_tail_estimate_packs_the_pools_tasks():
    """Jobs of 1-CPU tasks on 330 pods and 4 CPUs pack as on 4 executors."""
    estimates = []
    for pool in (Cluster(4), Cluster(330, resources=R("cpu=4"))):
        for i, (length, tasks) in enumerate([(10, 8), (30, 2), (5, 12)]):
            pool.add_job(chain(length, tasks=tasks), 0.0, f"j{i}")
        estimates.append(remaining_flow_estimate(pool))
    assert estimates[0] == estimates[1] == 30.0 + 30.0 + 50.0  # (cp 30, then 120/4, 200/4)


def test_the_planners_futures_arrive_at_the_rate_of_the_pools_size_in_tasks():
    """The arrival-rate prior reads the pool's size: 330 pods of 4 CPUs for 1-CPU tasks
    are 4 executors, so the futures sampled are those of the pods-only pool of 4 (with
    330, the prior's rate is 80 times as high, and each plan simulates that many more
    arrivals)."""
    import numpy as np

    from idlegate.policy.futures import poisson_futures

    drawn = []
    for pool in (Cluster(4), Cluster(330, resources=R("cpu=4"))):
        jobs = [pool.add_job(chain(30, tasks=4), float(t)) for t in (0, 10)]
        futures = poisson_futures(pool, jobs, 600.0, 3, np.random.default_rng(0))
        drawn.append([[a.time for a in f.arrivals] for f in futures])
    assert drawn[0] == drawn[1] and any(drawn[0])
