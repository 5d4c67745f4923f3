"""The cluster state machine: jobs, stages, executors, caps, idle slots and metrics.

Pure and clock-free: every input carries `now`, and the machine never samples a
duration. The simulator drives it with a virtual clock and sampled task durations;
the operator drives the same code with wall-clock time and pod events.

Semantics (Decima and the idle-slot papers):

* K identical executors; a task occupies one executor, non-preemptively.
* A stage is *runnable* when its job has arrived, all its parent stages are complete,
  it has tasks not yet launched and it is not inside an idle slot. A gang stage is
  runnable only while enough executors are free to start all its tasks at once.
* An executor that finishes a task keeps working on the same stage while the stage has
  tasks left, without asking the scheduler (the `task_finished` return value).
* Scheduling events: job arrival, a stage running out of tasks or completing, an
  executor freed, an idle slot ending. At an event the scheduler is asked repeatedly
  until it says WAIT or no free executor or runnable stage remains (`schedule`).
* A decision `(stage, cap, idle_delay)` with no delay sets the job's parallelism cap
  and gives the stage free executors until the job holds `cap` executors or the stage
  has no task left to launch. With a delay it puts the stage into an idle slot of that
  length instead; only a stage that has not started may idle, each stage at most once,
  and the slot's end is an event.
* Caps never preempt: a decision may not set a cap below the executors the job holds,
  so a job never holds more executors than its cap.
"""

# One module of ~770 lines on purpose: the Cluster's invariants (free counts, executor
# tables, runnable lists, caps, idle timers) are kept by every one of its methods
# together, and its state objects and the scheduler protocol are what those methods
# read and write; split across files they would be harder to check as one machine.

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from math import inf
from typing import Any, Final, NamedTuple, Protocol

from idlegate.errors import IdlegateError, IllegalDecisionError
from idlegate.sim.dag import Dag

# ---------------------------------------------------------------------------------------
# State objects (read by schedulers; only the Cluster mutates them)


class Stage:
    """One stage of a job in the system. Schedulers read these fields; they never write them."""

    __slots__ = (
        "bottom_level",
        "children",
        "delayed",
        "duration",
        "executors",
        "finished",
        "gang",
        "idle_until",
        "index",
        "job",
        "launched",
        "name",
        "parents_left",
        "tasks",
    )

    def __init__(self, job: Job, index: int) -> None:
        dag = job.dag
        self.job = job
        self.index = index
        self.name = dag.names[index]
        self.tasks = dag.tasks[index]
        self.duration = dag.durations[index]
        """Estimated seconds per task (the spec's taskDurationSeconds)."""
        self.bottom_level = dag.bottom_levels[index]
        self.gang = dag.gang[index]
        self.children: tuple[int, ...] = dag.children[index]
        self.parents_left = len(dag.parents[index])
        self.launched = 0
        """Tasks started so far (running or finished)."""
        self.finished = 0
        self.executors = 0
        """Executors working on this stage now."""
        self.delayed = False
        """True once the stage has had its (single) idle slot."""
        self.idle_until: float | None = None
        """End of the idle slot the stage is in now, or None."""

    @property
    def remaining(self) -> int:
        """Tasks not launched yet."""
        return self.tasks - self.launched

    @property
    def running(self) -> int:
        return self.launched - self.finished

    @property
    def complete(self) -> bool:
        return self.finished == self.tasks

    @property
    def remaining_work(self) -> float:
        """Estimated executor-seconds of the tasks not finished yet."""
        return (self.tasks - self.finished) * self.duration

    @property
    def key(self) -> tuple[int, int]:
        """(job id, stage index): a stable identity across processes."""
        return (self.job.id, self.index)

    def __repr__(self) -> str:
        return f"<Stage {self.job.name}/{self.name} {self.finished}/{self.tasks}>"


