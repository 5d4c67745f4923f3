"""The operator's API writes, queued on the :class:`Actuator`'s lanes.

The bridge decides; the :class:`Writer` turns a decision into the writes that carry it
out and the handling of their outcomes: create a task pod (idempotently: a 409 from the
same workflow's pod is success, one from an older workflow of the same name is waited
out), remove the gate (a JSON patch whose ``test`` op guards the gate's index), delete,
write the status (batched and coalesced), post an Event (aggregated,
:mod:`idlegate.operator.edge.events`). Each write runs later, in its lane: each pod's writes in
the order decided, a workflow's status and its Events apart from them; what a write reads
of the workflow's state, it reads when it runs. A release whose stage's idle slot is not in
the API yet waits for the status write that puts it there. Pod creations and gate
removals are counted once confirmed (:class:`PodCounts`). What the bridge
must know of a write's outcome (the pod the API returned, a pod write that failed for
good) goes into :attr:`Writer.outcomes`, which the bridge drains
(:func:`idlegate.operator.edge.intake.follow_writes`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import weakref
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from enum import Enum
from typing import Any

from idlegate.api.labels import ANNOTATION_EXECUTOR
from idlegate.errors import IdlegateError
from idlegate.operator.clock import Steady
from idlegate.operator.core.pods import (
    Owner,
    TaskPod,
    pod_name,
    read_task_pod,
    release_patch,
    task_pod,
)
from idlegate.operator.core.tracking import StageTrack, Task, TaskState, Workflow
from idlegate.operator.edge.actuator import STATUS, Actuator, Op, Priority, Retry
from idlegate.operator.edge.events import EventRecorder
from idlegate.operator.edge.kube import ApiError, KubeApi
from idlegate.operator.edge.metrics import Metrics
from idlegate.operator.settings import Settings

log = logging.getLogger(__name__)
_HAS_POD = (TaskState.GATED, TaskState.RELEASED)
FINISHED = ("Succeeded", "Failed")
"""The phases of a finished workflow (the TTL's)."""
_EXECUTOR_PATH = "/metadata/annotations/" + ANNOTATION_EXECUTOR.replace("/", "~1")


@dataclass(frozen=True, slots=True)
class PodWritten:
    """A pod as the API returned it from a write (read like a watch event)."""

    body: dict[str, Any]


@dataclass(frozen=True, slots=True)
class PodWriteFailed:
    """A pod write failed for good: the workflow fails and its executors return to the pool."""

    workflow: Workflow
    reason: str
    message: str


@dataclass(frozen=True, slots=True)
class WorkflowGone:
    """A pod was to be created again for a workflow the API no longer holds: it was
    deleted, and the bridge forgets it (its deletion event may come later, or never)."""

    workflow: Workflow


Outcome = PodWritten | PodWriteFailed | WorkflowGone


class Writer:
    """Queues the API writes of the bridge's decisions on the actuator's lanes."""

    def __init__(
        self,
        settings: Settings,
        actuator: Actuator,
        metrics: Metrics,
        *,
        time: Steady,
        instance: str,
    ) -> None:
        self.settings = settings
        self.actuator = actuator
        self.metrics = metrics
        self.time = time
        """The operator's time (for conditions' transition times)."""
        self.outcomes: asyncio.Queue[Outcome] = asyncio.Queue()
        """What the bridge must carry into its state, in the order the writes ended."""
        self.counts = PodCounts(metrics)
        """The pod creations and gate removals, each counted once it is confirmed."""
        self.events = EventRecorder(
            actuator,
            component=settings.component,
            instance=instance,
            per_workflow=settings.max_events_per_workflow,
        )
        self._status: weakref.WeakKeyDictionary[Workflow, _StatusBook] = weakref.WeakKeyDictionary()
        self._batched: weakref.WeakSet[Workflow] = weakref.WeakSet()
        """Workflows whose status write waits for its batch (`Settings.status_interval`)."""
        self.landing: Callable[[Workflow], Callable[[dict[str, Any]], None]] | None = None
        """Told as a workflow's status write begins; what it returns is called with the
        status once the write has landed (pod GC, :mod:`idlegate.operator.features.cleanup`)."""

    def create_pod(self, wf: Workflow, track: StageTrack, task: Task, *, gated: bool) -> None:
        """Create the pod of the task's current attempt: gated, or released on its executor."""
        owner, spec, index, attempt = wf.owner, track.spec, task.index, task.attempt
        executor = None if gated else task.executor
        name = pod_name(owner.name, spec.name, index, attempt)

        async def run(kube: KubeApi) -> None:
            if not await self._still_there(kube, wf):
                return
            manifest = task_pod(owner, spec, index, attempt, gated=gated, executor=executor)
            try:
                body = await self._create(kube, owner, name, manifest, executor)
            except ApiError as exc:
                if exc.status != 409:
                    raise
                body = await kube.get_pod(owner.namespace, name)
                info = read_task_pod(body)
                self.counts.seen(owner.namespace, info)  # an unanswered try made it?
                if info is None or info.owner_uid != owner.uid or info.deleting:
                    raise Retry(f"pod {name} exists and is not this workflow's (yet)") from None
                if executor is not None and info.gated:
                    ops = release_patch(body, executor)
                    if ops:
                        body = await self._release(kube, owner, name, ops, executor)
            self.outcomes.put_nowait(PodWritten(body))

        def rejected(exc: Exception) -> None:
            self._pod_failed(wf, "create", name, spec.name, exc)

        def wanted() -> bool:
            return wf.active and task.attempt == attempt and task.state in _HAS_POD

        what = f"create {'gated ' if gated else ''}pod {owner.namespace}/{name}"
        after = None if gated else self._slot_write(wf, track.index)
        priority = Priority.POD if gated else Priority.RUN
        op = Op(what, run, on_error=rejected, wanted=wanted, priority=priority, after=after)
        self.actuator.submit(wf.key, op, lane=pod_lane(name))

    def release_pod(self, wf: Workflow, track: StageTrack, task: Task) -> None:
        """Remove the gate of the task's (gated) pod and record its executor on it."""
        owner, spec, index, attempt = wf.owner, track.spec, task.index, task.attempt
        executor = task.executor
        if executor is None:
            raise IdlegateError(f"task {index} of stage {spec.name!r} is released on no executor")
        name = pod_name(owner.name, spec.name, index, attempt)

        async def run(kube: KubeApi) -> None:
            gated = task_pod(owner, spec, index, attempt, gated=True)
            try:
                body = await self._release(
                    kube, owner, name, release_patch(gated, executor), executor
                )
            except ApiError as exc:
                if exc.status == 404:  # it went away: create it released
                    if not await self._still_there(kube, wf):
                        return
                    released = task_pod(owner, spec, index, attempt, gated=False, executor=executor)
                    try:
                        body = await self._create(kube, owner, name, released, executor)
                    except ApiError as again:
                        if again.status == 409:  # an unanswered try did create it: patch it
                            raise Retry(f"pod {name} exists again") from None
                        raise
                    self.outcomes.put_nowait(PodWritten(body))
                    return
                if exc.status not in (409, 422):
                    raise
                body = await self._rerelease(kube, owner, name, executor)
            self.outcomes.put_nowait(PodWritten(body))

        def rejected(exc: Exception) -> None:
            self._pod_failed(wf, "release", name, spec.name, exc)

        def wanted() -> bool:
            return wf.active and task.attempt == attempt and task.state is TaskState.RELEASED

        what = f"release pod {owner.namespace}/{name} on executor {executor}"
        after = self._slot_write(wf, track.index)
        op = Op(what, run, on_error=rejected, wanted=wanted, priority=Priority.RUN, after=after)
        self.actuator.submit(wf.key, op, lane=pod_lane(name))

    async def _still_there(self, kube: KubeApi, wf: Workflow) -> bool:
        """False, with a WorkflowGone outcome, if a pod of `wf` vanished (`pod_vanished`)
        because the workflow itself is deleted; the check is made once per vanishing."""
        if not wf.pod_vanished:
            return True
        body = await kube.get_workflow(wf.owner.namespace, wf.owner.name)
        if body is None or (body.get("metadata") or {}).get("uid") != wf.owner.uid:
            self.outcomes.put_nowait(WorkflowGone(wf))
            return False
        wf.pod_vanished = False
        return True

    async def _rerelease(
        self, kube: KubeApi, owner: Owner, name: str, executor: int
    ) -> dict[str, Any]:
        """The guarded gate removal was refused (409, 422): read the pod and finish the job.
        Its gate has moved (another controller removed one before it: patch again), or it
        is gone (an unanswered try removed it, or someone else did): record the executor."""
        current = await kube.get_pod(owner.namespace, name)
        info = read_task_pod(current)
        self.counts.seen(owner.namespace, info)
        ops = release_patch(current, executor)
        if ops:
            return await self._release(kube, owner, name, ops, executor)
        if info is not None and info.executor == executor:
            return current
        add = [{"op": "add", "path": _EXECUTOR_PATH, "value": str(executor)}]
        return await kube.patch_pod(owner.namespace, name, add)

    async def _create(
        self,
        kube: KubeApi,
        owner: Owner,
        name: str,
        manifest: dict[str, Any],
        executor: int | None,
    ) -> dict[str, Any]:
        """Create a pod, counting it once confirmed (:class:`PodCounts`)."""
        return await self.counts.counted(
            kube.create_pod(owner.namespace, manifest), owner, name, Write.CREATE, executor
        )

    async def _release(
        self,
        kube: KubeApi,
        owner: Owner,
        name: str,
        ops: list[dict[str, Any]] | None,
        executor: int,
    ) -> dict[str, Any]:
        """Apply a gate-removing patch, counting it once confirmed."""
        if not ops:
            raise IdlegateError(f"pod {name} of the operator's own making carries no gate")
        return await self.counts.counted(
            kube.patch_pod(owner.namespace, name, ops), owner, name, Write.RELEASE, executor
        )

    def observed(self, namespace: str, pod: TaskPod, *, deleted: bool = False) -> None:
        """A watch event of one of the operator's pods: it may confirm an unanswered write."""
        if deleted or pod.deleting:
            self.counts.forget((namespace, pod.name))
        else:
            self.counts.seen(namespace, pod)

    def _pod_failed(self, wf: Workflow, action: str, pod: str, stage: str, exc: Exception) -> None:
        """A pod write failed for good: the workflow fails (Failed condition naming the
        cause, an Event) and its executors return to the pool."""
        if isinstance(exc, ApiError):
            reason, cause = "PodRejected", f"the API server refused it: {exc.message or exc}"
        else:
            reason, cause = "PodError", f"{type(exc).__name__}: {exc}"
        message = f"The operator could not {action} task pod {pod} of stage {stage!r}; {cause}."
        self.outcomes.put_nowait(PodWriteFailed(wf, reason, message))

    def delete_pod(self, owner: Owner, name: str) -> None:
        """Delete a pod (gone already is fine)."""

        async def run(kube: KubeApi) -> None:
            with _gone_is_fine():
                await kube.delete_pod(owner.namespace, name)

        key = (owner.namespace, owner.name)
        self.actuator.submit(key, Op(f"delete pod {name}", run), lane=pod_lane(name))

    def status(self, wf: Workflow, *, urgent: bool = False) -> None:
        """Queue a status write, coalesced: at most one is waiting at a time (queued, or
        retrying), and it writes the state as it is when it runs. Changes of counts only
        are batched for `Settings.status_interval`."""
        if wf.status_queued:
            return
        interval = self.settings.status_interval
        if not urgent and interval > 0:
            if wf.status_timer is None:
                loop = asyncio.get_running_loop()
                wf.status_timer = loop.call_later(interval, self._flush_status, wf)
                self._batched.add(wf)
            return
        if wf.status_timer is not None:
            wf.status_timer.cancel()
            wf.status_timer = None
        book = self._status.get(wf)
        if book is None:
            # the first status write of a workflow is queued when it is admitted, before
            # any decision about it: the idle slots it has then were read from its status
            book = self._status[wf] = _StatusBook(persisted=set(wf.idle_slots))
        wf.status_queued = True

        async def run(kube: KubeApi) -> None:
            wf.status_queued = False
            wf.refresh_conditions(self.time.now())
            carried = set(wf.idle_slots)
            landed = self.landing(wf) if self.landing is not None else None
            body = wf.status()
            try:
                with _gone_is_fine():  # (deleted meanwhile)
                    await kube.patch_workflow_status(wf.owner.namespace, wf.owner.name, body)
            except Exception:
                wf.status_queued = True  # its retry writes the state as it is then
                raise
            book.persisted |= carried
            if landed is not None:
                landed(body)

        def gave_up(exc: Exception) -> None:
            wf.status_queued = False

        what = f"status of {wf.owner.namespace}/{wf.owner.name}"
        op = Op(what, run, on_error=gave_up, priority=Priority.STATUS)
        book.last = op.ended  # (not the op: its closure holds the workflow, the book's key)
        self.actuator.submit(wf.key, op, lane=STATUS)

    def delete_workflow(self, owner: Owner, why: str) -> None:
        """Delete the DagWorkflow `owner` (its pods go with it), if it is still that very
        object (its uid) and has finished (`why`: for the log)."""

        async def run(kube: KubeApi) -> None:
            body = await kube.get_workflow(owner.namespace, owner.name)
            meta = (body or {}).get("metadata") or {}
            phase = ((body or {}).get("status") or {}).get("phase")
            if meta.get("uid") != owner.uid or phase not in FINISHED:
                return  # gone, re-created under its name, or running again
            with _gone_is_fine():
                await kube.delete_workflow(owner.namespace, owner.name)
            log.info("Deleted %s/%s: %s.", owner.namespace, owner.name, why)

        key = (owner.namespace, owner.name)
        op = Op(f"delete workflow {owner.name}", run, priority=Priority.STATUS)
        self.actuator.submit(key, op, lane="delete")

    def _slot_write(self, wf: Workflow, index: int) -> asyncio.Event | None:
        """The status write a release in stage `index` waits for: the one that persists
        the stage's idle slot (so that a restart neither forgets nor repeats the delay),
        while the slot is not in the API yet; None otherwise."""
        book = self._status.get(wf)
        if index not in wf.idle_slots or book is None or index in book.persisted:
            return None
        last = book.last
        return last if last is not None and not last.is_set() else None

    def _flush_status(self, wf: Workflow) -> None:
        wf.status_timer = None
        self._batched.discard(wf)
        if wf.active:  # (a workflow the bridge dropped has its timer cancelled, too)
            self.status(wf, urgent=True)

    async def drain(self, timeout: float) -> None:
        """At shutdown: queue the batched status writes now, wait up to `timeout` seconds
        for every queued write to end, then stop the lanes; a write decided after this is
        dropped (logged), never started against a closed client."""
        for wf in list(self._batched):
            if wf.status_timer is not None:
                wf.status_timer.cancel()
                self._flush_status(wf)
        try:
            await self.actuator.wait_idle(timeout)
        except TimeoutError:
            log.warning("Stopping with %d write(s) not done.", self.actuator.pending())
        await self.actuator.close()

    def event(self, owner: Owner, type_: str, reason: str, message: str) -> None:
        """An Event on the DagWorkflow (core/v1, shown by `kubectl describe dwf`), aggregated
        with equal ones posted before (:mod:`idlegate.operator.edge.events`)."""
        self.events.record(owner, type_, reason, message)

    def patch_status(self, owner: Owner, body: dict[str, Any]) -> None:
        """Merge `body` into the status of a workflow the bridge holds no record of (one
        rejected, or held out of the pool by spec.suspend)."""

        async def run(kube: KubeApi) -> None:
            with _gone_is_fine():
                await kube.patch_workflow_status(owner.namespace, owner.name, body)

        key = (owner.namespace, owner.name)
        op = Op(f"status of {owner.name}", run, priority=Priority.STATUS)
        self.actuator.submit(key, op, lane=STATUS)


class Write(Enum):
    """The pod writes that are counted."""

    CREATE = "create"
    RELEASE = "release"


@dataclass(slots=True)
class _Sent:
    uid: str
    executor: int | None
    unanswered: bool = False
    """An attempt got no answer: it may have happened, shown by a later look at the pod."""
    sending: bool = True
    """An attempt is on its way: a look meanwhile may show its effect, which its answer
    counts, so looks do not count this write until it is answered."""


class PodCounts:
    """`idlegate_pods_created_total` and `idlegate_gate_removals_total`, each write counted
    once, when confirmed: by its success; or, after an attempt that got no answer (it may or
    may not have happened), by the first look at the pod that shows its effect (a watch
    event, or the read after a retry's 409 or 422). A creation shows as the pod owned by
    the workflow that wrote it; a gate removal as no gate and the executor annotation the
    removal set. A write refused at its first answer did nothing (a pod found on the first
    try is not the operator's creation). What a look counted is remembered until the pod is
    deleted, so a retry whose answer is lost again is not counted twice."""

    def __init__(self, metrics: Metrics, *, limit: int = 4096) -> None:
        self.metrics = metrics
        self.limit = limit
        self._sent: OrderedDict[tuple[str, str], dict[Write, _Sent]] = OrderedDict()
        self._looked: OrderedDict[tuple[str, str], set[Write]] = OrderedDict()
        """Per pod, the writes a look counted."""

    def sending(self, key: tuple[str, str], write: Write, uid: str, executor: int | None) -> None:
        sent = self._sent.setdefault(key, {})
        self._sent.move_to_end(key)
        if write is Write.CREATE:  # (a removal sent before was of a pod now gone)
            sent.pop(Write.RELEASE, None)
        if write not in self._looked.get(key, ()):
            sent.setdefault(write, _Sent(uid, executor)).sending = True
        while len(self._sent) > self.limit:
            self._sent.popitem(last=False)

    async def counted(
        self,
        request: Awaitable[dict[str, Any]],
        owner: Owner,
        name: str,
        write: Write,
        executor: int | None,
    ) -> dict[str, Any]:
        """Send pod `name`'s `write` (awaiting `request`), counted once confirmed."""
        key = (owner.namespace, name)
        self.sending(key, write, owner.uid, executor)
        try:
            body = await request
        except ApiError as exc:
            self.answered(key, write, ok=False, unanswered=not exc.answered)
            raise
        except BaseException:
            self.answered(key, write, ok=False)
            raise
        self.answered(key, write, ok=True)
        return body

    def answered(
        self, key: tuple[str, str], write: Write, *, ok: bool, unanswered: bool = False
    ) -> None:
        sent = self._sent.get(key, {})
        if ok:
            created = sent.pop(Write.CREATE, None) if write is Write.RELEASE else None
            if created is not None and created.unanswered:
                self._count(Write.CREATE)  # the patched pod exists: that creation happened
            sent.pop(write, None)
            self._count(write)
        elif write in sent:
            sent[write].sending = False
            sent[write].unanswered |= unanswered
            if not sent[write].unanswered:
                del sent[write]

    def seen(self, namespace: str, pod: TaskPod | None) -> None:
        """A look at a pod (None: not a task pod) counts the unanswered writes it shows."""
        if pod is None or not self._sent:
            return
        key = (namespace, pod.name)
        sent = self._sent.get(key, {})
        for write, one in list(sent.items()):
            if one.sending or not one.unanswered or pod.owner_uid != one.uid:
                continue
            ours = not pod.gated and pod.executor is not None and pod.executor == one.executor
            if write is Write.CREATE or ours:
                del sent[write]
                self._looked.setdefault(key, set()).add(write)
                self._looked.move_to_end(key)
                while len(self._looked) > self.limit:
                    self._looked.popitem(last=False)
                self._count(write)

    def unconfirmed(self) -> int:
        """Writes that got no answer and whose effect was not seen yet."""
        return sum(s.unanswered for sent in self._sent.values() for s in sent.values())

    def forget(self, key: tuple[str, str]) -> None:
        """The pod is deleted: a pod of its name may be written again."""
        self._sent.pop(key, None)
        self._looked.pop(key, None)

    def _count(self, write: Write) -> None:
        (self.metrics.pods_created if write is Write.CREATE else self.metrics.gate_removals).inc()


@dataclass(slots=True)
class _StatusBook:
    """A workflow's status writes, as far as the ordering of its releases is concerned."""

    persisted: set[int]
    """Stages whose idle slot a status write has put in the API."""
    last: asyncio.Event | None = None
    """The `ended` of the latest status write queued (it writes the state as it is when
    it runs)."""


def pod_lane(name: str) -> tuple[str, str]:
    """The actuator's lane of a pod's writes: its creation, gate removal and deletion."""
    return ("pod", name)


@contextlib.contextmanager
def _gone_is_fine() -> Iterator[None]:
    """Ignore a 404: the object (a pod, a deleted workflow) is gone already."""
    try:
        yield
    except ApiError as exc:
        if exc.status != 404:
            raise
