"""Task pods: deterministic names, manifests from the stage's template, and reading them back.

A task pod is one attempt of one task of one stage, named by (workflow, stage, task index,
attempt) only, so a restarted operator finds the pods it created. What it needs to rebuild
its state is on the pod: labels (workflow, stage, task), annotations (attempt, executor
slot), the gate, the phase and the ownerReference.

A DagWorkflow's pods, as :mod:`idlegate.api.argo_pods` reads Argo's: pure, no API calls;
the operator builds, releases and reads its pods with these.
"""

from __future__ import annotations

import copy
import hashlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from idlegate.api.kinds import API_VERSION, KIND
from idlegate.api.labels import (
    ANNOTATION_ATTEMPT,
    ANNOTATION_EXECUTOR,
    ANNOTATION_PREEMPTED,
    ANNOTATION_STOP,
    DEFAULT_SERVICE_ACCOUNT,
    FINALIZER_STOP,
    GATE,
    HOSTNAME,
    LABEL_STAGE,
    LABEL_TASK,
    LABEL_WORKFLOW,
)
from idlegate.sim.resources import overcommittable
from idlegate.sim.spec import StageSpec
from idlegate.sim.timestamps import from_datetime, timestamp_precision

MAX_POD_NAME = 63
"""Pod names are kept to a DNS label, so that the pod's hostname is its whole name."""
EXECUTOR_PATH = "/metadata/annotations/" + ANNOTATION_EXECUTOR.replace("/", "~1")
"""The JSON-patch path of the executor annotation."""
TERMINAL_PHASES = frozenset({"Succeeded", "Failed"})
DEFAULT_TEMPLATE: dict[str, Any] = {
    "metadata": {"labels": {"app.kubernetes.io/part-of": "idlegate"}},
    "spec": {
        "securityContext": {
            "runAsNonRoot": True,
            "runAsUser": 65534,
            "runAsGroup": 65534,
            "seccompProfile": {"type": "RuntimeDefault"},
        },
        "containers": [
            {
                "name": "task",
                "image": "busybox:1.36.1",
                "command": ["sleep", "$(TASK_DURATION_SECONDS)"],
                "resources": {
                    "requests": {"cpu": "10m", "memory": "8Mi"},
                    "limits": {"cpu": "100m", "memory": "16Mi"},
                },
                "securityContext": {
                    "allowPrivilegeEscalation": False,
                    "readOnlyRootFilesystem": True,
                    "capabilities": {"drop": ["ALL"]},
                },
            }
        ],
    },
}
"""The template of a stage without one: sleep for the task duration (as the samples do)."""


@dataclass(frozen=True, slots=True)
class Owner:
    """The object a pod, a run or an Event belongs to (for ownerReferences, labels, Events)."""

    namespace: str
    name: str
    uid: str
    kind: str = KIND
    """Its kind: a DagWorkflow, or a DagCronWorkflow (the owner of its runs)."""
    api_version: str = API_VERSION
    """Its apiVersion (another API's for an Argo Workflow, whose Events the operator posts)."""
    namespaced: bool = True
    """False for a cluster-scoped object (an ExecutorPool): its Events go in `namespace`
    (``default``, as Kubernetes' own cluster-scoped ones), its reference names none, and
    an empty `uid` is left out."""

    def object_reference(self) -> dict[str, Any]:
        """The involvedObject of an Event about the object."""
        if not self.namespaced:
            reference = {"apiVersion": self.api_version, "kind": self.kind, "name": self.name}
            return {**reference, **({"uid": self.uid} if self.uid else {})}
        return {
            "apiVersion": self.api_version,
            "kind": self.kind,
            "namespace": self.namespace,
            "name": self.name,
            "uid": self.uid,
        }

    def reference(self) -> dict[str, Any]:
        """An ownerReference (no namespace: the same one's): controller, and blocking the
        owner's foreground deletion."""
        ref = self.object_reference()
        del ref["namespace"]
        return {**ref, "controller": True, "blockOwnerDeletion": True}


