"""The job kinds one pool schedules (Kueue's ``GenericJob``): what a workflow of each kind
does at each step of the state machine, behind one protocol, :class:`JobKind`.

The core (:class:`~.core.Core`) holds every kind's workflows the same way: a job in the
pool's :class:`~idlegate.sim.cluster.Cluster` whose payload is the workflow, found by
its :class:`~.pods.Owner` (kind, namespace, name, uid: ``Core.holding``). Each step that
differs by kind is a method of the workflow, given the core as a :class:`Pool`:

* ``observe(pool, pod, deleted=)``: a pod of it as it is now (level-triggered), read
  as its kind reads pods;
* ``launched(pool, stage, launches, rule)``: the policy launched tasks of a stage;
* ``adopted(pool, launch, token)``: a task that ran beyond the pool (or a gang's task
  without a pod, `token` None) has an executor now;
* ``idle_started(pool, stage, slot)``, ``idle_ended(pool, stage)``: a stage's idle slot
  began, its timer fired (the timer is the core's);
* ``refused(pool, outcome)``: a write for it was refused for good;
* ``dropped(pool)``: it left the pool (the core then takes its job out and forgets it).

:class:`DagWorkflow` is idlegate's own kind: the core creates its task pods gated, and
it keeps their bookkeeping (:mod:`.tracking`); it is admitted from its body and pods
(``Admit``), and its history record is the ``Finished`` fact. :class:`ExternalWorkflow`
is any kind whose pods another controller creates, gated at creation by idlegate's
webhook (Argo's Workflows; Airflow's worker pods): its :class:`~.external.ExternalJob`
pairs the launches with those pods. Such a kind brings its mapping of a workflow
(:class:`~.external.Mapped`), its reading of a pod (:class:`~.external.ExternalPod`) and
a feature that hands them in as events: ``Join``, ``Observed``, ``Remapped``, ``Ended``;
its history record is the feature's (``ExternalJob.ran`` keeps its pods' run times).
A third such kind needs nothing new here.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from idlegate.api.status import Phase, SlotState
from idlegate.errors import IdlegateError
from idlegate.operator.core import messages
from idlegate.operator.core.events import Finished, RuleSwitched, TaskEnded
from idlegate.operator.core.external import ExternalJob, ExternalPod, Mapped
from idlegate.operator.core.intents import CreatePod, Outbox, Refused, RemoveGate
from idlegate.operator.core.pods import Owner, TaskPod, pod_name
from idlegate.operator.core.tracking import StageTrack, Task, TaskState, Workflow, timer_key
from idlegate.operator.metrics import Metrics
from idlegate.operator.settings import Settings
from idlegate.sim.cluster import Cluster
from idlegate.sim.protocol import Job, Launch

log = logging.getLogger(__name__)


class Pool(Protocol):
    """What a kind uses of the core that holds it (:class:`~.core.Core`)."""

    cluster: Cluster
    intents: Outbox
    settings: Settings
    metrics: Metrics
    spec: str | None

    def now(self) -> float: ...
    def schedule(self) -> None: ...
    def adopt(self, launches: list[tuple[Launch, Any]]) -> None: ...
    def forget(self, namespace: str, name: str, uid: str | None) -> None: ...
    def deadline_dropped(self, wf: Workflow) -> None: ...
    def drop(self, wf: JobKind) -> None: ...
    def end(self, uid: str) -> None: ...


class JobKind(Protocol):
    """One workflow in the pool, of any kind: what the pool asks of it (see the module
    docstring). Its job's payload is the workflow itself."""

    owner: Owner
    active: bool
    """In the pool (False once dropped: late timers and events find nothing to do)."""
    noted: set[str]
    """Stages whose wait for an executor an Event said (once each)."""

    @property
    def job(self) -> Job: ...
    def observe(self, pool: Pool, pod: Any, *, deleted: bool = False) -> None: ...
    def launched(self, pool: Pool, stage: int, launches: list[Launch], rule: str) -> None: ...
    def adopted(self, pool: Pool, launch: Launch, token: Any) -> None: ...
    def idle_started(self, pool: Pool, stage: int, slot: SlotState) -> None: ...
    def idle_ended(self, pool: Pool, stage: int) -> None: ...
    def refused(self, pool: Pool, outcome: Refused) -> None: ...
    def dropped(self, pool: Pool) -> None: ...


