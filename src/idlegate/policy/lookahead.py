"""The lookahead planner: policy improvement by simulating the candidates' futures.

`lookahead:BASE` is a scheduler in its own right and the teacher the learned policy is
distilled from. At a decision it forks the cluster (`Cluster.fork`), carries out each
candidate action on a fork, lets BASE decide everything after it for a horizon of H
seconds of M sampled futures, and picks the candidate with the lowest mean cost

    C(a) = (1/M) Σ_m [ ∫_{t₀}^{t₀+H} (jobs in system) dt + R(t₀ + H) ]   (`sim.rollout`)

This is one step of policy iteration: if the futures were exact and H infinite, the
planner would be at least as good as BASE, since BASE's own pick is always a candidate
(Bertsekas, "Rollout algorithms", 1997). With a finite horizon and sampled futures it is
an approximation of that, measured rather than assumed (`benchmarks/lookahead.py`).

Candidates (`LookaheadConfig`)
------------------------------
* the picks of BASE and of a few heuristics (`candidates`), each with its cap;
* WAIT, when some executor is busy (so the wait ends at a completion);
* for BASE's pick, when its stage has neither started nor idled: idle slots of
  d = r · l · g / G seconds, g = 1..G (the learned policy's idle levels), and with
  `idle_at_arrivals` = N (decision mode) slots ending at each of the first N arrivals
  of the first future within r · l (the true next arrivals under ``futures=oracle``);

deduplicated by what they do *now* (the stage, how many executors start, the delay), so
a decision where every candidate does the same thing costs no simulation at all.

Futures (`sample_futures`)
--------------------------
From the source `futures` (`policy.futures`): ``poisson`` (the default: the analytic
rule's Gamma–Poisson rate over the last `window` arrivals, each arrival a copy of a
recent job), ``conditional`` (an arrival model fitted on the arrivals seen: what
followed similar histories, by size class and lag, and the schedules of recurring
workflows), ``auto`` (the conditional model while its held-out log-likelihood beats
Poisson's) or ``oracle`` (the true remaining arrivals, which the simulator tells the
planner, `foresee`). Task durations come from the jobs' duration models
(`sim.durations.duration_model`: an operator workflow's are its measured durations,
else its estimates). Every candidate sees the same M futures and the same duration
seeds (common random numbers), so their difference is not drowned in sampling noise.

Spending less on a plan: `max_decisions` cuts BASE's rollout of each future after that
many decisions and compares every candidate over the horizon reached (an adaptive
horizon: BASE, the learned policy, costs most per decision); `race` drops, after the
first future, every candidate whose cost is more than that fraction above the best
one's, stopping its rollout as soon as its integral passes that bar (racing with common
random numbers; BASE is simulated last then, since it costs most). Above `plan_window`
jobs in the system, a plan forks only the learned policy's window of them
(`policy.bounded`: the oldest, newest and smallest launchable jobs) and the jobs
holding executors, so a plan with 1,000 queued workflows costs about what one with 60
does; the jobs left out wait through every candidate's future alike. All three are off
by default, so the planner (the shipped policy's teacher) plans as it always did;
`FAST_PLANNING` is the setting measured for an operator's pace (docs/research/lookahead.md).

Modes
-----
``switch`` (the default): at each arrival or completion the planner simulates each
candidate *policy* (BASE and `candidates`) running alone for the horizon and follows
the cheapest until the next such event (policy switching, Chang, Givan & Chong 2004:
with exact evaluation, at least as good as every policy it switches between).
``decision`` plans every decision as above; with sampled futures it did worse than its
base, with the true future a little better (`docs/research/lookahead.md`), so it is the mode to
use when the future is known well, e.g. a batch of jobs submitted together. When its
choice holds a stage back (an idle slot, or WAIT over BASE's launch) and its futures
are not Poisson, `hold` says for which expected arrivals (`policy.plans.Hold`: "3 short
workflows expected within 40 s (p = 0.8)"); the operator's Events quote it. Switch mode
chooses policies, not holds: its `hold` is always None.

Asynchronous planning (switch mode)
-----------------------------------
Switch mode is a fast *follower* and a slow *plan*. `decide` answers with the policy
followed now (`following`), at its speed; a plan says which policy to follow for one
job set (`job_set`). The steps are public, for a driver's planning worker:

    if planner.needs_plan(cluster):            # owner thread: the job set changed
        request = planner.request(cluster)     # owner thread: fork + futures (cheap)
        plan = planner.plan(request, budget)   # ANY one thread; budget: wall seconds
        planner.adopt(plan, cluster)           # owner thread: switch, or drop if stale

Threading rules. The *owner* thread is the one that changes the cluster and calls
`decide`; `needs_plan`, `request`, `adopt`, `decide` and `reset` run there only.
`plan` touches nothing but its request (a fork the owner no longer sees, frozen futures
and duration models) and the planner's own rollout schedulers (separate instances from
the followed ones), so it may run in another thread while the owner keeps deciding;
at most one `plan` per planner runs at a time. ONNX policies are safe in that thread:
each scheduler instance has its own onnxruntime session, and `InferenceSession.run` is
thread-safe anyway.

Staleness (`adopt`): a plan is for the job set it was requested for (`Plan.key`). If
the set changed meanwhile (a job arrived, finished or was removed), it is dropped
(False, `stats.dropped`) and the follower keeps its policy; `needs_plan` is then True,
so the worker plans again at once: a fresh plan is at most one plan's time away.
A plan that took longer than its `budget` (`Plan.overran`, timed by the planner's
`clock`) is abandoned the same way (`stats.overran`), not applied late: its choice was
for a moment that has passed. The job set has not changed, so no new plan starts until
it does (planning again at once would overrun again).

With ``planner=inline`` (the default) `decide` drives those steps itself at the first
decision after the job set changed; with `planning_delay` = d > 0 the switch takes
effect at the first decision at or after t + d (dropped if the job set changed in
between; the next plan starts then), the follower keeping its policy meanwhile: the
quality a worker needing d seconds per plan delivers. d = 0 is synchronous planning.
With ``planner=worker`` `decide` only follows: the driver's worker calls the steps.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from math import inf
from types import MappingProxyType
from typing import Any, Final, Literal

import numpy as np
from pydantic import ConfigDict, Field, StrictBool, StrictInt

from idlegate.config import Config, NonNegative, Positive
from idlegate.errors import IdlegateError, reject_unknown
from idlegate.policy.bounded import WindowConfig, select_window
from idlegate.policy.drf import effective_executors
from idlegate.policy.futures import FutureKind, KnownSource, OracleSource, make_source
from idlegate.policy.plans import (
    Hold,
    JobSet,
    Plan,
    PlannerStats,
    PlanRequest,
    changed_between,
    hold_of,
    job_set,
)
from idlegate.policy.spec import SchedulerSpec, parse_part
from idlegate.sim.admission_view import PoolView
from idlegate.sim.cluster import Cluster
from idlegate.sim.engine import JobArrival
from idlegate.sim.protocol import WAIT, Action, ClusterView, Decision, Job, Scheduler
from idlegate.sim.rollout import Forkable, Future, RolloutComparison, compare, planning_fork

SchedulerFactory = Callable[[], Scheduler]

FAST_PLANNING: Final[Mapping[str, Any]] = MappingProxyType(
    {"max_decisions": 100, "race": 0.05, "plan_window": 64}
)
"""`LookaheadConfig` options for planning at an operator's pace (docs/research/lookahead.md,
"Planning time": plans 12 times cheaper at p99 for about 2.5 % of mean JCT on its busiest
setting)."""


class LookaheadConfig(Config):
    """How far and how wide the planner looks (every field has a working default)."""

    model_config = ConfigDict(title="the lookahead planner")

    mode: Literal["decision", "switch"] = "switch"
    """``decision``: plan each decision; ``switch``: pick a policy at arrivals/completions."""
    horizon: Positive | None = None
    """H in seconds; None: `horizon_factor` × the mean job's length alone on the cluster."""
    horizon_factor: Positive = 4.0
    """With `horizon` None: H = factor × mean over recent jobs of max(CP, work / K)."""
    samples: StrictInt = Field(2, ge=1)
    """M: sampled futures per candidate."""
    candidates: tuple[str, ...] = ("fair", "srpt", "sjf-cp", "weighted-fair")
    """Heuristics whose picks are candidates (``switch``: the policies to switch between)."""
    wait: StrictBool = True
    """Offer WAIT when some executor is busy."""
    idle_levels: StrictInt = Field(4, ge=0)
    """G: idle candidates d = r·l·g/G, g = 1..G, for BASE's pick (0: none)."""
    idle_ratio: Positive = 1.0
    """r: the longest idle candidate is r times the stage's task length."""
    idle_at_arrivals: StrictInt = Field(0, ge=0)
    """``decision``: also idle candidates for BASE's pick that end at each of the first N
    arrivals of the first future within r·l ("wait for the job that is coming")."""
    terminal_weight: NonNegative = 1.0
    """w: weight of the cost-to-go estimate R at the horizon (0: none)."""
    window: StrictInt = Field(50, ge=1)
    """Recent arrivals behind the arrival-rate estimate and the job mix."""
    futures: FutureKind = "poisson"
    """Where futures come from: poisson, conditional, auto (conditional while it predicts
    better), expected, known (the scheduled arrivals told in advance, Poisson for the rest)
    or oracle (the true arrivals; simulator only). See `policy.futures`."""
    futures_history: str | None = None
    """conditional/auto: a history file (docs/workloads.md, `file`) fitted on as the past."""
    margin: NonNegative = 0.0
    """A candidate replaces the incumbent only if its cost is lower by this fraction. The
    incumbent is BASE's pick (``decision``) or the policy followed when the plan was
    requested (``switch``: hysteresis, since every switch moves executors)."""
    max_decisions: StrictInt | None = Field(None, ge=1)
    """Budget of BASE's decisions per rollout: a future where BASE uses it up before the
    horizon is compared over the shorter horizon it reached (None: the full horizon)."""
    race: NonNegative | None = None
    """After the first future, drop the candidates costing more than the best one's cost
    by this fraction, stopping each rollout once it is that far behind (None: every
    candidate sees every future to its horizon)."""
    plan_window: StrictInt | None = Field(None, ge=1)
    """Above this many jobs in the system, plans simulate only the learned policy's window
    of them (`policy.bounded`: the oldest, newest and smallest launchable jobs) and the
    jobs holding executors, so a plan's cost stays bounded (None: always every job)."""
    planning_delay: NonNegative = 0.0
    """``switch``, ``planner=inline``: simulated seconds from a plan's start to its switch
    (a planning worker's time per plan); 0: the switch is immediate (synchronous)."""
    planner: Literal["inline", "worker"] = "inline"
    """``inline``: `decide` plans (the simulator); ``worker``: `decide` only follows, and a
    planning worker calls `request`, `plan` and `adopt` (the operator; switch mode only)."""


