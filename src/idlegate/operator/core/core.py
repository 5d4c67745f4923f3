"""The operator's core: DagWorkflows and pods in, the cluster state machine in the middle,
intents out.

It maps DagWorkflows to jobs of :class:`idlegate.sim.cluster.Cluster` and task pods to (stage,
task index, executor slot), and drives the one state machine with the time each event
carries: a workflow appears -> ``add_job``; a pod succeeds -> ``task_finished`` (the executor
continues with the stage's next task: that task's pod is released on the same slot); an idle
timer fires -> ``idle_expired``; then the policy is asked through the Engine's decision round
(:class:`idlegate.operator.core.decider.Decider`) and its launches become gate removals. Every
count of tasks and executors is the state machine's; the core keeps the pods' bookkeeping
(:mod:`.tracking`). It reads no API and no clock: the entry points add intents to
:attr:`Core.intents` (:mod:`.intents`), which the edge
(:class:`idlegate.operator.edge.bridge.Bridge`) applies.

Pods are created gated, stage by stage: when the stage becomes runnable, at most
`Settings.window` of them ahead of their release, the rest as its tasks are released.
Creating every pod up front would flood the API server (and every watcher of pods): a
500-stage workflow of large stages is hundreds of thousands of pods.

Restart: every DagWorkflow is admitted with its pods and its job's progress restored
(:mod:`idlegate.operator.core.admission`) before the first decision, so no pod is created
twice, running tasks keep their executors, and a persisted delay is neither forgotten nor
repeated.

A gated pod that loses its gate without the operator (``kubectl patch``, another
controller) counts against the pool: its task is launched on a free executor, or runs
*beyond the pool* (``Cluster.started_unasked``) until an executor frees up; so do the
running pods of a workflow admitted into a pool made smaller. It is the one path where
the cluster's state changes without a decision of the policy.

Argo Workflows (:class:`ArgoWorkflow`, admitted by :mod:`idlegate.operator.features.argo`)
share the state machine: Argo creates their pods, :class:`idlegate.operator.core.argo.LiveArgo`
pairs each launch with a gated pod, and the core says each pairing as a
:class:`RemoveGate`, as for DagWorkflows.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from idlegate.api.podsecurity import NamespacePolicy
from idlegate.api.status import FINISHED, Conditions, Phase, SlotState, invalid_status
from idlegate.errors import GangTooWideError, IdlegateError
from idlegate.operator.core import messages
from idlegate.operator.core.admission import (
    Restore,
    classify,
    generation_of,
    judged,
    new_workflow,
    owner_of,
)
from idlegate.operator.core.decider import Answer, Decider, post_round
from idlegate.operator.core.events import (
    Admit,
    Admitted,
    DeadlinePassed,
    Event,
    Fact,
    Finished,
    Forget,
    FoundFinished,
    IdleEnded,
    Leave,
    PodSeen,
    Recorded,
    RoundEnded,
    RuleSwitched,
    Schedule,
    SpecChanged,
    StatusLanded,
    TaskEnded,
)
from idlegate.operator.core.intents import (
    Confirmed,
    CreatePod,
    Intent,
    LiveStatus,
    Outbox,
    Outcome,
    PatchStatus,
    Refused,
    RemoveGate,
    Timing,
)
from idlegate.operator.core.lifecycle import Lifecycle
from idlegate.operator.core.pods import Owner, TaskPod, pod_name, read_task_pod
from idlegate.operator.core.tracking import (
    ArgoWorkflow,
    StageTrack,
    Task,
    TaskState,
    Workflow,
    WorkflowKey,
    timer_key,
)
from idlegate.operator.metrics import Metrics
from idlegate.operator.settings import Settings
from idlegate.sim.cluster import Cluster
from idlegate.sim.protocol import Launch, Scheduler, Stage

log = logging.getLogger(__name__)

ENDED_KEPT = 20_000
"""How many uids of workflows that ended here (finished, failed, deleted) are remembered."""


Output = Intent | Timing | Fact
"""What :meth:`Core.handle` returns: writes, timers, and facts for the features."""


class Core(Lifecycle):
    """One pool's workflows, pods and state machine; what to write, as intents."""

    def __init__(
        self,
        settings: Settings,
        scheduler: Scheduler,
        *,
        metrics: Metrics,
        spec: str | None = None,
    ) -> None:
        self.settings = settings
        self.metrics = metrics
        self.spec = spec
        """The canonical text of the scheduler spec `scheduler` was built from (``default``,
        ``--scheduler``'s, an ExecutorPool's policy), which a finished workflow's status
        and history record name, so a replay rebuilds what ran; None for a scheduler object
        (tests, embedding), whose spec is unknown."""
        self.intents = Outbox()
        """What to write, in order (the edge takes and applies them)."""
        self.at = 0.0
        """The time of the event being handled (operator clock seconds)."""
        self.cluster = Cluster(settings.pool_size)
        self.workflows: dict[WorkflowKey, Workflow] = {}
        self.argo: dict[WorkflowKey, ArgoWorkflow] = {}
        """Argo Workflows in the pool (:mod:`idlegate.operator.features.argo` admits them)."""
        self.ended: dict[str, None] = {}
        """The uids of workflows that ended here (the latest :data:`ENDED_KEPT`, oldest
        first): never admitted again from a read that predates their final status (a
        rebuild's lists, a kopf event), which would write that stale status after it."""
        self.rebuilt = False
        """Every workflow there was at the start is admitted (:func:`intake.rebuild`): ready."""
        self.paused = False
        """While workflows move into the pool (`Pools.moving`) no round runs: each one's
        running pods must be counted before the pool releases anything."""
        self.decider = Decider(scheduler, metrics, settings.seed)  # (it resets the policy)
        metrics.watch(self.workflows, self.cluster)
        self.reporter: Owner | None = None
        """Where the pool's own Events go (its ExecutorPool, the operator's Pod), if anywhere."""

    @property
    def scheduler(self) -> Scheduler:
        """The policy deciding now (the Decider's: one copy)."""
        return self.decider.policy

    def now(self) -> float:
        return self.at

    def handle(self, event: Event | Outcome, now: float) -> list[Output]:
        """The one entry: what happened at `now` (operator clock seconds, never going
        back), and what to do about it, in order. A GangTooWideError (`Admit.gang_waits`)
        leaves the intents made before it in :attr:`intents`."""
        self.at = max(self.at, now)
        match event:
            case Admit():
                self.admit(event)
            case PodSeen(body, deleted):
                self.observe_pod(body, deleted=deleted)
            case Confirmed() | Refused():
                self.outcome(event)
            case IdleEnded(key, uid, stage):
                self.idle_expired(key, uid, stage)
            case Forget(namespace, name, uid, schedule):
                self.forget(namespace, name, uid, schedule=schedule)
            case DeadlinePassed():
                self.deadline_passed(event)
            case SpecChanged(key, uid, spec, generation):
                self.spec_changed(key, uid, spec, generation)
            case Recorded(wf):
                wf.history_recorded = True  # (no operator records it again)
                self.intents.status(wf, urgent=True)
            case Leave(key, uid):
                wf = self.workflows.get(key)
                if wf is not None and wf.owner.uid == uid:
                    self.drop(wf)
            case Schedule(force):
                self.cluster.needs_schedule |= force
                self.schedule()
        return self.intents.take()

    # -- admission -------------------------------------------------------------------------

    def known(self, owner: Owner) -> bool:
        """Admitted, or ended here (:attr:`ended`): not to be admitted (again)."""
        wf = self.workflows.get((owner.namespace, owner.name))
        return (wf is not None and wf.owner.uid == owner.uid) or owner.uid in self.ended

    def admit(self, event: Admit) -> Workflow | None:
        """Admit one DagWorkflow with its existing pods, its templates checked against its
        namespace's policy; None if it needs no job (finished, invalid, suspended). Its
        running pods that find no free executor run beyond the pool (``Cluster.run_beyond``).
        A gang stage wider than the pool makes it Invalid, or with `gang_waits` (a pool that
        may grow again) raises GangTooWideError for the caller to make it wait."""
        body, pods, policy = event.body, event.pods, event.policy or NamespacePolicy()
        owner = owner_of(body)
        if owner.uid in self.ended:
            return None
        previous = self.workflows.get((owner.namespace, owner.name))
        if previous is not None and previous.owner.uid != owner.uid:
            # re-created under the same name before the deletion's event arrived
            self.forget(owner.namespace, owner.name, previous.owner.uid, schedule=False)
        status = body.get("status") or {}
        phase = status.get("phase")
        if phase in FINISHED:  # (recorded and cleaned up, not admitted)
            self.intents.add(FoundFinished(body, pods))
            return None
        if phase == Phase.INVALID and judged(body):
            return None
        now = self.now()
        try:
            wf = new_workflow(body, now, self.settings.clock, policy)
            if wf.spec.suspend and event.fail is None:
                self.hold(wf, body)
                return None
            restore = classify(wf, pods, status, self.cluster)
            wf.job = self.cluster.add_job(
                wf.dag, now, f"{owner.namespace}/{owner.name}", wf, arrival=wf.arrival
            )
        except IdlegateError as exc:  # an invalid spec, or a gang larger than the pool
            if isinstance(exc, GangTooWideError) and event.gang_waits:
                raise
            self._reject(owner, body, str(exc))
            return None
        self.workflows[wf.key] = wf
        self._restore(wf, restore)
        if pods:  # (a new workflow has none to collect)
            self.intents.add(Admitted(wf, pods))
        message = f"A valid DAG of {len(wf.stages)} stages."
        wf.conditions.set("Valid", True, "SpecValid", message, wf.generation, now)
        held = wf.conditions.get("Suspended")  # (a workflow suspended before, now resumed)
        if held or wf.spec.active_deadline_seconds is not None:
            self.entered(wf, expiring=event.fail is not None)
        if not status.get("startTime"):
            self.metrics.admission_lag.observe(wf.admitted - wf.arrival)
            notice = messages.accepted(wf.dag, self.decider.policy.name, self.settings.pool_size)
            self.intents.event(owner, *notice)
        self._resume(wf, restore)
        if event.fail is not None:
            self.fail(wf, "DeadlineExceeded", event.fail)
        if event.schedule or event.fail is not None:
            self.schedule()
        return wf

    def _reject(self, owner: Owner, body: Mapping[str, Any], message: str) -> None:
        """Mark a workflow the operator cannot run Invalid (status, condition, Event)."""
        conditions = Conditions((body.get("status") or {}).get("conditions"))
        for type_ in ("Running", "Complete", "Failed", "Suspended"):
            conditions.remove(type_)
        generation = generation_of(body)
        conditions.set("Valid", False, "InvalidSpec", message, generation, self.now())
        spec = body.get("spec")
        stages = spec.get("stages") if isinstance(spec, dict) else None
        total = len(stages) if isinstance(stages, list) and len(stages) <= 500 else None
        self.metrics.invalid_workflows.inc()
        log.warning("%s/%s is invalid: %s", owner.namespace, owner.name, message)
        self.intents.patch_status(owner, invalid_status(conditions, generation, total))
        self.intents.event(owner, *messages.invalid(message))

    def _restore(self, wf: Workflow, found: Restore) -> None:
        """Put the progress read by `classify` into the state machine."""
        job = wf.job
        holders = found.holders
        wf.idle_slots = dict(sorted(found.slots.items()))
        wf.persisted_slots = set(found.slots)
        if holders or found.slots or found.cap or any(found.finished):
            self.cluster.restore_progress(
                job,
                finished=found.finished,
                running=[(track.index, task.executor) for track, task in holders],
                delayed=found.over,
                idle_until={i: s.release for i, s in found.slots.items() if i not in found.over},
                cap=found.cap,
                idle_inserted=sum(s.delay for s in found.slots.values()),
            )
        for i, slot in wf.idle_slots.items():
            if i not in found.over and job.stages[i].idle_until is None:  # ended meanwhile
                self.intents.event(wf.owner, *messages.idle_slot_ended(slot, while_away=True))
        for track, task in found.beyond:
            task.executor = None
            self.cluster.run_beyond(job.stages[track.index], task)
        if found.beyond or any(s.launched for s in job.stages):
            wf.phase = Phase.RUNNING

    def _resume(self, wf: Workflow, found: Restore) -> None:
        """Carry on where the restored workflow stands: done, failed, or its next pods."""
        if wf.job.finish is not None:
            self._complete(wf)
        elif found.failed_for_good:
            track, task, reason = found.failed_for_good
            self.fail_task_for_good(wf, track, task, reason)
        else:
            for track, task in found.retry:
                task.attempt += 1
                self.intents.create_pod(wf, track, task, gated=False)
            for track in wf.stages:
                self.top_up(wf, track)
            self._arm_new_timers()
            self.intents.status(wf, urgent=True)

    # -- pod events, timers, deletions -----------------------------------------------------

    def forget(self, namespace: str, name: str, uid: str | None, *, schedule: bool = True) -> None:
        """The DagWorkflow is being deleted: take its job out (its pods go with it, by GC)."""
        wf = self.workflows.get((namespace, name))
        if wf is None or (uid and wf.owner.uid != uid):
            return
        self.intents.cancel_writes(wf.owner)
        self.drop(wf)
        self.end(wf.owner.uid)
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
            wf.pod_vanished = True
            if task.state is TaskState.RELEASED:
                reason = f"pod {info.name} was deleted before it finished"
                self._task_failed(wf, track, task, reason)
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
        if info.phase != "Succeeded":
            self._task_failed(wf, track, task, f"pod {info.name} failed: {info.reason}")
        elif task.executor is None:  # beyond the pool: counted once it has an executor
            task.finished_unaccounted = True
        else:
            self.task_succeeded(wf, track, task, self._ran(info))
        self.schedule()

    def outcome(self, outcome: Outcome) -> None:
        """A write ended (the edge's report): a pod the API returned is read like a watch
        event; a pod write refused for good fails its workflow (its executors return to the
        pool); a write whose workflow is gone makes the core forget it."""
        intent = outcome.intent
        if isinstance(outcome, Confirmed):
            if isinstance(intent, CreatePod | RemoveGate) and outcome.body is not None:
                if isinstance(intent, CreatePod) and intent.owner_check:
                    wf = self.workflows.get((intent.owner.namespace, intent.owner.name))
                    if wf is not None and wf.owner.uid == intent.owner.uid:
                        wf.pod_vanished = False  # (the workflow is there)
                self.observe_pod(outcome.body)
            elif isinstance(intent, PatchStatus) and isinstance(intent.status, LiveStatus):
                # what it carried is in the API: its idle slots, its ended pods (for pod GC)
                landed, wf = intent.status, intent.status.workflow
                wf.persisted_slots |= landed.slots
                if outcome.body is not None:  # (it was found)
                    self.intents.add(StatusLanded(wf, landed.counted))
            return
        owner = intent.owner
        if isinstance(intent, RemoveGate) and intent.spec is None:  # an Argo pod's
            message = f"Cannot release pod {intent.name}: {outcome.message}"
            self.intents.event(owner, "Warning", "PodError", message)
            return
        wf = self.workflows.get((owner.namespace, owner.name))
        if wf is None or wf.owner.uid != owner.uid or not wf.active:
            return
        if outcome.gone:
            self.forget(owner.namespace, owner.name, owner.uid)
        elif outcome.permanent and isinstance(intent, CreatePod | RemoveGate):
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
            self.fail(wf, reason, message)
            self.schedule()

    def _ran(self, pod: TaskPod) -> float | None:
        """A succeeded pod's run time on the operator's clock, if its status tells it."""
        if pod.ran is None:
            return None
        start, end = pod.ran
        clock = self.settings.clock
        return clock.from_wall(end) - clock.from_wall(start)

    def idle_expired(self, key: WorkflowKey, uid: str, stage_index: int) -> None:
        """An idle slot's timer fired: the stage is runnable again."""
        wf: Workflow | ArgoWorkflow | None = self.workflows.get(key)
        if wf is None or wf.owner.uid != uid:
            wf = self.argo.get(key)
        if wf is None or wf.owner.uid != uid or not wf.active:
            return
        stage = wf.job.stages[stage_index]
        if stage.idle_until is None:
            return
        self.cluster.idle_expired(stage, self.now())
        if isinstance(wf, Workflow):
            slot = wf.idle_slots.get(stage_index)
            if slot is not None:
                self.intents.event(wf.owner, *messages.idle_slot_ended(slot, while_away=False))
            self.intents.status(wf, urgent=True)
        self.schedule()

    # -- scheduling ------------------------------------------------------------------------

    def schedule(self) -> None:
        """Ask the policy (if an event made it necessary) and carry out its launches."""
        if self.paused:
            return
        if self.cluster.beyond and self.cluster.free_executors:
            self._adopted(self.cluster.adopt_beyond(self.now()))
        # (while a task runs beyond the pool, the pool is over its size: nothing new)
        if self.cluster.needs_schedule and not self.cluster.beyond:
            done = self.decider.decide(self.cluster, self.now())
            for answer in done.taken:
                if answer.decision.idle_delay > 0:
                    self._idle_started(answer)
            self._launch(done.taken)
            post_round(done, self.cluster, self.intents.event, self.reporter)
            self._note_waiting(done.waited)
        self._arm_new_timers()
        self.intents.add(RoundEnded())

    def _launch(self, taken: list[Answer]) -> None:
        """Release the launched tasks, one Event per stage (the last decision's cap)."""
        launched: dict[Stage, tuple[Answer, list[Launch]]] = {}
        for answer in taken:
            if answer.launches:
                _, before = launched.get(answer.decision.stage, (answer, []))
                launched[answer.decision.stage] = (answer, before + answer.launches)
        for stage, (last, launches) in launched.items():
            wf = stage.job.payload
            if isinstance(wf, ArgoWorkflow):
                self.intents.release_argo(wf.owner, wf.live.launched(launches))
            else:
                track = wf.stages[stage.index]
                previous, wf.policy, track.policy = wf.policy, last.rule, last.rule
                if previous is not None and previous != last.rule:  # (a planner's switch?)
                    self.intents.add(RuleSwitched(wf, previous, last.rule))
                for launch in launches:
                    self.release(wf, track, track.next_to_release(), launch.executor)
            notice = messages.released(len(launches), last.decision, last.by)
            self.intents.event(wf.owner, *notice)

    @property
    def busy(self) -> int:
        """Task pods running: on the pool's executors, and beyond the pool."""
        return self.cluster.busy

    # -- beyond the pool -------------------------------------------------------------------

    def _released_by_others(self, wf: Workflow, track: StageTrack, task: Task, pod: str) -> None:
        """A gated pod of ours lost the gate without the operator: its task is launched on a
        free executor (ending its stage's idle slot, if any), or runs beyond the pool."""
        self.metrics.foreign_releases.inc()
        track.set_state(task, TaskState.RELEASED)
        task.executor = None
        if wf.phase is Phase.PENDING:
            wf.phase = Phase.RUNNING
        stage = wf.job.stages[track.index]
        if stage.idle_until is not None:  # it has started: its idle slot is over
            self.intents.cancel_timer(timer_key(wf.owner, track.index))
        adopted = self.cluster.started_unasked(stage, self.now(), task)
        self._adopted(adopted)
        self.top_up(wf, track)
        notice = messages.released_by_others(
            pod, track.spec.name, self.settings.pool_size, bool(adopted)
        )
        self.intents.event(wf.owner, *notice)
        self.intents.status(wf, urgent=True)

    def _adopted(self, launches: list[tuple[Launch, Any]]) -> None:
        """Tasks beyond the pool (or started unasked) have executors now (their token: a
        Task, or an Argo pod's name): a gang's tasks without one (None) are released with
        it; one that ended meanwhile is counted."""
        for launch, task in launches:
            wf = launch.stage.job.payload
            if isinstance(wf, ArgoWorkflow):
                adopted = wf.live.adopted(self.cluster, [(launch, task)], self.now())
                self.intents.release_argo(wf.owner, adopted)
                continue
            track = wf.stages[launch.stage.index]
            if task is None:
                self.release(wf, track, track.next_to_release(), launch.executor)
                continue
            task.executor = launch.executor
            if task.finished_unaccounted:  # it ended before it had an executor
                task.finished_unaccounted = False
                self.task_succeeded(wf, track, task, None)

    def _idle_started(self, answer: Answer) -> None:
        stage, delay = answer.decision.stage, answer.decision.idle_delay
        wf = stage.job.payload
        until = stage.idle_until if stage.idle_until is not None else self.now()
        reason = messages.idle_reason(answer.by, answer.decision, answer.hold)
        slot = SlotState(stage.name, delay, until, reason)
        if isinstance(wf, Workflow):
            wf.idle_slots[stage.index] = slot
            self.metrics.idle_inserted.inc(delay)
            self.intents.status(wf, urgent=True)  # persisted before anything else of it happens
        self.intents.event(wf.owner, *messages.idle_slot(slot, self.busy, self.settings.pool_size))

    def _arm_new_timers(self) -> None:
        for stage in self.cluster.new_timers:
            wf = stage.job.payload
            # (not for a job that left: one of an Argo Workflow that its remap replaced)
            if stage.idle_until is not None and wf.active and stage.job.finish is None:
                key = timer_key(wf.owner, stage.index)
                where = (wf.owner.namespace, wf.owner.name)
                fire = IdleEnded(where, wf.owner.uid, stage.index)
                self.intents.set_timer(key, stage.idle_until, fire)
        self.cluster.new_timers.clear()

    def _note_waiting(self, why: str | None) -> None:
        """One Event per stage that became runnable but got no executor: why it waits."""
        free, pool = self.cluster.free_executors, self.settings.pool_size
        for job in self.cluster.jobs:
            wf = job.payload
            for stage in job.runnable:
                if not stage.launched and stage.name not in wf.noted:
                    wf.noted.add(stage.name)
                    notice = messages.waiting(stage, job, free, pool, why or "")
                    self.intents.event(wf.owner, *notice)

    # -- tasks -----------------------------------------------------------------------------

    def release(self, wf: Workflow, track: StageTrack, index: int, executor: int) -> None:
        """Release task `index` onto `executor`: remove its gate, or create it ungated."""
        task = track.task(index)
        had_pod = task.state is TaskState.GATED
        track.set_state(task, TaskState.RELEASED)
        task.executor, task.released_at = executor, self.now()
        started = wf.phase is Phase.PENDING
        if started:
            wf.phase = Phase.RUNNING
        if had_pod:
            self.intents.release_pod(wf, track, task)
        else:
            self.intents.create_pod(wf, track, task, gated=False)
        self.top_up(wf, track)
        self.intents.status(wf, urgent=started)

    def top_up(self, wf: Workflow, track: StageTrack) -> None:
        """Create the stage's gated pods, up to the window ahead of its releases, once its
        parents are done."""
        stage = wf.job.stages[track.index]
        if stage.parents_left or stage.complete:
            return
        while track.gated < self.settings.window:
            index = track.next_to_create()
            if index is None:
                return
            task = track.task(index)
            track.set_state(task, TaskState.GATED)
            self.intents.create_pod(wf, track, task, gated=True)

    def task_succeeded(
        self, wf: Workflow, track: StageTrack, task: Task, ran: float | None
    ) -> None:
        executor = task.executor
        assert executor is not None
        track.set_state(task, TaskState.SUCCEEDED)
        self.intents.add(TaskEnded(wf, track, task, True))
        wf.measured(track, task, self.now(), ran, self.settings.history_samples)
        following = self.cluster.task_finished(executor, self.now())
        if following is not None:
            self.release(wf, track, track.next_to_release(), executor)
            self.intents.event(wf.owner, *messages.released_next(track.spec.name))
        job = wf.job
        if job.finish is not None:
            self._complete(wf)
            return
        if job.stages[track.index].complete:  # its children whose parents are all done start
            for child in job.stages[track.index].children:
                self.top_up(wf, wf.stages[child])
        self.intents.status(wf)

    def _task_failed(self, wf: Workflow, track: StageTrack, task: Task, reason: str) -> None:
        """The task's attempt failed: past its backoffLimit it fails the workflow, else it
        is retried on its executor, or, if it ran beyond the pool, when the policy says."""
        track.attempt_failed(task)
        self.metrics.task_failures.inc()
        self.intents.add(TaskEnded(wf, track, task, False))
        if task.failures > track.spec.backoff_limit:
            self.fail_task_for_good(wf, track, task, reason)
            return
        task.attempt += 1
        if task.executor is None:
            self.cluster.drop_beyond(task)
            track.replan(task)
        else:
            self.intents.event(wf.owner, *messages.task_failure(track, task, reason))
            self.intents.create_pod(wf, track, task, gated=False)
        self.intents.status(wf)

    def fail_task_for_good(self, wf: Workflow, track: StageTrack, task: Task, reason: str) -> None:
        track.set_state(task, TaskState.FAILED)  # its pod has failed: kept (logs)
        _, failure, message = messages.task_failure(track, task, reason)
        self.fail(wf, failure, message)

    # -- workflow outcomes -----------------------------------------------------------------

    def _complete(self, wf: Workflow) -> None:
        wf.completion = wf.job.finish
        message = "All stages succeeded."
        wf.conditions.set("Complete", True, "Succeeded", message, wf.generation, self.now())
        notice = messages.succeeded(wf.dag, wf.completion - wf.arrival, wf.job.idle_inserted)
        self._finished(wf, Phase.SUCCEEDED, notice)

    def fail(self, wf: Workflow, reason: str, message: str) -> None:
        """Fail the workflow: its unfinished pods are deleted, its executors return to the
        pool (the caller schedules)."""
        if not wf.active:
            return
        wf.completion = self.now()
        self.intents.cancel_writes(wf.owner)  # drop the creations and releases not done yet
        for track in wf.stages:
            for task in track.tasks.values():
                if task.state in (TaskState.GATED, TaskState.RELEASED):
                    name = pod_name(wf.owner.name, track.spec.name, task.index, task.attempt)
                    self.intents.delete_pod(wf.owner, name, frees=task.state is TaskState.RELEASED)
        wf.conditions.set("Failed", True, reason, message, wf.generation, wf.completion)
        self._finished(wf, Phase.FAILED, ("Warning", reason, message))
        log.warning("%s/%s failed: %s", wf.owner.namespace, wf.owner.name, message)

    def _finished(self, wf: Workflow, phase: Phase, notice: messages.Notice) -> None:
        """`wf` ended in `phase` at `wf.completion`: its metrics, Event, history record and
        last status; it leaves the pool, never to be admitted again."""
        wf.phase = phase
        outcome = phase.lower()
        self.metrics.completion_time.labels(outcome).observe(wf.completion - wf.arrival)
        self.metrics.workflows_finished.labels(outcome).inc()
        self.intents.event(wf.owner, *notice)
        wf.pool_size, wf.scheduler = self.settings.pool_size, self.spec
        self.intents.add(Finished(wf))
        self.intents.status(wf, urgent=True)
        self.drop(wf)
        self.end(wf.owner.uid)

    def end(self, uid: str) -> None:
        """The workflow of `uid` ended (here, or for a kind the core does not hold): it is
        never admitted again (:attr:`ended`)."""
        self.ended[uid] = None
        while len(self.ended) > ENDED_KEPT:
            del self.ended[next(iter(self.ended))]

    def drop(self, wf: Workflow) -> None:
        """Take the workflow out of the pool and the operator's memory (its last writes are
        queued); a job that has finished is out of the state machine already."""
        wf.active = False
        self.deadline_dropped(wf)
        self.cluster.remove_job(wf.job, self.now())
        for index in wf.idle_slots:
            self.intents.cancel_timer(timer_key(wf.owner, index))  # (one that fired: a no-op)
        if self.workflows.get(wf.key) is wf:
            del self.workflows[wf.key]
