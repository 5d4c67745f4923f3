"""Issue 68: queues on a pool that follows its nodes borrow CPU and memory as on a `resources`
pool. The real kopf operator against the test API server with three nodes of 8 CPU and 32 GiB
(tests/nodes_e2e.py's cluster), its kube-scheduler binding pods by their requests, and the
simulated kubelet; the clock and the kubelet `SPEED` times faster than the wall.

The pool (``--pool-nodes ''``: every node; or ``--pool-resources`` of their allocatable) has
three queues of 8 CPU and 32 GiB each; team ``a`` floods workflows whose tasks want 24 CPU
and 48 GiB at once while the other queues are empty: it borrows their idle CPU and memory,
on both pools alike. On nodes it held 8 of 24 CPU when the admission took the pool's CPU
and memory as 0 (it was built before the nodes were read, and never told them)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest

from idlegate.api.queueing import QueueFile
from idlegate.sim.queues import queues_from
from idlegate.sim.resources import parse_quantity
from tests.clocks import ScaledClock
from tests.e2e import (
    DWF,
    SPEED,
    kubelet_for,
    new_namespace,
    running_operator,
    stage,
    wait,
    workflow,
)
from tests.k8s.apiserver import NODES, PODS
from tests.k8s.harness import ApiServer, serving_crd
from tests.k8s.scheduler import node
from tests.nodes_e2e import NODE_COUNT, NODE_CPU, NODE_MEMORY, POOL_PODS, POOLS

# On an accelerated wall clock, not fake loop time: the real operator, the API emulator
# and the simulated kubelet run in threads of their own; why: tests/e2e.py, at SPEED.

pytest.importorskip("kopf", reason="the operator extra (kopf) is not installed")

FLOOD = 6
TASKS, CPU, MEMORY = 2, "2", "4Gi"
"""Each flooding workflow: one stage of 2 tasks of 2 CPU and 4 GiB: 24 CPU and 48 GiB for
the flood, three times its quota's CPU and 1.5 times its memory, all of the nodes' CPU."""
QUOTA = {"cpu": "8", "memory": "32Gi"}


@pytest.fixture(scope="module")
def api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ApiServer]:
    yield from serving_crd(tmp_path_factory.mktemp("k8s"))


class Peak:
    """The most CPU and memory the released pods of a namespace request at once, at each
    pod write."""

    def __init__(self, api: ApiServer, namespace: str) -> None:
        self.namespace = namespace
        self.held: dict[str, tuple[int, int]] = {}
        self.cpu = self.memory = 0
        self._lock = threading.Lock()
        self.close = api.subscribe(self._on_event)

    def _on_event(self, res: Any, etype: str, obj: dict[str, Any]) -> None:
        meta, spec = obj.get("metadata") or {}, obj.get("spec") or {}
        if res != PODS or meta.get("namespace") != self.namespace:
            return
        holds = (
            etype != "DELETED"
            and not spec.get("schedulingGates")
            and (obj.get("status") or {}).get("phase") not in ("Succeeded", "Failed")
        )
        asks = [c["resources"]["requests"] for c in spec.get("containers", [])]
        cpu = sum(parse_quantity(a["cpu"]) for a in asks)
        memory = sum(parse_quantity(a["memory"]) for a in asks)
        with self._lock:
            self.held.pop(meta["name"], None)
            if holds:
                self.held[meta["name"]] = (cpu, memory)
            self.cpu = max(self.cpu, sum(c for c, _ in self.held.values()))
            self.memory = max(self.memory, sum(m for _, m in self.held.values()))


@pytest.mark.parametrize("pool", ["nodes", "fixed"])
def test_a_queue_borrows_the_idle_cpu_and_memory_of_the_others_on_either_pool(
    api: ApiServer, pool: str
) -> None:
    flood, other = new_namespace(api, "quota-a"), new_namespace(api, "quota-b")
    for i in range(NODE_COUNT):
        if api.get(NODES, None, f"node-{i}") is None:
            api.create(NODES, node(f"node-{i}", cpu=NODE_CPU, memory=NODE_MEMORY))
    raw = [
        {"name": "a", "namespaces": [flood], "nominal": QUOTA},
        {"name": "b", "namespaces": [other], "nominal": QUOTA},
        {"name": "c", "nominal": QUOTA},
    ]
    peak = Peak(api, flood)
    container = {
        "name": "task",
        "image": "busybox",
        "resources": {"requests": {"cpu": CPU, "memory": MEMORY}},
    }
    template = {"spec": {"containers": [container]}}
    with (
        kubelet_for(api, flood),
        running_operator(
            api,
            flood,
            pool=POOL_PODS,
            clock=ScaledClock(SPEED),
            policy="fifo",
            queues=QueueFile(queues_from(raw)),
            **POOLS[pool],
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
    # its quota is 8 CPU and 32 GiB; the others' idle quotas are lent to it: the whole
    # flood runs at once, as on a pool of fixed resources (on nodes it held 8 CPU)
    assert (peak.cpu, peak.memory) == (parse_quantity("24"), parse_quantity("48Gi"))
