"""Preemption decided on forecasts in the operator (issue 82, item 3): a ``decide: Forecast``
queue's stops judged off the event loop, in the operator's replay process.

The judge is the simulator's (`idlegate.sim.reclaim_forecast.ForecastJudge`: its cases,
exchange rate and replays, unchanged); what differs is when its verdict comes. In the
simulator the admission calls it and waits; the operator's loop must not run replays,
so its admission's rules choose the stops as for any queue (`idlegate.sim.reclaim_plan`,
no judge there), and the stops, once asked, are judged here before they are evicted:

* *Asked.* `Judging.ask` takes a fork of the pool (the forecasts' `planning_fork`, no
  reclaim of its own) and the question for the replay process (`StopsQuestion`, plain
  data: the policy's spec, or a copy of it); `judge_stops` answers it there, within
  `EVENTS` events and `SECONDS` of the process's CPU (`ForecastJudge`'s budget). The
  stops stay *pending* meanwhile (`Reclaimer.pending`: their room counts as coming back,
  so no other claimant asks for it; the owner's workflow waits as ``Reclaiming``), and
  nothing is evicted.
* *The deadline.* The verdict is awaited at most `WAIT` seconds (the operator's clock),
  and no later than the first waiting task of the claimant's queue falls due by its wait
  bound (`Admission.bound`): a bound at stake is not left to wait for a verdict. A task
  past its bound already is not judged at all: the stops are evicted at once, the rules'
  answer (the judge's `bound` case would hold), said in the Event.
* *Answered* (`Judging.answer`): the stops apply only if the plan still holds, every
  victim still running the task it ran when asked and a task of the claimant's queue
  still waiting; else they are withdrawn (`Reclaimer.withdraw`) and the question is
  asked again as the admission sees it then. A verdict that lets them go ahead
  (`bound`, `pays`, or `cut`: the judge's budget spent, the rules') evicts them, its
  clause on each ``Preempted`` Event (`ReclaimVerdict.sentence`); one that declines
  withdraws them and the queue is not judged again for `RECHECK` seconds, as in the
  simulator.
* *No verdict* (the judge raised, the process died, or the deadline passed first): the
  rules' answer, the stops evicted if the plan holds, never a stalled pool; loudly: a
  Warning Event (`fallback`) and ``idlegate_preemption_fallbacks_total{queue,why}``. A
  verdict that comes after its deadline finds its question answered and is dropped.

Pure: no process, no loop, no API (`operator.core.core.Core` asks and answers,
`operator.edge.bridge.Bridge` sends the question to the replay process).
"""

from __future__ import annotations

import copy
import itertools
import time
from collections.abc import Iterator
from concurrent.futures import Future
from dataclasses import dataclass
from math import inf
from typing import TYPE_CHECKING, Any, NamedTuple

from idlegate.operator.forecasting.request import _BUILT, replayed_spec, scheduler_copy
from idlegate.sim.reclaim_forecast import EVENTS, ForecastJudge
from idlegate.sim.reclaim_plan import RECHECK, Reclaim, Reclaimer
from idlegate.sim.rollout import planning_fork

if TYPE_CHECKING:
    from idlegate.sim.cluster import Cluster
    from idlegate.sim.protocol import Job, Scheduler, Stage
    from idlegate.sim.reclaim_verdict import ReclaimVerdict

WAIT = 10.0
"""Seconds (the operator's clock) a question's verdict is awaited before the rules' answer."""
SECONDS = 0.2
"""CPU seconds of the replay process a decision's replays may take (issue 82: 200 ms)."""
FAILED, LATE = "failed", "late"
"""Why the rules decided instead (the fallback metric's ``why``)."""


@dataclass(frozen=True)
class StopsQuestion:
    """What crosses to the replay process: a fork of the pool, the stops, the claimant's
    queue (its index) and the time; the policy's spec (built there) or a copy of it."""

    fork: Cluster
    plan: Reclaim
    queue: int
    now: float
    spec: str | None
    scheduler: Scheduler | None
    seed: int
    grace: float
    seconds: float | None = SECONDS


def judge_stops(question: StopsQuestion) -> ReclaimVerdict:
    """The replay process: the judge's verdict on the question (the simulator's judge, its
    events budget and `seconds` of this process's CPU)."""
    scheduler = question.scheduler
    if scheduler is None:  # (built from its spec once per spec, as the forecasts' are)
        scheduler = scheduler_copy(None, question.spec, None, _BUILT)
    judge = ForecastJudge(
        scheduler,
        seed=question.seed,
        grace=question.grace,
        events=EVENTS,
        seconds=question.seconds,
        clock=time.thread_time,
    )
    return judge(question.fork, question.plan, question.queue, question.now)


@dataclass(frozen=True, slots=True)
class JudgeStops:
    """The core's fact: send `question` to the replay process; its answer comes back as
    `Judged` of the same `token`, or at `due` without one."""

    token: int
    question: StopsQuestion
    due: float


@dataclass(frozen=True, slots=True)
class Judged:
    """The answer to the question `token`: its `verdict`, or why none came (`error`: the
    judge failed; neither: the deadline passed)."""

    token: int
    verdict: ReclaimVerdict | None = None
    error: str | None = None


def judged(token: int, done: Future[ReclaimVerdict] | Any) -> Judged:
    """The `Judged` event of a finished call (a concurrent or asyncio future)."""
    if done.cancelled():
        return Judged(token, error="its replay process was closed")
    exc = done.exception()
    if exc is not None:
        return Judged(token, error=f"{type(exc).__name__}: {exc}")
    return Judged(token, verdict=done.result())


