"""What the operator reads from the API into the bridge: the DagWorkflows and their pods at
startup and after an outage, and when kopf reports a workflow.

The bridge (:class:`idlegate.operator.edge.bridge.Bridge`) changes state synchronously, one
event at a time, and never waits for the API; these coroutines do the waiting (read the
pods and the namespace of a workflow before it is admitted) and then hand the bridge what
they read.

A workflow's templates are judged by its namespace's Pod Security level and
service-account allow-list, so a namespace the API does not show the operator (403) or
cannot show now is never guessed: the admission is retried later (AdmitLaterError).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import Any

from idlegate.api.labels import LABEL_WORKFLOW
from idlegate.api.status import Phase, generation_of, judged
from idlegate.api.task_pods import (
    Owner,
    arrival_key,
    owner_of,
    pod_name,
    read_task_pod,
    task_pod,
)
from idlegate.errors import IdlegateError
from idlegate.operator.core.events import Forget, PodSeen, Schedule, SpecChanged
from idlegate.operator.core.intents import ReleaseStop
from idlegate.operator.core.tracking import StageTrack, Task, TaskState, Workflow, WorkflowKey
from idlegate.operator.edge.bridge import read_workflow
from idlegate.operator.edge.kube import ApiError, KubeApi
from idlegate.operator.edge.pools import Pools
from idlegate.operator.kinds.workflow import AdmitLaterError
from idlegate.sim.spec import parse_workflow

log = logging.getLogger(__name__)


Cached = tuple[list[dict[str, Any]], dict[str, dict[str, Any]]]
"""The task pods and the namespaces (by name) as kopf's indexes hold them."""


Restorer = Callable[[], Awaitable[Callable[[], None]]]
"""What a kind whose pods another controller creates (Airflow's) restores at a rebuild:
awaited, it reads its state (it may ask another API); the callable it gives admits it."""


async def rebuild(
    pools: Pools,
    cached: Callable[[], Cached | None] = lambda: None,
    restorers: Sequence[Restorer] = (),
) -> tuple[int, int]:
    """The state from the API as it is now, level-triggered; returns the DagWorkflows and
    pods read. At the start, every DagWorkflow is admitted with its pods, oldest first,
    before the first decision (see :mod:`idlegate.operator.kinds.workflow`). After an outage
    (:mod:`idlegate.operator.edge.watchdog`) the same reading also catches up with what the
    watches may have missed: the pods as they are now, pods deleted, workflows gone, and
    workflows created meanwhile. The ExecutorPools are listed too, and applied before any
    workflow is admitted (:meth:`Pools.restore`), so that each goes to its own pool.

    If `cached` gives kopf's indexes (kept by a standby's watches), pods and namespaces are
    not listed; they are read again after the last wait, since a pod event that came
    during one found no workflow to go to (a pod that ended then would never end). The
    `restorers` read first and admit after the DagWorkflows, with no wait
    between the admissions and the first decision, so that the pods they released before
    a restart hold their executors again."""
    known = dict(pools.workflows)  # (only these may be gone: others came after the lists)
    with_pods = _tasks_with_pods(pools)
    try:
        executor_pools = await pools.kube.list_pools()
    except ApiError as exc:  # (no CRD, or not allowed: kopf cannot watch them either)
        if exc.status not in (403, 404):
            raise
        executor_pools = []  # (the default pool serves alone)
    bodies: list[dict[str, Any]] = []
    cache = cached()
    pods, namespaces = cache if cache is not None else ([], {})
    for namespace in pools.settings.namespaces or (None,):
        bodies += await pools.kube.list_workflows(namespace)
        if cache is None:
            pods += await pools.kube.list_pods(namespace, LABEL_WORKFLOW)
    if cache is None:  # after the workflows: each one's namespace (unless being deleted)
        namespaces = await _namespaces(pools.kube)
    listed = {(owner.namespace, owner.name, owner.uid) for owner in map(owner_of, bodies)}
    for key, wf in known.items():
        if pools.workflows.get(key) is wf and (*key, wf.owner.uid) not in listed:
            pools.handle(Forget(*key, wf.owner.uid, schedule=False))
    admits = [await restore() for restore in restorers]
    if not pools.default.rebuilt:  # (the Events a replica before this one posted)
        pools.default.applier.events.recall(pools.kube, pools.settings.namespaces or (None,))
    names = {((p.get("metadata") or {}).get("namespace"), p["metadata"]["name"]) for p in pods}
    await _notice_deleted(pools, [t for t in with_pods if (t[0].key[0], t[3]) not in names])
    if cache is not None:
        pods, namespaces = cached() or cache
    pools.restore(executor_pools)  # (no await from here to the admissions: no round between)
    for pod in pods:
        pools.handle(PodSeen(pod))
    admitted = _admit_unknown(pools, bodies, pods, namespaces)
    for admit in admits:
        admit()
    pools.carry(orphans_held(pods, {uid for _, _, uid in listed}))
    pools.default.rebuilt = True  # (the operator's readiness)
    log.info(
        f"Rebuilt the state from {len(bodies)} DagWorkflow(s) and {len(pods)} pod(s)"
        f"{' (from the indexes)' if cache else ''}; {admitted} workflow(s) admitted."
    )
    pools.handle(Schedule())
    return len(bodies), len(pods)


