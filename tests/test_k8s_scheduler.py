"""The Nodes of the test API server and its kube-scheduler (tests/k8s/scheduler.py): pods
placed by their requests as the kube-scheduler places them, a pod that fits no node left
Pending and Unschedulable and tried again, in priority then creation order, once room
frees; and nothing of it while no Node exists."""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e import wait
from tests.k8s.harness import ApiServer, serving_crd
from tests.k8s.kubelet import SimKubelet
from tests.k8s.scheduler import node

# On the wall clock, waiting on what the emulator holds: the scheduler acts in the API
# server's loop, a thread of its own (tests/e2e.py, at SPEED).

NS = "sched"


@pytest.fixture()
def api(tmp_path: Path) -> Iterator[ApiServer]:
    """A server of its own per test: its Nodes change how every pod is run."""
    yield from serving_crd(tmp_path)


def pod(
    name: str, cpu: str = "1", memory: str = "1Gi", *, gated: bool = False, **spec: Any
) -> dict[str, Any]:
    container = {
        "name": "main",
        "image": "busybox",
        "resources": {"requests": {"cpu": cpu, "memory": memory}},
    }
    body: dict[str, Any] = {"metadata": {"name": name}, "spec": {"containers": [container]}}
    body["spec"].update(spec)
    if gated:
        body["spec"]["schedulingGates"] = [{"name": "idlegate.io/release"}]
    return body


def condition(api: ApiServer, name: str) -> dict[str, Any] | None:
    """The pod's PodScheduled condition, None without one."""
    conditions = ((api.get("pods", NS, name) or {}).get("status") or {}).get("conditions")
    return next((c for c in conditions or [] if c["type"] == "PodScheduled"), None)


def bound_to(api: ApiServer, name: str) -> str | None:
    return (api.get("pods", NS, name) or {}).get("spec", {}).get("nodeName")


def wait_bound(api: ApiServer, name: str) -> str:
    return wait(lambda: bound_to(api, name), 30, f"{name} to be bound")


def wait_unschedulable(api: ApiServer, name: str) -> str:
    """The message of the pod's Unschedulable condition, once it has one."""
    found = wait(
        lambda: (c := condition(api, name)) and c["reason"] == "Unschedulable" and c,
        30,
        f"{name} to be unschedulable",
    )
    assert found["status"] == "False" and bound_to(api, name) is None
    assert api.get("pods", NS, name)["status"]["phase"] == "Pending"
    return found["message"]


def end(api: ApiServer, name: str) -> None:
    """End a pod as its kubelet would."""
    api.patch("pods", NS, name, {"status": {"phase": "Succeeded"}}, subresource="status")


def test_pods_go_where_their_requests_fit_and_wait_unschedulable_until_room_frees(
    api: ApiServer,
) -> None:
    for name in ("n1", "n2"):
        api.create("nodes", node(name, cpu="2", memory="4Gi"))
    api.create("pods", pod("a", "1500m"), NS)
    first = wait_bound(api, "a")
    api.create("pods", pod("b", "1500m"), NS)
    # LeastAllocated spreads: b goes to the emptier node
    assert {first, wait_bound(api, "b")} == {"n1", "n2"}
    assert condition(api, "a")["status"] == "True"
    api.create("pods", pod("c", "1"), NS)  # 500m is free on each node: too little
    assert wait_unschedulable(api, "c") == "0/2 nodes are available: 2 Insufficient cpu."
    api.create("pods", pod("d", "500m", "3Gi"), NS)  # fits beside a or b: no queue-blocking
    assert wait_bound(api, "d") in ("n1", "n2")
    api.create("pods", pod("e", "600m", "2Gi"), NS)  # d's node lacks both, the other CPU
    message = wait_unschedulable(api, "e")
    assert message == "0/2 nodes are available: 1 Insufficient memory, 2 Insufficient cpu."
    end(api, "a")
    assert wait_bound(api, "c") == first  # the room a left
    assert condition(api, "c")["status"] == "True"
    api.delete("pods", NS, "d")
    assert wait_bound(api, "e") in ("n1", "n2")


