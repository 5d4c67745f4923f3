"""The edge of one pool: its pure core (:class:`idlegate.operator.core.core.Core`) wired to
the operator's clock, the applier, the timers and the features.

:meth:`Bridge.handle` is the one way in: it reads the clock (never going back: one reading
for the core and its writes), hands the event to ``Core.handle``, and carries out what
comes back, in order (:meth:`Bridge.carry`): writes go to the applier (which hands each
write's outcome back here as an event), timers to the loop's timers (a timer's firing is
an event, or an intent, handed back here), and the core's facts to the features (cleanup,
the history sink, the planner's worker), whose answers are carried out in turn. What is
read from the API is handed in by :mod:`idlegate.operator.edge.intake`. Everything runs
in the operator's event loop, one event at a time, synchronously.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from types import MappingProxyType
from typing import Any

from idlegate.api.labels import LABEL_WORKFLOW
from idlegate.api.podsecurity import namespace_policy
from idlegate.api.pool_spec import resource_status
from idlegate.api.queueing import queue_status, queues_summary
from idlegate.api.settings import Settings
from idlegate.api.status import Phase, with_nulls
from idlegate.api.task_pods import Owner, owner_of
from idlegate.operator.core.core import Core, Output
from idlegate.operator.core.decider import Onlooker
from idlegate.operator.core.events import Admit, Event, Observed, PodSeen, ReadAgain, Schedule
from idlegate.operator.core.intents import (
    CancelTimer,
    CancelWrites,
    Intent,
    LiveStatus,
    Outcome,
    PatchStatus,
    Readable,
    SetTimer,
)
from idlegate.operator.core.judging import Judged, JudgeStops, judge_stops, judged
from idlegate.operator.core.lifecycle import DEADLINE_RETRY, UNFINISHED, deadline_key
from idlegate.operator.core.tracking import WorkflowKey
from idlegate.operator.edge.applier import Applier
from idlegate.operator.edge.kube import ApiError, KubeApi, WriteGate
from idlegate.operator.edge.lanes import Lanes
from idlegate.operator.edge.recorder import EventRecorder
from idlegate.operator.edge.timers import Timers
from idlegate.operator.features.cleanup import Cleanup
from idlegate.operator.features.history import HistoryRecorder
from idlegate.operator.features.planning import PlanningWorker, ReplayWorker, planning_worker
from idlegate.operator.forecasting.process import ReplayProcess
from idlegate.operator.forecasting.refresh import ForecastRefresh
from idlegate.operator.forecasting.request import ForecastRequest, scheduler_copy
from idlegate.operator.forecasting.whatif import what_if
from idlegate.operator.kinds.workflow import DagWorkflow
from idlegate.operator.lag.pacing import Coalesced
from idlegate.operator.metrics import Metrics
from idlegate.policy.spec import SchedulerSpec
from idlegate.sim.engine import JobArrival
from idlegate.sim.forecast_arrivals import Arrivals
from idlegate.sim.forecast_calibration import WINDOW
from idlegate.sim.protocol import Scheduler
from idlegate.sim.queues import QueueSpec

log = logging.getLogger(__name__)


class Bridge:
    """A pool's core, its intents carried out by the applier, the timers and the features.
    `spec` is the scheduler spec `scheduler` was built from, which the pool's finished
    workflows name (`Core.spec`; None: an object given as it is, tests and embedding)."""

    def __init__(
        self,
        settings: Settings,
        kube: KubeApi,
        scheduler: Scheduler,
        *,
        metrics: Metrics,
        timers: Timers,
        beside: Bridge | None = None,
        spec: str | None = None,
        gate: WriteGate | None = None,
        outcomes: Callable[[Outcome], None] | None = None,
        reporter: Owner | None = None,
        shadow: Onlooker | None = None,
    ) -> None:
        self.settings, self.metrics = settings, metrics
        canonical = None if spec is None else SchedulerSpec.parse(spec).format()
        self.core = Core(settings, scheduler, metrics=metrics, spec=canonical)
        self.core.reporter, self.core.decider.shadow = reporter, shadow
        self.kube = kube
        """The API (the applier writes; :mod:`idlegate.operator.edge.intake` reads)."""
        self.timers = timers
        self._last = float("-inf")
        self._rounds = Coalesced(self._round_now, settings.round_window)
        self._reads: set[asyncio.Task[None]] = set()
        self.rebuilt = False
        """Every workflow there was at the start is admitted (:func:`intake.rebuild`): ready."""
        if beside is None:  # (its outcomes to `outcomes`: the pools' routing; None: its core)
            lanes = Lanes(self.kube, concurrency=settings.api_concurrency, gate=gate)
            self.applier = Applier(
                lanes,
                EventRecorder(lanes, settings),
                metrics,
                outcomes or self.handle,
                status_interval=settings.status_interval,
                now=self.now,
            )
            self.history = HistoryRecorder(settings, metrics, self.carry)
            self.cleanup = Cleanup(settings)
        else:  # another pool's: one applier, history sink and cleanup for all
            self.applier, self.cleanup = beside.applier, beside.cleanup
            self.history = HistoryRecorder(settings, metrics, self.carry, beside.history)
        self.pool_status: Readable | None = None
        """Its ExecutorPool's status (`Pools`), written whenever its counts change: at the
        end of a change, not only at the 5 s refresh."""
        self._counts: tuple[int, ...] = ()
        self.planning: PlanningWorker | ReplayWorker | None = None
        """A lookahead planner's or a portfolio's worker, if the policy has one."""
        self.replay_process: ReplayProcess = (
            ReplayProcess() if beside is None else beside.replay_process
        )
        """The operator's replay process, one for all pools, for their forecasts and their
        portfolios' rounds (started by the first call; `Settings.forecast_workers`); the
        operator closes it."""
        self.use_worker()
        self.forecasts = forecasts(self) if settings.forecast_interval > 0 else None
        """The pool's forecasts (`operator.forecasting.refresh`), refreshed off the decisions."""

    @property
    def reporter(self) -> Owner | None:
        """The object its pool's own Events go on (its ExecutorPool; the default pool's:
        the operator's Pod)."""
        return self.core.reporter

    def forecast_arrivals(self, arrivals: Arrivals) -> None:
        """From the next refresh its forecasts invent `arrivals` (spec.forecastArrivals)."""
        self.settings = self.settings.model_copy(update={"forecast_arrivals": arrivals})
        if self.forecasts is not None:
            self.forecasts.arrivals = arrivals

    def use_worker(self) -> None:
        """The worker of the policy deciding now (a reload closes the old one first)."""
        process = self.replay_process if self.settings.forecast_workers == "process" else None
        self.planning = planning_worker(self.core, self.carry, self.history, process)

    def use_policy(self, policy: Scheduler) -> None:
        """Event loop, between two rounds: decide with `policy` from now on. The Decider
        resets it, a lookahead planner's worker is replaced by the new planner's (the plan
        running is dropped), and the metrics name it; then a round runs at once, for what
        the old policy held back."""
        old = self.core.scheduler
        if self.planning is not None:
            self.planning.close()
        self.core.decider.use(policy)
        self.use_worker()
        if old.name != policy.name:
            self.metrics.info.labels(old.name).set(0)
        self.metrics.info.labels(policy.name).set(1)
        self.metrics.policy_errors.labels(policy.name)
        self.handle(Schedule(force=True))

    def close_workers(self) -> None:
        """Stop the planner's or portfolio's worker and the forecasts (their work is dropped)."""
        if self.planning is not None:
            self.planning.close()
        if self.forecasts is not None:
            self.forecasts.close()

    @property
    def lanes(self) -> Lanes:
        return self.applier.lanes

    # -- what the rest of the operator reads of the pool: only the bridge reaches its core --

    @property
    def workflows(self) -> Mapping[WorkflowKey, DagWorkflow]:
        return MappingProxyType(self.core.workflows)

    def held(self, kind: str) -> Mapping[WorkflowKey, Any]:
        """The pool's workflows whose owner is of `kind` (`Core.held`)."""
        return MappingProxyType(self.core.held.get(kind, {}))

    def known(self, owner: Owner) -> bool:
        return self.core.known(owner)

    def every(self) -> list[Any]:
        """The pool's workflows of every kind (a fresh list)."""
        return [wf for held in self.core.held.values() for wf in held.values()]

    @property
    def queues(self) -> tuple[QueueSpec, ...]:
        """The pool's queues (none: one queue, no quotas)."""
        return self.core.queues

    def ended(self, uid: str) -> bool:
        """The workflow of `uid` ended in the pool: it is never admitted again."""
        return uid in self.core.ended

    @property
    def scheduler(self) -> Scheduler:
        return self.core.scheduler

    @property
    def spec(self) -> str | None:
        return self.core.spec

    @property
    def busy(self) -> int:
        return self.core.busy

    def pause(self, paused: bool) -> None:
        """While workflows move into the pool, no round runs (`Core.paused`)."""
        self.core.paused = paused

    def foresee(self, arrivals: Sequence[JobArrival]) -> None:
        self.core.decider.foresee(arrivals)

    def learn_from(self, old: Bridge) -> None:
        """Go on from what the pool's `old` bridge learned (a portfolio's window)."""
        self.core.decider.learn(old.core.decider.window())

    @property
    def no_room(self) -> str | None:
        """Why the pool on nodes can release nothing now (`Core.no_room`), if so."""
        return self.core.no_room

    @property
    def counted(self) -> tuple[str, ...]:
        """The resources its pool counts beyond pods (a pool on nodes: told their room)."""
        return self.core.cluster.resource_names

    def what_if(
        self, body: Mapping[str, Any], queue: int, priority: int
    ) -> tuple[ForecastRequest, int]:
        """The replays' request of a fork of the pool now with the DagWorkflow `body`
        submitted to `queue` at `priority`, under a copy of its scheduler
        (`forecasting.whatif.what_if`), and the id of its job there."""
        core = self.core
        policy = scheduler_copy(core.scheduler, core.spec, core.decider.learns)
        return what_if(core.cluster, policy, body, queue, priority, self.now())

    def status(self) -> dict[str, Any]:
        """The pool's part of its ExecutorPool's status: its size, busy executors, pending
        workflows, policy, and what it follows (a portfolio's choice, with its figures)."""
        core = self.core
        learns = core.decider.learns
        admission = core.cluster.admission
        queues = queue_status(admission, core.cluster.jobs, core.at) if admission else None
        # (a merge patch: what the pool no longer has, queues or resources beyond pods, is
        # written as null, else the API server keeps the last of it)
        dropped = ("queues", "queuesSummary", "capacity", "used", "usage")
        return with_nulls(
            {
                **({"queues": queues, "queuesSummary": queues_summary(queues)} if queues else {}),
                "size": core.settings.pool_size,
                "busy": core.busy,
                "pending": sum(wf.phase is not Phase.SUCCEEDED for wf in core.workflows.values()),
                "policy": core.scheduler.name,
                "following": learns.choice.text if learns is not None else core.decider.following,
                "replayed": learns.choice.replayed if learns is not None else None,
                **resource_status(core.cluster.capacity, core.cluster.used_resources),
            },
            dropped,
        )

    async def list_objects(
        self, api_version: str, plural: str, namespace: str | None
    ) -> list[dict[str, Any]]:
        return await self.kube.list_objects(api_version, plural, namespace)

    def now(self) -> float:
        """The operator's clock, never going back (the state machine refuses to): one
        reading shared by the core and its writes."""
        self._last = max(self._last, self.settings.clock.now())
        return self._last

    def round_soon(self) -> None:
        """One round for the workflows admitted meanwhile (`Core.round_due`): at the loop
        turn's end, and `round_window` after the last one at the earliest."""
        self.core.round_due = True
        self._rounds.ask()

    def _round_now(self) -> None:
        self.core.round_due = False
        self.handle(Schedule(force=False))

    def handle(self, event: Event | Outcome) -> None:
        """Hand the core `event`, now, and carry out its answer. A pod's event in a burst
        (a round due, or one less than `round_window` ago) joins the next round, not one
        of its own (`Core.joins`); one that runs a round at once starts a burst."""
        core, pod = self.core, isinstance(event, PodSeen | Observed)
        core.joins, rounds = pod and self._rounds.busy(), core.rounds
        try:
            outputs = core.handle(event, self.now())
        finally:  # (an admission that raised GangTooWideError: what it said before)
            outputs_left = core.intents.take()
        if core.round_due:
            self._rounds.ask()
        elif pod and core.rounds != rounds:
            self._rounds.ran()
        self.carry([*outputs_left, *outputs] if outputs_left else outputs)
        if self.forecasts is not None:
            self.forecasts.changed()
        if self.pool_status is not None and core.reporter is not None:
            counts = (core.busy, len(core.cluster.jobs), len(core.workflows))
            if counts != self._counts:  # (batched by the status lane: `status_interval`)
                self._counts = counts
                self.applier.apply([PatchStatus(core.reporter, self.pool_status, urgent=False)])

    def carry(self, outputs: Iterable[Output | Event]) -> None:
        """Carry out, in order, what the core or a feature said: writes, timers, the
        core's facts (to the features, whose answers follow them) and events (to the core)."""
        queue = deque(outputs)
        while queue:
            item = queue.popleft()
            match item:
                case SetTimer(key, at, fire):
                    self.timers.arm(key, at, self._firing(fire))
                case CancelTimer(key):
                    self.timers.cancel(key)
                case CancelWrites(owner):
                    self.applier.cancel(owner)
                case ReadAgain():
                    self._read(item)
                case JudgeStops():
                    self._judge(item)
                case _ if isinstance(item, Intent):
                    self.applier.apply((item,))
                case _ if isinstance(item, Outcome | Event):
                    self.handle(item)
                case _:
                    for feature in self.features:
                        if isinstance(item, feature.takes):
                            queue.extendleft(reversed(feature.react(item)))

    @property
    def features(self) -> list[Any]:
        """What answers the core's facts (each those of its `takes`): pod GC and TTLs, the
        history sink, the planner's or portfolio's worker."""
        found: list[Any] = [self.cleanup, self.history]
        return found if self.planning is None else [*found, self.planning]

    def later(self, key: str, at: float, fire: Callable[[], Awaitable[None]]) -> None:
        """Call `fire` at `at` (the operator clock's seconds); a later one of `key` replaces it."""
        self.timers.arm(key, at, fire)

    async def pods(self, namespace: str | None, selector: str) -> list[dict[str, Any]] | None:
        """The pods of `namespace` that `selector` matches; None (logged) if the API cannot
        list them now."""
        try:
            return await self.kube.list_pods(namespace, selector)
        except ApiError as exc:
            log.info("Cannot list the pods %s in %s now (%s).", selector, namespace, exc)
            return None

    def _firing(self, fire: Event | Intent) -> Any:
        async def fired() -> None:
            self.carry([fire])

        return fired

    def _judge(self, ask: JudgeStops) -> None:
        """A ``Forecast`` queue's stops to the replay process (`operator.core.judging`); its
        verdict, or why none came, handed back as `Judged` (a judge that fails: the rules')."""
        try:
            loop = asyncio.get_running_loop()
            asking = self.replay_process.call(judge_stops, ask.question)
            done = asyncio.wrap_future(asking, loop=loop)
        except Exception as exc:  # (no loop, the process closed): the rules decide at once
            self.handle(Judged(ask.token, error=f"{type(exc).__name__}: {exc}"))
            return
        done.add_done_callback(lambda d: self.handle(judged(ask.token, d)))

    def _read(self, again: ReadAgain) -> None:
        """Read a suspended workflow whose deadline passed, and admit it to fail it."""
        task = asyncio.get_running_loop().create_task(self._read_again(again))
        self._reads.add(task)
        task.add_done_callback(self._reads.discard)

    async def _read_again(self, again: ReadAgain) -> None:
        owner = again.owner
        try:
            found = await read_workflow(self.kube, owner)
        except ApiError as exc:
            where = f"{owner.namespace}/{owner.name}"
            log.info("Cannot read %s for its deadline (%s); retrying.", where, exc)
            retry = SetTimer(deadline_key(owner.uid), self.now() + DEADLINE_RETRY, again.retry)
            self.carry([retry])
            return
        if found is None:
            return
        body, pods, namespace = found
        phase = (body.get("status") or {}).get("phase")
        if phase not in UNFINISHED or self.core.known(owner):
            return
        policy = namespace_policy(namespace, self.settings.pod_security)
        self.handle(Admit(body, pods, policy, schedule=False, fail=again.fail))


