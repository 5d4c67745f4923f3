"""The applier: carries out the core's intents against the API and hands back outcomes.

The core (:mod:`idlegate.operator.core`) never writes; it returns intents
(:mod:`idlegate.operator.core.intents`). :meth:`Applier.apply` queues each on the
:class:`~idlegate.operator.edge.actuator.Actuator` lane the intent names, so one object's
writes keep the order given and different objects' writes run side by side: one
workflow's blocked write never blocks another's. Each write is retried as the actuator
retries (no answer, 429 with its Retry-After, 5xx; woken by the API's return), and its
end becomes an outcome for the core (`on_outcome`): :class:`Confirmed` with the object
the API returned, or :class:`Refused` with the API's status. Pod creations and gate
removals are counted from their confirmations (:class:`~idlegate.operator.edge.writes.PodCounts`),
Events are posted by the :class:`~idlegate.operator.edge.events.EventRecorder`.

What makes a pod write idempotent (names per attempt, a 409 of the same owner is
success, a guarded gate removal re-read when refused) is told in the intents' docstrings
and done here; a write that waits for another lane (``after_status``) waits for the end of
the workflow's latest status write given before it.
"""

from __future__ import annotations

import asyncio
import copy
import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any

from idlegate.api.labels import ANNOTATION_EXECUTOR, GATE
from idlegate.operator.core.intents import (
    Confirmed,
    CreatePod,
    DeletePod,
    DeleteWorkflow,
    Intent,
    Outcome,
    PatchStatus,
    PostEvent,
    Refused,
    RemoveGate,
)
from idlegate.operator.core.pods import Owner, read_task_pod, release_patch
from idlegate.operator.edge.actuator import Actuator, Op, Priority, Retry
from idlegate.operator.edge.events import EventRecorder
from idlegate.operator.edge.kube import ApiError, KubeApi
from idlegate.operator.edge.writes import PodCounts, Write

log = logging.getLogger(__name__)

FINISHED = ("Succeeded", "Failed")
_EXECUTOR_PATH = "/metadata/annotations/" + ANNOTATION_EXECUTOR.replace("/", "~1")


