"""`--resources` for simulate and compare, and stages' `resources` in workflow files."""

from __future__ import annotations

import json
import re
from fractions import Fraction

import pytest
from typer.testing import CliRunner

from idlegate.cli import app
from idlegate.errors import SpecError
from idlegate.evaluation.comparison import WorkloadOptions, build
from idlegate.sim.resources import ResourceVector
from idlegate.sim.spec import parse_workflow

runner = CliRunner()

WORKFLOWS = """\
- stages:
  - {name: prep, tasks: 4, taskDurationSeconds: 10, resources: {cpu: 2, memory: 4Gi}}
  - name: train
    tasks: 2
    taskDurationSeconds: 30
    dependsOn: [prep]
    resources: {cpu: 500m, nvidia.com/gpu: 1}
- stages:
  - {name: small, tasks: 8, taskDurationSeconds: 5, resources: {cpu: 0.25}}
"""


@pytest.fixture
def workflows(tmp_path):
    path = tmp_path / "w.yaml"
    path.write_text(WORKFLOWS)
    return str(path)


def _avg_jct(*args: str) -> float:
    result = runner.invoke(app, ["simulate", "-w", "file", "-s", "fifo", "--json", *args])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)["avg_jct"]


def test_resources_bound_what_runs_at_once(workflows):
    pods_only = _avg_jct("--file", workflows, "-k", "10")
    sized = _avg_jct("--file", workflows, "-k", "10", "--resources", "cpu=4,nvidia.com/gpu=1")
    assert (pods_only, sized) == (25.0, 52.5)


def test_build_gives_the_workload_its_resources(workflows):
    options = WorkloadOptions(path=workflows, resources="cpu=4,memory=8Gi")
    assert build("file", 0, options).resources == ResourceVector.parse("cpu=4,memory=8Gi")
    assert build("file", 0, WorkloadOptions(path=workflows)).resources is None


def test_compare_records_the_resources(workflows):
    args = ["compare", "-w", "file", "--file", workflows, "--schedulers", "fifo,fair"]
    result = runner.invoke(app, [*args, "--seeds", "1", "--resources", "cpu=4", "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["config"]["resources"] == "cpu=4"


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("cpu=eight", "Error: --resources: cpu: 'eight' is not a quantity"),
        ("cpu=1", "Error: stage 'prep' of .* needs cpu=2 at once, more cpu than the pool has "),
        ("pods=3", "Error: the pool's resources say pods=3, but it has 10 executors"),
        # not a pods-only pool, quietly: the stages request CPU a pool of none never has
        ("cpu=0", "Error: --resources: cpu=0 is no capacity: a pool counts only the resources"),
        # one GPU, quietly, and a pool in which every request was 0 % (issue 60, 14 and 15)
        ("cpu=8,nvidia.com/gpu=0.5", "Error: --resources: nvidia.com/gpu: '0.5' is not a whole"),
        ("cpu=1e400", "Error: --resources: cpu=1e400 is beyond the largest quantity Kubernetes"),
        # a misnamed resource would leave a pods-only pool, quietly
        (
            "gpu=1",
            r"Error: the pool counts gpu but no stage of file\S* requests any \(they request cpu",
        ),
    ],
)
def test_bad_resources_are_one_line(workflows, value, message):
    args = ["simulate", "-w", "file", "--file", workflows, "-k", "10", "--resources", value]
    result = runner.invoke(app, args)
    assert result.exit_code == 1
    assert re.match(message, result.stderr), result.stderr


def test_train_refuses_resources():
    result = runner.invoke(app, ["train", "--preset", "quick", "--resources", "cpu=4"])
    assert result.exit_code == 1
    assert "--resources: a training workload's pool of resources is given in a config" in (
        result.stderr
    )


def _stage(**more):
    return {"stages": [{"name": "a", "tasks": 1, "taskDurationSeconds": 1, **more}]}


def test_a_stage_states_its_requests_or_takes_its_templates():
    spec = parse_workflow(_stage(resources={"cpu": "500m", "nvidia.com/gpu": 1}))
    assert spec.stages[0].demand == ResourceVector.parse("cpu=500m,nvidia.com/gpu=1")
    container = {"name": "c", "resources": {"requests": {"cpu": "2"}, "limits": {"memory": "1Gi"}}}
    spec = parse_workflow(_stage(template={"spec": {"containers": [container]}}))
    assert spec.stages[0].demand == ResourceVector.parse("cpu=2,memory=1Gi")
    assert parse_workflow(_stage()).stages[0].demand == ResourceVector()


