"""Asking the pool's policy (pure: the state machine and the policy in, the round out; the
policy is loaded by :mod:`idlegate.operator.decisions`).

:class:`Decider` asks the policy through the Engine's decision round
(`idlegate.sim.engine.decision_round`, the simulator's questions), times and counts every
answer, and hands back the round (:class:`Round`): the decisions with who made them, for
the Events' *why*, and the policy's failures.

A policy error never stalls the pool. A question the policy fails (it raises, or answers
illegally: `Cluster.decide_once` applies nothing of it) is answered by the fallback rules
(:func:`fallback_rules`); each failure is counted in ``idlegate_policy_errors_total``,
logged with its traceback the first time (:class:`ErrorLog`) and posted as a Warning
``PolicyError`` (:func:`post_round`). Only when every rule fails is the answer WAIT.

The Decider also posts a planner's holds (``Holding``) and a portfolio's change of
candidate (``PolicyFollowed``), feeds a portfolio the finished workflows
(:meth:`Decider.learn`), changes policy only between rounds (:meth:`Decider.use`), and
hands a shadow (:mod:`.shadow`) a copy of each round's state and answers.
"""

from __future__ import annotations

import logging
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from idlegate.api import notices
from idlegate.operator.metrics import Metrics
from idlegate.sim.admission_result import Reason, Verdict
from idlegate.sim.cluster import Cluster
from idlegate.sim.engine import Answered, JobArrival, decision_round
from idlegate.sim.protocol import Action, Decision, Launch, Scheduler, Stage, followed

if TYPE_CHECKING:
    from idlegate.api.task_pods import Owner
    from idlegate.policy.plans import Hold
    from idlegate.policy.portfolio import Choice, PortfolioScheduler

log = logging.getLogger(__name__)
DEFAULT_HEURISTIC = "fair"
MAX_DISTINCT_ERRORS = 1000
"""Distinct errors (rule and type) remembered for log-once (bounded all the same)."""


def fallback_rules(policy: Scheduler, seed: int = 0) -> tuple[Scheduler, ...]:
    """The rules that answer, in order, a question `policy` failed: a lookahead planner's
    base (the planner's own instance, already reset by it), then ``fair`` (reset with
    `seed`), which a failing base falls back to in turn. ``fair`` itself has none."""
    from idlegate.policy import make_scheduler
    from idlegate.policy.lookahead import LookaheadScheduler

    rules = [policy.base] if isinstance(policy, LookaheadScheduler) else []
    if DEFAULT_HEURISTIC not in (policy.name, *(r.name for r in rules)):
        fair = make_scheduler(DEFAULT_HEURISTIC)
        fair.reset(np.random.default_rng(seed))
        rules.append(fair)
    return tuple(rules)


OTHER_WORK = Verdict(Reason.POLICY, notices.OTHER_WORK)
"""The verdict of a round that ended with nothing more to start, the stage not chosen."""


@dataclass(frozen=True)
class Answer:
    """One decision of a round, with its launches and who made it."""

    decision: Decision
    launches: list[Launch]
    by: str
    """Who decided, as Events say it (`notices.decided_by`)."""
    rule: str
    """The rule that decided: the policy followed (`followed`), or the fallback rule."""
    hold: Hold | None = None
    """An idle slot's expected arrivals, when the policy said (a planner's `hold`)."""


@dataclass(frozen=True)
class Failure:
    """A question the policy failed: what it raised, and how the question was answered."""

    policy: str
    error: str
    """``Type: message`` of what the policy raised (an illegal answer included)."""
    fallback: str | None
    """The rule that answered instead; None: every rule failed (the answer was WAIT)."""
    fallback_errors: tuple[str, ...] = ()
    """The errors of the fallback rules that failed too, in order."""
    stage: Stage | None = None
    """The stage the question ended up about: the one the illegal answer named, else the
    one the fallback chose; None when that is not known."""


@dataclass
class Round:
    """What a decision round did."""

    taken: list[Answer] = field(default_factory=list)
    failures: list[Failure] = field(default_factory=list)
    ended: Verdict = OTHER_WORK
    """The round's verdict on the stages the admission let start and it did not: the
    policy chose to wait (or every rule failed: `notices.chose_wait`,
    `notices.all_rules_failed`), written as it answers WAIT; else it started other work
    and nothing more could start."""
    holding: tuple[Hold, str] | None = None
    """A new hold by the WAIT that ended the round, and who chose it (`decided_by`): the
    Holding Event to post."""
    followed: Choice | None = None
    """A portfolio's choice of another candidate in the round: the PolicyFollowed Event."""


def fed_portfolio(policy: Scheduler) -> PortfolioScheduler | None:
    """`policy` as a portfolio set to learn only the finished workflows the operator
    gives it (``records=fed``: its jobs carry no duration models to replay) and to run
    its rounds in a worker (``replayer=worker``), else None."""
    from idlegate.policy.portfolio import PortfolioScheduler

    if not isinstance(policy, PortfolioScheduler):
        return None
    fed = {"records": "fed", "replayer": "worker"}  # (its rounds: features.planning)
    if any(getattr(policy.config, k) != v for k, v in fed.items()):
        policy.config = policy.config.model_copy(update=fed)
    return policy