def pod_name(workflow: str, stage: str, index: int, attempt: int = 0) -> str:
    """``<workflow>-<stage>-<index>`` (``-r<attempt>`` for retries), at most 63 characters:
    a longer one keeps a prefix and ends in a hash of the full name (unique, and stable)."""
    full = f"{workflow}-{stage}-{index}" + (f"-r{attempt}" if attempt else "")
    if len(full) <= MAX_POD_NAME:
        return full
    digest = hashlib.sha256(full.encode()).hexdigest()[:10]
    prefix = full[: MAX_POD_NAME - len(digest) - 1].rstrip("-.")
    return f"{prefix}-{digest}"


def format_seconds(seconds: float) -> str:
    """A duration as a plain decimal that `sleep` accepts: 5, 2.2, 0.25 (never 1e-05)."""
    return f"{seconds:.6f}".rstrip("0").rstrip(".") or "0"


def task_pod(
    owner: Owner,
    stage: StageSpec,
    index: int,
    attempt: int = 0,
    *,
    gated: bool = True,
    executor: int | None = None,
    host: str | None = None,
    preempted: int = 0,
) -> dict[str, Any]:
    """The manifest of one task pod, built from the stage's template (or the default one).

    The template's labels and annotations are kept, the operator's win on conflict; its
    own scheduling gates are kept (the operator only ever removes its own); without a
    template, a stage's ``resources`` are the task container's requests;
    ``restartPolicy`` is forced to ``Never`` (a retry is a new pod); the task environment
    replaces same-named variables in every container and init container; a template that
    names no service account (or ``default``) runs as ``default`` with no token mounted.
    With `host`, the pod is pinned to that node as `release_patch` pins a gated one;
    `preempted`: how many of the task's attempts before it were stopped (an annotation).
    """
    template = copy.deepcopy(stage.template) if stage.template else copy.deepcopy(DEFAULT_TEMPLATE)
    if not stage.template and stage.resources is not None:
        # the pod requests what the stage says one task does: what idlegate counts is what
        # the kube-scheduler places (a template's pods request what its containers say)
        asked = dict(stage.resources)
        # (an extended resource's limit must equal its request, or the API server refuses
        # the pod: `sim.resources.overcommittable`)
        fixed = {n: q for n, q in asked.items() if not overcommittable(n)}
        resources = {"requests": asked, **({"limits": fixed} if fixed else {})}
        template["spec"]["containers"][0]["resources"] = resources
    meta = template.get("metadata") or {}
    spec = template.get("spec") or {}
    labels = {
        **(meta.get("labels") or {}),
        LABEL_WORKFLOW: owner.name,
        LABEL_STAGE: stage.name,
        LABEL_TASK: str(index),
    }
    annotations = {**(meta.get("annotations") or {}), ANNOTATION_ATTEMPT: str(attempt)}
    if executor is not None:
        annotations[ANNOTATION_EXECUTOR] = str(executor)
    if preempted:
        annotations[ANNOTATION_PREEMPTED] = str(preempted)
    env = {  # every container's
        "TASK_DURATION_SECONDS": format_seconds(stage.task_duration_seconds),
        "TASK_INDEX": str(index),
        "STAGE_NAME": stage.name,
        "WORKFLOW_NAME": owner.name,
    }
    _fill_spec(spec, env, gated)
    if host is not None:  # (a host the template names wins, as in `release_patch`)
        spec["nodeSelector"] = {HOSTNAME: host, **(spec.get("nodeSelector") or {})}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": pod_name(owner.name, stage.name, index, attempt),
            "namespace": owner.namespace,
            "labels": labels,
            "annotations": annotations,
            "ownerReferences": [owner.reference()],
        },
        "spec": spec,
    }


def _fill_spec(spec: dict[str, Any], env: dict[str, str], gated: bool) -> None:
    """The operator's part of a task pod's spec, in place (see `task_pod`)."""
    for key in ("containers", "initContainers"):
        for container in spec.get(key) or []:
            kept = [e for e in container.get("env") or [] if e.get("name") not in env]
            container["env"] = kept + [{"name": k, "value": v} for k, v in env.items()]
    spec["restartPolicy"] = "Never"
    account = spec.get("serviceAccountName") or spec.get("serviceAccount")
    if account in (None, "", DEFAULT_SERVICE_ACCOUNT):
        spec["serviceAccountName"] = DEFAULT_SERVICE_ACCOUNT
        spec.setdefault("automountServiceAccountToken", False)
    gates = [g for g in spec.get("schedulingGates") or [] if g.get("name") != GATE]
    if gated:
        gates.append({"name": GATE})
    if gates:
        spec["schedulingGates"] = gates
    else:
        spec.pop("schedulingGates", None)


