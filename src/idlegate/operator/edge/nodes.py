"""The cluster's nodes and pods as kopf's indexes hold them: the room of the pools that
follow the cluster (an ExecutorPool's ``nodeSelector``; :mod:`idlegate.operator.nodes.ledger` counts
it), and the released pods that the kube-scheduler leaves pending all the same."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Protocol

from idlegate.api import notices
from idlegate.api.labels import GATE
from idlegate.api.nodes import Node, counted, read_node
from idlegate.api.pool_spec import LabelSelector
from idlegate.api.task_pods import Owner
from idlegate.operator.core.events import Capacity
from idlegate.operator.core.intents import PostEvent
from idlegate.operator.metrics import Metrics
from idlegate.operator.nodes.ledger import (
    NodeLedger,
    Placing,
    Releasing,
    Room,
    outside,
    released,
    requested,
    room,
    room_key,
)
from idlegate.operator.nodes.rules import NodeRules
from idlegate.sim.resources import ResourceVector

SWEEP_SECONDS = 10.0
"""Seconds of the operator's clock between two lists of the pods outside ``--namespace``'s
namespaces (`NodeWatch.sweep`): a node agent started there is subtracted this late."""


class Lister(Protocol):
    """What `NodeWatch.sweep` reads through (the operator's API client)."""

    async def list_pods(self, namespace: str | None, label_selector: str) -> list[dict[str, Any]]:
        """The pods of `namespace` (None: every namespace) `label_selector` selects."""
        ...


class NodeWatch:
    """kopf's index of Nodes (`nodes`, by name) and the operator's of pods (`pods`, by
    namespace and name: operator.edge.pod_index); `releasing`: the applier's pods released that the
    index may show gated still."""

    def __init__(self, metrics: Metrics, releasing: dict[tuple[str, str], Releasing]) -> None:
        self.nodes: Mapping[Any, Any] = {}
        self.pods: Mapping[Any, Any] = {}
        self.metrics, self.releasing = metrics, releasing
        self.read = False
        """kopf ran a handler (its index of nodes filled) and the pods' first listing ended
        (`Operator.room_read`): until then an empty index is not a cluster without them."""
        self.pending: set[str] = set()
        """The uids of the released pods counted pending (each once)."""
        self._asked: dict[str, tuple[str, ResourceVector]] = {}
        """Each pod's `requested` by uid, with the resourceVersion it was read at."""
        self.outside: dict[tuple[str, str], Mapping[str, Any]] = {}
        """With ``--namespace`` (kopf then watches pods in those namespaces only): the pods
        of the others that hold room on a node, as last listed (`sweep`)."""
        self.ledger: NodeLedger | None = None
        """The nodes and pods as their events told them since the first (`seen`), so that a
        reading costs the nodes, not every pod; None before: each reading counts kopf's
        indexes anew."""
        self._keys: dict[str, tuple[Any, ...]] = {}
        """Each pod's `room_key` by uid, while it counts somewhere."""

    def seen(self, event: Mapping[str, Any], node: bool = False) -> None:
        """A watch event of a Pod (`node`: of a Node; kopf's raw event), into the ledger."""
        if self.ledger is None:  # (kopf's indexes hold this event's object already)
            pods = [body for found in list(self.pods.values()) for body in found]
            self.ledger = NodeLedger.of(self._nodes(), [*pods, *self.outside.values()])
        body, deleted = event["object"], event.get("type") == "DELETED"
        if node:
            self.ledger.node(read_node(body), deleted)
        else:
            self.ledger.pod(body, deleted)

    def changed(self, etype: str | None, pod: Mapping[str, Any]) -> bool:
        """Whether a pod's event may change a pool's room (its `room_key` changed): a room
        read passes over the pool's nodes, and most of a pod's writes change no room. Nor
        do the release the applier counts already (`releasing`), or a binding to the node
        it was pinned to (a reading put it there): its end does, or a binding elsewhere."""
        meta = pod.get("metadata") or {}
        key = None if etype == "DELETED" else room_key(pod)
        before = self._keys.pop(str(meta.get("uid", "")), None)
        if key is not None:
            self._keys[str(meta.get("uid", ""))] = key
        if key is None or key[0] is None:  # (not bound: counted as the applier released it)
            ours = key is not None and before is None and key[1]
            return key != before and not (
                ours and (meta.get("namespace"), meta.get("name")) in self.releasing
            )
        node = self.ledger.nodes.get(key[0]) if self.ledger is not None else None
        return key != before and not (before == (None, *key[1:]) and node and node.host == key[2])

    def _nodes(self) -> list[Node]:
        return [read_node(body) for found in list(self.nodes.values()) for body in found]

    def room(self, selector: LabelSelector | None) -> Room:
        """The room on the nodes `selector` selects, now."""
        for key in list(self.releasing):  # (its release shows now: no need to remember it)
            found = next(iter(self.pods.get(key) or ()), None)  # (kopf's: a Store, iterable)
            if found is not None and not any(g.get("name") == GATE for g in _gates(found)):
                del self.releasing[key]
        if self.ledger is not None:
            return self.ledger.room(selector, self.releasing)
        pods = [body for found in list(self.pods.values()) for body in found]
        pods += self.outside.values()
        seen, self._asked = self._asked, {}
        asked = lambda p: self._request(p, seen)  # noqa: E731
        return room(self._nodes(), pods, selector, self.releasing, asked)

    def _request(
        self, pod: Mapping[str, Any], seen: dict[str, tuple[str, ResourceVector]]
    ) -> ResourceVector:
        """`requested(pod)`, parsed once per version of the pod."""
        meta = pod.get("metadata") or {}
        uid, version = str(meta.get("uid", "")), str(meta.get("resourceVersion", ""))
        found = seen.get(uid)
        ask = found[1] if found is not None and found[0] == version and version else requested(pod)
        self._asked[uid] = version, ask
        return ask

    async def sweep(self, kube: Lister, watched: Iterable[str]) -> bool:
        """List the pods of every namespace but the `watched` ones, which kopf's index holds,
        for the room their bound pods take (`outside`); True if they changed."""
        found = outside(await kube.list_pods(None, ""), watched)
        versions = {k: (p.get("metadata") or {}).get("resourceVersion") for k, p in found.items()}
        before = {
            k: (p.get("metadata") or {}).get("resourceVersion") for k, p in self.outside.items()
        }
        if self.ledger is not None:
            for key in self.outside.keys() - found.keys():
                self.ledger.pod(self.outside[key], deleted=True)
            for key in (k for k in found if versions[k] != before.get(k)):
                self.ledger.pod(found[key])
        self.outside = found
        return versions != before

    def capacity(self, selector: LabelSelector | None, counted: tuple[str, ...]) -> Capacity:
        """What a pool on the nodes `selector` selects, counting the resources `counted`
        beyond pods, is told (`Core.handle`)."""
        now = self.room(selector)
        nodes = tuple(free for _, free in now.free)
        alloc, hosts = tuple(now.allocatable), tuple(now.hosts)
        rules = NodeRules(tuple(now.nodes), counted)
        placing = Placing({n.name: i for i, n in enumerate(now.nodes)}, self.pods, (*now.stopping,))
        return Capacity(now.capacity, nodes, alloc, hosts, self.read, rules, placing)

    def counted(self, selector: LabelSelector | None) -> tuple[str, ...]:
        """The resources a pool on those nodes counts (`idlegate.api.nodes.counted`)."""
        return counted(self._nodes(), selector)

    def unschedulable(self, pod: Mapping[str, Any]) -> PostEvent | None:
        """A Warning on `pod` if idlegate released it and the kube-scheduler found no node
        for it (counted once: ``idlegate_released_pods_pending_total``), else None."""
        meta, spec = pod.get("metadata") or {}, pod.get("spec") or {}
        conditions = (pod.get("status") or {}).get("conditions") or ()
        why = next(
            (
                c.get("message") or "no node fits it"
                for c in conditions
                if c.get("type") == "PodScheduled" and c.get("reason") == "Unschedulable"
            ),
            None,
        )
        uid = str(meta.get("uid", ""))
        if why is None or not released(pod) or spec.get("nodeName") or uid in self.pending:
            return None
        self.pending.add(uid)
        self.metrics.released_pending.inc()
        owner = Owner(meta.get("namespace", ""), meta.get("name", ""), uid, "Pod", "v1")
        return PostEvent(owner, *notices.no_room_released(why))


def _gates(pod: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return list((pod.get("spec") or {}).get("schedulingGates") or ())
