"""A cluster's nodes as the kube-scheduler reads them, and which of them a pod may use.

Pure: it reads Node objects as the API returns them (plain mappings) and imports neither
kopf nor kubernetes; `idlegate lint` reads nodes with it, and the operator's ledger of
their room (`idlegate.operator.nodes.ledger`) and its stages' rules
(`idlegate.operator.nodes.rules`) build on it. The rules, restated from the
kube-scheduler:

* A node offers its ``status.allocatable`` while it is Ready (condition ``Ready`` True)
  and schedulable (not cordoned: ``spec.unschedulable``): `read_node`.
* Which nodes a stage's pod may use at all is one predicate, `allows` (the
  kube-scheduler's NodeAffinity and TaintToleration filters): every pair of its
  ``nodeSelector``; one term of its required node affinity (``matchExpressions`` In,
  NotIn, Exists, DoesNotExist, Gt, Lt on the node's labels, ``matchFields`` on its name);
  a toleration for each NoSchedule or NoExecute taint.
* A pool on nodes counts cpu and memory, and each extended resource one of its nodes has
  (`counted`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from idlegate.api.labels import HOSTNAME
from idlegate.api.pool_spec import LabelSelector, Requirement, SelectorOperator, selects
from idlegate.errors import IdlegateError
from idlegate.sim.resources import ResourceVector


@dataclass(frozen=True)
class Node:
    """A Node as the room counts it."""

    name: str
    labels: Mapping[str, str]
    allocatable: ResourceVector
    usable: bool
    """Ready and not cordoned: the kube-scheduler places pods on it."""
    taints: tuple[Taint, ...] = ()

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
    spec = body.get("spec") or {}
    cordoned = bool(spec.get("unschedulable"))
    labels = {str(k): str(v) for k, v in (meta.get("labels") or {}).items()}
    taints = tuple(
        Taint(str(t.get("key") or ""), str(t.get("value") or ""), str(t.get("effect") or ""))
        for t in spec.get("taints") or ()
        if isinstance(t, Mapping)
    )
    return Node(str(meta.get("name", "")), labels, allocatable, ready and not cordoned, taints)


@dataclass(frozen=True)
class Taint:
    """A node's taint: pods that do not tolerate it are kept off (NoSchedule, NoExecute)."""

    key: str
    value: str
    effect: str


BARRING = ("NoSchedule", "NoExecute")
"""The taint effects that keep a pod off a node (PreferNoSchedule only weighs)."""


@dataclass(frozen=True)
class NodeRequirements:
    """What a pod's spec says of the nodes it may run on (`allows` reads it)."""

    selector: LabelSelector
    """Its ``nodeSelector`` (every pair: a label selector's ``matchLabels``)."""
    terms: tuple[tuple[Callable[[Node], bool], ...], ...] | None
    """Its required node affinity's terms, each a conjunction (None: it has none)."""
    tolerations: tuple[Mapping[str, Any], ...]

    @classmethod
    def of(cls, spec: Mapping[str, Any]) -> NodeRequirements:
        """A pod's spec (a template's ``spec``) as the kube-scheduler's filters read it."""
        affinity = (spec.get("affinity") or {}).get("nodeAffinity") or {}
        required = affinity.get("requiredDuringSchedulingIgnoredDuringExecution")
        terms = None
        if isinstance(required, Mapping):
            terms = tuple(_term(t) for t in required.get("nodeSelectorTerms") or ())
        pairs = {str(k): str(v) for k, v in (spec.get("nodeSelector") or {}).items()}
        selector = LabelSelector.model_construct(match_labels=pairs, match_expressions=())
        tolerations = tuple(t for t in spec.get("tolerations") or () if isinstance(t, Mapping))
        return cls(selector, terms, tolerations)


def allows(placement: NodeRequirements, node: Node) -> bool:
    """Whether a pod placed so (`NodeRequirements.of`) may run on `node`: the one predicate of the
    module header, for the placement and the never-fits check alike."""
    if not selects(placement.selector, node.labels):
        return False
    if placement.terms is not None and not any(
        term and all(match(node) for match in term) for term in placement.terms
    ):  # (the terms are ORed; an empty one matches no node)
        return False
    return all(
        any(_tolerates(t, taint) for t in placement.tolerations)
        for taint in node.taints
        if taint.effect in BARRING
    )


def _term(term: Any) -> tuple[Callable[[Node], bool], ...]:
    """A node selector term's requirements, each a test of a node: ``matchExpressions`` on
    its labels, ``matchFields`` on its name (``metadata.name``, the only field)."""
    if not isinstance(term, Mapping):
        return ()
    found = [_on(_requirement(e), False) for e in _mappings(term.get("matchExpressions"))]
    for expression in _mappings(term.get("matchFields")):
        named = expression.get("key") == "metadata.name"
        found.append(_on(_requirement(expression) if named else _never, True))
    return tuple(found)


def _on(test: Callable[[Mapping[str, str]], bool], name: bool) -> Callable[[Node], bool]:
    """`test` of a node's labels, or (`name`) of its name as the field ``metadata.name``."""

    def check(node: Node) -> bool:
        return test({"metadata.name": node.name} if name else node.labels)

    return check


def _requirement(expression: Mapping[str, Any]) -> Callable[[Mapping[str, str]], bool]:
    """A node selector requirement as a test of labels: a label selector's (`Requirement`),
    or Gt, Lt (the label an integer above or below its one value)."""
    key, op = str(expression.get("key", "")), str(expression.get("operator", ""))
    values = tuple(str(v) for v in expression.get("values") or ())
    if op in ("Gt", "Lt"):
        bound = _integer(values[0]) if len(values) == 1 else None
        if bound is None:
            return _never

        def compared(labels: Mapping[str, str]) -> bool:
            value = _integer(labels.get(key))
            return value is not None and (value > bound if op == "Gt" else value < bound)

        return compared
    if op not in SelectorOperator.__members__.values():
        return _never  # (the API server takes no other)
    # (unvalidated: an In without values, which the API server refuses, matches nothing)
    return Requirement.model_construct(
        key=key, operator=SelectorOperator(op), values=values
    ).matches


def _never(labels: Mapping[str, str]) -> bool:
    return False


def _mappings(items: Any) -> list[Mapping[str, Any]]:
    return [item for item in items or () if isinstance(item, Mapping)]


def _integer(text: str | None) -> int | None:
    try:
        return int(text) if text is not None else None
    except ValueError:
        return None


def _tolerates(toleration: Mapping[str, Any], taint: Taint) -> bool:
    """Kubernetes' ToleratesTaint: the effect (empty: any), then Exists (an empty key: any
    taint) or Equal (the default) on key and value."""
    effect = toleration.get("effect") or ""
    if effect and effect != taint.effect:
        return False
    key = toleration.get("key") or ""
    if (toleration.get("operator") or "Equal") == "Exists":
        return not key or key == taint.key
    return key == taint.key and str(toleration.get("value") or "") == taint.value


def counted(nodes: Iterable[Node], selector: LabelSelector | None) -> tuple[str, ...]:
    """The resources a pool on the nodes `selector` selects counts beyond pods: cpu and
    memory, and each extended resource (a name with a '/', nvidia.com/gpu) one of them has."""
    names = {"cpu", "memory"}
    for node in nodes:
        if selects(selector, node.labels):
            names.update(k for k in node.allocatable if "/" in k)
    return tuple(sorted(names))
