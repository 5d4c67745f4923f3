"""The stand-in for Argo's controller (tests/k8s/argo_controller.py) on the emulated API
server with the real Workflow CRD: the status.nodes it writes have the structure Argo's
controller recorded (controller-testdata), its pods carry Argo's labels, annotations,
owner reference and idlegate's gate, and the mapping reads its nodes."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import pytest
import yaml

from idlegate.sim.argo import map_workflow, node_id
from tests.argo_data import ARGO_DATA, need, recorded
from tests.k8s.apiserver import PODS
from tests.k8s.argo_controller import (
    GATE,
    NODE_ID,
    NODE_NAME,
    WORKFLOW_LABEL,
    WORKFLOWS,
    ArgoController,
)
from tests.k8s.harness import ApiServer
from tests.k8s.kubelet import SimKubelet

NAMESPACE = "argo"


@pytest.fixture(scope="module")
def api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ApiServer]:
    crd = yaml.safe_load(need(ARGO_DATA / "crds" / "argoproj.io_workflows.yaml").read_text())
    with ApiServer(tmp_path_factory.mktemp("argo")) as server:
        server.create("customresourcedefinitions", crd)
        yield server
        server.assert_no_internal_errors()


def _structure(nodes: Mapping[str, Any], root: str) -> dict[str, tuple]:
    """Per node (by name relative to the workflow): type, phase, the names of its children
    and of its boundary, its template."""
    by_id = {n["id"]: n for n in nodes.values()}

    def rel(node_id: str | None) -> str | None:
        return None if node_id is None else by_id[node_id]["name"].removeprefix(root)

    return {
        n["name"].removeprefix(root): (
            n["type"],
            n.get("phase"),
            sorted(rel(c) or "" for c in n.get("children") or []),
            rel(n.get("boundaryID")),
            n.get("templateName") if n["type"] != "Retry" else None,
        )
        for n in nodes.values()
    }


def _release_gates(api: ApiServer) -> Callable[[], None]:
    """Stand in for idlegate: remove the gate of every pod as soon as it appears."""

    def on_event(res: Any, etype: str, pod: dict[str, Any]) -> None:
        if res == PODS and etype == "ADDED" and pod["spec"].get("schedulingGates"):
            meta = pod["metadata"]
            patch = {"spec": {"schedulingGates": None}}
            api.emulator.patch(PODS, meta["namespace"], meta["name"], patch)

    return api.call(api.emulator.subscribe, on_event)


def _run(api: ApiServer, doc: dict[str, Any], fails: Any, release: bool = True) -> dict[str, Any]:
    """Create the recorded workflow (without its status) and run it to its end."""
    finished = threading.Event()

    def watch(res: Any, etype: str, obj: dict[str, Any]) -> None:
        if res == WORKFLOWS and (obj.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
            finished.set()

    body = {k: v for k, v in doc.items() if k != "status"}
    body["metadata"] = {"name": doc["metadata"]["name"]}
    subscriptions = [api.call(api.emulator.subscribe, watch)]
    if release:
        subscriptions.append(_release_gates(api))
    with (
        SimKubelet(api, NAMESPACE, time_factor=0.01, failure=fails),
        ArgoController(api, NAMESPACE),
    ):
        api.create(WORKFLOWS, body, NAMESPACE)
        assert finished.wait(60), "the workflow did not finish"
    for unsubscribe in subscriptions:
        api.call(unsubscribe)
    return api.get(WORKFLOWS, NAMESPACE, doc["metadata"]["name"])


def _template_of(pod: Mapping[str, Any]) -> str:
    return pod["metadata"]["annotations"][NODE_NAME].split(".")[-1]


def test_a_dag_with_retries_and_a_failure_records_what_argo_recorded(api):
    doc = recorded("dag-disable-fail-fast.yaml")
    # C fails on each attempt (exit 2), everything else succeeds, as in the recording
    run = _run(api, doc, lambda pod: 2 if _template_of(pod).startswith("C(") else 0)
    root = doc["metadata"]["name"]
    assert _structure(run["status"]["nodes"], root) == _structure(doc["status"]["nodes"], root)
    assert run["status"]["phase"] == doc["status"]["phase"] == "Failed"


def test_retries_until_an_attempt_succeeds_as_recorded(api):
    doc = recorded("dag_retry_succeeded.yaml")
    run = _run(api, doc, lambda pod: 1 if _template_of(pod) in ("step1(0)", "step1(1)") else 0)
    root = doc["metadata"]["name"]
    mine = _structure(run["status"]["nodes"], root)
    theirs = _structure(doc["status"]["nodes"], root)
    theirs[""] = (*theirs[""][:1], "Succeeded", *theirs[""][2:])  # recorded before it ended
    assert mine == theirs


def test_pods_carry_argos_labels_annotations_owner_and_the_gate(api):
    doc = recorded("dag-loop.yaml")
    doc["metadata"] = {"name": "loops-gated"}
    selector = f"{WORKFLOW_LABEL}=loops-gated"
    created = threading.Event()

    def count(res: Any, etype: str, obj: dict[str, Any]) -> None:
        if res == PODS and len(api.emulator.list(PODS, NAMESPACE, label_selector=selector)) == 2:
            created.set()

    unsubscribe = api.call(api.emulator.subscribe, count)
    # nobody releases: B's two item pods are created gated and stay Pending
    with SimKubelet(api, NAMESPACE, time_factor=0.01), ArgoController(api, NAMESPACE):
        wf = api.create(WORKFLOWS, doc, NAMESPACE)
        assert created.wait(30)
        pods = api.list(PODS, NAMESPACE, label_selector=selector)
    api.call(unsubscribe)
    assert sorted(_template_of(p) for p in pods) == ["B(0:foo)", "B(1:bar)"]
    for pod in pods:
        assert pod["spec"]["schedulingGates"] == [{"name": GATE}]
        assert pod["status"]["phase"] == "Pending"
        assert pod["metadata"]["annotations"][NODE_ID] == pod["metadata"]["name"]
        (owner,) = pod["metadata"]["ownerReferences"]
        assert (owner["kind"], owner["uid"], owner["controller"]) == (
            "Workflow",
            wf["metadata"]["uid"],
            True,
        )
    # the mapping reads the stand-in's nodes: B's items, C still to come
    job = map_workflow(api.get(WORKFLOWS, NAMESPACE, "loops-gated"))
    assert {s.name: s.tasks for s in job.stages} == {"b": 2, "c": 2}


def test_parallelism_holds_back_pods_while_that_many_have_not_ended(api):
    tasks = [{"name": "x", "template": "p", "withItems": list(range(5))}]
    doc = {
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "Workflow",
        "metadata": {"name": "wide"},
        "spec": {
            "entrypoint": "main",
            "parallelism": 2,
            "templates": [
                {"name": "main", "dag": {"tasks": tasks}},
                {"name": "p", "container": {"image": "busybox"}},
            ],
        },
    }
    most = []

    def alive(res: Any, etype: str, obj: dict[str, Any]) -> None:
        if res == PODS:
            pods = api.emulator.list(PODS, NAMESPACE, label_selector=f"{WORKFLOW_LABEL}=wide")
            ended = ("Succeeded", "Failed")
            most.append(sum((p.get("status") or {}).get("phase") not in ended for p in pods))

    unsubscribe = api.call(api.emulator.subscribe, alive)
    run = _run(api, doc, lambda pod: 0)
    api.call(unsubscribe)
    assert run["status"]["phase"] == "Succeeded"
    assert len(api.list(PODS, NAMESPACE, label_selector=f"{WORKFLOW_LABEL}=wide")) == 5
    assert max(most) == 2


class _Spy:
    """The emulator, recording the pods the controller reads and the Workflow patches it
    sends."""

    def __init__(self, emulator: Any) -> None:
        self._emulator, self.read, self.patches = emulator, [], []

    def __getattr__(self, name: str) -> Any:
        return getattr(self._emulator, name)

    def get(self, res: Any, namespace: str, name: str) -> Any:
        if res == PODS:
            self.read.append(name)
        return self._emulator.get(res, namespace, name)

    def live(self, res: Any, namespace: str, name: str) -> Any:
        if res == PODS:
            self.read.append(name)
        return self._emulator.live(res, namespace, name)

    def patch(self, res: Any, namespace: str, name: str, patch: Any, **options: Any) -> Any:
        if res == WORKFLOWS:
            self.patches.append(patch)
        return self._emulator.patch(res, namespace, name, patch, **options)


def test_a_pods_end_costs_the_nodes_it_changes_not_every_node(api):
    # ten tasks that ended and one running (a0), b after a0: a0's end must read a0's and
    # b's pods only and write a0 (ended, linked to b) and b (new), not the eleven others
    wide = [{"name": f"a{i}", "template": "p"} for i in range(10)]
    tasks = [*wide, {"name": "b", "template": "p", "dependencies": ["a0"]}]
    doc = {
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "Workflow",
        "metadata": {"name": "incremental"},
        "spec": {
            "entrypoint": "main",
            "templates": [
                {"name": "main", "dag": {"tasks": tasks}},
                {"name": "p", "container": {"image": "busybox"}},
            ],
        },
    }
    ids = {t["name"]: node_id("incremental", f"incremental.{t['name']}") for t in tasks}
    ended = {n: threading.Event() for n in ("a1-a9", "b")}
    seen: list[tuple[list[str], list[Any]]] = []
    controller = ArgoController(api, NAMESPACE)
    spy = controller.emulator = _Spy(api.emulator)

    def watch(res: Any, etype: str, obj: dict[str, Any]) -> None:
        if res != WORKFLOWS or obj["metadata"]["name"] != "incremental":
            return
        nodes = (obj.get("status") or {}).get("nodes") or {}
        phases = [(nodes.get(ids[f"a{i}"]) or {}).get("phase") for i in range(1, 10)]
        if phases == ["Succeeded"] * 9:
            ended["a1-a9"].set()
        if ids["b"] in nodes and not ended["b"].is_set():
            seen.append((list(spy.read), list(spy.patches)))
            ended["b"].set()

    def end(name: str) -> None:
        status = {"phase": "Succeeded"}
        api.emulator.patch(PODS, NAMESPACE, ids[name], {"status": status}, subresource="status")

    unsubscribe = api.call(api.emulator.subscribe, watch)
    with controller:  # no kubelet: the test ends the pods
        api.create(WORKFLOWS, doc, NAMESPACE)
        for i in range(1, 10):
            api.call(lambda i=i: end(f"a{i}"))
        assert ended["a1-a9"].wait(30)
        api.call(lambda: (spy.read.clear(), spy.patches.clear(), end("a0")))
        assert ended["b"].wait(30)
    api.call(unsubscribe)
    ((read, patches),) = seen
    assert set(read) <= {ids["a0"], ids["b"]}
    assert [sorted(p["status"]["nodes"]) for p in patches] == [sorted([ids["a0"], ids["b"]])]