def orphans_held(pods: Iterable[Mapping[str, Any]], workflows: set[str]) -> list[ReleaseStop]:
    """The stop's finalizer taken off the pods that carry it and whose workflow (by uid) is
    not in `workflows`: deleted while no operator ran, there is no stop of it to count."""
    found = []
    for body in pods:
        pod = read_task_pod(body)
        if pod is not None and pod.held and pod.owner_uid not in workflows:
            namespace = (body.get("metadata") or {}).get("namespace") or "default"
            found.append(ReleaseStop(Owner(namespace, pod.workflow, pod.owner_uid or ""), pod.name))
    return found


_Held = tuple[Workflow, StageTrack, Task, str, int, TaskState]
"""A task whose pod exists, as the bridge believes: (workflow, stage, task, pod name,
attempt, state)."""


def _tasks_with_pods(pools: Pools) -> list[_Held]:
    found: list[_Held] = []
    for wf in pools.workflows.values():
        for track in wf.stages:
            for task in track.tasks.values():
                if task.state in (TaskState.GATED, TaskState.RELEASED):
                    name = pod_name(wf.owner.name, track.spec.name, task.index, task.attempt)
                    found.append((wf, track, task, name, task.attempt, task.state))
    return found


async def _notice_deleted(pools: Pools, missing: list[_Held]) -> None:
    """Tell the bridge of the pods deleted while it did not watch (a watch that resumes
    after an outage may not replay a deletion). A pod not listed may still be on its way,
    created by a write of the operator's own: so only a task whose workflow has no write
    left (every write decided before the lists has ended) is read again, and its pod taken
    for deleted if it is still not there and nothing changed meanwhile."""

    def unchanged(held: _Held) -> bool:
        wf, _, task, _, attempt, state = held
        return wf.active and task.attempt == attempt and task.state is state

    current = [held for held in missing if unchanged(held)]
    settled = [held for held in current if pools.lanes.settled(held[0].key)]
    if len(settled) < len(current):
        log.info(
            "%d pod(s) not listed are being written: not read again.", len(current) - len(settled)
        )
    for held in settled:
        wf, track, task, name, attempt, state = held
        try:
            body = await pools.kube.get_pod(wf.owner.namespace, name)
        except ApiError as exc:
            if exc.status != 404:
                raise
            if unchanged(held) and pools.lanes.settled(wf.key):
                gated = state is TaskState.GATED
                gone = task_pod(wf.owner, track.spec, task.index, attempt, gated=gated)
                pools.handle(PodSeen(gone, deleted=True))
            continue
        pools.handle(PodSeen(body))


