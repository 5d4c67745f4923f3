"""Task pods released by someone else: a gated pod of ours lost its scheduling gate
without the operator removing it (``kubectl patch`` by hand, another controller).

Such a pod runs, so it counts against the pool: the bridge launches its task in the
state machine on a free executor as if the policy had released it, or, with none free,
lets it run *unaccounted* beyond the pool until the next executor that frees up is its
own (before the policy is asked again).

:class:`ForeignReleases` is a part of :class:`idlegate.operator.state.Bridge`, kept in
its own module because it is the one path where the cluster's state changes without a
decision of the policy; it works on the bridge's state (the attributes declared below)
and calls the bridge's task methods (``_release``, ``_top_up``, ``_task_succeeded``,
``_fail_task_for_good``, ``_timer_key``, ``now``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from idlegate.errors import IdlegateError
from idlegate.operator.crd import Phase
from idlegate.operator.metrics import Metrics
from idlegate.operator.pods import GATE, TaskPod
from idlegate.operator.settings import Settings
from idlegate.operator.tracking import StageTrack, Task, TaskState, Workflow, WorkflowKey
from idlegate.operator.writes import Writer
from idlegate.sim.cluster import Cluster
from idlegate.sim.protocol import Decision

if TYPE_CHECKING:
    from idlegate.operator.state import Timers


class ForeignReleases:
    """Accounting for task pods that run without the operator having released them."""

    settings: Settings
    metrics: Metrics
    timers: Timers
    cluster: Cluster
    executors: dict[int, tuple[WorkflowKey, int, int]]
    unaccounted: list[tuple[Workflow, StageTrack, Task]]
    writes: Writer

    def _released_by_others(self, wf: Workflow, track: StageTrack, task: Task, pod: str) -> None:
        """A gated pod of ours lost the gate without the operator releasing it (``kubectl
        patch`` by hand, another controller): it runs, so it counts against the pool.

        The task is launched in the state machine on a free executor (ending its stage's
        idle slot, if any), as if the policy had released it. With no executor free, it
        runs beyond the pool and is *unaccounted*: it counts as busy, and the next executor
        that frees up is its own before the policy is asked again."""
        self.metrics.foreign_releases.inc()
        track.gated -= 1
        track.running += 1
        task.state, task.executor = TaskState.RELEASED, None
        if wf.phase is Phase.PENDING:
            wf.phase = Phase.RUNNING
        adopted = self._adopt(wf, track, task)
        if not adopted:
            self.unaccounted.append((wf, track, task))
        self._top_up(wf, track)
        where = (
            "it took a free executor"
            if adopted
            else "no executor was free, so it runs beyond the pool and takes the next executor "
            "that frees up"
        )
        self.writes.event(
            wf.owner,
            "Warning",
            "ReleasedByOthers",
            f"Task pod {pod} of stage {track.spec.name!r} lost its {GATE} scheduling gate "
            f"without the operator releasing it (removed by hand or by another controller); "
            f"it counts against the pool of {self.settings.pool_size} executors: {where}.",
        )
        self.writes.status(wf, urgent=True)

    def _adopt(self, wf: Workflow, track: StageTrack, task: Task) -> bool:
        """Launch `task` (running already) in the state machine on a free executor, with the
        rest of its gang; False if that is not possible now."""
        stage = wf.job.stages[track.index]
        now = self.now()
        if stage.idle_until is not None:
            self.cluster.idle_expired(stage, now)
            self.timers.cancel(self._timer_key(wf, track.index))
            slot = wf.idle_slots.get(track.index)
            if slot is not None:
                slot.released = True
        need = stage.tasks - stage.launched if stage.gang else 1
        if need > self.cluster.free_executors:
            return False
        # a cap of exactly what it needs: the policy's next decision for the job sets its own
        decision = Decision(stage, stage.job.held + need)
        try:
            self.cluster.check(decision)
        except IdlegateError:
            return False
        launches = self.cluster.apply(decision, now)
        task.executor = launches[0].executor
        self.executors[task.executor] = (wf.key, track.index, task.index)
        for launch in launches[1:]:  # the gang's other tasks start with it
            self._release(wf, track, track.next_to_release(), launch.executor)
        return True

    def _adopt_unaccounted(self) -> None:
        """Give free executors to the tasks running beyond the pool, oldest first."""
        waiting, self.unaccounted = self.unaccounted, []
        for wf, track, task in waiting:
            if not wf.active or task.state is not TaskState.RELEASED or task.executor is not None:
                continue
            if not self._adopt(wf, track, task):
                self.unaccounted.append((wf, track, task))
            elif task.finished_unaccounted:
                task.finished_unaccounted = False
                self._task_succeeded(wf, track, task)

    def _unaccounted_ended(
        self, wf: Workflow, track: StageTrack, task: Task, info: TaskPod
    ) -> None:
        """A task running beyond the pool ended before an executor was free for it."""
        if info.phase == "Succeeded":
            # it is counted in the state machine once an executor is its own
            task.finished_unaccounted = True
            return
        self.unaccounted = [u for u in self.unaccounted if u[2] is not task]
        track.running -= 1
        track.failed += 1
        task.failures += 1
        self.metrics.task_failures.inc()
        if task.failures > track.spec.backoff_limit:
            self._fail_task_for_good(wf, track, task, f"pod {info.name} failed: {info.reason}")
            return
        task.attempt += 1
        track.replan(task)  # the retry waits for the policy like any task
        self.writes.status(wf)
