"""Issue 68: queues on a pool that follows its nodes borrow CPU and memory as on a `resources`
pool. The real kopf operator against the test API server with three nodes of 8 CPU and 32 GiB
(tests/nodes_e2e.py's cluster), its kube-scheduler binding pods by their requests, and the
simulated kubelet; the clock and the kubelet `SPEED` times faster than the wall.

The pool (``--pool-nodes ''``: every node) has three queues of 8 CPU and 32 GiB each; team
``a`` floods workflows whose tasks want 16 CPU at once while the other queues are empty: it
borrows their idle CPU. It held 8 of 24 CPU when the admission took the pool's CPU as 0 (it
was built before the nodes were read, and never told them)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest

from idlegate.api.queueing import QueueFile
from idlegate.sim.queues import queues_from
from idlegate.sim.resources import parse_quantity
from tests.clocks import ScaledClock
from tests.e2e import DWF, SPEED, new_namespace, running_operator, stage, wait, workflow
from tests.k8s.apiserver import NODES, PODS
from tests.k8s.harness import ApiServer, serving_crd
from tests.k8s.kubelet import SimKubelet
from tests.k8s.scheduler import node
from tests.nodes_e2e import NODE_COUNT, NODE_CPU, NODE_MEMORY, POOL_PODS

# On an accelerated wall clock, not fake loop time: the real operator, the API emulator
# and the simulated kubelet run in threads of their own; why: tests/e2e.py, at SPEED.

pytest.importorskip("kopf", reason="the operator extra (kopf) is not installed")

FLOOD = 6
TASKS, CPU, MEMORY = 2, "2", "2Gi"
"""Each flooding workflow: one stage of 2 tasks of 2 CPU and 2 GiB (24 CPU for the flood)."""
QUOTA = {"cpu": "8", "memory": "32Gi"}


@pytest.fixture(scope="module")
def api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ApiServer]:
    yield from serving_crd(tmp_path_factory.mktemp("k8s"))


class CpuPeak:
    """The most CPU the released pods of a namespace request at once, at each pod write."""

    def __init__(self, api: ApiServer, namespace: str) -> None:
        self.namespace, self.peak = namespace, 0
        self.held: dict[str, int] = {}
        self._lock = threading.Lock()
        self.close = api.call(lambda: api.emulator.subscribe(self._on_event))

    def _on_event(self, res: Any, etype: str, obj: dict[str, Any]) -> None:
        meta, spec = obj.get("metadata") or {}, obj.get("spec") or {}
        if res != PODS or meta.get("namespace") != self.namespace:
            return
        holds = (
            etype != "DELETED"
            and not spec.get("schedulingGates")
            and (obj.get("status") or {}).get("phase") not in ("Succeeded", "Failed")
        )
        cpu = sum(
            parse_quantity(c["resources"]["requests"]["cpu"]) for c in spec.get("containers", [])
        )
        with self._lock:
            self.held.pop(meta["name"], None)
            if holds:
                self.held[meta["name"]] = cpu
            self.peak = max(self.peak, sum(self.held.values()))


def test_a_queue_on_a_node_pool_borrows_the_idle_cpu_of_the_others(api: ApiServer) -> None:
    flood, other = new_namespace(api, "quota-a"), new_namespace(api, "quota-b")
    for i in range(NODE_COUNT):
        if api.get(NODES, None, f"node-{i}") is None:
            api.create(NODES, node(f"node-{i}", cpu=NODE_CPU, memory=NODE_MEMORY))
    raw = [
        {"name": "a", "namespaces": [flood], "nominal": QUOTA},
        {"name": "b", "namespaces": [other], "nominal": QUOTA},
        {"name": "c", "nominal": QUOTA},
    ]
    peak = CpuPeak(api, flood)
    container = {
        "name": "task",
        "image": "busybox",
        "resources": {"requests": {"cpu": CPU, "memory": MEMORY}},
    }
    template = {"spec": {"containers": [container]}}
    with (
        SimKubelet(api, flood, time_factor=1 / SPEED),
        running_operator(
            api,
            flood,
            pool=POOL_PODS,
            clock=ScaledClock(SPEED),
            policy="fifo",
            pool_nodes="",
            queues=QueueFile(queues_from(raw)),
            namespaces=(flood, other),
        ),
    ):
        names = [f"flood-{i}" for i in range(FLOOD)]
        for name in names:
            body = workflow(name, stage("s", TASKS, 60.0, template=template))
            api.create(DWF, body, flood)

        def done() -> bool:
            phases = [(api.get(DWF, flood, n) or {}).get("status", {}).get("phase") for n in names]
            return all(p == "Succeeded" for p in phases)

        wait(done, 60, "the flood to finish")
    peak.close()
    # its nominal quota is 8 CPU; the others' idle 16 are lent (24 at most: the nodes')
    assert peak.peak > parse_quantity(QUOTA["cpu"]), peak.peak
