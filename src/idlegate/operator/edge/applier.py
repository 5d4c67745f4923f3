"""The applier: carries out the core's intents (:mod:`idlegate.operator.core.intents`)
against the API and hands back outcomes.

:meth:`Applier.apply` queues each intent on the :class:`~idlegate.operator.edge.lanes.Lanes`
lane it names; the API client retries each request until the API takes it
(:mod:`idlegate.operator.edge.kube`), and each write's end goes to `on_outcome`.
Events are posted by the :class:`~idlegate.operator.edge.events.EventRecorder`.

Pod creations and gate removals (`idlegate_pods_created_total`,
`idlegate_gate_removals_total`) are counted once each, when confirmed: by their success,
or, when an earlier try got no answer (`ApiError.lost`: it may have been carried out), by
the read after the refusal that followed (a 409, a refused guard) showing the write's
effect. A pod found on a first try's 409 is not the operator's creation.

With leader election, its lanes' write gate (:mod:`idlegate.operator.edge.gate`) says
whether this replica writes: intents given
to a replica that may not write are dropped, and so is every queued write whose turn
comes once it may not (:mod:`idlegate.operator.edge.leader`).

A workflow's status writes are one at a time and coalesced (:class:`_StatusLane`): a
write waiting to be sent is replaced by the next, and the status is read when it is
sent, so the last write to land is the latest state. A write that waits for another lane
(``after_status``) waits for the workflow's status writes given before it.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any

from idlegate.api.crd import CRON_KIND, KIND
from idlegate.api.status import FINISHED
from idlegate.operator.core.intents import (
    Confirmed,
    CreatePod,
    CreateWorkflow,
    DeletePod,
    DeleteWorkflow,
    Intent,
    LiveStatus,
    Outcome,
    Owner,
    PatchStatus,
    PostEvent,
    Refused,
    RemoveGate,
)
from idlegate.operator.core.pods import EXECUTOR_PATH, read_task_pod, release_patch, task_pod
from idlegate.operator.edge.events import EventRecorder
from idlegate.operator.edge.kube import ApiError, KubeApi
from idlegate.operator.edge.lanes import Lanes, Op, Priority, Retry
from idlegate.operator.metrics import Metrics

log = logging.getLogger(__name__)


class Applier:
    """Queues intents on the lanes; reports each write's end to `on_outcome`."""

    def __init__(
        self,
        lanes: Lanes,
        events: EventRecorder,
        metrics: Metrics,
        on_outcome: Callable[[Outcome], None],
        *,
        status_interval: float = 0.0,
        now: Callable[[], float] = time.time,
    ) -> None:
        self.lanes, self.events, self.metrics = lanes, events, metrics
        self.now = now
        """The operator's clock (a status's condition times)."""
        self.on_outcome = on_outcome
        """Where outcomes go (the core, or the pools that route them to theirs)."""
        self.status_interval = status_interval
        """Seconds a PatchStatus that is not urgent waits, to be sent with later ones."""
        self._status: dict[tuple[str, str], _StatusLane] = {}
        self._freeing: dict[tuple[str, str], set[asyncio.Event]] = {}
        """Per workflow, the deletions not ended yet of pods whose executors were given back."""

    def apply(self, intents: Iterable[Intent]) -> None:
        """Queue `intents`, in order (each behind the earlier writes of its lane); none
        while this replica may not write (its lanes' gate: checked again as each queued
        write's turn comes)."""
        if not self.lanes.gate.open():
            return
        for intent in intents:
            if isinstance(intent, PatchStatus):
                self._patch_status(intent)
            elif isinstance(intent, PostEvent):
                self.events.record(intent.owner, intent.type, intent.reason, intent.message)
            else:
                self._submit(intent)

    def cancel(self, owner: Owner) -> None:
        """The workflow left: its writes not started yet are dropped (a status write held
        for its batch is sent with the next PatchStatus instead)."""
        self.lanes.clear(_key(owner))
        for ended in self._freeing.pop(_key(owner), ()):
            ended.set()  # (dropped, or running on: the release need not wait for it)
        lane = self._status.get(_key(owner))
        if lane is not None:
            lane.dropped()

    async def drain(self, timeout: float) -> None:
        """At shutdown: send the statuses held for batching, wait up to `timeout` s for
        every write to end, then stop the lanes (later intents are dropped, logged)."""
        for lane in list(self._status.values()):
            lane.flush()
        try:
            await self.lanes.wait_idle(timeout)
        except TimeoutError:
            log.warning("Stopping with %d write(s) not done.", self.lanes.pending())
        await self.lanes.close()

    # -- pods, deletions ---------------------------------------------------------------

    def _submit(self, intent: Intent) -> None:
        run: Callable[[KubeApi], Awaitable[Mapping[str, Any] | None]]
        after: tuple[asyncio.Event, ...] = ()
        ended = None
        if isinstance(intent, CreatePod):
            run = lambda k: self._create(k, intent)  # noqa: E731
            priority = Priority.POD if intent.gated else Priority.RUN
            after = self._after(intent.owner, intent.after_status)
        elif isinstance(intent, RemoveGate):
            run, priority = (lambda k: self._release(k, intent)), Priority.RUN
            # (the executor it hands out may be one of a pod whose deletion was asked before)
            freeing = [e for events in self._freeing.values() for e in events]
            after = (*self._after(intent.owner, intent.after_status), *freeing)
        elif isinstance(intent, DeletePod):
            run = lambda k: k.delete_pod(intent.owner.namespace, intent.name)  # noqa: E731
            priority = Priority.POD
            if intent.frees:
                ended = asyncio.Event()
                self._freeing.setdefault(_key(intent.owner), set()).add(ended)
        elif isinstance(intent, DeleteWorkflow):
            run, priority = (lambda k: self._delete_workflow(k, intent)), Priority.STATUS
        elif isinstance(intent, CreateWorkflow):
            run, priority = (lambda k: self._create_workflow(k, intent)), Priority.STATUS
        else:
            raise TypeError(f"not an intent the applier knows: {intent!r}")

        async def attempt(kube: KubeApi) -> None:
            body = await run(kube)
            self._ended(intent, ended)
            self.on_outcome(Confirmed(intent, body))

        def refused(exc: Exception) -> None:
            self._ended(intent, ended)
            if isinstance(intent, CreateWorkflow):  # (a run not started: loudly)
                said = f"Cannot create {intent.lane[2]}: {exc}"
                self.events.record(intent.owner, "Warning", "RunNotStarted", said)
            self.on_outcome(_refused(intent, exc))

        what = f"{type(intent).__name__} {'/'.join(intent.lane)}"
        op = Op(what, attempt, on_error=refused, priority=priority, after=after)
        self.lanes.submit(_key(intent.owner), op, lane=intent.lane)

    async def _create(self, kube: KubeApi, intent: CreatePod) -> Mapping[str, Any] | None:
        owner, name = intent.owner, intent.name
        if intent.owner_check and await _workflow(kube, owner) is None:
            raise _Gone()
        try:
            body = await kube.create_pod(owner.namespace, intent.manifest)
        except ApiError as exc:
            if exc.status != 409:
                raise
            lost = exc.lost
        else:
            self.metrics.pods_created.inc()
            return body
        body = await kube.get_pod(owner.namespace, name)
        info = read_task_pod(body)
        if info is None or info.owner_uid != owner.uid or info.deleting:
            raise Retry(f"pod {name} exists and is not this workflow's (yet)")
        if lost:  # a try whose answer was lost made it
            self.metrics.pods_created.inc()
        if intent.executor is not None and info.gated:
            return await self._patch_gate(kube, owner, name, body, intent.executor)
        return body

    async def _release(self, kube: KubeApi, intent: RemoveGate) -> Mapping[str, Any] | None:
        owner, name = intent.owner, intent.name
        if intent.spec is None:
            return await self._release_argo(kube, intent)
        gated = task_pod(owner, intent.spec, intent.index, intent.attempt, gated=True)
        try:
            return await self._patch_gate(kube, owner, name, gated, intent.executor)
        except ApiError as exc:
            if exc.status == 404:  # it went away: create it released (its workflow there?)
                create = dataclasses.replace(intent.released, owner_check=True)
                return await self._create(kube, create)
            if exc.status not in (409, 422):
                raise
            lost = exc.lost
        # the guarded removal was refused: the gates moved (patch again), or ours is gone
        current = await kube.get_pod(owner.namespace, name)
        info = read_task_pod(current)
        if release_patch(current, intent.executor):
            return await self._patch_gate(kube, owner, name, current, intent.executor)
        if info is not None and info.executor == intent.executor:
            if lost:  # a try whose answer was lost removed it
                self.metrics.gate_removals.inc()
            return current
        add = [{"op": "add", "path": EXECUTOR_PATH, "value": str(intent.executor)}]
        return await kube.patch_pod(owner.namespace, name, add)

    async def _release_argo(self, kube: KubeApi, intent: RemoveGate) -> Mapping[str, Any] | None:
        """Release a pod Argo made: read it, then patch (read again while the gates move
        under the guard); one gone is left to its deletion's event, one that lost the gate
        already to its watch event."""
        namespace, name, executor = intent.owner.namespace, intent.name, intent.executor
        for _ in range(3):
            try:
                pod = await kube.get_pod(namespace, name)
                ops = release_patch(pod, executor)
                if not ops:
                    return pod
                body = await kube.patch_pod(namespace, name, ops)
                how = "unscheduled" if executor is None else "scheduled"
                self.metrics.argo_released.labels(how).inc()
                return body
            except ApiError as exc:
                if exc.status == 404:
                    return None
                if exc.status not in (409, 422):
                    raise
        return None

    async def _patch_gate(
        self, kube: KubeApi, owner: Owner, name: str, pod: Mapping[str, Any], executor: int
    ) -> dict[str, Any]:
        ops = release_patch(pod, executor)
        if not ops:
            raise ApiError(422, "Invalid", f"pod {name} of the operator's making has no gate")
        body = await kube.patch_pod(owner.namespace, name, ops)
        self.metrics.gate_removals.inc()
        return body

    @staticmethod
    async def _delete_workflow(kube: KubeApi, intent: DeleteWorkflow) -> None:
        owner = intent.owner
        body = await _workflow(kube, owner)
        finished = ((body or {}).get("status") or {}).get("phase") in FINISHED
        if body is None or not (finished or intent.running_too):
            return  # gone, re-created under its name, or running again
        await kube.delete_workflow(owner.namespace, owner.name)
        log.info("Deleted %s/%s: %s.", owner.namespace, owner.name, intent.why)

    async def _create_workflow(
        self, kube: KubeApi, intent: CreateWorkflow
    ) -> Mapping[str, Any] | None:
        try:
            body = await kube.create_workflow(intent.owner.namespace, dict(intent.body))
        except ApiError as exc:
            if exc.status != 409:
                raise
            body = None  # made before: the same one, not a second
        self.apply(intent.then)
        return body

    # -- status ------------------------------------------------------------------------

    def _patch_status(self, intent: PatchStatus) -> None:
        key = _key(intent.owner)
        lane = self._status.get(key)
        if lane is None or lane.owner.uid != intent.owner.uid:
            lane = self._status[key] = _StatusLane(self, intent.owner)
        lane.give(intent)

    def _ended(self, intent: Intent, ended: asyncio.Event | None) -> None:
        if ended is None:
            return
        ended.set()
        events = self._freeing.get(_key(intent.owner))
        if events is not None:
            events.discard(ended)
            if not events:
                del self._freeing[_key(intent.owner)]

    def _after(self, owner: Owner, wanted: bool) -> tuple[asyncio.Event, ...]:
        lane = self._status.get(_key(owner)) if wanted else None
        return (lane.landed,) if lane is not None else ()


