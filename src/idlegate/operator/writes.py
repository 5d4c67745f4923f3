"""The operator's API writes, queued per workflow on the :class:`Actuator`.

The bridge decides; the :class:`Writer` turns a decision into the writes that carry it
out and the handling of their outcomes: create a task pod (idempotently: a 409 from the
same workflow's pod is success, one from an older workflow of the same name is waited
out), remove the gate (a JSON patch whose ``test`` op guards the gate's index), delete,
write the status (batched), post an Event (aggregated, :mod:`idlegate.operator.events`).
Each write runs later, in the workflow's queue; what it reads of the workflow's state, it
reads when it runs. What the bridge must know of a write's outcome (the pod the API
returned, a pod write that failed for good) goes into :attr:`Writer.outcomes`, which the
bridge drains (:meth:`idlegate.operator.bridge.Bridge.follow_writes`).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from idlegate.operator.actuator import STATUS, Actuator, Op, Retry
from idlegate.operator.clock import Steady
from idlegate.operator.events import EventRecorder
from idlegate.operator.kube import ApiError, KubeApi
from idlegate.operator.metrics import Metrics
from idlegate.operator.pods import (
    ANNOTATION_EXECUTOR,
    Owner,
    pod_name,
    read_task_pod,
    release_patch,
    task_pod,
)
from idlegate.operator.settings import Settings
from idlegate.operator.tracking import StageTrack, Task, TaskState, Workflow

_HAS_POD = (TaskState.GATED, TaskState.RELEASED)
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


Outcome = PodWritten | PodWriteFailed


class Writer:
    """Queues the API writes of the bridge's decisions, one FIFO per workflow."""

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
        self.events = EventRecorder(
            actuator,
            component=settings.component,
            instance=instance,
            per_workflow=settings.max_events_per_workflow,
            interval=settings.event_interval,
        )

    def create_pod(self, wf: Workflow, track: StageTrack, task: Task, *, gated: bool) -> None:
        """Create the pod of the task's current attempt: gated, or released on its executor."""
        owner, spec, index, attempt = wf.owner, track.spec, task.index, task.attempt
        executor = None if gated else task.executor
        name = pod_name(owner.name, spec.name, index, attempt)

        async def run(kube: KubeApi) -> None:
            manifest = task_pod(owner, spec, index, attempt, gated=gated, executor=executor)
            try:
                body = await kube.create_pod(owner.namespace, manifest)
                self.metrics.pods_created.inc()
            except ApiError as exc:
                if exc.status != 409:
                    raise
                body = await kube.get_pod(owner.namespace, name)
                info = read_task_pod(body)
                if info is None or info.owner_uid != owner.uid or info.deleting:
                    raise Retry(f"pod {name} exists and is not this workflow's (yet)") from None
                if not gated and executor is not None and info.gated:
                    ops = release_patch(body, executor)
                    if ops:
                        body = await kube.patch_pod(owner.namespace, name, ops)
                        self.metrics.gate_removals.inc()
            self.outcomes.put_nowait(PodWritten(body))

        def rejected(exc: Exception) -> None:
            self._pod_failed(wf, "create", name, spec.name, exc)

        def wanted() -> bool:
            return wf.active and task.attempt == attempt and task.state in _HAS_POD

        what = f"create {'gated ' if gated else ''}pod {owner.namespace}/{name}"
        op = Op(what, run, on_error=rejected, wanted=wanted)
        self.actuator.submit(wf.key, op, lane=pod_lane(name))

    def release_pod(self, wf: Workflow, track: StageTrack, task: Task) -> None:
        """Remove the gate of the task's (gated) pod and record its executor on it."""
        owner, spec, index, attempt = wf.owner, track.spec, task.index, task.attempt
        executor = task.executor
        assert executor is not None
        name = pod_name(owner.name, spec.name, index, attempt)

        async def run(kube: KubeApi) -> None:
            ops = release_patch(task_pod(owner, spec, index, attempt, gated=True), executor)
            assert ops is not None
            try:
                body = await kube.patch_pod(owner.namespace, name, ops)
            except ApiError as exc:
                if exc.status == 404:  # it went away: create it released
                    released = task_pod(owner, spec, index, attempt, gated=False, executor=executor)
                    body = await kube.create_pod(owner.namespace, released)
                    self.metrics.pods_created.inc()
                    self.outcomes.put_nowait(PodWritten(body))
                    return
                if exc.status not in (409, 422):
                    raise
                current = await kube.get_pod(owner.namespace, name)
                # None: released already (by an earlier attempt of this op): record the executor
                ops = release_patch(current, executor) or [
                    {"op": "add", "path": _EXECUTOR_PATH, "value": str(executor)}
                ]
                body = await kube.patch_pod(owner.namespace, name, ops)
            self.metrics.gate_removals.inc()
            self.outcomes.put_nowait(PodWritten(body))

        def rejected(exc: Exception) -> None:
            self._pod_failed(wf, "release", name, spec.name, exc)

        def wanted() -> bool:
            return wf.active and task.attempt == attempt and task.state is TaskState.RELEASED

        what = f"release pod {owner.namespace}/{name} on executor {executor}"
        op = Op(what, run, on_error=rejected, wanted=wanted)
        self.actuator.submit(wf.key, op, lane=pod_lane(name))

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
        """Queue a status write. One is queued at a time (it writes the state as it is when
        it runs); changes of counts only are batched for `Settings.status_interval`."""
        if wf.status_queued:
            return
        interval = self.settings.status_interval
        if not urgent and interval > 0:
            if wf.status_timer is None:
                loop = asyncio.get_running_loop()
                wf.status_timer = loop.call_later(interval, self._flush_status, wf)
            return
        if wf.status_timer is not None:
            wf.status_timer.cancel()
            wf.status_timer = None
        wf.status_queued = True

        async def run(kube: KubeApi) -> None:
            wf.status_queued = False
            wf.refresh_conditions(self.time.now())
            with _gone_is_fine():  # (deleted meanwhile)
                await kube.patch_workflow_status(wf.owner.namespace, wf.owner.name, wf.status())

        what = f"status of {wf.owner.namespace}/{wf.owner.name}"
        self.actuator.submit(wf.key, Op(what, run), lane=STATUS)

    def _flush_status(self, wf: Workflow) -> None:
        wf.status_timer = None
        if wf.active:  # (a workflow the bridge dropped has its timer cancelled, too)
            self.status(wf, urgent=True)

    def event(self, owner: Owner, type_: str, reason: str, message: str) -> None:
        """An Event on the DagWorkflow (core/v1, shown by `kubectl describe dwf`), aggregated
        with equal ones posted before (:mod:`idlegate.operator.events`)."""
        self.events.record(owner, type_, reason, message)

    def invalid_status(self, owner: Owner, body: dict[str, Any]) -> None:
        """Write the status of a rejected workflow (it has no Workflow record)."""

        async def run(kube: KubeApi) -> None:
            with _gone_is_fine():
                await kube.patch_workflow_status(owner.namespace, owner.name, body)

        key = (owner.namespace, owner.name)
        self.actuator.submit(key, Op(f"status of {owner.name}", run), lane=STATUS)


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
