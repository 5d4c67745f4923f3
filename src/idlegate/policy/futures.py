"""What arrives next: the lookahead planner's future sources, and the arrival model behind them.

A planner's futures (`policy.lookahead`, `LookaheadConfig.futures`) come from a *source*:

* ``poisson`` (the default): arrivals after now form a Poisson process whose rate is the
  analytic rule's Gamma–Poisson estimate over the recent arrivals
  (`sim.forecast_arrivals.poisson_futures`, which a forecast's replays invent too), each
  a copy of a uniformly drawn recent job.
  It cannot know that short jobs follow long ones.
* ``conditional``: the `ConditionalModel` (`policy.arrival_model`: what followed similar
  recent histories, by size class and lag, and the schedules of recurring workflows),
  fitted on the arrivals seen so far.
* ``auto``: the conditional model when its held-out log-likelihood beats the Poisson
  model's on the recent arrivals (`Selector`), else ``poisson``.
* ``expected``: one future, the conditional model's *expected* arrivals
  (`ConditionalModel.expected`: of each type its mean count, at median times), while
  the model beats Poisson as in ``auto``; else none, and the planner keeps BASE's pick
  (a future without arrivals would undo every idle slot of an idling BASE). No sampling
  noise between candidates, and its arrival times are the idle candidates of
  `LookaheadConfig.idle_at_arrivals`.
* ``known``: the arrivals known in advance (the upcoming runs of cron workflows, which
  the simulator tells the planner, `foresee`, as the operator can from its
  DagCronWorkflows), with Poisson futures of the others (ad-hoc jobs) around them.
* ``oracle``: the workload's true remaining arrivals, one future (the simulator tells the
  planner them, `foresee`): the ceiling of any model, and the teacher of distillation.

Selection by evidence (`Selector`): each model is scored on every arrival interval by
the model fitted before it (prequential held-out log-likelihood, Dawid 1984); the
conditional model's futures are used while its score over the last `score_window`
arrivals beats the Poisson model's by `margin` nats per arrival.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from bisect import insort
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from idlegate.errors import IdlegateError
from idlegate.policy.arrival_model import Arrival, ConditionalModel, FuturesConfig, stem
from idlegate.sim.durations import duration_model
from idlegate.sim.engine import JobArrival
from idlegate.sim.forecast_arrivals import poisson_futures
from idlegate.sim.protocol import Job
from idlegate.sim.rollout import Forkable, Future

FutureKind = Literal["poisson", "conditional", "auto", "expected", "known", "oracle"]


# -- selection by evidence ----------------------------------------------------------------


@dataclass
class Selector:
    """The conditional model and its prequential duel with Poisson (module docstring).

    `update` scores the arrivals since the last update under the models fitted before
    them, then refits: every score is out of sample.
    """

    model: ConditionalModel
    scores: list[tuple[float, float, int]] = field(default_factory=list)
    """Per update: (conditional log p, Poisson log p, arrivals scored)."""
    fitted_at: float | None = None
    fitted_on: int = 0

    def update(self, arrivals: Sequence[Arrival], now: float) -> None:
        """Score (fitted_at, now] and refit, when arrivals came since the last fit."""
        if len(arrivals) == self.fitted_on or len(arrivals) < self.model.config.min_arrivals:
            return
        if self.fitted_at is not None and now > self.fitted_at:
            new = sum(1 for a in arrivals if self.fitted_at < a.time <= now)
            self.scores.append(
                (
                    self.model.log_likelihood(arrivals, self.fitted_at, now),
                    self.model.poisson_log_likelihood(arrivals, self.fitted_at, now),
                    new,
                )
            )
        self.model.fit(arrivals, now)
        self.fitted_at, self.fitted_on = now, len(arrivals)

    def advantage(self) -> float | None:
        """Mean nats per arrival the conditional model gained over Poisson on the last
        `score_window` arrivals scored (None: fewer scored than half of that)."""
        gained, n = 0.0, 0
        for cond, pois, count in reversed(self.scores):
            if n >= self.model.config.score_window:
                break
            gained, n = gained + cond - pois, n + count
        if n < self.model.config.score_window / 2:
            return None
        return gained / n

    def conditional_wins(self) -> bool:
        """True when the conditional model beat Poisson by the margin (`auto`)."""
        gain = self.advantage()
        return gain is not None and gain > self.model.config.margin


# -- the planner's future sources ---------------------------------------------------------


class FutureSource(ABC):
    """Where a lookahead planner's futures come from (module docstring). A source that
    keeps no state leaves `reset` and `observe` as they are here."""

    informed: bool = False
    """Whether the futures drawn last carry what the source knows of the arrivals (a
    model's, known or true ones), so that a hold for them can be explained
    (`policy.plans.hold_of`); False for Poisson draws, which know nothing of what comes
    after what."""

    def reset(self) -> None:  # noqa: B027 (a stateless source has nothing to forget)
        """A new run: forget what was seen."""

    def observe(self, job: Job) -> None:  # noqa: B027 (a stateless source ignores jobs)
        """A job arrived (called once per job, in arrival order)."""

    @abstractmethod
    def futures(
        self,
        view: Forkable,
        recent: Sequence[Job],
        horizon: float,
        samples: int,
        rng: np.random.Generator,
    ) -> list[Future]:
        """Futures of arrivals over (now, now + horizon], each with a duration seed; none
        when the source has no future to offer (the planner then keeps BASE's pick)."""


class PoissonSource(FutureSource):
    """``futures=poisson``: `poisson_futures`."""

    def futures(
        self,
        view: Forkable,
        recent: Sequence[Job],
        horizon: float,
        samples: int,
        rng: np.random.Generator,
    ) -> list[Future]:
        return list(poisson_futures(view, recent, horizon, samples, rng))


def _content(job: Job | JobArrival) -> tuple[Any, Any]:
    """A template's (DAG, duration model): of a job seen, or of a history's arrival."""
    if isinstance(job, JobArrival):
        return job.dag, job.durations
    return job.dag, duration_model(job.payload)


def _future(
    drawn: Sequence[tuple[float, Any]],
    m: int,
    contents: dict[int, tuple[Any, Any]],
    rng: np.random.Generator,
) -> Future:
    """Future `m` of a plan from a model's (time, job to copy); `contents` holds each
    template's (DAG, duration model), frozen once per plan (the plan may run in another
    thread)."""
    arrivals = []
    for i, (t, job) in enumerate(drawn):
        if id(job) not in contents:
            contents[id(job)] = _content(job)
        arrivals.append(JobArrival(t, f"future-{m}-{i}", *contents[id(job)]))
    return Future(tuple(arrivals), int(rng.integers(2**63)))


class ConditionalSource(FutureSource):
    """``futures=conditional`` (always the model once fitted) or ``auto`` (the model
    while it beats Poisson, `Selector`); Poisson futures before `min_arrivals`.

    `prior` (e.g. `history_arrivals` of a history file) is taken as the past just before
    the run: it ends one mean gap before the first time the source sees (its first
    arrival, or its first decision), whatever the clock (the simulator's from 0, the
    operator's epoch seconds), and the model is fitted on it, and scored through it for
    ``auto``/``expected``, before the first decision.
    Arrivals are kept sorted by time (an operator rebuilding its state after a restart
    sees the workflows in the system in any order).
    """

    def __init__(self, config: FuturesConfig, *, auto: bool, prior: Sequence[Arrival] = ()) -> None:
        self.config, self.auto, self.prior = config, auto, tuple(prior)
        self.reset()

    def reset(self) -> None:
        self.selector = Selector(ConditionalModel(self.config))
        self.arrivals: list[Arrival] = self._prior_before(0.0)
        self._anchored = False
        self.informed = False
        self.used_model = 0
        """Futures drawn from the conditional model (the others were Poisson)."""
        self.used_poisson = 0

    def _prior_before(self, start: float) -> list[Arrival]:
        """The prior, shifted to end one mean gap before `start`."""
        if not self.prior:
            return []
        gap = (self.prior[-1].time - self.prior[0].time) / max(len(self.prior) - 1, 1)
        shift = start - gap - self.prior[-1].time
        return [a._replace(time=a.time + shift) for a in self.prior]

    def _anchor(self, start: float) -> None:
        """`start` is the first time the source sees (nothing live arrived before it):
        the prior moves to end just before it, and the model is scored and fitted
        through it as if it had been live (every quarter `score_window` arrivals), so
        that ``auto`` and ``expected`` have their held-out evidence from the start."""
        if self._anchored:
            return
        self._anchored = True
        self.arrivals = self._prior_before(start)
        step = max(1, self.config.score_window // 4)
        for k in range(self.config.min_arrivals, len(self.arrivals) + 1, step):
            self.selector.update(self.arrivals[:k], self.arrivals[k - 1].time)

    def model_ready(self, now: float) -> bool:
        """Refit on the arrivals so far; whether the model's futures are used now (fitted,
        and for ``auto`` beating Poisson), counted in `used_model` / `used_poisson` and
        kept as `informed`."""
        self._anchor(now)
        self.selector.update(self.arrivals, now)
        use = self.selector.fitted_at is not None and (
            not self.auto or self.selector.conditional_wins()
        )
        if use:
            self.used_model += 1
        else:
            self.used_poisson += 1
        self.informed = use
        return use

    def observe(self, job: Job) -> None:
        self._anchor(job.arrival)
        arrival = Arrival(job.arrival, job.dag.total_work, stem(job.name), job)
        insort(self.arrivals, arrival, key=_time)
        if len(self.arrivals) > 2 * self.config.history:
            del self.arrivals[: -self.config.history]

    def futures(
        self,
        view: Forkable,
        recent: Sequence[Job],
        horizon: float,
        samples: int,
        rng: np.random.Generator,
    ) -> list[Future]:
        if not self.model_ready(view.now):
            return list(poisson_futures(view, recent, horizon, samples, rng))
        contents: dict[int, tuple[Any, Any]] = {}  # frozen once per plan (thread safety)
        return [
            _future(self.selector.model.sample(view.now, horizon, rng), m, contents, rng)
            for m in range(samples)
        ]


class ExpectedSource(ConditionalSource):
    """``futures=expected``: one future, the model's expected arrivals while it beats
    Poisson (`Selector`), else none (module docstring)."""

    def __init__(self, config: FuturesConfig, *, prior: Sequence[Arrival] = ()) -> None:
        super().__init__(config, auto=True, prior=prior)

    def futures(
        self,
        view: Forkable,
        recent: Sequence[Job],
        horizon: float,
        samples: int,
        rng: np.random.Generator,
    ) -> list[Future]:
        if not self.model_ready(view.now):
            return []
        drawn = self.selector.model.expected(view.now, horizon, self.config.expected_draws, rng)
        return [_future(drawn, 0, {}, rng)]


class OracleSource(FutureSource):
    """``futures=oracle``: one future, the workload's true remaining arrivals, which the
    simulator tells the planner before the run (`foresee`); a live cluster has none."""

    informed = True

    def __init__(self) -> None:
        self.arrivals: tuple[JobArrival, ...] | None = None

    def reset(self) -> None:
        self.arrivals = None

    def foresee(self, arrivals: Sequence[JobArrival]) -> None:
        """The run's arrivals, all of them (the simulator calls this after `reset`)."""
        self.arrivals = tuple(arrivals)

    def futures(
        self,
        view: Forkable,
        recent: Sequence[Job],
        horizon: float,
        samples: int,
        rng: np.random.Generator,
    ) -> list[Future]:
        if self.arrivals is None:
            raise IdlegateError(
                "futures=oracle needs the run's future arrivals, which only the simulator "
                "knows (it tells them through foresee); on a live cluster use "
                "futures=poisson, conditional or auto"
            )
        return [Future(tuple(a for a in self.arrivals if a.time > view.now), 0)]


class KnownSource(FutureSource):
    """``futures=known``: the scheduled arrivals it is told (`foresee` keeps those marked
    `JobArrival.scheduled`), in every future, plus Poisson futures of the rest: the rate of
    the recent arrivals times the share of them not scheduled, copies of those."""

    def __init__(self) -> None:
        self.known: tuple[JobArrival, ...] = ()
        self._names: frozenset[str] = frozenset()

    def reset(self) -> None:
        self.known, self._names = (), frozenset()
        self.informed = False

    def foresee(self, arrivals: Sequence[JobArrival]) -> None:
        """Arrivals known in advance; only the scheduled ones are kept (a live cluster
        tells only those)."""
        self.known = tuple(sorted((a for a in arrivals if a.scheduled), key=lambda a: a.time))
        self._names = frozenset(a.name for a in self.known)

    def futures(
        self,
        view: Forkable,
        recent: Sequence[Job],
        horizon: float,
        samples: int,
        rng: np.random.Generator,
    ) -> list[Future]:
        ahead = tuple(a for a in self.known if view.now < a.time <= view.now + horizon)
        others = [j for j in recent if j.name not in self._names]
        share = len(others) / len(recent) if recent else 0.0
        sampled = poisson_futures(view, others, horizon, samples, rng, share)
        self.informed = bool(ahead)
        return [
            Future(tuple(sorted(ahead + f.arrivals, key=lambda a: a.time)), f.seed) for f in sampled
        ]


def _time(a: Arrival) -> float:
    return a.time


def history_arrivals(path: str) -> list[Arrival]:
    """The arrivals of a history file (docs/workloads.md, `file`), at their recorded times,
    to fit a model offline (`ConditionalModel.fit`) or as a `ConditionalSource`'s prior."""
    from idlegate.sim.workloads import build_workload  # the file workload's reader

    jobs = build_workload("file", 0, path=path, arrival="recorded").jobs
    return [Arrival(a.time, a.dag.total_work, stem(a.name), a) for a in jobs]


def make_source(
    kind: FutureKind, config: FuturesConfig | None = None, history: str | None = None
) -> FutureSource:
    """The future source `kind` (module docstring); `history` (conditional, auto): a
    history file fitted on as the past before the run."""
    if kind == "poisson":
        return PoissonSource()
    if kind == "oracle":
        return OracleSource()
    if kind == "known":
        return KnownSource()
    prior = history_arrivals(history) if history else ()
    if kind == "expected":
        return ExpectedSource(config or FuturesConfig(), prior=prior)
    return ConditionalSource(config or FuturesConfig(), auto=kind == "auto", prior=prior)
