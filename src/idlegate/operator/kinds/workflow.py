"""The DagWorkflow kind (:class:`DagWorkflow`, a :class:`~.protocol.JobKind`): its steps in
the state machine, and its admission, reading a DagWorkflow and the pods it already has.
(The admission of the queues, which decides whose tasks may start, is the simulator's:
:mod:`idlegate.sim.admission`.)

The core creates a DagWorkflow's task pods, gated, and keeps their bookkeeping
(:mod:`idlegate.operator.core.tracking`): a launch removes a gate (or creates the pod
released), a task pod seen ended finishes its task or fails it, and an idle slot is
persisted in the status. Each step hands the core what it is to do next (`Then`).

Admission is read only: a new workflow's checks (its spec; its templates against its
namespace's Pod Security level and service-account allow-list) and times
(:func:`new_workflow`), and the progress its pods and status record (:func:`classify`).
`Core.admit` rejects an invalid spec and puts that progress into the state machine
before its first decision.
"""

from __future__ import annotations

import contextlib
import logging
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from idlegate.api import notices
from idlegate.api.crd import check_workflow_name
from idlegate.api.eviction import GANG_NOT_STOPPED, stop_mark, uncounted, was_stopped
from idlegate.api.podsecurity import NamespacePolicy
from idlegate.api.settings import Settings
from idlegate.api.status import (
    Conditions,
    IdleSlot,
    Phase,
    SlotState,
    StoppedAttempt,
    check_object_size,
    generation_of,
    parse_indexes,
)
from idlegate.api.task_pods import TaskPod, arrival_of, owner_of, pod_name, read_task_pod
from idlegate.api.template import check_templates
from idlegate.errors import IdlegateError
from idlegate.operator.core.events import Finished, RuleSwitched, StatusLanded, TaskEnded
from idlegate.operator.core.evictions import Evictions
from idlegate.operator.core.intents import (
    Confirmed,
    CreatePod,
    EvictPod,
    LiveStatus,
    PatchStatus,
    Refused,
    ReleaseStop,
    RemoveGate,
)
from idlegate.operator.core.tracking import StageTrack, Task, TaskState, Workflow, timer_key
from idlegate.operator.kinds.protocol import Pool, Then
from idlegate.sim.cluster import Cluster
from idlegate.sim.protocol import Launch
from idlegate.sim.spec import parse_workflow
from idlegate.sim.timestamps import from_datetime

log = logging.getLogger(__name__)


