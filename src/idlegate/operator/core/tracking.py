"""The operator's bookkeeping of one workflow: its task pods, their gates, its idle slots.

A :class:`Workflow` is one admitted DagWorkflow with its job in the cluster state machine
(``job``), which has every count of tasks and executors; a :class:`StageTrack` keeps only
what Kubernetes adds to a stage: the task pods (which attempt, gated or released, on which
executor slot). The status is built from both (:meth:`Workflow.status`). Plain state,
changed by the core (:mod:`.core`) and the DagWorkflow kind (:class:`idlegate.operator.kinds.workflow.DagWorkflow`).
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from enum import Enum
from functools import cached_property
from heapq import heappop, heappush
from typing import Any

from idlegate.api.forecast_first import first_status
from idlegate.api.forecast_status import UNAVAILABLE_REASON, Forecast, Unavailable, forecast_fields
from idlegate.api.status import (
    FINISHED,
    MAX_STOPPED,
    Conditions,
    Phase,
    SlotState,
    StageStatus,
    StoppedAttempt,
    WorkflowStatus,
    dump,
    format_indexes,
)
from idlegate.api.task_pods import Owner
from idlegate.errors import IdlegateError
from idlegate.sim.dag import Dag
from idlegate.sim.durations import MeasuredDurations
from idlegate.sim.forecast import Span
from idlegate.sim.protocol import Job
from idlegate.sim.spec import StageSpec, WorkflowSpec
from idlegate.sim.task_times import TaskTimes
from idlegate.sim.timestamps import stamp, to_datetime

WorkflowKey = tuple[str, str]
"""(namespace, name) of a DagWorkflow."""


def timer_key(owner: Owner, stage_index: int) -> str:
    """The key of the idle timer of stage `stage_index` of the workflow `owner` (of any
    kind; of an external job, the stage's index in its job now)."""
    return f"{owner.uid}/{stage_index}"


class TaskState(Enum):
    PLANNED = "planned"
    """No pod (yet) for the current attempt."""
    GATED = "gated"
    """Its pod exists (or is being created) and carries the gate."""
    RELEASED = "released"
    """Released onto an executor: running as far as the state machine is concerned."""
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    """Failed more often than the stage's backoffLimit (its last pod is kept)."""


@dataclass(slots=True, eq=False)  # (identity: the same task, not an equal one)
class Task:
    """One task of a stage: its current attempt and where it runs."""

    index: int
    state: TaskState = TaskState.PLANNED
    attempt: int = 0
    failures: int = 0
    executor: int | None = None
    """The executor slot of a released task; None: it runs beyond the pool."""
    finished_unaccounted: bool = False
    """Such a task succeeded before an executor was free for it."""
    released_at: float | None = None
    """Clock time the operator released it (None: before a restart, or by others)."""
    preempted: int = 0
    """Its attempts stopped to give quota back (no failures: `idlegate.api.eviction`)."""
    evicting: bool = False
    """Its running pod's eviction is asked and not answered yet."""
    running_at: float | None = None
    """Clock time the operator saw its pod Running (None: not yet, or not seen)."""


class StageTrack:
    """The task pods of one stage (its counts of tasks are the state machine's Stage)."""

    def __init__(self, spec: StageSpec, index: int) -> None:
        self.spec = spec
        self.index = index
        self.tasks: dict[int, Task] = {}
        """Tasks with a pod or a state (sparse: untouched tasks are absent)."""
        self.gated = 0
        """Gated pods of the stage, kept in step with the tasks' states by `set_state`."""
        self.failed = 0
        """Failed attempts so far."""
        self.policy: str | None = None
        """The rule that released its tasks last (`Answer.rule`)."""
        self.samples: list[float] = []
        """Run times of its succeeded tasks for the history (`sample`): a uniform sample."""
        self.sampled = 0
        """Run times offered to `sample` so far (restored as the succeeded count)."""

    def task(self, index: int) -> Task:
        return self.tasks.setdefault(index, Task(index))

    def set_state(self, task: Task, state: TaskState) -> None:
        """Move `task` to `state` (the one place the count of gated pods changes)."""
        self.gated += (state is TaskState.GATED) - (task.state is TaskState.GATED)
        task.state = state

    def sample(self, seconds: float, keep: int, rng: random.Random) -> None:
        """Offer one task's run time to the stage's history sample of at most `keep`: a
        reservoir (Algorithm R), so a uniform sample of all its tasks (keeping the first
        ones would keep the short ones, which finish first)."""
        self.sampled += 1
        if len(self.samples) < keep:
            self.samples.append(seconds)
            return
        slot = rng.randrange(self.sampled)
        if slot < keep:
            self.samples[slot] = seconds

    def attempt_failed(self, task: Task, attempts: int = 1) -> None:
        task.failures += attempts
        self.failed += attempts

    @cached_property
    def _unreleased(self) -> list[int]:
        """A heap of the task indexes, made at first use; an entry whose task has moved on
        is skipped when popped (`next_to_release`; `_uncreated`: `next_to_create`)."""
        return list(range(self.spec.tasks))

    @cached_property
    def _uncreated(self) -> list[int]:
        return list(range(self.spec.tasks))

    def next_to_release(self) -> int:
        """The lowest task index not released yet (the state machine counts, we pick)."""
        while self._unreleased:
            i = heappop(self._unreleased)
            task = self.tasks.get(i)
            if task is None or task.state in (TaskState.PLANNED, TaskState.GATED):
                return i
        raise IdlegateError(f"stage {self.spec.name!r} has no task left to release")

    def next_to_create(self) -> int | None:
        """The lowest task index without a pod that is not released yet, or None."""
        while self._uncreated:
            i = heappop(self._uncreated)
            task = self.tasks.get(i)
            if task is None or task.state is TaskState.PLANNED:
                return i
        return None

    def replan(self, task: Task) -> None:
        """A released task goes back to waiting for a release (and a new pod)."""
        self.set_state(task, TaskState.PLANNED)
        task.executor = None
        heappush(self._unreleased, task.index)  # duplicates are skipped when popped
        heappush(self._uncreated, task.index)

    def forget_pod(self, task: Task) -> None:
        """The gated pod of `task` disappeared: create it again when needed."""
        self.set_state(task, TaskState.PLANNED)
        heappush(self._uncreated, task.index)


class Workflow:
    """One admitted DagWorkflow: its spec, job, stage tracks, idle slots and conditions."""

    def __init__(
        self,
        owner: Owner,
        generation: int,
        spec: WorkflowSpec,
        arrival: float,
        admitted: float,
        conditions: Conditions,
    ) -> None:
        self.owner = owner
        self.key: WorkflowKey = (owner.namespace, owner.name)
        self.generation = generation
        self.spec = spec
        self.dag = Dag.from_spec(spec)
        self.stages = [StageTrack(s, i) for i, s in enumerate(spec.stages)]
        self.by_name = {t.spec.name: t for t in self.stages}
        self.arrival = arrival
        """Clock time of its creation (``metadata.creationTimestamp``): the job's arrival."""
        self.admitted = admitted
        """Clock time the operator first saw it (``status.startTime``)."""
        self.conditions = conditions
        self.phase = Phase.PENDING
        self.job: Job = None  # type: ignore[assignment]  # set right after add_job
        self.idle_slots: dict[int, SlotState] = {}
        self.completion: float | None = None
        self.stopped: list[StoppedAttempt] = []
        """Its latest attempts stopped (``status.stopped``: its page draws them once their
        pods are gone), read back from the status after a restart."""
        self.holds: set[str] = set()
        """Its pods that may carry the stop's finalizer not taken off yet (an eviction asked,
        a release not confirmed): a deletion of it takes each off (`Core.forget`)."""
        self.pod_vanished = False
        """A pod of it was deleted by someone else: check that the workflow still exists
        before the next pod is created (GC's deletions may come before the workflow's)."""
        self.durations = MeasuredDurations([s.task_duration_seconds for s in spec.stages])
        """What a planner's rollouts draw its task durations from: each stage's measured
        run times (`measured`), its estimate until one was measured."""
        self.policy: str | None = None
        """The rule that released its tasks last (`Answer.rule`)."""
        self.pool_size: int | None = None
        """The operator's pool when the workflow finished (for its history record)."""
        self.scheduler: str | None = None
        """The spec its pool ran when it finished (its history record's policy)."""
        self.history_recorded = False
        """Its record is in the history sink (`status.historyRecorded`)."""
        self.history_rng = random.Random(owner.uid)
        """Draws of the stages' history samples (seeded: the same pods, the same sample)."""
        self.persisted_slots: set[int] = set()
        """Stages whose idle slot a status write has put in the API (a release in such a
        stage need not wait for the status writes before it)."""
        self.collectable: list[str] = []
        """Ended pods whose outcome is in the state, oldest first: pod GC deletes each once
        a status write that began after it was added has landed (:mod:`.cleanup`)."""
        self.active = True
        self.noted: set[str] = set()
        """Stages whose wait for an executor an Event said (once each)."""
        self.deferred = False  # (no gated pod ahead until within reach: Core._within_reach)
        self.unfit: dict[str, str] = {}
        """Stages no node of the pool could hold even empty, with the NoNodeFits message."""
        self.forecast: Forecast | Unavailable | None = None
        """Its last forecast written (``status.forecast``: `operator.forecasting.book`)."""
        self.forecast_made: Forecast | None = None
        """Its first forecast made while it waited (its history record's)."""
        self.forecast_replayed: tuple[Span, Span] | None = None
        """The replays' start and finish of `forecast_made`, before the pool's calibration
        widened their intervals (its history record's: a restart's calibration)."""
        self.forecast_restored = False
        """Its first forecast came from its status (`api.forecast_first.restore_first`)."""
        self.started_at: float | None = None
        """When its first pod was seen Running (or, one seen only as it ended, its start):
        its start as its user sees it, which its first forecast is scored on and START
        shows. The state machine's (`job.first_start`) is the release, the pod's start
        latency earlier (issue 97)."""

    def running(self, track: StageTrack | None = None) -> int:
        """Task pods running now (of one stage), beyond the pool too; none once failed or
        suspended (its pods are deleted)."""
        if self.phase in (Phase.FAILED, Phase.SUSPENDED):
            return 0
        if track is None:
            return self.job.held + self.beyond()
        return self.job.stages[track.index].running + self.beyond(track)

    def beyond(self, track: StageTrack | None = None) -> int:
        """Its tasks (of one stage) running beyond the pool (``Cluster.beyond``): released,
        with no executor of the pool."""
        tracks = self.stages if track is None else (track,)
        return sum(
            t.state is TaskState.RELEASED and t.executor is None
            for s in tracks
            for t in s.tasks.values()
        )

    def status(self) -> dict[str, Any]:
        """The full status, as the API takes it."""
        stages = []
        over = self.phase is Phase.FAILED  # its unfinished tasks are not pending
        for track, stage in zip(self.stages, self.job.stages, strict=True):
            running = self.running(track)
            pending = 0 if over else max(0, stage.tasks - running - stage.finished)
            ok = sorted(i for i, t in track.tasks.items() if t.state is TaskState.SUCCEEDED)
            stages.append(
                StageStatus(
                    name=stage.name,
                    tasks=stage.tasks,
                    pending=pending,
                    running=running,
                    succeeded=stage.finished,
                    failed=track.failed,
                    policy=track.policy,
                    completed_indexes=format_indexes(ok),
                    measured_duration_seconds=[round(x, 3) for x in track.samples] or None,
                )
            )
        done = sum(s.complete for s in self.job.stages)
        total = len(self.stages)
        job, completion = self.job, self.completion
        out = dump(
            WorkflowStatus(
                observed_generation=self.generation,
                phase=self.phase,
                conditions=self.conditions.models(),
                stages_total=total,
                stages_done=done,
                stages_summary=f"{done}/{total}",
                stages=stages,
                parallelism_cap=job.cap or None,
                idle_slots=[
                    slot.model(released=self.job.stages[i].idle_until is None)
                    for i, slot in self.idle_slots.items()
                ]
                or None,
                start_time=to_datetime(self.admitted),
                admission_lag_seconds=round(self.admitted - self.arrival, 3),
                completion_time=to_datetime(completion) if completion is not None else None,
                jct_seconds=round(completion - self.arrival, 3) if completion is not None else None,
                idle_inserted_seconds=round(job.idle_inserted, 6),
                policy=self.policy,
                pool_size=self.pool_size,
                scheduler=self.scheduler,
                history_recorded=self.history_recorded or None,
                stopped=self.stopped or None,
            )
        )
        # (a merge patch: a cap the policy no longer sets is removed, not left as it was)
        out.setdefault("parallelismCap", None)
        # (released, its first pod not seen Running yet: its release, until it is)
        started = self.started_at if self.started_at is not None else job.first_start
        out.update(forecast_fields(self.forecast, started, completion))
        if self.forecast_made is not None and self.forecast_replayed is not None:
            made, replayed = self.forecast_made, self.forecast_replayed
            out["firstForecast"] = first_status(made, replayed, started)
        return out

    def seen_running(self, at: float) -> None:
        """A pod of it was seen running at `at` (the first: its start, `started_at`)."""
        if self.started_at is None or at < self.started_at:
            self.started_at = at

    def note_stop(
        self,
        pod: str,
        track: StageTrack,
        task: Task,
        queue: str,
        when: tuple[float | None, float],
        lost: float,
    ) -> None:
        """Its `task`'s attempt in `pod` was stopped (`when`: its start, if known, and its
        stop), `task` now at its next attempt: kept in ``status.stopped``."""
        start, stop = when
        began = to_datetime(start) if start is not None else None
        attempt = StoppedAttempt(
            pod=pod,
            stage=track.spec.name,
            index=task.index,
            attempt=task.attempt - 1,
            preempted=task.preempted,
            queue=queue,
            start_time=began,
            stop_time=to_datetime(stop),
            lost_seconds=round(lost, 3),
        )
        self.stopped = [*self.stopped, attempt][-MAX_STOPPED:]

    def measured(
        self,
        track: StageTrack,
        task: Task,
        now: float,
        pod_seconds: float | None,
        keep: int,
        times: TaskTimes,
    ) -> None:
        """`task` succeeded at `now`: its run time joins the stage's measured durations,
        and its latency and stretch the pool's `times` (`sim.task_times`).

        Measured from the operator's release to its observed success: how long the task
        held its executor (pod start latency and the watch's lag included), what a rollout
        must simulate. Only first attempts released by the operator count (a retry's time
        includes its failures; one released before a restart or by others has no release
        time). The history's sample (`StageTrack.sample`, at most `keep` per stage) takes
        the pod's own run time, `pod_seconds`, what a replay draws from, else this time.
        """
        held = None
        if task.released_at is not None and task.failures == 0 and task.attempt == 0:
            held = max(0.0, now - task.released_at)
            self.durations.record(track.index, held)
            running = None if task.running_at is None else now - task.running_at
            times.record(track.spec.task_duration_seconds, held, running)
        seconds = pod_seconds or held
        if seconds:
            track.sample(seconds, keep, self.history_rng)

    def running_since(self, stage: int, executor: int) -> float | None:
        """When the pod of stage `stage` on `executor` was seen Running (None: not yet)."""
        found = (t for t in self.stages[stage].tasks.values() if t.executor == executor)
        return next((t.running_at for t in found if t.state is TaskState.RELEASED), None)

    def refresh_conditions(self, now: float) -> None:
        """Set the Running condition from the current state (Valid/Complete/Failed are set
        where they change)."""
        gen = self.generation
        if isinstance(self.forecast, Unavailable) and self.phase not in FINISHED:  # (why)
            reason = self.forecast.reason
            self.conditions.set(UNAVAILABLE_REASON, True, UNAVAILABLE_REASON, reason, gen, now)
        else:
            self.conditions.remove(UNAVAILABLE_REASON)
        if self.phase in FINISHED:  # why: the condition set as it ended (`Core._finished`)
            ended = self.conditions.get("Failed" if self.phase is Phase.FAILED else "Complete")
            why = ended.message if ended is not None else ""
            self.conditions.set("Running", False, self.phase.value, why, gen, now)
            return
        running = self.running()
        idle = [s for i, s in self.idle_slots.items() if self.job.stages[i].idle_until is not None]
        if self.phase is Phase.SUSPENDED:
            message = "Suspended (spec.suspend): no task runs until it is set back to false."
            self.conditions.set("Running", False, "Suspended", message, gen, now)
        elif running:
            cap = f", parallelism cap {self.job.cap}" if self.job.cap else ""
            message = f"{running} task pod(s) released{cap}."
            beyond = self.beyond()
            if beyond:  # (they hold no executor of the pool: it is over its size)
                message += (
                    f" {beyond} of them beyond the pool: it runs more than its size "
                    "(made smaller, or a gate removed by others), so nothing new is released "
                    "until they have executors."
                )
            self.conditions.set("Running", True, "TasksRunning", message, gen, now)
        elif idle:
            slot = idle[0]
            message = (
                f"Stage {slot.stage!r} is held back in a deliberate idle slot of {slot.delay:g} s "
                f"until {stamp(slot.release)} ({slot.reason})."
            )
            self.conditions.set("Running", False, "IdleSlot", message, gen, now)
        elif self.unfit:  # (no free executor would help it: a node must come)
            message = next(iter(self.unfit.values()))
            self.conditions.set("Running", False, "NoNodeFits", message, gen, now)
        else:
            message = "No task is running: the runnable stages wait for a free executor."
            self.conditions.set("Running", False, "WaitingForExecutors", message, gen, now)