def _describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


class ErrorLog:
    """Which errors were seen, for logging each once: its traceback the first time its
    (rule, type) is seen, one line (with the latest message) at the 10th, 100th, … time.
    Not keyed by the message, which may carry the state's figures (a job count): a
    repeat would look new at every question. The most recent MAX_DISTINCT_ERRORS are
    remembered."""

    def __init__(self) -> None:
        self.seen: OrderedDict[tuple[str, str], int] = OrderedDict()
        """(rule, error type) -> times seen."""

    def note(self, rule: str, exc: Exception, what: str, then: str) -> None:
        """Log that `rule` failed to `what` with `exc`, and `then` what happened instead."""
        key = (rule, type(exc).__name__)
        seen = self.seen.pop(key, 0) + 1
        self.seen[key] = seen
        if len(self.seen) > MAX_DISTINCT_ERRORS:
            self.seen.popitem(last=False)
        if seen == 1:
            log.error(
                "The policy %r failed to %s (%s); %s. Repeats of this error are counted, not "
                "logged with a traceback.",
                rule,
                what,
                _describe(exc),
                then,
                exc_info=exc,
            )
        elif seen >= 10 and str(seen).rstrip("0") == "1":  # the 10th, 100th, … time
            log.error("The policy %r failed the same way %d times: %s", rule, seen, _describe(exc))


class Onlooker(Protocol):
    """The shadow (:class:`idlegate.operator.features.shadow.Shadow`, which imports this
    module): `begin` gives a round's record (or None), whose `actions` the Decider fills
    with the answers applied, and `submit` takes it after."""

    def begin(self, cluster: Cluster, active: Scheduler) -> Any: ...

    def submit(self, shadowed: Any, now: float) -> None: ...


