"""Admission and restart: how a DagWorkflow (and the pods it already has) becomes a job of
the cluster state machine.

A workflow is admitted when kopf reports it (create, resume) and, after a restart, by
:meth:`Admission.rebuild`, which lists every DagWorkflow with its pods and restores each
job's progress before the first scheduling decision: finished tasks, running ones on the
executor slot recorded on their pod, idle slots from ``status.idleSlots`` (see the
header of :mod:`idlegate.operator.state`). An invalid spec is rejected with a status and
an Event, never admitted.

:class:`Admission` is a part of :class:`idlegate.operator.state.Bridge`, kept in its own
module because reading Kubernetes objects back into state is a concern of its own; it
works on the bridge's state (the attributes declared below) and calls the bridge's task
and outcome methods (``_complete``, ``_fail_task_for_good``, ``_retry``,
``_materialize``, ``_arm_new_timers``, ``forget``, ``schedule``, ``now``).
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from idlegate.errors import IdlegateError, SpecError
from idlegate.operator.clock import Clock, from_datetime, timestamp_precision
from idlegate.operator.crd import IdleSlot, Phase, check_workflow_name
from idlegate.operator.decisions import RecordingScheduler
from idlegate.operator.kube import KubeApi
from idlegate.operator.metrics import Metrics
from idlegate.operator.pods import LABEL_WORKFLOW, Owner, TaskPod, read_task_pod
from idlegate.operator.settings import Settings
from idlegate.operator.status import Conditions, SlotState, invalid_status
from idlegate.operator.template import check_templates
from idlegate.operator.tracking import StageTrack, Task, TaskState, Workflow, WorkflowKey
from idlegate.operator.writes import Writer
from idlegate.sim.cluster import Cluster
from idlegate.sim.spec import parse_workflow

log = logging.getLogger(__name__)


class AdmitLaterError(IdlegateError):
    """The workflow cannot be admitted now (its running pods need more free executors)."""


def arrival_key(body: Mapping[str, Any]) -> tuple[str, str]:
    meta = body.get("metadata") or {}
    return (meta.get("creationTimestamp") or "", meta.get("name", ""))


def owner_of(body: Mapping[str, Any]) -> Owner:
    meta = body["metadata"]
    return Owner(meta.get("namespace") or "default", meta["name"], meta.get("uid", ""))


@dataclass
class Restore:
    """What :meth:`Admission._classify` found on a workflow's pods and in its status."""

    running: list[tuple[StageTrack, Task]] = field(default_factory=list)
    """Tasks whose pod runs (released, not terminal), on their recorded executor."""
    retry: list[tuple[StageTrack, Task]] = field(default_factory=list)
    """Tasks whose last attempt failed and whose retry pod was not created yet."""
    failed_for_good: tuple[StageTrack, Task, str] | None = None
    """A task that failed more than its backoffLimit, with the reason (fails the workflow)."""
    slots: dict[int, SlotState] = field(default_factory=dict)
    """Idle slots persisted in ``status.idleSlots``, by stage index."""
    cap: int = 0
    """The parallelism cap persisted in ``status.parallelismCap`` (0: none)."""

    @property
    def holders(self) -> list[tuple[StageTrack, Task]]:
        """The tasks that hold an executor: running, awaiting a retry, or failed for good."""
        held = self.running + self.retry
        if self.failed_for_good is not None:
            held.append(self.failed_for_good[:2])
        return held


