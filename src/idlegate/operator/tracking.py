"""The operator's bookkeeping of one workflow: its tasks' pods, stages and idle slots.

Plain state, changed only by the bridge (:mod:`idlegate.operator.state`); the status the
operator writes is built from it (:mod:`idlegate.operator.status`).
"""

from __future__ import annotations

import asyncio
from enum import Enum
from heapq import heappop, heappush

from idlegate.errors import IdlegateError
from idlegate.operator.clock import to_datetime
from idlegate.operator.crd import Phase
from idlegate.operator.pods import Owner
from idlegate.operator.status import Conditions, SlotState
from idlegate.sim.dag import Dag
from idlegate.sim.protocol import Job
from idlegate.sim.spec import StageSpec, WorkflowSpec

WorkflowKey = tuple[str, str]
"""(namespace, name) of a DagWorkflow."""


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


class Task:
    """One task of a stage: its current attempt and where it runs."""

    __slots__ = ("attempt", "executor", "failures", "finished_unaccounted", "index", "state")

    def __init__(self, index: int) -> None:
        self.index = index
        self.state = TaskState.PLANNED
        self.attempt = 0
        self.failures = 0
        self.executor: int | None = None
        """The executor slot of a released task; None for one released by others while no
        executor was free (it runs beyond the pool until one is)."""
        self.finished_unaccounted = False
        """Such a task succeeded before an executor was free for it."""


class StageTrack:
    """The operator's view of one stage: its tasks' pods and counts."""

    def __init__(self, spec: StageSpec, index: int) -> None:
        self.spec = spec
        self.index = index
        self.tasks: dict[int, Task] = {}
        """Tasks with a pod or a state (sparse: untouched tasks are absent)."""
        self.gated = 0
        self.running = 0
        self.succeeded = 0
        self.failed = 0
        """Failed attempts so far."""
        self.materialized = False
        """The stage's parents are done and its gated pods have been created."""
        self.waiting_noted = False
        self._unreleased: list[int] | None = None
        self._uncreated: list[int] | None = None

    def task(self, index: int) -> Task:
        task = self.tasks.get(index)
        if task is None:
            task = self.tasks[index] = Task(index)
        return task

    def _build(self) -> None:
        if self._unreleased is not None:
            return
        unreleased, uncreated = [], []
        for i in range(self.spec.tasks):
            task = self.tasks.get(i)
            state = TaskState.PLANNED if task is None else task.state
            if state in (TaskState.PLANNED, TaskState.GATED):
                unreleased.append(i)
            if state is TaskState.PLANNED:
                uncreated.append(i)
        self._unreleased, self._uncreated = unreleased, uncreated  # sorted: valid heaps

    def next_to_release(self) -> int:
        """The lowest task index not released yet (the state machine counts, we pick)."""
        self._build()
        assert self._unreleased is not None
        while self._unreleased:
            i = heappop(self._unreleased)
            task = self.tasks.get(i)
            if task is None or task.state in (TaskState.PLANNED, TaskState.GATED):
                return i
        raise IdlegateError(f"stage {self.spec.name!r} has no task left to release")

    def next_to_create(self) -> int | None:
        """The lowest task index without a pod that is not released yet, or None."""
        self._build()
        assert self._uncreated is not None
        while self._uncreated:
            i = heappop(self._uncreated)
            task = self.tasks.get(i)
            if task is None or task.state is TaskState.PLANNED:
                return i
        return None

    def replan(self, task: Task) -> None:
        """A released task goes back to waiting for a release (and a new pod)."""
        task.state, task.executor = TaskState.PLANNED, None
        self._build()
        assert self._unreleased is not None and self._uncreated is not None
        heappush(self._unreleased, task.index)  # duplicates are skipped when popped
        heappush(self._uncreated, task.index)

    def forget_pod(self, task: Task) -> None:
        """The gated pod of `task` disappeared: create it again when needed."""
        task.state = TaskState.PLANNED
        self.gated -= 1
        self._build()
        assert self._uncreated is not None
        heappush(self._uncreated, task.index)


class Workflow:
    """One admitted DagWorkflow: its spec, job, stage tracks, idle slots and conditions."""

    def __init__(
        self,
        owner: Owner,
        generation: int,
        spec: WorkflowSpec,
        arrival: float,
        conditions: Conditions,
        *,
        admitted: float | None = None,
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
        self.admitted = arrival if admitted is None else admitted
        """Clock time the operator first saw it (``status.startTime``)."""
        self.conditions = conditions
        self.phase = Phase.PENDING
        self.job: Job = None  # type: ignore[assignment]  # set right after add_job
        self.idle_slots: dict[int, SlotState] = {}
        self.completion: float | None = None
        self.active = True
        self.status_queued = False
        self.status_timer: asyncio.TimerHandle | None = None

    @property
    def running(self) -> int:
        return sum(t.running for t in self.stages)

    def refresh_conditions(self, now: float) -> None:
        """Set the Running condition from the current state (Valid/Complete/Failed are set
        where they change)."""
        gen = self.generation
        if self.phase is Phase.SUCCEEDED:
            self.conditions.set("Running", False, "Succeeded", "All stages succeeded.", gen, now)
            return
        if self.phase is Phase.FAILED:
            failed = self.conditions.get("Failed")
            message = failed.message if failed is not None else "The workflow failed."
            self.conditions.set("Running", False, "Failed", message, gen, now)
            return
        running = self.running
        idle = [s for s in self.idle_slots.values() if not s.released]
        if running:
            cap = f", parallelism cap {self.job.cap}" if self.job.cap else ""
            self.conditions.set(
                "Running", True, "TasksRunning", f"{running} task pod(s) released{cap}.", gen, now
            )
        elif idle:
            slot = idle[0]
            self.conditions.set(
                "Running",
                False,
                "IdleSlot",
                f"Stage {slot.stage!r} is held back in a deliberate idle slot of {slot.delay:g} s "
                f"until {to_datetime(slot.release):%Y-%m-%dT%H:%M:%SZ} ({slot.reason}).",
                gen,
                now,
            )
        else:
            self.conditions.set(
                "Running",
                False,
                "WaitingForExecutors",
                "No task is running: the runnable stages wait for a free executor.",
                gen,
                now,
            )
