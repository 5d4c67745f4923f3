"""The cluster state machine: jobs, stages, executors, caps, idle slots and metrics.

Pure and clock-free: every input carries `now`, and the machine never samples a
duration. The simulator drives it with a virtual clock and sampled task durations;
the operator drives the same code with wall-clock time and pod events.

Semantics (Decima and the idle-slot papers):

* K identical executors; a task occupies one executor, non-preemptively.
* Resources (`idlegate.sim.resources`): the pool's capacity is a vector, K executors
  being its `pods`, plus any of `cpu`, `memory` and extended resources such as
  `nvidia.com/gpu` (`resources`). A stage's task demands one pod and its DAG's
  per-task demand (the pod's effective request) of the resources the pool names; of a
  resource the pool does not name nothing is counted, so a pods-only pool (K executors
  and nothing else, `--pool-size N`, Decima's and the papers' setting) counts each task
  as one executor whatever it requests. A task starts only where its demand fits the
  free capacity, a gang stage only where all its tasks fit at once, and an executor
  going on with its stage keeps its task's demand. A stage whose demand (a gang's, all
  its tasks together) exceeds the capacity could never start: the job is refused on
  arrival (DemandTooLargeError), as a gang wider than the pool is.
* A stage is *runnable* when its job has arrived, all its parent stages are complete,
  it has tasks not yet launched and it is not inside an idle slot. A gang stage is
  runnable only while enough executors are free to start all its tasks at once (a gang
  restored with some tasks done, by the operator, starts the rest of them at once);
  `runnable_stages` leaves out, likewise, a stage whose next task (a gang's tasks) does
  not fit the free resources.
* An executor that finishes a task keeps working on the same stage while the stage has
  tasks left, without asking the scheduler (the `task_finished` return value).
* Scheduling events: job arrival, a stage running out of tasks or completing, an
  executor freed, an idle slot ending. At an event the scheduler is asked repeatedly
  until it says WAIT or no free executor or runnable stage remains (a round of
  `decide_once`; `idlegate.sim.engine.Engine` holds the simulator's rounds).
* A decision `(stage, cap, idle_delay)` with no delay sets the job's parallelism cap
  and gives the stage free executors until the job holds `cap` executors, the stage
  has no task left to launch or the next task's demand does not fit. With a delay it puts the stage into an idle slot of that
  length instead; only a stage that has not started may idle, each stage at most once,
  and the slot's end is an event.
* Caps never preempt: a decision may not set a cap below the executors the job holds,
  so a job never holds more executors than its cap.
* Tasks *beyond the pool* (the operator's; the simulator never has any): a task that
  runs although no executor was free for it, because the driver found it running (a
  pool made smaller than what runs in it) or it started without a decision (a pod's gate
  removed by someone else, `started_unasked`). It is not launched in the machine until
  an executor is its own. While any exists, nothing new starts: no decision round
  (`can_schedule` is False), and an executor that finishes a task does not go on with
  its stage but is freed, for the oldest task beyond the pool (`adopt_beyond`). So a
  pool made smaller drains to its size as its tasks end, and never preempts one.
* Tasks *available* (the operator's Argo jobs; in the simulator all tasks are): a driver
  whose tasks appear as the job runs (Argo creates a node's pods itself, within its
  `parallelism`) says how many of a stage's tasks can start so far (`tasks_available`).
  A stage is runnable only while fewer are launched, and an executor goes on with its
  stage only to an available task, so no executor waits for a task that does not exist.
  A task that failed, to be retried by the driver (`task_failed`), frees its executor
  and is not launched any more.
* Queues (`idlegate.sim.admission`, `admission`; None: one queue, `idlegate.sim.queued`,
  whose priorities order it as a queue's do): a question shows the
  scheduler only the stages the queues let start now, cut to what they let start; a wait
  bound may decide without it; an executor goes on with its stage only where they allow.
* Stopping a running task (`stop`, `idlegate.sim.reclaim_stop`, whose semantics hold: a
  reclaim's): its executor and resources are free at once, the task is ready again in its
  stage, no failure is counted, and the work lost (none if checkpointed) is recorded.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from operator import attrgetter
from typing import TYPE_CHECKING, Any

from idlegate.errors import GangTooWideError, IdlegateError, IllegalDecisionError
from idlegate.sim.admission import Admission
from idlegate.sim.beyond import Beyond
from idlegate.sim.dag import Dag
from idlegate.sim.fork import fork_cluster
from idlegate.sim.legality import check_decision
from idlegate.sim.orders import Order
from idlegate.sim.pool import PoolResources
from idlegate.sim.progress import can_run, hold, recount, remaining_cp
from idlegate.sim.protocol import (
    WAIT,
    Action,
    ClusterView,
    Decision,
    Job,
    JobRecord,
    Launch,
    Scheduler,
    Stage,
    launchable,
)
from idlegate.sim.queued import Queued, Ranked
from idlegate.sim.reclaim_stop import Stopping
from idlegate.sim.resources import MILLI, ResourceVector
from idlegate.sim.shapes import Shapes
from idlegate.sim.shares import Shares

if TYPE_CHECKING:
    from idlegate.sim.runs import SimResult

TraceSink = Callable[[float, str, int, int, Any], None]


class Cluster(Queued, PoolResources, Beyond, Stopping):
    """K executors (and the pool's other resources) and the jobs in the system. Every
    method takes the current time `now`."""

    _orders: dict[tuple[str, int | None], Order] | None = None
    """The jobs by each key (and queue) a rule asked for (`order`); None: none asked yet (a
    class default, so a fork, made without `__init__`, starts with none and builds its
    own)."""
    order_key: str | None = None
    """The order the policy last asked says it starts workflows in (its ``order_key``)."""

    def __init__(
        self,
        num_executors: int,
        trace: TraceSink | None = None,
        *,
        moving_delay: float = 0.0,
        resources: ResourceVector | None = None,
        nodes: Sequence[ResourceVector] = (),
    ) -> None:
        if isinstance(num_executors, bool) or not isinstance(num_executors, int):
            raise IllegalDecisionError(f"executors must be a whole number, got {num_executors!r}")
        if num_executors < 1:
            raise IllegalDecisionError(f"a cluster needs at least 1 executor, got {num_executors}")
        self.num_executors = num_executors
        self._init_resources(resources, nodes)
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
        """Set by every scheduling event; the driver clears it and holds a decision round."""
        self.new_timers: list[Stage] = []
        """Stages whose idle slot began; the driver arms a timer for each and clears the list."""
        self.decisions = 0
        self.beyond: list[tuple[Stage, Any]] = []
        """Tasks running beyond the pool, oldest first: (stage, the driver's token)."""
        self._busy_since: list[float] = [0.0] * num_executors
        self._task_start: list[float] = [0.0] * num_executors
        self._busy_done = 0.0
        self._done_area = 0.0
        self.admission: Admission | None = None
        """The pool's queues (`idlegate.sim.admission`); None: one queue, no quotas."""
        self.shapes = Shapes()
        """The runnable stages by shape of need (`can_schedule`'s index)."""
        self.shares = Shares()
        """The jobs by dominant share (fair's index on a resource pool)."""
        self.ranked = Ranked()
        """The jobs of a priority other than 0 (`Queued.admission_deciding`'s index)."""
        self._marks: tuple[dict[Job, None], ...] | None = None
        """Each index's ``stale`` set, where `touch` marks a job (None: gathered again)."""
        self.changed: dict[Job, None] | None = None
        """Jobs `touch`ed since a driver that keeps it (``{}``) emptied it; None: not kept."""

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
                raise GangTooWideError(
                    f"stage {dag.names[i]!r} of {name or 'the job'} is a gang of {tasks} tasks, "
                    f"but the cluster has only {self.num_executors} executors, so it could "
                    "never start; use fewer tasks or more executors",
                    tasks,
                )
        arrived = now if arrival is None else arrival
        job = Job(self._next_id, name or f"job-{self._next_id}", dag, arrived, payload)
        job.holding = [0] * len(self.resource_names)
        if self.resource_names and dag.demands:
            self._set_needs(job)
        self._next_id += 1
        self.jobs.append(job)
        self.arrival_log.append((arrived, dag.total_work))
        job.runnable = [s for s in job.stages if s.parents_left == 0]
        self.touch(job)
        self.needs_schedule = True
        self._emit("arrive", job.id, -1, job.name)
        return job

    def task_finished(self, executor: int, now: float) -> Stage | None:
        """The task on `executor` finished.

        Returns the stage whose next task the executor starts right away (not its first
        on the stage, no move), or None when the executor was freed (also while a task
        runs beyond the pool: it is owed the executor).
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
        more = stage.launched < stage.available and not self.beyond
        admission = self.admission
        if more and admission is not None:
            more = admission.may_go_on(stage, now)
        if more and (stage.need is None or self._goes_on(stage.need, executor)):
            if admission is not None:
                admission.started(stage, 1, now)
            stage.launched += 1
            job.unlaunched -= 1
            self.touch(job)
            self._task_start[executor] = now
            if self._busy is not None:
                self._busy_started((executor,), stage)
            if stage.launched == stage.available:
                self._out_of_tasks(stage)
            return stage
        self._free_executor(executor, stage, now)
        if stage.finished == stage.tasks:
            self._stage_complete(stage, now)
        return None

    def task_failed(self, executor: int, now: float) -> None:
        """The task on `executor` failed, to be tried again by a retry the driver does not
        have yet (Argo's): the executor is freed and the task is not launched any more."""
        self.advance(now)
        stage = self._exec_stage[executor]
        if stage is None:
            raise IllegalDecisionError(f"executor {executor} failed a task but was not running one")
        job = stage.job
        stage.launched -= 1
        job.unlaunched += 1
        self._free_executor(executor, stage, now)
        if can_run(stage) and stage not in job.runnable:
            job.runnable.append(stage)
        self.touch(job)  # (its stage has a task to launch again, runnable or not)

    def _free_executor(self, executor: int, stage: Stage, now: float) -> None:
        # the executor stays associated with its job for locality
        job = stage.job
        if self.admission is not None:
            self.admission.use(stage, -1, now)
        self._exec_stage[executor] = None
        if self._busy is not None:
            self._busy_freed(executor)
        stage.executors -= 1
        job.held -= 1
        self.touch(job)
        if stage.need is not None:
            hold(job, stage.need.amounts, -1)
            self._give_back(stage.need, 1, (executor,))
        self.free_executors += 1
        self._busy_done += now - self._busy_since[executor]
        if stage.need is not None:
            self._held_for(stage.need, now - self._busy_since[executor])
        own = self._free.get(job)
        if own is None:
            self._free[job] = [executor]
        else:
            own.append(executor)
        self.needs_schedule = True

    def remove_job(self, job: Job, now: float) -> list[int]:
        """Take `job` out without completing it (deleted, or failed for good).

        Returns the executors that were running its tasks; they are free now (the driver
        stops those tasks). The job gets no JobRecord.
        """
        self.advance(now)
        if job.finish is not None or job not in self.jobs:
            return []
        running = [e for e, s in enumerate(self._exec_stage) if s is not None and s.job is job]
        for e in running:
            stage = self._exec_stage[e]
            if stage is not None and self.admission is not None:
                self.admission.use(stage, -1, now)
            if stage is not None and stage.need is not None:
                self._give_back(stage.need, 1, (e,))
                self._held_for(stage.need, now - self._busy_since[e])
            self._exec_stage[e] = None
            if self._busy is not None:
                self._busy_freed(e)
            self._busy_done += now - self._busy_since[e]
            self.free_executors += 1
        self._free.setdefault(job, []).extend(running)
        job.held = 0
        job.holding = [0] * len(job.holding)
        for stage in job.stages:
            stage.executors = 0
        job.finish = now
        self._done_area += now - job.arrival
        self.jobs.remove(job)
        self.touch(job)
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
        started: Sequence[float | None] = (),
    ) -> list[int]:
        """Rebuild a job's progress after a restart (the operator), right after `add_job`.

        `finished[i]`: tasks of stage i that finished; `running`: (stage index, executor or
        None for any free one) per task still running; `delayed`: stages that had their idle
        slot; `idle_until`: stages still inside one, with its end (new timers are reported
        in `new_timers`, past ends are simply over); `started`: when each of `running`
        started, where known (a stop of it loses the work since then, `started_at`).
        Returns the executors the running tasks occupy, in the order of `running`.
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
            claimed.append(self._start([self._claim(executor, job)], stage)[0].executor)
        for executor, start in zip(claimed, started, strict=False):
            if start is not None:
                self.started_at(executor, min(start, now))
        for index in delayed:
            job.stages[index].delayed = True
        for index, until in (idle_until or {}).items():
            stage = job.stages[index]
            stage.delayed = True
            if until > now and stage.launched == 0:
                stage.idle_until = until
                self.new_timers.append(stage)
        recount(job)
        self.touch(job)
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
        if stage.waits:
            stage.job.runnable.append(stage)
            self.touch(stage.job)
        self.needs_schedule = True
        self._emit("idle-end", stage.job.id, stage.index, None)

    def tasks_available(self, stage: Stage, n: int, now: float) -> None:
        """`n` of the tasks of `stage` can start so far, those launched included (at most
        its tasks). A stage that becomes runnable by it is a scheduling event."""
        self.advance(now)
        if stage.gang:
            raise IllegalDecisionError(f"gang stage {stage.name}: its tasks start together")
        n = min(n, stage.tasks)
        if n < stage.launched:
            raise IllegalDecisionError(
                f"stage {stage.name}: {n} tasks available but {stage.launched} launched"
            )
        stage.available = n
        job = stage.job
        runnable = job.finish is None and can_run(stage)
        if runnable and stage not in job.runnable:
            job.runnable.append(stage)
            self.touch(job)
            self.needs_schedule = True
        elif not runnable and stage in job.runnable:
            job.runnable.remove(stage)
            self.touch(job)

    # -- a decision round's edges (a gate over a cluster overrides them: sim.gate) ----

    @property
    def round_due(self) -> bool:
        """A scheduling event asks the scheduler (a gate's pod end only places pods)."""
        return True

    def close_round(self, launches: list[Launch], now: float) -> list[Launch]:
        """The launches that start as a decision round closes: all of the round's."""
        return launches

    def report(self, result: SimResult) -> SimResult:
        """The run's figures (a gate reports its cluster's)."""
        return result

    # -- scheduling ------------------------------------------------------------------

    runnable = staticmethod(attrgetter("runnable"))
    """`job`'s runnable stages as this view shows them: all of them (a view of the
    admission's shows those its plan lets start, `idlegate.sim.admission_view`). A C
    getter: policies call it once per job a question reads."""

    def runnable_stages(self) -> list[Stage]:
        """Stages a decision may name now, jobs in arrival order."""
        free = self.free_executors
        if self.resource_names:
            return [s for j in self.jobs for s in j.runnable if launchable(s, free)]
        return [s for j in self.jobs for s in j.runnable if not s.gang or s.tasks <= free]

    def free_executors_from(self, job: Job | None) -> int:
        """Free executors whose last task belonged to `job` (None: never used or job gone)."""
        return len(self._free.get(job, ()))

    def can_schedule(self) -> bool:
        if (admission := self.admission_deciding()) is not None:
            if admission.bounded:
                self._end_idle_over(admission)
            return admission.open(self)
        return self.may_start()

    def may_start(self) -> bool:
        """Whether a round may start a task now: a runnable stage's next one fits (an
        executor free, a node's room; quotas aside), or a queue may stop tasks for one."""
        if self.admission is not None and self.admission.reclaimer is not None:
            return True
        free = self.free_executors
        return free > 0 and not self.beyond and self.shapes.any_launchable(free, self.fit_bound())

    def order(self, key: str, queue: int | None = None) -> Order:
        """The jobs with a runnable stage by `key` (a job attribute, `sim.orders.KEYS`),
        smallest first: srpt's and sjf-cp's index, built at the first asking and kept
        from then on by `touch`; of queue `queue`'s jobs alone when given (a queue's view
        asks its own: `sim.admission_view.QueueView.order`)."""
        orders = self._orders
        if orders is None:
            orders = self._orders = {}
        found = orders.get((key, queue))
        if found is None:
            found = orders[key, queue] = Order(key, self.jobs, queue)
            self._marks = None
        return found

    def touch(self, job: Job) -> None:
        """`job` changed (its runnable stages or their nodes, its tasks launched or
        running, its own free executors, its remaining work or critical path), or came or
        left: for the indexes (`shapes`, `shares`, `ranked`, the `order`s) and the driver's
        `changed`."""
        if job.finish is None:
            # (several times an event: each index's `touch` of a job in the system, inlined)
            marks = self._marks
            if marks is None:
                orders = [o.stale for o in self._orders.values()] if self._orders else []
                marks = (self.shapes.stale, self.shares.stale, self.ranked.stale, *orders)
                self._marks = marks
            for stale in marks:
                stale[job] = None
        else:  # (a job that left: each index's own rule, which may forget it at once)
            self.shapes.touch(job)
            self.shares.touch(job)
            self.ranked.left(job)
            if self._orders:
                for order in self._orders.values():
                    order.touch(job)
        if (admission := self.admission or self._alone) is not None:
            admission.touch(job)
        if self.changed is not None:
            self.changed[job] = None

    def decide_once(self, scheduler: Scheduler, now: float) -> tuple[Action, list[Launch]] | None:
        """One question of a decision round: ask `scheduler` once and apply its answer.

        Returns None when nothing can start now (no free executor or no runnable stage),
        else the answer with the launches it made (none for WAIT or an idle slot). An
        illegal answer raises IllegalDecisionError before anything changes, so a driver
        that steps the machine itself (the operator, the Gymnasium env) can answer in
        another way without losing what earlier steps launched.

        With queues the admission answers the question first with its plan
        (`idlegate.sim.admission_plan`): its stops are carried out first (`stopped_first`)
        and the question asked again; its forced decision is applied without the
        policy; else the policy is asked of each of its views in turn until it answers,
        and its answer is applied within the plan (`_within`).
        """
        if now != self.now:
            self.advance(now)
        if not self.can_schedule():
            return None
        admission = self.admission_deciding()
        if admission is not None and admission.plan.reclaim and not self.stopped_first(now):
            return None
        self.order_key = getattr(scheduler, "order_key", None)
        if admission is None:
            return self._answer(scheduler, self, now, None)
        forced = admission.plan.forced
        if forced is not None:
            return forced, self._within(admission, forced, now)
        answer: tuple[Action, list[Launch]] = (WAIT, [])
        for view in admission.views(self, getattr(scheduler, "needs_cluster", False)):
            answer = self._answer(scheduler, view, now, admission)
            if answer[0] is not WAIT:
                break
        return answer

    def _answer(
        self, scheduler: Scheduler, view: ClusterView, now: float, admission: Admission | None
    ) -> tuple[Action, list[Launch]]:
        """Ask `scheduler` once, of `view` (this cluster, or a view of the `admission`'s
        plan), and apply its answer (within the plan): `decide_once`'s body."""
        action = scheduler.decide(view)
        if action is WAIT:
            return action, []
        if not isinstance(action, Decision):
            raise IllegalDecisionError(
                f"scheduler {getattr(scheduler, 'name', scheduler)!r} returned {action!r}; "
                "decide() must return a Decision or WAIT"
            )
        try:
            if admission is None:
                return action, self.apply(action, now)
            return action, self._within(admission, action, now)
        except IllegalDecisionError as exc:
            exc.decision = action  # (which stage a driver's fallback is about)
            raise

    def _within(self, admission: Admission, decision: Decision, now: float) -> list[Launch]:
        """Apply `decision` within the `admission`'s plan: its cap lowered to the tasks the
        plan lets its stage start (`AdmissionPlan.room`); a stage the queues let none start
        is an illegal decision (nothing changes). The admission is told what started."""
        stage = decision.stage
        job, room = stage.job, admission.plan.room(stage)
        if not room and stage in job.runnable and (why := admission.refused(stage)):
            raise IllegalDecisionError(
                f"stage {job.name}/{stage.name} may not start now: {why}; choose one of "
                "view.runnable_stages() or return WAIT"
            )
        if decision.idle_delay == 0 and room and decision.parallelism_cap > job.held + room:
            decision = Decision(stage, job.held + room)
        launches = self.apply(decision, now)
        if launches:
            admission.started(stage, len(launches), now)
        return launches

    def apply(self, decision: Decision, now: float) -> list[Launch]:
        """Carry out one decision; raises IllegalDecisionError, changing nothing, if it is not
        legal now."""
        if now != self.now:
            self.advance(now)
        stage, cap, delay = decision.stage, decision.parallelism_cap, decision.idle_delay
        job = stage.job
        check_decision(self, decision)  # (`check`, without its call: once per launch)
        self.decisions += 1
        job.cap = cap
        if delay > 0:
            stage.delayed = True
            stage.idle_until = now + delay
            job.runnable.remove(stage)
            self.touch(job)
            job.idle_inserted += delay
            self.new_timers.append(stage)
            self._emit("idle", job.id, stage.index, delay)
            return []
        n = min(self.free_executors, cap - job.held, stage.available - stage.launched)
        if stage.need is not None:
            n = min(n, stage.need.room())
        launches = self._start(self._take_executors(job, n), stage)
        stage.launched += n
        job.unlaunched -= n
        if stage.launched == stage.available:
            self._out_of_tasks(stage)
        if job.first_start is None:
            job.first_start = now
        if self._trace is not None:  # (no call on the hot path without a trace)
            self._emit("launch", job.id, stage.index, (n, cap))
        return launches

    # -- bookkeeping -----------------------------------------------------------------

    def check(self, decision: Decision) -> None:
        """Raise IllegalDecisionError unless `decision` is legal now (`apply` runs this too:
        `idlegate.sim.legality`)."""
        check_decision(self, decision)

    def _take_executors(self, job: Job, n: int) -> list[int]:
        # prefer executors already local to the job (no moving delay), then unattached ones
        free = self._free
        taken = []
        for _ in range(n):
            pool = free.get(job)
            if not pool:
                pool = free[None]
                if not pool:  # (the first job's free executors, in the dict's order)
                    for owner, pool in free.items():  # noqa: B007 (read below)
                        if pool:
                            break
                    self.touch(owner)  # type: ignore[arg-type]  # (a job's: None's is empty)
            taken.append(pool.pop())
        self.free_executors -= n
        return taken

    def _claim(self, executor: int | None, job: Job) -> int:
        """Take a specific free executor (or, for None or a taken one, any free one)."""
        if self.free_executors == 0:
            raise IdlegateError(
                f"the pool has {self.num_executors} executors, fewer than the tasks already "
                "running; raise the pool size"
            )
        for owner, pool in self._free.items():
            if executor in pool:
                pool.remove(executor)
                self.free_executors -= 1
                if owner is not None:
                    self.touch(owner)
                return executor
        return self._take_executors(job, 1)[0]

    def _start(self, executors: list[int], stage: Stage) -> list[Launch]:
        """Each of `executors` starts its first task on `stage`."""
        job, now = stage.job, self.now
        exec_job, exec_stage = self._exec_job, self._exec_stage
        busy_since, task_start = self._busy_since, self._task_start
        launches = []
        for executor in executors:
            launches.append(Launch(executor, stage, True, exec_job[executor] is not job))
            exec_job[executor] = job
            exec_stage[executor] = stage
            busy_since[executor] = task_start[executor] = now
        stage.executors += len(executors)
        job.held += len(executors)
        self.touch(job)
        if self._busy is not None:
            self._busy_started(executors, stage)
        if self.admission is not None:
            self.admission.use(stage, len(executors), now)
        if stage.need is not None:
            hold(job, stage.need.amounts, len(executors))
            self._give_back(stage.need, -len(executors), executors)
        return launches

    def _out_of_tasks(self, stage: Stage) -> None:
        stage.job.runnable.remove(stage)
        self.touch(stage.job)
        self.needs_schedule = True

    def _stage_complete(self, stage: Stage, now: float) -> None:
        job = stage.job
        job.stages_left -= 1
        if self._trace is not None:
            self._emit("stage-done", job.id, stage.index, None)
        for c in stage.children:
            child = job.stages[c]
            child.parents_left -= 1
            if child.parents_left == 0 and child.launched < child.available:
                job.runnable.append(child)
                self.touch(job)
        job.remaining_cp = remaining_cp(job)
        if job.stages_left == 0:
            self._job_complete(job, now)

    def _job_complete(self, job: Job, now: float) -> None:
        job.finish = now
        self._done_area += now - job.arrival
        self.jobs.remove(job)
        self.touch(job)
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
        """A job left: its free executors become unattached, its idle timers moot, its
        tasks beyond the pool forgotten (they are stopped)."""
        # (the executors last on the job are its free ones: none runs it now)
        released = self._free.pop(job, [])
        for e in released:
            self._exec_job[e] = None
        self._free[None].extend(released)
        if self.beyond:
            self.beyond = [(s, t) for s, t in self.beyond if s.job is not job]
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

    def fork(self, only: Iterable[Job] | None = None) -> Cluster:
        """An independent copy of the present state, for planners to simulate futures on.

        DAGs and payloads (duration models) are immutable and shared; jobs, stages, the
        executor tables and the counters are copied, so nothing done to the fork changes
        this cluster. The fork keeps no trace and no finished-job records (`done` starts
        empty; `jobs_time_integral` carries on from the same value). With `only`, the
        fork holds just those jobs and every job holding executors (a planner's bounded
        view of a long queue); the free executors of the others count as unattached.
        A fork is of the pool as it is, whatever a view of it shows a policy: its copy of
        the admission holds back what the pool's would (`idlegate.sim.admission_view`).
        """
        # a plain Cluster even from a subclass's (a gated pool's): a fork runs the machine's
        # own rules, as planners and replays expect
        return fork_cluster(self, object.__new__(Cluster), only)

    # -- metrics -----------------------------------------------------------------------

    @property
    def jobs_time_integral(self) -> float:
        """∫ (jobs in system) dt from 0 to now: the RL reward's integrand, summed per job."""
        return self._done_area + sum(self.now - j.arrival for j in self.jobs)

    @property
    def busy_seconds(self) -> float:
        """Executor-seconds spent running tasks (and moving) from 0 to now."""
        now, since = self.now, self._busy_since
        running = (now - since[e] for e, stage in enumerate(self._exec_stage) if stage is not None)
        return self._busy_done + sum(running)

    @property
    def resource_seconds(self) -> dict[str, float]:
        """Unit-seconds of each resource the pool counts beyond pods that running tasks
        held (requested) from 0 to now; empty for a pods-only pool."""
        held = list(self._held)
        for e, stage in enumerate(self._exec_stage):
            if stage is not None and stage.need is not None:
                for i, n in enumerate(stage.need.amounts):
                    held[i] += n * (self.now - self._busy_since[e])
        return {name: h / MILLI for name, h in zip(self.resource_names, held, strict=True)}
