"""The portfolio on a resource pool: its replays run on the live pool's resources, and
its prior and training range read the pool's size in tasks, not in pods."""

from __future__ import annotations

from idlegate.policy import make_scheduler
from idlegate.policy.drf import effective_executors, pool_resources
from idlegate.policy.portfolio.replay import replay_portfolio
from idlegate.sim.cluster import Cluster
from idlegate.sim.dag import Dag
from idlegate.sim.engine import JobArrival
from idlegate.sim.resources import ResourceVector
from idlegate.sim.spec import parse_workflow

R = ResourceVector.parse


def dag(tasks: int, seconds: float, cpu: str) -> Dag:
    spec = {"name": "a", "tasks": tasks, "taskDurationSeconds": seconds, "resources": {"cpu": cpu}}
    return Dag.from_spec(parse_workflow({"stages": [spec]}))


def test_a_replay_runs_on_the_pools_resources():
    """Two workflows of 4 tasks x 10 s x 2 CPUs on 10 executors: pods-only, each runs
    in one wave (JCT 10, 10); on 4 CPUs two tasks run at once, so fifo takes 20 s for
    the first and 40 s for the second."""
    window = [JobArrival(0.0, "x", dag(4, 10, "2")), JobArrival(0.0, "y", dag(4, 10, "2"))]
    fifo = {"fifo": make_scheduler("fifo")}
    assert replay_portfolio(window, fifo, 10, 0).means == {"fifo": 10.0}
    assert replay_portfolio(window, fifo, 10, 0, resources=R("cpu=4")).means == {"fifo": 30.0}


def test_a_rounds_request_carries_the_pools_resources():
    pool = Cluster(10, resources=R("cpu=4,memory=8Gi"))
    pool.add_job(dag(2, 10, "1"), 0.0)
    portfolio = make_scheduler("default")
    finished = [JobArrival(0.0, "x", dag(4, 10, "1"))]
    request = portfolio._request_on(pool, finished, [])
    assert request.resources == R("cpu=4,memory=8Gi") == pool_resources(pool)
    assert portfolio._request_on(Cluster(10), finished, []).resources is None


def test_the_pools_size_in_tasks():
    """330 pods and 24 CPUs, tasks asking (2 x 1 + 2 x 2) / 4 = 1.5 CPUs on average: 16
    tasks at once; a pods-only pool is its executors."""
    dags = [dag(2, 10, "1"), dag(2, 10, "2")]
    assert effective_executors(Cluster(330, resources=R("cpu=24,memory=1Ti")), dags) == 16
    assert effective_executors(Cluster(8, resources=R("cpu=24")), dags) == 8
    assert effective_executors(Cluster(330), dags) == 330