class DagWorkflow(Workflow):
    """A DagWorkflow as a :class:`JobKind`: its task pods are the core's (see
    :class:`~idlegate.operator.core.tracking.Workflow` for its state)."""

    stoppable = True

    def observe(self, pool: Pool, pod: TaskPod, *, deleted: bool = False) -> Then | None:
        track = self.by_name.get(pod.stage)
        task = track.tasks.get(pod.index) if track is not None else None
        if pod.held and not deleted and (pod.deleting or pod.terminal):
            awaited = task is not None and task.evicting and task.attempt == pod.attempt
            if not awaited:  # (its stop counted, or none to count: `eviction`, point 6)
                self.holds.add(pod.name)
                pool.intents.add(ReleaseStop(self.owner, pod.name))
        if track is None or task is None or task.attempt != pod.attempt:
            return None  # not ours, or an attempt already dealt with
        if task.evicting and pod.phase != "Succeeded" and (deleted or pod.deleting):
            return None  # (its eviction's doing: the eviction's answer stops its task)
        if (deleted or pod.deleting) and not pod.terminal:
            self.pod_vanished = True
            if task.state is TaskState.RELEASED:
                why = f"pod {pod.name} was deleted before it finished"
                self.task_failed(pool, track, task, why)
            elif task.state is TaskState.GATED and deleted:
                track.forget_pod(task)
            return Then.ROUND
        if task.state is TaskState.GATED and not pod.gated:
            self.released_by_others(pool, track, task, pod.name)
            if not pod.terminal:
                return Then.ROUND
        if task.state is not TaskState.RELEASED:
            return None
        if not pod.terminal:
            if pod.phase == "Running" and task.running_at is None:  # (its latency ends)
                task.running_at = pool.now()
                self.seen_running(task.running_at)
            return None
        if task.running_at is None and pod.phase == "Succeeded":  # (its start: its status's)
            ran, released = pod.ran, task.released_at
            if ran is not None:
                self.seen_running(pool.settings.clock.from_wall(ran[0]))
            else:  # (nothing says when it ran: it did after its release)
                self.seen_running(pool.now() if released is None else released)
        if pod.phase != "Succeeded":
            self.task_failed(pool, track, task, f"pod {pod.name} failed: {pod.reason}")
        elif task.executor is None:  # beyond the pool: counted once it has an executor
            task.finished_unaccounted = True
        else:
            self.task_succeeded(pool, track, task, _ran(pool, pod))
        return Then.ROUND

    def launched(self, pool: Pool, stage: int, launches: list[Launch], rule: str) -> None:
        track = self.stages[stage]
        previous, self.policy, track.policy = self.policy, rule, rule
        if previous is not None and previous != rule:  # (a planner's switch?)
            pool.intents.add(RuleSwitched(self, previous, rule))
        for launch in launches:
            self.release(pool, track, track.next_to_release(), launch.executor)

    def adopted(self, pool: Pool, launch: Launch, token: Any) -> None:
        track = self.stages[launch.stage.index]
        if token is None:  # a gang's task without a pod: released with it
            self.release(pool, track, track.next_to_release(), launch.executor)
            return
        token.executor = launch.executor
        if token.finished_unaccounted:  # it ended before it had an executor
            token.finished_unaccounted = False
            self.task_succeeded(pool, track, token, None)

    def idle_started(self, pool: Pool, stage: int, slot: SlotState) -> None:
        self.idle_slots[stage] = slot
        pool.metrics.idle_inserted.inc(slot.delay)
        pool.intents.status(self, urgent=True)  # persisted before anything else of it happens

    def idle_ended(self, pool: Pool, stage: int) -> None:
        slot = self.idle_slots.get(stage)
        if slot is not None:
            pool.intents.event(self.owner, *notices.idle_slot_ended(slot, while_away=False))
        pool.intents.status(self, urgent=True)

    def confirmed(self, pool: Pool, outcome: Confirmed) -> Then | None:
        """A write for it was carried out: a pod the API returned is read like a watch event; a
        status write that landed put its idle slots and its ended pods (for pod GC) in the API."""
        intent, body = outcome.intent, outcome.body
        if isinstance(intent, PatchStatus) and isinstance(intent.status, LiveStatus):
            self.persisted_slots |= intent.status.slots
            if body is not None:  # (it was found)
                pool.intents.add(StatusLanded(self, intent.status.counted))
        elif isinstance(intent, ReleaseStop):
            self.holds.discard(intent.name)
        elif isinstance(intent, CreatePod | RemoveGate) and body is not None:
            if isinstance(intent, CreatePod) and intent.owner_check:
                self.pod_vanished = False  # (the workflow is there)
            pod = read_task_pod(body)
            if pod is not None and self.active and pod.owner_uid == self.owner.uid:
                return self.observe(pool, pod)
        return None

    def refused(self, pool: Pool, outcome: Refused) -> Then | None:
        """A write whose workflow is gone: the core is to forget it; a pod write refused
        for good fails it (its executors return to the pool: a round)."""
        intent = outcome.intent
        if outcome.gone:
            return Then.FORGET
        if outcome.permanent and isinstance(intent, CreatePod | RemoveGate):
            action = "create" if isinstance(intent, CreatePod) else "release"
            if outcome.status is None:  # not the API's refusal: an error of the operator's
                reason, cause = "PodError", f"{outcome.reason}: {outcome.message}"
            else:
                refused = f"the API server refused it ({outcome.status}): {outcome.message}"
                reason, cause = "PodRejected", refused
            message = (
                f"The operator could not {action} task pod {intent.name} of stage "
                f"{intent.stage!r}; {cause}."
            )
            self.fail(pool, reason, message)
            return Then.ROUND
        return None

    def unfit_changed(self, pool: Pool) -> None:
        pool.intents.status(self)  # (its Running condition: NoNodeFits, or no longer)

    def dropped(self, pool: Pool) -> None:
        pool.deadline_dropped(self)
        for index in self.idle_slots:
            pool.intents.cancel_timer(timer_key(self.owner, index))  # (one that fired: a no-op)

    def evict(self, pool: Pool, stage: int, executor: int, evictions: Evictions) -> str | None:
        """Ask for the eviction of its task pod running on `executor` (`EvictPod`); None,
        or why not."""
        track, (task, name) = self.stages[stage], self.pod_on(stage, executor)
        if track.spec.gang:
            return GANG_NOT_STOPPED
        if task is None or task.evicting:
            return "it is being stopped" if task else "its task is not running on it now"
        task.evicting, mark = True, stop_mark(evictions.queue, evictions.reason)
        self.holds.add(name)
        args = (self.owner, name, track.spec.name, task.index, task.attempt, executor, mark)
        pool.intents.add(EvictPod(*args, evictions))
        return None

    def pod_on(self, stage: int, executor: int) -> tuple[Task | None, str]:
        """Its task of stage `stage` released on `executor` (None: none) and its pod's name."""
        track, released = self.stages[stage], TaskState.RELEASED
        on = (t for t in track.tasks.values() if (t.executor, t.state) == (executor, released))
        if (task := next(on, None)) is None:
            return None, ""
        return task, pod_name(self.owner.name, track.spec.name, task.index, task.attempt)

    def evicted(
        self, pool: Pool, intent: EvictPod, outcome: Confirmed | Refused
    ) -> tuple[float | None, Then | None]:
        """Its pod's eviction was answered: the work lost if its task was stopped (free of
        its executor, gated again: its next attempt is made), None if not (refused, or
        its pod ended first, which is taken in as any end: what that hands the pool)."""
        track = self.by_name[intent.stage]
        task = track.tasks.get(intent.index)
        if task is None or not task.evicting:
            return None, None
        task.evicting = False  # (none other is asked meanwhile: `evict`)
        if task.attempt != intent.attempt:  # (it failed meanwhile: retried)
            return None, None
        if isinstance(outcome, Refused):
            if outcome.status == 404 and task.state is TaskState.RELEASED:  # (its deletion
                self.pod_vanished = True  # was this eviction's to answer: someone else's)
                why = f"pod {intent.name} was deleted before it finished"
                self.task_failed(pool, track, task, why)
            return None, None
        pod = read_task_pod(outcome.body) if outcome.body is not None else None
        if pod is None or pod.terminal or task.state is not TaskState.RELEASED:
            then = None if pod is None else self.observe(pool, pod)  # (it ended first: an end)
            return None, then
        assert task.executor is not None  # (released on the pool's executor it was asked for)
        (stopped,) = pool.cluster.stop([task.executor], pool.now())
        pool.cluster.stopped = ()  # (taken: its pod is the end there is to drop)
        task.attempt, task.preempted = task.attempt + 1, task.preempted + 1
        when = (stopped.start, pool.now())
        self.note_stop(intent.name, track, task, intent.evictions.queue, when, stopped.lost)
        track.replan(task)
        self.top_up(pool, track)
        pool.intents.status(self)
        return stopped.lost, None

    def released_by_others(self, pool: Pool, track: StageTrack, task: Task, pod: str) -> None:
        """A gated pod of ours lost the gate without the operator: its task is launched on a
        free executor (ending its stage's idle slot, if any), or runs beyond the pool."""
        pool.metrics.foreign_releases.inc()
        track.set_state(task, TaskState.RELEASED)
        task.executor, self.deferred = None, False  # (it started)
        if self.phase is Phase.PENDING:
            self.phase = Phase.RUNNING
        stage = self.job.stages[track.index]
        if stage.idle_until is not None:  # it has started: its idle slot is over
            pool.intents.cancel_timer(timer_key(self.owner, track.index))
        adopted = pool.cluster.started_unasked(stage, pool.now(), task)
        pool.adopt(adopted)
        self.top_up(pool, track)
        notice = notices.released_by_others(
            pod, track.spec.name, pool.settings.pool_size, bool(adopted)
        )
        pool.intents.event(self.owner, *notice)
        pool.intents.status(self, urgent=True)

    def release(self, pool: Pool, track: StageTrack, index: int, executor: int) -> None:
        """Release task `index` onto `executor`: remove its gate, or create it ungated."""
        task = track.task(index)
        had_pod, self.deferred = task.state is TaskState.GATED, False  # (it started)
        track.set_state(task, TaskState.RELEASED)
        task.executor, task.released_at = executor, pool.now()
        started = self.phase is Phase.PENDING
        if started:
            self.phase = Phase.RUNNING
        host = pool.cluster.host_of(executor)
        if had_pod:
            pool.intents.release_pod(self, track, task, host)
        else:
            pool.intents.create_pod(self, track, task, gated=False, host=host)
        self.top_up(pool, track)
        pool.intents.status(self, urgent=started)

    def top_up(self, pool: Pool, track: StageTrack) -> None:
        """Create the stage's gated pods, up to the window ahead of its releases, once its
        parents are done and the workflow is within reach (not `deferred`)."""
        stage = self.job.stages[track.index]
        if self.deferred or stage.parents_left or stage.complete:
            return
        while track.gated < pool.window:
            index = track.next_to_create()
            if index is None:
                return
            task = track.task(index)
            track.set_state(task, TaskState.GATED)
            pool.intents.create_pod(self, track, task, gated=True)

    def task_succeeded(self, pool: Pool, track: StageTrack, task: Task, ran: float | None) -> None:
        executor = task.executor
        assert executor is not None
        track.set_state(task, TaskState.SUCCEEDED)
        pool.intents.add(TaskEnded(self, track, task, True))
        self.measured(track, task, pool.now(), ran, pool.settings.history_samples, pool.times)
        following = pool.cluster.task_finished(executor, pool.now())
        if following is None:  # (its room waits for a round: `TaskTimes.dispatched`)
            pool.times.freed(pool.now())
        else:
            self.release(pool, track, track.next_to_release(), executor)
            pool.intents.event(self.owner, *notices.released_next(track.spec.name))
        job = self.job
        if job.finish is not None:
            self.complete(pool, job.finish)
            return
        if job.stages[track.index].complete:  # its children whose parents are all done start
            for child in job.stages[track.index].children:
                self.top_up(pool, self.stages[child])
        pool.intents.status(self)

    def task_failed(self, pool: Pool, track: StageTrack, task: Task, reason: str) -> None:
        """The task's attempt failed: past its backoffLimit it fails the workflow, else it
        is retried on its executor, or, if it ran beyond the pool, when the policy says."""
        track.attempt_failed(task)
        pool.metrics.task_failures.inc()
        pool.intents.add(TaskEnded(self, track, task, False))
        if task.failures > track.spec.backoff_limit:
            self.fail_task_for_good(pool, track, task, reason)
            return
        task.attempt += 1
        if task.executor is None:
            pool.cluster.drop_beyond(task)
            track.replan(task)
        else:
            failure = notices.task_failure(
                track.spec, task.index, task.failures, task.executor, reason
            )
            pool.intents.event(self.owner, *failure)
            # (on the node its pool placed the failed attempt on: it still counts it there)
            host = pool.cluster.host_of(task.executor)
            pool.intents.create_pod(self, track, task, gated=False, host=host)
        pool.intents.status(self)

    def fail_task_for_good(self, pool: Pool, track: StageTrack, task: Task, reason: str) -> None:
        track.set_state(task, TaskState.FAILED)  # its pod has failed: kept (logs)
        _, failure, message = notices.task_failure(
            track.spec, task.index, task.failures, None, reason
        )
        self.fail(pool, failure, message)

    def complete(self, pool: Pool, finish: float) -> None:
        message = "All stages succeeded."
        self.conditions.set("Complete", True, "Succeeded", message, self.generation, pool.now())
        notice = notices.succeeded(self.dag, finish - self.arrival, self.job.idle_inserted)
        self.finished(pool, Phase.SUCCEEDED, notice, finish)

    def fail(self, pool: Pool, reason: str, message: str) -> None:
        """Fail the workflow: its unfinished pods are deleted, its executors return to the
        pool (the caller schedules)."""
        if not self.active:
            return
        self.completion = at = pool.now()
        pool.intents.cancel_writes(self.owner)  # drop the creations and releases not done yet
        self.delete_pods(pool, TaskState.GATED, TaskState.RELEASED)
        self.conditions.set("Failed", True, reason, message, self.generation, at)
        self.finished(pool, Phase.FAILED, ("Warning", reason, message), at)
        log.warning("%s/%s failed: %s", self.owner.namespace, self.owner.name, message)

    def delete_pods(self, pool: Pool, *states: TaskState) -> int:
        """Delete the pods of its tasks in `states` (a running one's executor is free
        already); how many."""
        doomed = [(s, t) for s in self.stages for t in s.tasks.values() if t.state in states]
        for track, task in doomed:
            name = pod_name(self.owner.name, track.spec.name, task.index, task.attempt)
            pool.intents.delete_pod(self.owner, name, frees=task.state is TaskState.RELEASED)
        return len(doomed)

    def finished(self, pool: Pool, phase: Phase, notice: notices.Notice, at: float) -> None:
        """`self` ended in `phase` at `at`: its metrics, Event, history record and last
        status; it leaves the pool, never to be admitted again."""
        self.phase, self.completion = phase, at
        outcome = phase.lower()
        pool.metrics.completion_time.labels(outcome).observe(at - self.arrival)
        pool.metrics.workflows_finished.labels(outcome).inc()
        pool.intents.event(self.owner, *notice)
        self.pool_size, self.scheduler = pool.settings.pool_size, pool.spec
        pool.intents.add(Finished(self))
        pool.intents.status(self, urgent=True)
        pool.drop(self)
        pool.end(self.owner.uid)


