"""The room on a cluster's nodes, as the kube-scheduler sees it: what a pool that follows
the cluster (an ExecutorPool's ``nodeSelector``) may count on.

Pure: it reads Node and Pod objects as the API returns them (plain mappings) and imports
neither kopf nor kubernetes. The rules, restated from the kube-scheduler:

* A node offers its ``status.allocatable`` while it is Ready (condition ``Ready`` True)
  and schedulable (not cordoned: ``spec.unschedulable``).
* A pod holds its effective request (`idlegate.sim.resources.pod_request`) and one of
  the node's ``pods`` on the node it is bound to (``spec.nodeName``) until it has ended
  (``Succeeded`` or ``Failed``).
* A pod that idlegate released (``idlegate.io/executor`` on it, no scheduling gate) but
  the kube-scheduler has not bound yet will take its room on some node: it is counted on
  the first node it fits (`room`), and one that fits none is *short*.

A pool's capacity (`Room.capacity`) is the nodes' allocatable less what the pods there
that idlegate did not release request: the pool's state machine counts its own tasks.
Its nodes' free amounts (`Room.free`) are less everything that runs there, the pool's own
pods too, for the per-node rule of `idlegate.sim.pool`.
"""

from __future__ import annotations

from collections.abc import Container, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from idlegate.api.labels import ANNOTATION_EXECUTOR
from idlegate.api.pool_spec import LabelSelector, selects
from idlegate.errors import IdlegateError
from idlegate.sim.resources import MILLI, ResourceVector, pod_request

ENDED = ("Succeeded", "Failed")
ONE_POD = ResourceVector({"pods": MILLI})


@dataclass(frozen=True)
class Node:
    """A Node as the room counts it."""

    name: str
    labels: Mapping[str, str]
    allocatable: ResourceVector
    usable: bool
    """Ready and not cordoned: the kube-scheduler places pods on it."""


def read_node(body: Mapping[str, Any]) -> Node:
    """A Node object as the API returns it (a bad allocatable counts as none)."""
    meta, status = body.get("metadata") or {}, body.get("status") or {}
    ready = any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in status.get("conditions") or ()
    )
    try:
        allocatable = ResourceVector.of(status.get("allocatable") or {}, "allocatable")
    except IdlegateError:
        allocatable = ResourceVector()
    cordoned = bool((body.get("spec") or {}).get("unschedulable"))
    labels = {str(k): str(v) for k, v in (meta.get("labels") or {}).items()}
    return Node(str(meta.get("name", "")), labels, allocatable, ready and not cordoned)


def held(pod: Mapping[str, Any]) -> ResourceVector | None:
    """What `pod` holds on a node (its effective request and one pod), None if it holds
    nothing: it has ended, or it is gated and unbound."""
    spec, status = pod.get("spec") or {}, pod.get("status") or {}
    if status.get("phase") in ENDED:
        return None
    if spec.get("schedulingGates") and not spec.get("nodeName"):
        return None
    try:
        return pod_request(spec) + ONE_POD
    except IdlegateError:  # (a quantity the API server would not have taken)
        return ONE_POD


def released(pod: Mapping[str, Any]) -> bool:
    """idlegate released `pod` (its executor slot is on it)."""
    return ANNOTATION_EXECUTOR in ((pod.get("metadata") or {}).get("annotations") or {})


@dataclass
class Room:
    """The room on a pool's nodes (`room`)."""

    capacity: ResourceVector = field(default_factory=ResourceVector)
    """Allocatable of the usable nodes less the requests of the pods idlegate did not
    release that are bound to them."""
    free: list[tuple[str, ResourceVector]] = field(default_factory=list)
    """Each usable node's free allocatable, by name in order, less every pod bound to it
    and the released pods not bound yet (first fit)."""
    short: list[Mapping[str, Any]] = field(default_factory=list)
    """Released pods not bound yet that fit no node's free allocatable."""


def room(
    nodes: Iterable[Node],
    pods: Iterable[Mapping[str, Any]],
    selector: LabelSelector | None,
    releasing: Container[tuple[str, str]] = (),
) -> Room:
    """The room on the usable `nodes` that `selector` selects, given every pod not ended
    (bound anywhere, or not bound); `releasing`: (namespace, name) of pods whose gate
    removal is under way, counted as released although the pod read still has its gate."""
    chosen = sorted((n for n in nodes if n.usable and selects(selector, n.labels)), key=_name)
    free = {n.name: n.allocatable for n in chosen}
    foreign = ResourceVector()
    unbound: list[tuple[Mapping[str, Any], ResourceVector]] = []
    for pod in pods:
        meta = pod.get("metadata") or {}
        mine = released(pod)
        if (meta.get("namespace"), meta.get("name")) in releasing:
            pod, mine = {**pod, "spec": {**(pod.get("spec") or {}), "schedulingGates": []}}, True
        hold = held(pod)
        if hold is None:
            continue
        node = (pod.get("spec") or {}).get("nodeName")
        if node in free:
            free[node] = free[node] - hold
            foreign = foreign if mine else foreign + hold
        elif not node and mine:
            unbound.append((pod, hold))
    short = []
    for pod, hold in unbound:  # (first fit, as the pool's state machine takes room)
        name = next((n for n, f in free.items() if hold.fits(f)), None)
        if name is None:
            short.append(pod)
        else:
            free[name] = free[name] - hold
    total = ResourceVector()
    for n in chosen:
        total = total + n.allocatable
    capacity = ResourceVector({k: max(0, v) for k, v in (total - foreign).items()})
    return Room(capacity, list(free.items()), short)


def _name(node: Node) -> str:
    return node.name


def named(names: Iterable[str] = ("cpu", "memory")) -> ResourceVector:
    """1m of each of `names`: what a pool on nodes is built with, its state machine naming
    the resources it counts when it is built (a vector leaves out what is 0); their room
    is told once the nodes are read (`Cluster.set_capacity`)."""
    return ResourceVector({n: 1 for n in names})


def counted(nodes: Iterable[Node], selector: LabelSelector | None) -> tuple[str, ...]:
    """The resources a pool on the nodes `selector` selects counts beyond pods: cpu and
    memory, and each extended resource (a name with a '/', nvidia.com/gpu) one of them has."""
    names = {"cpu", "memory"}
    for node in nodes:
        if selects(selector, node.labels):
            names.update(k for k in node.allocatable if "/" in k)
    return tuple(sorted(names))
