"""A pods-only gate over a cluster of resources (`idlegate.sim.gate`): the pods it releases
start only where their requests fit, and those that do not pend in the kube-scheduler's
order (release time, older first, a pod that does not fit passed over)."""

from __future__ import annotations

import dataclasses
import json

import pytest
from typer.testing import CliRunner

from idlegate.cli import app
from idlegate.errors import DemandTooLargeError, IdlegateError
from idlegate.policy import make_scheduler
from idlegate.policy.spec import SchedulerSpec
from idlegate.sim.cluster import Cluster
from idlegate.sim.dag import Dag
from idlegate.sim.engine import JobArrival, Workload, simulate
from idlegate.sim.gate import gate_size
from idlegate.sim.metrics import run_metrics
from idlegate.sim.pool import identical_nodes
from idlegate.sim.protocol import WAIT, Decision, PodsGate
from idlegate.sim.resources import ResourceVector
from idlegate.sim.spec import parse_workflow
from idlegate.sim.workloads import build_workload

R = ResourceVector.parse
runner = CliRunner()


def dag(*stages: tuple[str, int, float, str]) -> Dag:
    """One chain of stages (name, tasks, seconds, cpu) in the given order."""
    specs = []
    for i, (name, tasks, seconds, cpu) in enumerate(stages):
        spec = {"name": name, "tasks": tasks, "taskDurationSeconds": seconds}
        spec["resources"] = {"cpu": cpu}
        if i:
            spec["dependsOn"] = [stages[i - 1][0]]
        specs.append(spec)
    return Dag.from_spec(parse_workflow({"stages": specs}))


def workload(*jobs: tuple[float, Dag], cpu: str = "4", pods: int = 100) -> Workload:
    arrivals = tuple(JobArrival(t, f"j{i}", d) for i, (t, d) in enumerate(jobs))
    return Workload("w", arrivals, pods, resources=R(f"cpu={cpu}"))


def jcts(w: Workload, scheduler: str, **kw) -> list[float]:
    return [r.jct for r in simulate(w, make_scheduler(scheduler), **kw).records]


def test_released_pods_that_do_not_fit_pend():
    """A gate of 4 pods releases 4 tasks of 2 CPUs on 4 CPUs: 2 run, 2 pend 10 s."""
    w = workload((0.0, dag(("a", 4, 10, "2"))))
    result = simulate(w, make_scheduler("pods-gate?pods=4:fifo"))
    assert [r.jct for r in result.records] == [20.0]
    assert result.pending == (2, 20.0)
    m = run_metrics(result)
    assert (m.num_executors, m.pods_pended, m.pending_seconds) == (4, 2, 20.0)
    assert m.utilisation == 0.5  # tasks ran 40 of the gate's 80 executor-seconds
    assert m.utilisation_by_resource == {"cpu": 1.0}
    # the same cluster as a resource pool: the same 2 waves, no pod released to pend
    assert jcts(w, "fifo") == [20.0]
    assert "pods_pended" not in run_metrics(simulate(w, make_scheduler("fifo"))).to_dict()


@pytest.mark.parametrize(
    ("x", "y", "z", "expected"),
    [
        ("4", "4", "1", [10.0, 19.0, 28.0]),  # y starts when x ends; z does not fit beside it
        ("4", "1", "4", [10.0, 19.0, 28.0]),  # y starts when x ends; z waits for y too
        ("3", "4", "1", [10.0, 21.0, 10.0]),  # z fits beside x at once, y waits for both
    ],
)
def test_pending_pods_start_oldest_first_and_one_that_does_not_fit_is_passed(x, y, z, expected):
    """x runs from t=0 (10 s each), y is released at t=1 and z at t=2 on 4 CPUs: each
    pending pod starts, oldest first, when it fits, and one that does not fit is passed
    over for a younger one that does."""
    w = workload(
        (0.0, dag(("x", 1, 10, x))),
        (1.0, dag(("y", 1, 10, y))),
        (2.0, dag(("z", 1, 10, z))),
    )
    assert jcts(w, "pods-gate?pods=3:fifo") == expected


class OneEach:
    """Launches each job's first runnable stage with a cap of one executor."""

    name = "one-each"

    def reset(self, rng) -> None:
        pass

    def decide(self, view):
        for stage in view.runnable_stages():
            if not stage.job.held:
                return Decision(stage, 1)
        return WAIT


def test_a_pod_released_by_a_going_on_executor_queues_behind_older_ones():
    """On 4 CPUs, j0's first 3-CPU pod runs from t=0; j1's 2-CPU pod, released at t=1,
    pends. At t=10 j0's executor goes on to its second pod, released after j1's: j1's
    starts, and j0's waits for it (the kube-scheduler's order, not the gate's)."""
    w = workload((0.0, dag(("a", 2, 10, "3"))), (1.0, dag(("b", 1, 10, "2"))))
    result = simulate(w, PodsGate(OneEach(), 3))
    assert [r.jct for r in result.records] == [30.0, 19.0]
    assert result.pending == (2, 19.0)
    # the resource pool itself never releases what does not fit: j0 goes on at t=10
    assert [r.jct for r in simulate(w, OneEach()).records] == [20.0, 29.0]


