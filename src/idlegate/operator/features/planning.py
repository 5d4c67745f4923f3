"""The lookahead planner's worker, and a portfolio's (:class:`ReplayWorker`): their work
runs in the operator's replay process (`policy.apart`; a thread with ``--forecast-workers
thread``, or for a policy the process cannot build again from its spec), never under the
lock of the event loop's interpreter, and decisions never wait on it. What a user sees
of the planner is in deploy/README.md ("The lookahead planner").

A switch-mode planner (``--scheduler lookahead:BASE``, :mod:`idlegate.policy.lookahead`)
decides as the policy it follows, at that policy's speed; a :class:`PlanningWorker` makes
its plans beside the decisions:

* after every scheduling round (the core's `RoundEnded`: :meth:`PlanningWorker.poke`, in
  the event loop, which owns the cluster), when the planner needs a plan and none runs, the planner's request (a
  fork of the cluster, sampled futures) is taken and planned where the worker's work runs,
  within ``--plan-budget-ms``;
* back in the event loop, the planner adopts the plan. A switch of the followed policy is
  counted and logged, and the pool schedules at once (a `Schedule` event); a plan for a set of workflows that
  has changed since is dropped (`idlegate_plans_dropped_total`) and the next one starts;
* a plan that raises is counted and logged as a policy error (:meth:`Decider.note_error`);
  the planner keeps its policy.

An ``inline``-mode planner plans in the worker all the same (its ``planning_delay`` models
this worker); a ``decision``-mode one plans every decision itself and gets no worker. A
workflow whose tasks another followed policy releases than before gets a
``PolicySwitched`` Event (the core's `RuleSwitched`, :func:`policy_switched`). Stopping (:meth:`_Worker.close`)
drops the plan running: its thread or the process finishes it (a plan starts no future
past its budget), and nothing of it is adopted.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections import Counter
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, TypeGuard

from idlegate.api import notices
from idlegate.api.notices import Notice
from idlegate.api.status import Phase
from idlegate.operator.core.events import Fact, Finished, RoundEnded, RuleSwitched, Schedule
from idlegate.operator.core.intents import PostEvent
from idlegate.operator.features.history import HistoryRecorder, replay_arrival
from idlegate.operator.forecasting.process import ReplayProcess
from idlegate.policy.apart import budget_check, plan_apart, play_apart
from idlegate.policy.portfolio.replay import ReplayRequest, RoundCut
from idlegate.sim.protocol import Scheduler

if TYPE_CHECKING:
    from idlegate.operator.core.core import Core
    from idlegate.policy.lookahead import LookaheadScheduler, Plan
    from idlegate.policy.portfolio import Choice, PortfolioScheduler
    from idlegate.sim.engine import JobArrival

log = logging.getLogger(__name__)


def is_planner(policy: Scheduler) -> TypeGuard[LookaheadScheduler]:
    """Whether `policy` is a switch-mode lookahead planner (it makes plans of policies)."""
    from idlegate.policy.lookahead import LookaheadScheduler

    return isinstance(policy, LookaheadScheduler) and policy.config.mode == "switch"


Work = tuple[Callable[[asyncio.Future[Any]], None], Callable[..., Any], *tuple[Any, ...]]
"""What a worker's `_request` takes in the event loop: the handler of the result (run
back in the loop), the function the thread runs, and its arguments."""


class _Worker:
    """One worker thread beside a pool's decisions, its result taken back in the event
    loop: `poke` starts the work when `_due`, with what `_request` takes in the loop, and
    the request's handler takes the result."""

    what = ""
    """The work, as the error metric and log say it ("plan", "replay")."""
    takes: tuple[type, ...] = (RoundEnded,)
    """The core's facts it answers."""
    thread = ""
    """Its thread's name."""

    def __init__(
        self,
        policy: Scheduler,
        core: Core,
        emit: Callable[[list[Any]], None],
        process: ReplayProcess | None = None,
    ) -> None:
        self.policy = policy
        self.process = process
        """Where its work runs (`policy.apart`); None: its worker thread."""
        self.cluster = core.cluster
        self.decider = core.decider
        self.metrics = core.metrics
        self.emit = emit
        """Hands the pool events (a `Schedule` when the work changed what it follows)."""
        self.running: asyncio.Future[Any] | None = None
        """The work under way, if any."""
        self._executor = ThreadPoolExecutor(1, thread_name_prefix=self.thread)
        self._closed = False

    def react(self, fact: Fact) -> list[Any]:
        """The core's facts: after a round, the work starts if it is due."""
        if isinstance(fact, RoundEnded):
            self.poke()
        return []

    def poke(self) -> None:
        """Event loop, after a scheduling round: start the work if it is due and none runs."""
        if self._closed or self.running is not None or not self._due():
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # (a bridge driven without a loop starts nothing)
            return
        try:
            then, work, *args = self._request()
        except Exception as exc:  # the work never stops decisions
            self.decider.note_error(self.policy.name, exc, self.what)
            return
        self.running = self._start(loop, work, tuple(args))
        self.running.add_done_callback(functools.partial(self._ended, then))

    def _start(
        self, loop: asyncio.AbstractEventLoop, work: Callable[..., Any], args: tuple[Any, ...]
    ) -> asyncio.Future[Any]:
        """Event loop: `work(*args)` started in the replay process if it is work made apart
        (`policy.apart`), else in the worker thread."""
        if self.process is not None and work in (play_apart, plan_apart):
            return asyncio.wrap_future(self.process.call(work, *args), loop=loop)
        return loop.run_in_executor(self._executor, work, *args)

    def _due(self) -> bool:
        raise NotImplementedError

    def _request(self) -> Work:
        """Event loop: the work to start (`Work`)."""
        raise NotImplementedError

    def _ended(
        self, then: Callable[[asyncio.Future[Any]], None], running: asyncio.Future[Any]
    ) -> None:
        self.running = None
        if not self._closed and not running.cancelled():
            then(running)

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
    """Plans of one planner in the operator's replay process (`process`, built there from
    the pool's spec: `policy.apart.plan_apart`), else in one worker thread, adopted in
    the event loop."""

    what, thread = "plan", "idlegate-planner"
    takes = (RoundEnded, RuleSwitched)

    def __init__(
        self,
        planner: LookaheadScheduler,
        core: Core,
        emit: Callable[[list[Any]], None],
        process: ReplayProcess | None = None,
    ) -> None:
        super().__init__(planner, core, emit, process if core.spec is not None else None)
        self.planner = planner
        self.spec = core.spec
        """The planner's spec, that the process builds it from (None: the thread plans)."""
        self.budget = core.settings.plan_budget_ms / 1000
        """Wall seconds one plan may take (``--plan-budget-ms``)."""
        self.plans = 0
        """Plans finished (adopted, dropped or failed)."""
        self.metrics.follow(planner.following)

    def _due(self) -> bool:
        return self.planner.needs_plan(self.cluster)

    def _request(self) -> Work:
        request = self.planner.request(self.cluster)
        if self.process is None:
            return self._adopt, self.planner.plan, request, self.budget
        return self._adopt, plan_apart, self.spec, self.planner.config, request, self.budget

    def _adopt(self, running: asyncio.Future[Plan]) -> None:
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
            self.emit([Schedule(force=True)])  # (what it follows changed; the round pokes again)
        self.poke()

    def react(self, fact: Fact) -> list[Any]:
        """Also: a workflow whose tasks the planner's newly followed policy releases gets
        a PolicySwitched Event."""
        if isinstance(fact, RuleSwitched):
            notice = policy_switched(self, fact.previous, fact.rule)
            return [] if notice is None else [PostEvent(fact.workflow.owner, *notice)]
        return super().react(fact)

    def why(self, previous: str | None = None) -> str:
        """Which policy the planner follows, since when and why (`notices.following`)."""
        p = self.planner
        return notices.following(p.following, p.followed_since, p.last_plan, previous)


