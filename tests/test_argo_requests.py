"""What an Argo template's pods request (idlegate.sim.argo.requests), read into each stage's
demand by the mapping: containers, scripts, container sets, sidecars, init containers,
pod-level resources and podSpecPatch, on hand-written manifests and Argo's examples."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from typer.testing import CliRunner

from idlegate.cli import app
from idlegate.sim.argo import ArgoRefusal, ArgoRefusalReason, map_workflow
from idlegate.sim.dag import Dag
from idlegate.sim.resources import ResourceVector
from tests.argo_data import example

runner = CliRunner()


def workflow(*templates: dict[str, Any], **spec: Any) -> dict[str, Any]:
    steps = [[{"name": t["name"], "template": t["name"]}] for t in templates]
    return {
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "Workflow",
        "metadata": {"name": "sized"},
        "spec": {
            "entrypoint": "main",
            "templates": [{"name": "main", "steps": steps}, *templates],
            **spec,
        },
    }


def sized(requests: dict[str, Any] | None = None, **more: Any) -> dict[str, Any]:
    resources = {} if requests is None else {"resources": {"requests": requests}}
    return {"image": "busybox", **resources, **more}


def demands(obj: dict[str, Any]) -> dict[str, str]:
    return {s.name: s.demand.format() for s in map_workflow(obj).stages}


def test_a_container_or_script_templates_requests_are_its_stages_demand():
    obj = workflow(
        {"name": "c", "container": sized({"cpu": "500m", "memory": "1Gi"})},
        {"name": "s", "script": sized({"cpu": 2}, source="echo")},
        {"name": "limit", "container": {"resources": {"limits": {"nvidia.com/gpu": 1}}}},
        {"name": "plain", "container": sized()},
    )
    assert demands(obj) == {
        "c": "cpu=500m,memory=1Gi",
        "s": "cpu=2",
        "limit": "nvidia.com/gpu=1",  # a limit without a request requests the limit
        "plain": "none",
    }
    spec = map_workflow(obj).spec()
    assert [s.resources for s in spec.stages] == [
        {"cpu": "500m", "memory": "1Gi"},
        {"cpu": "2"},
        {"nvidia.com/gpu": "1"},
        None,
    ]
    dag = Dag.from_spec(spec)
    assert dag.demands[0] == ResourceVector.parse("cpu=500m,memory=1Gi")


def test_sidecars_add_and_init_containers_set_a_floor():
    template = {
        "name": "t",
        "container": sized({"cpu": "1", "memory": "1Gi"}),
        "sidecars": [{"name": "proxy", **sized({"cpu": "250m"})}],
        "initContainers": [{"name": "fetch", **sized({"cpu": "100m", "memory": "4Gi"})}],
    }
    assert demands(workflow(template)) == {"t": "cpu=1250m,memory=4Gi"}
    sets = {
        "name": "set",
        "containerSet": {"containers": [{"name": "a", **sized({"cpu": 1})}, {"name": "b"}]},
    }
    sets["containerSet"]["containers"][1].update(sized({"cpu": 3}))
    assert demands(workflow(sets)) == {"set": "cpu=4"}


def test_pod_level_resources_come_from_the_template_else_the_workflow():
    obj = workflow(
        {"name": "small", "container": sized({"cpu": "4"})},
        {"name": "large", "container": sized(), "podResources": {"requests": {"cpu": "2"}}},
        podResources={"requests": {"cpu": "100m", "memory": "64Mi"}},
    )
    # pod-level resources replace the containers' sum for the resources they name
    assert demands(obj) == {"small": "cpu=100m,memory=64Mi", "large": "cpu=2"}


def test_pod_spec_patches_merge_by_container_name_and_resolve_parameters():
    obj = workflow(
        {
            "name": "t",
            "container": sized({"cpu": "1", "memory": "1Gi"}),
            "inputs": {"parameters": [{"name": "cpu", "value": "3"}]},
            "podSpecPatch": '{"containers": [{"name": "main", "resources": '
            '{"requests": {"cpu": "{{inputs.parameters.cpu}}"}}}]}',
        },
        podSpecPatch="containers:\n  - name: main\n    resources:\n      requests:\n"
        '        memory: "{{workflow.parameters.mem}}"\n        cpu: "2"\n',
        arguments={"parameters": [{"name": "mem", "value": "8Gi"}]},
    )
    # the workflow's patch first, then the template's (which wins on cpu)
    assert demands(obj) == {"t": "cpu=3,memory=8Gi"}


def test_a_request_known_only_as_the_workflow_runs_is_noted_not_guessed():
    obj = workflow(
        {
            "name": "t",
            "container": sized({"cpu": "{{steps.size.outputs.result}}"}),
            "inputs": {"parameters": [{"name": "x"}]},
        }
    )
    job = map_workflow(obj)
    assert job.stages[0].demand == ResourceVector()
    assert any("known only as the workflow runs" in n for n in job.notes)
    # an argument that names a step's output does not hide the request
    obj = workflow({"name": "t", "container": sized({"cpu": "1"}, args=["{{steps.a.outputs}}"])})
    assert demands(obj) == {"t": "cpu=1"}


@pytest.mark.parametrize(
    ("template", "path"),
    [
        ({"container": sized({"cpu": "lots"})}, "container.resources.requests.cpu"),
        ({"script": sized(), "sidecars": [sized({"cpu": "lots"})]}, "sidecars[0].resources"),
        ({"container": sized(), "initContainers": [sized({"cpu": "lots"})]}, "initContainers[0]"),
        ({"containerSet": {"containers": [sized(), sized({"cpu": "lots"})]}}, "containerSet."),
        ({"container": sized(), "podResources": {"limits": {"cpu": "lots"}}}, "podResources.lim"),
    ],
)
def test_a_request_that_is_no_quantity_refuses_the_workflow_with_its_path(template, path):
    with pytest.raises(ArgoRefusal) as found:
        map_workflow(workflow({"name": "t", **template}))
    assert found.value.reason is ArgoRefusalReason.INVALID
    said = str(found.value)
    assert said.startswith(f"Workflow sized: template 't': {path}"), said
    assert "'lots' is not a quantity" in said


def test_a_loops_stage_carries_its_templates_demand_once_per_pod():
    obj = workflow({"name": "w", "container": sized({"cpu": "2"})})
    obj["spec"]["templates"][0]["steps"][0][0]["withItems"] = [1, 2, 3]
    stage = map_workflow(obj).stages[0]
    assert (stage.tasks, stage.demand.format()) == (3, "cpu=2")


def test_argos_pod_spec_patch_and_pod_resources_examples():
    assert demands(example("pod-spec-patch-wf-tmpl.yaml")) == {"main": "cpu=100m,memory=100Mi"}
    assert demands(example("dns-config.yaml")) == {"main": "cpu=100m,memory=32Mi"}  # limits
    assert demands(example("pod-resources-template-override.yaml")) == {
        "small": "cpu=1,memory=512Mi",
        "large": "cpu=2,memory=1Gi",
    }


ARGO_LINTED = """\
apiVersion: argoproj.io/v1alpha1
kind: Workflow
metadata: {name: sized}
spec:
  entrypoint: main
  templates:
    - name: main
      dag:
        tasks:
          - {name: prep, template: small}
          - {name: fit, template: big, depends: prep}
    - name: small
      container: {image: busybox, resources: {requests: {cpu: "1"}}}
    - name: big
      container: {image: busybox, resources: {requests: {cpu: "6", nvidia.com/gpu: 1}}}
