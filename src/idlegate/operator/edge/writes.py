"""What each write asks of the API: the requests that carry out one intent (a pod created,
released, evicted or its stop's finalizer taken off, a pod or a workflow deleted, a cron's
run created), an object's status and an Event, each a function that goes down to the API
client (:mod:`.kube`) and the pods' contract (:mod:`idlegate.api.task_pods`,
:mod:`idlegate.api.eviction`), never back up.

The lanes (:mod:`.lanes`) run them: an intent's as :func:`write`, whose outcome
(``Confirmed`` with the object the API returned, or ``Refused``: :func:`not_written`) is
handed back to the receiver the applier names (the pools, which route it to the core that
decided the write), where the write path ends. A condition that time resolves raises
:class:`Retry` (the lane runs the write again); retries of a failed request are the API
client's.

Pod creations and gate removals (`idlegate_pods_created_total`,
`idlegate_gate_removals_total`) are counted once each, when confirmed: by their success,
or, when an earlier try got no answer (`ApiError.lost`: it may have been carried out), by
the read after the refusal that followed (a 409, a refused guard) showing the write's
effect. A pod found on a first try's 409 is not the operator's creation.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
from collections.abc import Callable, Mapping
from typing import Any

from idlegate.api.eviction import mark_patch, unhold_patch, unmark_patch
from idlegate.api.kinds import CRON_KIND, POOL_KIND
from idlegate.api.status import FINISHED
from idlegate.api.task_pods import EXECUTOR_PATH, read_task_pod, release_patch, task_pod
from idlegate.operator.core.intents import (
    Confirmed,
    CreatePod,
    CreateWorkflow,
    DeletePod,
    DeleteWorkflow,
    EvictPod,
    Intent,
    Outcome,
    Owner,
    PatchStatus,
    Refused,
    ReleaseStop,
    RemoveGate,
)
from idlegate.operator.edge.kube import ApiError, KubeApi
from idlegate.operator.lag.pacing import Series
from idlegate.operator.metrics import Metrics

log = logging.getLogger(__name__)

HandBack = Callable[[Outcome], None]
"""Where a write's outcome goes (the pools' routing, or a bridge's core)."""


class Retry(Exception):
    """Raised by a write to run again after `Lanes.wait` (e.g. a pod name still taken)."""


class Gone(Exception):
    """The workflow a write was for no longer exists (or has another uid)."""


# -- an intent's write, and its outcome handed back --------------------------------------------


async def write(
    kube: KubeApi,
    *,
    intent: Intent,
    metrics: Metrics,
    hand_back: HandBack,
    ended: asyncio.Event | None = None,
) -> None:
    """An intent's op (`Op.run`): carried out (:func:`carry_out`), `ended` set, and the
    pod or object the API returned handed back as ``Confirmed``."""
    body = await carry_out(kube, intent, metrics)
    if ended is not None:
        ended.set()
    hand_back(Confirmed(intent, body))


def not_written(
    exc: Exception,
    *,
    intent: Intent,
    hand_back: HandBack,
    ended: asyncio.Event | None = None,
    releasing: dict[tuple[str, str], Any] | None = None,
) -> None:
    """An intent's op that failed for good (`Op.on_error`): `ended` set, a pod never made
    no longer counted as taking room (`releasing`), and ``Refused`` handed back."""
    if ended is not None:
        ended.set()
    if isinstance(intent, CreatePod) and releasing is not None:
        releasing.pop((intent.owner.namespace, intent.name), None)
    hand_back(refused(intent, exc))


def refused(intent: Intent, exc: Exception) -> Refused:
    """The outcome of a write that failed for good with `exc`."""
    if isinstance(exc, Gone):
        return Refused(intent, 404, "NotFound", "the workflow is gone", gone=True)
    if isinstance(exc, ApiError):
        permanent = not exc.retryable and exc.status != 409
        return Refused(intent, exc.status or None, exc.reason, exc.message, permanent=permanent)
    return Refused(intent, None, type(exc).__name__, str(exc))


async def carry_out(kube: KubeApi, intent: Intent, metrics: Metrics) -> Mapping[str, Any] | None:
    """The requests `intent` asks for; the object the API returned (None: none)."""
    match intent:
        case CreatePod():
            return await create_pod(kube, intent, metrics)
        case RemoveGate():
            return await release_pod(kube, intent, metrics)
        case EvictPod():
            return await evict_pod(kube, intent)
        case ReleaseStop():
            return await release_stop(kube, intent)
        case DeletePod():
            await kube.delete_pod(intent.owner.namespace, intent.name)
            return None
        case DeleteWorkflow():
            await delete_workflow(kube, intent)
            return None
        case CreateWorkflow():
            return await create_workflow(kube, intent)
    raise TypeError(f"not an intent the applier knows: {intent!r}")


