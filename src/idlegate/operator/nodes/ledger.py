"""The room on a cluster's nodes, as the kube-scheduler sees it: what a pool that follows
the cluster (an ExecutorPool's ``nodeSelector``) may count on, kept from the node and pod
events that change it (`NodeLedger`).

It reads Node and Pod objects as the API returns them (plain mappings; a node by
`idlegate.api.nodes.read_node`) and imports neither kopf nor kubernetes. The rules,
restated from the kube-scheduler:

* A pod holds its effective request (`idlegate.sim.resources.pod_request`) and one of
  the node's ``pods`` on the node it is bound to (``spec.nodeName``) until it has ended
  (``Succeeded`` or ``Failed``).
* A pod that idlegate released (``idlegate.io/executor`` on it, no scheduling gate) but
  the kube-scheduler has not bound yet will take its room on some node: it is counted,
  older pods first, where the kube-scheduler's scoring would put it
  (`idlegate.sim.resources.least_allocated`, as `Spread` places many), and one that fits
  no node is *short*.

A pool's capacity (`Room.capacity`) is the nodes' allocatable less what the pods there
that idlegate did not release request: the pool's state machine counts its own tasks.
Its nodes' free amounts (`Room.free`) are less everything that runs there, the pool's own
pods too, for the per-node rule of `idlegate.sim.pool`. Which of those nodes a stage's pod
may use is `idlegate.operator.nodes.rules`'.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from idlegate.api.labels import ANNOTATION_EXECUTOR, ANNOTATION_STOP, HOSTNAME
from idlegate.api.nodes import Node
from idlegate.api.pool_spec import LabelSelector, selects
from idlegate.errors import IdlegateError
from idlegate.sim.pool import SCORED, TasksOnNodes
from idlegate.sim.resources import MILLI, ResourceVector, Spread, pod_request

ENDED = ("Succeeded", "Failed")
ONE_POD = ResourceVector({"pods": MILLI})


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


def room_key(pod: Mapping[str, Any]) -> tuple[Any, ...] | None:
    """What `room` reads of `pod` that may change while it lives: its node, whether
    idlegate released it, the host it is pinned to, its spec's generation (a resize); None
    while it counts nowhere (it holds nothing, or is neither bound nor released). A pod's
    write that leaves this equal (its status Running, a label) changes no pool's room."""
    node, mine = (pod.get("spec") or {}).get("nodeName"), released(pod)
    if held(pod, lambda _: ONE_POD) is None or not (node or mine):
        return None
    meta = pod.get("metadata") or {}
    return node, mine, _pinned(pod), meta.get("generation"), stopping(pod)


def released(pod: Mapping[str, Any]) -> bool:
    """idlegate released `pod` (its executor slot is on it)."""
    return ANNOTATION_EXECUTOR in ((pod.get("metadata") or {}).get("annotations") or {})


def stopping(pod: Mapping[str, Any]) -> bool:
    """idlegate is stopping `pod` (a reclaim's mark: `idlegate.api.eviction`)."""
    return ANNOTATION_STOP in ((pod.get("metadata") or {}).get("annotations") or {})


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
    nodes: list[Node] = field(default_factory=list)
    """Those nodes, in the order of `free`."""
    stopping: list[ResourceVector] = field(default_factory=list)
    """What the pods idlegate is stopping (`stopping`) hold on each of those nodes, in the
    order of `free`: room a reclaim counts as coming back (`TasksOnNodes.stopping`)."""