class Asked(NamedTuple):
    """A question in flight: the stops, their queue's index, when asked and the deadline."""

    plan: Reclaim
    queue: int
    at: float
    due: float


class Carry(NamedTuple):
    """What the core does with an answer: evict `plan`'s stops (None: nothing), each
    ``Preempted`` Event ending with `clause`; `warning`, `why`: a fallback's Event and
    metric label (None: none); `verdict`: the judge's, counted by case, for the queue
    `queue`, and where it declined, `waiting`: the claimant's workflow that waits on (its
    job; the Event saying so goes there)."""

    plan: Reclaim | None
    clause: str | None = None
    warning: str | None = None
    why: str | None = None
    verdict: ReclaimVerdict | None = None
    queue: str | None = None
    waiting: Job | None = None


class Judging:
    """A pool's questions to the judge (the module docstring): its admission's `reclaimer`,
    `wait` seconds at most for a verdict (None: `WAIT`)."""

    def __init__(self, reclaimer: Reclaimer, wait: float | None = None) -> None:
        self.reclaimer = reclaimer
        self.wait = WAIT if wait is None else wait
        self.asked: dict[int, Asked] = {}
        self._tokens = itertools.count(1)

    def ask(
        self,
        pool: Cluster,
        plan: Reclaim,
        now: float,
        policy: tuple[Scheduler, str | None, Any],
        seed: int,
    ) -> Carry | JudgeStops:
        """`plan`'s stops, just asked (`Reclaimer.stopped`): carried out now (the rules'
        for a ``Rules`` queue, or a bound already at stake), or the question to send.
        `policy`: the pool's scheduler, its spec and a portfolio it follows."""
        queues = self.reclaimer.queues
        q = next(i for i, spec in enumerate(queues) if spec.name == plan.queue)
        if queues[q].preemption.decide != "Forecast":
            return Carry(plan)
        due = min(now + self.wait, _bound_due(pool, q))
        if due <= now:
            return Carry(plan, clause=_rules("a task of the queue is past its wait bound"))
        fork = planning_fork(pool)
        if fork.admission is not None:
            fork.admission.reclaimer = None  # (the judge's replays stop nothing of their own)
        if fork.now < now:
            fork.advance(now)
        scheduler, spec, learns = policy
        wanted = replayed_spec(spec, learns)
        copied = None if wanted is not None else copy.deepcopy(scheduler)
        token = next(self._tokens)
        calm = self.reclaimer.ledger.calm
        question = StopsQuestion(fork, plan, q, now, wanted, copied, seed + token, calm.grace)
        self.asked[token] = Asked(plan, q, now, due)
        return JudgeStops(token, question, due)

    def answer(self, answer: Judged, pool: Cluster, now: float) -> Carry:
        """What to do with `answer` (the module docstring, *Answered* and *No verdict*)."""
        asked = self.asked.pop(answer.token, None)
        if asked is None:
            return Carry(None)  # (answered already: its deadline passed first)
        plan, verdict = asked.plan, answer.verdict
        if not self._holds(pool, asked):
            self.reclaimer.withdraw(plan, asked.at)
            return Carry(None)
        if verdict is not None:
            if verdict.stops:
                sentence = verdict.sentence()
                return Carry(plan._replace(verdict=verdict), sentence, verdict=verdict)
            self.reclaimer.withdraw(plan, asked.at, now + RECHECK)
            first = min(_waiting(pool, asked.queue), key=lambda w: w[1], default=None)
            job = None if first is None else first[0].job
            return Carry(None, verdict=verdict, queue=plan.queue, waiting=job)
        if answer.error is not None:
            why, what = FAILED, f"the forecast's judge failed ({answer.error})"
        else:
            bound = (
                " before the queue's wait bound fell due"
                if asked.due < asked.at + self.wait
                else ""
            )
            why, what = LATE, f"the forecast's judge gave no verdict within {now - asked.at:.0f} s"
            what += f",{bound}" if bound else ""
        return Carry(plan, _rules(what), fallback(plan, what), why)

    def _holds(self, pool: Cluster, asked: Asked) -> bool:
        """Every victim still runs the task it ran when asked, and a task of the
        claimant's queue still waits."""
        plan = asked.plan
        if not all(pool.runs(e, s) for e, s in zip(plan.executors, plan.starts, strict=True)):
            return False
        return any(True for _ in _waiting(pool, asked.queue))


def fallback(plan: Reclaim, what: str) -> str:
    """The Warning Event's text when the rules decide a ``Forecast`` queue's stops."""
    return (
        f"Queue {plan.queue!r} decides its preemption on forecasts, but {what}; the rules' "
        f"answer is carried out instead: {len(plan.executors)} task(s) stopped, "
        f"{plan.lost:.0f} executor-seconds lost."
    )


def _rules(what: str) -> str:
    return f"decided by the rules: {what}"


def _waiting(pool: Cluster, q: int) -> Iterator[tuple[Stage, float]]:
    """(stage, since) of the tasks of queue `q` waiting to start."""
    admission = pool.admission
    if admission is None:
        return
    for stage, since in admission.waits_since[q].items():
        if stage.waits:
            yield stage, since


def _bound_due(pool: Cluster, q: int) -> float:
    """When the first waiting task of queue `q` passes its wait bound (inf: none)."""
    admission = pool.admission
    bound = inf if admission is None else admission.bound[q]
    if bound == inf:
        return inf
    return min((since + bound for _, since in _waiting(pool, q)), default=inf)


__all__ = [
    "FAILED",
    "LATE",
    "SECONDS",
    "WAIT",
    "Asked",
    "Carry",
    "JudgeStops",
    "Judged",
    "Judging",
    "StopsQuestion",
    "fallback",
    "judge_stops",
    "judged",
]