# -- pods --------------------------------------------------------------------------------------


async def create_pod(kube: KubeApi, intent: CreatePod, metrics: Metrics) -> Mapping[str, Any]:
    """Create the pod (after checking its workflow is there, if asked); one found under its
    name is taken if it is this attempt's, and released if it should be."""
    owner, name = intent.owner, intent.name
    if intent.owner_check and await workflow(kube, owner) is None:
        raise Gone()
    try:
        body = await kube.create_pod(owner.namespace, intent.manifest)
    except ApiError as exc:
        if exc.status != 409:
            raise
        lost = exc.lost
    else:
        metrics.pods_created.inc()
        return body
    body = await kube.get_pod(owner.namespace, name)
    info = read_task_pod(body)
    if info is None or info.owner_uid != owner.uid or info.deleting:
        raise Retry(f"pod {name} exists and is not this workflow's (yet)")
    if lost:  # a try whose answer was lost made it
        metrics.pods_created.inc()
    if intent.executor is not None and info.gated:
        return await patch_gate(kube, owner, name, body, intent.executor, metrics)
    return body


async def release_pod(
    kube: KubeApi, intent: RemoveGate, metrics: Metrics
) -> Mapping[str, Any] | None:
    """Remove a DagWorkflow's task pod's gate, recording its executor (and the node it is
    pinned to); a pod gone is created released. Another controller's: `release_argo`."""
    owner, name = intent.owner, intent.name
    if intent.spec is None:
        return await release_argo(kube, intent, metrics)
    gated = task_pod(owner, intent.spec, intent.index, intent.attempt, gated=True)
    try:
        return await patch_gate(kube, owner, name, gated, intent.executor, metrics, intent.host)
    except ApiError as exc:
        if exc.status == 404:  # it went away: create it released (its workflow there?)
            create = dataclasses.replace(intent.released, owner_check=True)
            return await create_pod(kube, create, metrics)
        if exc.status not in (409, 422):
            raise
        lost = exc.lost
    # the guarded removal was refused: the gates moved (patch again), or ours is gone
    current = await kube.get_pod(owner.namespace, name)
    info = read_task_pod(current)
    if release_patch(current, intent.executor):
        return await patch_gate(kube, owner, name, current, intent.executor, metrics, intent.host)
    if info is not None and info.executor == intent.executor:
        if lost:  # a try whose answer was lost removed it
            metrics.gate_removals.inc()
        return current
    add = [{"op": "add", "path": EXECUTOR_PATH, "value": str(intent.executor)}]
    return await kube.patch_pod(owner.namespace, name, add)


async def patch_gate(
    kube: KubeApi,
    owner: Owner,
    name: str,
    pod: Mapping[str, Any],
    executor: int | None,
    metrics: Metrics,
    host: str | None = None,
) -> dict[str, Any]:
    """The guarded patch that removes the gate of `pod` (as read, or as made)."""
    ops = release_patch(pod, executor, host)
    if not ops:
        raise ApiError(422, "Invalid", f"pod {name} of the operator's making has no gate")
    body = await kube.patch_pod(owner.namespace, name, ops)
    metrics.gate_removals.inc()
    return body


async def release_argo(
    kube: KubeApi, intent: RemoveGate, metrics: Metrics
) -> Mapping[str, Any] | None:
    """Release another controller's pod (Argo's, Airflow's): read, then a guarded patch,
    again while the gates move under the guard."""
    namespace, name, executor = intent.owner.namespace, intent.name, intent.executor
    for _ in range(3):
        try:
            pod = await kube.get_pod(namespace, name)
            ops = release_patch(pod, executor, intent.host)
            if not ops:
                return pod
            body = await kube.patch_pod(namespace, name, ops)
            how = "unscheduled" if executor is None else "scheduled"
            airflow = intent.owner.kind != "Workflow"  # (Argo's; Airflow's: DagRun, Pod)
            (metrics.airflow_released if airflow else metrics.argo_released).labels(how).inc()
            return body
        except ApiError as exc:
            if exc.status == 404:
                return None
            if exc.status not in (409, 422):
                raise
    return None


