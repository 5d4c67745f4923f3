"""The simulator: drives the cluster state machine with a virtual clock and a heap of events.

Pure (no wall clock, no I/O): a run is a function of (workload, scheduler, seed, options).
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable, Iterator, Sequence
from itertools import count
from math import inf
from typing import Any, NamedTuple

import numpy as np

from idlegate.errors import IdlegateError
from idlegate.sim.admission import Admission
from idlegate.sim.admission_baselines import Admitted
from idlegate.sim.cluster import Cluster
from idlegate.sim.durations import Uniforms
from idlegate.sim.gate import gated
from idlegate.sim.protocol import (
    WAIT,
    Action,
    ClusterView,
    Launch,
    PodsGate,
    Scheduler,
    Stage,
)
from idlegate.sim.queues import queue_of
from idlegate.sim.reclaim_plan import JudgeMaker
from idlegate.sim.reclaim_stop import checkpointed
from idlegate.sim.reclaim_verdict import counts
from idlegate.sim.runs import Fidelity as Fidelity
from idlegate.sim.runs import JobArrival as JobArrival
from idlegate.sim.runs import SimResult as SimResult
from idlegate.sim.runs import TaskRun as TaskRun
from idlegate.sim.runs import Workload as Workload

_ARRIVE, _TASK, _IDLE, _BOUND = 0, 1, 2, 3


class Engine:
    """The heap of events that drives a Cluster, stepped as SimPy steps its Environment.

    Events are task ends, job arrivals, idle-slot ends and, on a pool with queues, a
    waiting task's bound passing (`idlegate.sim.admission`). `peek` is the time of the next
    one; `step` applies every event of that time and then, if the cluster needs
    scheduling, holds a *decision point* (a round of `Cluster.decide_once` questions);
    `run(until)` steps to `until`. With a scheduler the engine asks it through the whole
    round itself. Without one (``scheduler=None``) `step` and `run` stop at the decision
    point, `deciding` is True, and the driver answers with `decide` one action at a time
    until the round closes (on WAIT, or when no free executor or runnable stage remains).
    Either way the round's launches start together when it closes, and its idle slots'
    timers are armed then, so a driver deciding for itself gets exactly the run a
    scheduler making the same choices gets.

    A launched task runs for a draw from its job's duration model (the payload) when
    `waves` is on and the job has one, else for its estimate; an executor new to the job
    first pays the cluster's `moving_delay`, counted in `overhead` up to `max_time`.
    `simulate` runs an engine from an empty cluster (`for_workload`); planners resume one
    from a forked cluster (`sim.rollout`).

    A task stopped (`stop`, or a round's plan: `Cluster.stop`) loses its end event; it
    runs again when a decision launches it, for a new draw, or, if its stage is
    checkpointed, for what it had left (`resume`), its moving delay paid again if moved.
    """

    def __init__(
        self,
        cluster: Cluster,
        scheduler: Scheduler | None,
        u: Uniforms,
        *,
        waves: bool = True,
        max_time: float = inf,
        task_log: list[TaskRun] | None = None,
    ) -> None:
        self.cluster = cluster
        self.scheduler = scheduler
        self.u = u
        self.waves = waves
        self.max_time = max_time
        self.task_log = task_log
        self.trace: list[tuple[float, str, int, int, Any]] | None = None
        """The cluster's trace events, when the run records them (`for_workload`)."""
        self.heap: list[tuple[float, int, int, Any]] = []
        self._seq = count()
        self._round: list[Launch] | None = None
        """The open decision point's launches so far; None between decision points."""
        self._bounds: set[float] = set()
        """Times of the wait-bound events pushed (one event a time)."""
        self.events = 0
        """Events applied so far."""
        self.overhead = 0.0
        """Executor-seconds of moving delay before `max_time`."""
        self.resume: dict[Stage, list[float]] = {}
        """Per checkpointed stage, what its stopped tasks had left to run: its next launches
        run for these first."""

    @classmethod
    def for_workload(
        cls,
        workload: Workload,
        scheduler: Scheduler | None,
        seed: int,
        *,
        num_executors: int | None = None,
        fidelity: Fidelity | None = None,
        max_time: float = inf,
        trace: bool = False,
        record_tasks: bool = False,
        judge: JudgeMaker | None = None,
    ) -> Engine:
        """An engine at time 0 with the workload's arrivals queued (`simulate`'s arguments).

        The run owns one Generator seeded with `seed`: task durations and the scheduler's
        own random choices come from it. The scheduler's stream is drawn first even
        without a scheduler, so a driver deciding itself sees the same task durations.
        `judge` makes the judge of the ``decide: Forecast`` queues' stops (`idlegate.sim.
        reclaim_forecast.forecast_judge`, which replays with engines, so it is given from
        above); None: the rules decide them.
        """
        fid = fidelity or workload.fidelity
        rng = np.random.default_rng(seed)
        scheduler_seed = rng.integers(2**63)
        mode, victims, calm = "queues", "least", None
        if isinstance(scheduler, Admitted):
            mode, victims, calm = scheduler.mode, scheduler.victims, scheduler.calm
            scheduler = scheduler.scheduler
        gate = scheduler if isinstance(scheduler, PodsGate) else None
        if gate is not None:  # (the engine asks the scheduler behind the gate itself)
            scheduler = gate.scheduler
        if scheduler is not None:
            scheduler.reset(np.random.default_rng(scheduler_seed))
            # a planner with futures=oracle is told the run's arrivals (policy.futures)
            if callable(foresee := getattr(scheduler, "foresee", None)):
                foresee(workload.jobs)
        events: list[tuple[float, str, int, int, Any]] | None = [] if trace else None
        sink = None if events is None else lambda *e: events.append(e)
        if gate is None:
            cluster = Cluster(
                num_executors or workload.num_executors,
                trace=sink,
                moving_delay=fid.moving_delay,
                resources=workload.resources,
                nodes=workload.nodes,
            )
        else:
            pods = num_executors or workload.num_executors
            cluster = gated(workload, gate, sink, fid.moving_delay, pods)
        engine = cls(
            cluster,
            scheduler,
            Uniforms(rng),
            waves=fid.wave_durations,
            max_time=max_time,
            task_log=[] if record_tasks else None,
        )
        engine.trace = events
        if workload.queues and mode != "none":
            names = cluster.resource_names
            cluster.admission = Admission(
                workload.queues, cluster.capacity, names, mode, victims=victims, calm=calm
            )
            reclaimer = cluster.admission.reclaimer
            if judge and scheduler is not None and reclaimer is not None and reclaimer.forecasts:
                reclaimer.judge = judge(scheduler, seed, fid.wave_durations, reclaimer.ledger.calm)
            for j in workload.jobs:  # (a queue named that does not exist: refused now)
                queue_of(workload.queues, j.namespace, j.queue, j.labels)
        engine.push_arrivals(workload.jobs)
        return engine

    # -- events ------------------------------------------------------------------------

    def push(self, time: float, kind: int, obj: Any) -> None:
        heapq.heappush(self.heap, (time, next(self._seq), kind, obj))

    def push_arrivals(self, arrivals: Iterable[JobArrival]) -> None:
        for a in arrivals:
            self.push(float(a.time), _ARRIVE, a)

    def push_task_end(self, time: float, executor: int) -> None:
        self.push(time, _TASK, executor)

    def push_idle_end(self, stage: Stage) -> None:
        if stage.idle_until is not None:  # (a stage with a timer: in an idle slot)
            self.push(stage.idle_until, _IDLE, stage)

    def start(self, launches: Iterable[Launch], now: float) -> None:
        """Run the launched tasks (a decision round's, or a planner's first action's).

        A task runs for a draw from its job's duration model when `waves` is on and the
        job has one, else for its estimate; `_advance` applies the same rule inline.
        """
        moving, limit = self.cluster.moving_delay, self.max_time - now
        heap, seq, u, log, waves = self.heap, self._seq, self.u, self.task_log, self.waves
        resume = self.resume
        for executor, stage, first, moved in launches:
            job = stage.job
            model = job.payload
            if resume and stage in resume:
                d = self._resumed(stage)
            elif waves and model is not None:
                d = model.sample(stage.index, job.held, first, moved, u)
            else:
                d = stage.duration
            if moved and moving:  # (no delay: nothing to add, the common case)
                d += moving
                # the delay comes first in the busy interval; a run cut at max_time counts
                # only the part before it, as busy_seconds does
                self.overhead += min(moving, max(0.0, limit))
            heapq.heappush(heap, (now + d, next(seq), _TASK, executor))
            if log is not None:
                log.append(TaskRun(executor, job.id, stage.index, now, now + d))

    # -- stepping ----------------------------------------------------------------------

    @property
    def now(self) -> float:
        return self.cluster.now

    @property
    def deciding(self) -> bool:
        """True at an open decision point: the driver must `decide` before the next `step`."""
        return self._round is not None

    def peek(self) -> float:
        """The time of the next event, or inf when none is left."""
        return self.heap[0][0] if self.heap else inf

    def step(self) -> None:
        """Apply every event of the next event time, then hold a decision point if needed."""
        if self._round is not None:
            raise IdlegateError(
                f"the engine waits for a decision at t={self.now:g}; call decide() until "
                "`deciding` is False before stepping on"
            )
        if not self.heap:
            raise IdlegateError("no event is left to step to; check peek() < inf first")
        self._advance(inf, once=True)

    def _advance(self, until: float, *, once: bool) -> None:
        # long: the simulator's hot loop (one pass per event); the bookkeeping a helper
        # call per event would hide (push, _duration, step) is written out with locals,
        # which keeps an episode about 25 % faster (benchmarks/sim_regression.py). A task
        # whose executor goes on with its stage replaces its own event on the heap (one
        # sift instead of a pop and a push); events have distinct (time, seq) keys, so
        # they come off the heap in the same order either way.
        """Apply events time by time up to `until`, holding decision points as they come;
        stop after one event time (`once`), at an open decision point, or when no event
        is left (the clock then stays at the last event) or the next is after `until`
        (the clock moves to `until`)."""
        heap, cluster, seq, u, log = self.heap, self.cluster, self._seq, self.u, self.task_log
        pop, replace, task_finished = heapq.heappop, heapq.heapreplace, cluster.task_finished
        waves, resume = self.waves, self.resume
        applied = 0
        try:
            while heap:
                top = heap[0]
                now = top[0]
                if now > until:
                    cluster.advance(until)
                    return
                while True:
                    _, _, kind, obj = top
                    applied += 1
                    if kind == _TASK:
                        stage = task_finished(obj, now)
                        if stage is None:
                            pop(heap)
                        else:
                            # the executor's next task on the same stage: `start`'s rule
                            job = stage.job
                            model = job.payload
                            if resume and stage in resume:
                                d = self._resumed(stage)
                            elif waves and model is not None:
                                d = model.sample(stage.index, job.held, False, False, u)
                            else:
                                d = stage.duration
                            replace(heap, (now + d, next(seq), _TASK, obj))
                            if log is not None:
                                log.append(TaskRun(obj, job.id, stage.index, now, now + d))
                    else:
                        pop(heap)
                        if kind == _ARRIVE:
                            job = cluster.add_job(obj.dag, now, obj.name, obj.durations)
                            if cluster.admission is not None:
                                queues = cluster.admission.queues
                                job.queue = queue_of(queues, obj.namespace, obj.queue, obj.labels)
                                job.priority = obj.priority
                        elif kind == _IDLE:
                            cluster.idle_expired(obj, now)
                        else:  # (a wait bound passed: a round even if nothing else moved)
                            cluster.advance(now)
                            cluster.needs_schedule = True
                    if not heap:
                        break
                    top = heap[0]
                    if top[0] != now:
                        break
                if cluster.needs_schedule:
                    self.schedule()
                    if self._round is not None:
                        return
                if once:
                    return
        finally:
            self.events += applied

    def schedule(self) -> None:
        """Open a decision point now; with a scheduler, ask it until the point closes."""
        due = self.cluster.round_due
        self.cluster.needs_schedule = False
        self._round = []
        scheduler = self.scheduler
        if not due:  # (a gate's pod ended: no question, only pods to place)
            self._close()
        elif scheduler is not None:
            # `decision_round` without fallbacks, written out: a generator and an
            # Answered per question cost a replay round 5-9 % of its CPU
            launched, cluster = self._round, self.cluster
            now, decide_once = cluster.now, cluster.decide_once
            while True:
                step = decide_once(scheduler, now)
                if step is None:
                    break
                launched.extend(step[1])
                if step[0] is WAIT:
                    break
            self._close()
        elif not self.cluster.can_schedule():
            self._close()

    def decide(self, action: Action) -> None:
        """The driver's answer at the open decision point (`Cluster.decide_once`).

        An illegal action raises IllegalDecisionError and leaves the point open and
        unchanged, so the driver may answer again.
        """
        launched = self._round
        if launched is None:
            raise IdlegateError("no decision is pending; step() or run() to the next one")
        step = self.cluster.decide_once(_Given(action), self.now)
        if step is not None:
            launched.extend(step[1])
        if step is None or step[0] is WAIT or not self.cluster.can_schedule():
            self._close()

    def _close(self) -> None:
        """End the decision point: start its launches, arm its idle slots' timers."""
        cluster = self.cluster
        now = cluster.now
        launches = cluster.close_round(self._round or [], now)
        self._round = None
        if cluster.stopped:  # (a plan's stops: their ends go before its launches start)
            self._drop_stopped(now)
        if launches:
            self.start(launches, now)
        timers = cluster.new_timers
        if timers:
            for stage in timers:
                self.push_idle_end(stage)
            timers.clear()
        admission = cluster.admission
        if admission is not None:
            due = admission.next_bound()
            if due < inf and due not in self._bounds:
                self._bounds.add(due)
                self.push(due, _BOUND, None)

    def stop(self, executors: Iterable[int], started: Sequence[float] | None = None) -> None:
        """Stop the tasks `executors` run, now (`Cluster.stop`: `started`, each one's start
        as the caller saw it), and hold the decision point their freed executors make, as
        after any event (without a scheduler it is left open for the driver)."""
        if self._round is not None:
            raise IdlegateError("a decision point is open; stop tasks before or after it")
        self.cluster.stop(executors, self.now, started)
        self._drop_stopped(self.now)
        if self.cluster.needs_schedule:
            self.schedule()

    def _drop_stopped(self, now: float) -> None:
        """The stopped tasks' end events go (the heap changed in place: the stepping loop
        holds it); a checkpointed stage keeps what each had left (`resume`)."""
        cluster, heap, log = self.cluster, self.heap, self.task_log
        gone = {s.executor: s for s in cluster.stopped}
        cluster.stopped = ()
        kept = []
        for entry in heap:
            stopped = gone.pop(entry[3], None) if entry[2] == _TASK else None
            if stopped is None:
                kept.append(entry)
                continue
            end = entry[0]
            if checkpointed(stopped.stage):
                self.resume.setdefault(stopped.stage, []).append(end - now)
            if log is not None:  # (its run ends now)
                i = next(i for i in range(len(log) - 1, -1, -1) if log[i][0] == entry[3])
                log[i] = log[i]._replace(end=now)
        heap[:] = kept
        heapq.heapify(heap)

    def _resumed(self, stage: Stage) -> float:
        """A checkpointed stage's next task: what a stopped one of it had left."""
        left = self.resume[stage]
        seconds = left.pop()
        if not left:
            del self.resume[stage]
        return seconds

    def run(self, until: float = inf) -> float:
        """Step until the next event is after `until` (the clock then moves to `until`), no
        event is left, or, without a scheduler, a decision point opens; returns the time."""
        if self._round is None:
            self._advance(until, once=False)
        return self.now

    def result(self, workload: str, scheduler: str, seed: int) -> SimResult:
        """The run so far as a SimResult (`simulate` reports it at the end)."""
        cluster = self.cluster
        result = SimResult(
            workload=workload,
            scheduler=scheduler,
            seed=seed,
            num_executors=cluster.num_executors,
            records=sorted(cluster.done, key=lambda r: r.id),
            unfinished=len(cluster.jobs),
            end_time=cluster.now,
            busy_seconds=cluster.busy_seconds,
            jobs_time_integral=cluster.jobs_time_integral,
            events=self.events,
            decisions=cluster.decisions,
            trace=self.trace,
            tasks=self.task_log,
            overhead_seconds=self.overhead,
            preempted=cluster.preempted,
            preempted_seconds=cluster.preempted_seconds,
            capacity=cluster.capacity if cluster.resource_names else None,
            resource_seconds=cluster.resource_seconds if cluster.resource_names else None,
            queues=None if cluster.admission is None else cluster.admission.settle(cluster.now),
            verdicts=_verdicts(cluster),
        )
        return cluster.report(result)


def _verdicts(cluster: Cluster) -> dict[str, int] | None:
    """The forecast judge's verdicts by case, where it gave any (`SimResult.verdicts`)."""
    reclaimer = None if cluster.admission is None else cluster.admission.reclaimer
    return counts(reclaimer.verdicts) if reclaimer is not None and reclaimer.verdicts else None


class Answered(NamedTuple):
    """One question of a decision round, answered and applied."""

    action: Action
    launches: list[Launch]
    rule: Scheduler | None
    """Who answered: the scheduler, else the first fallback rule that could; None when
    every rule failed (the answer is then WAIT)."""
    errors: tuple[tuple[Scheduler, Exception], ...] = ()
    """The rules that failed this question before `rule` answered, the scheduler first,
    each with what it raised (an illegal answer's IllegalDecisionError carries it as
    ``decision``)."""


def decision_round(
    cluster: Cluster, scheduler: Scheduler, now: float, fallbacks: Sequence[Scheduler] = ()
) -> Iterator[Answered]:
    """The questions of one decision round at `now`, each answer applied at once.

    `scheduler` is asked (`Cluster.decide_once`) until it answers WAIT or nothing more can
    start. Without `fallbacks` whatever it raises propagates (a simulation: a broken policy
    is the run's error). With them, the operator's case, a question it fails (it raises, or
    answers illegally: nothing of that answer is applied, the round's earlier launches
    stand) is answered by the first fallback rule that does; when every rule fails the
    answer is WAIT and the round ends. The operator decides through it, and the Engine
    asks the same questions (`Engine.schedule`: the case without fallbacks, written out).
    """
    rules = (scheduler, *fallbacks)
    while True:
        errors: list[tuple[Scheduler, Exception]] = []
        for rule in rules:
            try:
                step = cluster.decide_once(rule, now)
            except Exception as exc:
                if not fallbacks:
                    raise
                errors.append((rule, exc))
                continue
            break
        else:
            yield Answered(WAIT, [], None, tuple(errors))
            return
        if step is None:
            if errors:  # (a rule that changed the state before it failed)
                yield Answered(WAIT, [], rule, tuple(errors))
            return
        yield Answered(step[0], step[1], rule, tuple(errors))
        if step[0] is WAIT:
            return


class _Given:
    """The Scheduler that `Engine.decide` hands `Cluster.decide_once`: the driver's answer."""

    name = "the driver"

    def __init__(self, action: Action) -> None:
        self.action = action

    def reset(self, rng: Any) -> None:
        """Never called: the driver's randomness is its own."""

    def decide(self, view: ClusterView) -> Action:
        return self.action


def simulate(
    workload: Workload,
    scheduler: Scheduler,
    seed: int = 0,
    *,
    num_executors: int | None = None,
    fidelity: Fidelity | None = None,
    max_time: float = inf,
    trace: bool = False,
    record_tasks: bool = False,
    progress: Callable[[int, int], None] | None = None,
    judge: JudgeMaker | None = None,
) -> SimResult:
    """Run `scheduler` on `workload` until every job finishes (or `max_time`).

    One `Engine.for_workload` run: the same inputs give the same trace. `progress(arrived,
    total)` is told at each arrival time (the run stops there, as at any event: the same
    run), for a command's progress line. `judge`: `Engine.for_workload`'s.
    """
    engine = Engine.for_workload(
        workload,
        scheduler,
        seed,
        num_executors=num_executors,
        fidelity=fidelity,
        max_time=max_time,
        trace=trace,
        record_tasks=record_tasks,
        judge=judge,
    )
    if progress is not None:
        times = sorted(a.time for a in workload.jobs)
        for arrived, t in enumerate(times, start=1):
            if t >= max_time:
                break
            if arrived == len(times) or times[arrived] != t:  # (the last of one instant)
                engine.run(t)
                progress(arrived, len(times))
    engine.run(max_time)
    return engine.result(workload.name, getattr(scheduler, "name", type(scheduler).__name__), seed)