class Admission:
    """Admitting DagWorkflows into the bridge, at their creation and after a restart."""

    settings: Settings
    clock: Clock
    kube: KubeApi
    scheduler: RecordingScheduler
    metrics: Metrics
    cluster: Cluster
    workflows: dict[WorkflowKey, Workflow]
    executors: dict[int, tuple[WorkflowKey, int, int]]
    writes: Writer
    rebuilt: bool

    async def rebuild(self) -> None:
        """Admit every existing DagWorkflow with its pods, then make the first decisions."""
        bodies: list[dict[str, Any]] = []
        pods: list[dict[str, Any]] = []
        for namespace in self.settings.namespaces or (None,):
            bodies += await self.kube.list_workflows(namespace)
            pods += await self.kube.list_pods(namespace, LABEL_WORKFLOW)
        by_workflow: dict[WorkflowKey, list[dict[str, Any]]] = defaultdict(list)
        for pod in pods:
            meta = pod.get("metadata") or {}
            workflow = (meta.get("labels") or {}).get(LABEL_WORKFLOW)
            if workflow:
                by_workflow[(meta.get("namespace", ""), workflow)].append(pod)
        admitted = 0
        for body in sorted(bodies, key=arrival_key):
            owner = owner_of(body)
            if self.known(owner):
                continue
            try:
                wf = self.admit(
                    body, by_workflow.get((owner.namespace, owner.name), ()), schedule=False
                )
            except AdmitLaterError as exc:
                log.warning("%s/%s is admitted later: %s", owner.namespace, owner.name, exc)
                continue
            admitted += wf is not None
        self.rebuilt = True
        log.info("Rebuilt the state of %d DagWorkflow(s) from %d pod(s).", admitted, len(pods))
        self.schedule()

    def known(self, owner: Owner) -> bool:
        wf = self.workflows.get((owner.namespace, owner.name))
        return wf is not None and wf.owner.uid == owner.uid

    async def admit_from_api(self, body: Mapping[str, Any]) -> None:
        """Admit a workflow (kopf's create/resume), reading its pods from the API first."""
        owner = owner_of(body)
        if self.known(owner) or (body.get("metadata") or {}).get("deletionTimestamp"):
            return
        phase = (body.get("status") or {}).get("phase")
        if phase == Phase.SUCCEEDED:
            return
        if phase == Phase.INVALID and self._judged(body):
            return
        pods = await self.kube.list_pods(owner.namespace, f"{LABEL_WORKFLOW}={owner.name}")
        if not self.known(owner):  # (another handler may have admitted it meanwhile)
            self.admit(body, pods)

    async def spec_changed(self, body: Mapping[str, Any]) -> None:
        """The spec changed: re-validate a rejected workflow; refuse to change a running one."""
        owner = owner_of(body)
        wf = self.workflows.get((owner.namespace, owner.name))
        if wf is not None and wf.owner.uid == owner.uid:
            generation = (body.get("metadata") or {}).get("generation")
            self.writes.event(
                owner,
                "Warning",
                "SpecChangeIgnored",
                f"The spec changed (generation {generation}) after the workflow was admitted "
                f"with generation {wf.generation}; a running workflow keeps its spec. Delete "
                "and re-create it to run the new spec.",
            )
            return
        if (body.get("status") or {}).get("phase") == Phase.INVALID and not self._judged(body):
            await self.admit_from_api(body)

    @staticmethod
    def _judged(body: Mapping[str, Any]) -> bool:
        """The status describes the current generation (a verdict on this very spec)."""
        meta = body.get("metadata") or {}
        return (body.get("status") or {}).get("observedGeneration") == meta.get("generation", 1)

    def admit(
        self, body: Mapping[str, Any], pods: Iterable[Mapping[str, Any]], *, schedule: bool = True
    ) -> Workflow | None:
        """Admit one DagWorkflow with its existing pods; None if it needs no job (finished,
        invalid). Raises AdmitLaterError when its running pods need more free executors."""
        owner = owner_of(body)
        previous = self.workflows.get((owner.namespace, owner.name))
        if previous is not None and previous.owner.uid != owner.uid:
            # re-created under the same name before the deletion's event arrived
            self.forget(owner.namespace, owner.name, previous.owner.uid, schedule=False)
        meta = body.get("metadata") or {}
        generation = int(meta.get("generation") or 1)
        status = body.get("status") or {}
        phase = status.get("phase")
        conditions = Conditions(status.get("conditions"))
        if phase == Phase.SUCCEEDED:
            return None
        if phase == Phase.FAILED:
            self._delete_leftovers(owner, pods)
            return None
        if phase == Phase.INVALID and self._judged(body):
            return None
        now = self.now()
        try:
            check_workflow_name(owner.name)
            spec = parse_workflow(body.get("spec"), "spec")
            check_templates(spec, "spec")
        except SpecError as exc:
            self._reject(owner, generation, conditions, str(exc), body.get("spec"))
            return None
        started = status.get("startTime")
        admitted = min(from_datetime(started), now) if started else now
        arrival = self._arrival(meta.get("creationTimestamp"), admitted)
        wf = Workflow(owner, generation, spec, arrival, conditions, admitted=admitted)
        restore = self._classify(wf, pods, status)
        try:
            wf.job = self.cluster.add_job(
                wf.dag, now, f"{owner.namespace}/{owner.name}", wf, arrival=arrival
            )
        except IdlegateError as exc:
            self._reject(owner, generation, conditions, str(exc), body.get("spec"))
            return None
        self.workflows[wf.key] = wf
        self._restore(wf, restore)
        wf.conditions.set(
            "Valid",
            True,
            "SpecValid",
            f"A valid DAG of {len(spec.stages)} stages.",
            generation,
            now,
        )
        if not started:
            self.metrics.admission_lag.observe(admitted - arrival)
            dag = wf.dag
            self.writes.event(
                owner,
                "Normal",
                "Accepted",
                f"Accepted: {dag.num_stages} stages, {sum(dag.tasks)} tasks, critical path "
                f"{dag.critical_path:g} s, total work {dag.total_work:g} executor-seconds; "
                f"policy {self.scheduler.name}, pool of {self.settings.pool_size} executors.",
            )
        if wf.job.finish is not None:
            self._complete(wf)
        elif restore.failed_for_good:
            track, task, reason = restore.failed_for_good
            self._fail_task_for_good(wf, track, task, reason)
        else:
            for track, task in restore.retry:
                self._retry(wf, track, task)
            for track in wf.stages:
                if wf.job.stages[track.index].parents_left == 0:
                    self._materialize(wf, track)
            self._arm_new_timers()
            self.writes.status(wf, urgent=True)
        if schedule:
            self.schedule()
        return wf

    def _arrival(self, created: Any, admitted: float) -> float:
        """The workflow's arrival: its ``metadata.creationTimestamp`` on the operator's
        clock, at most `admitted` (when the operator first saw it).

        The API server stamps whole seconds, so the true creation lies in [stamp, stamp +
        1 s): the end of that second is taken (never more than the true time before
        admission). The same inputs give the same arrival after a restart (`admitted` is
        persisted as ``status.startTime``)."""
        if not isinstance(created, str):
            return admitted
        try:
            wall = from_datetime(created) + timestamp_precision(created)
        except ValueError:
            return admitted
        return min(admitted, self.clock.from_wall(wall))

    def _classify(
        self, wf: Workflow, pods: Iterable[Mapping[str, Any]], status: Mapping[str, Any]
    ) -> Restore:
        """Read the tasks' state from the pods and the idle slots from the status (no
        state machine change yet); raises AdmitLaterError if executors are short."""
        found = Restore()
        attempts: dict[tuple[str, int], list[TaskPod]] = defaultdict(list)
        for pod in pods:
            info = read_task_pod(pod)
            if info is None or info.owner_uid != wf.owner.uid:
                continue  # e.g. a pod of an earlier workflow of the same name, being collected
            track = wf.by_name.get(info.stage)
            if track is not None and 0 <= info.index < track.spec.tasks:
                attempts[(info.stage, info.index)].append(info)
        for (stage, index), infos in attempts.items():
            track = wf.by_name[stage]
            task = track.task(index)
            latest = max(infos, key=lambda p: p.attempt)
            task.attempt = latest.attempt
            task.failures = sum(p.phase == "Failed" for p in infos)
            track.failed += task.failures
            if any(p.phase == "Succeeded" for p in infos):
                task.state = TaskState.SUCCEEDED
                track.succeeded += 1
            elif not latest.terminal and latest.gated:
                task.state = TaskState.GATED
                track.gated += 1
            elif not latest.terminal:
                task.state, task.executor = TaskState.RELEASED, latest.executor
                found.running.append((track, task))
            elif task.failures > track.spec.backoff_limit:
                task.state, task.executor = TaskState.RELEASED, latest.executor
                found.failed_for_good = (track, task, f"pod {latest.name} failed: {latest.reason}")
            else:  # failed, retry not created yet (the operator stopped in between)
                task.state, task.executor = TaskState.RELEASED, latest.executor
                found.retry.append((track, task))
        for raw in status.get("idleSlots") or []:
            try:
                slot = IdleSlot.model_validate(raw)
            except ValueError:
                continue
            track = wf.by_name.get(slot.stage)
            if track is not None:
                found.slots[track.index] = SlotState(
                    slot.stage,
                    slot.delay_seconds,
                    from_datetime(slot.release_time),
                    slot.released,
                    slot.reason or "",
                )
        found.cap = int(status.get("parallelismCap") or 0)
        holders = found.holders
        if len(holders) > self.cluster.free_executors:
            raise AdmitLaterError(
                f"{len(holders)} of its task pods are running but only "
                f"{self.cluster.free_executors} executors are free"
            )
        taken = set(self.executors)
        free = sorted(set(range(self.settings.pool_size)) - taken)
        for _, task in holders:
            e = task.executor
            if e is None or not 0 <= e < self.settings.pool_size or e in taken:
                e = free[0]  # enough by the check above
            if e in free:
                free.remove(e)
            taken.add(e)
            task.executor = e
        return found

    def _restore(self, wf: Workflow, found: Restore) -> None:
        """Put the progress read by `_classify` into the state machine."""
        job = wf.job
        holders = found.holders
        wf.idle_slots = dict(sorted(found.slots.items()))
        if holders or found.slots or found.cap or any(t.succeeded for t in wf.stages):
            self.cluster.restore_progress(
                job,
                finished=[t.succeeded for t in wf.stages],
                running=[(track.index, task.executor) for track, task in holders],
                delayed=[i for i, s in found.slots.items() if s.released],
                idle_until={i: s.release for i, s in found.slots.items() if not s.released},
                cap=found.cap,
                idle_inserted=sum(s.delay for s in found.slots.values()),
            )
        for track, task in holders:
            assert task.executor is not None
            self.executors[task.executor] = (wf.key, track.index, task.index)
            track.running += 1
        for i, slot in wf.idle_slots.items():
            if not slot.released and job.stages[i].idle_until is None:
                slot.released = True  # it ended while the operator was away
                self.writes.event(
                    wf.owner,
                    "Normal",
                    "IdleSlotEnded",
                    f"Stage {slot.stage!r}: the idle slot of {slot.delay:g} s ended while the "
                    "operator was not running; the stage is runnable again.",
                )
        if any(s.launched for s in job.stages):
            wf.phase = Phase.RUNNING

    def _reject(
        self,
        owner: Owner,
        generation: int,
        conditions: Conditions,
        message: str,
        raw_spec: Any,
    ) -> None:
        now = self.now()
        for type_ in ("Running", "Complete", "Failed"):
            conditions.remove(type_)
        conditions.set("Valid", False, "InvalidSpec", message, generation, now)
        stages = raw_spec.get("stages") if isinstance(raw_spec, dict) else None
        total = len(stages) if isinstance(stages, list) and len(stages) <= 500 else None
        body = invalid_status(conditions, generation, total)
        self.metrics.invalid_workflows.inc()
        log.warning("%s/%s is invalid: %s", owner.namespace, owner.name, message)

        self.writes.invalid_status(owner, body)
        self.writes.event(owner, "Warning", "InvalidSpec", f"The workflow is invalid: {message}")

    def _delete_leftovers(self, owner: Owner, pods: Iterable[Mapping[str, Any]]) -> None:
        """Delete the unfinished pods of a failed workflow (the operator stopped before)."""
        for pod in pods:
            info = read_task_pod(pod)
            if info and info.owner_uid == owner.uid and not info.terminal and not info.deleting:
                self.writes.delete_pod(owner, info.name)
