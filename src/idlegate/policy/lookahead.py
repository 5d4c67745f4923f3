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
  d = r · l · g / G seconds, g = 1..G (the learned policy's idle levels);

deduplicated by what they do *now* (the stage, how many executors start, the delay), so
a decision where every candidate does the same thing costs no simulation at all.

Futures (`sample_futures`)
--------------------------
The true future is never used. Arrivals after now form a Poisson process whose rate is
the Gamma–Poisson estimate of the analytic rule over the last `window` arrivals
(`policy.analytic.estimate_arrivals`); each arrival is a copy of a uniformly drawn job
among the last `window` jobs seen (its DAG and duration model). Task durations come from
the jobs' duration models. Every candidate sees the same M futures and the same duration
seeds (common random numbers), so their difference is not drowned in sampling noise.

Modes
-----
``switch`` (the default): at each arrival or completion the planner simulates each
candidate *policy* (BASE and `candidates`) running alone for the horizon and follows
the cheapest until the next such event (policy switching, Chang, Givan & Chong 2004:
with exact evaluation, at least as good as every policy it switches between).
``decision`` plans every decision as above; with sampled futures it did worse than its
base, with the true future a little better (`docs/lookahead.md`), so it is the mode to
use when the future is known well, e.g. a batch of jobs submitted together.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
from pydantic import ConfigDict, Field, StrictBool, StrictInt

from idlegate.config import Config, NonNegative, Positive
from idlegate.errors import IdlegateError, reject_unknown
from idlegate.policy.analytic import AnalyticIdleConfig, estimate_arrivals
from idlegate.policy.spec import SchedulerSpec
from idlegate.sim.cluster import Cluster
from idlegate.sim.engine import JobArrival
from idlegate.sim.protocol import WAIT, Action, ClusterView, Decision, Job, Scheduler
from idlegate.sim.rollout import Future, rollout_cost

SchedulerFactory = Callable[[], Scheduler]


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
    terminal_weight: NonNegative = 1.0
    """w: weight of the cost-to-go estimate R at the horizon (0: none)."""
    window: StrictInt = Field(50, ge=1)
    """Recent arrivals behind the arrival-rate estimate and the job mix."""
    margin: NonNegative = 0.0
    """A candidate replaces BASE's pick only if its cost is lower by this fraction."""


@dataclass
class PlannerStats:
    """What the planner did in a run (for reports and the decision-time benchmark)."""

    decisions: int = 0
    planned: int = 0
    """Decisions where candidates differed, so futures were simulated."""
    rollouts: int = 0
    changed: int = 0
    """Planned decisions where the planner overruled BASE."""
    waits: int = 0
    idles: int = 0
    plan_seconds: list[float] = field(default_factory=list)
    """Wall seconds of each planned decision."""


def effect(view: ClusterView, action: Action) -> tuple[Any, ...]:
    """What `action` does now: WAIT, or (stage, executors started, idle delay)."""
    if action is WAIT:
        return ("wait",)
    d: Decision = action  # type: ignore[assignment]
    if d.idle_delay > 0:
        return (d.stage.key, 0, d.idle_delay)
    job = d.stage.job
    n = min(view.free_executors, d.parallelism_cap - job.held, d.stage.remaining)
    return (d.stage.key, n, 0.0)


class LookaheadScheduler:
    """`lookahead:BASE`: the rollout planner described in the module docstring."""

    def __init__(
        self,
        base: SchedulerFactory,
        candidates: dict[str, SchedulerFactory],
        config: LookaheadConfig,
        *,
        name: str = "lookahead",
    ) -> None:
        self.name = name
        self.config = config
        self._base = base()
        self._base_rollout = base()
        self._candidates = {key: make() for key, make in candidates.items()}
        self._candidates_rollout = {key: make() for key, make in candidates.items()}
        self._rng = np.random.default_rng(0)
        self._seen: list[Job] = []
        self._next_id = 0
        self._current: Scheduler = self._base
        self._plan_key: tuple[int, ...] | None = None
        self.stats = PlannerStats()

    def __repr__(self) -> str:
        return f"LookaheadScheduler({self.name!r}, {self.config!r})"

    def reset(self, rng: Any) -> None:
        """Start of a run: the planner's futures come from `rng` (the run's Generator)."""
        self._rng = rng
        self._base.reset(np.random.default_rng(rng.integers(2**63)))
        for scheduler in self._candidates.values():
            scheduler.reset(np.random.default_rng(rng.integers(2**63)))
        self._seen, self._next_id = [], 0
        self._current, self._plan_key = self._base, None
        self.stats = PlannerStats()

    # -- the decision -----------------------------------------------------------------

    def decide(self, view: ClusterView) -> Action:
        if not isinstance(view, Cluster):
            raise IdlegateError(
                "the lookahead planner simulates futures on a copy of the cluster, so it "
                f"needs the Cluster itself as its view, got {type(view).__name__}"
            )
        self._observe(view)
        self.stats.decisions += 1
        if self.config.mode == "switch":
            action = self._decide_switch(view)
        else:
            options = self._options(view)
            best = (
                0
                if len(options) == 1
                else self._plan(view, [(a, self._base_rollout) for a in options])
            )
            action = options[best]
        if action is WAIT:
            self.stats.waits += 1
        elif action.idle_delay > 0:  # type: ignore[union-attr]
            self.stats.idles += 1
        return action

    def _decide_switch(self, view: Cluster) -> Action:
        """Re-plan when the set of jobs changed, then let the chosen policy decide."""
        key = tuple(j.id for j in view.jobs)
        if key != self._plan_key:
            self._plan_key = key
            plans = [(None, p) for p in (self._base_rollout, *self._candidates_rollout.values())]
            best = self._plan(view, plans)
            self._current = self._base if best == 0 else list(self._candidates.values())[best - 1]
        return self._current.decide(view)

    def _plan(self, view: Cluster, plans: list[tuple[Action | None, Scheduler]]) -> int:
        """Index of the cheapest plan: 0 (BASE's) unless another is cheaper by the margin."""
        started = time.perf_counter()
        costs = self._evaluate(view, plans)
        best = int(np.argmin(costs))
        if costs[best] >= costs[0] * (1.0 - self.config.margin):
            best = 0
        s = self.stats
        s.planned += 1
        s.changed += best != 0
        s.plan_seconds.append(time.perf_counter() - started)
        return best

    def _options(self, view: Cluster) -> list[Action]:
        """BASE's pick first, then every candidate that does something else now."""
        base_pick = self._base.decide(view)
        options = [base_pick]
        seen = {effect(view, base_pick)}

        def offer(action: Action) -> None:
            key = effect(view, action)
            if key not in seen:
                seen.add(key)
                options.append(action)

        for scheduler in self._candidates.values():
            offer(scheduler.decide(view))
        if self.config.wait and view.free_executors < view.num_executors:
            offer(WAIT)
        if isinstance(base_pick, Decision):
            self._offer_idle(base_pick, offer)
        return options

    def _offer_idle(self, pick: Decision, offer: Callable[[Action], None]) -> None:
        stage, levels = pick.stage, self.config.idle_levels
        if levels == 0 or pick.idle_delay > 0 or stage.launched or stage.delayed:
            return
        unit = self.config.idle_ratio * stage.duration / levels
        for g in range(1, levels + 1):
            offer(Decision(stage, pick.parallelism_cap, unit * g))

    # -- futures ----------------------------------------------------------------------

    def _observe(self, view: Cluster) -> None:
        """Remember the jobs that arrived since the last decision (the job mix)."""
        for job in view.jobs:
            if job.id >= self._next_id:
                self._seen.append(job)
        if view.jobs:
            self._next_id = max(self._next_id, view.jobs[-1].id + 1)
        window = self.config.window
        if len(self._seen) > 2 * window:
            del self._seen[:-window]

    def horizon(self, view: Cluster) -> float:
        """H: the configured horizon, or `horizon_factor` × the mean recent job length."""
        if self.config.horizon is not None:
            return self.config.horizon
        recent = self._seen[-self.config.window :]
        k = view.num_executors
        lengths = [max(j.critical_path, j.total_work / k) for j in recent] or [1.0]
        return self.config.horizon_factor * float(np.mean(lengths))

    def sample_futures(self, view: Cluster, horizon: float) -> list[Future]:
        """M futures of arrivals over (now, now + horizon], each with a duration seed."""
        cfg = self.config
        recent = self._seen[-cfg.window :]
        rng = self._rng
        futures = []
        rate = 0.0
        if recent and view.arrival_log:
            rate = estimate_arrivals(
                view.arrival_log, view.now, view.num_executors, _ARRIVAL_CONFIG
            ).rate
        for m in range(cfg.samples):
            arrivals: list[JobArrival] = []
            t = view.now
            while rate > 0:
                t += float(rng.exponential(1.0 / rate))
                if t > view.now + horizon:
                    break
                job = recent[int(rng.integers(len(recent)))]
                arrivals.append(JobArrival(t, f"future-{m}-{len(arrivals)}", job.dag, job.payload))
            futures.append(Future(tuple(arrivals), int(rng.integers(2**63))))
        return futures

    def _evaluate(self, view: Cluster, plans: list[tuple[Action | None, Scheduler]]) -> list[float]:
        """Mean rollout cost of each (first action, policy after it) over common futures."""
        horizon = self.horizon(view)
        futures = self.sample_futures(view, horizon)
        weight = self.config.terminal_weight
        costs = []
        for first, policy in plans:
            total = 0.0
            for future in futures:
                total += rollout_cost(
                    view,
                    policy,
                    future,
                    horizon,
                    first=first,
                    terminal_weight=weight,
                    rng_seed=future.seed,
                )
            costs.append(total / len(futures))
        self.stats.rollouts += len(plans) * len(futures)
        return costs


_ARRIVAL_CONFIG = AnalyticIdleConfig()
"""The arrival-rate estimate's prior (the analytic rule's defaults; window set per call)."""


def make_lookahead(spec: SchedulerSpec, /, **options: Any) -> LookaheadScheduler:
    """Build ``lookahead:BASE`` (`spec`) with its and the keyword options: every
    `LookaheadConfig` field and ``name``."""
    from idlegate.policy import make_scheduler  # the builder of every spec kind

    options = spec.keywords(options)
    name = options.pop("name", None)
    reject_unknown(options, LookaheadConfig.model_fields, "the lookahead planner")
    if "candidates" in options and isinstance(options["candidates"], str):
        options["candidates"] = tuple(c for c in options["candidates"].split("+") if c)
    config = LookaheadConfig(**options)
    base = spec.base or SchedulerSpec("sjf-cp")
    # BASE is always a candidate; simulating it twice would only cost time (a bad spec
    # fails when the planner builds its schedulers, with the spec's own message)
    text = base.format()
    candidates = {c: (lambda c=c: make_scheduler(c)) for c in config.candidates if c != text}
    return LookaheadScheduler(
        lambda: make_scheduler(base), candidates, config, name=name or f"lookahead:{text}"
    )