class DagWorkflow(Workflow):
    """A DagWorkflow as a :class:`JobKind`: its task pods are the pool's (see
    :class:`~.tracking.Workflow` for its state)."""

    def observe(self, pool: Pool, pod: TaskPod, *, deleted: bool = False) -> None:
        track = self.by_name.get(pod.stage)
        task = track.tasks.get(pod.index) if track is not None else None
        if track is None or task is None or task.attempt != pod.attempt:
            return  # not ours, or an attempt already dealt with
        if (deleted or pod.deleting) and not pod.terminal:
            self.pod_vanished = True
            if task.state is TaskState.RELEASED:
                why = f"pod {pod.name} was deleted before it finished"
                self.task_failed(pool, track, task, why)
            elif task.state is TaskState.GATED and deleted:
                track.forget_pod(task)
            pool.schedule()
            return
        if task.state is TaskState.GATED and not pod.gated:
            self.released_by_others(pool, track, task, pod.name)
            if not pod.terminal:
                pool.schedule()
                return
        if task.state is not TaskState.RELEASED or not pod.terminal:
            return
        if pod.phase != "Succeeded":
            self.task_failed(pool, track, task, f"pod {pod.name} failed: {pod.reason}")
        elif task.executor is None:  # beyond the pool: counted once it has an executor
            task.finished_unaccounted = True
        else:
            self.task_succeeded(pool, track, task, _ran(pool, pod))
        pool.schedule()

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
            pool.intents.event(self.owner, *messages.idle_slot_ended(slot, while_away=False))
        pool.intents.status(self, urgent=True)

    def refused(self, pool: Pool, outcome: Refused) -> None:
        """A write whose workflow is gone makes the pool forget it; a pod write refused
        for good fails it (its executors return to the pool)."""
        intent, owner = outcome.intent, self.owner
        if outcome.gone:
            pool.forget(owner.namespace, owner.name, owner.uid)
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
            self.fail(pool, reason, message)
            pool.schedule()

    def dropped(self, pool: Pool) -> None:
        pool.deadline_dropped(self)
        for index in self.idle_slots:
            pool.intents.cancel_timer(timer_key(self.owner, index))  # (one that fired: a no-op)

    def released_by_others(self, pool: Pool, track: StageTrack, task: Task, pod: str) -> None:
        """A gated pod of ours lost the gate without the operator: its task is launched on a
        free executor (ending its stage's idle slot, if any), or runs beyond the pool."""
        pool.metrics.foreign_releases.inc()
        track.set_state(task, TaskState.RELEASED)
        task.executor = None
        if self.phase is Phase.PENDING:
            self.phase = Phase.RUNNING
        stage = self.job.stages[track.index]
        if stage.idle_until is not None:  # it has started: its idle slot is over
            pool.intents.cancel_timer(timer_key(self.owner, track.index))
        adopted = pool.cluster.started_unasked(stage, pool.now(), task)
        pool.adopt(adopted)
        self.top_up(pool, track)
        notice = messages.released_by_others(
            pod, track.spec.name, pool.settings.pool_size, bool(adopted)
        )
        pool.intents.event(self.owner, *notice)
        pool.intents.status(self, urgent=True)

    def release(self, pool: Pool, track: StageTrack, index: int, executor: int) -> None:
        """Release task `index` onto `executor`: remove its gate, or create it ungated."""
        task = track.task(index)
        had_pod = task.state is TaskState.GATED
        track.set_state(task, TaskState.RELEASED)
        task.executor, task.released_at = executor, pool.now()
        started = self.phase is Phase.PENDING
        if started:
            self.phase = Phase.RUNNING
        if had_pod:
            pool.intents.release_pod(self, track, task)
        else:
            pool.intents.create_pod(self, track, task, gated=False)
        self.top_up(pool, track)
        pool.intents.status(self, urgent=started)

    def top_up(self, pool: Pool, track: StageTrack) -> None:
        """Create the stage's gated pods, up to the window ahead of its releases, once its
        parents are done."""
        stage = self.job.stages[track.index]
        if stage.parents_left or stage.complete:
            return
        while track.gated < pool.settings.window:
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
        self.measured(track, task, pool.now(), ran, pool.settings.history_samples)
        following = pool.cluster.task_finished(executor, pool.now())
        if following is not None:
            self.release(pool, track, track.next_to_release(), executor)
            pool.intents.event(self.owner, *messages.released_next(track.spec.name))
        job = self.job
        if job.finish is not None:
            self.complete(pool)
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
            pool.intents.event(self.owner, *messages.task_failure(track, task, reason))
            pool.intents.create_pod(self, track, task, gated=False)
        pool.intents.status(self)

    def fail_task_for_good(self, pool: Pool, track: StageTrack, task: Task, reason: str) -> None:
        track.set_state(task, TaskState.FAILED)  # its pod has failed: kept (logs)
        _, failure, message = messages.task_failure(track, task, reason)
        self.fail(pool, failure, message)

    def complete(self, pool: Pool) -> None:
        self.completion = self.job.finish
        message = "All stages succeeded."
        self.conditions.set("Complete", True, "Succeeded", message, self.generation, pool.now())
        notice = messages.succeeded(
            self.dag, self.completion - self.arrival, self.job.idle_inserted
        )
        self.finished(pool, Phase.SUCCEEDED, notice)

    def fail(self, pool: Pool, reason: str, message: str) -> None:
        """Fail the workflow: its unfinished pods are deleted, its executors return to the
        pool (the caller schedules)."""
        if not self.active:
            return
        self.completion = pool.now()
        pool.intents.cancel_writes(self.owner)  # drop the creations and releases not done yet
        for track in self.stages:
            for task in track.tasks.values():
                if task.state in (TaskState.GATED, TaskState.RELEASED):
                    name = pod_name(self.owner.name, track.spec.name, task.index, task.attempt)
                    pool.intents.delete_pod(
                        self.owner, name, frees=task.state is TaskState.RELEASED
                    )
        self.conditions.set("Failed", True, reason, message, self.generation, self.completion)
        self.finished(pool, Phase.FAILED, ("Warning", reason, message))
        log.warning("%s/%s failed: %s", self.owner.namespace, self.owner.name, message)

    def finished(self, pool: Pool, phase: Phase, notice: messages.Notice) -> None:
        """`self` ended in `phase` at `self.completion`: its metrics, Event, history record and
        last status; it leaves the pool, never to be admitted again."""
        self.phase = phase
        outcome = phase.lower()
        pool.metrics.completion_time.labels(outcome).observe(self.completion - self.arrival)
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