class ReplayWorker(_Worker):
    """A portfolio's rounds (``replayer=worker``) in the operator's replay process
    (`process`, `policy.apart`), its decisions following the candidate it has
    meanwhile: a round is CPU-bound Python, and in a thread of the operator it would hold
    the interpreter's lock that the event loop needs. The round's request is taken in the
    event loop, and its choice adopted there; then the pool schedules at once, so the
    Decider says the new candidate (PolicyFollowed). A round past its CPU budget
    (``--round-budget``) is cut: the portfolio keeps its candidate, counted and posted
    (RoundCut). Without a process (``--forecast-workers thread``, or a portfolio built by
    a builder of its own that the process cannot rebuild) the round runs in one worker
    thread, under the same budget. A portfolio that starts with an empty window (not one
    handed over by a reload) is first seeded (`PortfolioScheduler.seed`) with its pool's
    last `window` records in the history sink (`HistorySink.prior`)."""

    what, thread = "replay", "idlegate-replay"
    takes = (RoundEnded, Finished)

    def __init__(
        self,
        portfolio: PortfolioScheduler,
        core: Core,
        emit: Callable[[list[Any]], None],
        history: HistoryRecorder | None = None,
        process: ReplayProcess | None = None,
    ) -> None:
        super().__init__(portfolio, core, emit, process if portfolio.rebuildable else None)
        self.portfolio = portfolio
        self.budget = core.settings.round_budget
        """CPU seconds a round may take (``--round-budget``)."""
        self.reporter = core.reporter
        """Where a cut round is said (the operator's pod; None: logged only)."""
        self._prior: Future[tuple[list[JobArrival], Counter[str]]] | None = None
        """The pool's last records in the sink, being read (a portfolio starting empty)."""
        if history is not None and history.sink is not None and not portfolio.finished:
            self._prior = history.sink.prior(history.pool, portfolio.config.window)

    def react(self, fact: Fact) -> list[Any]:
        """Also: a workflow that finished joins the portfolio's window (its record: the
        status of a finished workflow)."""
        if isinstance(fact, Finished):
            wf = fact.workflow
            if wf.phase is Phase.SUCCEEDED and (arrival := replay_arrival(wf)) is not None:
                self.decider.learn([arrival])
            return []
        return super().react(fact)

    def _due(self) -> bool:
        return self._prior is not None or self.portfolio.needs_replay(self.cluster.now)

    def _request(self) -> Work:
        if self._prior is not None:
            read, self._prior = self._prior, None
            return self._seed, read.result  # (this thread waits for the sink's)
        request = self.portfolio.request(self.cluster)
        if self.process is None:
            return self._adopt, self._in_thread, request
        return self._adopt, play_apart, self.portfolio.config, request, self.budget

    def _in_thread(self, request: ReplayRequest) -> Choice:
        """The worker thread: the round of `request` under the budget (no process)."""
        return self.portfolio.replay(request, budget_check(self.budget))

    def _seed(self, running: asyncio.Future[tuple[list[JobArrival], Counter[str]]]) -> None:
        """Event loop: the pool's records in the sink were read (and the lines left out,
        by reason); the portfolio starts from them."""
        try:
            arrivals, skipped = running.result()
            for reason, lines in skipped.items():
                self.metrics.history_skipped.labels(reason).inc(lines)
            self.portfolio.seed(arrivals, "history sink")
        except Exception as exc:  # the portfolio starts empty
            self.decider.note_error(self.portfolio.name, exc, "replay")
            return
        self.poke()

    def _adopt(self, running: asyncio.Future[Choice]) -> None:
        """Event loop: a round ended. Follow its choice, or note its error."""
        try:
            choice = running.result()
            self.metrics.round_cpu.observe(choice.cpu_seconds)
            self.portfolio.adopt(choice)
        except RoundCut as cut:  # the portfolio keeps its candidate, and says so
            self.metrics.rounds_cut.inc()
            said = notices.round_cut(str(cut), self.portfolio.following)
            log.warning("%s", said[2])
            if self.reporter is not None:
                self.emit([PostEvent(self.reporter, *said)])
            return
        except Exception as exc:  # the portfolio keeps its candidate
            self.decider.note_error(self.portfolio.name, exc, "replay")
            return
        self.emit([Schedule(force=True)])  # (what it follows changed; the round pokes again)