@pytest.mark.parametrize(
    ("more", "message"),
    [
        ({"resources": {"cpu": "x"}}, r"stages\[0\]\.resources: cpu: 'x' is not a quantity"),
        ({"resources": {"cpu": True}}, r"stages\[0\]\.resources: cpu: True is not a quantity"),
        ({"resources": "cpu=2"}, r"stages\[0\]\.resources: expected a mapping"),
        (
            {"template": {"spec": {"containers": [{"resources": {"limits": {"cpu": "-1"}}}]}}},
            r"stages\[0\]: template\.spec\.containers\[0\]\.resources\.limits\.cpu: '-1' is "
            "negative",
        ),
    ],
)
def test_a_bad_request_in_a_workflow_names_its_path(more, message):
    with pytest.raises(SpecError, match=message):
        parse_workflow(_stage(**more))


@pytest.mark.parametrize("workload", ["k8s-batch", "argo-shapes", "airflow-shapes"])
def test_the_pod_workloads_draw_requests_only_when_asked(workload):
    from idlegate.sim.workloads import build_workload

    plain = build_workload(workload, 5, num_jobs=200)
    sized = build_workload(workload, 5, num_jobs=200, requests=True)
    assert all(not j.dag.demands for j in plain.jobs)
    same = [(j.time, j.name, j.dag.tasks, j.dag.durations) for j in plain.jobs]
    assert same == [(j.time, j.name, j.dag.tasks, j.dag.durations) for j in sized.jobs]
    demands = [d for j in sized.jobs for d in j.dag.demands]
    assert len(demands) == sum(j.dag.num_stages for j in sized.jobs)  # every stage asks
    cpus = [d.units("cpu") for d in demands]
    assert min(cpus) >= Fraction(1, 10) and max(cpus) <= 8 and len(set(cpus)) > 10
    assert all(d.units("memory") / (2**20 * 256) >= 1 for d in demands)
    assert all(1.5 <= d.units("memory") / 2**30 / d.units("cpu") <= 5.5 for d in demands)
    gpus = [d for d in demands if "nvidia.com/gpu" in d]
    assert 0 < len(gpus) < len(demands) / 20  # a few GPU stages


@pytest.mark.parametrize("workload", ["k8s-batch", "argo-shapes", "airflow-shapes"])
def test_the_pod_workloads_with_requests_run_on_a_resource_pool(workload):
    args = ["simulate", "-w", workload, "-o", "requests=true", "-o", "num_jobs=30", "--json"]
    pool = ["--resources", "cpu=24,memory=96Gi,nvidia.com/gpu=2"]
    for scheduler in ("fifo", "srpt", "learned:default"):
        result = runner.invoke(app, [*args, "-s", scheduler, *pool])
        assert result.exit_code == 0, result.output
        run = json.loads(result.stdout)
        assert run["jobs"] == 30
        # the requests were counted against the pool's resources, within them
        used = run["utilisation_by_resource"]
        assert set(used) == {"cpu", "memory", "nvidia.com/gpu"}, used
        assert 0 < used["cpu"] <= 1 and all(0 <= u <= 1 for u in used.values()), used
    # and they bound what runs at once: half the CPUs and memory, later workflows
    half = ["--resources", "cpu=12,memory=48Gi,nvidia.com/gpu=2", "-s", "srpt"]
    halved = json.loads(runner.invoke(app, [*args, *half]).stdout)
    whole = json.loads(runner.invoke(app, [*args, *pool, "-s", "srpt"]).stdout)
    assert halved["avg_jct"] > whole["avg_jct"]


LINTED = """\
apiVersion: idlegate.io/v1alpha1
kind: DagWorkflow
metadata: {name: mixed}
spec:
  stages:
    - {name: prep, tasks: 2, taskDurationSeconds: 5, resources: {cpu: "2"}}
    - {name: fit, tasks: 2, taskDurationSeconds: 5, gang: true, resources: {cpu: "3"}}
"""