def _ran(pool: Pool, pod: TaskPod) -> float | None:
    """A succeeded pod's run time on the operator's clock, if its status tells it."""
    if pod.ran is None:
        return None
    start, end = pod.ran
    clock = pool.settings.clock
    return clock.from_wall(end) - clock.from_wall(start)


class AdmitLaterError(IdlegateError):
    """Not admitted now: its namespace (whose policy its templates must meet) is unreadable."""


def new_workflow(
    body: Mapping[str, Any], now: float, settings: Settings, policy: NamespacePolicy
) -> DagWorkflow:
    """The workflow of `body`, checked against its namespace's `policy` and sized with the
    durations its status will keep (raises SpecError), with its arrival and admission
    times on the operator's clock."""
    owner = owner_of(body)
    check_workflow_name(owner.name)
    spec = parse_workflow(body.get("spec"), "spec")
    check_object_size(body, spec, settings.history_samples)
    check_templates(spec, "spec", policy)
    status = body.get("status") or {}
    started = status.get("startTime")
    admitted = min(from_datetime(started), now) if started else now
    created = (body.get("metadata") or {}).get("creationTimestamp")
    arrival = arrival_of(created, admitted, settings.clock.from_wall)
    conditions = Conditions(status.get("conditions"))
    return DagWorkflow(owner, generation_of(body), spec, arrival, admitted, conditions)


