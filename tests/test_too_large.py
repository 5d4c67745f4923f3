"""A stage that can never fit its pool, on every route into the operator (issue 52's bad
input): an Argo Workflow or an Airflow DAG run on a pool of resources is not scheduled, its
pods left to its controller with a Warning that says which node or task asks what, and a
metric; no pod stays gated, nothing raises out of the handlers. Fake time, the operator's
fakes (tests/operator_fakes.py)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from idlegate.operator.features.argo import ArgoSide
from idlegate.policy import make_scheduler
from idlegate.sim.argo.status import node_id
from tests.airflow_data import session
from tests.argo_data import gated_argo_pod
from tests.argo_workflows import argo
from tests.operator_fakes import FakeClock, FakeKube, FeatureHost, Harness, stranded
from tests.test_airflow_live import LIVE, MAPPING, with_live_run
from tests.test_airflow_operator import POLL, _advance, _instances_key, _see, airflow, worker_pod
from tests.test_airflow_requests import container, override

WF = "etl"


def _argo(cpu: str = "2") -> dict[str, Any]:
    """Workflow `etl`: a (template small), then b (template big, `cpu` a pod)."""
    tasks = [
        {"name": "a", "template": "small"},
        {"name": "b", "template": "big", "dependencies": ["a"]},
    ]
    sized = [("small", "500m"), ("big", cpu)]
    pods = (
        {"name": n, "container": {"image": "x", "resources": {"requests": {"cpu": c}}}}
        for n, c in sized
    )
    doc = argo(WF, {"dag": {"tasks": tasks}}, *pods)
    doc["metadata"].update(namespace="default", uid="uid-etl")
    return doc | {"status": {"phase": "Running"}}


def _gated(kube: FakeKube) -> list[str]:
    return sorted(n for (_, n), p in kube.pods.items() if p["spec"].get("schedulingGates"))


async def _argo_side() -> tuple[Harness, ArgoSide]:
    h = Harness(FakeKube(), FakeClock(), 2, make_scheduler("fifo"), pool_resources="cpu=1")
    return h, ArgoSide(FeatureHost(h))


async def _pod(h: Harness, side: ArgoSide, task: str, phase: str | None = None) -> str:
    key = ("default", node_id(WF, f"{WF}.{task}"))
    body = h.kube.pods.setdefault(key, gated_argo_pod(WF, f"{WF}.{task}"))
    if phase is not None:
        body["status"]["phase"] = phase
    await side.pod_seen(False, copy.deepcopy(body))
    await h.settle()
    return key[1]


def _said(h: Harness, reason: str) -> list[str]:
    return [e["message"] for e in h.kube.events if e["reason"] == reason]


@pytest.mark.asyncio
async def test_an_argo_workflow_whose_pod_never_fits_the_pool_is_left_to_argo():
    h, side = await _argo_side()
    await _pod(h, side, "a")
    await side.workflow_seen(False, _argo())  # (raised DemandTooLargeError out of here)
    await h.settle()
    assert _gated(h.kube) == [] and WF not in {k[1] for k in side.held}
    (said,) = _said(h, "NotScheduled")
    assert "stage 'b' of default/etl needs cpu=2 at once" in said
    assert "(its resources: cpu=1)" in said and "(Argo's node .b, template 'big')" in said
    assert h.metrics.value("idlegate_workflows_too_large_total", kind="argo") == 1
    # its pods to come are released as Argo creates them; its next events change nothing
    await _pod(h, side, "a", "Succeeded")
    await _pod(h, side, "b")
    await side.workflow_seen(False, _argo())
    await h.settle()
    assert _gated(h.kube) == [] and stranded(h) == [] and len(_said(h, "NotScheduled")) == 1


@pytest.mark.asyncio
async def test_an_argo_workflow_that_maps_too_large_as_it_runs_leaves_the_pool():
    h, side = await _argo_side()
    await side.workflow_seen(False, _argo(cpu="1"))
    a = await _pod(h, side, "a")
    assert _gated(h.kube) == []
    assert h.core.cluster.free_executors == 1
    await side.workflow_seen(False, _argo(cpu="3"))  # (what a resolved parameter asks)
    await h.settle()
    assert not side.held and h.core.cluster.free_executors == 2
    (said,) = _said(h, "NotScheduled")
    assert "needs cpu=3 at once" in said and "template 'big'" in said
    await _pod(h, side, "a", "Succeeded")
    await _pod(h, side, "b")
    assert _gated(h.kube) == [] and a not in _gated(h.kube)


@pytest.mark.asyncio
async def test_an_airflow_run_whose_pod_never_fits_the_pool_is_left_to_airflow(tmp_path):
    answers = with_live_run(session(MAPPING), MAPPING)
    for ti in answers[_instances_key(answers)]["body"]["task_instances"]:
        if ti["task_id"] == "sum_it":
            ti["executor_config"] = override(container(requests={"cpu": "4"}))
    with airflow(answers, tmp_path, pool=2, pool_resources="cpu=2") as (h, side):
        for i in range(2):
            pod = worker_pod("add_one", i)
            h.kube.pods[("default", pod["metadata"]["name"])] = pod
        await _see(h, side, "add-one-0", "add-one-1")  # (raised out of here)
        assert _gated(h.kube) == [] and not side.runs
        (said,) = [e["message"] for e in h.kube.events if e["reason"] == "NotScheduled"][:1]
        assert f"DAG run {MAPPING}/{LIVE}: stage 'sum-it'" in said
        assert "needs cpu=4 at once" in said and "(Airflow task 'sum_it')" in said
        assert h.metrics.value("idlegate_workflows_too_large_total", kind="airflow") == 1
        assert side.released.labels("NotScheduled")._value.get() == 2
        pod = worker_pod("sum_it")  # (its pods to come: left to Airflow as they come)
        h.kube.pods[("default", pod["metadata"]["name"])] = pod
        await _see(h, side, "sum-it")
        assert _gated(h.kube) == []


@pytest.mark.asyncio
async def test_an_airflow_run_read_again_too_large_leaves_the_pool(tmp_path):
    answers = with_live_run(session(MAPPING), MAPPING)
    instances = answers[_instances_key(answers)]["body"]["task_instances"]
    with airflow(answers, tmp_path, pool=1, pool_resources="cpu=2") as (h, side):
        for i in range(2):
            pod = worker_pod("add_one", i)
            h.kube.pods[("default", pod["metadata"]["name"])] = pod
        await _see(h, side, "add-one-0", "add-one-1")
        assert _gated(h.kube) == ["add-one-1"] and side.runs  # (one executor)
        for ti in instances:  # (what the next read of the run shows)
            ti["executor_config"] = override(container(requests={"cpu": "4"}))
        await _advance(h, POLL)
        assert _gated(h.kube) == [] and not side.runs and not h.core.held.get("DagRun")
        assert h.metrics.value("idlegate_workflows_too_large_total", kind="airflow") == 1


@pytest.mark.asyncio
async def test_a_rebuild_meeting_an_argo_workflow_too_large_goes_on_with_the_others():
    h, side = await _argo_side()
    other = copy.deepcopy(_argo(cpu="1"))
    other["metadata"].update(name="fits", uid="uid-fits")
    h.kube.objects[("argoproj.io/v1alpha1", "workflows")] = [_argo(), other]
    await _pod(h, side, "a")  # (created before the restart: the rebuild lists it)
    admit = await side.restore()
    admit()  # (raised out of the rebuild, whose later joins never ran: a crash loop)
    await h.settle()
    assert [k[1] for k in side.held] == ["fits"] and _gated(h.kube) == []
    assert len(_said(h, "NotScheduled")) == 1


# -- a pool on nodes: a stage no node could hold waits, said once ---------------------------


@pytest.mark.asyncio
async def test_a_stage_no_node_of_the_pool_holds_waits_saying_so(monkeypatch):
    from tests.operator_fakes import harness, stage
    from tests.test_node_pools import _Live, following, node

    h = harness(pool=8, pool_nodes="")
    following(h, monkeypatch)
    big = stage("train", resources={"cpu": "12"}, deps=("prep",))
    await h.submit("w", {"stages": [stage("prep", resources={"cpu": "1"}), big]})
    watch = h.pools.watch
    watch.nodes = {n: [node(n, cpu="8")] for n in ("a", "b")}  # (16 CPUs, 8 a node)
    watch.pods = _Live(h.kube)
    h.pools.nodes_changed()
    await h.settle()
    (said,) = [e["message"] for e in h.kube.events if e["reason"] == "NoNodeFits"]
    assert said.startswith(
        "Stage 'train' asks cpu=12 a task, more than any node of the pool has allocatable "
        "(cpu=8,memory=16Gi): it waits until pool 'default' has a node that can hold it"
    )
    await h.finish("w-prep-0", after=10.0)
    h.pools.nodes_changed()
    await h.settle()
    assert h.released("w") == [] and h.kube.reasons("w").count("NoNodeFits") == 1
    waiting = [e["message"] for e in h.kube.events if e["reason"] == "Waiting"]
    assert not [m for m in waiting if "'train'" in m]  # (its reasons would not be the reason)
    watch.nodes["c"] = [node("c", cpu="16")]  # (a node that large joins the pool)
    h.pools.nodes_changed()
    await h.settle()
    assert h.released("w") == ["w-train-0"]


def test_a_gang_the_nodes_cannot_hold_at_once_is_said_as_a_gang():
    from idlegate.sim.cluster import Cluster
    from idlegate.sim.dag import Dag
    from idlegate.sim.resources import ResourceVector
    from idlegate.sim.spec import parse_workflow

    nodes = tuple(ResourceVector.parse("cpu=4,pods=110") for _ in range(2))
    cluster = Cluster(10, resources=ResourceVector.parse("cpu=1m"))
    cluster.set_capacity(ResourceVector.parse("cpu=8"), nodes, nodes)
    gang = {"name": "g", "tasks": 3, "taskDurationSeconds": 1.0, "gang": True}
    spec = parse_workflow({"stages": [{**gang, "resources": {"cpu": "3"}}]})
    (stage,) = cluster.add_job(Dag.from_spec(spec), 0.0).stages
    why = cluster.fits_no_node(stage)
    assert why == (
        "is a gang of 3 tasks of cpu=3, more than the pool's nodes hold at once even empty "
        "(their allocatable: cpu=4)"
    )
    spec = parse_workflow({"stages": [{**gang, "tasks": 2, "resources": {"cpu": "3"}}]})
    (fits,) = cluster.add_job(Dag.from_spec(spec), 0.0).stages
    assert cluster.fits_no_node(fits) is None
