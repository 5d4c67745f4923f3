"""What a task's worker pods request, read by the Airflow mapping from its task instances'
`executor_config` pod override (idlegate.sim.airflow.requests), as Airflow's REST API
renders it: Python's text of the dict, the pod as the Kubernetes client's to_dict()."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from typer.testing import CliRunner

from idlegate.cli import app
from idlegate.sim.airflow import AirflowRefusal, AirflowRefusalReason, map_dag
from idlegate.sim.dag import Dag
from idlegate.sim.resources import ResourceVector
from tests.test_airflow_mapping import export, run, task, ti

runner = CliRunner()


def container(name: str = "base", requests: Any = None, limits: Any = None) -> dict[str, Any]:
    """A container as V1Container.to_dict() writes it (every field, None when unset)."""
    resources = {"claims": None, "limits": limits, "requests": requests}
    return {"args": None, "image": None, "name": name, "resources": resources, "env": None}


def override(*containers: dict[str, Any], init: list[dict[str, Any]] | None = None) -> str:
    """The API's `executor_config` of a task with this pod override: str() of the dict."""
    spec = {"containers": list(containers), "init_containers": init, "overhead": None}
    pod = {"api_version": None, "kind": None, "metadata": None, "spec": spec, "status": None}
    return str({"pod_override": pod})


def demands(obj: dict[str, Any], **more: Any) -> dict[str, str]:
    return {s.task_id: s.demand.format() for s in map_dag(obj, **more).stages}


def test_a_pod_override_sizes_the_tasks_stage():
    sized = override(container(requests={"cpu": "2", "memory": "4Gi"}))
    gpu = override(container(limits={"nvidia.com/gpu": "1"}))  # a limit stands in
    init = override(
        container(requests={"cpu": "500m"}),
        init=[container("fetch", requests={"cpu": "1", "memory": "8Gi"})],
    )
    obj = export(
        task("extract", "train"),
        task("train", "report"),
        task("report", "notify"),
        task("notify"),
        task_instances=[
            ti("extract", executor_config=sized),
            ti("train", executor_config=gpu),
            ti("report", executor_config=init),
            ti("notify", executor_config="{}"),
        ],
        dag_runs=[run("r1", "2026-01-01T00:00:00Z", "2026-01-01T00:00:01Z", "2026-01-01T00:01Z")],
    )
    want = {
        "extract": "cpu=2,memory=4Gi",
        "train": "nvidia.com/gpu=1",
        "report": "cpu=1,memory=8Gi",  # an init container sets the floor
        "notify": "none",
    }
    assert demands(obj) == want
    assert demands(obj, run={"dag_run_id": "r1", "state": "success"}) == want
    spec = map_dag(obj).spec()
    assert spec.stages[0].resources == {"cpu": "2", "memory": "4Gi"}
    assert Dag.from_spec(spec).demands[1] == ResourceVector.parse("nvidia.com/gpu=1")


def test_a_run_without_its_own_instances_takes_the_latest_override_of_the_export():
    small = override(container(requests={"cpu": "1"}))
    large = override(container(requests={"cpu": "4"}))
    obj = export(
        task("work"),
        task_instances=[
            ti("work", run="r1", executor_config=small),
            ti("work", run="r2", executor_config=large),
        ],
    )
    assert demands(obj) == {"work": "cpu=4"}
    assert demands(obj, run={"dag_run_id": "r1", "state": "success"}) == {"work": "cpu=1"}
    assert demands(obj, run={"dag_run_id": "r3", "state": "running"}) == {"work": "cpu=4"}


def test_an_executor_config_that_is_no_literal_is_noted_not_read():
    unreadable = "{'pod_override': <kubernetes.client.models.v1_pod.V1Pod object at 0x7f>}"
    obj = export(task("work"), task_instances=[ti("work", executor_config=unreadable)])
    job = map_dag(obj)
    assert job.stages[0].demand == ResourceVector()
    assert any("executor_config is not a literal" in n for n in job.notes)


def test_a_request_that_is_no_quantity_refuses_the_dag_with_its_task():
    bad = override(container(requests={"cpu": "lots"}))
    with pytest.raises(AirflowRefusal) as found:
        map_dag(export(task("work"), task_instances=[ti("work", executor_config=bad)]))
    assert found.value.reason is AirflowRefusalReason.INVALID
    assert re.search(r"task 'work'.*'lots' is not a quantity", str(found.value))


def test_lint_says_which_airflow_task_can_never_fit_the_pool(tmp_path):
    big = override(container(requests={"cpu": "6"}))
    obj = export(
        task("prep", "fit"),
        task("fit"),
        task_instances=[ti("fit", executor_config=big)],
    )
    path = tmp_path / "etl.json"
    path.write_text(json.dumps(obj))
    result = runner.invoke(app, ["lint", str(path), "--pool-resources", "cpu=8"])
    assert result.exit_code == 0, result.output
    assert "fit: 1 task x 60 s (prior), priority 1, each cpu=6 after prep" in result.stdout
    result = runner.invoke(app, ["lint", str(path), "--pool-resources", "cpu=4"])
    assert result.exit_code == 1, result.output
    assert re.search(
        r"stage 'fit' of DAG etl needs cpu=6 at once, more cpu than the pool has .*"
        r"\(Airflow task 'fit'\)",
        result.stdout,
    )
