"""The portfolio on a resource pool: its replays run on the live pool's resources, and
its prior and training range read the pool's size in tasks, not in pods."""

from __future__ import annotations

from idlegate.policy import make_scheduler
from idlegate.policy.drf import effective_executors, pool_resources
from idlegate.policy.portfolio.replay import ReplayOptions, replay_portfolio
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
    assert replay_portfolio(window, fifo, 10, 0, ReplayOptions(resources=R("cpu=4"))).means == {
        "fifo": 30.0
    }


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


def test_advise_replays_the_history_on_the_pools_resources(tmp_path):
    """A history of k8s-batch workflows with requests (0.1 to 8 CPUs a task): on a pool
    of 8 CPUs fewer of them run at once than on the pods-only pool of the same 6
    executors, so the replay is slower."""
    from idlegate.evaluation.advise import AdviseConfig, run_advise
    from idlegate.sim.history import simulate_history, write_history
    from idlegate.sim.workloads import build_workload

    w = build_workload("k8s-batch", 3, num_jobs=20, num_executors=6, requests=True)
    history = simulate_history(w, make_scheduler("fair"), 0, "fair")
    path = write_history(tmp_path / "h.jsonl", history)
    config = AdviseConfig(heuristics=("fifo",), seeds=2, train_fraction=0)
    pods_only = run_advise(path, config).comparison["fifo"].summary["avg_jct"].mean
    sized = AdviseConfig(
        heuristics=("fifo",),
        seeds=2,
        train_fraction=0,
        pool_resources="cpu=8,memory=1Ti,nvidia.com/gpu=1",
    )
    on_resources = run_advise(path, sized).comparison["fifo"]
    assert on_resources.summary["avg_jct"].mean > pods_only
    assert set(on_resources.runs[0].utilisation_by_resource) == {"cpu", "memory", "nvidia.com/gpu"}
