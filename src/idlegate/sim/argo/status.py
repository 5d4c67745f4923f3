"""What a Workflow's ``status.nodes`` tells the mapping: fan-out sizes, skipped nodes, pods.

Argo's controller names every node by its place in the workflow: the workflow's own node
is ``<workflow>``, a DAG task ``<parent>.<task>``, a step ``<parent>[<group>].<step>``, a
fan-out item ``<task>(<index>:<item>)``, a retry attempt ``<node>(<attempt>)`` under a node
of type ``Retry``. Its id is ``<workflow>-<fnv32a(name)>`` (`node_id`).

The mapping names stages by the same scheme, relative to the workflow and with items
reduced to their index (`canonical_path`): ``.A``, ``[0].hello1``, ``.B(1).C``. So a node
of ``status.nodes`` is found in the job by its name alone, and `ObservedNodes` collects, from
one snapshot of the nodes, what the mapping could not know before the workflow ran:

* how many items a fan-out has (`fanout`): the distinct indices of the nodes under it,
  once Argo has expanded it (it creates all items' nodes at once);
* which nodes were skipped (a `when` that was false) or omitted (a `depends` that was),
  phases ``Skipped``/``Omitted``: they and everything nested under them will not run;
* the pods (type ``Pod``) of each stage path with their phases and times (`pods`), for
  measured durations and progress. A node's times count from its pod's creation, so
  the time the pod waited at idlegate's gate too: `measured` takes the pods' own run
  times instead when it is given them.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from idlegate.sim.timestamps import parse_time

SKIPPED_PHASES = frozenset({"Skipped", "Omitted"})
"""Node phases that mean the node will not run."""
_ITEM = re.compile(r"\((\d+):.*?\)(?=$|[.\[(])")
_ATTEMPT = re.compile(r"^\((\d+)\)")


def node_id(workflow: str, node_name: str) -> str:
    """Argo's node id: ``<workflow>-<FNV-1a 32-bit hash of the node name>``."""
    h = 0x811C9DC5
    for byte in node_name.encode():
        h = ((h ^ byte) * 0x01000193) & 0xFFFFFFFF
    return f"{workflow}-{h}"


def canonical_path(name: str, root: str, retry_nodes: tuple[str, ...] = ()) -> str | None:
    """`name` relative to the workflow's node `root`, items reduced to their index and retry
    attempts to their Retry node (`retry_nodes`: canonical paths of the Retry nodes, longest
    first); None for a node outside the workflow's tree."""
    if not name.startswith(root):
        return None
    path = _ITEM.sub(r"(\1)", name[len(root) :])
    for retry in retry_nodes:
        if path.startswith(retry) and _ATTEMPT.match(path[len(retry) :]):
            path = retry + _ATTEMPT.sub("", path[len(retry) :])
            break
    return path


@dataclass(frozen=True)
class PodNode:
    """One pod of `status.nodes`: its id, name, phase and time."""

    id: str
    name: str
    path: str
    phase: str
    seconds: float | None
    """finishedAt - startedAt of a finished pod (its wait for a release included), else
    None."""


@dataclass
class ObservedNodes:
    """What one snapshot of ``status.nodes`` shows (see the module docstring)."""

    root: str = ""
    indices: dict[str, set[int]] = field(default_factory=dict)
    """Per fan-out path: the item indices seen under it."""
    skipped: set[str] = field(default_factory=set)
    """Canonical paths of skipped or omitted nodes."""
    pods: dict[str, list[PodNode]] = field(default_factory=dict)
    """Per stage path (items folded into their stage): its pod nodes."""

    @classmethod
    def from_nodes(cls, nodes: Mapping[str, Any] | None, workflow: str) -> ObservedNodes:
        """Read `nodes` (``status.nodes``) of the workflow named `workflow`."""
        out = cls(root=workflow)
        if not nodes:
            return out
        found = [n for n in nodes.values() if isinstance(n, Mapping)]
        root = next((n for n in found if n.get("id") == workflow), None)
        out.root = str(root.get("name", workflow)) if root else workflow
        raw_retries = [
            canonical_path(str(n.get("name", "")), out.root)
            for n in found
            if n.get("type") == "Retry"
        ]
        retries = tuple(sorted((r for r in raw_retries if r), key=len, reverse=True))
        for node in found:
            path = canonical_path(str(node.get("name", "")), out.root, retries)
            if path is None or not path:
                continue
            out._index(path)
            if node.get("phase") in SKIPPED_PHASES:
                out.skipped.add(path)
            if node.get("type") == "Pod":
                stage = _ITEM_TAIL.sub("", path)
                seconds = _seconds(node.get("startedAt"), node.get("finishedAt"))
                ids = str(node.get("id", "")), str(node.get("name", ""))
                pod = PodNode(*ids, path, str(node.get("phase", "")), seconds)
                out.pods.setdefault(stage, []).append(pod)
        return out

    def _index(self, path: str) -> None:
        for found in _INDEXED.finditer(path):
            self.indices.setdefault(path[: found.start()], set()).add(int(found.group(1)))

    def fanout(self, path: str) -> int | None:
        """Items seen under the fan-out at `path` (None: not expanded yet)."""
        seen = self.indices.get(path)
        return len(seen) if seen else None

    def is_skipped(self, path: str) -> bool:
        """True if the node at `path`, or one it is nested in, was skipped or omitted."""
        return any(path == s or path.startswith((s + ".", s + "[", s + "(")) for s in self.skipped)

    def skipped_items(self, path: str) -> int:
        """How many items of the fan-out at `path` were skipped (a `when` per item)."""
        return sum(1 for s in self.skipped if _ITEM_TAIL.sub("", s) == path and s != path)

    def measured(self, path: str, ran: Mapping[str, float] | None = None) -> tuple[float, ...]:
        """Run times of the stage's succeeded pods: with `ran` (node name -> the pod's own
        run time, `idlegate.api.external_pods.run_seconds`), theirs, a pod it lacks left out;
        without it, their nodes' times (which count a wait at the gate too)."""
        found = (
            p.seconds if ran is None else ran.get(p.name)
            for p in self.pods.get(path, ())
            if p.phase == "Succeeded"
        )
        return tuple(s for s in found if s is not None and s > 0)


_INDEXED = re.compile(r"\((\d+)\)(?=$|[.\[(])")
_ITEM_TAIL = re.compile(r"\(\d+\)$")


def succeeded_pods(nodes: Mapping[str, Any] | None) -> set[str]:
    """The names of the pod nodes of `nodes` (``status.nodes``) that succeeded."""
    return {
        str(n.get("name"))
        for n in (nodes or {}).values()
        if isinstance(n, Mapping) and n.get("type") == "Pod" and n.get("phase") == "Succeeded"
    }


def _seconds(start: Any, end: Any) -> float | None:
    a, b = parse_time(start), parse_time(end)
    return None if a is None or b is None else b - a