"""


@pytest.mark.parametrize(
    ("flags", "problem"),
    [
        (["--pool-resources", "cpu=8,nvidia.com/gpu=1"], None),
        (["--pool-size", "2"], None),  # a pods-only pool: requests are not counted
        (
            ["--pool-resources", "cpu=4,nvidia.com/gpu=1"],
            r"stage 'fit' of Workflow sized needs cpu=6,nvidia.com/gpu=1 at once, more cpu "
            r"than the pool has .* \(Argo's node \.fit, template 'big'\)",
        ),
        (["--pool-resources", "cpu=8"], None),  # a pool counts only what it names
    ],
)
def test_lint_says_which_argo_node_can_never_fit_the_pool(tmp_path, flags, problem):
    path = tmp_path / "sized.yaml"
    path.write_text(ARGO_LINTED)
    result = runner.invoke(app, ["lint", str(path), *flags])
    if problem is None:
        assert result.exit_code == 0, result.output
        assert "fit: 1 task x 60 s (prior), each cpu=6,nvidia.com/gpu=1 after prep" in result.stdout
        found = json.loads(runner.invoke(app, ["lint", str(path), "--json", *flags]).stdout)
        assert found["argo"][0]["stages"][1]["resources"] == {"cpu": "6", "nvidia.com/gpu": "1"}
    else:
        assert result.exit_code == 1, result.output
        assert re.search(problem, result.stdout), result.stdout
        assert "'prep'" not in result.stdout  # the stage that fits is not said


def test_a_recorded_argo_run_keeps_its_demands_in_the_history_and_its_replay(tmp_path):
    from idlegate.sim.history import argo_history, load_history, write_history
    from tests.argo_data import recorded

    doc = recorded("dag-disable-fail-fast.yaml")
    for template in doc["spec"]["templates"]:
        if "container" in template:
            template["container"]["resources"] = {"requests": {"cpu": "3", "memory": "1Gi"}}
    record = argo_history(doc, name="ns/dag")
    assert record is not None
    (back,) = load_history(write_history(tmp_path / "h.jsonl", [record]))
    assert {s.name: s.resources for s in back.spec.stages}["b"] == {"cpu": "3", "memory": "1Gi"}
    args = ["simulate", "-w", "file", "--file", str(tmp_path / "h.jsonl"), "-k", "8", "--json"]
    pods = runner.invoke(app, args)
    sized = runner.invoke(app, [*args, "--resources", "cpu=4,memory=8Gi"])
    assert pods.exit_code == sized.exit_code == 0, sized.output
    # b and the others run side by side on 8 pods; on 4 CPUs one 3-CPU pod at a time
    assert json.loads(sized.stdout)["avg_jct"] > json.loads(pods.stdout)["avg_jct"]
