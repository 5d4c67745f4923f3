"""The lookahead planner's worker: plans run in a thread, decisions never wait on them.
A portfolio's rounds run the same way (:class:`ReplayWorker`, at the end).

A switch-mode lookahead planner (``--scheduler lookahead:BASE``,
:mod:`idlegate.policy.lookahead`) is a fast follower and a slow plan. In the operator
its decisions are always the followed policy's, at that policy's speed (an ONNX policy's
or a heuristic's); a :class:`PlanningWorker` makes the plans beside them:

* after every scheduling round of the bridge (:meth:`PlanningWorker.poke`, in kopf's
  event loop, the thread that owns the cluster): when the planner needs a plan (the set
  of workflows changed) and none is running, it takes the planner's request there (a
  fork of the cluster and sampled futures: cheap) and hands the plan to its one worker
  thread (``loop.run_in_executor``) with the budget ``--plan-budget-ms``;
* when the plan is done, back in the event loop: the planner adopts it. If the followed
  policy changed, the switch is counted, logged and the bridge schedules at once (the
  new policy may start what the old one held back). A plan for a set of workflows that
  has changed since is dropped (`idlegate_plans_dropped_total`) and the next one starts
  at once;
* a plan that raises is counted in ``idlegate_policy_errors_total{policy}`` and logged
  with its traceback once per distinct error (:meth:`Decider.note_error`); the planner
  keeps following its policy, and plans again when the set of workflows changes.

A planner given in ``inline`` mode (the simulator's) plans in the worker here all the
same, so decisions never wait on a plan: its ``planning_delay`` models this worker and
has no effect here. A ``decision``-mode planner plans every decision itself and gets no
worker.

Where the switches show (:func:`policy_switched`): a workflow's ``status.policy`` and each
stage's ``policy`` name the rule that released its tasks last. A workflow whose tasks
are released by another followed policy than before gets a ``PolicySwitched`` Event
(which one, since when and why: `messages.following`), at that release only: an Event
of every switch on every workflow would cost a thousand API writes for a thousand
queued workflows, and tell most of them nothing.

Stopping (:meth:`PlanningWorker.close`) drops the plan that is running: its thread
finishes it and ends (a plan starts no future after its budget, so within about one
future's time of it); nothing of it is adopted.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, Protocol, TypeGuard

from idlegate.operator.core import messages
from idlegate.operator.core.messages import Notice
from idlegate.sim.cluster import Cluster
from idlegate.sim.protocol import Scheduler

if TYPE_CHECKING:
    from idlegate.operator.decisions import Decider
    from idlegate.operator.edge.metrics import Metrics
    from idlegate.operator.features.history import HistoryRecorder
    from idlegate.operator.settings import Settings
    from idlegate.policy.lookahead import LookaheadScheduler, Plan
    from idlegate.policy.portfolio import Choice, PortfolioScheduler
    from idlegate.sim.engine import JobArrival

log = logging.getLogger(__name__)


def is_planner(policy: Scheduler) -> TypeGuard[LookaheadScheduler]:
    """Whether `policy` is a switch-mode lookahead planner (it makes plans of policies)."""
    from idlegate.policy.lookahead import LookaheadScheduler

    return isinstance(policy, LookaheadScheduler) and policy.config.mode == "switch"


def worker_planner(policy: Scheduler) -> LookaheadScheduler | None:
    """`policy` as a planner that plans in a worker (a switch-mode lookahead planner, set
    to ``planner=worker``), else None."""
    if not is_planner(policy):
        return None
    if policy.config.planner != "worker":
        policy.config = policy.config.model_copy(update={"planner": "worker"})
    return policy


class _Worker:
    """One worker thread beside a pool's decisions, its result taken back in the event
    loop: `poke` starts the work when `_due`, with what `_request` takes in the loop."""

    what = ""
    """The work, as the error metric and log say it ("plan", "replay")."""
    thread = ""
    """Its thread's name."""

    def __init__(self, policy: Scheduler, driver: Driver) -> None:
        self.policy = policy
        self.cluster = driver.cluster
        self.decider = driver.decider
        self.schedule = driver.schedule
        """The pool's scheduling round (run when the work changed what it follows)."""
        self.running: asyncio.Future[Any] | None = None
        """The work under way, if any."""
        self._executor = ThreadPoolExecutor(1, thread_name_prefix=self.thread)
        self._closed = False

    def poke(self) -> None:
        """Event loop, after a scheduling round: start the work if it is due and none runs."""
        if self._closed or self.running is not None or not self._due():
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # (a bridge driven without a loop starts nothing)
            return
        try:
            work, *args = self._request()
        except Exception as exc:  # the work never stops decisions
            self.decider.note_error(self.policy.name, exc, self.what)
            return
        self.running = loop.run_in_executor(self._executor, work, *args)
        self.running.add_done_callback(self._ended)

    def _due(self) -> bool:
        raise NotImplementedError

    def _request(self) -> tuple[Callable[..., Any], *tuple[Any, ...]]:
        """Event loop: the function the thread runs, and its arguments."""
        raise NotImplementedError

    def _ended(self, running: asyncio.Future[Any]) -> None:
        self.running = None
        if not self._closed and not running.cancelled():
            self._done(running)

    def _done(self, running: asyncio.Future[Any]) -> None:
        raise NotImplementedError

    async def idle(self) -> None:
        """Until no work runs (tests; work taken back may start the next)."""
        while self.running is not None:
            await asyncio.wait([self.running])
            await asyncio.sleep(0)  # (its done callback runs)

    def close(self) -> None:
        """Stop: the work under way is dropped, its thread ends with it."""
        self._closed = True
        if self.running is not None:
            self.running.cancel()
            self.running = None
        self._executor.shutdown(wait=False, cancel_futures=True)


