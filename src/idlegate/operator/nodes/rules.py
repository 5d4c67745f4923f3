"""Which of a pool's nodes each stage's pod may use (`NodeRules`, the pool's
`idlegate.sim.pool.Allows`): the one predicate `idlegate.api.nodes.allows`, and a resource
the pool does not count that a node lacks (a GPU stage on CPU-only nodes). The state
machine places, counts and judges a stage's task (never fits: `fits_no_node`) among the
nodes it leaves. A DagWorkflow's stage without a template is its default pod's (no
nodeSelector, no toleration: kept off tainted nodes); the stages of another controller's
pods (Argo's, Airflow's: their specs are subclasses of `WorkflowSpec`) are not read, as
their pods' own templates are not idlegate's.

Its caches live as long as the operator: each workflow's placements (by its Dag, weakly),
the placements read alike (one object each), and the nodes found for each.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import TYPE_CHECKING, Any
from weakref import WeakKeyDictionary

from idlegate.api.nodes import Node, NodeRequirements, allows
from idlegate.sim.protocol import Stage
from idlegate.sim.resources import ResourceVector
from idlegate.sim.spec import WorkflowSpec

if TYPE_CHECKING:
    from idlegate.sim.dag import Dag


@dataclass(frozen=True)
class NodeRules:
    """`idlegate.sim.pool.Allows` on a pool's nodes (`Room.nodes`, in the order told): a
    stage's task may use the nodes `allows` its pod template onto and that have each
    resource it asks of those the pool does not count (`counted`); equal rules on equal
    nodes say the same of every stage."""

    nodes: tuple[Node, ...]
    counted: tuple[str, ...]
    _memo: dict[tuple[int, tuple[tuple[str, int], ...]], tuple[int, ...]] = field(
        default_factory=dict, compare=False, repr=False
    )
    """The nodes found for each placement and resources lacking asked (one reading of the
    nodes: many stages share their workflow's templates)."""

    def __call__(self, stage: Stage) -> tuple[tuple[int, ...], str] | None:
        placement = _placements(stage.job.dag)[stage.index]
        lacks = tuple(
            (r, a) for r, a in stage.demand.items() if r not in self.counted and r != "pods"
        )
        if placement is None and not lacks:
            return None
        key = id(placement), lacks  # (a placement lives as long as its workflow's Dag)
        may = self._memo.get(key)
        if may is None:
            may = self._memo[key] = tuple(
                i
                for i, node in enumerate(self.nodes)
                if (placement is None or allows(placement, node))
                and all(node.allocatable[r] >= a for r, a in lacks)
            )
        if len(may) == len(self.nodes):
            return None
        return may, "" if may else self._why(lacks)

    def _why(self, lacks: Sequence[tuple[str, int]]) -> str:
        """Why no node is for a stage (a clause after its name: `fits_no_node`'s)."""
        asked = ResourceVector(dict(lacks))
        if lacks and not any(asked.fits(n.allocatable) for n in self.nodes):
            return (
                f"asks {asked.format()} a task, which no node of the pool has (its pods "
                "pend on its nodes for ever)"
            )
        count = len(self.nodes)
        return (
            f"may run on none of the pool's {count} node(s): its pod template's nodeSelector, "
            "required node affinity and tolerations of their taints rule out each"
            + (f", or it lacks {asked.format()}" if lacks else "")
        )


_PLACED: WeakKeyDictionary[Dag, tuple[NodeRequirements | None, ...]] = WeakKeyDictionary()
"""Each workflow's stages' `NodeRequirements` (None: no pod template), read once."""


def _placements(dag: Dag) -> tuple[NodeRequirements | None, ...]:
    """The `NodeRequirements` of each stage's pod (None: not idlegate's to read; module header)."""
    found = _PLACED.get(dag)
    if found is None:
        own = type(dag.spec) is WorkflowSpec  # (idlegate makes its pods: templates or none)
        specs = [] if dag.spec is None else [s.template for s in dag.spec.stages]
        pods: list[Any] = [({} if own else None) if t is None else t.get("spec") for t in specs]
        found = tuple(_placement(p) if isinstance(p, Mapping) else None for p in pods)
        found += (None,) * (dag.num_stages - len(found))
        _PLACED[dag] = found
    return found


_NO_TEMPLATE = NodeRequirements.of({})
"""The placement of every stage whose pod says nothing of its nodes (no template, or one
without a nodeSelector, affinity or tolerations)."""

_PLACING = ("nodeSelector", "affinity", "tolerations")
"""The fields of a pod's spec `NodeRequirements.of` reads."""


def _placement(spec: Mapping[str, Any]) -> NodeRequirements:
    """`NodeRequirements.of(spec)`, one object for the pods that place alike, so `NodeRules` finds
    their nodes once a reading, not once a workflow, and their stages share one shape of
    need (`sim.shapes`)."""
    placing = {k: spec[k] for k in _PLACING if spec.get(k)}
    if not placing:
        return _NO_TEMPLATE
    return _placement_of(json.dumps(placing, sort_keys=True, default=str))


@lru_cache(maxsize=1024)
def _placement_of(placing: str) -> NodeRequirements:
    return NodeRequirements.of(json.loads(placing))
