"""The kube-scheduler of the test API server: it binds pods to Nodes by their requests.

It lives in the API server's event loop (an :class:`~tests.k8s.apiserver.Emulator`
subscriber) and does nothing while no Node exists: without nodes the kubelets run every
released pod at once, as they always did. Once a Node exists, it does what the default
kube-scheduler does for the resources, restated:

* a pod enters its queue once it has no ``schedulingGates`` and no ``spec.nodeName``, and
  is tried in the queue's order: higher ``spec.priority`` first (what admission writes
  from ``priorityClassName``; 0 without), then the older pod first (creation order);
* filters: the node is Ready (its ``Ready`` condition is ``True``) and not
  ``spec.unschedulable``, its labels match the pod's ``nodeSelector``, and
  *NodeResourcesFit*: the pod's effective request (`idlegate.sim.resources.pod_request`,
  plus one of ``pods``) fits the node's ``status.allocatable`` less the requests of the
  pods bound to it that have not ended, resource by resource (``cpu``, ``memory``,
  ``pods``, extended resources such as ``nvidia.com/gpu``);
* score: *LeastAllocated* on ``cpu`` and ``memory`` (the free share after the pod, the
  mean of the two; the default scheduler's spreading), ties to the first node by name (the
  real one picks at random among ties);
* a fitting pod is bound (``spec.nodeName`` and the ``PodScheduled`` condition ``True``,
  one write, as the binding subresource does); a pod that fits no node stays ``Pending``
  with ``PodScheduled`` ``False``, reason ``Unschedulable`` and the real message
  (``0/3 nodes are available: 3 Insufficient cpu.``), and is tried again, in the queue's
  order, whenever room frees: a bound pod ends or goes, a node comes or changes.

A bad quantity in a pod's requests is an error of the emulator (the real API server
refuses such a pod). Left out: preemption, taints and tolerations, affinity and topology
spread, the scoring plugins beyond LeastAllocated, and the default requests the real
scorer assumes for a pod that states none.
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Mapping
from typing import Any

import attrs
import kmock

from idlegate.sim.resources import ResourceVector, pod_request
from tests.k8s.apiserver import NODES, PODS, Emulator

ONE_POD = ResourceVector({"pods": 1000})
"""The pod slot every pod takes of a node (milli-units, as ResourceVector counts)."""
SCORED = ("cpu", "memory")
"""The resources LeastAllocated scores (with equal weights, its default)."""
ENDED = ("Succeeded", "Failed")


def node(
    name: str,
    *,
    cpu: str = "8",
    memory: str = "32Gi",
    pods: int = 110,
    gpus: int = 0,
    labels: Mapping[str, str] | None = None,
    ready: bool = True,
) -> dict[str, Any]:
    """A Node's body as a kubelet registers it: capacity and allocatable (the same here),
    the ``kubernetes.io/hostname`` label and a ``Ready`` condition; annotated for KWOK, which
    plays its kubelet on the real control plane (tests/k8s/real.py)."""
    allocatable: dict[str, str] = {"cpu": cpu, "memory": memory, "pods": str(pods)}
    if gpus:
        allocatable["nvidia.com/gpu"] = str(gpus)
    condition = {
        "type": "Ready",
        "status": "True" if ready else "False",
        "reason": "KubeletReady" if ready else "KubeletNotReady",
    }
    return {
        "metadata": {
            "name": name,
            "labels": {"kubernetes.io/hostname": name, **(labels or {})},
            "annotations": {"kwok.x-k8s.io/node": "fake"},
        },
        "status": {
            "capacity": dict(allocatable),
            "allocatable": allocatable,
            "conditions": [condition],
        },
    }


@attrs.frozen
class NodeInfo:
    """What the scheduler reads of a Node."""

    name: str
    allocatable: ResourceVector
    labels: Mapping[str, str]
    schedulable: bool

    @classmethod
    def of(cls, obj: Mapping[str, Any]) -> NodeInfo:
        status = obj.get("status") or {}
        ready = any(
            c.get("type") == "Ready" and c.get("status") == "True"
            for c in status.get("conditions") or []
        )
        return cls(
            name=obj["metadata"]["name"],
            allocatable=ResourceVector.of(status.get("allocatable"), "status.allocatable"),
            labels=dict(obj["metadata"].get("labels") or {}),
            schedulable=ready and not (obj.get("spec") or {}).get("unschedulable"),
        )


@attrs.define
class Queued:
    """A pod in the scheduling queue: its order and its request."""

    order: tuple[int, int]
    request: ResourceVector
    selector: Mapping[str, str]
    message: str | None = None
    """The Unschedulable message last written on it (None: none yet)."""


Key = tuple[str, str]  # (namespace, name)


class KubeScheduler:
    """Binds the pods of every namespace of `emulator` to its Nodes (the module docstring);
    it subscribes to the emulator on creation."""

    def __init__(self, emulator: Emulator) -> None:
        self.emulator = emulator
        self.nodes: dict[str, NodeInfo] = {}
        self.used: dict[str, ResourceVector] = {}
        """Node -> the requests of the pods bound to it that have not ended."""
        self.bound: dict[Key, tuple[str, ResourceVector]] = {}
        self.queue: dict[Key, Queued] = {}
        self._born: dict[Key, int] = {}  # pod -> the resourceVersion it was created at
        self._pass_due = False
        self._arrivals = itertools.count()
        emulator.subscribe(self._on_event)

    @property
    def placing(self) -> bool:
        """Whether pods wait for a node (some Node exists); else the kubelets run them."""
        return bool(self.nodes)

    def _on_event(self, res: kmock.resource, etype: str, obj: dict[str, Any]) -> None:
        if res == NODES:
            self._on_node(etype, obj)
        elif res == PODS:
            self._on_pod(etype, obj)

    def _on_node(self, etype: str, obj: dict[str, Any]) -> None:
        name = obj["metadata"]["name"]
        if etype == "DELETED":
            self.nodes.pop(name, None)
            self.used.pop(name, None)
        else:
            self.nodes[name] = NodeInfo.of(obj)
            self.used.setdefault(name, ResourceVector())
        self._due()

    def _on_pod(self, etype: str, pod: dict[str, Any]) -> None:
        meta, spec = pod["metadata"], pod.get("spec") or {}
        key = (meta.get("namespace") or "", meta["name"])
        if etype == "ADDED":
            self._born[key] = int(meta["resourceVersion"])
        phase = (pod.get("status") or {}).get("phase")
        if etype == "DELETED" or phase in ENDED:
            self.queue.pop(key, None)
            self._born.pop(key, None)
            where = self.bound.pop(key, None)
            if where is not None:
                if where[0] in self.used:
                    self.used[where[0]] = self.used[where[0]] - where[1]
                self._due()
        elif spec.get("nodeName"):
            self.queue.pop(key, None)
            if key not in self.bound:  # (created bound: nothing of ours to check)
                self._count(key, spec["nodeName"], self._request(spec))
        elif self._waits(key, pod):
            priority = int(spec.get("priority") or 0)
            born = self._born.get(key, int(meta["resourceVersion"]))
            self.queue[key] = Queued(
                (-priority, born), self._request(spec), dict(spec.get("nodeSelector") or {})
            )
            self._due()

    def _waits(self, key: Key, pod: Mapping[str, Any]) -> bool:
        """Whether the pod (neither ended nor bound) newly enters the queue: released, not
        being deleted, not queued, and not bound by us already (an event older than our
        binding)."""
        if pod["spec"].get("schedulingGates") or pod["metadata"].get("deletionTimestamp"):
            return False
        return key not in self.queue and key not in self.bound

    @staticmethod
    def _request(spec: Mapping[str, Any]) -> ResourceVector:
        return pod_request(spec) + ONE_POD

    def _count(self, key: Key, node_name: str, request: ResourceVector) -> None:
        self.bound[key] = (node_name, request)
        self.used[node_name] = self.used.get(node_name, ResourceVector()) + request

    def _due(self) -> None:
        """Run one scheduling pass soon: after the events already queued, so a burst of
        them (pods ending together) makes one pass over the queue."""
        if self.nodes and self.queue and not self._pass_due:
            self._pass_due = True
            self.emulator.call_soon(self._pass)

    def _pass(self) -> None:
        self._pass_due = False
        # (a pass only takes room: until the next binding, a pod asking what one found no
        # node for finds none either, with the same message; a pass over a queue of
        # hundreds on a thousand nodes, benchmarks/scale.py's, costs one try per shape)
        unfit: dict[tuple[ResourceVector, tuple[tuple[str, str], ...]], str] = {}
        for key, queued in sorted(self.queue.items(), key=lambda kv: kv[1].order):
            current = self.emulator.live(PODS, *key)
            if current is None or current["spec"].get("nodeName"):
                continue  # its DELETED event, or the one of its binding, is on its way
            shape = (queued.request, tuple(sorted(queued.selector.items())))
            chosen, message = (None, unfit[shape]) if shape in unfit else self._place(queued)
            if chosen is not None:
                unfit.clear()
                del self.queue[key]
                self._count(key, chosen, queued.request)
                self.emulator.bind(key[0], key[1], chosen)
                continue
            unfit[shape] = message
            if message != queued.message:
                queued.message = message
                self.emulator.unschedulable(key[0], key[1], message)

    def _place(self, queued: Queued) -> tuple[str | None, str]:
        """The node to bind to (None if none fits) and, if none, why (the real message)."""
        reasons: Counter[str] = Counter()
        best: tuple[float, str] | None = None
        for name in sorted(self.nodes):
            info, used = self.nodes[name], self.used.get(name, ResourceVector())
            if not info.schedulable:
                reasons["node(s) were unschedulable or not ready"] += 1
                continue
            if any(info.labels.get(k) != v for k, v in queued.selector.items()):
                reasons["node(s) didn't match Pod's node affinity/selector"] += 1
                continue
            free = info.allocatable - used
            short = queued.request.too_large(free)
            if short:
                for resource in short:
                    reason = "Too many pods" if resource == "pods" else f"Insufficient {resource}"
                    reasons[reason] += 1
                continue
            score = _least_allocated(info.allocatable, used + queued.request)
            if best is None or score > best[0]:
                best = (score, name)
        if best is not None:
            return best[1], ""
        why = ", ".join(sorted(f"{n} {r}" for r, n in reasons.items()))
        return None, f"0/{len(self.nodes)} nodes are available: {why}."


def _least_allocated(allocatable: ResourceVector, requested: ResourceVector) -> float:
    """LeastAllocated's score (0..100): the mean free share of the scored resources."""
    shares = [
        (allocatable[r] - requested[r]) / allocatable[r] * 100 for r in SCORED if allocatable[r] > 0
    ]
    return sum(shares) / len(shares) if shares else 0.0