def forecasts(bridge: Bridge) -> ForecastRefresh:
    """The pool's forecast refresh: its DagWorkflows' statuses written (batched) when
    their forecast moved; the visibility API reads the forecasts of every kind."""
    core = bridge.core

    def scheduler() -> tuple[Scheduler, str | None, Any]:
        return core.scheduler, core.spec, core.decider.learns

    def write(moved: list[Any]) -> None:
        bridge.carry([PatchStatus(wf.owner, LiveStatus(wf), urgent=False) for wf in moved])

    refresh = ForecastRefresh(
        core.cluster,
        scheduler,
        now=bridge.now,
        later=bridge.later,
        write=write,
        metrics=bridge.metrics,
        interval=bridge.settings.forecast_interval,
        arrivals=bridge.settings.forecast_arrivals,
        key=f"forecast:{bridge.metrics.pool}",
        process=bridge.replay_process if bridge.settings.forecast_workers == "process" else None,
        times=core.times,
    )
    sink = bridge.history.sink
    if sink is not None:  # (a restart resumes the pool's calibration: its resolved forecasts)
        refresh.resume_from(sink.recent(bridge.history.pool, WINDOW))
    return refresh


async def read_workflow(
    kube: KubeApi, owner: Owner
) -> tuple[dict[str, Any], list[dict[str, Any]], dict[str, Any] | None] | None:
    """The workflow `owner` (that very object), its pods and its namespace as the API has
    them now; None if it is gone."""
    body = await kube.get_workflow(owner.namespace, owner.name)
    if body is None or owner_of(body).uid != owner.uid:
        return None
    pods = await kube.list_pods(owner.namespace, f"{LABEL_WORKFLOW}={owner.name}")
    return body, pods, await kube.get_namespace(owner.namespace)