class _StatusLane:
    """One workflow's status writes: one at a time, coalesced (a PatchStatus not sent yet
    is replaced by the next one), batched when not urgent; `landed` is set once the latest
    has ended. It forgets itself once idle."""

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
        op = Op(f"status of {self.owner.name}", self._send, priority=Priority.STATUS)
        self.applier.lanes.submit(_key(self.owner), op, lane=_STATUS)

    def dropped(self) -> None:
        """The workflow left and the lanes dropped its writes not started: the one held
        or queued here goes too (the next PatchStatus carries the whole state anyway)."""
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        self.queued, self.waiting = False, None
        self._ended()

    async def _send(self, kube: KubeApi) -> None:
        intent, self.queued, self.waiting = self.waiting, False, None
        if intent is None:
            return
        outcome: Outcome
        try:
            status = intent.status
            sent = (
                status.read(self.applier.now()) if isinstance(status, LiveStatus) else dict(status)
            )
            cron = self.owner.kind == CRON_KIND
            patch = kube.patch_cron_status if cron else kube.patch_workflow_status
            await patch(self.owner.namespace, self.owner.name, sent)
            outcome = Confirmed(intent, sent)
        except ApiError as exc:  # (404: deleted meanwhile)
            outcome = Confirmed(intent) if exc.status == 404 else _refused(intent, exc)
        except Exception as exc:
            log.exception("Could not write the status of %s.", self.owner.name)
            outcome = _refused(intent, exc)
        self._ended()
        self.applier.on_outcome(outcome)

    def _ended(self) -> None:
        if self.waiting is not None:  # given while this one was sent: send it now
            self.flush()
            return
        self.landed.set()
        lanes = self.applier._status
        if self.timer is None and not self.queued and lanes.get(_key(self.owner)) is self:
            del lanes[_key(self.owner)]


_STATUS = "status"


class _Gone(Exception):
    """The workflow a write was for no longer exists (or has another uid)."""


async def _workflow(kube: KubeApi, owner: Owner) -> Mapping[str, Any] | None:
    """The workflow `owner` as it is now; None if it is gone (or has another uid)."""
    body = await kube.get_workflow(owner.namespace, owner.name)
    same = body is not None and (body.get("metadata") or {}).get("uid") == owner.uid
    return body if same else None


def _key(owner: Owner) -> tuple[str, str]:
    """The lanes' key of a workflow's writes (another kind's apart from a DagWorkflow of
    the same name)."""
    return (owner.namespace, owner.name if owner.kind == KIND else f"{owner.kind}/{owner.name}")


def _refused(intent: Intent, exc: Exception) -> Refused:
    if isinstance(exc, _Gone):
        return Refused(intent, 404, "NotFound", "the workflow is gone", gone=True)
    if isinstance(exc, ApiError):
        permanent = not exc.retryable and exc.status != 409
        return Refused(intent, exc.status or None, exc.reason, exc.message, permanent=permanent)
    return Refused(intent, None, type(exc).__name__, str(exc))