@pytest.mark.parametrize(
    ("flags", "problem"),
    [
        (["--pool-resources", "cpu=8"], None),
        (["--pool-resources", "cpu=4"], r"stage 'fit' of mixed needs cpu=6 at once \(2 tasks"),
        (["--pool-resources", "cpu=1", "--pool-size", "8"], r"stage 'prep' of mixed needs cpu=2"),
        (["--pool-size", "8"], None),  # a pods-only pool: requests are not counted
    ],
)
def test_lint_says_which_stage_can_never_fit_the_pool(tmp_path, flags, problem):
    path = tmp_path / "mixed.yaml"
    path.write_text(LINTED)
    result = runner.invoke(app, ["lint", str(path), *flags])
    if problem is None:
        assert result.exit_code == 0, result.output
    else:
        assert result.exit_code == 1
        assert re.search(problem, result.stdout), result.stdout


def test_lint_refuses_bad_pool_resources(tmp_path):
    path = tmp_path / "mixed.yaml"
    path.write_text(LINTED)
    result = runner.invoke(app, ["lint", str(path), "--pool-resources", "cpu=lots"])
    assert result.exit_code == 1
    assert result.stderr.startswith("Error: --pool-resources.cpu: 'lots' is not a quantity")
    result = runner.invoke(
        app, ["lint", str(path), "--pool-resources", "pods=3", "--pool-size", "8"]
    )
    assert result.exit_code == 1
    assert "the pool's resources say pods=3, but it has 8 executors" in result.stderr


def test_a_pool_of_resources_no_stage_requests_is_refused():
    # k8s-batch without -o requests=true: no stage requests anything, so the pool would
    # count pods only while its caption and columns spoke of CPUs
    args = ["simulate", "-w", "k8s-batch", "-k", "330", "--resources", "cpu=24,memory=96Gi"]
    result = runner.invoke(app, args)
    assert result.exit_code == 1
    assert result.stderr.startswith(
        "Error: the pool counts cpu and memory but no stage of k8s-batch requests any (they "
        "request nothing), so it would count its pods only; "
    ), result.stderr
    assert "-o requests=true" in result.stderr
    assert runner.invoke(app, [*args, "-o", "requests=true", "--jobs-count", "5"]).exit_code == 0


def test_a_stage_no_node_holds_names_each_node_shape_once(workflows):
    # 10 pods over 3 nodes: one of 4 pods, two of 3; shapes apart by "; ", not ", "
    args = ["simulate", "-w", "file", "--file", workflows, "-k", "10", "--nodes", "3"]
    result = runner.invoke(app, [*args, "--resources", "cpu=1,memory=32Gi"])
    assert result.exit_code == 1
    assert (
        "(each node's resources: cpu=1,memory=32Gi,pods=3 (2 nodes); "
        "cpu=1,memory=32Gi,pods=4 (1 node))" in result.stderr
    ), result.stderr


def test_fewer_pods_than_nodes_is_refused(workflows):
    # -k is the pods of all the nodes: 2 over 3 nodes would leave one node unusable
    args = ["simulate", "-w", "file", "--file", workflows, "--nodes", "3"]
    result = runner.invoke(app, [*args, "-k", "2", "--resources", "cpu=4,memory=32Gi"])
    assert result.exit_code == 1
    assert result.stderr.startswith(
        "Error: --nodes 3 share the pool's 2 pods (-k), so a node would hold none; "
    ), result.stderr
    assert "-k 330" in result.stderr
    fine = runner.invoke(app, [*args, "-k", "3", "--resources", "cpu=4,memory=32Gi"])
    assert fine.exit_code == 0, fine.output


def test_a_stages_resources_field_is_named_as_in_the_file_with_resources_given(tmp_path):
    # it read stages[0].--resources: the pool's flag was put for the stage's field (issue 60, 19)
    path = tmp_path / "w.yaml"
    path.write_text(WORKFLOWS.replace("cpu: 0.25", "cpu: abc"))
    args = ["simulate", "-w", "file", "--file", str(path), "--resources", "cpu=4"]
    result = runner.invoke(app, args)
    assert result.exit_code == 1
    assert "(workflow #1): stages[0].resources: cpu: 'abc' is not a quantity" in result.stderr


def test_nodes_past_a_thousand_are_simulated(workflows):
    # --nodes was refused past 1000 while each placement scored every node (issue 60, 20);
    # placement reads the nodes' shapes now (sim/nodeset.py), so only -k bounds them
    args = ["simulate", "-w", "file", "--file", workflows, "--resources", "cpu=8"]
    result = runner.invoke(app, [*args, "--nodes", "1001", "-k", "1001", "--json"])
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["unfinished"] == 0
