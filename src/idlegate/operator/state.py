"""The bridge between Kubernetes objects and the cluster state machine.

It maps DagWorkflows to jobs of :class:`idlegate.sim.cluster.Cluster` and task pods to
(stage, task index, executor slot), and drives the one state machine with the operator's
clock: a workflow appears -> ``add_job``; a pod succeeds -> ``task_finished`` (the executor
continues with the stage's next task: that task's pod is released on the same slot); an
idle timer fires -> ``idle_expired``; then ``schedule`` and its launches become gate
removals. The scheduling semantics (what is runnable, caps, idle slots, which executor)
are all the state machine's; the bridge only translates.

Pods are created gated, stage by stage: a stage's pods are created when the stage becomes
runnable (its parents are done), at most `Settings.window` of them ahead of their release;
the rest as the stage's tasks are released. Creating every pod of a workflow up front
would flood the API server (and every watcher of pods) with objects that may wait for
hours: a 500-stage workflow of large stages is hundreds of thousands of pods.

Restart: :meth:`Bridge.rebuild` lists the DagWorkflows and their pods and restores each
job's progress (finished tasks, running ones on the executor slot recorded on the pod,
idle slots from ``status.idleSlots``) before the first scheduling decision, so no pod is
created twice (names are deterministic and creation is idempotent), running tasks keep
their executors, and a delay persisted in the status is neither forgotten nor repeated.

The bridge is one class in three modules: admission and restart are in
:mod:`idlegate.operator.admission`, task pods released by someone else in
:mod:`idlegate.operator.foreign`; this one holds the bridge's state, the pod and timer
events, the scheduling, the tasks and the workflows' outcomes.

Everything here runs in the operator's event loop, one event at a time: the state
changes synchronously; the API writes are queued (:mod:`idlegate.operator.writes`).
"""

from __future__ import annotations

import logging
import os
import socket
from collections import defaultdict
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Protocol

import numpy as np

from idlegate.operator.actuator import Actuator
from idlegate.operator.admission import Admission
from idlegate.operator.clock import to_datetime
from idlegate.operator.crd import Phase
from idlegate.operator.decisions import RecordingScheduler
from idlegate.operator.foreign import ForeignReleases
from idlegate.operator.kube import KubeApi
from idlegate.operator.metrics import Metrics
from idlegate.operator.pods import (
    pod_name,
    read_task_pod,
)
from idlegate.operator.settings import Settings
from idlegate.operator.status import (
    SlotState,
)
from idlegate.operator.tracking import StageTrack, Task, TaskState, Workflow, WorkflowKey
from idlegate.operator.writes import Writer
from idlegate.sim.cluster import Cluster
from idlegate.sim.protocol import Decision, Launch, Stage

log = logging.getLogger(__name__)


class Timers(Protocol):
    """Idle-slot timers (APScheduler in the operator, a fake in unit tests)."""

    def arm(self, key: str, at: float, fire: Callable[[], Awaitable[None]]) -> None: ...
    def cancel(self, key: str) -> None: ...