def test_a_gate_on_a_roomy_cluster_is_the_pods_only_pool():
    """Nothing pends: the run is the pods-only pool of the gate's size, JCT for JCT."""
    plain = build_workload("k8s-batch", 3, num_jobs=40)
    sized = build_workload("k8s-batch", 3, num_jobs=40, requests=True)
    roomy = dataclasses.replace(sized, resources=R("cpu=10000,memory=100Ti,nvidia.com/gpu=100"))
    for rule in ("srpt", "fair"):
        gated = simulate(roomy, make_scheduler(f"pods-gate?pods=12:{rule}"), seed=3)
        alone = simulate(plain, make_scheduler(rule), seed=3, num_executors=12)
        assert [r.jct for r in gated.records] == [r.jct for r in alone.records]
        assert gated.pending == (0, 0.0)


def test_the_gate_is_sized_as_a_user_would():
    """24 CPUs over a mean request of (2 x 1 + 2 x 2) / 4 = 1.5 CPUs: 16 pods."""
    w = workload((0.0, dag(("a", 2, 10, "1"), ("b", 2, 10, "2"))), cpu="24")
    assert gate_size(w) == 16
    result = simulate(w, make_scheduler("pods-gate:fifo"))
    assert result.num_executors == 16


def test_bad_gates_are_sentences():
    w = workload((0.0, dag(("a", 1, 10, "1"))))
    with pytest.raises(IdlegateError, match=r"give the cluster's with --resources"):
        simulate(dataclasses.replace(w, resources=None), make_scheduler("pods-gate:fifo"))
    with pytest.raises(IdlegateError, match=r"sizes its pool from the cluster's CPUs"):
        simulate(
            dataclasses.replace(w, resources=R("memory=1Gi")), make_scheduler("pods-gate:fifo")
        )
    with pytest.raises(IdlegateError, match=r"pods=0 is no pool size"):
        make_scheduler("pods-gate?pods=0:fifo")
    with pytest.raises(IdlegateError, match=r"pods-gate has no parameter 'size'; it takes pods"):
        make_scheduler("pods-gate?size=3:fifo")
    with pytest.raises(IdlegateError, match=r"pods-gate needs a base scheduler"):
        SchedulerSpec.parse("pods-gate")
    with pytest.raises(IdlegateError, match=r"the cluster has one gate; give pods-gate once"):
        make_scheduler("pods-gate:pods-gate?pods=3:srpt")
    big = workload((0.0, dag(("a", 1, 10, "8"))))
    with pytest.raises(
        DemandTooLargeError,
        match=r"stage .a. of j0 requests cpu=8 a pod, more than the cluster has \(its resources: cpu=4,pods=100\)",
    ):
        simulate(big, make_scheduler("pods-gate?pods=2:fifo"))


def test_the_spec_round_trips_and_builds_its_base():
    spec = SchedulerSpec.parse("pods-gate?pods=20:default")
    assert spec.format() == "pods-gate?pods=20:default" and spec.base == SchedulerSpec("default")
    built = make_scheduler(spec)
    assert isinstance(built, PodsGate) and built.pods == 20
    assert built.name == "pods-gate:portfolio"


def test_compare_prints_both_rows_and_utilisation_by_resource(tmp_path):
    args = ["compare", "-w", "k8s-batch", "-o", "requests=true", "-o", "num_jobs=20"]
    args += ["--resources", "cpu=24,memory=96Gi,nvidia.com/gpu=2", "-k", "300", "--seeds", "1"]
    result = runner.invoke(app, [*args, "--schedulers", "srpt,pods-gate:srpt", "--json"])
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)["schedulers"]
    gated = out["pods-gate:srpt"]["runs"][0]
    assert gated["num_executors"] < 300 and gated["pods_pended"] > 0
    assert set(gated["utilisation_by_resource"]) == {"cpu", "memory", "nvidia.com/gpu"}
    assert "pods_pended" not in out["srpt"]["runs"][0]
    table = runner.invoke(app, [*args, "--schedulers", "srpt,pods-gate:srpt", "--out", tmp_path])
    assert table.exit_code == 0, table.output
    markdown = (tmp_path / "compare.md").read_text()
    head = "| cpu (%) | memory (%) | nvidia.com/gpu (%) | pods pended | avg JCT vs srpt |"
    assert head in markdown
    assert "| – | baseline |" in markdown  # (srpt releases only what fits: none pends)


