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
  the kube-scheduler has not bound yet will take its room on some node: it is counted,
  older pods first, where the kube-scheduler's scoring would put it
  (`idlegate.sim.resources.least_allocated`), and one that fits no node is *short*.

A pool's capacity (`Room.capacity`) is the nodes' allocatable less what the pods there
that idlegate did not release request: the pool's state machine counts its own tasks.
Its nodes' free amounts (`Room.free`) are less everything that runs there, the pool's own
pods too, for the per-node rule of `idlegate.sim.pool`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from idlegate.api.labels import ANNOTATION_EXECUTOR, HOSTNAME
from idlegate.api.pool_spec import LabelSelector, selects
from idlegate.errors import IdlegateError
from idlegate.sim.pool import SCORED
from idlegate.sim.resources import MILLI, ResourceVector, least_allocated, pod_request

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

    @property
    def host(self) -> str:
        """Its ``kubernetes.io/hostname`` label (a pod's nodeSelector pins it here)."""
        return self.labels.get(HOSTNAME, self.name)


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


def held(
    pod: Mapping[str, Any], request: Callable[[Mapping[str, Any]], ResourceVector] | None = None
) -> ResourceVector | None:
    """What `pod` holds on a node (its `request`, by default `requested`), None if it
    holds nothing: it has ended, or it is gated and unbound."""
    spec, status = pod.get("spec") or {}, pod.get("status") or {}
    if status.get("phase") in ENDED:
        return None
    if spec.get("schedulingGates") and not spec.get("nodeName"):
        return None
    return (request or requested)(pod)


def requested(pod: Mapping[str, Any]) -> ResourceVector:
    """What `pod` takes of a node it runs on: its effective request and one pod."""
    try:
        return pod_request(pod.get("spec") or {}) + ONE_POD
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
    and the released pods not bound yet (on the node each is pinned to, else where the
    kube-scheduler's scoring puts it)."""
    short: list[Mapping[str, Any]] = field(default_factory=list)
    """Released pods not bound yet that fit no node's free allocatable."""
    allocatable: list[ResourceVector] = field(default_factory=list)
    """Each of those nodes' allocatable, in the order of `free`."""
    hosts: list[str] = field(default_factory=list)
    """Each of those nodes' host name (`Node.host`), in the order of `free`."""


Releasing = tuple[ResourceVector | None, str | None]
"""A pod released but maybe not read so: what it requests (None: not known) and the host it
is pinned to (None: none)."""


def room(
    nodes: Iterable[Node],
    pods: Iterable[Mapping[str, Any]],
    selector: LabelSelector | None,
    releasing: Mapping[tuple[str, str], Releasing] | None = None,
    request: Callable[[Mapping[str, Any]], ResourceVector] | None = None,
) -> Room:
    """The room on the usable `nodes` that `selector` selects, given every pod (bound
    anywhere, or not bound); `releasing`: (namespace, name) of pods whose gate removal is
    under way, counted as released although the pod read still has its gate (and on the
    node it is pinned to), and, with their request, those not read yet at all; `request`:
    `requested`, or a cache of it."""
    releasing = releasing or {}
    seen: set[tuple[str, str]] = set()
    chosen = sorted((n for n in nodes if n.usable and selects(selector, n.labels)), key=_name)
    used: dict[str, dict[str, int]] = {n.name: {} for n in chosen}
    foreign: dict[str, int] = {}
    unbound: list[tuple[Mapping[str, Any], ResourceVector, str | None]] = []
    for pod in pods:
        meta = pod.get("metadata") or {}
        mine, key = released(pod), (meta.get("namespace", ""), meta.get("name", ""))
        seen.add(key)
        if key in releasing:
            pod, mine = {**pod, "spec": {**(pod.get("spec") or {}), "schedulingGates": []}}, True
        hold = held(pod, request)
        if hold is None:
            continue
        node = (pod.get("spec") or {}).get("nodeName")
        if node in used:  # (sums of plain ints: a vector per pod is slow at 1000s of pods)
            _add(used[node], hold)
            if not mine:
                _add(foreign, hold)
        elif not node and mine:
            unbound.append((pod, hold, _pinned(pod) or releasing.get(key, (None, None))[1]))
    for (namespace, name), (ask, host) in releasing.items():
        if (namespace, name) not in seen and ask is not None:
            meta = {"metadata": {"namespace": namespace, "name": name}}
            unbound.append((meta, ask + ONE_POD, host))
    free = {n.name: n.allocatable - used[n.name] for n in chosen}
    short = []
    names = sorted({k for n in chosen for k in n.allocatable} | {k for u in unbound for k in u[1]})
    scored = [i for i, k in enumerate(names) if k in SCORED]
    totals = [[n.allocatable[k] for k in names] for n in chosen]
    hosts = [n.host for n in chosen]
    # (in the kube-scheduler's order, older first: on its pinned node, else where its
    # scoring puts each)
    for pod, hold, host in sorted(unbound, key=lambda p: _created(p[0])):
        if host in hosts:  # (it goes there, or waits there for room)
            name = chosen[hosts.index(host)].name
            fits, free[name] = hold.fits(free[name]), free[name] - hold
            if not fits:
                short.append(pod)
            continue
        frees = [[free[n.name][k] for k in names] for n in chosen]
        at = least_allocated([hold[k] for k in names], frees, totals, scored)
        if at is None:
            short.append(pod)
        else:
            free[chosen[at].name] = free[chosen[at].name] - hold
    total = ResourceVector()
    for n in chosen:
        total = total + n.allocatable
    capacity = ResourceVector({k: max(0, v) for k, v in (total - ResourceVector(foreign)).items()})
    return Room(capacity, list(free.items()), short, [n.allocatable for n in chosen], hosts)


def _add(into: dict[str, int], amounts: Mapping[str, int]) -> None:
    for k, v in amounts.items():
        into[k] = into.get(k, 0) + v


def _pinned(pod: Mapping[str, Any]) -> str | None:
    """The host `pod`'s nodeSelector pins it to, if any."""
    selector = (pod.get("spec") or {}).get("nodeSelector") or {}
    return selector.get(HOSTNAME)


def _created(pod: Mapping[str, Any]) -> tuple[str, str]:
    meta = pod.get("metadata") or {}
    return str(meta.get("creationTimestamp") or ""), str(meta.get("name") or "")


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