class Job:
    """A workflow in the system: its DAG, its stages' progress and its executors."""

    __slots__ = (
        "arrival",
        "cap",
        "dag",
        "finish",
        "first_start",
        "held",
        "id",
        "idle_inserted",
        "name",
        "payload",
        "remaining_cp",
        "remaining_work",
        "runnable",
        "stages",
        "stages_left",
        "unlaunched",
    )

    def __init__(self, job_id: int, name: str, dag: Dag, arrival: float, payload: Any) -> None:
        self.id = job_id
        self.name = name
        self.dag = dag
        self.arrival = arrival
        self.payload = payload
        """Driver data (the simulator keeps the job's duration model here)."""
        self.stages = [Stage(self, i) for i in range(dag.num_stages)]
        self.stages_left = dag.num_stages
        self.unlaunched = sum(dag.tasks)
        """Tasks of this job not launched yet, over all stages."""
        self.held = 0
        """Executors working on this job's tasks now."""
        self.cap = 0
        """Parallelism cap set by the latest decision on this job (0: none yet)."""
        self.remaining_work = dag.total_work
        """Estimated executor-seconds of unfinished tasks."""
        self.remaining_cp = dag.critical_path
        """Longest bottom level over incomplete stages."""
        self.runnable: list[Stage] = []
        """Runnable stages of this job (gang stages regardless of free executors)."""
        self.first_start: float | None = None
        self.finish: float | None = None
        self.idle_inserted = 0.0
        """Seconds of deliberate idle slots inserted before this job's stages."""

    @property
    def total_work(self) -> float:
        return self.dag.total_work

    @property
    def critical_path(self) -> float:
        return self.dag.critical_path

    @property
    def average_width(self) -> float:
        return self.dag.average_width

    def __repr__(self) -> str:
        return f"<Job {self.id} {self.name} held={self.held}>"


def _copy_job(job: Job) -> Job:
    """A copy of `job` and its stages sharing only the immutable DAG and payload."""
    twin = object.__new__(Job)
    for name in Job.__slots__:
        setattr(twin, name, getattr(job, name))
    stages = []
    for stage in job.stages:
        copy = object.__new__(Stage)
        for name in Stage.__slots__:
            setattr(copy, name, getattr(stage, name))
        copy.job = twin
        stages.append(copy)
    twin.stages = stages
    twin.runnable = [stages[s.index] for s in job.runnable]
    return twin


# ---------------------------------------------------------------------------------------
# The scheduler protocol


@dataclass(frozen=True, slots=True)
class Decision:
    """Launch `stage` with the job capped at `parallelism_cap` executors, or idle it first.

    With `idle_delay > 0` the stage waits that many seconds (a deliberate idle slot) and
    no executor is assigned now; when the slot ends the scheduler is asked again.
    """

    stage: Stage
    parallelism_cap: int
    idle_delay: float = 0.0


class _Wait:
    __slots__ = ()

    def __repr__(self) -> str:
        return "WAIT"


WAIT: Final = _Wait()
"""The decision to assign nothing more at this event."""

Action = Decision | _Wait


class ClusterView(Protocol):
    """What a scheduler may read at a decision (the Cluster satisfies it)."""

    now: float
    num_executors: int
    free_executors: int
    jobs: list[Job]
    arrival_log: list[tuple[float, float]]

    def runnable_stages(self) -> list[Stage]: ...
    def free_executors_from(self, job: Job | None) -> int: ...
    def check(self, decision: Decision) -> None: ...


class Scheduler(Protocol):
    """Every policy — heuristics, learned, ONNX, inspector — answers this one call."""

    name: str

    def reset(self, rng: Any) -> None:
        """Start of a run; `rng` is a numpy Generator owned by the run (for random choices)."""

    def decide(self, view: ClusterView) -> Action:
        """Return a Decision on one of `view.runnable_stages()`, or WAIT."""


# ---------------------------------------------------------------------------------------
# Launches and per-job results


class Launch(NamedTuple):
    """A task start the driver must carry out: run one task of `stage` on `executor`.

    `first`: the executor's first task on this stage (Decima's first wave);
    `moved`: the executor comes from another job or none (moving delay, warm-up).
    """

    executor: int
    stage: Stage
    first: bool
    moved: bool