async def evict_pod(kube: KubeApi, intent: EvictPod) -> Mapping[str, Any] | None:
    """As `EvictPod` says: the stop marked on the running pod, then its eviction; a
    PodDisruptionBudget's refusal (429) takes the mark off again."""
    namespace, name = intent.owner.namespace, intent.name
    pod = await kube.get_pod(namespace, name)
    info = read_task_pod(pod)
    if info is None or info.terminal or info.deleting:
        return pod  # (ended first, or on its way out already)
    if (marking := mark_patch(pod, intent.stop)) is not None:
        pod = await kube.patch_pod(namespace, name, marking)
    try:
        await kube.evict_pod(namespace, name)
    except ApiError as exc:
        if exc.status == 429 and (unmarking := unmark_patch(pod)) is not None:
            with contextlib.suppress(ApiError):  # (a mark left: evicted by a restart)
                await kube.patch_pod(namespace, name, unmarking)
        raise
    return pod


async def release_stop(kube: KubeApi, intent: ReleaseStop) -> Mapping[str, Any] | None:
    """As `ReleaseStop` says: the stop's finalizer off, read again while the guard is
    refused (the finalizers moved); a pod gone, or without it, is done."""
    namespace, name = intent.owner.namespace, intent.name
    for _ in range(3):
        try:
            pod = await kube.get_pod(namespace, name)
            if (ops := unhold_patch(pod)) is None:
                return pod
            return await kube.patch_pod(namespace, name, ops)
        except ApiError as exc:
            if exc.status == 404:
                return None
            if exc.status not in (409, 422):
                raise
    raise Retry(f"the finalizers of pod {name} kept changing")


# -- workflows -------------------------------------------------------------------------------


async def workflow(kube: KubeApi, owner: Owner) -> Mapping[str, Any] | None:
    """The workflow `owner` as it is now; None if it is gone (or has another uid)."""
    body = await kube.get_workflow(owner.namespace, owner.name)
    same = body is not None and (body.get("metadata") or {}).get("uid") == owner.uid
    return body if same else None


async def delete_workflow(kube: KubeApi, intent: DeleteWorkflow) -> None:
    """Delete the workflow if it is still the one meant, and finished (or `running_too`)."""
    owner = intent.owner
    body = await workflow(kube, owner)
    finished = ((body or {}).get("status") or {}).get("phase") in FINISHED
    if body is None or not (finished or intent.running_too):
        return  # gone, re-created under its name, or running again
    await kube.delete_workflow(owner.namespace, owner.name)
    log.info("Deleted %s/%s: %s.", owner.namespace, owner.name, intent.why)


async def create_workflow(kube: KubeApi, intent: CreateWorkflow) -> Mapping[str, Any] | None:
    """Create a cron's run; a 409 is success (made before: the same one, not a second). Its
    follow-ups (`CreateWorkflow.then`) are the receiver's, once it is confirmed."""
    try:
        return await kube.create_workflow(intent.owner.namespace, dict(intent.body))
    except ApiError as exc:
        if exc.status != 409:
            raise
        return None


# -- status and Events -------------------------------------------------------------------------


async def send_status(kube: KubeApi, intent: PatchStatus, now: float) -> Outcome:
    """Write an object's status as it reads at `now` (a live one's, or the dict given);
    its outcome (a 404, deleted meanwhile, is done)."""
    owner = intent.owner
    try:
        status = intent.status
        sent = dict(status) if isinstance(status, Mapping) else status.read(now)
        patches = {CRON_KIND: kube.patch_cron_status, POOL_KIND: kube.patch_pool_status}
        patch = patches.get(owner.kind, kube.patch_workflow_status)
        await patch(owner.namespace, owner.name, sent)
        return Confirmed(intent, sent)
    except ApiError as exc:  # (404: deleted meanwhile)
        return Confirmed(intent) if exc.status == 404 else refused(intent, exc)
    except Exception as exc:
        log.exception("Could not write the status of %s.", owner.name)
        return refused(intent, exc)


async def post_event(kube: KubeApi, *, owner: Owner, series: Series, post: bool) -> None:
    """Post `series`' Event on `owner` (`post`), or write its count; an equal one there
    (409: posted before) is done, any other failure logged: an Event never fails a write."""
    try:
        if post:
            await kube.create_event(owner.namespace, series.posted())
            return
        series.pending, series.patched = False, asyncio.get_running_loop().time()
        await kube.patch_event(owner.namespace, series.name, series.patch())
    except ApiError as exc:
        if exc.status != 409:  # (409: an equal one is there: posted before)
            log.warning("Event %s on %s not written: %s", series.name, owner.name, exc)