def release_patch(
    pod: Mapping[str, Any], executor: int | None, host: str | None = None
) -> list[dict[str, Any]] | None:
    """The JSON patch releasing `pod` onto `executor` (None: unscheduled, no slot recorded),
    or None if it carries no gate of ours. It removes only our entry of
    ``spec.schedulingGates``; a ``test`` op guards its index, so a concurrent change of the
    gates makes the patch fail (422) instead of removing someone else's gate. With `host`
    it pins the pod to that node (a ``kubernetes.io/hostname`` nodeSelector, which the API
    server lets a gated pod gain, as Kueue's topology-aware scheduling does), unless its
    nodeSelector names a host already."""
    gates = (pod.get("spec") or {}).get("schedulingGates") or []
    index = next((i for i, g in enumerate(gates) if g.get("name") == GATE), None)
    if index is None:
        return None
    ops: list[dict[str, Any]] = []
    if executor is not None:
        if not (pod.get("metadata") or {}).get("annotations"):
            ops.append({"op": "add", "path": "/metadata/annotations", "value": {}})
        ops.append({"op": "add", "path": EXECUTOR_PATH, "value": str(executor)})
    selector = (pod.get("spec") or {}).get("nodeSelector")
    if host is not None and not (selector or {}).get(HOSTNAME):
        path, value = ("/spec/nodeSelector", {HOSTNAME: host})
        if selector:
            path, value = "/spec/nodeSelector/" + HOSTNAME.replace("/", "~1"), host
        ops.append({"op": "add", "path": path, "value": value})
    ops += [
        {"op": "test", "path": f"/spec/schedulingGates/{index}/name", "value": GATE},
        {"op": "remove", "path": f"/spec/schedulingGates/{index}"},
    ]
    return ops


@dataclass(frozen=True, slots=True)
class TaskPod:
    """What the operator reads from one of its pods."""

    name: str
    workflow: str
    stage: str
    index: int
    attempt: int
    owner_uid: str | None
    gated: bool
    executor: int | None
    phase: str
    deleting: bool
    reason: str
    """Why a failed pod failed: the pod's reason, else its container's (e.g. Error, exit 1)."""
    ran: tuple[float, float] | None = None
    """A succeeded pod's (start, finish) in wall epoch seconds (`ran`)."""
    preempted: int = 0
    """How many of its task's attempts before it were stopped, not failed."""
    stop: str | None = None
    """Its stop asked (`idlegate.api.eviction`: queue and why), if one was."""
    started: float | None = None
    """A pod not succeeded: when it started to run, in wall epoch seconds (its first
    container's start, running or ended, else the pod's ``startTime``; None: not said), so
    that a restart counts the work a stop of it loses from then, not from the restart."""
    deleted: float | None = None
    """Its ``deletionTimestamp`` in wall epoch seconds (None: not being deleted)."""
    held: bool = False
    """It carries the stop's finalizer (`labels.FINALIZER_STOP`): its stop was asked and
    is not counted yet (`idlegate.api.eviction`)."""

    @property
    def terminal(self) -> bool:
        return self.phase in TERMINAL_PHASES


def _int(value: Any) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def failure_reason(pod: Mapping[str, Any]) -> str:
    """Why a pod failed, from its status."""
    status = pod.get("status") or {}
    if status.get("reason"):
        message = status.get("message")
        return f"{status['reason']}: {message}" if message else str(status["reason"])
    for cs in status.get("containerStatuses") or []:
        terminated = (cs.get("state") or {}).get("terminated")
        if terminated and terminated.get("exitCode") not in (None, 0):
            reason = terminated.get("reason") or "Error"
            return (
                f"{reason} (container {cs.get('name')} exited with code {terminated['exitCode']})"
            )
    return "Failed"