@dataclass
class Restore:
    """What :func:`classify` found on a workflow's pods and in its status."""

    running: list[tuple[StageTrack, Task]] = field(default_factory=list)
    """Tasks whose pod runs (released, not terminal), on their recorded executor."""
    retry: list[tuple[StageTrack, Task]] = field(default_factory=list)
    """Tasks whose last attempt failed and whose retry pod was not created yet."""
    failed_for_good: tuple[StageTrack, Task, str] | None = None
    """A task that failed more than its backoffLimit, with the reason (fails the workflow)."""
    finished: list[int] = field(default_factory=list)
    """Succeeded tasks, per stage."""
    slots: dict[int, SlotState] = field(default_factory=dict)
    """Idle slots persisted in ``status.idleSlots``, by stage index."""
    over: set[int] = field(default_factory=set)
    """The stages whose persisted slot was over (``released``)."""
    cap: int = 0
    """The parallelism cap persisted in ``status.parallelismCap`` (0: none)."""
    holders: list[tuple[StageTrack, Task]] = field(default_factory=list)
    """Tasks holding an executor of the pool (running, awaiting a retry, failed for good)."""
    beyond: list[tuple[StageTrack, Task]] = field(default_factory=list)
    """Running tasks for which no executor was free: they run beyond the pool."""
    stopping: list[tuple[Task, str]] = field(default_factory=list)
    """Running tasks whose stop was asked (its mark on the pod), with the mark: the stop
    is finished (`idlegate.api.eviction`)."""
    started: dict[int, float] = field(default_factory=dict)
    """Of the running tasks (by `id` of their Task), when their pod started to run: a stop
    of one after the restart loses the work since then (issue 93)."""
    stopped: list[tuple[StageTrack, TaskPod]] = field(default_factory=list)
    """Pods whose stop the operator before the restart asked and whose eviction was taken
    (being deleted with the mark and its finalizer) without its answer being taken in:
    their stop is counted and said now, as the answer would have (issue 93)."""
    unheld: list[str] = field(default_factory=list)
    """Other pods that carry the stop's finalizer and ended or are being deleted: nothing
    to count, the finalizer to take off (`idlegate.api.eviction`, point 6)."""