def test_nodes_fit_a_task_where_one_node_holds_it():
    """6 tasks of 2.5 CPUs: one bin of 8 CPUs runs 3 at once (2 waves), 2 nodes of 4 CPUs
    one each (3 waves); a task's node gets its room back when it ends. Behind a pods-only
    gate of 4 the same nodes hold 2 of its 4 pods, and the others pend."""
    one_bin = workload((0.0, dag(("a", 6, 10, "2500m"))), cpu="8", pods=10)
    nodes = dataclasses.replace(one_bin, nodes=identical_nodes(R("cpu=4"), 2, 10))
    assert jcts(one_bin, "fifo") == [20.0]
    assert jcts(nodes, "fifo") == [30.0]
    result = simulate(nodes, make_scheduler("pods-gate?pods=4:fifo"))
    assert [r.jct for r in result.records] == [30.0]
    assert result.pending[0] == 4  # (the 2 first pend 10 s, the last 2 20 s and 10 s)


def test_a_stage_that_fits_the_sum_of_the_nodes_but_no_node_is_refused():
    w = workload((0.0, dag(("a", 1, 10, "6"))), cpu="8", pods=10)
    w = dataclasses.replace(w, nodes=identical_nodes(R("cpu=4"), 2, 10))
    with pytest.raises(DemandTooLargeError, match=r"more than the nodes have room for \(each"):
        simulate(w, make_scheduler("fifo"))
    # each shape once with its count, as the resource pools say it (sim.pool.nodes_text)
    each = r"more than any node has \(each node's resources: cpu=4,pods=5 \(2 nodes\)\)"
    with pytest.raises(DemandTooLargeError, match=each):
        simulate(w, make_scheduler("pods-gate:fifo"))


def test_nodes_split_the_pods_and_a_fork_keeps_where_tasks_run():
    nodes = identical_nodes(R("cpu=4,pods=3"), 2, 5)
    assert nodes == (R("cpu=4,pods=3"), R("cpu=4,pods=2"))
    c = Cluster(5, nodes=nodes)
    job = c.add_job(dag(("a", 4, 10, "3")), 0.0)
    assert len(c.apply(Decision(job.stages[0], 5), 0.0)) == 2  # one a node
    twin = c.fork()
    assert twin.task_finished(0, 10.0) is not None  # goes on, on its node
    assert twin.task_finished(0, 20.0) is not None
    twin.task_finished(1, 20.0)  # its stage has no task left: its node is free again
    assert twin.free_resources["cpu"] == 5000 and c.free_resources["cpu"] == 2000
    for pool in (twin, c):
        pool.add_job(dag(("b", 1, 10, "3")), 20.0)
    assert [s.name for s in twin.runnable_stages()] == ["b"]
    assert c.runnable_stages() == []  # (1 CPU free on each node)


def test_nodes_need_resources():
    args = [
        "simulate",
        "-w",
        "k8s-batch",
        "-o",
        "num_jobs=5",
        "-o",
        "requests=true",
        "--nodes",
        "3",
    ]
    result = runner.invoke(app, args)
    assert result.exit_code == 1
    assert "--nodes: give each node's resources with --resources" in result.stderr
    result = runner.invoke(app, [*args, "--resources", "cpu=8,memory=32Gi", "--json"])
    assert result.exit_code == 0, result.output


def test_backfilling_reserves_a_node_for_the_head():
    """2 nodes of 4 CPUs; a (3 CPUs, 10 s) and b (3 CPUs, 100 s) run one a node. At t=1
    the head h (4 CPUs: a whole node) waits for a's node, free at t=10; c (1 CPU, 50 s)
    would fit beside a now, on the node h waits for, so it waits too and starts beside
    b when h starts. Counting the nodes' sum alone, c would start at once on a's node,
    and h would wait for c (JCTs 60 and 50)."""
    w = workload(
        (0.0, dag(("a", 1, 10, "3"))),
        (0.0, dag(("b", 1, 100, "3"))),
        (1.0, dag(("h", 1, 10, "4"))),
        (1.0, dag(("c", 1, 50, "1"))),
        cpu="8",
        pods=10,
    )
    w = dataclasses.replace(w, nodes=identical_nodes(R("cpu=4"), 2, 10))
    assert jcts(w, "fifo") == [10.0, 100.0, 19.0, 59.0]


def test_a_fork_of_a_gated_pool_is_the_state_machine_itself():
    # planners and the portfolio's replays fork the cluster: they run the machine's own
    # rules, not the gate's (a fork that kept the gate's class moved pods-gate:default)
    from idlegate.sim.engine import Engine
    from idlegate.sim.gate import GatedCluster
    from idlegate.sim.resources import ResourceVector
    from idlegate.sim.workloads import build_workload

    workload = build_workload("k8s-batch", 1, num_jobs=5, requests=True)
    workload = dataclasses.replace(workload, resources=ResourceVector.parse("cpu=8,memory=32Gi"))
    engine = Engine.for_workload(workload, make_scheduler("pods-gate:fifo"), 1)
    assert isinstance(engine.cluster, GatedCluster)
    assert type(engine.cluster.fork()) is Cluster
