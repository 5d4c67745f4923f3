"""Stopping a task's pod to give quota back (issue 82): the Kubernetes side, pure.

The state machine's stop is `idlegate.sim.reclaim_stop`'s (`Cluster.stop`); the operator
carries it out on a pod (`Core.stop_tasks`, the entry a reclaim's plan calls, and the
applier's eviction) as follows:

1. The caller names the running tasks that may be stopped, by the executor each runs on,
   in the order to try them, and how many are needed (`Evictions`). That many are asked
   at once; each one not stopped has the next one asked, until enough are stopped (a task
   that ends by itself meanwhile frees as much, and counts) or none is left.
2. Only a DagWorkflow's task pod is stopped: idlegate makes its next attempt and counts
   none of its stops as a failure. An Argo Workflow's or an Airflow task's pod is never
   stopped (`NEVER_EXTERNAL`), nor a gang stage's (`GANG_NOT_STOPPED`: its pods would be
   evicted one by one, each budget apart, and a gang runs as one).
3. Before its eviction, the stop is written on the pod (annotation ``idlegate.io/stop``:
   the queue that reclaims and why, `stop_mark`), with the finalizer ``idlegate.io/stop``
   in the same patch (`mark_patch`), so that a leader taking over mid-way finishes it: a
   running pod that carries it is evicted again, one being deleted (or failed) with it was
   stopped, and its task runs again with no failure counted. No task is stopped twice,
   none is lost.
4. The pod is evicted through the Eviction API (policy/v1, `eviction_body`) with its own
   grace period. A PodDisruptionBudget that refuses answers 429: the mark and the
   finalizer are taken off (`unmark_patch`), the pod runs on, and the next task is asked.
   A pod that ended meanwhile is not evicted.
5. Once its eviction is taken, the task is stopped in the state machine: its executor is
   free, and the task is gated again and runs as a new pod when released (attempt n+1,
   whose annotation ``idlegate.io/preempted`` counts the attempts stopped before it, so
   that a restart counts failures as its attempts less those). Its workflow gets a
   ``Preempted`` Event naming the queue that reclaimed and the work lost.
6. The finalizer keeps the stopped pod in the API until its stop is counted, as
   Kubernetes' Job controller keeps its pods until it has counted their ends: a leader
   that dies after the eviction was taken leaves the pod there, marked, for the next one
   to count (`uncounted`), however short its grace period. The operator takes it off
   (`unhold_patch`, the intent ``ReleaseStop``) once the stop is counted and recorded in
   the workflow's ``status.stopped`` (so that a restart finding the pod gone reads the stop
   there: the Job controller's order, its end recorded, then its finalizer off), once the pod
   ended by itself or its attempt was dealt with otherwise, when its workflow is deleted,
   and at a restart for a pod whose workflow is gone: every path that writes it takes it
   off, so no pod is kept for ever.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from idlegate.api.labels import ANNOTATION_STOP, FINALIZER_STOP
from idlegate.api.task_pods import TaskPod

STOP_PATH = "/metadata/annotations/" + ANNOTATION_STOP.replace("/", "~1")
"""The JSON-patch path of the stop's annotation."""
NEVER_EXTERNAL = (
    "its pod is another controller's (an Argo Workflow's, an Airflow task's), and idlegate "
    "stops only DagWorkflows' task pods"
)
"""Why a task of a workflow whose pods another controller makes is not stopped."""
GANG_NOT_STOPPED = "its stage is a gang, whose tasks run as one: it is not stopped"
"""Why a gang's task is not stopped on Kubernetes (the state machine stops a gang whole)."""


def stop_mark(queue: str, reason: str) -> str:
    """The stop's annotation: the queue that reclaims and why (JSON)."""
    return json.dumps({"queue": queue, "reason": reason}, sort_keys=True)


def read_mark(mark: str) -> tuple[str, str]:
    """(queue, reason) of a stop's annotation (one not read: both unknown)."""
    try:
        found = json.loads(mark)
        return str(found["queue"]), str(found["reason"])
    except (ValueError, TypeError, KeyError):
        return "unknown", "unknown"


def mark_patch(pod: Mapping[str, Any], mark: str) -> list[dict[str, Any]] | None:
    """The JSON patch writing the stop `mark` and its finalizer on `pod` (point 3); None if
    it carries both already."""
    meta = pod.get("metadata") or {}
    annotations, finalizers = meta.get("annotations"), meta.get("finalizers") or []
    ops: list[dict[str, Any]] = []
    if (annotations or {}).get(ANNOTATION_STOP) != mark:
        if not annotations:
            ops.append({"op": "add", "path": "/metadata/annotations", "value": {}})
        ops.append({"op": "add", "path": STOP_PATH, "value": mark})
    if not finalizers:
        ops.append({"op": "add", "path": "/metadata/finalizers", "value": [FINALIZER_STOP]})
    elif FINALIZER_STOP not in finalizers:
        ops.append({"op": "add", "path": "/metadata/finalizers/-", "value": FINALIZER_STOP})
    return ops or None


def unmark_patch(pod: Mapping[str, Any]) -> list[dict[str, Any]] | None:
    """The JSON patch taking the stop's mark and finalizer off `pod` (its eviction was
    refused); None if it carries neither."""
    annotations = (pod.get("metadata") or {}).get("annotations") or {}
    ops = [{"op": "remove", "path": STOP_PATH}] if ANNOTATION_STOP in annotations else []
    return [*ops, *(unhold_patch(pod) or [])] or None


def unhold_patch(pod: Mapping[str, Any]) -> list[dict[str, Any]] | None:
    """The JSON patch taking the stop's finalizer off `pod` (its ``test`` op guards the
    index); None if it carries none."""
    finalizers = (pod.get("metadata") or {}).get("finalizers") or []
    if FINALIZER_STOP not in finalizers:
        return None
    path = f"/metadata/finalizers/{finalizers.index(FINALIZER_STOP)}"
    return [{"op": "test", "path": path, "value": FINALIZER_STOP}, {"op": "remove", "path": path}]


def was_stopped(pod: TaskPod) -> bool:
    """`pod` was stopped (a restart's reading, point 3): its stop was asked, and it is
    being deleted, or failed, without having succeeded."""
    return pod.stop is not None and pod.phase != "Succeeded" and (pod.deleting or pod.terminal)


def uncounted(pod: TaskPod) -> bool:
    """`pod` was stopped and its stop not counted (its finalizer on it, point 6): the
    answer was lost with the leader that asked, and the next one counts it."""
    return pod.held and was_stopped(pod)


def eviction_body(namespace: str, name: str) -> dict[str, Any]:
    """The policy/v1 Eviction of a pod, with no DeleteOptions: the pod's own grace period."""
    meta = {"name": name, "namespace": namespace}
    return {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": meta}


def refused(status: int | None, message: str) -> str:
    """Why an eviction refused by the API stopped nothing (a PodDisruptionBudget's: 429)."""
    if status == 429:
        return f"a PodDisruptionBudget refused its eviction ({message})"
    if status == 404:
        return "its pod was gone"
    return f"the API server refused its eviction ({status or 'no answer'}: {message})"