class Applier:
    """Queues intents on the actuator's lanes; reports each write's end to `on_outcome`."""

    def __init__(
        self,
        actuator: Actuator,
        events: EventRecorder,
        counts: PodCounts,
        on_outcome: Callable[[Outcome], None],
        *,
        status_interval: float = 0.0,
    ) -> None:
        self.actuator = actuator
        self.events = events
        self.counts = counts
        self.on_outcome = on_outcome
        self.status_interval = status_interval
        """Seconds a PatchStatus that is not urgent waits, to be sent with later ones."""
        self._status: dict[tuple[str, str], _StatusLane] = {}

    def apply(self, intents: Iterable[Intent]) -> None:
        """Queue `intents`, in order (each behind the earlier writes of its lane)."""
        for intent in intents:
            if isinstance(intent, PatchStatus):
                self._patch_status(intent)
            elif isinstance(intent, PostEvent):
                self.events.record(intent.owner, intent.type, intent.reason, intent.message)
            else:
                self._submit(intent)

    async def drain(self, timeout: float) -> None:
        """At shutdown: send the statuses held for batching, wait up to `timeout` s for
        every write to end, then stop the lanes (later intents are dropped, logged)."""
        for lane in self._status.values():
            lane.flush()
        try:
            await self.actuator.wait_idle(timeout)
        except TimeoutError:
            log.warning("Stopping with %d write(s) not done.", self.actuator.pending())
        await self.actuator.close()

    # -- pods, deletions ---------------------------------------------------------------

    def _submit(self, intent: Intent) -> None:
        run: Callable[[KubeApi], Awaitable[Mapping[str, Any] | None]]
        after = None
        if isinstance(intent, CreatePod):
            run, priority = (lambda k: self._create(k, intent)), Priority.RUN
            if intent.gated:
                priority = Priority.POD
            after = self._after(intent.owner, intent.after_status)
        elif isinstance(intent, RemoveGate):
            run, priority = (lambda k: self._release(k, intent)), Priority.RUN
            after = self._after(intent.owner, intent.after_status)
        elif isinstance(intent, DeletePod):
            run, priority = (lambda k: self._delete_pod(k, intent)), Priority.POD
        elif isinstance(intent, DeleteWorkflow):
            run, priority = (lambda k: self._delete_workflow(k, intent)), Priority.STATUS
        else:
            raise TypeError(f"not an intent the applier knows: {intent!r}")

        async def attempt(kube: KubeApi) -> None:
            body = await run(kube)
            self.on_outcome(Confirmed(intent, body))

        def refused(exc: Exception) -> None:
            self.on_outcome(_refused(intent, exc))

        what = f"{type(intent).__name__} {'/'.join(intent.lane)}"
        op = Op(what, attempt, on_error=refused, priority=priority, after=after)
        self.actuator.submit(_key(intent.owner), op, lane=intent.lane)

    async def _create(self, kube: KubeApi, intent: CreatePod) -> Mapping[str, Any] | None:
        owner, name = intent.owner, intent.name
        try:
            return await self.counts.counted(
                kube.create_pod(owner.namespace, dict(intent.manifest)),
                owner,
                name,
                Write.CREATE,
                intent.executor,
            )
        except ApiError as exc:
            if exc.status != 409:
                raise
        body = await kube.get_pod(owner.namespace, name)
        info = read_task_pod(body)
        self.counts.seen(owner.namespace, info)  # (an unanswered try made it?)
        if info is None or info.owner_uid != owner.uid or info.deleting:
            raise Retry(f"pod {name} exists and is not this workflow's (yet)")
        if intent.executor is not None and info.gated:
            return await self._patch_gate(kube, owner, name, body, intent.executor)
        return body

    async def _release(self, kube: KubeApi, intent: RemoveGate) -> Mapping[str, Any] | None:
        owner, name = intent.owner, intent.name
        gated = copy.deepcopy(dict(intent.released))
        spec = gated.setdefault("spec", {})
        spec["schedulingGates"] = [*(spec.get("schedulingGates") or []), {"name": GATE}]
        try:
            return await self._patch_gate(kube, owner, name, gated, intent.executor)
        except ApiError as exc:
            if exc.status == 404:  # it went away: create it released (its workflow there?)
                if not await _still_there(kube, owner):
                    raise _Gone() from None
                create = CreatePod(
                    owner,
                    intent.stage,
                    intent.index,
                    intent.attempt,
                    name,
                    intent.released,
                    intent.executor,
                )
                return await self._create(kube, create)
            if exc.status not in (409, 422):
                raise
        # the guarded removal was refused: the gates moved (patch again), or ours is gone
        current = await kube.get_pod(owner.namespace, name)
        info = read_task_pod(current)
        self.counts.seen(owner.namespace, info)
        if release_patch(current, intent.executor):
            return await self._patch_gate(kube, owner, name, current, intent.executor)
        if info is not None and info.executor == intent.executor:
            return current
        add = [{"op": "add", "path": _EXECUTOR_PATH, "value": str(intent.executor)}]
        return await kube.patch_pod(owner.namespace, name, add)

    async def _patch_gate(
        self, kube: KubeApi, owner: Owner, name: str, pod: Mapping[str, Any], executor: int
    ) -> dict[str, Any]:
        ops = release_patch(pod, executor)
        if not ops:
            raise ApiError(422, "Invalid", f"pod {name} of the operator's making has no gate")
        request = kube.patch_pod(owner.namespace, name, ops)
        return await self.counts.counted(request, owner, name, Write.RELEASE, executor)

    @staticmethod
    async def _delete_pod(kube: KubeApi, intent: DeletePod) -> None:
        try:
            await kube.delete_pod(intent.owner.namespace, intent.name)
        except ApiError as exc:
            if exc.status != 404:
                raise

    @staticmethod
    async def _delete_workflow(kube: KubeApi, intent: DeleteWorkflow) -> None:
        owner = intent.owner
        body = await kube.get_workflow(owner.namespace, owner.name)
        meta = (body or {}).get("metadata") or {}
        if (
            meta.get("uid") != owner.uid
            or ((body or {}).get("status") or {}).get("phase") not in FINISHED
        ):
            return  # gone, re-created under its name, or running again
        try:
            await kube.delete_workflow(owner.namespace, owner.name)
        except ApiError as exc:
            if exc.status != 404:
                raise
        log.info("Deleted %s/%s: %s.", owner.namespace, owner.name, intent.why)

    # -- status ------------------------------------------------------------------------

    def _patch_status(self, intent: PatchStatus) -> None:
        key = _key(intent.owner)
        lane = self._status.get(key)
        if lane is None:
            lane = self._status[key] = _StatusLane(self, intent.owner)
        lane.give(intent)

    def _after(self, owner: Owner, wanted: bool) -> asyncio.Event | None:
        lane = self._status.get(_key(owner)) if wanted else None
        return lane.landed if lane is not None and not lane.landed.is_set() else None


