"""Argo's pods as idlegate sees them: which are gated, and which node each one runs.

Argo's controller creates one pod per node that runs a pod template, labelled
``workflows.argoproj.io/workflow: <workflow>`` and annotated
``workflows.argoproj.io/node-name`` (``<workflow>.extract``, ``<workflow>[1].b(0:x)``,
``<workflow>.a(1)`` for a retry attempt) and ``workflows.argoproj.io/node-id``. Its other
pods (the agent of ``http`` and ``plugin`` templates, the executor of a ``resource``
template's cleanup) carry no node name: they are no stage's, and idlegate leaves them
alone.

* `gates_with_ours` is what the admission webhook does to a pod at creation: the pod's
  scheduling gates with ``idlegate.io/release`` appended, or None when nothing is to
  change (not a pod of a node, or gated already). Pure, so the webhook is idempotent.
* `ArgoPod.of` reads a pod: its workflow, node name and id, whether idlegate's gate
  is still on it, the executor slot it was released on and, once it succeeded, how long
  it ran (`run_seconds`); `ArgoPod.stage_key` is its
  stage's path as the mapping names stages (`canonical_path`; items and retry attempts
  folded into their stage), so the pod finds its stage.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from idlegate.api.external_pods import run_seconds, with_our_gate
from idlegate.api.labels import ANNOTATION_EXECUTOR, GATE
from idlegate.sim.argo.status import canonical_path

WORKFLOW_LABEL = "workflows.argoproj.io/workflow"
"""Label of every pod Argo creates for a workflow: the workflow's name."""
NODE_NAME = "workflows.argoproj.io/node-name"
"""Annotation of a node's pod: the node's full name."""
NODE_ID = "workflows.argoproj.io/node-id"
"""Annotation of a node's pod: the node's id (its key in ``status.nodes``)."""


def _meta(pod: Mapping[str, Any]) -> Mapping[str, Any]:
    meta = pod.get("metadata")
    return meta if isinstance(meta, Mapping) else {}


def _node_name(pod: Mapping[str, Any]) -> str | None:
    """The pod's node name, if it is a node's pod of an Argo workflow."""
    meta = _meta(pod)
    labels = meta.get("labels") if isinstance(meta.get("labels"), Mapping) else {}
    notes = meta.get("annotations") if isinstance(meta.get("annotations"), Mapping) else {}
    name = notes.get(NODE_NAME)
    return name if labels.get(WORKFLOW_LABEL) and isinstance(name, str) and name else None


def _executor(value: Any) -> int | None:
    return int(value) if isinstance(value, str) and value.isdigit() else None


def gates_with_ours(pod: Mapping[str, Any]) -> list[dict[str, Any]] | None:
    """`with_our_gate` for a node's pod of an Argo workflow; None for any other pod."""
    return None if _node_name(pod) is None else with_our_gate(pod)


@dataclass(frozen=True)
class ArgoPod:
    """One node's pod of an Argo workflow, as read from the pod."""

    namespace: str
    name: str
    workflow: str
    node_name: str
    node_id: str
    gated: bool
    """idlegate's gate is still on it (not released yet)."""
    phase: str
    """The pod's status.phase (Pending if none yet)."""
    executor: int | None = None
    """The executor slot idlegate released it on (``idlegate.io/executor``), if it did."""
    ran: float | None = None
    """A succeeded pod's run time in seconds (`run_seconds`), None if its status does not
    tell it."""

    @classmethod
    def of(cls, pod: Mapping[str, Any]) -> ArgoPod | None:
        """The pod as a node's pod of an Argo workflow, or None if it is not one."""
        node = _node_name(pod)
        if node is None:
            return None
        meta = _meta(pod)
        notes = meta.get("annotations") or {}
        spec = pod.get("spec") if isinstance(pod.get("spec"), Mapping) else {}
        status = pod.get("status") if isinstance(pod.get("status"), Mapping) else {}
        gates = spec.get("schedulingGates") or []
        phase = str(status.get("phase") or "Pending")
        return cls(
            namespace=str(meta.get("namespace", "")),
            name=str(meta.get("name", "")),
            workflow=str(meta["labels"][WORKFLOW_LABEL]),
            node_name=node,
            node_id=str(notes.get(NODE_ID, "")),
            gated=any(isinstance(g, Mapping) and g.get("name") == GATE for g in gates),
            phase=phase,
            executor=_executor(notes.get(ANNOTATION_EXECUTOR)),
            ran=run_seconds(pod) if phase == "Succeeded" else None,
        )

    @property
    def task_key(self) -> str | None:
        """The node's place in the workflow as the mapping names it, retry attempts left
        out: ``.b(2)`` for item 2 of task b, ``.a`` for any attempt of a retried task a
        (Argo names attempts ``<node>(<n>)``, items ``<node>(<i>:<item>)``); None outside
        the workflow's tree."""
        return canonical_path(_ATTEMPT.sub("", self.node_name), self.workflow)

    @property
    def stage_key(self) -> str | None:
        """The path of its stage (`ArgoStage.path`): `task_key` without the item index."""
        path = self.task_key
        return None if path is None else _ITEM_TAIL.sub("", path)

    @property
    def run_key(self) -> str:
        """Its node's name: what the history's records key run times by."""
        return self.node_name

    @property
    def terminal(self) -> bool:
        """It has ended (Succeeded or Failed)."""
        return self.phase in ("Succeeded", "Failed")


_ATTEMPT = re.compile(r"\(\d+\)(?=$|[.\[(])")
"""A retry attempt's suffix: a number in parentheses, without the item's colon."""
_ITEM_TAIL = re.compile(r"\(\d+\)$")