class Bridge(Admission, ForeignReleases):
    """DagWorkflows and pods in, the cluster state machine in the middle, API writes out."""

    def __init__(
        self,
        settings: Settings,
        kube: KubeApi,
        scheduler: RecordingScheduler,
        *,
        metrics: Metrics,
        timers: Timers,
        actuator: Actuator | None = None,
    ) -> None:
        self.settings = settings
        self.clock = settings.clock
        self.kube = kube
        self.scheduler = scheduler
        self.metrics = metrics
        self.timers = timers
        self.actuator = actuator or Actuator(
            kube, retry_delays=settings.retry_delays, metrics=metrics
        )
        self.cluster = Cluster(settings.pool_size)
        self.workflows: dict[WorkflowKey, Workflow] = {}
        self.executors: dict[int, tuple[WorkflowKey, int, int]] = {}
        """Executor slot -> (workflow, stage index, task index) of the task it runs."""
        self.writes = Writer(
            settings,
            self.actuator,
            metrics,
            clock_now=self.now,
            observe=self.observe_pod,
            fail=self._fail_and_schedule,
            current=lambda wf: self.workflows.get(wf.key) is wf,
            instance=os.environ.get("POD_ID") or socket.gethostname(),
        )
        self.rebuilt = False
        self.releases = 0
        self.unaccounted: list[tuple[Workflow, StageTrack, Task]] = []
        """Tasks released by others while no executor was free, oldest first."""
        scheduler.reset(np.random.default_rng(settings.seed))

    # -- time --------------------------------------------------------------------------

    def now(self) -> float:
        """The clock's time, never before the state machine's (it refuses to go back)."""
        return max(self.cluster.now, self.clock.now())

    # -- entry points (kopf handlers, timers); admission is in Admission -------------------

    def forget(self, namespace: str, name: str, uid: str | None, *, schedule: bool = True) -> None:
        """The DagWorkflow is being deleted: take its job out (its pods go with it, by GC)."""
        wf = self.workflows.get((namespace, name))
        if wf is None or (uid and wf.owner.uid != uid):
            return
        wf.active = False
        self.actuator.clear(wf.key)
        self._drop(wf)
        self.metrics.workflows_finished.labels("deleted").inc()
        log.info("%s/%s was deleted; its executors are free.", namespace, name)
        if schedule:
            self.schedule()

    def observe_pod(self, body: Mapping[str, Any], *, deleted: bool = False) -> None:
        """A task pod as it is now (level-triggered: the same state twice is a no-op)."""
        info = read_task_pod(body)
        if info is None:
            return
        namespace = (body.get("metadata") or {}).get("namespace", "")
        wf = self.workflows.get((namespace, info.workflow))
        if wf is None or not wf.active or wf.owner.uid != info.owner_uid:
            return
        track = wf.by_name.get(info.stage)
        task = track.tasks.get(info.index) if track is not None else None
        if track is None or task is None or task.attempt != info.attempt:
            return  # not ours, or an attempt already dealt with
        if (deleted or info.deleting) and not info.terminal:
            if task.state is TaskState.RELEASED:
                self._task_failed(
                    wf, track, task, f"pod {info.name} was deleted before it finished"
                )
            elif task.state is TaskState.GATED and deleted:
                track.forget_pod(task)
            self.schedule()
            return
        if task.state is TaskState.GATED and not info.gated:
            self._released_by_others(wf, track, task, info.name)
            if not info.terminal:
                self.schedule()
                return
        if task.state is not TaskState.RELEASED or not info.terminal:
            return
        if task.executor is None:  # released by others, beyond the pool (see below)
            self._unaccounted_ended(wf, track, task, info)
        elif info.phase == "Succeeded":
            self._task_succeeded(wf, track, task)
        else:
            self._task_failed(wf, track, task, f"pod {info.name} failed: {info.reason}")
        self.schedule()

    def idle_expired(self, key: WorkflowKey, uid: str, stage_index: int) -> None:
        """An idle slot's timer fired: the stage is runnable again."""
        wf = self.workflows.get(key)
        if wf is None or wf.owner.uid != uid or not wf.active:
            return
        stage = wf.job.stages[stage_index]
        if stage.idle_until is None:
            return
        self.cluster.idle_expired(stage, self.now())
        slot = wf.idle_slots.get(stage_index)
        if slot is not None:
            slot.released = True
            self.writes.event(
                wf.owner,
                "Normal",
                "IdleSlotEnded",
                f"Stage {slot.stage!r}: the idle slot of {slot.delay:g} s is over; the stage "
                "is runnable again and waits for the policy's next decision.",
            )
        self.writes.status(wf, urgent=True)
        self.schedule()

    # -- the state machine's side -----------------------------------------------------------

    def schedule(self) -> None:
        """Ask the policy (if an event made it necessary) and carry out its launches."""
        try:
            if self.unaccounted and self.cluster.free_executors:
                self._adopt_unaccounted()
            if self.cluster.needs_schedule:
                launches = self.cluster.schedule(self.scheduler, self.now())
                decisions = self.scheduler.drain()
                for decision in decisions:
                    if decision.idle_delay > 0:
                        self._idle_started(decision)
                self._launch(launches, decisions)
                self._note_waiting()
            self._arm_new_timers()
        finally:
            self._gauges()

    def _launch(self, launches: list[Launch], decisions: list[Decision]) -> None:
        caps = {id(d.stage): d.parallelism_cap for d in decisions}
        by_stage: dict[int, list[Launch]] = defaultdict(list)
        stages: dict[int, Stage] = {}
        for launch in launches:
            by_stage[id(launch.stage)].append(launch)
            stages[id(launch.stage)] = launch.stage
        for sid, group in by_stage.items():
            stage = stages[sid]
            wf: Workflow = stage.job.payload
            track = wf.stages[stage.index]
            for launch in group:
                self._release(wf, track, track.next_to_release(), launch.executor)
            cap = caps.get(sid, stage.job.cap)
            # the same decision gives the same message, so repeats aggregate into one Event
            self.writes.event(
                wf.owner,
                "Normal",
                "Released",
                f"Released {len(group)} task(s) of stage {track.spec.name!r}: policy "
                f"{self.scheduler.name} chose the stage with parallelism cap {cap}.",
            )

    @property
    def busy(self) -> int:
        """Executors running task pods: the state machine's, plus pods running beyond the
        pool (released by others while no executor was free)."""
        return self.settings.pool_size - self.cluster.free_executors + len(self.unaccounted)

    def _idle_started(self, decision: Decision) -> None:
        stage = decision.stage
        wf: Workflow = stage.job.payload
        until = stage.idle_until if stage.idle_until is not None else self.now()
        reason = (
            f"policy {self.scheduler.name} held the stage back for {decision.idle_delay:g} s, "
            f"parallelism cap {decision.parallelism_cap}"
        )
        wf.idle_slots[stage.index] = SlotState(
            stage.name, decision.idle_delay, until, False, reason
        )
        self.metrics.idle_inserted.inc(decision.idle_delay)
        self.writes.status(
            wf, urgent=True
        )  # persisted before anything else of this workflow happens
        self.writes.event(
            wf.owner,
            "Normal",
            "IdleSlot",
            f"Stage {stage.name!r} waits {decision.idle_delay:g} s on purpose (deliberate idle "
            f"slot) until {to_datetime(until):%Y-%m-%dT%H:%M:%S}Z: {reason}; "
            f"{self.busy}/{self.settings.pool_size} executors busy.",
        )

    def _arm_new_timers(self) -> None:
        for stage in self.cluster.new_timers:
            wf: Workflow = stage.job.payload
            if stage.idle_until is None or not wf.active:
                continue
            key, uid, index = wf.key, wf.owner.uid, stage.index

            async def fire(key: WorkflowKey = key, uid: str = uid, index: int = index) -> None:
                self.idle_expired(key, uid, index)

            self.timers.arm(self._timer_key(wf, index), stage.idle_until, fire)
        self.cluster.new_timers.clear()

    @staticmethod
    def _timer_key(wf: Workflow, stage_index: int) -> str:
        return f"{wf.owner.uid}/{stage_index}"

    def _note_waiting(self) -> None:
        """One Event per stage that became runnable but got no executor: why it waits."""
        free = self.cluster.free_executors
        for job in self.cluster.jobs:
            wf: Workflow = job.payload
            for stage in job.runnable:
                track = wf.stages[stage.index]
                if stage.launched or track.waiting_noted:
                    continue
                track.waiting_noted = True
                if free == 0:
                    why = f"all {self.settings.pool_size} executors of the pool are busy"
                elif stage.gang and stage.tasks > free:
                    why = f"it is a gang of {stage.tasks} tasks and only {free} executors are free"
                elif job.cap and job.held >= job.cap:
                    why = f"the workflow holds its parallelism cap of {job.cap} executors"
                else:
                    why = (
                        f"policy {self.scheduler.name} gave the {free} free executor(s) to other "
                        "work or chose to wait for a better moment"
                    )
                self.writes.event(
                    wf.owner,
                    "Normal",
                    "Waiting",
                    f"Stage {stage.name!r} is runnable and waits for an executor: {why}.",
                )

    # -- tasks ---------------------------------------------------------------------------

    def _release(self, wf: Workflow, track: StageTrack, index: int, executor: int) -> int:
        """Release task `index` onto `executor`: remove its gate, or create it ungated."""
        task = track.task(index)
        had_pod = task.state is TaskState.GATED
        if had_pod:
            track.gated -= 1
        task.state, task.executor = TaskState.RELEASED, executor
        track.running += 1
        self.releases += 1
        holder = self.executors.get(executor)
        if holder is not None and holder != (wf.key, track.index, index):
            log.error(
                "Executor %d was still recorded for %s; the state machine reuses it.",
                executor,
                holder,
            )
        self.executors[executor] = (wf.key, track.index, index)
        started = wf.phase is Phase.PENDING
        if started:
            wf.phase = Phase.RUNNING
        if had_pod:
            self.writes.release_pod(wf, track, task)
        else:
            self.writes.create_pod(wf, track, task, gated=False)
        self._top_up(wf, track)
        self.writes.status(wf, urgent=started)
        return index

    def _materialize(self, wf: Workflow, track: StageTrack) -> None:
        """The stage became runnable: create its gated pods (up to the window)."""
        if track.materialized or track.succeeded == track.spec.tasks:
            return
        track.materialized = True
        self._top_up(wf, track)

    def _top_up(self, wf: Workflow, track: StageTrack) -> None:
        if not track.materialized:
            return
        while track.gated < self.settings.window:
            index = track.next_to_create()
            if index is None:
                return
            task = track.task(index)
            task.state = TaskState.GATED
            track.gated += 1
            self.writes.create_pod(wf, track, task, gated=True)

    def _task_succeeded(self, wf: Workflow, track: StageTrack, task: Task) -> None:
        executor = task.executor
        assert executor is not None
        task.state = TaskState.SUCCEEDED
        track.running -= 1
        track.succeeded += 1
        self.executors.pop(executor, None)
        following = self.cluster.task_finished(executor, self.now())
        if following is not None:
            self._release(wf, track, track.next_to_release(), executor)
            self.writes.event(
                wf.owner,
                "Normal",
                "Released",
                f"Released the next task of stage {track.spec.name!r} on the executor that "
                "finished one of its tasks (an executor continues with its stage).",
            )
        job = wf.job
        if job.finish is not None:
            self._complete(wf)
            return
        if track.succeeded == track.spec.tasks:
            for child in job.stages[track.index].children:
                if job.stages[child].parents_left == 0:
                    self._materialize(wf, wf.stages[child])
        self.writes.status(wf)

    def _task_failed(self, wf: Workflow, track: StageTrack, task: Task, reason: str) -> None:
        task.failures += 1
        track.failed += 1
        self.metrics.task_failures.inc()
        limit = track.spec.backoff_limit
        if task.failures > limit:
            self._fail_task_for_good(wf, track, task, reason)
            return
        self.writes.event(
            wf.owner,
            "Warning",
            "TaskRetry",
            f"Task {task.index} of stage {track.spec.name!r} failed ({reason}); retry "
            f"{task.failures} of {limit} on the same executor {task.executor}.",
        )
        self._retry(wf, track, task)
        self.writes.status(wf)

    def _retry(self, wf: Workflow, track: StageTrack, task: Task) -> None:
        task.attempt += 1
        self.writes.create_pod(wf, track, task, gated=False)

    def _fail_task_for_good(self, wf: Workflow, track: StageTrack, task: Task, reason: str) -> None:
        task.state = TaskState.FAILED  # its pod has failed: keep it (logs), delete the others
        self._fail(
            wf,
            "TaskFailed",
            f"Stage {track.spec.name!r} failed: task {task.index} failed {task.failures} "
            f"time(s), more than its backoffLimit of {track.spec.backoff_limit}; last: {reason}.",
        )

    # -- workflow outcomes -----------------------------------------------------------------

    def _complete(self, wf: Workflow) -> None:
        job = wf.job
        wf.phase = Phase.SUCCEEDED
        wf.completion = job.finish if job.finish is not None else self.now()
        now = self.now()
        wf.conditions.set(
            "Complete", True, "Succeeded", "All stages succeeded.", wf.generation, now
        )
        jct = wf.completion - wf.arrival
        self.metrics.completion_time.labels("succeeded").observe(jct)
        self.metrics.workflows_finished.labels("succeeded").inc()
        self.writes.event(
            wf.owner,
            "Normal",
            "Succeeded",
            f"All {len(wf.stages)} stages ({sum(wf.dag.tasks)} tasks) succeeded: job completion "
            f"time {jct:.1f} s, {job.idle_inserted:g} s of it deliberately idle.",
        )
        self.writes.status(wf, urgent=True)
        wf.active = False
        self._drop(wf, remove_job=False)

    def _fail(self, wf: Workflow, reason: str, message: str) -> None:
        if not wf.active:
            return
        now = self.now()
        wf.active = False
        wf.phase = Phase.FAILED
        wf.completion = now
        self.actuator.clear(wf.key)  # drop the creations and releases not done yet
        wf.status_queued = False  # (the queued write, if any, was dropped too)
        self._drop(wf)
        for track in wf.stages:
            for task in track.tasks.values():
                if task.state in (TaskState.GATED, TaskState.RELEASED):
                    name = pod_name(wf.owner.name, track.spec.name, task.index, task.attempt)
                    self.writes.delete_pod(wf.owner, name)
            track.running = track.gated = 0  # deleted, or failed for good
        wf.conditions.set("Failed", True, reason, message, wf.generation, now)
        self.metrics.completion_time.labels("failed").observe(now - wf.arrival)
        self.metrics.workflows_finished.labels("failed").inc()
        self.writes.event(wf.owner, "Warning", reason, message)
        self.writes.status(wf, urgent=True)
        log.warning("%s/%s failed: %s", wf.owner.namespace, wf.owner.name, message)

    def _fail_and_schedule(self, wf: Workflow, reason: str, message: str) -> None:
        self._fail(wf, reason, message)
        self.schedule()

    def _drop(self, wf: Workflow, *, remove_job: bool = True) -> None:
        """Take the workflow out of the operator's memory (its last writes are queued)."""
        if remove_job:
            self.cluster.remove_job(wf.job, self.now())
        for executor in [e for e, (key, _, _) in self.executors.items() if key == wf.key]:
            del self.executors[executor]
        self.unaccounted = [u for u in self.unaccounted if u[0] is not wf]
        for index, slot in wf.idle_slots.items():
            if not slot.released:
                self.timers.cancel(self._timer_key(wf, index))
        if wf.status_timer is not None:  # a final write, if any, is queued by the caller
            wf.status_timer.cancel()
            wf.status_timer = None
        if self.workflows.get(wf.key) is wf:
            del self.workflows[wf.key]

    # -- metrics and introspection ------------------------------------------------------------

    def _gauges(self) -> None:
        m = self.metrics
        m.busy_executors.set(self.busy)
        m.active_workflows.set(len(self.workflows))
        m.pending_workflows.set(sum(wf.phase is Phase.PENDING for wf in self.workflows.values()))
        m.runnable_stages.set(sum(len(j.runnable) for j in self.cluster.jobs))
        m.idle_slots.set(
            sum(not s.released for wf in self.workflows.values() for s in wf.idle_slots.values())
        )

    def summary(self) -> dict[str, Any]:
        """A snapshot for the health probe and logs."""
        return {
            "ready": self.rebuilt,
            "workflows": len(self.workflows),
            "busyExecutors": self.busy,
            "poolSize": self.settings.pool_size,
            "decisions": self.scheduler.count,
            "pendingWrites": self.actuator.pending(),
            "policy": self.scheduler.name,
        }
