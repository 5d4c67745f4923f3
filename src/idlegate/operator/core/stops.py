"""Stopping tasks to give quota back (a reclaim's: `idlegate.api.eviction`), the core's
part: the plan's stops asked as evictions, their answers taken in, and the stop's
finalizer taken off each pod once its stop is counted (point 6 there).

Kept apart from :mod:`.core`, whose :class:`~.core.Core` is a :class:`Stops`."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING

from idlegate.api import eviction, notices
from idlegate.api.settings import Settings
from idlegate.api.task_pods import Owner, TaskPod, read_task_pod
from idlegate.operator.core.evictions import Evictions
from idlegate.operator.core.intents import (
    Confirmed,
    EvictPod,
    Outbox,
    Outcome,
    Refused,
    ReleaseStop,
)
from idlegate.operator.core.judging import Carry, Judged, JudgeStops, Judging
from idlegate.operator.kinds.protocol import JobKind, Pool, Then
from idlegate.operator.kinds.workflow import DagWorkflow
from idlegate.sim.reclaim_plan import RECHECK, Reclaim

if TYPE_CHECKING:
    from idlegate.operator.core.decider import Decider
    from idlegate.operator.core.tracking import StageTrack
    from idlegate.sim.protocol import Scheduler

log = logging.getLogger(__name__)


class Stops(Pool):
    """The core's stops (:class:`~.core.Core` is one), kept here."""

    intents: Outbox
    settings: Settings
    judging: Judging | None
    reporter: Owner | None
    decider: Decider
    spec: str | None
    at: float

    if TYPE_CHECKING:

        @property
        def scheduler(self) -> Scheduler: ...
        def holding(self, owner: Owner) -> JobKind | None: ...
        def schedule(self) -> None: ...
        def then(self, wf: JobKind, then: Then | None) -> None: ...

    def stop_tasks(
        self, victims: Sequence[int], needed: int, reason: str, queue: str, said: str | None = None
    ) -> Evictions:
        """Stop `needed` of the tasks running on the executors `victims`, tried in that
        order, to give quota back to `queue` (`reason`): each by its pod's eviction, the
        intents added here; the answers fill the returned `Evictions` as they come (which
        were stopped, refused, ended by themselves). The entry a reclaim's plan calls;
        `said`: how it was decided (a ``Forecast`` queue's verdict, the Events' clause)."""
        evictions = Evictions(tuple(victims), needed, queue, reason, decided=said)
        self._evict(evictions)
        return evictions

    def _stops(self, plan: Reclaim | Carry) -> None:
        """A plan's stops (the cluster's `stopper`), evicted, the chosen first, then the other
        candidates; a ``Forecast`` queue's judged first, off the loop (`operator.core.judging`:
        its question sent, then its `Carry`, evicted or withdrawn, with a fallback's Warning)."""
        got: Carry | JudgeStops = plan if isinstance(plan, Carry) else Carry(plan)
        if self.judging is not None and isinstance(plan, Reclaim):
            policy = (self.scheduler, self.spec, self.decider.learns)
            got = self.judging.ask(self.cluster, plan, self.at, policy, self.settings.seed)
        if isinstance(got, JudgeStops):  # (for the bridge: the replay process answers `Judged`)
            self.intents.add(got)
            self.intents.set_timer(f"judge:{got.token}", got.due, Judged(got.token))
            return
        if got.verdict is not None:  # (every verdict counted; a declined one said)
            queue = got.plan.queue if got.plan is not None else got.queue or ""
            self.metrics.reclaim_verdicts.labels(queue, got.verdict.case).inc()
            if got.waiting is not None:
                said = notices.preempt_declined(queue, got.verdict.sentence(), RECHECK)
                self.intents.event(got.waiting.payload.owner, *said)
        if (stops := got.plan) is not None:
            if got.warning is not None and got.why is not None:
                log.warning("%s", got.warning)
                self.metrics.preemption_fallbacks.labels(stops.queue, got.why).inc()
                if self.reporter is not None:
                    self.intents.event(self.reporter, "Warning", "PreemptionFallback", got.warning)
            victims, needed = (*stops.executors, *stops.spare), len(stops.executors)
            self.stop_tasks(victims, needed, stops.reason, stops.queue, got.clause)

    def pod_of(self, executor: int) -> tuple[str, str] | None:
        """The namespace and name of the DagWorkflow task pod on `executor`, if one runs."""
        if (stage := self.cluster.stage_on(executor)) is None:
            return None
        wf: JobKind = stage.job.payload  # (a controller's kind names none: its pods stay)
        name = wf.pod_on(stage.index, executor)[1]
        return (wf.owner.namespace, name) if name else None

    def _evict(self, evictions: Evictions) -> None:
        """Ask for the evictions of the next victims, while too few are stopped or asked."""
        running = {e: stage for e, stage, _ in self.cluster.running_tasks()}

        def evict(executor: int) -> str | None:
            if (stage := running.get(executor)) is None:
                return "no task runs on it now"
            wf: JobKind = stage.job.payload  # (a job of the pool: in it)
            return wf.evict(self, stage.index, executor, evictions)

        evictions.ask(evict)

    def _preempted_before(self, wf: DagWorkflow, track: StageTrack, pod: TaskPod) -> None:
        """`pod`'s stop, taken by the API before a restart that lost its answer, counted and
        said as its answer would have been (`_evicted`): the work lost from its start to
        its deletion (none for a checkpointed stage or where its pod did not say); then its
        finalizer is taken off."""
        queue, reason = eviction.read_mark(pod.stop or "")
        lost, stop = 0.0, pod.deleted or self.now()
        if pod.started is not None and not track.spec.checkpointed:
            lost = max(0.0, stop - pod.started)
        wf.note_stop(pod.name, track, track.task(pod.index), queue, (pod.started, stop), lost)
        self.metrics.preempted_tasks.labels(queue, reason).inc()
        self.metrics.preempted_work.inc(lost)
        self.intents.event(wf.owner, *notices.preempted(track.spec.name, queue, reason, lost, None))
        self.intents.status(wf)
        self.release_stop(wf, pod.name, counted=True)

    def _refused(self, intent: EvictPod, queue: str, why: str, status: int | None) -> None:
        """A stop's eviction refused (a PodDisruptionBudget's 429): a Warning Event on its
        workflow, counted, and nothing stopping for `queue` any more in its reclaim (its
        waiting workflows' reason says the refusal, not a stop under way)."""
        self.metrics.preemption_refusals.labels(queue, str(status or "none")).inc()
        self.intents.event(
            intent.owner, *notices.stop_refused(intent.name, intent.stage, queue, why)
        )
        admission = self.cluster.admission
        if admission is not None and admission.reclaimer is not None:
            last = f"the last stop asked, of pod {intent.name}, was not taken: {why}"
            admission.reclaimer.refused(intent.executor, queue, last)
            admission.reopen()
            self.cluster.needs_schedule = True

    def release_stop(self, wf: DagWorkflow, name: str, *, counted: bool = False) -> None:
        """Take the stop's finalizer off `wf`'s pod `name` (its stop counted, or none to
        count); `wf.holds` keeps it until the API confirms, for a deletion of `wf` to take
        it off again (its writes not sent are dropped then). A stop `counted` just now is
        let go once the status recording it (``status.stopped``) has landed: a restart
        that then finds the pod gone reads the stop there."""
        wf.holds.add(name)
        self.intents.add(ReleaseStop(wf.owner, name, after_status=counted))

    def _evicted(self, intent: EvictPod, outcome: Outcome) -> None:
        """An eviction's answer: its task stopped (counted, said on its workflow), refused,
        or ended first; then the next victims are asked if need be. The stop's finalizer,
        on the pod the answer returned, is taken off (its stop counted, or none was)."""
        evictions, wf = intent.evictions, self.holding(intent.owner)
        lost, then = (
            wf.evicted(self, intent, outcome) if wf is not None and wf.active else (None, None)
        )
        if wf is not None:  # (its pod's end, if it ended first: a round before the rest)
            self.then(wf, then)
        why = None
        if isinstance(outcome, Refused):
            why = eviction.refused(outcome.status, outcome.message)
            if outcome.status != 404:  # (refused: loudly, and the queue's wait says so)
                self._refused(intent, evictions.queue, why, outcome.status)
        evictions.settle(intent.executor, stopped=lost is not None, why=why)
        if lost is not None:
            self.metrics.preempted_tasks.labels(evictions.queue, evictions.reason).inc()
            self.metrics.preempted_work.inc(lost)
            said = notices.preempted(
                intent.stage, evictions.queue, evictions.reason, lost, evictions.decided
            )
            self.intents.event(intent.owner, *said)
        body = outcome.body if isinstance(outcome, Confirmed) else None
        pod = read_task_pod(body) if body is not None else None
        unmarked = pod is not None or (
            isinstance(outcome, Refused) and outcome.status in (404, 429)
        )
        if isinstance(wf, DagWorkflow) and unmarked and (pod is None or not pod.held):
            wf.holds.discard(intent.name)  # (gone, or not marked: nothing to take off)
        elif pod is not None and pod.held:  # (even of a workflow gone meanwhile)
            if isinstance(wf, DagWorkflow):
                self.release_stop(wf, intent.name, counted=lost is not None)
            else:
                self.intents.add(ReleaseStop(intent.owner, intent.name))
        self._evict(evictions)
        self.schedule()