def classify(
    wf: Workflow, pods: Iterable[Mapping[str, Any]], status: Mapping[str, Any], cluster: Cluster
) -> Restore:
    """Read the tasks' state from the pods (into `wf`'s tracks) and the idle slots from the
    status, and place the tasks that hold an executor on free executors of `cluster` (not
    changed; with too few free, some run beyond the pool: :func:`_place`).

    A task without pods that ``status.stages[].completedIndexes`` names succeeded (pod GC
    deleted its pod). A pod being deleted that has not ended is taken for gone (evicted by
    ``spec.suspend``, or on its way out): its task runs again; one stopped to give quota
    back (`idlegate.api.eviction`), too, as a new attempt and no failure."""
    found = Restore(finished=[0] * len(wf.stages))
    attempts: dict[tuple[str, int], list[TaskPod]] = defaultdict(list)
    for pod in pods:
        info = read_task_pod(pod)
        if info is None or info.owner_uid != wf.owner.uid:
            continue  # e.g. a pod of an earlier workflow of the same name, being collected
        if info.deleting and not info.terminal and info.stop is None:
            continue
        track = wf.by_name.get(info.stage)
        if track is not None and 0 <= info.index < track.spec.tasks:
            attempts[(info.stage, info.index)].append(info)
    for (stage, index), infos in attempts.items():
        _classify_task(wf.by_name[stage], index, infos, found)
    _restore_collected(wf, status, found)
    for raw in status.get("stopped") or []:  # (its stopped attempts: its page, and below)
        with contextlib.suppress(ValueError):
            wf.stopped.append(StoppedAttempt.model_validate(raw))
    for stopped in wf.stopped:  # (a stop counted whose pod is gone: its next attempt runs)
        track = wf.by_name.get(stopped.stage)
        if track is None or not 0 <= stopped.index < track.spec.tasks:
            continue
        task = track.task(stopped.index)
        if task.state is TaskState.PLANNED and task.attempt <= stopped.attempt:
            task.attempt, task.preempted = stopped.attempt + 1, stopped.preempted
    for raw in status.get("idleSlots") or []:
        try:
            slot = IdleSlot.model_validate(raw)
        except ValueError:
            continue
        track = wf.by_name.get(slot.stage)
        if track is not None:
            release, reason = from_datetime(slot.release_time), slot.reason or ""
            found.slots[track.index] = SlotState(slot.stage, slot.delay_seconds, release, reason)
            if slot.released:
                found.over.add(track.index)
    found.cap = int(status.get("parallelismCap") or 0)
    _place(found, cluster)
    return found