class Decider:
    """Asks the policy through decision rounds, falling back on the module's rules. The
    policy (and ``fair``, the last fallback rule) is reset with `seed`; a `shadow`, if
    set, is handed every round's state and answers."""

    def __init__(self, policy: Scheduler, metrics: Metrics, seed: int = 0) -> None:
        self.metrics = metrics
        self.seed = seed
        self.errors = ErrorLog()
        self.shadow: Onlooker | None = None
        self.known: tuple[JobArrival, ...] = ()
        """Arrivals known in advance (the cron workflows' upcoming runs), told to every
        policy used that takes them (``futures=known`` planners)."""
        self.learns: PortfolioScheduler | None = None
        """A portfolio, told each workflow that finishes (its replays' window)."""
        self.use(policy)

    def use(self, policy: Scheduler) -> None:
        """Ask `policy` from the next question on (the start, or a reload between two
        rounds): it is reset with the run's seed, and its fallback rules follow it; a
        portfolio is given the finished workflows of the one before, if any."""
        window = self.window()
        self.policy = policy
        policy.reset(np.random.default_rng(self.seed))
        self.fallbacks = fallback_rules(policy, self.seed)
        self.holding: tuple[int, int] | None = None
        """The stage (`Stage.key`) that WAITs hold now, its Holding Event posted."""
        self.following = followed(policy)
        """The candidate followed as last told (the gauge; a portfolio's Event)."""
        self.metrics.follow(self.following)
        self.learns = fed_portfolio(policy)
        self.learn(window)
        self.foresee(self.known)  # a reset forgets them

    def learn(self, finished: Sequence[JobArrival]) -> None:
        """Workflows that finished, with their measured durations: a portfolio's window."""
        if self.learns is not None and finished:
            self.learns.record(finished)

    def window(self) -> tuple[JobArrival, ...]:
        """A portfolio's finished workflows (for the policy that replaces it), else none."""
        return self.learns.finished if self.learns is not None else ()

    def foresee(self, arrivals: Sequence[JobArrival]) -> None:
        """The arrivals known in advance, now (they replace those told before)."""
        if not arrivals and not self.known:
            return  # nothing to tell (an oracle planner keeps its own error, say)
        self.known = tuple(arrivals)
        tell = getattr(self.policy, "foresee", None)
        if callable(tell):
            tell(self.known)

    def decide(self, cluster: Cluster, now: float) -> Round:
        """Ask until an answer is WAIT or nothing more can start, each answer applied at
        once, timed and counted by kind (launch, idle, wait): the round's decisions."""
        cluster.needs_schedule = False
        done = Round()
        shadowed = None if self.shadow is None else self.shadow.begin(cluster, self.policy)
        try:
            self._round(cluster, now, done, None if shadowed is None else shadowed.actions)
        finally:
            if shadowed is not None and self.shadow is not None:
                self.shadow.submit(shadowed, now)
        self._note_choice(done)
        return done

    def _note_choice(self, done: Round) -> None:
        """A portfolio that follows another candidate since the last round: the gauge,
        and its choice in `done` for the Event (a planner's switches are its worker's)."""
        if self.learns is None or self.learns.following == self.following:
            return
        choice = self.learns.choice
        self.following = choice.candidate
        self.metrics.follow(choice.candidate)
        done.followed = choice
        log.info(
            "Pool %s: the policy %s is now %s.", self.metrics.pool, self.policy.name, choice.text
        )

    def _round(self, cluster: Cluster, now: float, done: Round, seen: list[Action] | None) -> None:
        """The questions of one round (the Engine's `decision_round`, with the fallback
        rules); each answer applied is added to `seen` too."""
        questions = decision_round(cluster, self.policy, now, self.fallbacks)
        while True:
            start, cpu = time.perf_counter(), time.thread_time()
            answered = next(questions, None)
            if answered is None:
                return
            self.metrics.decision_duration.observe(time.perf_counter() - start)
            self.metrics.decision_cpu.observe(time.thread_time() - cpu)
            action, launches = answered.action, answered.launches
            by, rule, hold = self._who(answered, done)
            # (the gauge: a fallback rule while it answers, the policy again once it does)
            self.metrics.follow(rule)
            if seen is not None:
                seen.append(action)
            if not isinstance(action, Decision):
                self.metrics.decisions.labels("wait").inc()
                done.ended = Verdict(Reason.POLICY, by)
                self._note_hold(hold, done)
                return
            self.metrics.decisions.labels("idle" if action.idle_delay > 0 else "launch").inc()
            if hold is not None:
                self.metrics.holds.inc()
            if launches and action.stage.key == self.holding:
                self.holding = None  # the held stage started: a later hold is a new one
            done.taken.append(Answer(action, launches, by, rule, hold))

    def _note_hold(self, hold: Hold | None, done: Round) -> None:
        """A round ended with WAIT: a hold of another stage than the last round's (or the
        first) gets its Holding Event and is counted; the same one goes on silently."""
        key = None if hold is None else hold.stage.key
        if hold is not None and key != self.holding:
            self.metrics.holds.inc()
            by = notices.decided_by(self.policy.name, following=followed(self.policy))
            done.holding = (hold, by)
        self.holding = key

    def _who(self, answered: Answered, done: Round) -> tuple[str, str, Hold | None]:
        """Who answered, as Events say it (for a WAIT: why nothing started), the rule that
        did, and the policy's hold; a question the policy failed is noted in `done`."""
        action, policy = answered.action, self.policy.name
        stage = action.stage if isinstance(action, Decision) else None
        if not answered.errors:
            rule = followed(self.policy)
            by = notices.decided_by(policy, following=rule)
            launching = isinstance(action, Decision) and action.idle_delay == 0
            # what a lookahead planner's last answer held a stage back for
            hold = None if launching else getattr(self.policy, "hold", None)
            return (by if stage is not None else notices.chose_wait(by)), rule, hold
        for failed, exc in answered.errors:
            self.note_error(failed.name, exc)
        first = answered.errors[0][1]
        illegal = getattr(first, "decision", None)
        named = illegal.stage if isinstance(illegal, Decision) else None
        later = tuple(_describe(exc) for _, exc in answered.errors[1:])
        fallback = None if answered.rule is None else answered.rule.name
        done.failures.append(Failure(policy, _describe(first), fallback, later, named or stage))
        if fallback is None:  # (the answer is WAIT: no stage but the one named)
            names = [r.name for r in self.fallbacks]
            return notices.all_rules_failed(policy, names), followed(self.policy), None
        by = notices.decided_by(policy, fallback)
        return (by if stage is not None else notices.chose_wait(by)), fallback, None

    def note_error(self, rule: str, exc: Exception, what: str = "decide") -> None:
        """Count the error; log its traceback the first time it is seen, repeats sparsely.
        `what` failed: ``decide`` (a fallback rule answered instead), ``plan`` or ``replay``."""
        self.metrics.policy_errors.labels(rule).inc()
        self.errors.note(rule, exc, what, _THEN[what])


_THEN = {
    "decide": "the next fallback rule answers instead (the PolicyError Event says which)",
    "plan": "it keeps following the policy it follows until the next plan",
    "replay": "it keeps following its candidate until the next round",
}


def post_round(
    done: Round, cluster: Cluster, event: Callable[..., object], reporter: Owner | None = None
) -> None:
    """Post the round's Events (`event(owner, type, reason, message)`): ``PolicyFollowed``
    of a portfolio's new candidate on the pool's `reporter` (None: logged only),
    ``Holding`` of a new hold on the held stage's workflow, and the Warning ``PolicyError``
    on the workflow of the stage each failed question was about (`Failure.stage`); when
    that is not known, on each workflow with a runnable stage, any of which may have been
    held back."""
    if done.followed is not None and reporter is not None:
        event(reporter, *notices.policy_followed(done.followed))
    if done.holding is not None:
        hold, by = done.holding
        event(hold.stage.job.payload.owner, *notices.held(hold, by))
    for failure in done.failures:
        notice = notices.policy_error(
            failure.policy, failure.error, failure.fallback, failure.fallback_errors
        )
        jobs = [failure.stage.job] if failure.stage is not None else cluster.jobs
        for job in jobs:
            if failure.stage is not None or job.runnable:
                event(job.payload.owner, *notice)
