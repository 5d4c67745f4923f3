"""The watchdog of every job kind: no gated pod whose job can no longer release it. Each
scenario, once every event of it is delivered, leaves no pod at the gate while the pool
is idle (`stranded`): a DagWorkflow's pods (the operator's own) and an Argo Workflow whose
node Argo skipped. An Airflow DAG run whose branch Airflow skipped is
tests/test_airflow_reads.py's
`test_a_branch_airflow_skipped_leaves_the_job_so_the_task_after_it_runs`, with the other
Airflow scenarios. Fake time, the operator's fakes (tests/operator_fakes.py)."""

from __future__ import annotations

import copy

import pytest

from idlegate.operator.features.argo import ArgoSide
from idlegate.policy import make_scheduler
from idlegate.sim.argo.status import node_id
from tests.argo_data import gated_argo_pod
from tests.operator_fakes import FakeClock, FakeKube, FeatureHost, Harness, stage, stranded


@pytest.mark.asyncio
async def test_dagworkflows_leave_no_pod_gated():
    h = Harness(FakeKube(), FakeClock(), 2, make_scheduler("fifo"))
    await h.submit("one", {"stages": [stage("a", 3, 5.0), stage("b", 2, 5.0, ["a"])]})
    await h.submit("two", {"stages": [stage("a", 2, 3.0)]})
    await h.run_to_completion()
    assert stranded(h) == [] and h.kube.pods  # (their pods are there, released and done)


WF = "skips"


def _argo(phases: dict[str, str]) -> dict:
    """Workflow `skips`: a, then b (``when`` false: Argo skips it), then c; its nodes in
    `phases`."""
    tasks = [
        {"name": "a", "template": "pod"},
        {"name": "b", "template": "pod", "dependencies": ["a"], "when": "1 == 2"},
        {"name": "c", "template": "pod", "dependencies": ["b"]},
    ]
    nodes = {WF: {"id": WF, "name": WF, "type": "DAG", "phase": "Running"}}
    for task, phase in phases.items():
        name = f"{WF}.{task}"
        nodes[node_id(WF, name)] = {"id": node_id(WF, name), "name": name, "type": "Pod"}
        nodes[node_id(WF, name)]["phase"] = phase
    return {
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "Workflow",
        "metadata": {"name": WF, "namespace": "default", "uid": "uid-skips"},
        "spec": {
            "entrypoint": "main",
            "templates": [
                {"name": "main", "dag": {"tasks": tasks}},
                {"name": "pod", "container": {"image": "busybox"}},
            ],
        },
        "status": {"phase": "Running", "nodes": nodes},
    }


def _argo_pod(task: str) -> dict:
    return gated_argo_pod(WF, f"{WF}.{task}")


@pytest.mark.asyncio
async def test_an_argo_workflow_whose_node_argo_skipped_leaves_no_pod_gated():
    kube = FakeKube()
    h = Harness(kube, FakeClock(), 2, make_scheduler("fifo"))
    side = ArgoSide(FeatureHost(h))

    async def pod(task: str, phase: str | None = None) -> str:
        body = kube.pods.setdefault(("default", node_id(WF, f"{WF}.{task}")), _argo_pod(task))
        if phase is not None:
            body["status"]["phase"] = phase
        await side.pod_seen(False, copy.deepcopy(body))
        await h.settle()
        return body["metadata"]["name"]

    await side.workflow_seen(False, _argo({"a": "Pending"}))
    a = await pod("a")
    assert stranded(h) == [] and not kube.pods["default", a]["spec"]["schedulingGates"]
    await pod("a", "Succeeded")
    # Argo skips b and creates c's pod; its pod's event may come before the Workflow's
    c = await pod("c")
    await side.workflow_seen(False, _argo({"a": "Succeeded", "b": "Skipped", "c": "Pending"}))
    await h.settle()
    assert stranded(h) == [] and not kube.pods["default", c]["spec"]["schedulingGates"]


@pytest.mark.asyncio
async def test_a_costly_remap_waits_nine_times_its_cost_and_then_maps_the_latest_body(
    monkeypatch,
):
    # Argo writes a Workflow's status at every step, and a map of thousands of steps costs a
    # large part of a second: the next map waits 9x the last one's CPU, then maps the latest
    import idlegate.operator.features.argo as argo

    h = Harness(FakeKube(), FakeClock(), 2, make_scheduler("fifo"))
    side = ArgoSide(FeatureHost(h))
    cpu = iter([0.0, 1.0, 1.0, 1.5, 2.0, 2.005])  # (remaps costing 1 s, 0.5 s, 5 ms)
    monkeypatch.setattr(argo, "thread_time", lambda: next(cpu))
    mapped: list[dict] = []
    real = side._map
    monkeypatch.setattr(side, "_map", lambda body: mapped.append(body) or real(body))
    await side.workflow_seen(False, _argo({"a": "Pending"}))  # admitted: mapped
    await side.workflow_seen(False, _argo({"a": "Running"}))  # remapped, costing 1 s
    assert len(mapped) == 2 and side.next_map[("default", WF)] == h.clock.now() + 9
    latest = _argo({"a": "Succeeded", "b": "Skipped", "c": "Pending"})
    await side.workflow_seen(False, _argo({"a": "Succeeded"}))
    await side.workflow_seen(False, latest)
    assert len(mapped) == 2  # (both wait)
    h.clock.advance(9)
    await h.timers.fire_due(h.clock.now())
    await h.settle()
    assert mapped[2:] == [latest] and side.next_map[("default", WF)] == h.clock.now() + 4.5
    h.clock.advance(4.5)  # a map of a few hundred steps (5 ms) lets the next one go at once
    await side.workflow_seen(False, latest)
    assert len(mapped) == 4 and side.next_map[("default", WF)] == h.clock.now()
