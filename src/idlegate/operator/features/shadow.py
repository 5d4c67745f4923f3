"""Shadow mode: a second policy (``--shadow SPEC``) answers every decision beside the
active one, gating nothing. What it shows and costs is in deploy/README.md ("Hot reload
and shadow mode"). How:

* :meth:`Shadow.begin`, in the event loop as a round starts, takes a fork of the cluster
  (`idlegate.sim.rollout.planning_fork` where futures are simulated); the Decider adds each
  answer the round applied, and :meth:`Shadow.submit` hands the round to the worker thread;
* the worker replays the round on the fork: at each answer it asks the shadow, compares
  what the two do *now* (`idlegate.policy.lookahead.effect`), then applies the active
  answer, so the next question is asked in the state the cluster went through.

Only the fork is on the decision path; rounds beyond `Settings.shadow_backlog` are not
compared (counted). ``idlegate_shadow_expected_change`` comes from the first of:

1. the active lookahead planner's last plan, when it simulated the shadow;
2. the shadow's own last plan, when it is a switch-mode planner (planning inline in the
   worker) and simulated the active policy's followed rule;
3. with `Settings.shadow_estimate` and both specs known, an estimator: a planner over the
   active spec whose one candidate is the shadow spec, planned in the worker at each
   change of the set of workflows (`idlegate.policy.lookahead.FAST_PLANNING`, no racing).

When none applies the gauge is NaN (the log says so at the start).
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING

import numpy as np

from idlegate.errors import IllegalDecisionError
from idlegate.operator.core.decider import ErrorLog, followed
from idlegate.operator.decisions import build_scheduler
from idlegate.operator.features.planning import is_planner
from idlegate.sim.cluster import Cluster
from idlegate.sim.protocol import WAIT, Action, Decision, Job, Scheduler

if TYPE_CHECKING:
    from idlegate.api.settings import Settings
    from idlegate.operator.metrics import Metrics
    from idlegate.policy.lookahead import LookaheadScheduler, Plan

log = logging.getLogger(__name__)

SHADOW = "(shadow)"
"""The shadow's name among the estimator's candidates."""
_THEN = "that decision is not compared; the active policy is not affected"


@dataclass
class ShadowRound:
    """One scheduling round as the shadow replays it."""

    fork: Cluster
    """The cluster as the round began (the worker's own copy)."""
    rule: str
    """The rule the active policy followed (`decisions.followed`)."""
    estimate: float | None
    """The active planner's estimate (source 1), if any."""
    actions: list[Action] = field(default_factory=list)
    """The answers the round applied, in order (the Decider adds them)."""


def plan_estimate(plan: Plan | None, shadow: str, active: str) -> float | None:
    """C(shadow) / C(active) − 1 from `plan`'s costs, or None when it lacks either."""
    costs = {} if plan is None else plan.costs
    if costs.get(active, 0.0) <= 0 or shadow not in costs:
        return None
    return costs[shadow] / costs[active] - 1.0


def estimator(active: str | None, shadow: str) -> LookaheadScheduler:
    """The estimator of source 3 for the specs `active` (None: ``default``) and `shadow`:
    the planner over the active spec with the shadow spec as candidate."""
    from idlegate.policy.lookahead import FAST_PLANNING, LookaheadConfig, LookaheadScheduler

    options = {**FAST_PLANNING, "race": None, "candidates": (SHADOW,)}
    return LookaheadScheduler(
        lambda: build_scheduler(active),
        {SHADOW: lambda: build_scheduler(shadow)},
        LookaheadConfig(**options),
        name="shadow-estimator",
    )


class Shadow:
    """The shadow policy, compared with the active one in one worker thread."""

    def __init__(
        self,
        policy: Scheduler,
        metrics: Metrics,
        *,
        backlog: int,
        seed: int = 0,
        estimate: Callable[[], LookaheadScheduler] | None = None,
    ) -> None:
        self.policy = policy
        self.metrics = metrics
        self.backlog = backlog
        """Rounds that may wait for the worker (`Settings.shadow_backlog`)."""
        self.seed = seed
        self.agreed = 0
        self.compared = 0
        self.errors = ErrorLog()
        self._estimate = estimate
        self._estimator: LookaheadScheduler | None = None
        self._replacement: Scheduler | None = None
        self._pending: deque[Future[None]] = deque()
        self._executor = ThreadPoolExecutor(1, thread_name_prefix="idlegate-shadow")
        self._closed = False
        policy.reset(np.random.default_rng(seed))
        metrics.shadow_expected_change.set(math.nan)  # (until an estimate is made)

    def source(self, active: Scheduler) -> str:
        """Where the estimated difference comes from (the module docstring's sources)."""
        if is_planner(active):
            return f"the active planner's plans (when {self.policy.name} is a candidate)"
        if is_planner(self.policy):
            return f"the shadow planner's plans (when {followed(active)} is a candidate)"
        if self._estimate is not None:
            return "rollouts of both policies at each change of the set of workflows"
        return "nowhere (no planner, no estimator): idlegate_shadow_expected_change is NaN"

    # -- the event loop -------------------------------------------------------------------

    def begin(self, cluster: Cluster, active: Scheduler) -> ShadowRound | None:
        """Event loop, before a round's first question: its fork, or None when the round
        asks nothing or the worker's backlog is full (counted)."""
        if self._closed or not cluster.can_schedule():
            return None
        while self._pending and self._pending[0].done():
            self._pending.popleft()
        if len(self._pending) >= self.backlog:
            self.metrics.shadow_skipped.inc()
            return None
        from idlegate.policy.lookahead import LookaheadScheduler
        from idlegate.sim.rollout import planning_fork

        estimate = None
        if isinstance(active, LookaheadScheduler):
            estimate = plan_estimate(active.last_plan, self.policy.name, active.following)
        # duration models are copied only for what simulates futures (a planner, the
        # estimator): a heuristic's or an ONNX policy's answer reads the state alone
        needs = self._estimate is not None or is_planner(self.policy)
        fork = planning_fork(cluster) if needs else cluster.fork()
        return ShadowRound(fork, followed(active), estimate)

    def submit(self, shadowed: ShadowRound, now: float) -> None:
        """Event loop, after the round: hand it to the worker (a round without answers is
        dropped)."""
        if self._closed or not shadowed.actions:
            return
        self._pending.append(self._executor.submit(self._replay, shadowed, now))

    def replace(self, policy: Scheduler) -> None:
        """Use `policy` as the shadow from the worker's next round (a reload)."""
        self._replacement = policy

    def active_changed(self) -> None:
        """The active policy was replaced (a reload): the estimator is built again."""
        self._estimator = None

    async def idle(self) -> None:
        """Until every round handed to the worker is replayed (tests)."""
        while self._pending:
            await asyncio.wrap_future(self._pending.popleft())

    def close(self) -> None:
        """Stop: rounds not started are dropped; the one running ends with its thread."""
        self._closed = True
        self._executor.shutdown(wait=False, cancel_futures=True)

    # -- the worker -----------------------------------------------------------------------

    def _replay(self, shadowed: ShadowRound, now: float) -> None:
        """Worker: compare the shadow at each answer of the round, and the estimate."""
        replacement, self._replacement = self._replacement, None
        if replacement is not None:
            replacement.reset(np.random.default_rng(self.seed))
            self.policy, self._estimator = replacement, None
        fork = shadowed.fork
        try:
            fork.advance(now)
            estimate = shadowed.estimate
            if estimate is None:
                estimate = self._estimated(fork)
            jobs = {job.id: job for job in fork.jobs}
            for action in shadowed.actions:
                active = _on(jobs, action)
                self._compare(fork, active)
                if isinstance(active, Decision):
                    fork.apply(active, now)
            if estimate is None and is_planner(self.policy):  # (it planned as it decided)
                plan = getattr(self.policy, "last_plan", None)
                estimate = plan_estimate(plan, followed(self.policy), shadowed.rule)
        except Exception as exc:  # the worker never stops: log it as a failure of the round
            self.errors.note("shadow-replay", exc, "replay a round", "that round is dropped")
            return
        if estimate is not None:
            self.metrics.shadow_expected_change.set(estimate)
        if self.compared:
            self.metrics.shadow_agreement.set(self.agreed / self.compared)

    def _compare(self, fork: Cluster, active: Action) -> None:
        """The shadow's answer at `fork`'s state against the active `active`, counted."""
        from idlegate.policy.lookahead import effect

        policy = self.policy
        try:
            ours = policy.decide(fork)
            if isinstance(ours, Decision):
                fork.check(ours)
            elif ours is not WAIT:
                raise IllegalDecisionError(f"decide() returned {ours!r}, not a Decision or WAIT")
        except Exception as exc:  # whatever the shadow does, the active policy goes on
            self.metrics.shadow_errors.inc()
            self.errors.note(policy.name, exc, "decide as the shadow", _THEN)
            return
        applied = getattr(policy, "applied", None)
        if callable(applied):  # (a windowed ONNX policy re-reads the job the cluster changed)
            applied(active)
        agree = effect(fork, ours) == effect(fork, active)
        self.compared += 1
        self.agreed += agree
        self.metrics.shadow_decisions.labels(str(agree).lower()).inc()

    def _estimated(self, fork: Cluster) -> float | None:
        """Worker: the estimator's estimate (source 3) when the set of workflows changed
        since its last plan, else None."""
        if self._estimate is None or is_planner(self.policy):
            return None
        if self._estimator is None:
            self._estimator = self._estimate()
            self._estimator.reset(np.random.default_rng(self.seed))
        planner = self._estimator
        if not planner.needs_plan(fork):
            return None
        planner.decide(fork)  # (it plans inline; the fork is only read)
        return plan_estimate(planner.last_plan, SHADOW, planner.base_name)


def _on(jobs: dict[int, Job], action: Action) -> Action:
    """`action` (on the live cluster's stage) pointed at the fork's copy of that stage."""
    if not isinstance(action, Decision):
        return action
    job_id, index = action.stage.key
    stage = jobs[job_id].stages[index]
    return Decision(stage, action.parallelism_cap, action.idle_delay)


def make_shadow(settings: Settings, metrics: Metrics) -> Shadow | None:
    """The shadow of ``--shadow`` (None without one); IdlegateError if its spec or model
    is bad, as for ``--scheduler``. It has the estimator (source 3) when
    `Settings.shadow_estimate` is on and the active policy is given by its spec."""
    if settings.shadow is None:
        return None
    policy = build_scheduler(settings.shadow)
    estimate = None
    if settings.shadow_estimate and settings.scheduler is None:
        estimate = partial(estimator, settings.policy, settings.shadow)
    backlog, seed = settings.shadow_backlog, settings.seed
    return Shadow(policy, metrics, backlog=backlog, seed=seed, estimate=estimate)