def effect(view: ClusterView, action: Action) -> tuple[Any, ...]:
    """What `action` does now: WAIT, or (stage, executors started, idle delay)."""
    if not isinstance(action, Decision):
        return ("wait",)
    d = action
    if d.idle_delay > 0:
        return (d.stage.key, 0, d.idle_delay)
    job = d.stage.job
    n = min(view.free_executors, d.parallelism_cap - job.held, d.stage.remaining)
    if d.stage.need is not None:  # (a resource pool's: what fits, whatever the cap)
        n = min(n, d.stage.need.room())
    return (d.stage.key, n, 0.0)


class LookaheadScheduler:
    """`lookahead:BASE`: the rollout planner described in the module docstring."""

    needs_cluster = True
    """It forks the pool it is asked of: a pool's admission shows it the whole pool (a
    `PoolView`, whose fork holds the stages the question lets start), not one queue's view
    (`idlegate.sim.admission`)."""

    def __init__(
        self,
        base: SchedulerFactory,
        candidates: Mapping[str, SchedulerFactory],
        config: LookaheadConfig,
        *,
        name: str = "lookahead",
    ) -> None:
        _check_planner(config)
        self.name = name
        self.config = config
        first = base()
        # the followed instances decide on the owner's thread; the rollout instances are
        # the plan's alone (another thread may run it)
        self._followers: dict[str, Scheduler] = {first.name: first}
        self._rollout: dict[str, Scheduler] = {first.name: base()}
        for key, make in candidates.items():
            self._followers[key] = make()
            self._rollout[key] = make()
        self.base_name = first.name
        self._rng = np.random.default_rng(0)
        self.clock: Callable[[], float] = time.perf_counter
        """Wall seconds, for plan budgets (a test injects a fake clock)."""
        self.futures = make_source(config.futures, history=config.futures_history)
        """The future source (`policy.futures`)."""
        self.reset_state()

    def __repr__(self) -> str:
        return f"LookaheadScheduler({self.name!r}, {self.config!r})"

    @property
    def base(self) -> Scheduler:
        """BASE's followed instance (a safe rule when the planner fails)."""
        return self._followers[self.base_name]

    def reset_state(self) -> None:
        """Forget the run: follow BASE, no plan, no job seen."""
        self._seen: list[Job] = []
        self._next_id = 0
        self.futures.reset()
        self.following = self.base_name
        """Name of the policy `decide` follows now."""
        self.followed_since = 0.0
        """Cluster time `following` was adopted."""
        self.last_plan: Plan | None = None
        """The plan adopted last."""
        self._requested: JobSet | None = None
        self._pending: tuple[float, Plan] | None = None
        self.stats = PlannerStats()
        self.hold: Hold | None = None
        """Why the last decision holds a stage back for expected arrivals (decision mode,
        futures not Poisson: `policy.plans.Hold`), else None; what the operator's Events
        say of it."""

    def foresee(self, arrivals: Sequence[JobArrival]) -> None:
        """Arrivals known in advance: the simulator tells the run's (``futures=oracle``
        uses them all, ``known`` the scheduled ones)."""
        if isinstance(self.futures, OracleSource | KnownSource):
            self.futures.foresee(arrivals)

    def reset(self, rng: Any) -> None:
        """Start of a run: the planner's futures come from `rng` (the run's Generator)."""
        self._rng = rng
        for scheduler in self._followers.values():
            scheduler.reset(np.random.default_rng(rng.integers(2**63)))
        self.reset_state()

    # -- the decision -----------------------------------------------------------------

    def decide(self, view: ClusterView) -> Action:
        if not isinstance(view, Cluster | PoolView):
            raise IdlegateError(
                "the lookahead planner simulates futures on a copy of the cluster, so it "
                f"needs the whole pool as its view, got {type(view).__name__}"
            )
        self._observe(view)
        self.stats.decisions += 1
        self.hold = None
        if self.config.mode == "switch":
            if self.config.planner == "inline":
                self._plan_inline(view)
            action = self._followers[self.following].decide(view)
        else:
            action = self._decide_by_plan(view)
        if action is WAIT:
            self.stats.waits += 1
        elif isinstance(action, Decision) and action.idle_delay > 0:
            self.stats.idles += 1
        return action

    def _decide_by_plan(self, view: Forkable) -> Action:
        """Decision mode: the cheapest option, and its `hold` when it holds a stage back."""
        # futures before the options only when they name idle candidates: drawing
        # them at single-option decisions too would shift every other run's stream
        drawn = self._futures_now(view) if self.config.idle_at_arrivals else None
        options = self._options(view, drawn)
        if len(options) == 1:
            return options[0]
        drawn = drawn or self._futures_now(view)
        chosen = options[self._plan_decision(view, options, drawn)]
        if self.futures.informed:  # (Poisson futures know nothing of what is coming)
            self.hold = hold_of(view, options[0], chosen, drawn[1])
            self.stats.holds += self.hold is not None
        return chosen

    def _plan_inline(self, view: Forkable) -> None:
        """The simulator's planning worker: plans take `planning_delay` seconds."""
        delay = self.config.planning_delay
        if self._pending is not None and view.now >= self._pending[0]:
            ready, plan = self._pending
            self._pending = None
            if changed_between(view, plan.planned_at, ready):
                self._record(plan, adopted=False)
            else:
                self._switch(plan, ready)
        if self._pending is None and self.needs_plan(view):
            plan = self.plan(self.request(view))
            if delay == 0:
                self._switch(plan, view.now)
            else:
                self._pending = (view.now + delay, plan)

    # -- switch mode's planning steps (see "Asynchronous planning") -------------------

    def needs_plan(self, view: ClusterView) -> bool:
        """Owner thread: True when the job set changed since the last `request`."""
        return job_set(view) != self._requested

    def request(self, view: Forkable) -> PlanRequest:
        """Owner thread: what a plan of the present needs (a fork and sampled futures)."""
        self._observe(view)  # (arrivals while no executor was free were never decided on)
        key = job_set(view)
        self._requested = key
        horizon = self.horizon(view)
        futures = tuple(self.sample_futures(view, horizon))
        return PlanRequest(key, self._fork(view), self.following, futures, horizon, view.now)

    def plan(self, request: PlanRequest, budget: float | None = None) -> Plan:
        """Any one thread: simulate every policy on the request's futures; the cheapest.

        Touches only `request` and the planner's rollout schedulers (module docstring).
        With a `budget` (wall seconds), no future starts after it is spent: the plan is
        made from the futures simulated by then (at least the first), and if it still
        took longer than the budget it is marked `overran` (`adopt` abandons it).
        """
        clock = self.clock
        started, cpu = clock(), time.thread_time()
        names = list(self._rollout)
        if not request.futures:  # the source has none to offer (futures=expected): BASE
            return Plan(request.key, self.base_name, {}, (), 0, request.horizon, request.now, 0, 0)
        deadline = None if budget is None else started + budget
        found = self._compare(
            request.fork,
            request.futures,
            request.horizon,
            [(None, self._rollout[n]) for n in names],
            deadline,
        )
        best = self._cheapest(found.costs, found.raced_out, names.index(request.following))
        seconds = clock() - started
        return Plan(
            key=request.key,
            choice=names[best],
            costs=dict(zip(names, found.costs, strict=True)),
            raced_out=tuple(names[i] for i in found.raced_out),
            futures=found.futures,
            horizon=found.horizon,
            planned_at=request.now,
            seconds=seconds,
            cpu_seconds=time.thread_time() - cpu,
            overran=budget is not None and seconds > budget,
        )

    def adopt(self, plan: Plan, view: ClusterView) -> bool:
        """Owner thread: follow `plan`'s choice from now on, unless the job set changed
        since its request or the plan overran its budget (then it is dropped: False)."""
        if plan.overran or job_set(view) != plan.key:
            self.stats.overran += plan.overran
            self._record(plan, adopted=False)
            return False
        self._switch(plan, view.now)
        return True

    def _switch(self, plan: Plan, now: float) -> None:
        self._record(plan, adopted=True)
        self.last_plan = plan
        if plan.choice != self.following:
            self.stats.switches += 1
            self.following, self.followed_since = plan.choice, now

    def _record(self, plan: Plan, *, adopted: bool) -> None:
        s = self.stats
        s.planned += 1
        s.rollouts += sum(1 if n in plan.raced_out else plan.futures for n in plan.costs)
        s.changed += plan.choice != self.base_name
        s.dropped += not adopted
        s.plan_seconds.append(plan.seconds)
        s.plan_cpu_seconds.append(plan.cpu_seconds)

    # -- decision mode ----------------------------------------------------------------

    def _futures_now(self, view: Forkable) -> tuple[float, list[Future]]:
        """The horizon and the futures of a decision."""
        horizon = self.horizon(view)
        return horizon, self.sample_futures(view, horizon)

    def _plan_decision(
        self, view: Forkable, options: list[Action], drawn: tuple[float, list[Future]]
    ) -> int:
        """Index of the cheapest option: 0 (BASE's pick) unless another is cheaper by the
        margin; `drawn`: the decision's horizon and futures."""
        started, cpu = time.perf_counter(), time.thread_time()
        horizon, futures = drawn
        if not futures:  # the source has no future to offer (futures=expected): BASE's pick
            return 0
        policy = self._rollout[self.base_name]
        found = self._compare(self._fork(view), futures, horizon, [(a, policy) for a in options])
        best = self._cheapest(found.costs, found.raced_out)
        s = self.stats
        s.planned += 1
        s.rollouts += len(options) * found.futures - len(found.raced_out) * (found.futures - 1)
        s.changed += best != 0
        s.plan_seconds.append(time.perf_counter() - started)
        s.plan_cpu_seconds.append(time.thread_time() - cpu)
        return best

    def _options(
        self, view: Forkable, drawn: tuple[float, list[Future]] | None = None
    ) -> list[Action]:
        """BASE's pick first, then every candidate that does something else now
        (`drawn`: the decision's futures, whose first arrivals give idle candidates)."""
        base_pick = self.base.decide(view)
        options = [base_pick]
        seen = {effect(view, base_pick)}

        def offer(action: Action) -> None:
            key = effect(view, action)
            if key not in seen:
                seen.add(key)
                options.append(action)

        for name, scheduler in self._followers.items():
            if name != self.base_name:
                offer(scheduler.decide(view))
        if self.config.wait and view.free_executors < view.num_executors:
            offer(WAIT)
        if isinstance(base_pick, Decision):
            self._offer_idle(base_pick, offer, view.now, drawn[1] if drawn else [])
        return options

    def _offer_idle(
        self,
        pick: Decision,
        offer: Callable[[Action], None],
        now: float,
        futures: Sequence[Future],
    ) -> None:
        stage, levels = pick.stage, self.config.idle_levels
        if pick.idle_delay > 0 or stage.launched or stage.delayed:
            return
        longest = self.config.idle_ratio * stage.duration
        for g in range(1, levels + 1):
            offer(Decision(stage, pick.parallelism_cap, longest * g / levels))
        if futures and self.config.idle_at_arrivals:
            times = sorted({a.time for a in futures[0].arrivals if now < a.time <= now + longest})
            for t in times[: self.config.idle_at_arrivals]:
                offer(Decision(stage, pick.parallelism_cap, t - now))

    # -- futures ----------------------------------------------------------------------

    def _observe(self, view: Forkable) -> None:
        """Remember the jobs that arrived since the last decision (the job mix)."""
        for job in view.jobs:
            if job.id >= self._next_id:
                self._seen.append(job)
                self.futures.observe(job)
        if view.jobs:
            self._next_id = max(self._next_id, view.jobs[-1].id + 1)
        window = self.config.window
        if len(self._seen) > 2 * window:
            del self._seen[:-window]

    def horizon(self, view: Forkable) -> float:
        """H: the configured horizon, or `horizon_factor` × the mean recent job length."""
        if self.config.horizon is not None:
            return self.config.horizon
        recent = self._seen[-self.config.window :]
        k = effective_executors(view, [j.dag for j in recent])
        lengths = [max(j.critical_path, j.total_work / k) for j in recent] or [1.0]
        return self.config.horizon_factor * float(np.mean(lengths))

    def sample_futures(self, view: Forkable, horizon: float) -> list[Future]:
        """M futures of arrivals over (now, now + horizon], each with a duration seed."""
        recent = self._seen[-self.config.window :]
        return self.futures.futures(view, recent, horizon, self.config.samples, self._rng)

    def _fork(self, view: Forkable) -> Cluster:
        """The plan's fork: of every job, or above `plan_window` jobs of the window's."""
        threshold = self.config.plan_window
        if threshold is None or len(view.jobs) <= threshold:
            return planning_fork(view)
        visible, _ = select_window(view, _PLAN_WINDOW)
        return planning_fork(view, visible)

    def _compare(
        self,
        fork: Cluster,
        futures: Sequence[Future],
        horizon: float,
        plans: list[tuple[Action | None, Scheduler]],
        deadline: float | None = None,
    ) -> RolloutComparison:
        cfg = self.config
        return compare(
            fork,
            futures,
            horizon,
            plans,
            terminal_weight=cfg.terminal_weight,
            max_decisions=cfg.max_decisions,
            race=cfg.race,
            out_of_time=None if deadline is None else lambda: self.clock() > deadline,
        )

    def _cheapest(self, costs: list[float], raced_out: list[int], incumbent: int = 0) -> int:
        """The cheapest plan's index among those not raced out: the incumbent's (BASE's
        pick, or the policy followed) unless another is cheaper by the margin."""
        ranked = [inf if i in raced_out else c for i, c in enumerate(costs)]
        best = int(np.argmin(ranked))
        if ranked[best] >= ranked[incumbent] * (1.0 - self.config.margin):
            best = incumbent
        return best