class _StatusLane:
    """One workflow's status writes: coalesced (a PatchStatus not sent yet is replaced by
    the next one), batched when not urgent, and `landed` set once the latest has ended."""

    def __init__(self, applier: Applier, owner: Owner) -> None:
        self.applier, self.owner = applier, owner
        self.waiting: PatchStatus | None = None
        self.queued = False
        self.timer: asyncio.TimerHandle | None = None
        self.landed = asyncio.Event()
        self.landed.set()

    def give(self, intent: PatchStatus) -> None:
        self.waiting = intent
        self.landed.clear()
        interval = self.applier.status_interval
        if intent.urgent or interval <= 0:
            self.flush()
        elif self.timer is None and not self.queued:
            self.timer = asyncio.get_running_loop().call_later(interval, self.flush)

    def flush(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        if self.queued or self.waiting is None:
            return
        self.queued = True

        async def run(kube: KubeApi) -> None:
            intent, self.queued = self.waiting, False
            if intent is None:
                return
            self.waiting = None
            try:
                await kube.patch_workflow_status(
                    self.owner.namespace, self.owner.name, dict(intent.status)
                )
            except ApiError as exc:
                if exc.status != 404:  # (404: deleted meanwhile)
                    self.waiting = self.waiting or intent  # its retry sends the latest
                    self.queued = True
                    raise
            if self.waiting is None:
                self.landed.set()
            self.applier.on_outcome(Confirmed(intent))

        def refused(exc: Exception) -> None:
            self.queued = False
            if self.waiting is not None:
                self.applier.on_outcome(_refused(self.waiting, exc))
                self.waiting = None
            self.landed.set()

        op = Op(f"status of {self.owner.name}", run, on_error=refused, priority=Priority.STATUS)
        self.applier.actuator.submit(_key(self.owner), op, lane="status")


class _Gone(Exception):
    """The workflow a write was for no longer exists (or has another uid)."""


async def _still_there(kube: KubeApi, owner: Owner) -> bool:
    body = await kube.get_workflow(owner.namespace, owner.name)
    return body is not None and (body.get("metadata") or {}).get("uid") == owner.uid


def _key(owner: Owner) -> tuple[str, str]:
    return (owner.namespace, owner.name)


def _refused(intent: Intent, exc: Exception) -> Refused:
    if isinstance(exc, _Gone):
        return Refused(intent, 404, "NotFound", "the workflow is gone", gone=True)
    if isinstance(exc, ApiError):
        permanent = not exc.retryable and exc.status != 409
        return Refused(intent, exc.status or None, exc.reason, exc.message, permanent=permanent)
    return Refused(intent, None, type(exc).__name__, str(exc))
