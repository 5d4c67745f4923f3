"""The operator's core: one pool's workflows and pods in, the cluster state machine
(:class:`idlegate.sim.cluster.Cluster`) in the middle, intents out; docs/architecture.md
("Clock 2") follows a workflow through it, :mod:`idlegate.operator.kinds` says what differs by kind.

It reads no API and no clock: :meth:`Core.handle` is given each event with its time and
returns what to write (:mod:`.intents`) and the facts for the features (:mod:`.events`).
Every count of tasks and executors is the state machine's; the core keeps only the
pods' bookkeeping (:mod:`.tracking`).

Pods are created gated, stage by stage: when the stage becomes runnable, at most
`Settings.window` ahead of their release (of a workflow within reach: `_within_reach`),
the rest as released. Creating every pod up front would flood the API server (and every
watcher of pods): a flood of workflows, or a 500-stage one of large stages.

A pod that loses its gate without the operator, and a running pod of a workflow admitted
into a pool made smaller, count against the pool (``Cluster.started_unasked``,
``run_beyond``): the one path where the cluster's state changes without a decision.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from math import inf
from typing import Any, cast

from idlegate.api import eviction, notices
from idlegate.api.forecast_first import restore_first, restore_started
from idlegate.api.kinds import KIND
from idlegate.api.podsecurity import NamespacePolicy
from idlegate.api.pool_spec import POOL_CONDITION
from idlegate.api.queueing import bound_hit
from idlegate.api.settings import Settings
from idlegate.api.status import (
    FINISHED,
    UNFORECAST,
    Conditions,
    Phase,
    SlotState,
    WorkflowStatus,
    dump,
    generation_of,
    invalid_status,
    judged,
)
from idlegate.api.task_pods import Owner, read_task_pod
from idlegate.errors import DemandTooLargeError, GangTooWideError, IdlegateError
from idlegate.operator.core.decider import Answer, Decider, post_round
from idlegate.operator.core.events import (
    Admit,
    Capacity,
    DeadlinePassed,
    Ended,
    Event,
    Fact,
    Forget,
    FoundFinished,
    IdleEnded,
    Join,
    Leave,
    Moved,
    Observed,
    PodSeen,
    Recorded,
    RoundEnded,
    Schedule,
    SpecChanged,
    StopTasks,
    Unpooled,
    WorkflowAdmitted,
)
from idlegate.operator.core.intents import (
    Confirmed,
    EvictPod,
    Intent,
    LiveStatus,
    Outbox,
    Outcome,
    PostEvent,
    Refused,
    ReleaseStop,
    RemoveGate,
    Timing,
    follow_ups,
)
from idlegate.operator.core.judging import Judged, Judging
from idlegate.operator.core.lifecycle import Lifecycle
from idlegate.operator.core.stops import Stops
from idlegate.operator.core.tracking import (
    Workflow,
    WorkflowKey,
    timer_key,
)
from idlegate.operator.kinds.external import ExternalJob, refused_release
from idlegate.operator.kinds.protocol import JobKind, Then
from idlegate.operator.kinds.workflow import (
    DagWorkflow,
    Restore,
    classify,
    new_workflow,
    owner_of,
)
from idlegate.operator.metrics import Metrics
from idlegate.operator.nodes.ledger import named
from idlegate.sim.admission import Admission
from idlegate.sim.admission_result import AdmissionResult, Verdict
from idlegate.sim.cluster import Cluster
from idlegate.sim.legality import cap_holds
from idlegate.sim.pool import Allows
from idlegate.sim.protocol import Job, Launch, Scheduler, Stage
from idlegate.sim.resources import ResourceVector
from idlegate.sim.task_times import TaskTimes

log = logging.getLogger(__name__)

ENDED_KEPT = 20_000
"""How many uids of workflows that ended here (finished, failed, deleted) are remembered."""


Output = Intent | Timing | Fact
"""What :meth:`Core.handle` returns: writes, timers, and facts for the features."""


class Core(Lifecycle, Stops):
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
        self.times = TaskTimes()
        """Its tasks' latency and stretch, as they end (its forecasts draw from them)."""
        self.intents = Outbox()
        """What to write, in order (the edge takes and applies them)."""
        self.at = 0.0
        """The time of the event being handled (operator clock seconds)."""
        follows = settings.pool_nodes is not None  # (a pool on nodes: --pool-nodes, nodeSelector)
        resources = settings.pool_resources or (named() if follows else None)
        self.cluster = Cluster(settings.pool_size, resources=resources)
        self.cluster.changed = {}  # (the jobs `_note_waiting` reads)
        if follows:  # (no room until its nodes are read: `Capacity`)
            self.cluster.set_capacity(ResourceVector(), ())
        self.queues = settings.queues.specs if settings.queues is not None else ()
        """The pool's queues (none: one queue, no quotas, as without them)."""
        self.bound = inf
        """When the wait bound's timer is armed for (`Admission.next_bound`)."""
        self.judging: Judging | None = None
        """The ``decide: Forecast`` queues' stops being judged (`operator.core.judging`)."""
        if self.queues:
            cluster = self.cluster
            cluster.admission = Admission(self.queues, cluster.capacity, cluster.resource_names)
            metrics.watch_queues(cluster.admission, cluster)
            cluster.stopper, reclaimer = self._stops, cluster.admission.reclaimer
            cluster.stoppable = lambda s: s.job.payload.stoppable
            if reclaimer is not None and reclaimer.forecasts:
                self.judging = Judging(reclaimer)
        self.allocatable: tuple[tuple[ResourceVector, ...], Allows | None] = ((), None)
        """The nodes' allocatable and rules last told (`Capacity`): which stages no node holds."""
        self.window = settings.window  # (gated pods ahead per runnable stage; read once)
        self.ahead = settings.gated_workflows_ahead  # (waiting workflows given pods ahead)
        self.deferred: dict[DagWorkflow, None] = {}
        """Workflows whose gated pods wait until they are within reach (`_within_reach`)."""
        self.accepted: dict[Job, PostEvent] = {}
        """The Accepted Events of this handling's admissions, which a first Waiting joins."""
        self.round_due = False
        """A round of a burst is due (`Bridge.round_soon`): the Accepted Events meanwhile
        wait in `unsaid`, said before its Events (or by a handling with none)."""
        self.joins, self.rounds = False, 0
        """The edge's: this pod event's round joins the one due (`Bridge.handle`); rounds run."""
        self.unsaid = Outbox()
        self.workflows: dict[WorkflowKey, DagWorkflow] = {}
        self.held: dict[str, dict[WorkflowKey, Any]] = {KIND: self.workflows}
        """Kind (the owner's) -> the workflows of that kind in the pool (:mod:`idlegate.operator.kinds`);
        :attr:`workflows`, the DagWorkflows, is one of them."""
        self.ended: dict[str, None] = {}
        """The uids of workflows that ended here (the latest :data:`ENDED_KEPT`, oldest
        first): never admitted again from a read that predates their final status (a
        rebuild's lists, a kopf event), which would write that stale status after it."""
        self.paused = False
        """While workflows move into the pool (`Pools.moving`) no round runs: each one's
        running pods must be counted before the pool releases anything."""
        self.decider = Decider(scheduler, metrics, settings.seed)  # (it resets the policy)
        metrics.watch(self.workflows, self.cluster, self.held)
        self.reporter: Owner | None = None
        """Where the pool's own Events go (its ExecutorPool, the operator's Pod), if anywhere."""
        self.no_room: str | None = None
        """Why the pool, once its nodes are read, can release nothing (`notices.no_room`)."""

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
            case IdleEnded(owner, stage):
                self.idle_expired(owner, stage)
            case Forget(namespace, name, uid, schedule):
                self.forget(namespace, name, uid, schedule=schedule)
            case DeadlinePassed():
                self.deadline_passed(event)
            case SpecChanged(key, uid, spec, generation):
                self.spec_changed(key, uid, spec, generation)
            case Recorded(wf):
                wf.history_recorded = True  # (no operator records it again)
                self.intents.status(wf, urgent=True)
            case Unpooled(body, reason, message):
                self._unpooled(body, reason, message)
            case Leave(owner):
                if (left := self.holding(owner)) is not None:
                    self.drop(left)
            case Moved(wf, queue, priority):
                wf.queue, wf.priority = queue, priority
                if wf.enter(self):
                    self.held.setdefault(wf.owner.kind, {})[wf.owner.namespace, wf.owner.name] = wf
                    self._say_unfit((wf.job,))
            case Schedule(force):
                self.cluster.needs_schedule |= force
                self.schedule()
            case Capacity(capacity, nodes, allocatable, hosts, read, allows, placing):
                # (the cluster tells its admission the new capacity: Cluster.capacity_changed)
                placed = None if placing is None else placing.placed(self.pod_of)
                grew = self.cluster.set_capacity(
                    capacity, nodes, allocatable, hosts, allows, placed
                )
                if grew and self.cluster.may_start():  # (room a waiting task fits: a round)
                    self.cluster.needs_schedule = True
                    self.schedule()
                if (allocatable, allows) != self.allocatable:  # (a node came, went or changed)
                    self.allocatable = allocatable, allows
                    self._say_unfit(self.cluster.jobs)
                if read:
                    self._say_room(capacity, len(allocatable))
            case Join():
                self.join(event)
            case Observed(kind, key, pod):
                external = self.held.get(kind, {}).get(key)
                if external is not None and external.active:
                    external.observe(self, pod)
                    self.schedule()
            case Ended(owner):
                self.end(owner.uid)
                if (external := self.holding(owner)) is not None:
                    self.drop(external)
            case StopTasks(victims, needed, reason, queue):
                self.stop_tasks(victims, needed, reason, queue)
            case Judged() if self.judging is not None:
                self.intents.cancel_timer(f"judge:{event.token}")
                self._stops(self.judging.answer(event, self.cluster, self.at))
                if self.cluster.admission is not None:  # (withdrawn stops: asked again)
                    self.cluster.admission.reopen()
                self.cluster.needs_schedule = True
                self.schedule()
        if not self.round_due:  # (no round came for the Accepted Events held: said now)
            self.intents.intents += self.unsaid.take()
        return self.intents.take()

    def holding(self, owner: Owner) -> Any:
        """The workflow `owner` (that very object) in the pool, of any kind, if it is."""
        wf = self.held.get(owner.kind, {}).get((owner.namespace, owner.name))
        return wf if wf is not None and wf.owner.uid == owner.uid else None

    def join(self, event: Join) -> None:
        """A workflow whose pods another controller creates enters the pool (one that
        ended here does not), or, in it, takes its new job."""
        owner, key = event.owner, (event.owner.namespace, event.owner.name)
        if (held := self.holding(owner)) is not None:
            held.remap(self, event.mapped)
            self._say_unfit((held.job,))
            self.schedule()  # (a stage its controller settled may be ready now)
        elif owner.uid not in self.ended:
            wf = ExternalJob(owner, event.mapped, queue=event.queue, priority=event.priority)
            wf.asked = event.asked or {}
            wf.admit(self.cluster, self.now(), event.arrival, event.pods)
            self.held.setdefault(owner.kind, {})[key] = wf
            self._say_unfit((wf.job,))
            for pod in event.seen:  # (an ExternalJob hands back nothing: its releases are intents)
                wf.observe(self, pod)

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
            wf = new_workflow(body, now, self.settings, policy)
            if wf.spec.suspend and event.fail is None:
                self.hold(wf, body)
                return None
            restore = classify(wf, pods, status, self.cluster)
            wf.job = self.cluster.add_job(
                wf.dag, now, f"{owner.namespace}/{owner.name}", wf, arrival=wf.arrival
            )
            wf.job.queue, wf.job.priority = event.queue, event.priority
        except IdlegateError as exc:  # an invalid spec, or a gang larger than the pool
            if isinstance(exc, GangTooWideError | DemandTooLargeError) and event.gang_waits:
                raise
            self._reject(owner, body, str(exc))
            return None
        self.workflows[wf.key] = wf
        self._restore(wf, restore)
        restore_first(wf, status)  # (its first forecast, for its pool's refresh to score)
        restore_started(wf, status)
        self._say_unfit((wf.job,))
        if pods:  # (a new workflow has none to collect)
            self.intents.add(WorkflowAdmitted(wf, pods))
        message = f"A valid DAG of {len(wf.stages)} stages."
        wf.conditions.set("Valid", True, "SpecValid", message, wf.generation, now)
        if event.waited or wf.conditions.get(POOL_CONDITION):  # (it waited for its pool)
            message = f"In ExecutorPool {event.pool!r}."
            wf.conditions.set(POOL_CONDITION, True, "PoolFound", message, wf.generation, now)
        held = wf.conditions.get("Suspended")  # (a workflow suspended before, now resumed)
        if held or wf.spec.active_deadline_seconds is not None:
            self.entered(wf, expiring=event.fail is not None)
        if not status.get("startTime"):
            self.metrics.admission_lag.observe(wf.admitted - wf.arrival)
            rule, capacity = self.decider.policy.name, self.cluster.capacity
            notice = notices.accepted(wf.dag, rule, self.settings, capacity)
            said = self.accepted[wf.job] = PostEvent(owner, *notice)
            (self.unsaid if self.round_due else self.intents).add(said)
        if wf.phase is Phase.PENDING and wf.job not in self.cluster.ahead(self.ahead):
            wf.deferred, self.deferred[wf] = True, None  # (beyond reach: no pods ahead yet)
        self._resume(wf, restore)
        for track, stopped in restore.stopped:  # (a stop taken before a restart: said)
            self._preempted_before(wf, track, stopped)
        for name in restore.unheld:  # (nothing to count: the stop's finalizer off)
            self.release_stop(wf, name)
        for task, mark in restore.stopping:  # (a stop asked before a restart: finished)
            if task.executor is not None:  # (not beyond the pool)
                queue, reason = eviction.read_mark(mark)
                self.stop_tasks((task.executor,), 1, reason, queue)
        if event.fail is not None:
            wf.fail(self, "DeadlineExceeded", event.fail)
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
        self.intents.event(owner, *notices.invalid(message))

    def _unpooled(self, body: Mapping[str, Any], reason: str, message: str) -> None:
        status, generation = body.get("status") or {}, generation_of(body)
        conditions = Conditions(status.get("conditions"))
        conditions.set(POOL_CONDITION, False, reason, message, generation, self.now())
        phase = status.get("phase") or Phase.PENDING
        unpooled = WorkflowStatus(
            observed_generation=generation, phase=phase, conditions=conditions.models()
        )
        self.intents.patch_status(owner_of(body), dump(unpooled) | UNFORECAST)
        self.intents.event(owner_of(body), "Warning", reason, message)

    def _restore(self, wf: DagWorkflow, found: Restore) -> None:
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
                started=[found.started.get(id(task)) for _, task in holders],
                delayed=found.over,
                idle_until={i: s.release for i, s in found.slots.items() if i not in found.over},
                cap=found.cap,
                idle_inserted=sum(s.delay for s in found.slots.values()),
            )
        for i, slot in wf.idle_slots.items():
            if i not in found.over and job.stages[i].idle_until is None:  # ended meanwhile
                self.intents.event(wf.owner, *notices.idle_slot_ended(slot, while_away=True))
        for track, task in found.beyond:
            task.executor = None
            self.cluster.run_beyond(job.stages[track.index], task)
        if found.beyond or any(s.launched for s in job.stages):
            wf.phase = Phase.RUNNING

    def _resume(self, wf: DagWorkflow, found: Restore) -> None:
        """Carry on where the restored workflow stands: done, failed, or its next pods."""
        if wf.job.finish is not None:
            wf.complete(self, wf.job.finish)
        elif found.failed_for_good:
            track, task, reason = found.failed_for_good
            wf.fail_task_for_good(self, track, task, reason)
        else:
            for track, task in found.retry:
                task.attempt += 1
                self.intents.create_pod(wf, track, task, gated=False)
            for track in wf.stages:
                wf.top_up(self, track)
            self._arm_new_timers()
            self.intents.status(wf, urgent=True)

    # -- pod events, timers, deletions -----------------------------------------------------

    def forget(self, namespace: str, name: str, uid: str | None, *, schedule: bool = True) -> None:
        """The DagWorkflow is being deleted: take its job out (its pods go with it, by GC)."""
        wf = self.workflows.get((namespace, name))
        if wf is None or (uid and wf.owner.uid != uid):
            return
        self.intents.cancel_writes(wf.owner)
        for held in sorted(wf.holds):  # (its pods kept for a stop's count: go with it)
            self.intents.add(ReleaseStop(wf.owner, held))
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
        if wf is not None and wf.active and wf.owner.uid == info.owner_uid:
            self.then(wf, wf.observe(self, info, deleted=deleted))

    def outcome(self, outcome: Outcome) -> None:
        """A write ended (the edge's report): what it asks next (`follow_ups`: a cron's run
        said started), and what it means is its workflow's kind's (`JobKind.confirmed`,
        `JobKind.refused`)."""
        intent = outcome.intent
        self.intents.intents += follow_ups(outcome)
        if isinstance(intent, EvictPod):
            self._evicted(intent, outcome)
            return
        if isinstance(outcome, Confirmed):
            status = getattr(intent, "status", None)
            # (a status write's workflow may have left the pool: that it landed still counts)
            # (a LiveStatus is a DagWorkflow's, which intents cannot import: a circle)
            live = cast(DagWorkflow, status.workflow) if isinstance(status, LiveStatus) else None
            wf = live if live is not None else self.holding(intent.owner)
            if wf is not None:
                self.then(wf, wf.confirmed(self, outcome))
            return
        wf = self.holding(intent.owner)
        if wf is not None and wf.active:
            self.then(wf, wf.refused(self, outcome))
        elif isinstance(intent, RemoveGate) and intent.spec is None:  # (released unscheduled)
            refused_release(self.intents, outcome)

    def idle_expired(self, owner: Owner, stage_index: int) -> None:
        """An idle slot's timer fired: the stage is runnable again."""
        wf = self.holding(owner)
        if wf is None or not wf.active:
            return
        stage = wf.job.stages[stage_index]
        if stage.idle_until is None:
            return
        self.cluster.idle_expired(stage, self.now())
        wf.idle_ended(self, stage_index)
        self.schedule()

    def then(self, wf: JobKind, then: Then | None) -> None:
        """Do what a kind's step handed back (a kind never calls the pool's round)."""
        if then is Then.FORGET:
            self.forget(wf.owner.namespace, wf.owner.name, wf.owner.uid)
        elif then is Then.ROUND:
            self.schedule()

    # -- scheduling ------------------------------------------------------------------------

    def schedule(self) -> None:
        """Ask the policy (if an event made it necessary) and carry out its launches."""
        if self.paused:
            return
        if self.joins:  # (a pod event in a burst: its round is the next, `Bridge.handle`)
            self.round_due = True
            return
        self.rounds += 1
        if self.cluster.beyond and self.cluster.free_executors:
            self.adopt(self.cluster.adopt_beyond(self.now()))
        # (while a task runs beyond the pool, the pool is over its size: nothing new)
        if self.cluster.needs_schedule and not self.cluster.beyond:
            done = self.decider.decide(self.cluster, self.now())
            self.intents.intents += self.unsaid.take()
            for answer in done.taken:
                if answer.decision.idle_delay > 0:
                    self._idle_started(answer)
            self._launch(done.taken)
            released, waits = sum(len(a.launches) for a in done.taken), self.cluster.jobs
            self.times.dispatched(self.now(), released, any(j.runnable for j in waits))
            post_round(done, self.cluster, self.intents.event, self.reporter)
            self._note_waiting(done.ended)
            if (admission := self.cluster.admission) is not None:
                for hit in self.metrics.note_queues(admission):
                    if self.reporter is not None:
                        said = bound_hit(admission, *hit)
                        self.intents.event(self.reporter, "Normal", "WaitBound", said)
        self._within_reach()
        self._arm_new_timers()
        self.intents.add(RoundEnded())

    def _within_reach(self) -> None:
        """Create the gated pods of the deferred workflows the admission now numbers among
        the next `gated_workflows_ahead` of their queue (`Cluster.ahead`)."""
        for gone in [wf for wf in self.deferred if not (wf.deferred and wf.active)]:
            del self.deferred[gone]  # (started, left or ended: its releases create its pods)
        for job in self.cluster.ahead(self.ahead) if self.deferred else ():
            if (wf := job.payload) in self.deferred:
                del self.deferred[wf]
                wf.deferred = False
                for track in wf.stages:
                    wf.top_up(self, track)

    def _launch(self, taken: list[Answer]) -> None:
        """Release the launched tasks, one Event per stage (the last decision's cap)."""
        launched: dict[Stage, tuple[Answer, list[Launch]]] = {}
        for answer in taken:
            if answer.launches:
                _, before = launched.get(answer.decision.stage, (answer, []))
                launched[answer.decision.stage] = (answer, before + answer.launches)
        for stage, (last, launches) in launched.items():
            wf: JobKind = stage.job.payload
            wf.launched(self, stage.index, launches, last.rule)
            notice = notices.released(len(launches), last.decision, last.by)
            self.intents.event(wf.owner, *notice)

    @property
    def busy(self) -> int:
        """Task pods running: on the pool's executors, and beyond the pool."""
        return self.cluster.busy

    def adopt(self, launches: list[tuple[Launch, Any]]) -> None:
        """Tasks beyond the pool (or started unasked) have executors now (their token: a
        Task, or an Argo pod's name): a gang's tasks without one (None) are released with
        it; one that ended meanwhile is counted."""
        for launch, token in launches:
            wf: JobKind = launch.stage.job.payload
            wf.adopted(self, launch, token)

    def _idle_started(self, answer: Answer) -> None:
        stage, delay = answer.decision.stage, answer.decision.idle_delay
        wf = stage.job.payload
        until = stage.idle_until if stage.idle_until is not None else self.now()
        reason = notices.idle_reason(answer.by, answer.decision, answer.hold)
        slot = SlotState(stage.name, delay, until, reason)
        wf.idle_started(self, stage.index, slot)
        self.intents.event(wf.owner, *notices.idle_slot(slot, self.busy, self.settings.pool_size))

    def _arm_new_timers(self) -> None:
        admission = self.cluster.admission
        if admission is not None and (bound := admission.next_bound()) not in (inf, self.bound):
            # (a wait bound is enforced at its time, whether or not anything else happens)
            self.bound = bound
            self.intents.set_timer(f"queues/{self.metrics.pool}", bound, Schedule(force=True))
        for stage in self.cluster.new_timers:
            wf = stage.job.payload
            # (not for a job that left: one of an Argo Workflow that its remap replaced)
            if stage.idle_until is not None and wf.active and stage.job.finish is None:
                fire = IdleEnded(wf.owner, stage.index)
                self.intents.set_timer(timer_key(wf.owner, stage.index), stage.idle_until, fire)
        self.cluster.new_timers.clear()

    def _note_waiting(self, ended: Verdict) -> None:
        """One Event per stage that became runnable but got no executor: why it waits.
        Only a job whose runnable stages changed since the last round can have one (the
        cluster's `changed`, read in arrival order). The reason is the verdict of what
        decided it, as that wrote it: with executors free, the cap rule's on a workflow
        at its cap (`cap_holds`); else the hold the admission's phase wrote in its entry
        (`Cluster.admission_result`); else the round's (`ended`: the policy chose to wait,
        every rule failed, or it started other work). Nothing is worked out here."""
        changed = self.cluster.changed or {}
        jobs = sorted((j for j in changed if j.finish is None), key=lambda j: j.id)
        changed.clear()
        accepted, self.accepted = self.accepted, {}
        result = None
        for job in jobs:
            wf = job.payload
            for stage in job.runnable:
                if not stage.launched and stage.name not in wf.noted:
                    wf.noted.add(stage.name)
                    if result is None:  # (once a round, and only when something is said)
                        result = self.cluster.admission_result()
                    notice = notices.waiting(
                        stage, self.cluster, self._verdict(result, stage, ended)
                    )
                    first = accepted.pop(job, None)  # (its Accepted says why it waits too)
                    if first is None or not self.intents.amend(first, notice):
                        self.intents.event(wf.owner, *notice)

    def _verdict(self, result: AdmissionResult, stage: Stage, ended: Verdict) -> Verdict:
        """The one verdict that decided `stage` waits (`_note_waiting`), as it was written."""
        capped = cap_holds(stage.job) if self.cluster.free_executors else None
        entry = result.of(stage.job)
        hold = None if entry is None else entry.holds.get(stage)
        return capped or hold or ended

    def _say_unfit(self, jobs: Iterable[Job]) -> None:
        """A Warning, once, for each stage of `jobs` that no node of the pool could hold
        even empty: it waits, as nodes may come (`Cluster.fits_no_node`), and a
        DagWorkflow's Running condition says so (NoNodeFits) while it does. Its Waiting
        Event, whose reasons would not be the reason, is not said."""
        for job in jobs:
            wf, before = job.payload, dict(job.payload.unfit)
            for stage in job.stages:
                why = self.cluster.fits_no_node(stage)
                if why is None:
                    wf.unfit.pop(stage.name, None)
                elif stage.name not in wf.unfit and stage.finished < stage.tasks:
                    notice = notices.no_node_fits(stage.name, why, self.metrics.pool)
                    wf.unfit[stage.name] = notice[2]
                    wf.noted.add(stage.name)
                    self.intents.event(wf.owner, *notice)
            if wf.unfit != before:
                wf.unfit_changed(self)

    def _say_room(self, capacity: ResourceVector, nodes: int) -> None:
        """Say, once each time it starts (a Warning NoNodes on the pool's reporter, the log,
        a gauge), that a pool on nodes has none to release onto; its ExecutorPool's Ready
        condition reads :attr:`no_room`. Before the first reading of the nodes nothing is
        said: the pool has none then either."""
        assert self.settings.pool_nodes is not None
        left = any(capacity.get(n, 0) > 0 for n in self.cluster.resource_names)
        pool = self.metrics.pool
        why = notices.no_room(pool, self.settings.pool_nodes, nodes, left)
        if why == self.no_room:
            return
        self.no_room = why
        self.metrics.without_nodes.set(why is not None)
        if why is None:
            log.info("Pool %r has room on its nodes again.", pool)
            return
        log.warning("%s", why)
        if self.reporter is not None:
            self.intents.event(self.reporter, "Warning", "NoNodes", why)

    def end(self, uid: str) -> None:
        """The workflow of `uid` ended (here, or for a kind the core does not hold): it is
        never admitted again (:attr:`ended`)."""
        self.ended[uid] = None
        while len(self.ended) > ENDED_KEPT:
            del self.ended[next(iter(self.ended))]

    def drop(self, wf: JobKind) -> None:
        """Take the workflow (of any kind) out of the pool and the operator's memory (its last
        writes are queued); a job that has finished is out of the state machine already."""
        wf.active = False
        wf.dropped(self)
        self.cluster.remove_job(wf.job, self.now())
        held, key = self.held.get(wf.owner.kind, {}), (wf.owner.namespace, wf.owner.name)
        if held.get(key) is wf:
            del held[key]