def test_the_effective_request_the_pod_slots_gpus_selectors_and_readiness_filter_nodes(
    api: ApiServer,
) -> None:
    api.create("nodes", node("small", cpu="4", pods=2))
    api.create("nodes", node("gpu", cpu="4", gpus=1, labels={"pool": "gpu"}))
    api.create("nodes", node("down", cpu="64", ready=False))
    # an init container's 3 CPU beside containers of 1: it asks 3, more than 2 pods' room
    init = pod("init", "1")
    init["spec"]["initContainers"] = [
        {"name": "prep", "image": "busybox", "resources": {"requests": {"cpu": "3"}}}
    ]
    api.create("pods", init, NS)
    api.create("pods", pod("big", "3"), NS)
    assert {wait_bound(api, "init"), wait_bound(api, "big")} == {"small", "gpu"}
    gpu_pod = pod("needs-gpu", "100m")
    gpu_pod["spec"]["containers"][0]["resources"]["limits"] = {"nvidia.com/gpu": "1"}
    api.create("pods", gpu_pod, NS)
    assert wait_bound(api, "needs-gpu") == "gpu"
    api.create("pods", pod("tiny", "10m", "1Mi"), NS)  # room for a 2nd pod on small only
    assert wait_bound(api, "tiny") == "small"
    api.create("pods", pod("third", "10m", "1Mi", nodeSelector={"pool": "cpu"}), NS)
    message = wait_unschedulable(api, "third")
    assert message == (
        "0/3 nodes are available: 1 node(s) were unschedulable or not ready, "
        "2 node(s) didn't match Pod's node affinity/selector."
    )
    api.create("pods", pod("fourth", "1", "1Mi"), NS)
    assert wait_unschedulable(api, "fourth") == (
        "0/3 nodes are available: 1 Too many pods, 1 node(s) were unschedulable or not ready, "
        "2 Insufficient cpu."
    )
    # the node recovers (its Ready condition True): what waits goes there
    api.patch(
        "nodes",
        None,
        "down",
        {"status": {"conditions": [{"type": "Ready", "status": "True"}]}},
        subresource="status",
    )
    assert wait_bound(api, "fourth") == "down"


def test_room_goes_in_priority_then_creation_order_without_blocking_on_a_big_pod(
    api: ApiServer,
) -> None:
    api.create("nodes", node("only", cpu="4"))
    api.create("pods", pod("holder", "4"), NS)
    wait_bound(api, "holder")
    for name, cpu, priority in (("old-big", "4", 0), ("old", "2", 0), ("urgent", "2", 10)):
        api.create("pods", pod(name, cpu, priority=priority), NS)
        wait_unschedulable(api, name)
    api.create("pods", pod("young", "2"), NS)
    wait_unschedulable(api, "young")
    end(api, "holder")
    # urgent first (priority), old-big does not fit the 2 CPU left, old before young
    wait_bound(api, "urgent")
    wait_bound(api, "old")
    assert bound_to(api, "old-big") is None and bound_to(api, "young") is None


def test_gated_pods_wait_for_release_and_the_kubelet_runs_only_bound_pods(
    api: ApiServer,
) -> None:
    api.create("nodes", node("n", cpu="1"))
    api.create("pods", pod("gated", "1", gated=True), NS)
    api.create("pods", pod("long", "1"), NS)
    api.create("pods", pod("next", "1"), NS)
    durations = {"long": 1e6, "next": 0.01, "gated": 0.01}
    with SimKubelet(api, NS, durations=lambda p: durations[p["metadata"]["name"]]):
        wait(lambda: api.get("pods", NS, "long")["status"]["phase"] == "Running", 30, "long")
        wait_unschedulable(api, "next")  # never run: no node has room for it
        assert condition(api, "gated") is None  # not in the queue while gated
        api.delete("pods", NS, "long")
        wait(
            lambda: api.get("pods", NS, "next")["status"]["phase"] == "Succeeded",
            30,
            "next to run once long is gone",
        )
        assert bound_to(api, "next") == "n"
        api.patch(
            "pods",
            NS,
            "gated",
            [{"op": "remove", "path": "/spec/schedulingGates"}],
            patch_type="json",
        )
        assert wait_bound(api, "gated") == "n"


def test_without_nodes_nothing_is_bound_and_the_kubelet_runs_pods_at_once(
    api: ApiServer,
) -> None:
    api.create("pods", pod("huge", "1000"), NS)
    with SimKubelet(api, NS, time_factor=0.01):
        wait(
            lambda: api.get("pods", NS, "huge")["status"]["phase"] == "Succeeded",
            30,
            "huge to run",
        )
    final = api.get("pods", NS, "huge")
    assert "nodeName" not in final["spec"] and "conditions" not in final["status"]


def test_nodes_are_listed_and_watched_over_http_and_by_kubectl(api: ApiServer) -> None:
    api.create("nodes", node("n1", cpu="8", gpus=2))
    with urllib.request.urlopen(f"{api.url}/api/v1/nodes", timeout=10) as response:
        listed = json.loads(response.read())
    (item,) = listed["items"]
    assert listed["kind"] == "NodeList" and item["kind"] == "Node"
    assert item["status"]["allocatable"] == {
        "cpu": "8",
        "memory": "32Gi",
        "pods": "110",
        "nvidia.com/gpu": "2",
    }
    url = f"{api.url}/api/v1/nodes?watch=true&timeoutSeconds=1"
    with urllib.request.urlopen(url, timeout=10) as response:
        events = [json.loads(line) for line in response.read().splitlines()]
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in events] == [("ADDED", "n1")]
    assert "n1" in api.kubectl("get", "nodes", "-o", "name").stdout