def _restore_collected(wf: Workflow, status: Mapping[str, Any], found: Restore) -> None:
    """The succeeded tasks whose pods were deleted (by pod GC), from the status, the
    failed attempts it counts (their pods may be deleted too) and the history samples."""
    for raw in status.get("stages") or []:
        track = wf.by_name.get(raw.get("name") or "") if isinstance(raw, dict) else None
        if track is None:
            continue
        for index in parse_indexes(raw.get("completedIndexes"), track.spec.tasks):
            task = track.task(index)
            if task.state is TaskState.PLANNED:
                track.set_state(task, TaskState.SUCCEEDED)
                found.finished[track.index] += 1
        failed = raw.get("failed")
        if isinstance(failed, int) and failed > track.failed:
            track.failed = failed
        values = raw.get("measuredDurationSeconds")
        if isinstance(values, list):
            track.samples = [float(v) for v in values if isinstance(v, int | float) and v > 0]
            track.sampled = max(len(track.samples), int(raw.get("succeeded") or 0))


def _classify_task(track: StageTrack, index: int, infos: list[TaskPod], found: Restore) -> None:
    """One task's state from the pods of its attempts (earlier ones may be deleted: attempt
    n follows n failures)."""
    task = track.task(index)
    latest = max(infos, key=lambda p: p.attempt)
    stopped = was_stopped(latest)  # (its next attempt is made, as after its stop answered)
    task.attempt, task.preempted = latest.attempt + stopped, latest.preempted + stopped
    counting = uncounted(latest)
    if counting:
        found.stopped.append((track, latest))  # (evicted; its answer lost with the leader)
    for pod in infos:  # (earlier attempts: their answers were taken, their next pods made)
        if pod.held and (pod.deleting or pod.terminal) and not (counting and pod is latest):
            found.unheld.append(pod.name)
    failed = sum(p.phase == "Failed" and not was_stopped(p) for p in infos)
    failing = latest.phase == "Failed" and not stopped
    track.attempt_failed(task, max(failed, latest.attempt - latest.preempted + failing))
    if any(p.phase == "Succeeded" for p in infos):
        track.set_state(task, TaskState.SUCCEEDED)
        found.finished[track.index] += 1
        return
    if stopped:
        return  # (planned: its next pod is created as the stage's are)
    if not latest.terminal and latest.gated:
        track.set_state(task, TaskState.GATED)
        return
    track.set_state(task, TaskState.RELEASED)
    task.executor = latest.executor
    if not latest.terminal:
        found.running.append((track, task))
        if latest.started is not None:
            found.started[id(task)] = latest.started
        if latest.stop is not None:
            found.stopping.append((task, latest.stop))
    elif task.failures > track.spec.backoff_limit:
        found.failed_for_good = (track, task, f"pod {latest.name} failed: {latest.reason}")
    else:  # failed, retry not created yet (the operator stopped in between)
        found.retry.append((track, task))