@dataclass(frozen=True)
class Placing:
    """Where a pool's pods run, as a reading of its room tells it: each node's index by
    name (the order of `Room.free`), kopf's index of pods by namespace and name (read
    when asked: one pod, never a listing) and `Room.stopping`."""

    index: Mapping[str, int]
    pods: Mapping[Any, Any]
    stopping: tuple[ResourceVector, ...]

    def placed(self, pod_of: Callable[[int], tuple[str, str] | None]) -> TasksOnNodes:
        """The state machine's `TasksOnNodes`: the node the pod `pod_of` names for the task on
        an executor (namespace, name; None: none) is bound to, its ``spec.nodeName``."""

        def runs_on(executor: int) -> int | None:
            key = pod_of(executor)
            body = None if key is None else next(iter(self.pods.get(key) or ()), None)
            node = None if body is None else (body.get("spec") or {}).get("nodeName")
            return None if node is None else self.index.get(node)

        return TasksOnNodes(runs_on, self.stopping)


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
    `requested`, or a cache of it. A `NodeLedger` of them all, read once."""
    return NodeLedger.of(nodes, pods, request).room(selector, releasing)


@dataclass(frozen=True)
class _Pod:
    """A pod as a `NodeLedger` counts it."""

    body: Mapping[str, Any]
    """The pod, while it is not bound and holds (what a reading places); else empty: a
    ledger of many pods keeps none of their objects."""
    node: str
    """The node it is bound to ("": none)."""
    hold: ResourceVector | None
    """What it takes of a node (its request and one pod); None once it has ended."""
    gated: bool
    mine: bool
    """idlegate released it (`released`)."""
    stop: bool = False
    """idlegate is stopping it (`stopping`)."""


class NodeLedger:
    """The nodes and pods `room` counts, kept from the events that change them (a node or
    a pod added, changed or deleted: `node`, `pod`): each node's sum of what the pods
    bound there hold, and of what those idlegate did not release hold, and the pods not
    bound. A reading (`room`) then costs the nodes and the pods not bound yet, not every
    pod."""

    def __init__(self, request: Callable[[Mapping[str, Any]], ResourceVector] | None = None):
        self.request = request or requested
        self.nodes: dict[str, Node] = {}
        self._pods: dict[tuple[str, str], _Pod] = {}
        self._used: dict[str, dict[str, int]] = {}
        self._foreign: dict[str, dict[str, int]] = {}
        self._stopping: dict[str, dict[str, int]] = {}
        self._unbound: dict[tuple[str, str], tuple[_Pod, ResourceVector]] = {}
        """The pods not bound and not ended, in the order first seen."""
        self._free: dict[str, ResourceVector] = {}
        """Each node's allocatable less what is bound there, as last read (a pod's or its
        node's change drops it): a reading recounts only the nodes that changed."""
        self._chosen: dict[str, tuple[list[Node], ResourceVector]] = {}
        """By selector (its repr): its usable nodes by name and their allocatable's sum, as
        last read (any node's change drops them all)."""

    @classmethod
    def of(
        cls,
        nodes: Iterable[Node],
        pods: Iterable[Mapping[str, Any]],
        request: Callable[[Mapping[str, Any]], ResourceVector] | None = None,
    ) -> NodeLedger:
        """A ledger of `nodes` and `pods` as they are now."""
        ledger = cls(request)
        for found in nodes:
            ledger.node(found)
        for pod in pods:
            ledger.pod(pod)
        return ledger

    def node(self, node: Node, deleted: bool = False) -> None:
        """`node` was added or changed (`deleted`: it is gone)."""
        if deleted:
            self.nodes.pop(node.name, None)
        else:
            self.nodes[node.name] = node
        self._free.pop(node.name, None)
        self._chosen.clear()

    def pod(self, pod: Mapping[str, Any], deleted: bool = False) -> None:
        """`pod` was added or changed (`deleted`: it is gone)."""
        meta, spec = pod.get("metadata") or {}, pod.get("spec") or {}
        key = (meta.get("namespace", ""), meta.get("name", ""))
        old = self._pods.get(key)
        if old is not None:
            self._count(old, -1)
        if deleted:
            self._pods.pop(key, None)
            self._unbound.pop(key, None)
            return
        ended = (pod.get("status") or {}).get("phase") in ENDED
        node = spec.get("nodeName") or ""
        hold = None if ended else self.request(pod)
        body = pod if hold is not None and not node else {}
        gated = bool(spec.get("schedulingGates"))
        entry = _Pod(body, node, hold, gated, released(pod), stopping(pod))
        # (a key kept keeps its place: the pods in the order first seen, as an index's)
        self._pods[key] = entry
        if hold is not None and not node:
            self._unbound[key] = entry, hold
        else:
            self._unbound.pop(key, None)
        self._count(entry, 1)

    def _count(self, entry: _Pod, sign: int) -> None:
        """Add (sign 1) or take off (-1) what a bound pod holds on its node."""
        if entry.hold is None or not entry.node:
            return
        _add(self._used.setdefault(entry.node, {}), entry.hold, sign)
        self._free.pop(entry.node, None)
        if not entry.mine:
            _add(self._foreign.setdefault(entry.node, {}), entry.hold, sign)
        if entry.stop:
            _add(self._stopping.setdefault(entry.node, {}), entry.hold, sign)

    def room(
        self,
        selector: LabelSelector | None,
        releasing: Mapping[tuple[str, str], Releasing] | None = None,
    ) -> Room:
        """The room on the usable nodes `selector` selects (`room`'s)."""
        releasing = releasing or {}
        chosen, total = self._usable(selector)
        used = {n.name for n in chosen}
        foreign: dict[str, int] = {}
        for n in chosen:
            _add(foreign, self._foreign.get(n.name, {}))
        unbound: list[tuple[Mapping[str, Any], ResourceVector, str | None]] = []
        for key, (entry, hold) in self._unbound.items():
            body = entry.body
            if key in releasing:  # (its gate is being removed: counted released)
                body = {**body, "spec": {**(body.get("spec") or {}), "schedulingGates": []}}
                unbound.append((body, hold, _pinned(body) or releasing[key][1]))
            elif entry.mine and not entry.gated:
                unbound.append((body, hold, _pinned(body)))
        for (namespace, name), (ask, host) in releasing.items():
            found = self._pods.get((namespace, name))
            if found is None and ask is not None:
                meta = {"metadata": {"namespace": namespace, "name": name}}
                unbound.append((meta, ask + ONE_POD, host))
            elif found and found.hold and found.node in used and not found.mine:
                _add(foreign, found.hold, -1)  # (released, though the pod read says not yet)
        free = {n.name: self._free_on(n) for n in chosen}
        hosts = [n.host for n in chosen]
        short = self._place(sorted(unbound, key=lambda p: _created(p[0])), chosen, hosts, free)
        capacity = ResourceVector(
            {k: max(0, v) for k, v in (total - ResourceVector(foreign)).items()}
        )
        alloc = [n.allocatable for n in chosen]
        stops = [ResourceVector(self._stopping.get(n.name) or {}) for n in chosen]
        return Room(capacity, list(free.items()), short, alloc, hosts, chosen, stops)

    def _usable(self, selector: LabelSelector | None) -> tuple[list[Node], ResourceVector]:
        """The usable nodes `selector` selects, by name, and their allocatable's sum."""
        key = repr(selector)
        found = self._chosen.get(key)
        if found is None:
            chosen = sorted(
                (n for n in self.nodes.values() if n.usable and selects(selector, n.labels)),
                key=_name,
            )
            total = ResourceVector()
            for n in chosen:
                total = total + n.allocatable
            found = self._chosen[key] = chosen, total
        return found

    def _free_on(self, node: Node) -> ResourceVector:
        """`node`'s allocatable less what the pods bound there hold."""
        free = self._free.get(node.name)
        if free is None:
            free = self._free[node.name] = node.allocatable - self._used.get(node.name, {})
        return free

    @staticmethod
    def _place(
        unbound: list[tuple[Mapping[str, Any], ResourceVector, str | None]],
        chosen: list[Node],
        hosts: list[str],
        free: dict[str, ResourceVector],
    ) -> list[Mapping[str, Any]]:
        """Take the `unbound` pods, in the kube-scheduler's order (older first), off
        `free`: on the node each is pinned to, else where its scoring puts it. Returns
        those that fit nowhere."""
        short: list[Mapping[str, Any]] = []
        if not unbound:
            return short
        names = sorted(
            {k for n in chosen for k in n.allocatable} | {k for u in unbound for k in u[1]}
        )
        scored = [i for i, k in enumerate(names) if k in SCORED]
        totals = [[n.allocatable[k] for k in names] for n in chosen]
        spread = Spread([[free[n.name][k] for k in names] for n in chosen], totals, scored)
        pinned = {h: i for i, h in reversed(list(enumerate(hosts)))}  # (the first of a name)
        needs: dict[ResourceVector, tuple[int, ...]] = {}
        for pod, hold, host in unbound:
            need = needs.get(hold)
            if need is None:
                need = needs[hold] = tuple(hold[k] for k in names)
            at = pinned.get(host) if host is not None else None
            if at is not None:  # (it goes there, or waits there for room; `hold.fits`)
                if not all(f >= x for f, x in zip(spread.free[at], need, strict=True) if x):
                    short.append(pod)
            else:
                at = spread.where(need)
                if at is None:
                    short.append(pod)
                    continue
            spread.take(at, need)
        for at in spread.taken:  # (the nodes' free room as vectors again: those it changed)
            free[chosen[at].name] = ResourceVector(dict(zip(names, spread.free[at], strict=True)))
        return short


def outside(
    pods: Iterable[Mapping[str, Any]], watched: Iterable[str]
) -> dict[tuple[str, str], Mapping[str, Any]]:
    """The pods of a cluster-wide list that a watch of the namespaces `watched` misses and
    that hold room on a node (bound, not ended: node agents, services), by namespace and
    name: what a pool on nodes subtracts beside the pods it watches."""
    seen = set(watched)
    found: dict[tuple[str, str], Mapping[str, Any]] = {}
    for pod in pods:
        meta = pod.get("metadata") or {}
        bound = (pod.get("spec") or {}).get("nodeName")
        ended = (pod.get("status") or {}).get("phase") in ENDED
        if meta.get("namespace") not in seen and bound and not ended:
            found[(str(meta.get("namespace", "")), str(meta.get("name", "")))] = pod
    return found


def _add(into: dict[str, int], amounts: Mapping[str, int], sign: int = 1) -> None:
    for k, v in amounts.items():
        into[k] = into.get(k, 0) + sign * v


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