@dataclass(eq=False)
class ExternalWorkflow:
    """A workflow whose pods another controller creates, as a :class:`JobKind`: its job
    and pods as its :class:`~.external.ExternalJob` pairs them. The pool only releases
    its pods (and says why on the workflow, `owner`)."""

    owner: Owner
    live: ExternalJob
    noted: set[str] = field(default_factory=set)
    active: bool = True

    def __post_init__(self) -> None:
        self.live.payload = self  # (what the cluster's job carries)

    @property
    def job(self) -> Job:
        """Its job now (`ExternalJob.remap` replaces it as the controller settles it)."""
        return self.live.job

    def join(
        self, pool: Pool, arrival: float, pods: Iterable[ExternalPod], seen: Sequence[ExternalPod]
    ) -> None:
        """Enter the pool at `arrival` with the progress its `pods` show, then the pods
        `seen` since they were listed."""
        self.live.admit(pool.cluster, pool.now(), arrival, pods)
        for pod in seen:
            self._release(pool, self.live.observe(pool.cluster, pod, pool.now()))

    def remap(self, pool: Pool, mapped: Mapped) -> None:
        """Its controller settled more of it: the job `mapped` replaces the current one."""
        job = self.job
        try:
            releases = self.live.remap(pool.cluster, mapped, pool.now())
        except IdlegateError as exc:
            log.warning("%s/%s no longer maps (%s): kept as it was.", *self.live.key, exc)
            return
        if self.job is not job:  # a new job: its idle slots' timers are set under its indexes
            for stage in job.stages:
                if stage.idle_until is not None:
                    pool.intents.cancel_timer(timer_key(self.owner, stage.index))
        self._release(pool, releases)
        for pod in self.live.take_unplaced():
            why = "its task is no stage of the job idlegate mapped"
            unscheduled(pool.intents, self.owner, pod.name, why)

    def observe(self, pool: Pool, pod: ExternalPod, *, deleted: bool = False) -> None:
        # (a pod deleted before it ended comes as Failed: its executor is free)
        self._release(pool, self.live.observe(pool.cluster, pod, pool.now()))

    def launched(self, pool: Pool, stage: int, launches: list[Launch], rule: str) -> None:
        self._release(pool, self.live.launched(launches))

    def adopted(self, pool: Pool, launch: Launch, token: Any) -> None:
        self._release(pool, self.live.adopted(pool.cluster, [(launch, token)], pool.now()))

    def idle_started(self, pool: Pool, stage: int, slot: SlotState) -> None:
        """(Nothing is persisted: a restart maps it again from its controller's state.)"""

    def idle_ended(self, pool: Pool, stage: int) -> None:
        """(Its pods wait at the gate: the next round releases them.)"""

    def refused(self, pool: Pool, outcome: Refused) -> None:
        refused_release(pool.intents, outcome)

    def dropped(self, pool: Pool) -> None:
        """(Its controller deletes its pods.)"""

    def _release(self, pool: Pool, releases: Iterable[Any]) -> None:
        pool.intents.release_external(self.owner, releases)


def unscheduled(intents: Outbox, owner: Owner, pod: str, why: str) -> None:
    """Release the gated `pod` of `owner` unscheduled (no stage takes it), saying why."""
    intents.add(RemoveGate(owner, "", 0, 0, pod, None, None))
    log.warning("Released pod %s/%s unscheduled: %s.", owner.namespace, pod, why)


def refused_release(intents: Outbox, outcome: Refused) -> None:
    """A gate removal of a pod another controller made was refused: a Warning on its
    workflow, which goes on (the controller may delete or recreate the pod)."""
    intent = outcome.intent
    message = f"Cannot release pod {getattr(intent, 'name', '?')}: {outcome.message}"
    intents.event(intent.owner, "Warning", "PodError", message)