def _admit_unknown(
    pools: Pools,
    bodies: list[dict[str, Any]],
    pods: list[dict[str, Any]],
    namespaces: Mapping[Any, dict[str, Any]],
) -> int:
    """Admit the workflows no pool knows, each with its pods, oldest first."""
    by_workflow: dict[WorkflowKey, list[dict[str, Any]]] = {}
    for pod in pods:
        meta = pod.get("metadata") or {}
        workflow = (meta.get("labels") or {}).get(LABEL_WORKFLOW)
        if workflow:
            by_workflow.setdefault((meta.get("namespace", ""), workflow), []).append(pod)
    admitted = 0
    for body in sorted(bodies, key=arrival_key):
        owner = owner_of(body)
        own = by_workflow.get((owner.namespace, owner.name), ())
        try:
            wf = pools.admit(body, own, namespaces.get(owner.namespace), schedule=False)
        except AdmitLaterError as exc:
            log.warning("%s/%s is admitted later: %s", owner.namespace, owner.name, exc)
            continue
        admitted += wf is not None
    return admitted


async def _namespaces(kube: KubeApi) -> dict[str, dict[str, Any]]:
    """The namespaces by name; AdmitLaterError if the API refuses them (403) or fails in a
    way worth retrying: without the namespace, its level would be a guess."""
    try:
        return {ns["metadata"]["name"]: ns for ns in await kube.list_namespaces()}
    except ApiError as exc:
        if exc.status == 403 or exc.retryable:
            message = f"cannot read the namespace whose Pod Security level applies: {exc}"
            raise AdmitLaterError(message) from exc
        raise


def spec_changed(
    pools: Pools,
    body: Mapping[str, Any],
    pods: Iterable[Mapping[str, Any]],
    namespace: Mapping[str, Any] | None,
) -> None:
    """The spec changed (with its pods and namespace as kopf's indexes hold them): the
    pool holding it takes it in (`SpecChanged`: a change of its mutable fields, suspend,
    deadline, TTL, pod GC, is taken in, any other refused); one that was held (suspended)
    or rejected is admitted; a finished one's TTL is re-armed."""
    owner = owner_of(body)
    key = (owner.namespace, owner.name)
    wf = pools.workflows.get(key)
    if wf is not None and wf.owner.uid == owner.uid:
        try:
            spec = parse_workflow(body.get("spec"), "spec")
        except IdlegateError:
            spec = None
        pools.handle(SpecChanged(key, owner.uid, spec, generation_of(body)))
        return
    phase = (body.get("status") or {}).get("phase")
    if phase in (Phase.SUCCEEDED, Phase.FAILED):  # its TTL re-armed
        pools.carry(pools.cleanup.seen(body, pods))
    elif phase != Phase.INVALID or not judged(body):
        pools.admit(body, pods, namespace)


async def readmit(pools: Pools, owners: list[Owner]) -> None:
    """Admit again, from the API, the workflows that left a pool (it changed or went): each
    lands in its pool now, or waits for one. One that cannot be read now is admitted by
    the next rebuild (it is not known to any pool)."""
    for owner in owners:
        try:
            found = await read_workflow(pools.kube, owner)
            if found is not None:
                pools.admit(*found)
        except (AdmitLaterError, ApiError) as exc:
            pools.later[(owner.namespace, owner.name)] = owner
            log.info("%s/%s is admitted later: %s", owner.namespace, owner.name, exc)
    pools.handle(Schedule())


async def warn_missing_namespaces(kube: KubeApi, wanted: Sequence[str]) -> list[str]:
    """Log a warning for each of `wanted` (``--namespace``) that does not exist (a typo serves nothing,
    silently); returns them. The operator still serves them, should they be created."""
    if not wanted:
        return []
    try:
        existing = {ns["metadata"]["name"] for ns in await kube.list_namespaces()}
    except ApiError as exc:
        log.info("Cannot list namespaces to check --namespace (%s); not checked.", exc)
        return []
    missing = [ns for ns in wanted if ns not in existing]
    for ns in missing:
        log.warning(
            "Namespace %r does not exist (yet): nothing there to serve until it is created; "
            "check --namespace (existing: %s).",
            ns,
            ", ".join(sorted(existing)[:10]) or "none",
        )
    return missing