def ran(pod: Mapping[str, Any]) -> tuple[float, float] | None:
    """When a finished pod ran, (start, finish) in wall epoch seconds: its first container's
    start and its last one's finish (init containers included); None when its status does
    not say (not reported, or a run shorter than their 1 s precision)."""
    status = pod.get("status") or {}
    states = [
        (cs.get("state") or {}).get("terminated") or {}
        for key in ("initContainerStatuses", "containerStatuses")
        for cs in status.get(key) or []
    ]
    try:
        starts = [from_datetime(t["startedAt"]) for t in states if t.get("startedAt")]
        ends = [from_datetime(t["finishedAt"]) for t in states if t.get("finishedAt")]
    except (TypeError, ValueError):
        return None
    if not starts or not ends or max(ends) <= min(starts):
        return None
    return min(starts), max(ends)


def running_since(pod: Mapping[str, Any]) -> float | None:
    """When a pod started to run, in wall epoch seconds: its containers' earliest start
    (running, or ended: a stopped pod's), else its ``startTime``; None when its status says
    neither."""
    status = pod.get("status") or {}
    states = [cs.get("state") or {} for cs in status.get("containerStatuses") or []]
    starts = [(s.get("running") or s.get("terminated") or {}).get("startedAt") for s in states]
    try:
        found = [from_datetime(t) for t in starts if t]
        if not found and status.get("startTime"):
            found = [from_datetime(status["startTime"])]
    except (TypeError, ValueError):
        return None
    return min(found) if found else None


def _stamp(value: Any) -> float | None:
    try:
        return from_datetime(value) if value else None
    except (TypeError, ValueError):
        return None


def read_task_pod(pod: Mapping[str, Any]) -> TaskPod | None:
    """The task identity and state of `pod`, or None if it is not a well-formed task pod."""
    meta = pod.get("metadata") or {}
    labels = meta.get("labels") or {}
    annotations = meta.get("annotations") or {}
    index = _int(labels.get(LABEL_TASK))
    workflow, stage = labels.get(LABEL_WORKFLOW), labels.get(LABEL_STAGE)
    if index is None or not workflow or not stage:
        return None
    attempt = _int(annotations.get(ANNOTATION_ATTEMPT)) or 0
    refs = meta.get("ownerReferences") or []
    owners = [r.get("uid") for r in refs if r.get("kind") == KIND and r.get("controller")]
    gates = (pod.get("spec") or {}).get("schedulingGates") or []
    phase = (pod.get("status") or {}).get("phase") or "Pending"
    return TaskPod(
        name=meta.get("name", ""),
        workflow=workflow,
        stage=stage,
        index=index,
        attempt=attempt,
        owner_uid=owners[0] if owners else None,
        gated=any(g.get("name") == GATE for g in gates),
        executor=_int(annotations.get(ANNOTATION_EXECUTOR)),
        phase=phase,
        deleting=bool(meta.get("deletionTimestamp")),
        reason=failure_reason(pod) if phase == "Failed" else "",
        ran=ran(pod) if phase == "Succeeded" else None,
        preempted=_int(annotations.get(ANNOTATION_PREEMPTED)) or 0,
        stop=annotations.get(ANNOTATION_STOP),
        started=None if phase == "Succeeded" else running_since(pod),
        deleted=_stamp(meta.get("deletionTimestamp")),
        held=FINALIZER_STOP in (meta.get("finalizers") or ()),
    )


def arrival_key(body: Mapping[str, Any]) -> tuple[str, str]:
    """A workflow's order of arrival: its creation stamp, then its name."""
    meta = body.get("metadata") or {}
    return (meta.get("creationTimestamp") or "", meta.get("name", ""))


def owner_of(body: Mapping[str, Any]) -> Owner:
    """The workflow object `body` as an owner of pods and Events."""
    meta = body["metadata"]
    return Owner(meta.get("namespace") or "default", meta["name"], meta.get("uid", ""))


def arrival_of(created: Any, admitted: float, from_wall: Callable[[float], float]) -> float:
    """The workflow's arrival: its ``metadata.creationTimestamp`` on the operator's clock
    (`from_wall`: `Clock.from_wall`, a wall-clock epoch time on that clock), at
    most `admitted` (when the operator first saw it, persisted as ``status.startTime``: the
    same after a restart). The API server stamps whole seconds: the end of the stamped
    second is taken (less than 1 s after the true creation)."""
    if not isinstance(created, str):
        return admitted
    try:
        wall = from_datetime(created) + timestamp_precision(created)
    except ValueError:
        return admitted
    return min(admitted, from_wall(wall))