@dataclass(frozen=True, slots=True)
class JobRecord:
    """What happened to one job: the per-job metrics."""

    id: int
    name: str
    arrival: float
    first_start: float
    finish: float
    total_work: float
    critical_path: float
    idle_inserted: float

    @property
    def jct(self) -> float:
        return self.finish - self.arrival


TraceSink = Callable[[float, str, int, int, Any], None]


# ---------------------------------------------------------------------------------------


class Cluster:
    """K executors and the jobs in the system. Every method takes the current time `now`."""

    def __init__(
        self, num_executors: int, trace: TraceSink | None = None, *, moving_delay: float = 0.0
    ) -> None:
        if isinstance(num_executors, bool) or not isinstance(num_executors, int):
            raise IllegalDecisionError(f"executors must be a whole number, got {num_executors!r}")
        if num_executors < 1:
            raise IllegalDecisionError(f"a cluster needs at least 1 executor, got {num_executors}")
        self.num_executors = num_executors
        self.moving_delay = moving_delay
        """Seconds an executor new to a job needs before its task runs, as far as the driver
        knows (the simulator's fidelity; 0 in the operator). Read by planners."""
        self.now = 0.0
        self.jobs: list[Job] = []
        """Jobs in the system, in arrival order."""
        self.done: list[JobRecord] = []
        self.removed: list[Job] = []
        """Jobs taken out unfinished (`remove_job`)."""
        self.arrival_log: list[tuple[float, float]] = []
        """(arrival time, total work) of every job so far: for online arrival estimates."""
        self.free_executors = num_executors
        self._free: dict[Job | None, list[int]] = {None: list(range(num_executors - 1, -1, -1))}
        self._exec_stage: list[Stage | None] = [None] * num_executors
        self._exec_job: list[Job | None] = [None] * num_executors
        self._next_id = 0
        self._trace = trace
        self.needs_schedule = False
        """Set by every scheduling event; the driver calls `schedule` and it is cleared."""
        self.new_timers: list[Stage] = []
        """Stages whose idle slot began; the driver arms a timer for each and clears the list."""
        self.decisions = 0
        self._busy_since: list[float] = [0.0] * num_executors
        self._task_start: list[float] = [0.0] * num_executors
        self._busy_done = 0.0
        self._done_area = 0.0

    # -- inputs ----------------------------------------------------------------------

    def add_job(
        self,
        dag: Dag,
        now: float,
        name: str | None = None,
        payload: Any = None,
        *,
        arrival: float | None = None,
    ) -> Job:
        """A job arrives at `now` (or arrived at `arrival` <= now: an operator rebuilding state)."""
        self.advance(now)
        if arrival is not None and arrival > now:
            raise IllegalDecisionError(f"arrival {arrival} is in the future (now is {now})")
        for i, (gang, tasks) in enumerate(zip(dag.gang, dag.tasks, strict=True)):
            if gang and tasks > self.num_executors:
                raise IdlegateError(
                    f"stage {dag.names[i]!r} of {name or 'the job'} is a gang of {tasks} tasks, "
                    f"but the cluster has only {self.num_executors} executors, so it could "
                    "never start; use fewer tasks or more executors"
                )
        arrived = now if arrival is None else arrival
        job = Job(self._next_id, name or f"job-{self._next_id}", dag, arrived, payload)
        self._next_id += 1
        self.jobs.append(job)
        self.arrival_log.append((arrived, dag.total_work))
        job.runnable = [s for s in job.stages if s.parents_left == 0]
        self.needs_schedule = True
        self._emit("arrive", job.id, -1, job.name)
        return job

    def task_finished(self, executor: int, now: float) -> Stage | None:
        """The task on `executor` finished.

        Returns the stage whose next task the executor starts right away (not its first
        on the stage, no move), or None when the executor was freed.
        """
        if now < self.now:
            self.advance(now)  # raises
        self.now = now
        stage = self._exec_stage[executor]
        if stage is None:
            raise IllegalDecisionError(
                f"executor {executor} finished a task but was not running one"
            )
        job = stage.job
        stage.finished += 1
        job.remaining_work -= stage.duration
        if stage.launched < stage.tasks:
            stage.launched += 1
            job.unlaunched -= 1
            self._task_start[executor] = now
            if stage.launched == stage.tasks:
                self._out_of_tasks(stage)
            return stage
        # the executor is freed; it stays associated with its job for locality
        self._exec_stage[executor] = None
        stage.executors -= 1
        job.held -= 1
        self.free_executors += 1
        self._busy_done += now - self._busy_since[executor]
        self._free.setdefault(job, []).append(executor)
        self.needs_schedule = True
        if stage.finished == stage.tasks:
            self._stage_complete(stage, now)
        return None

    def remove_job(self, job: Job, now: float) -> list[int]:
        """Take `job` out without completing it (deleted, or failed for good).

        Returns the executors that were running its tasks; they are free now (the driver
        stops those tasks). The job gets no JobRecord.
        """
        self.advance(now)
        if job.finish is not None or job not in self.jobs:
            return []
        running = [e for e in range(self.num_executors) if self._exec_stage[e] in job.stages]
        for e in running:
            self._exec_stage[e] = None
            self._busy_done += now - self._busy_since[e]
            self.free_executors += 1
        self._free.setdefault(job, []).extend(running)
        job.held = 0
        for stage in job.stages:
            stage.executors = 0
        job.finish = now
        self._done_area += now - job.arrival
        self.jobs.remove(job)
        self._release_executors(job)
        self.removed.append(job)
        self.needs_schedule = True
        self._emit("job-removed", job.id, -1, None)
        return running

    def restore_progress(
        self,
        job: Job,
        *,
        finished: Sequence[int],
        running: Iterable[tuple[int, int | None]] = (),
        delayed: Iterable[int] = (),
        idle_until: Mapping[int, float] | None = None,
        cap: int = 0,
        first_start: float | None = None,
        idle_inserted: float = 0.0,
    ) -> list[int]:
        """Rebuild a job's progress after a restart (the operator), right after `add_job`.

        `finished[i]`: tasks of stage i that finished; `running`: (stage index, executor or
        None for any free one) per task still running; `delayed`: stages that had their idle
        slot; `idle_until`: stages still inside one, with its end (new timers are reported
        in `new_timers`, past ends are simply over). Returns the executors the running
        tasks occupy, in the order of `running`.
        """
        now = self.now
        if job.first_start is not None or job.held or any(s.launched for s in job.stages):
            raise IllegalDecisionError(f"{job.name} already has progress; restore it only once")
        if len(finished) != len(job.stages):
            raise IllegalDecisionError(
                f"{job.name}: {len(finished)} finished counts for {len(job.stages)} stages"
            )
        for stage, n in zip(job.stages, finished, strict=True):
            if not 0 <= n <= stage.tasks:
                raise IllegalDecisionError(f"{job.name}/{stage.name}: {n} finished tasks?")
            stage.launched = stage.finished = n
        claimed = []
        for index, executor in running:
            stage = job.stages[index]
            if stage.launched >= stage.tasks:
                raise IllegalDecisionError(f"{job.name}/{stage.name}: more tasks than it has")
            stage.launched += 1
            claimed.append(self._start(self._claim(executor, job), stage, True).executor)
        for index in delayed:
            job.stages[index].delayed = True
        for index, until in (idle_until or {}).items():
            stage = job.stages[index]
            stage.delayed = True
            if until > now and stage.launched == 0:
                stage.idle_until = until
                self.new_timers.append(stage)
        complete = [s.finished == s.tasks for s in job.stages]
        for stage in job.stages:
            stage.parents_left = sum(not complete[p] for p in job.dag.parents[stage.index])
        job.stages_left = complete.count(False)
        job.unlaunched = sum(s.tasks - s.launched for s in job.stages)
        job.remaining_work = sum(s.remaining_work for s in job.stages)
        job.remaining_cp = max(
            (s.bottom_level for s in job.stages if s.finished < s.tasks), default=0.0
        )
        job.runnable = [
            s
            for s in job.stages
            if s.parents_left == 0 and s.launched < s.tasks and s.idle_until is None
        ]
        job.cap = max(cap, job.held)
        job.idle_inserted = idle_inserted
        if any(s.launched for s in job.stages):
            job.first_start = first_start if first_start is not None else job.arrival
        self.needs_schedule = True
        if job.stages_left == 0:
            self._job_complete(job, now)
        return claimed

    def idle_expired(self, stage: Stage, now: float) -> None:
        """The idle slot of `stage` ended (the driver's timer fired)."""
        self.advance(now)
        if stage.idle_until is None:
            return  # the job left, or the timer was already handled (restart)
        stage.idle_until = None
        if stage.job.finish is None and stage.launched < stage.tasks:
            stage.job.runnable.append(stage)
        self.needs_schedule = True
        self._emit("idle-end", stage.job.id, stage.index, None)

    # -- scheduling ------------------------------------------------------------------

    def runnable_stages(self) -> list[Stage]:
        """Stages a decision may name now, jobs in arrival order."""
        free = self.free_executors
        return [s for j in self.jobs for s in j.runnable if not s.gang or s.tasks <= free]

    def free_executors_from(self, job: Job | None) -> int:
        """Free executors whose last task belonged to `job` (None: never used or job gone)."""
        return len(self._free.get(job, ()))

    def can_schedule(self) -> bool:
        if self.free_executors == 0:
            return False
        free = self.free_executors
        return any(not s.gang or s.tasks <= free for j in self.jobs for s in j.runnable)

    def schedule(self, scheduler: Scheduler, now: float) -> list[Launch]:
        """Ask `scheduler` until it waits or nothing more can start; returns the task launches."""
        self.advance(now)
        self.needs_schedule = False
        launches: list[Launch] = []
        while (step := self.decide_once(scheduler, now)) is not None:
            action, started = step
            if action is WAIT:
                break
            launches.extend(started)
        return launches

    def decide_once(self, scheduler: Scheduler, now: float) -> tuple[Action, list[Launch]] | None:
        """One step of `schedule`: ask `scheduler` once and apply its answer.

        Returns None when nothing can start now (no free executor or no runnable stage),
        else the answer with the launches it made (none for WAIT or an idle slot). An
        illegal answer raises IllegalDecisionError before anything changes, so a driver
        that steps the machine itself (the operator, the Gymnasium env) can answer in
        another way without losing what earlier steps launched.
        """
        self.advance(now)
        if not self.can_schedule():
            return None
        action = scheduler.decide(self)
        if action is WAIT:
            return action, []
        if not isinstance(action, Decision):
            raise IllegalDecisionError(
                f"scheduler {getattr(scheduler, 'name', scheduler)!r} returned {action!r}; "
                "decide() must return a Decision or WAIT"
            )
        return action, self.apply(action, now)

    def apply(self, decision: Decision, now: float) -> list[Launch]:
        """Carry out one decision; raises IllegalDecisionError, changing nothing, if it is not
        legal now."""
        self.advance(now)
        stage, cap, delay = decision.stage, decision.parallelism_cap, decision.idle_delay
        job = stage.job
        self.check(decision)
        self.decisions += 1
        job.cap = cap
        if delay > 0:
            stage.delayed = True
            stage.idle_until = now + delay
            job.runnable.remove(stage)
            job.idle_inserted += delay
            self.new_timers.append(stage)
            self._emit("idle", job.id, stage.index, delay)
            return []
        n = min(self.free_executors, cap - job.held, stage.tasks - stage.launched)
        launches = [self._start(self._take_executor(job), stage, True) for _ in range(n)]
        stage.launched += n
        job.unlaunched -= n
        if stage.launched == stage.tasks:
            self._out_of_tasks(stage)
        if job.first_start is None:
            job.first_start = now
        self._emit("launch", job.id, stage.index, (n, cap))
        return launches

    # -- bookkeeping -----------------------------------------------------------------

    def check(self, decision: Decision) -> None:
        """Raise IllegalDecisionError unless `decision` is legal now (`apply` runs this too)."""
        stage, cap, delay = decision.stage, decision.parallelism_cap, decision.idle_delay
        job = stage.job
        where = f"stage {job.name}/{stage.name}"
        if job.finish is not None:
            raise IllegalDecisionError(f"{where} belongs to a job that is not in the system")
        if stage.idle_until is not None:
            raise IllegalDecisionError(
                f"{where} is inside an idle slot until t={stage.idle_until:g}; "
                "it becomes runnable again when the slot ends"
            )
        if stage not in job.runnable:
            raise IllegalDecisionError(
                f"{where} is not runnable (parents unfinished or no task left to launch); "
                "choose one of view.runnable_stages()"
            )
        if isinstance(cap, bool) or not isinstance(cap, int):
            raise IllegalDecisionError(f"the parallelism cap must be an int, got {cap!r}")
        if cap < job.held:
            raise IllegalDecisionError(
                f"cap {cap} for {job.name} is below the {job.held} executors it holds; tasks are "
                f"not preempted, so the cap must be at least {job.held}"
            )
        if not delay >= 0 or delay == inf:  # also rejects NaN
            raise IllegalDecisionError(f"idle delay must be a finite number >= 0, got {delay!r}")
        if delay > 0 and stage.delayed:
            raise IllegalDecisionError(
                f"{where} was already delayed once; a stage idles at most once"
            )
        if delay > 0 and stage.launched:
            raise IllegalDecisionError(
                f"{where} has already started; an idle slot goes before a stage's first task"
            )
        if delay == 0 and self.free_executors == 0:
            raise IllegalDecisionError(
                f"no executor is free to launch {where}; return WAIT until one is"
            )
        if delay == 0 and cap <= job.held:
            raise IllegalDecisionError(
                f"cap {cap} leaves {job.name} no room for another executor (it holds {job.held}); "
                "raise the cap above what the job holds, or return WAIT"
            )
        n = min(self.free_executors, cap - job.held, stage.tasks - stage.launched)
        if delay == 0 and stage.gang and n < stage.tasks:
            raise IllegalDecisionError(
                f"gang stage {job.name}/{stage.name} needs {stage.tasks} executors at once, "
                f"but the cap {cap} and {self.free_executors} free executors allow {n}"
            )

    def _take_executor(self, job: Job) -> int:
        # prefer executors already local to the job (no moving delay), then unattached ones
        pool = self._free.get(job)
        if not pool:
            pool = self._free[None]
            if not pool:
                pool = next(p for p in self._free.values() if p)
        self.free_executors -= 1
        return pool.pop()

    def _claim(self, executor: int | None, job: Job) -> int:
        """Take a specific free executor (or, for None or a taken one, any free one)."""
        if self.free_executors == 0:
            raise IdlegateError(
                f"the pool has {self.num_executors} executors, fewer than the tasks already "
                "running; raise the pool size"
            )
        for pool in self._free.values():
            if executor in pool:
                pool.remove(executor)
                self.free_executors -= 1
                return executor
        return self._take_executor(job)

    def _start(self, executor: int, stage: Stage, first: bool) -> Launch:
        job = stage.job
        moved = self._exec_job[executor] is not job
        self._exec_job[executor] = job
        self._busy_since[executor] = self._task_start[executor] = self.now
        self._exec_stage[executor] = stage
        stage.executors += 1
        job.held += 1
        return Launch(executor, stage, first, moved)

    def _out_of_tasks(self, stage: Stage) -> None:
        stage.job.runnable.remove(stage)
        self.needs_schedule = True

    def _stage_complete(self, stage: Stage, now: float) -> None:
        job = stage.job
        job.stages_left -= 1
        self._emit("stage-done", job.id, stage.index, None)
        for c in stage.children:
            child = job.stages[c]
            child.parents_left -= 1
            if child.parents_left == 0:
                job.runnable.append(child)
        job.remaining_cp = max(
            (s.bottom_level for s in job.stages if s.finished < s.tasks), default=0.0
        )
        if job.stages_left == 0:
            self._job_complete(job, now)

    def _job_complete(self, job: Job, now: float) -> None:
        job.finish = now
        self._done_area += now - job.arrival
        self.jobs.remove(job)
        self._release_executors(job)
        self.done.append(
            JobRecord(
                job.id,
                job.name,
                job.arrival,
                job.first_start if job.first_start is not None else now,
                now,
                job.total_work,
                job.critical_path,
                job.idle_inserted,
            )
        )
        self._emit("job-done", job.id, -1, now - job.arrival)

    def _release_executors(self, job: Job) -> None:
        """A job left: its free executors become unattached, its idle timers moot."""
        self._free[None].extend(self._free.pop(job, []))
        for e in range(self.num_executors):
            if self._exec_job[e] is job:
                self._exec_job[e] = None
        for s in job.stages:
            s.idle_until = None

    def advance(self, now: float) -> None:
        """Move the clock to `now` (inputs do this themselves)."""
        if now < self.now:
            raise IllegalDecisionError(f"time went backwards: {now} after {self.now}")
        self.now = now

    def _emit(self, kind: str, job: int, stage: int, info: Any) -> None:
        if self._trace is not None:
            self._trace(self.now, kind, job, stage, info)

    # -- planning ----------------------------------------------------------------------

    def running_tasks(self) -> list[tuple[int, Stage, float]]:
        """(executor, stage, start of the task it runs now) for every busy executor."""
        return [
            (e, stage, self._task_start[e])
            for e, stage in enumerate(self._exec_stage)
            if stage is not None
        ]

    def fork(self) -> Cluster:
        """An independent copy of the present state, for planners to simulate futures on.

        DAGs and payloads (duration models) are immutable and shared; jobs, stages, the
        executor tables and the counters are copied, so nothing done to the fork changes
        this cluster. The fork keeps no trace and no finished-job records (`done` starts
        empty; `jobs_time_integral` carries on from the same value).
        """
        twin = object.__new__(Cluster)
        jobs = {job: _copy_job(job) for job in self.jobs}
        twin.num_executors = self.num_executors
        twin.moving_delay = self.moving_delay
        twin.now = self.now
        twin.jobs = list(jobs.values())
        twin.done = []
        twin.removed = []
        twin.arrival_log = list(self.arrival_log)
        twin.free_executors = self.free_executors
        # an executor may stay attached to a job that left (none here: _release_executors)
        twin._free = {
            (None if job is None else jobs[job]): list(pool) for job, pool in self._free.items()
        }
        twin._exec_stage = [
            None if s is None else jobs[s.job].stages[s.index] for s in self._exec_stage
        ]
        twin._exec_job = [None if j is None else jobs.get(j) for j in self._exec_job]
        twin._next_id = self._next_id
        twin._trace = None
        twin.needs_schedule = self.needs_schedule
        twin.new_timers = [jobs[s.job].stages[s.index] for s in self.new_timers]
        twin.decisions = self.decisions
        twin._busy_since = list(self._busy_since)
        twin._task_start = list(self._task_start)
        twin._busy_done = self._busy_done
        twin._done_area = self._done_area
        return twin

    # -- metrics -----------------------------------------------------------------------

    @property
    def jobs_time_integral(self) -> float:
        """∫ (jobs in system) dt from 0 to now: the RL reward's integrand, summed per job."""
        now = self.now
        return self._done_area + sum(now - j.arrival for j in self.jobs)

    @property
    def busy_seconds(self) -> float:
        """Executor-seconds spent running tasks (and moving) from 0 to now."""
        now = self.now
        running = sum(
            now - self._busy_since[e]
            for e in range(self.num_executors)
            if self._exec_stage[e] is not None
        )
        return self._busy_done + running

    def busy_counts(self) -> Iterable[int]:
        """Executors busy per job in the system (for invariant checks)."""
        return (j.held for j in self.jobs)
