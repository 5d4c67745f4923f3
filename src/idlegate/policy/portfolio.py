"""`portfolio`: a scheduler that chooses and tunes its policy by replaying the recent past.

Each rule is best somewhere and far off elsewhere, and a cluster runs one workload. So
this scheduler keeps a *portfolio* of candidates and follows the one that would have done
best on the cluster's own recent workflows:

* the rules (`RULES`, and ``sjf`` on request);
* rules with a parameter, tuned on the same replays (`TUNING`): weighted fair's
  ``alpha`` (Decima's "tuned weighted fair"), fair's ``scale`` (its cap), and the
  analytic idle rule's threshold ``min_gain`` over the best plain rule of the round
  (``analytic``: the idle rule, so idling is chosen where the replay says it pays);
* the shipped ONNX policy (``learned``), an ONNX policy trained on this cluster's
  history (``trained``, with ``policy=PATH.onnx``), and the expected-future planner
  (``planner``: ``lookahead`` over srpt at the operator's pace, `FAST_PLANNING`).

**A round.** After `every` newly finished workflows, or `period` seconds of the
scheduler's clock after the last round if a workflow finished since (minute-scale pods
finish a few an hour), the last `window` finished workflows are
replayed in the simulator from an empty pool of the live size, once per candidate, with
their recorded arrivals and duration models and the same seed for every candidate
(common random numbers; `replay_portfolio`). A candidate's *score* is the mean JCT of
the replayed workflows (`seeds` > 1 averages that many seeds). The tuned families are
searched on a small grid each (`TUNING`); the analytic rule is tried over the round's
best plain rule, and the analytic candidate followed, if over another rule, is replayed
too (a round never switches away from a candidate it did not replay). A candidate that
fails in the replay (raises, e.g. a policy error) scores infinity.

**Following with a margin.** The best-scoring candidate replaces the one followed only
when its score is lower by more than `margin` (a fraction) of the followed one's score,
so replay noise does not make it flap (`select`). Ties (the
same score: the same decisions on the window) keep the candidate followed. The margin
protects only a candidate that won a round outright (`won`): the cold start's, or one
kept only by ties, gives way to any better score. After a round that switches nothing the next comes later
(`backoff`), until a switch or until the finished workflows change size (`change`).
The outcome is a `Choice`: which
candidate is followed and why (its score, the runner-up's, the window's size), as data
and as a sentence: "following srpt: 642 s vs fair 734 s over the last 48 workflows".

**Leaving out the trailing.** Each round's scores over the round's best are remembered
with the number of workflows new in that round, for the rounds since the last change of
workload and of the last `memory` new workflows. A candidate's *standing* is its mean
excess over them, weighted by the new workflows (`standings`; once it has `window` of
them). A candidate whose standing trails the leader's by more than `drop` is left out of
the rounds (`dropped`): the fewer candidates a round compares, the less likely its best
won the window by luck, and the cheaper the round. As its rounds leave the memory, a
left-out candidate comes back and is judged again, and a change of workload brings every
candidate back. The leader and the candidate followed are never left out, nor the rule
under an analytic candidate that is not (a round tries the analytic rule over its best
rule, so without one the analytic rule would vanish from the rounds).

**Cold start.** With ``history=PATH`` (a history file, `sim.history`) the first round
replays the last `window` workflows of that file at the first decision, and its choice
applies at once (it stands for what the operator knew before it started). A driver may
instead `seed` the window with the workflows that finished before it started (an
operator's history sink before a restart): with at least `min_window` of them the first
round replays the window at once, its choice applied at once; the rounds' `Choice` says
how many of the window's workflows came from there (`prior`, `source`). Otherwise the
scheduler follows `start` (``learned``, the shipped policy) until `min_window` workflows
have finished.

**Delivered quality.** A round runs in a worker, so decisions never wait for it: the
followed candidate decides meanwhile. With ``replayer=inline`` (the simulator) `decide`
runs the round itself and its choice takes effect at the first decision at or after
t + d, d the round's modelled CPU seconds (`replay_delay`, or if None `modelled_seconds`:
the replayed events and decisions at the measured cost of each candidate kind,
benchmarks/brain_cost.py), as `planning_delay` models the planner's worker. So a figure
from the simulator is what a cluster whose worker needs that long would get. With
``replayer=worker`` `decide` only follows, and a driver's worker calls the steps:

    if brain.needs_replay(now):               # owner thread
        request = brain.request(view)         # owner thread: the window (cheap)
        choice = brain.replay(request)        # ANY one thread
        brain.adopt(choice)                   # owner thread

**Records.** With ``records=cluster`` (the default) the scheduler records every job
that finishes in the cluster it decides on (its DAG, arrival and duration model, read
from the view: in the simulator the model stands in for the measured durations). With
``records=fed`` it records only what its driver gives `record` (`JobArrival` values,
e.g. `sim.history.history_arrivals` of an operator's history records).

Deterministic: the replays' seeds and the followers' resets come from the run's
Generator (`reset`), so the same seed gives the same run.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, Literal

import numpy as np
from pydantic import ConfigDict, Field, StrictBool, StrictInt, field_validator, model_validator

from idlegate.config import Config, NonNegative, Positive
from idlegate.errors import IdlegateError, reject_unknown
from idlegate.policy.spec import SchedulerSpec
from idlegate.sim.engine import JobArrival, simulate
from idlegate.sim.history import check_history_file, history_arrivals, load_history
from idlegate.sim.history import replay_workload as _replay_workload
from idlegate.sim.protocol import WAIT, Action, ClusterView, Job, Scheduler

__all__ = [
    "CANDIDATES",
    "RULES",
    "TUNING",
    "Choice",
    "PortfolioConfig",
    "PortfolioScheduler",
    "ReplayRequest",
    "Scores",
    "make_portfolio",
    "modelled_seconds",
    "portfolio_config",
    "portfolio_model_files",
    "replay_portfolio",
    "select",
    "tied_best",
    "won",
]

RULES: Final = ("fifo", "sjf-cp", "srpt", "fair", "weighted-fair")
"""The rules a replay compares by default (also `idlegate advise`'s default heuristics)."""
TUNING: Final[Mapping[str, tuple[str, tuple[float, ...]]]] = {
    "weighted-fair": ("alpha", (-2.0, -1.0, -0.5, 0.5, 1.0)),
    "fair": ("scale", (0.5, 1.0, 2.0)),
    "analytic": ("min_gain", (0.0, 0.2)),
}
"""Per tuned family: its parameter and the grid a round searches (``tune=true``)."""
CANDIDATES: Final = (
    "fifo",
    "sjf",
    "sjf-cp",
    "srpt",
    "fair",
    "weighted-fair",
    "analytic",
    "learned",
    "trained",
    "planner",
)
"""The names ``candidates=`` takes (joined with ``+``)."""
_RULE_NAMES: Final = (*RULES, "sjf")
"""The candidates that are plain rules (what the analytic candidate runs over)."""
DEFAULT_CANDIDATES: Final = (*RULES, "analytic", "learned")
"""The portfolio without ``candidates=`` (``trained`` joins it with ``policy=``)."""
PLANNER: Final = "lookahead?max_decisions=100&race=0.05&plan_window=64:srpt"
"""The ``planner`` candidate: the planner over srpt at the operator's pace (`FAST_PLANNING`)."""
CHANGE_MIN: Final = 10
"""Finished workflows on each side of a comparison that can find a change of workload."""
_PLAIN_RULES: Final = ("fifo", "sjf", "sjf-cp", "srpt", "fair", "weighted-fair")

# modelled CPU seconds of a replay (`modelled_seconds`): per simulated event, and per
# decision of each kind of candidate; measured by benchmarks/brain_cost.py
EVENT_SECONDS: Final = 1.2e-5
"""CPU seconds per simulated event (the engine's loop, the cluster's bookkeeping and a
rule's decisions)."""
DECISION_SECONDS: Final[Mapping[str, float]] = {"rule": 0.0, "learned": 4e-4, "planner": 2e-2}
"""CPU seconds per decision of an ONNX policy and of the planner, beyond the events."""


class PortfolioConfig(Config):
    """The portfolio, its replays and how it follows (every field has a working default)."""

    model_config = ConfigDict(title="the portfolio scheduler")

    candidates: tuple[str, ...] = DEFAULT_CANDIDATES
    """The candidates (`CANDIDATES`), joined with ``+`` in a spec."""
    policy: str | None = None
    """An ONNX policy trained on this cluster's history: the candidate ``trained``."""
    history: str | None = None
    """A history file (`sim.history`) to start from: the first round replays its last
    `window` workflows."""
    start: str = "learned"
    """The candidate followed before the first round (cold start without a history)."""
    window: StrictInt = Field(200, ge=2)
    """Finished workflows a round replays (the most recent ones)."""
    min_window: StrictInt = Field(40, ge=2)
    """Finished workflows needed before the first round."""
    every: StrictInt = Field(25, ge=1)
    """A round after this many newly finished workflows."""
    period: Positive | None = 900.0
    """... or this many seconds of the clock after the last round, if a workflow finished
    since (None: only by `every`)."""
    backoff: StrictInt = Field(4, ge=1)
    """After a round that switches nothing, the next comes twice as late (`every` and
    `period` stretched), up to this factor; a switch, or the finished workflows changing
    character (`change`), brings back the first pace."""
    change: float = Field(3.0, gt=1.0)
    """The workload changed when the geometric mean work (task-seconds) of the workflows
    finished since the last round (at least `CHANGE_MIN`) differs from that of those
    before them since the last change by more than this factor."""
    margin: NonNegative = 0.02
    """Switch only to a candidate whose score is lower by more than this fraction."""
    drop: NonNegative | None = 0.02
    """Leave out of the rounds a candidate whose standing trails the leader's by more
    than this (`standings`; None: never)."""
    memory: StrictInt = Field(1000, ge=1)
    """The standings remember the rounds of the last this many new workflows."""
    seeds: StrictInt = Field(1, ge=1)
    """Duration seeds per candidate and round (the score is their mean)."""
    tune: StrictBool = True
    """Search the tuned families' grids (`TUNING`); false: their default values only."""
    replay_delay: NonNegative | None = None
    """Seconds from a round's start to its choice taking effect (``replayer=inline``);
    None: the round's modelled CPU seconds (`modelled_seconds`)."""
    replayer: Literal["inline", "worker"] = "inline"
    """``inline``: `decide` runs the rounds (the simulator); ``worker``: a driver does."""
    records: Literal["cluster", "fed"] = "cluster"
    """``cluster``: record the jobs that finish in the view; ``fed``: only `record`'s."""

    @field_validator("candidates", mode="before")
    @classmethod
    def _split(cls, value: Any) -> Any:
        return tuple(c for c in value.split("+") if c) if isinstance(value, str) else value

    @field_validator("candidates")
    @classmethod
    def _known(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        names = tuple(dict.fromkeys(c.strip().lower().replace("_", "-") for c in value))
        unknown = [c for c in names if c not in CANDIDATES]
        if unknown:
            raise ValueError(
                f"unknown candidate {unknown[0]!r}; choose from {', '.join(CANDIDATES)} "
                "joined with +"
            )
        if not names:
            raise ValueError("give at least one candidate")
        if "analytic" in names and not set(names) & set(_RULE_NAMES):
            raise ValueError(
                "the analytic candidate runs over the round's best rule: add a rule among "
                f"{', '.join(_RULE_NAMES)}, e.g. candidates=analytic+sjf-cp"
            )
        return names

    @model_validator(mode="after")
    def _rounds_can_run(self) -> PortfolioConfig:
        # (a window smaller than the first round's need would never fill: no round at all)
        if self.window < self.min_window:
            raise ValueError(
                f"window={self.window} is below min_window={self.min_window}, so no round "
                f"would ever run; raise window or lower min_window to at most {self.window}"
            )
        return self

    def portfolio(self) -> tuple[str, ...]:
        """The candidates, ``trained`` added when a `policy` is given."""
        extra = ("trained",) if self.policy and "trained" not in self.candidates else ()
        return (*self.candidates, *extra)


# ---------------------------------------------------------------------------------------
# what a round says


@dataclass(frozen=True)
class Scores:
    """One round's replay: each candidate's mean JCT, and what the replay cost."""

    means: Mapping[str, float]
    """Candidate spec text → mean JCT in seconds over the window, weighted by `weights`
    (inf: it failed)."""
    workflows: int
    """Workflows replayed."""
    events: int
    decisions: Mapping[str, int]
    """Decisions each candidate made in the replay (its cost)."""
    failed: Mapping[str, str] = field(default_factory=dict)
    """Candidates whose replay raised, with the error."""


@dataclass(frozen=True)
class Choice:
    """Which candidate is followed and why (what the operator shows)."""

    candidate: str
    """The spec text of the candidate followed."""
    score: float | None
    """Its mean JCT in the round's replay, seconds (None: no replay yet)."""
    runner_up: str | None
    """The best other candidate of the round."""
    runner_up_score: float | None
    workflows: int
    """Finished workflows the round replayed (0: no replay yet)."""
    reason: Literal["cold start", "prior history", "best", "kept"]
    """cold start: no round yet; prior history: the first round, on the history file or a
    seeded window (`PortfolioScheduler.seed`); best: the round's best; kept: the round's
    best was not better by the margin."""
    best: str | None = None
    """The round's best candidate (kept: the one that did not beat the margin)."""
    scores: Mapping[str, float] = field(default_factory=dict)
    """Every candidate's score in the round."""
    at: float = 0.0
    """Clock time of the state the round replayed."""
    modelled_seconds: float = 0.0
    """The round's modelled CPU seconds (`modelled_seconds`)."""
    cpu_seconds: float = 0.0
    """The round's measured CPU seconds (thread time; for reports, never for choices)."""
    prior: int = 0
    """Of `workflows`, those that finished before the scheduler started."""
    source: str | None = None
    """Where those came from: ``history file`` (``history=``) or a driver's `seed` source
    (``history sink``)."""
    new: int = 0
    """Of `workflows`, those finished since the previous round (all, at the first)."""
    left_out: tuple[str, ...] = ()
    """Candidates the round left out: their standing trails (`PortfolioScheduler.dropped`)."""

    @property
    def text(self) -> str:
        """``following srpt: 642 s vs fair 734 s over the last 48 workflows``."""
        if self.score is None:
            return f"following {self.candidate} ({self.reason}: no finished workflow replayed yet)"
        versus = ""
        if self.runner_up is not None and self.runner_up_score is not None:
            versus = f" vs {self.runner_up} {_seconds(self.runner_up_score)}"
        prior = f" ({self.prior} from the {self.source})" if self.prior else ""
        return (
            f"following {self.candidate}: {_seconds(self.score)}{versus} over the last "
            f"{self.workflows} workflows{prior}"
        )

    @property
    def replayed(self) -> dict[str, Any] | None:
        """The window the round replayed (an ExecutorPool's ``status.replayed``): its size,
        and how many of its workflows came from before the start, and whence (None: no
        round yet)."""
        if not self.workflows:
            return None
        return {"workflows": self.workflows, "prior": self.prior, "source": self.source}

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict (inf scores as None)."""
        return {
            "candidate": self.candidate,
            "score": _finite(self.score),
            "runner_up": self.runner_up,
            "runner_up_score": _finite(self.runner_up_score),
            "workflows": self.workflows,
            "reason": self.reason,
            "best": self.best,
            "scores": {k: _finite(v) for k, v in self.scores.items()},
            "at": self.at,
            "modelled_seconds": self.modelled_seconds,
            "cpu_seconds": self.cpu_seconds,
            "prior": self.prior,
            "source": self.source,
            "new": self.new,
            "left_out": list(self.left_out),
            "text": self.text,
        }


def _seconds(value: float) -> str:
    return f"{value:.0f} s" if math.isfinite(value) else "failed"


def _finite(value: float | None) -> float | None:
    return value if value is not None and math.isfinite(value) else None


def select(
    scores: Mapping[str, float], following: str, margin: float, *, protected: bool = True
) -> tuple[str, str | None, Literal["best", "kept"]]:
    """(candidate to follow, the runner-up, why) after a round with `scores`.

    The best score wins; among candidates tied with it (`tied_best`) the one followed
    stays, else the first in `scores`' order. When `protected` (the followed candidate
    earned its place: `won`), the best replaces `following` only when its score is lower
    than following's by more than `margin` × following's score; an unprotected one gives
    way to any better score. A following candidate missing from `scores` (or failed,
    inf) is always replaced. The runner-up is the best other candidate than the one
    followed.
    """
    if not scores:
        raise IdlegateError("a round needs at least one candidate's score")
    tied = tied_best(scores)
    best = following if following in tied else tied[0]
    current = scores.get(following, math.inf)
    needed = margin * current if protected else 0.0
    keep = following in scores and math.isfinite(current) and not current - scores[best] > needed
    chosen = following if keep else best
    others = [c for c in scores if c != chosen]
    runner_up = min(others, key=scores.__getitem__) if others else None
    return chosen, runner_up, "kept" if keep and best != following else "best"


def tied_best(scores: Mapping[str, float]) -> list[str]:
    """The candidates whose score equals the lowest (to a relative 1e-9: a replay of the
    same decisions), in `scores`' order."""
    low = min(scores.values())
    return [c for c, v in scores.items() if v <= low + 1e-9 * abs(low)]


def won(choice_scores: Mapping[str, float], candidate: str) -> bool:
    """True if `candidate` alone had the round's best score (no tie): the evidence that
    lets the margin protect it."""
    return bool(choice_scores) and tied_best(choice_scores) == [candidate]


# ---------------------------------------------------------------------------------------
# the replay


def candidate_specs(config: PortfolioConfig) -> list[str]:
    """The spec texts a round replays before the analytic rule (`tune`: with the grids)."""
    out: list[str] = []
    for name in config.portfolio():
        if name in _PLAIN_RULES:
            out.append(name)
            if config.tune and name in TUNING:
                key, grid = TUNING[name]
                out.extend(f"{name}?{key}={_num(v)}" for v in grid if not _is_default(name, v))
        elif name == "learned":
            out.append("learned:default")
        elif name == "trained":
            if not config.policy:
                raise IdlegateError(
                    "the candidate trained needs policy=PATH.onnx (a policy trained on this "
                    "cluster's history)"
                )
            out.append(f"learned:{config.policy}")
        elif name == "planner":
            out.append(PLANNER)
    return list(dict.fromkeys(out))


def analytic_specs(config: PortfolioConfig, base: str) -> list[str]:
    """The analytic idle rule over `base` (a plain rule's spec), at each threshold."""
    key, grid = TUNING["analytic"]
    values = grid if config.tune else (0.0,)
    return [f"analytic?{key}={_num(v)}:{base}" for v in values]


def _num(value: float) -> str:
    return f"{value:g}"


def _is_default(name: str, value: float) -> bool:
    return (name, value) in (("fair", 1.0), ("weighted-fair", -1.0))


def kind_of(spec: str) -> str:
    """The cost class of a candidate: ``rule``, ``learned`` (ONNX) or ``planner``."""
    if spec.startswith("lookahead"):
        return "planner"
    return "learned" if spec.startswith("learned") else "rule"


def modelled_seconds(scores: Scores) -> float:
    """The CPU seconds a round like `scores` is modelled to take: its events and each
    candidate's decisions at the measured costs (`EVENT_SECONDS`, `DECISION_SECONDS`)."""
    decisions = sum(DECISION_SECONDS[kind_of(c)] * n for c, n in scores.decisions.items())
    return scores.events * EVENT_SECONDS + decisions


def replay_portfolio(
    window: Sequence[JobArrival],
    schedulers: Mapping[str, Scheduler],
    num_executors: int,
    seed: int,
    *,
    seeds: int = 1,
    moving_delay: float = 0.0,
) -> Scores:
    """Replay the finished workflows `window` under each scheduler (spec text → instance)
    on a pool of `num_executors`, with the seeds seed, seed + 1, …: every candidate sees
    the same arrivals and the same seeds (common random numbers)."""
    workload = _replay_workload(window, num_executors, moving_delay=moving_delay)
    n = len(workload.jobs)
    means: dict[str, float] = {}
    decisions: dict[str, int] = {}
    failed: dict[str, str] = {}
    events = 0
    for text, scheduler in schedulers.items():
        total, made = np.zeros(n), 0
        try:
            for s in range(seeds):
                result = simulate(workload, scheduler, seed=seed + s)
                events += result.events
                made += result.decisions
                if result.unfinished:  # (a replay runs until every workflow finished)
                    raise IdlegateError(f"{result.unfinished} workflow(s) never finished")
                for r in result.records:  # (record ids are the replay's arrival order)
                    total[r.id] += r.jct
        except Exception as exc:  # a failing candidate loses the round, the others go on
            failed[text] = f"{type(exc).__name__}: {exc}"
            means[text] = math.inf
        else:
            means[text] = float(np.mean(total)) / seeds
        decisions[text] = made
    return Scores(means, n, events, decisions, failed)


@dataclass(frozen=True)
class ReplayRequest:
    """What a round needs, taken on the owner's thread (`PortfolioScheduler.request`)."""

    window: tuple[JobArrival, ...]
    num_executors: int
    moving_delay: float
    following: str
    seed: int
    at: float
    reason: Literal["prior history", "best"] = "best"
    protected: bool = True
    """The candidate followed won a round outright, so the margin protects it (`won`;
    False at the cold start and for a candidate kept only by ties)."""
    new: int = 0
    """Of `window`, the workflows finished since the last round."""
    dropped: frozenset[str] = frozenset()
    """Candidates left out (`PortfolioScheduler.dropped`)."""
    prior: int = 0
    """Of `window`, the workflows that finished before the scheduler started."""
    source: str | None = None


# ---------------------------------------------------------------------------------------
# the scheduler


SchedulerBuilder = Callable[[str], Scheduler]


class PortfolioScheduler:
    """`portfolio`: follows the candidate its replays of the recent past find best
    (module docstring)."""

    def __init__(
        self, config: PortfolioConfig, build: SchedulerBuilder, *, name: str = "portfolio"
    ) -> None:
        self.config = config
        self.name = name
        self._build = build
        start = self._start_spec()
        self._followers: dict[str, Scheduler] = {start: build(start)}
        """The followed candidates' instances (owner thread), by spec text."""
        self._replayers: dict[str, Scheduler] = {}
        """The replay's instances (the worker's alone), by spec text."""
        self._prior: tuple[JobArrival, ...] = ()
        if config.history is not None:
            check_history_file(config.history)
            self._prior = tuple(history_arrivals(load_history(config.history)))
        self._rng = np.random.default_rng(0)
        self.reset_state()

    def __repr__(self) -> str:
        return f"PortfolioScheduler({self.name!r}, {self.config!r})"

    def _start_spec(self) -> str:
        start = self.config.start
        specs = {"learned": "learned:default", "trained": f"learned:{self.config.policy}"}
        if start in specs:
            return specs[start]
        if start == "planner":
            return PLANNER
        return start if start in _PLAIN_RULES else SchedulerSpec.parse(start).format()

    # -- state ------------------------------------------------------------------------

    def reset_state(self) -> None:
        """Forget the run: no record, follow `start` (or the prior history's choice)."""
        start = self._start_spec()
        self.following = start
        self.choice = Choice(start, None, None, None, 0, "cold start")
        """Which candidate is followed and why (`Choice`)."""
        self.rounds: list[Choice] = []
        """Every round's outcome, in order."""
        self.switches = 0
        self._finished: list[JobArrival] = []
        self._work: list[float] = []
        """Log total work of each of `_finished` (the change detector's)."""
        self._stretch = 1
        """The factor on `every` and `period` (`backoff`)."""
        self._change_due = False
        """The finished workflows changed size since the last round (`change`)."""
        self._regime = 0
        """Workflows recorded since the last change of size (or the start)."""
        self._jobs: dict[int, Job] = {}
        self._next_id = 0
        self._done_seen = 0
        self._since_round = 0
        self._last_round = -math.inf
        self._pending: tuple[float, Choice] | None = None
        self._prior_due = bool(self._prior)
        self._seeded = 0
        """Of `_finished`, those given by `seed` (the oldest)."""
        self._seed_source: str | None = None
        self._seed_due = False
        self._protected = False
        self._stood: list[tuple[int, dict[str, float]]] = []
        """The rounds since the last change, those of the last `memory` new workflows:
        each round's new workflows and every candidate's score over the round's best,
        minus 1 (`standings`)."""

    def reset(self, rng: Any) -> None:
        """Start of a run: seeds and followers' streams come from `rng` (the run's)."""
        self._rng = rng
        self.reset_state()
        self._follower().reset(self._child_rng())

    def _child_rng(self) -> np.random.Generator:
        return np.random.default_rng(int(self._rng.integers(2**63)))

    def _follower(self) -> Scheduler:
        spec = self.following
        if spec not in self._followers:
            self._followers[spec] = self._build(spec)
        return self._followers[spec]

    # -- records ----------------------------------------------------------------------

    @property
    def finished(self) -> tuple[JobArrival, ...]:
        """The finished workflows recorded, the last `window` (what a successor with other
        candidates is given to `record`, so it does not start cold)."""
        return tuple(self._finished)

    def record(self, finished: Iterable[JobArrival]) -> None:
        """Finished workflows (arrival, DAG, duration model) for the next rounds."""
        added = list(finished)
        if not added:
            return
        self._finished.extend(added)
        self._work.extend(_log_work(a) for a in added)
        self._since_round += len(added)
        self._regime += len(added)
        self._trim()
        if self._changed_character():
            # another workload now: the followed candidate won on the old one, so the
            # margin no longer protects it, and a round comes at once, then at the first pace
            self._stretch = 1
            self._protected = False
            self._change_due = True
            self._stood.clear()

    def seed(self, finished: Sequence[JobArrival], source: str) -> None:
        """Workflows that finished before the scheduler started, on the clock of those it
        records (an operator's history sink before a restart), oldest first: they go
        before the window's own, but for those of the same name, and with `min_window` in
        the window the first round comes at once, its choice applied at once."""
        known = {a.name for a in self._finished}
        unique = {a.name: a for a in finished if a.name not in known}  # (a line written twice)
        new = list(unique.values())[-self.config.window :]
        if not new:
            return
        self._finished[:0] = new
        self._work[:0] = [_log_work(a) for a in new]
        self._seeded, self._seed_source = len(new), source
        self._regime += len(new)
        self._trim()
        self._seed_due = len(self._finished) >= self.config.min_window

    def _trim(self) -> None:
        """Keep the last `window` finished workflows."""
        extra = len(self._finished) - self.config.window
        if extra > 0:
            del self._finished[:extra]
            del self._work[:extra]
            self._seeded = max(0, self._seeded - extra)

    def _changed_character(self) -> bool:
        """True when the workflows finished since the last round (at least `CHANGE_MIN`)
        are of another size than those before them since the last change (at least as
        many): their mean log work apart by more than log `change`, i.e. a geometric
        mean `change` times larger or smaller. Marks the new ones as the regime's start.
        (A mean of logs, not a median: the median of a few workflows of a two-size mix
        jumps between the sizes.)"""
        new = min(self._since_round, len(self._work))
        regime = min(self._regime, len(self._work))
        if new < CHANGE_MIN or regime - new < CHANGE_MIN:
            return False
        recent = float(np.mean(self._work[-new:]))
        before = float(np.mean(self._work[-regime:-new]))
        if abs(recent - before) <= math.log(self.config.change):
            return False
        self._regime = new
        return True

    def _observe(self, view: ClusterView) -> None:
        """Record the jobs that finished in `view` since the last decision (records=cluster)."""
        jobs = self._jobs
        for job in reversed(view.jobs):  # the new ones are at the end (arrival order)
            if job.id < self._next_id:
                break
            jobs[job.id] = job
        if view.jobs:
            self._next_id = max(self._next_id, view.jobs[-1].id + 1)
        done = getattr(view, "done", None)
        if done is None or len(done) == self._done_seen:
            return
        new = []
        for rec in done[self._done_seen :]:
            job = jobs.pop(rec.id, None)
            if job is not None:  # (every job that ran was seen at a decision)
                new.append(JobArrival(job.arrival, job.name, job.dag, job.payload))
        self._done_seen = len(done)
        self.record(new)

    # -- rounds -----------------------------------------------------------------------

    def needs_replay(self, now: float) -> bool:
        """Owner thread: True when a round is due (module docstring, "A round")."""
        if self._prior_due or self._seed_due:
            return True
        cfg = self.config
        if len(self._finished) < cfg.min_window or self._since_round == 0:
            return False
        if self._since_round >= cfg.every * self._stretch or self._change_due:
            return True
        return cfg.period is not None and now >= self._last_round + cfg.period * self._stretch

    def request(self, view: ClusterView) -> ReplayRequest:
        """Owner thread: the round's window (the prior history's at the first one)."""
        new = self._since_round
        self._since_round = 0
        self._change_due = False
        self._last_round = view.now
        first = self._prior_due or self._seed_due
        if self._prior_due and not self._seed_due:  # (a seeded window is the more recent)
            window = self._prior[-self.config.window :]
            prior, source = len(window), "history file"
        else:
            window = tuple(self._finished)
            prior, source = self._seeded, self._seed_source if self._seeded else None
        self._prior_due = self._seed_due = False
        # (a round's evidence is at most its window; a prior window is all new)
        new = len(window) if first else min(new, len(window))
        return ReplayRequest(
            window=tuple(window),
            num_executors=view.num_executors,
            moving_delay=float(getattr(view, "moving_delay", 0.0)),
            following=self.following,
            seed=int(self._rng.integers(2**31)),
            at=view.now,
            reason="prior history" if first else "best",
            protected=self._protected,
            new=new,
            dropped=self.dropped(),
            prior=prior,
            source=source,
        )

    def standings(self) -> dict[str, float]:
        """Per candidate with at least `window` new workflows of evidence in the rounds
        remembered (since the last change, the last `memory` workflows), its mean score
        over each round's best, minus 1, weighted by each round's new workflows."""
        sums: dict[str, float] = {}
        seen: dict[str, int] = {}
        for new, excess in self._stood:
            for c, v in excess.items():
                sums[c] = sums.get(c, 0.0) + new * v
                seen[c] = seen.get(c, 0) + new
        return {c: v / seen[c] for c, v in sums.items() if seen[c] >= self.config.window}

    def dropped(self) -> frozenset[str]:
        """The candidates left out of the next round: those whose standing trails the
        leader's by more than `drop`, but for the leader, the one followed, and the rule
        under any analytic candidate that stays."""
        standing = self.standings()
        if self.config.drop is None or not standing:
            return frozenset()
        leader = min(standing, key=standing.__getitem__)
        # (against the leader's standing, not 0: each round's best is a lucky one)
        lead = standing[leader] + self.config.drop
        out = {c for c, v in standing.items() if v > lead} - {self.following, leader}
        # (a round tries the analytic rule over its best rule: with every rule left out,
        # an analytic candidate that stays would not be tried at all)
        stays = (standing.keys() - out) | {self.following}
        for spec in map(SchedulerSpec.parse, sorted(stays)):
            if spec.kind == "analytic" and spec.base is not None:
                out.discard(spec.base.format(label=False))
        return frozenset(out)

    def replay(self, request: ReplayRequest) -> Choice:
        """Any one thread: replay the window under every candidate; the choice."""
        started = time.thread_time()
        cfg = self.config
        specs = [s for s in candidate_specs(cfg) if s not in request.dropped]
        scores = self._replay(request, specs)
        if "analytic" in cfg.portfolio():
            rules = {s: v for s, v in scores.means.items() if kind_of(s) == "rule"}
            if rules:
                base = min(rules, key=rules.__getitem__)
                more = self._replay(
                    request, [s for s in analytic_specs(cfg, base) if s not in request.dropped]
                )
                scores = _merged(scores, more)
        followed = request.following
        if followed not in scores.means and SchedulerSpec.parse(followed).kind == "analytic":
            # (the analytic rule over an earlier round's best rule: without its own score
            # a round would switch away from it on no evidence)
            scores = _merged(scores, self._replay(request, [followed]))
        chosen, runner_up, why = select(
            scores.means,
            request.following,
            cfg.margin,
            protected=request.protected,
        )
        reason = "prior history" if request.reason == "prior history" else why
        best = min(scores.means, key=scores.means.__getitem__)
        means = scores.means
        return Choice(
            candidate=chosen,
            score=means[chosen],
            runner_up=runner_up,
            runner_up_score=None if runner_up is None else means[runner_up],
            workflows=scores.workflows,
            reason=reason,
            best=best,
            scores=dict(means),
            at=request.at,
            modelled_seconds=modelled_seconds(scores),
            cpu_seconds=time.thread_time() - started,
            prior=request.prior,
            source=request.source,
            new=request.new,
            left_out=tuple(sorted(request.dropped)),
        )

    def _replay(self, request: ReplayRequest, specs: Sequence[str]) -> Scores:
        for spec in specs:
            if spec not in self._replayers:
                self._replayers[spec] = self._build(spec)
        return replay_portfolio(
            request.window,
            {s: self._replayers[s] for s in specs},
            request.num_executors,
            request.seed,
            seeds=self.config.seeds,
            moving_delay=request.moving_delay,
        )

    def adopt(self, choice: Choice) -> None:
        """Owner thread: follow `choice` from the next decision on."""
        self.rounds.append(choice)
        self.choice = choice
        self._stand(choice)
        outright = won(choice.scores, choice.candidate)
        self._protected = outright or (self._protected and choice.candidate == self.following)
        if choice.candidate == self.following:
            self._stretch = min(self._stretch * 2, self.config.backoff)
        else:
            self._stretch = 1
            self.switches += 1
            self.following = choice.candidate
            self._follower().reset(self._child_rng())

    def _stand(self, choice: Choice) -> None:
        """Remember `choice`'s scores over its best for the standings (`standings`); a
        candidate that failed counts as 100 % behind."""
        finite = [v for v in choice.scores.values() if math.isfinite(v)]
        if not finite or choice.new <= 0:
            return
        low = min(finite)
        excess = {
            c: v / low - 1 if math.isfinite(v) and low > 0 else 1.0
            for c, v in choice.scores.items()
        }
        self._stood.append((choice.new, excess))
        while sum(n for n, _ in self._stood[1:]) >= self.config.memory:
            del self._stood[0]

    # -- the run's account ------------------------------------------------------------

    def took_effect(self, choice: Choice) -> float:
        """When `choice` began to be followed: the prior history's round at once, another
        round after its replay's delay (`replay_delay`, else its modelled CPU seconds)."""
        if choice.reason == "prior history":
            return choice.at
        delay = self.config.replay_delay
        return choice.at + (choice.modelled_seconds if delay is None else delay)

    def followed_from(self) -> list[tuple[float, str]]:
        """(time, candidate) of the run so far: the cold start's candidate from 0, then each
        round's from when it took effect (a round that kept its candidate included)."""
        return [(0.0, self._start_spec())] + [
            (self.took_effect(c), c.candidate) for c in self.rounds
        ]

    def time_followed(self, end: float) -> dict[str, float]:
        """Seconds of the clock up to `end` that each candidate was followed, longest first."""
        spans: dict[str, float] = {}
        for t0, t1, candidate in segments(self.followed_from(), end):
            spans[candidate] = spans.get(candidate, 0.0) + t1 - t0
        return dict(sorted(spans.items(), key=lambda kv: -kv[1]))

    def account(self, end: float) -> dict[str, Any]:
        """What the run followed and why (``simulate``'s report): the cold start's candidate,
        the seconds each candidate was followed up to `end`, every round's `Choice`."""
        return {
            "start": self._start_spec(),
            "switches": self.switches,
            "time_followed": self.time_followed(end),
            "rounds": [c.to_dict() for c in self.rounds],
        }

    # -- the decision -----------------------------------------------------------------

    def decide(self, view: ClusterView) -> Action:
        if self.config.records == "cluster":
            self._observe(view)
        if self.config.replayer == "inline":
            self._replay_inline(view)
        if view.free_executors <= 0:  # (nothing to decide; an ONNX follower cannot say so)
            return WAIT
        return self._follower().decide(view)

    def _replay_inline(self, view: ClusterView) -> None:
        """The simulator's worker: a round's choice applies `delay` seconds after it starts."""
        now = view.now
        if self._pending is not None and now >= self._pending[0]:
            self.adopt(self._pending[1])
            self._pending = None
        if self._pending is not None or not self.needs_replay(now):
            return
        request = self.request(view)
        choice = self.replay(request)
        delay = self.config.replay_delay
        if delay is None:
            delay = choice.modelled_seconds
        if request.reason == "prior history" or delay == 0:
            self.adopt(choice)
        else:
            self._pending = (now + delay, choice)


def segments(followed: Sequence[tuple[float, str]], end: float) -> list[tuple[float, float, str]]:
    """(from, to, candidate) stretches of `followed` ((time, candidate) from which each was
    followed, `PortfolioScheduler.followed_from`) up to `end`, empty ones left out."""
    out = []
    for (t0, candidate), (t1, _) in zip(followed, [*followed[1:], (end, "")], strict=True):
        if min(t1, end) > t0:
            out.append((t0, min(t1, end), candidate))
    return out


def _log_work(arrival: JobArrival) -> float:
    return math.log(max(arrival.dag.total_work, 1e-9))


def _merged(a: Scores, b: Scores) -> Scores:
    return Scores(
        {**a.means, **b.means},
        a.workflows,
        a.events + b.events,
        {**a.decisions, **b.decisions},
        {**a.failed, **b.failed},
    )


# ---------------------------------------------------------------------------------------
# building


def portfolio_config(
    spec: SchedulerSpec, options: Mapping[str, Any]
) -> tuple[PortfolioConfig, str | None]:
    """(config, ``name``) of a ``portfolio`` spec and keyword `options`; nothing is loaded."""
    given = spec.keywords(options)
    name = given.pop("name", None)
    reject_unknown(given, PortfolioConfig.model_fields, "the portfolio scheduler")
    for key in ("policy", "history", "start"):
        if key in given and given[key] is not None:
            given[key] = str(given[key])
    config = PortfolioConfig(**given)
    if "trained" in config.candidates and not config.policy:
        raise IdlegateError(
            "the portfolio's candidate trained needs policy=PATH.onnx (a policy trained on "
            "this cluster's history)"
        )
    return config, name


def make_portfolio(spec: SchedulerSpec, /, **options: Any) -> PortfolioScheduler:
    """Build a ``portfolio`` spec with its and the keyword options (`PortfolioConfig`
    fields and ``name``); IdlegateError for a bad option or a missing file."""
    from idlegate.policy import make_scheduler  # the builder of every spec kind

    config, name = portfolio_config(spec, options)
    if config.policy is not None and not Path(config.policy).expanduser().is_file():
        raise IdlegateError(
            f"the portfolio's policy {config.policy} does not exist; give a policy.onnx "
            "trained on this cluster's history (idlegate train --preset cluster --history)"
        )
    return PortfolioScheduler(config, make_scheduler, name=name or spec.format(label=False))


def portfolio_model_files(spec: SchedulerSpec) -> tuple[Path, ...]:
    """The model files a ``portfolio`` spec loads (for reloads and replays elsewhere)."""
    from idlegate.policy import DEFAULT_POLICY_PATH

    config, _ = portfolio_config(spec, {})
    out = []
    if "learned" in config.portfolio() or config.start == "learned":
        out.append(DEFAULT_POLICY_PATH)
    if config.policy is not None:
        out.append(Path(config.policy).expanduser())
    return tuple(out)