class PlanningWorker(_Worker):
    """Plans of one planner in one worker thread, adopted in the event loop."""

    what, thread = "plan", "idlegate-planner"

    def __init__(self, planner: LookaheadScheduler, driver: Driver) -> None:
        super().__init__(planner, driver)
        self.planner = planner
        self.budget = driver.settings.plan_budget_ms / 1000
        """Wall seconds one plan may take (``--plan-budget-ms``)."""
        self.metrics = driver.metrics
        self.plans = 0
        """Plans finished (adopted, dropped or failed)."""
        self.metrics.follow(planner.following)

    def _due(self) -> bool:
        return self.planner.needs_plan(self.cluster)

    def _request(self) -> tuple[Callable[..., Any], *tuple[Any, ...]]:
        return self.planner.plan, self.planner.request(self.cluster), self.budget

    def _done(self, running: asyncio.Future[Plan]) -> None:
        """Event loop: a plan ended. Adopt it, drop it, or note its error; plan again."""
        self.plans += 1
        planner = self.planner
        before = planner.following
        try:
            plan = running.result()
            self.metrics.planning_duration.observe(plan.seconds)
            adopted = planner.adopt(plan, self.cluster)
        except Exception as exc:  # the planner keeps its policy
            self.decider.note_error(planner.name, exc, "plan")
            self.poke()  # (only if the workflows changed meanwhile: the same plan fails)
            return
        if not adopted:
            self.metrics.plans_dropped.inc()
        elif planner.following != before:
            self.metrics.policy_switches.labels(planner.following).inc()
            self.metrics.follow(planner.following)
            log.info("The planner is now %s.", self.why(before))
            self.cluster.needs_schedule = True
            self.schedule()  # (it pokes again)
        self.poke()

    def why(self, previous: str | None = None) -> str:
        """Which policy the planner follows, since when and why (`messages.following`)."""
        p = self.planner
        return messages.following(p.following, p.followed_since, p.last_plan, previous)


class ReplayWorker(_Worker):
    """A portfolio's rounds (:mod:`idlegate.policy.portfolio`, ``replayer=worker``) in one
    worker thread: its decisions follow the candidate it has meanwhile, never waiting for
    a round (0.4-0.6 s of CPU for a 2 h window, docs/brain.md). The round's window is
    taken in the event loop, and its choice adopted there; then the pool schedules at
    once, so the Decider says the new candidate (PolicyFollowed) at its next round.

    A portfolio that starts with an empty window (not one handed over by a reload) starts
    from its pool's last `window` records in the history sink, read on the sink's thread
    (`HistorySink.prior`) and seeded at the first poke (`PortfolioScheduler.seed`)."""

    what, thread = "replay", "idlegate-replay"

    def __init__(self, portfolio: PortfolioScheduler, driver: Driver) -> None:
        super().__init__(portfolio, driver)
        self.portfolio = portfolio
        history = driver.history
        self._prior: Future[list[JobArrival]] | None = None
        """The pool's last records in the sink, being read (a portfolio starting empty)."""
        if history is not None and history.sink is not None and not portfolio.finished:
            self._prior = history.sink.prior(history.pool, portfolio.config.window)

    def _due(self) -> bool:
        return self._prior is not None or self.portfolio.needs_replay(self.cluster.now)

    def _request(self) -> tuple[Callable[..., Any], *tuple[Any, ...]]:
        if self._prior is not None:
            read, self._prior = self._prior, None
            return (read.result,)  # (this thread waits for the sink's)
        return self.portfolio.replay, self.portfolio.request(self.cluster)

    def _done(self, running: asyncio.Future[Choice | list[JobArrival]]) -> None:
        try:
            done = running.result()
            if isinstance(done, list):  # (the sink's records)
                self.portfolio.seed(done, "history sink")
                self.poke()
                return
            self.portfolio.adopt(done)
        except Exception as exc:  # the portfolio keeps its candidate
            self.decider.note_error(self.portfolio.name, exc, "replay")
            return
        self.cluster.needs_schedule = True
        self.schedule()  # (it pokes again)


class Driver(Protocol):
    """What a worker is made of (the pool's core, :class:`idlegate.operator.core.core.Core`)."""

    scheduler: Scheduler
    cluster: Cluster
    settings: Settings
    metrics: Metrics
    decider: Decider
    history: HistoryRecorder | None

    def schedule(self) -> None: ...


def planning_worker(driver: Driver) -> PlanningWorker | ReplayWorker | None:
    """The worker of the pool's policy when it is a planner that plans beside its
    decisions or a portfolio the operator feeds (`Decider.learns`), else None."""
    planner = worker_planner(driver.scheduler)
    if planner is not None:
        return PlanningWorker(planner, driver)
    brain = driver.decider.learns
    return None if brain is None else ReplayWorker(brain, driver)


def policy_switched(
    worker: PlanningWorker | ReplayWorker | None, previous: str, rule: str
) -> Notice | None:
    """The PolicySwitched Event to post on a workflow whose tasks `rule` (`Answer.rule`)
    releases, after `previous` released them: when `rule` is a planner's newly followed
    policy, else None (a fallback rule answered: PolicyError says so)."""
    if isinstance(worker, PlanningWorker) and rule == worker.planner.following:
        return messages.policy_switched(worker.why(previous))
    return None