def _place(found: Restore, cluster: Cluster) -> None:
    """Give each task that holds an executor a free one, its recorded slot if that is free.

    With too few free (a pool made smaller than what runs in it), none is preempted: the
    running tasks left over run beyond the pool (`found.beyond`), a retry left over waits
    for the policy like any task, and a task failed for good needs none (its workflow
    fails). A gang stage's tasks are placed first, all or none: a gang starts as one."""
    if not found.running and not found.retry and found.failed_for_good is None:
        return  # (a new workflow: no pass over every executor, 110,000 on 1,000 nodes)
    taken = {executor for executor, _, _ in cluster.running_tasks()}
    free = set(range(cluster.num_executors)) - taken
    gangs: dict[int, list[tuple[StageTrack, Task]]] = defaultdict(list)
    singles: list[list[tuple[StageTrack, Task]]] = []
    held = [*found.running, *([found.failed_for_good[:2]] if found.failed_for_good else [])]
    for track, task in [*held, *found.retry]:
        if track.spec.gang:
            gangs[track.index].append((track, task))
        else:
            singles.append([(track, task)])
    room = len(free)
    for group in [*gangs.values(), *singles]:
        if len(group) <= room:
            room -= len(group)
            found.holders += group
    placed = {id(task) for _, task in found.holders}
    found.beyond = [(s, t) for s, t in found.running if id(t) not in placed]
    for track, task in found.retry:
        if id(task) not in placed:
            task.attempt += 1
            track.replan(task)
    found.retry = [(s, t) for s, t in found.retry if id(t) in placed]
    unplaced = []
    for _, task in found.holders:  # first the recorded slots that are free
        if task.executor in free:
            free.discard(task.executor)
        else:
            unplaced.append(task)
    for task, executor in zip(unplaced, sorted(free), strict=False):
        task.executor = executor
