"""Stopping running tasks: the mechanism a reclaim uses (issue 82), in both clocks.

The state machine's step (`Stopping.stop`, a part of `idlegate.sim.cluster.Cluster`):
the admission's plan will name the executors whose tasks to stop (its ``stop``); the
simulator's engine (`Engine.stop`) and the operator's core (`Core.stop_tasks`, which
stops a pod through the Eviction API first) call this same step. Pure and clock-free,
as the cluster is.

Semantics:

* Stopping the task an executor runs frees the executor and the resources the task held
  at once. The task goes back among its stage's tasks not launched: ready again, started
  by a later decision like any task (the admission and the policy choose when), on any
  executor. Its job's remaining work and its stage's finished tasks are unchanged.
* A stop is not a failure: it counts against no retry limit (the operator's
  ``backoffLimit``; a stopped pod's task runs again as a new attempt, not a retry).
* The *work lost* is the executor-seconds the task ran, now minus its start (the moving
  delay included, as busy time counts it); none for a stage marked ``checkpointed``,
  whose stopped task resumes where it was: the driver, which knows durations, runs it
  again for what it had left (the engine keeps the remainder; the operator's pod reads
  its own progress back).
* A gang runs as one: its running tasks are stopped all together or none of them.
* Only a running task can be stopped: an executor that runs none, or, given the start
  the caller saw (`started`), one whose task ended and that runs another now, is refused
  with IllegalDecisionError, and nothing of the call is done.
* Each stopped task is the trace event ``preempted`` (info: the executor and the
  executor-seconds lost), counted in `preempted` and `preempted_seconds`, and given to
  the driver in `stopped` (the engine drops the task's end event), which empties it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

from idlegate.errors import IllegalDecisionError
from idlegate.sim.protocol import Stage

if TYPE_CHECKING:
    from idlegate.sim.admission import Admission
    from idlegate.sim.reclaim_plan import Reclaim


class Stopped(NamedTuple):
    """A task stopped: its executor, its stage, when it started and the executor-seconds
    of work lost (0 for a checkpointed stage)."""

    executor: int
    stage: Stage
    start: float
    lost: float


def checkpointed(stage: Stage) -> bool:
    """A stopped task of `stage` resumes where it was (its spec's ``checkpointed``)."""
    marks = stage.job.dag.checkpointed
    return bool(marks) and marks[stage.index]


class Stopping:
    """The cluster's stop (the module docstring): a part of `Cluster`, as `PoolResources`."""

    num_executors: int
    now: float
    _exec_stage: list[Stage | None]
    _task_start: list[float]
    task_failed: Callable[[int, float], None]
    _emit: Callable[[str, int, int, Any], None]
    preempted = 0
    """Tasks stopped so far."""
    preempted_seconds = 0.0
    """Executor-seconds of work the stopped tasks lost."""
    stopped: tuple[Stopped, ...] = ()
    """Tasks stopped that the driver has not taken yet (it empties it)."""

    def running_tasks(self) -> list[tuple[int, Stage, float]]:
        """(executor, stage, start of the task it runs now) for every busy executor: the
        tasks a stop may name (and a planner's view of what runs)."""
        return [
            (e, stage, self._task_start[e])
            for e, stage in enumerate(self._exec_stage)
            if stage is not None
        ]

    _busy: dict[int, None] | None = None
    """The busy executors, oldest task first (the order of their starts, which only grow),
    kept once a reclaim first reads them (`running_newest`; None: not yet)."""
    _kept: set[int] | None = None
    """Of `_busy`, those whose stage is checkpointed (their tasks lose nothing)."""
    _owed: dict[Stage, list[float]] | None = None
    """Per stage, when each of its tasks stopped and not yet run again was stopped."""
    _rerun: dict[int, float] | None = None
    """The busy executors whose task is a stopped one run again, with when it was
    stopped (a stage's next launch after a stop is its stopped task run again: its
    tasks are alike in the state machine)."""

    stopper: Callable[[Reclaim], object] | None = None
    """Who carries out a plan's stops (the operator's evictions: `Core.stop_tasks`, the
    machine told as each is taken); None: the cluster stops them itself (the simulator)."""
    stoppable: Callable[[Stage], bool] | None = None
    """Which running tasks a reclaim may stop besides the state machine's own rule (the
    operator's: a DagWorkflow's, whose pods it evicts; None: any but a gang's)."""
    admission: Admission | None
    can_schedule: Callable[[], bool]

    def stopped_first(self, now: float) -> bool:
        """`Cluster.decide_once`'s first step when the admission's plan stops tasks: the
        stops carried out (`stop`) or handed to `stopper`, told to the reclaim, and the
        question asked again, until its plan stops none; whether a stage may start."""
        admission = self.admission
        assert admission is not None and admission.reclaimer is not None
        while (reclaim := admission.plan.reclaim) is not None:
            carried = self.stopper is None
            admission.reclaimer.stopped(reclaim, self, now, carried)  # type: ignore[arg-type]
            if self.stopper is None:
                self.stop(reclaim.executors, now, reclaim.starts)
            else:
                self.stopper(reclaim)
            admission.reopen()
            if not self.can_schedule():
                return False
        return True

    def running_newest(
        self, queues: set[int], now: float
    ) -> Iterator[tuple[float, int, Stage, bool]]:
        """(start, executor, stage, checkpointed) of the tasks running for the jobs of
        `queues` that started before `now`: the checkpointed ones, then the others
        newest first (a reclaim's candidates, `idlegate.sim.reclaim_plan`, read as far
        as its choice needs; one that started at this instant has run nothing, and
        stopping it would undo a start of the same round). A gang's tasks are none (a
        gang runs as one, stopped whole or not at all), nor those `stoppable` refuses."""
        if self._busy is None:
            self._track()
        busy, kept = self._busy, self._kept
        assert busy is not None and kept is not None
        stages, starts, may = self._exec_stage, self._task_start, self.stoppable

        def candidate(stage: Stage | None, start: float) -> bool:
            return (
                stage is not None
                and start < now
                and stage.job.queue in queues
                and not stage.gang
                and (may is None or may(stage))
            )

        for e in sorted(kept, key=lambda e: -starts[e]):
            if candidate(stages[e], starts[e]):
                yield starts[e], e, stages[e], True  # type: ignore[misc]
        for e in reversed(busy):
            if e not in kept and candidate(stages[e], starts[e]):
                yield starts[e], e, stages[e], False  # type: ignore[misc]

    def running_oldest(self, queues: set[int]) -> Iterator[tuple[float, int, Stage]]:
        """(start, executor, stage) of the tasks running for the jobs of `queues`, oldest first (a
        reclaim's patience, `idlegate.sim.reclaim_patience`: of tasks alike, the first
        to end)."""
        if self._busy is None:
            self._track()
        assert self._busy is not None
        stages, starts = self._exec_stage, self._task_start
        for e in self._busy:
            stage = stages[e]
            if stage is not None and stage.job.queue in queues:
                yield starts[e], e, stage

    def rerun_of(self, executor: int) -> float | None:
        """When the task `executor` runs was stopped, if it is a stopped one run again."""
        return None if self._rerun is None else self._rerun.get(executor)

    def started_at(self, executor: int, start: float) -> None:
        """The task `executor` runs started at `start`, before the machine knew of it (one
        restored after the operator's restart): a stop of it loses the work since then."""
        self._task_start[executor] = start
        if self._busy is not None:  # (kept in the order of the starts: read again)
            rerun = self._rerun
            self._track()
            self._rerun = rerun

    def _track(self) -> None:
        """Start keeping `_busy`, `_kept` and `_rerun` (read from the executors once)."""
        stages, starts = self._exec_stage, self._task_start
        running = sorted((starts[e], e) for e, s in enumerate(stages) if s is not None)
        self._busy = {e: None for _, e in running}
        self._kept = {e for _, e in running if checkpointed(stages[e])}  # type: ignore[arg-type]
        self._rerun = {}
        if self._owed is None:
            self._owed = {}

    def _busy_started(self, executors: Sequence[int], stage: Stage) -> None:
        """`executors` started a task of `stage` now (kept once `_busy` is)."""
        busy, kept, rerun, owed = self._busy, self._kept, self._rerun, self._owed
        assert busy is not None and kept is not None and rerun is not None and owed is not None
        mark = checkpointed(stage)
        for e in executors:
            busy.pop(e, None)
            busy[e] = None
            rerun.pop(e, None)
            if mark:
                kept.add(e)
            times = owed.get(stage)
            if times:
                rerun[e] = times.pop(0)
                if not times:
                    del owed[stage]

    def _busy_freed(self, executor: int) -> None:
        """`executor`'s task ended, failed or stopped (kept once `_busy` is)."""
        assert self._busy is not None and self._kept is not None and self._rerun is not None
        self._busy.pop(executor, None)
        self._kept.discard(executor)
        self._rerun.pop(executor, None)

    def stage_on(self, executor: int) -> Stage | None:
        """The stage whose task `executor` runs (None: it runs none)."""
        return self._exec_stage[executor]

    def runs(self, executor: int, start: float) -> bool:
        """Whether `executor` still runs the task that started at `start`."""
        return self._exec_stage[executor] is not None and self._task_start[executor] == start

    def stop(
        self, executors: Iterable[int], now: float, started: Sequence[float] | None = None
    ) -> list[Stopped]:
        """Stop the tasks `executors` run, at `now` (`started`: each one's start as the
        caller saw it, to refuse a task that ended meanwhile); the tasks stopped."""
        wanted = list(executors)
        self._check_stop(wanted, started)
        done = []
        for executor in wanted:
            stage = self._exec_stage[executor]
            assert stage is not None  # (checked)
            start = self._task_start[executor]
            lost = 0.0 if checkpointed(stage) else max(0.0, now - start)
            # the machine's step is a failed task's (not launched any more, its executor
            # free); what a failure adds, a retry counted, is its driver's, and none here
            self.task_failed(executor, now)
            if self._owed is None:
                self._owed = {}
            self._owed.setdefault(stage, []).append(now)  # (its next launch runs it again)
            self.preempted += 1
            self.preempted_seconds += lost
            done.append(Stopped(executor, stage, start, lost))
            self._emit("preempted", stage.job.id, stage.index, (executor, lost))
        self.stopped = (*self.stopped, *done)
        return done

    def _check_stop(self, executors: list[int], started: Sequence[float] | None) -> None:
        """Raise IllegalDecisionError unless every one of `executors` runs a task (the one
        that began at `started`, if given), once, with the rest of its gang."""
        if started is not None and len(started) != len(executors):
            raise IllegalDecisionError(
                f"{len(executors)} executors to stop but {len(started)} start times given"
            )
        if len(set(executors)) != len(executors):
            raise IllegalDecisionError(f"an executor is named twice among {executors}")
        for i, executor in enumerate(executors):
            if not 0 <= executor < self.num_executors:
                raise IllegalDecisionError(
                    f"executor {executor} does not exist (the pool has {self.num_executors})"
                )
            stage = self._exec_stage[executor]
            if stage is None:
                raise IllegalDecisionError(
                    f"executor {executor} runs no task: the task it ran has ended, and a "
                    "task that ended cannot be stopped"
                )
            if started is not None and self._task_start[executor] != started[i]:
                raise IllegalDecisionError(
                    f"the task that started at {started[i]:g} on executor {executor} has "
                    f"ended (it runs one started at {self._task_start[executor]:g} now), "
                    "and a task that ended cannot be stopped"
                )
            if stage.gang:
                mates = [e for e, s in enumerate(self._exec_stage) if s is stage]
                if not set(mates) <= set(executors):
                    raise IllegalDecisionError(
                        f"stage {stage.name!r} of {stage.job.name} is a gang: stop all of "
                        f"its running tasks together (executors {mates}), or none"
                    )