def planning_worker(
    core: Core,
    emit: Callable[[list[Any]], None],
    history: HistoryRecorder | None = None,
    process: ReplayProcess | None = None,
) -> PlanningWorker | ReplayWorker | None:
    """The worker of the pool's policy when it is a switch-mode planner (set to plan in a
    worker: ``planner=worker``) or a portfolio the operator feeds (`Decider.learns`), else
    None. `emit` hands the pool its events; `history` reads a portfolio's first window;
    `process` runs a portfolio's rounds (None: its worker thread)."""
    planner = core.scheduler
    if is_planner(planner):
        if planner.config.planner != "worker":
            planner.config = planner.config.model_copy(update={"planner": "worker"})
        return PlanningWorker(planner, core, emit, process)
    brain = core.decider.learns
    return None if brain is None else ReplayWorker(brain, core, emit, history, process)


def policy_switched(
    worker: PlanningWorker | ReplayWorker | None, previous: str, rule: str
) -> Notice | None:
    """The PolicySwitched Event to post on a workflow whose tasks `rule` (`Answer.rule`)
    releases, after `previous` released them: when `rule` is a planner's newly followed
    policy, else None (a fallback rule answered: PolicyError says so)."""
    if isinstance(worker, PlanningWorker) and rule == worker.planner.following:
        return notices.policy_switched(worker.why(previous))
    return None
