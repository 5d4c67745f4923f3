"""Argo Workflows as past runs: what a history file holding them replays.

A history file (`idlegate.sim.history`) may hold Argo objects beside or instead of
idlegate's workflows. `argo_runs` reads them as a cluster would have them:

* Workflows and CronWorkflows are runs (a CronWorkflow: one run of its workflowSpec);
  WorkflowTemplates and ClusterWorkflowTemplates are what their references resolve to,
  and are runs themselves only in a file that holds no Workflow or CronWorkflow;
* a run's arrival is its `arrival` (or `submitTime`) as in any history, else its
  `metadata.creationTimestamp`, else `status.startedAt`;
* a finished run's `status.nodes` give each stage's measured pod run times (succeeded
  pods, finishedAt - startedAt, unless the pods' own run times are given: see
  `argo_run`), its JCT (`status.startedAt` to `finishedAt`) and its outcome
  (`status.phase` Succeeded or Failed).

`DurationHistory` is the history lookup of the duration rule: the next workflow of the
same template gets each stage's mean measured run time as its estimate (`duration_lookup`
builds one from runs; the operator feeds one the Argo workflows it sees finish, and the
records of its history sink).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from idlegate.sim.argo.mapping import (
    TEMPLATE_KINDS,
    WORKFLOW_KINDS,
    is_argo,
    map_workflow,
    template_index,
    workflow_name,
)
from idlegate.sim.argo.model import ArgoJob
from idlegate.sim.argo.status import ObservedNodes
from idlegate.sim.external import DEFAULT_PRIOR, DurationHistory, DurationLookup
from idlegate.sim.timestamps import parse_time

RUN_KINDS = ("Workflow", "CronWorkflow")
"""The kinds that are runs in a history file."""
OUTCOMES = ("Succeeded", "Failed")


@dataclass(frozen=True)
class ArgoRun:
    """One Argo workflow of a history: its job and what its status recorded."""

    job: ArgoJob
    name: str
    arrival: float | None
    """Epoch seconds of its creation (or start), None if not recorded."""
    measured: tuple[tuple[float, ...] | None, ...]
    """Per stage of `job.spec()`: run times of its succeeded pods, None if none."""
    jct: float | None
    outcome: str | None


def run_documents(objects: Sequence[Any]) -> list[bool]:
    """Per object: is it a run of the history (see the module docstring)?"""
    argo = [is_argo(o) and o.get("kind") in WORKFLOW_KINDS for o in objects]
    has_runs = any(a and o.get("kind") in RUN_KINDS for a, o in zip(argo, objects, strict=True))
    return [
        a and (o.get("kind") in RUN_KINDS or (not has_runs and o.get("kind") in TEMPLATE_KINDS))
        for a, o in zip(argo, objects, strict=True)
    ]


def argo_run(
    obj: Any,
    objects: Sequence[Any],
    *,
    durations: DurationLookup | None = None,
    prior: float = DEFAULT_PRIOR,
    ran: Mapping[str, float] | None = None,
) -> ArgoRun:
    """The run `obj` (an Argo workflow among `objects`, whose templates it may use).

    Its pods' run times are `ran`'s (node name -> the pod's own run time, what the
    operator read from the pods), else its nodes' times: Argo starts a node's clock when
    it creates the pod, so those count any wait before the pod ran (at idlegate's gate,
    or for a node of the cluster) as run time."""
    job = map_workflow(obj, templates=template_index(objects), durations=durations, prior=prior)
    status = obj.get("status") if isinstance(obj.get("status"), dict) else {}
    name = workflow_name(obj)
    observed = ObservedNodes.from_nodes(status.get("nodes"), name)
    measured = tuple(observed.measured(s.path, ran) or None for s in job.live_stages)
    meta = obj.get("metadata") or {}
    start, end = parse_time(status.get("startedAt")), parse_time(status.get("finishedAt"))
    arrival = parse_time(meta.get("creationTimestamp"))
    phase = status.get("phase")
    return ArgoRun(
        job=job,
        name=name,
        arrival=arrival if arrival is not None else start,
        measured=measured,
        jct=end - start if start is not None and end is not None and end >= start else None,
        outcome=phase if phase in OUTCOMES else None,
    )


def duration_lookup(runs: Sequence[ArgoRun]) -> DurationHistory:
    """A history lookup for `map_workflow(durations=...)` from `runs`: the mean measured pod
    run time of each (template key, stage); None where nothing was measured."""
    history = DurationHistory(keep=2**31)
    for run in runs:
        history.add(run.job.template_key, (s.name for s in run.job.live_stages), run.measured)
    return history
