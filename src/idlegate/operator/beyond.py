"""Task pods running *beyond the pool*: they run although no executor of the pool was free
for them, and are counted until one is.

Two things put a task there, and both are facts the operator does not undo (it never
preempts a running task):

* a gated pod of ours lost its gate without the operator releasing it (``kubectl patch``
  by hand, another controller: :meth:`Beyond.released_by_others`): it runs, so it counts
  against the pool; it is launched in the state machine on a free executor if there is
  one, else it runs beyond the pool;
* a workflow is admitted with more running pods than the pool has free executors: a pool
  made smaller than what runs in it (an ExecutorPool resized, an operator restarted with
  a smaller ``--pool-size``). Admission places what fits (:func:`.admission.classify`) and
  the rest runs beyond the pool (:meth:`Beyond.add`).

Such a task is in its workflow's ``Workflow.beyond`` (with a sequence number: oldest
first), and counted in the pool's busy executors and its workflow's running tasks. While
any is there, nothing new is released: an executor that finishes a task does not go on
with its stage (``Cluster.task_finished(keep=False)``), a free executor goes to the oldest
task beyond the pool (:meth:`Beyond.adopt_waiting`), and the policy is not asked (the
bridge's ``schedule``). A task that ends beyond the pool is counted once it has an
executor (success), or retried through the policy like any task (failure). So a shrunk
pool drains to its new size as its running pods end, and then never exceeds it.
"""

from __future__ import annotations

import itertools
from typing import TYPE_CHECKING, Protocol

from idlegate.errors import IdlegateError
from idlegate.operator import messages
from idlegate.operator.pods import TaskPod
from idlegate.operator.status import Phase
from idlegate.operator.tracking import StageTrack, Task, TaskState, Workflow, WorkflowKey
from idlegate.sim.protocol import Decision

if TYPE_CHECKING:
    from idlegate.operator.metrics import Metrics
    from idlegate.operator.settings import Settings
    from idlegate.operator.timers import Timers
    from idlegate.operator.writes import Writer
    from idlegate.sim.cluster import Cluster


class Host(Protocol):
    """What this module needs of the bridge (:class:`idlegate.operator.bridge.Bridge`)."""

    settings: Settings
    cluster: Cluster
    metrics: Metrics
    timers: Timers
    writes: Writer
    workflows: dict[WorkflowKey, Workflow]

    def now(self) -> float: ...
    def release(self, wf: Workflow, track: StageTrack, index: int, executor: int) -> None: ...
    def top_up(self, wf: Workflow, track: StageTrack) -> None: ...
    def task_succeeded(
        self, wf: Workflow, track: StageTrack, task: Task, ran: float | None
    ) -> None: ...
    def fail_task_for_good(
        self, wf: Workflow, track: StageTrack, task: Task, reason: str
    ) -> None: ...


class Beyond:
    """The tasks of one bridge's workflows that run beyond its pool."""

    def __init__(self, bridge: Host) -> None:
        self.bridge = bridge
        self._sequence = itertools.count()
        """Sequence numbers of the tasks running beyond the pool (oldest adopted first)."""

    def count(self) -> int:
        """Tasks running beyond the pool now."""
        return sum(len(wf.beyond) for wf in self.bridge.workflows.values())

    def add(self, wf: Workflow, track: StageTrack, task: Task) -> None:
        """`task` (released, its pod running) runs beyond the pool until an executor is free."""
        task.executor = None
        wf.beyond.append((next(self._sequence), track, task))

    def released_by_others(self, wf: Workflow, track: StageTrack, task: Task, pod: str) -> None:
        """A gated pod of ours lost the gate without the operator releasing it: it runs, so
        its task is launched in the state machine on a free executor (ending its stage's
        idle slot, if any), or, with none free, runs beyond the pool."""
        b = self.bridge
        b.metrics.foreign_releases.inc()
        track.set_state(task, TaskState.RELEASED)
        task.executor = None
        if wf.phase is Phase.PENDING:
            wf.phase = Phase.RUNNING
        adopted = self.adopt(wf, track, task)
        if not adopted:
            self.add(wf, track, task)
        b.top_up(wf, track)
        notice = messages.released_by_others(pod, track.spec.name, b.settings.pool_size, adopted)
        b.writes.event(wf.owner, *notice)
        b.writes.status(wf, urgent=True)

    def adopt(self, wf: Workflow, track: StageTrack, task: Task) -> bool:
        """Launch `task` (running already) in the state machine on a free executor, with the
        rest of its gang (its other tasks beyond the pool first, then gated ones, released);
        False if that is not possible now. Tasks that ended meanwhile are counted."""
        b = self.bridge
        stage, now = wf.job.stages[track.index], b.now()
        if stage.idle_until is not None:  # it has started: its idle slot is over
            b.cluster.idle_expired(stage, now)
            b.timers.cancel(wf.timer_key(track.index))
            slot = wf.idle_slots.get(track.index)
            if slot is not None:
                slot.released = True
        need = stage.tasks - stage.launched if stage.gang else 1
        if need > b.cluster.free_executors:
            return False
        # a cap of exactly what it needs: the policy's next decision for the job sets its own
        decision = Decision(stage, stage.job.held + need)
        try:
            b.cluster.check(decision)
        except IdlegateError:
            return False
        launches = b.cluster.apply(decision, now)
        mates = [t for _, s, t in wf.beyond if s is track and t is not task]
        taken = [task, *mates][: len(launches)]
        wf.beyond = [entry for entry in wf.beyond if entry[2] not in taken]
        for launch, mate in zip(launches, taken, strict=False):
            mate.executor = launch.executor
        for launch in launches[len(taken) :]:  # the gang's gated tasks start with it
            b.release(wf, track, track.next_to_release(), launch.executor)
        for mate in taken:
            if mate.finished_unaccounted:  # it ended before it had an executor
                mate.finished_unaccounted = False
                b.task_succeeded(wf, track, mate, None)
        return True

    def adopt_waiting(self) -> None:
        """Give free executors to the tasks running beyond the pool, oldest first."""
        waiting = sorted(
            (seq, wf, track, task)
            for wf in self.bridge.workflows.values()
            for seq, track, task in wf.beyond
        )
        for _, wf, track, task in waiting:
            if not self.bridge.cluster.free_executors:
                return
            if wf.active and task.state is TaskState.RELEASED and task.executor is None:
                self.adopt(wf, track, task)

    def ended(self, wf: Workflow, track: StageTrack, task: Task, info: TaskPod) -> None:
        """A task running beyond the pool ended before an executor was free for it."""
        if info.phase == "Succeeded":
            # it is counted in the state machine once an executor is its own
            task.finished_unaccounted = True
            return
        wf.beyond = [entry for entry in wf.beyond if entry[2] is not task]
        b = self.bridge
        track.attempt_failed(task)
        b.metrics.task_failures.inc()
        if task.failures > track.spec.backoff_limit:
            b.fail_task_for_good(wf, track, task, f"pod {info.name} failed: {info.reason}")
            return
        task.attempt += 1
        track.replan(task)  # the retry waits for the policy like any task
        b.writes.status(wf)
