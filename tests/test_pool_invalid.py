"""An ExecutorPool whose new spec cannot run (issue 80, item 7): its Ready condition, a
Warning Event and a log line say what it does (the workflows in it run on under the spec
it ran last; those that come after wait with PoolInvalid), and `idlegate lint` refuses
the file with the operator's sentence, given the nodes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from idlegate.api.lint import lint_paths
from idlegate.api.pool_spec import ExecutorPoolSpec
from tests.test_node_pools import node

pytestmark = pytest.mark.looptime

CPU_QUEUES = [{"name": "a", "nominal": {"cpu": 8}}]
GPU_QUEUES = [{"name": "a", "nominal": {"cpu": 8, "nvidia.com/gpu": 1}}]
WHY = (
    "ExecutorPool 'gpu', on its nodes: queues[0][a].nominal: the pool does not count "
    "nvidia.com/gpu (only cpu, memory, pods), so a quota of it could never be used; remove it"
)


def pool(queues: list[dict[str, Any]]) -> dict[str, Any]:
    return {"size": 10, "policy": "fifo", "nodeSelector": {}, "queues": queues}


@pytest.mark.asyncio
async def test_a_pool_edited_into_one_that_cannot_run_runs_its_workflows_on_and_takes_no_new(
    monkeypatch, caplog
):
    kopf = pytest.importorskip("kopf", reason="the operator extra (kopf) is not installed")
    from idlegate.operator.edge import intake
    from tests.operator_fakes import harness, pool_handler, stage

    h = harness(pool=2)
    sync = pool_handler(h, monkeypatch)
    watch = h.pools.watch
    watch.nodes, watch.pods, watch.read = {"n": [node("n", cpu="8")]}, {}, True
    spec = ExecutorPoolSpec.model_validate(pool(CPU_QUEUES))
    await intake.readmit(h.pools, h.pools.apply("gpu", spec, "uid-gpu"))
    h.pools.nodes_changed()
    chain = [stage("a", resources={"cpu": "1"}), stage("b", deps=("a",), resources={"cpu": "1"})]
    await h.submit("old", {"stages": chain, "pool": "gpu"})
    assert h.released("old") == ["old-a-0"]

    patch = kopf.Patch()
    meta = {"name": "gpu", "uid": "uid-gpu", "generation": 5}
    status = {"observedGeneration": 4}
    body = kopf.Body({"metadata": meta, "spec": pool(GPU_QUEUES), "status": status})
    await sync.fn(body=body, meta=meta, patch=patch)
    await h.settle()
    said = (
        f"{WHY}. The workflows in it run on under the spec it ran last (generation 4); those "
        "that come after wait (PoolInvalid) until its spec is fixed."
    )
    (ready,) = patch["status"]["conditions"]
    assert (ready["status"], ready["reason"], ready["message"]) == ("False", "Invalid", said)
    assert "observedGeneration" not in patch["status"]  # (it still runs generation 4)
    warned = [e for e in h.kube.events if e["involvedObject"]["kind"] == "ExecutorPool"]
    assert [(e["type"], e["reason"], e["message"]) for e in warned] == [
        ("Warning", "Invalid", said)
    ]
    assert said in caplog.text
    await h.submit("new", {"stages": [stage("a", resources={"cpu": "1"})], "pool": "gpu"})
    assert h.released("new") == [] and h.kube.reasons("new")[-1] == "PoolInvalid"
    # another pool's change moves none of gpu's workflows out
    other = ExecutorPoolSpec.model_validate({"size": 1})
    await intake.readmit(h.pools, h.pools.apply("other", other))
    await h.settle()
    await h.finish("old-a-0")  # the running one goes on: its next stage is released
    assert h.released("old") == ["old-b-0"]
    fixed = ExecutorPoolSpec.model_validate(pool(CPU_QUEUES))
    await intake.readmit(h.pools, h.pools.apply("gpu", fixed, "uid-gpu"))
    await h.settle()
    assert h.released("new") == ["new-a-0"]


def node_list(*nodes: dict[str, Any]) -> dict[str, Any]:
    """Nodes as ``kubectl get nodes -o yaml`` prints them."""
    items = [{"apiVersion": "v1", "kind": "Node", **n} for n in nodes]
    return {"apiVersion": "v1", "kind": "List", "items": items}


def test_lint_refuses_a_gpu_quota_on_a_pool_whose_nodes_have_none_given_the_nodes(
    tmp_path: Path,
):
    manifest = {
        "apiVersion": "idlegate.io/v1alpha1",
        "kind": "ExecutorPool",
        "metadata": {"name": "gpu"},
        "spec": pool(GPU_QUEUES),
    }
    path = tmp_path / "pool.yaml"
    path.write_text(yaml.safe_dump(manifest))
    nodes = tmp_path / "nodes.yaml"  # (kubectl get nodes -o yaml)
    nodes.write_text(yaml.safe_dump(node_list(node("n"))))
    report = lint_paths([str(path), str(nodes)])
    assert [p.message for p in report.problems] == [WHY] and report.invalid == 1
    alone = lint_paths([str(path)])  # (the nodes are the cluster's: said, not refused)
    assert alone.ok
    assert [n.message for n in alone.notes] == [
        "queue 'a' of ExecutorPool 'gpu' quotes nvidia.com/gpu, which its nodes must have "
        "(the operator refuses the pool when none of the nodes nodeSelector picks has it): "
        "lint it with the nodes (kubectl get nodes -o yaml) to check"
    ]
    gpu_node = node("g")
    gpu_node["status"]["allocatable"]["nvidia.com/gpu"] = "2"
    nodes.write_text(yaml.safe_dump(node_list(gpu_node)))
    assert lint_paths([str(path), str(nodes)]).ok