_PLAN_WINDOW = WindowConfig()
"""Which jobs a plan above `plan_window` jobs simulates (the learned policy's default)."""


def make_lookahead(
    spec: SchedulerSpec, build: Callable[[str | SchedulerSpec], Scheduler], /, **options: Any
) -> LookaheadScheduler:
    """Build ``lookahead:BASE`` (`spec`) with its and the keyword options: every
    `LookaheadConfig` field and ``name``; `build` builds BASE and the candidates
    (`idlegate.policy.make_scheduler`, which builds every spec kind)."""
    config, options, name = planner_config(spec, options)
    base = spec.base or SchedulerSpec("sjf-cp")
    title = _title(spec, options, base)
    # BASE is always a candidate; simulating it twice would only cost time
    text = base.format()
    candidates = {c: partial(build, c) for c in config.candidates if c != text}
    return LookaheadScheduler(partial(build, base), candidates, config, name=name or title)


def planner_config(
    spec: SchedulerSpec, options: Mapping[str, Any]
) -> tuple[LookaheadConfig, dict[str, Any], str | None]:
    """(config, options, ``name``) of `spec` and the keyword `options`; nothing is built."""
    given = spec.keywords(options)
    name = given.pop("name", None)
    reject_unknown(given, LookaheadConfig.model_fields, "the lookahead planner")
    if "candidates" in given and isinstance(given["candidates"], str):
        given["candidates"] = tuple(c for c in given["candidates"].split("+") if c)
    config = LookaheadConfig(**given)
    for candidate in config.candidates:  # an error names the candidate not understood
        parse_part(candidate, "the lookahead planner's candidate")
    _check_planner(config)
    return config, given, name


def _check_planner(config: LookaheadConfig) -> None:
    if config.planner == "worker" and config.mode != "switch":
        raise IdlegateError(
            "the lookahead planner plans in a worker only in switch mode "
            "(decision mode plans every decision itself); use mode=switch or planner=inline"
        )


def _title(spec: SchedulerSpec, options: Mapping[str, Any], base: SchedulerSpec) -> str:
    """The planner's name: ``lookahead?OPTIONS:BASE`` with the spec's options and the
    keyword ones (rows of two planners that differ only in options must differ)."""
    given = {k: v for k, v in spec.params if k != "name"}
    for key, value in options.items():
        if key not in given:  # the keyword ones (the spec's are kept as written)
            given[key] = _text(value)
    query = "&".join(f"{k}={v}" for k, v in given.items())
    return f"lookahead{'?' + query if query else ''}:{base.format()}"


def _text(value: Any) -> str:
    """A keyword option as a spec's query writes it (candidates joined with ``+``)."""
    if isinstance(value, tuple | list):
        return "+".join(str(v) for v in value)
    if value is None or isinstance(value, bool):
        return str(value).lower()
    return str(value)
