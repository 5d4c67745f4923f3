"""A round's replay: the window under every candidate (`replay_portfolio`).

**A round.** After `every` newly finished workflows, or `period` seconds of the
scheduler's clock after the last round if a workflow finished since (minute-scale pods
finish a few an hour), the last `window` finished workflows are
replayed in the simulator from an empty pool of the live size (under its queues, each
workflow in the queue it was in), once per candidate, with
their recorded arrivals and duration models and the same seed for every candidate
(common random numbers; `replay_portfolio`). A candidate's *score* is the mean JCT of
the replayed workflows (`seeds` > 1 averages that many seeds). The tuned families are
searched on a small grid each (`TUNING`); the analytic rule is tried over the round's
best plain rule, and the analytic candidate followed, if over another rule, is replayed
too (a round never switches away from a candidate it did not replay). A candidate that
fails in the replay (raises, e.g. a policy error) scores infinity. Rules that decide
alike on the window share one replay, and a replay that can no longer change the
round's answer stops early (`runs.Runs`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Final, Literal

from idlegate.errors import IdlegateError
from idlegate.policy.portfolio.candidates import kind_of
from idlegate.policy.portfolio.rounds import Scores
from idlegate.policy.portfolio.runs import REPLAY_STAGES, ReplayOptions, Runs
from idlegate.sim.cluster import Cluster
from idlegate.sim.engine import JobArrival
from idlegate.sim.protocol import Scheduler
from idlegate.sim.queues import QueueSpec
from idlegate.sim.resources import ResourceVector

__all__ = [
    "DECISION_SECONDS",
    "EVENT_SECONDS",
    "REPLAY_STAGES",
    "ReplayOptions",
    "ReplayRequest",
    "RoundCut",
    "merged",
    "modelled_seconds",
    "projected_seconds",
    "replay_portfolio",
    "trim",
]

# modelled CPU seconds of a replay (`modelled_seconds`): per simulated event, and per
# decision of each kind of candidate; measured by benchmarks/brain_cost.py
EVENT_SECONDS: Final = 1.2e-5
"""CPU seconds per simulated event (the engine's loop, the cluster's bookkeeping and a
rule's decisions)."""
DECISION_SECONDS: Final[Mapping[str, float]] = {"rule": 0.0, "learned": 4e-4, "planner": 2e-2}
"""CPU seconds per decision of an ONNX policy and of the planner, beyond the events."""


class RoundCut(IdlegateError):
    """A round stopped before its end: it spent its CPU budget (`replay_portfolio`'s
    `check`). The candidate followed stays; the message says what was spent."""


def projected_seconds(window: Sequence[JobArrival], candidates: int) -> float:
    """The modelled CPU seconds of replaying `window` under `candidates` candidates before
    it runs: a replay takes about one event per task and one per workflow (measured:
    0.98-1.07 events per task and stage on k8s-batch, tpch-like and teams), at
    `EVENT_SECONDS` each (a learned candidate's decisions left out)."""
    events = sum(sum(a.dag.tasks) + 1 for a in window)
    return candidates * events * EVENT_SECONDS


MIN_WINDOW: Final = 2
"""Workflows a trimmed window keeps at least (a replay of fewer weighs nothing)."""
HEAVIEST_KEPT: Final = 4
"""Heavy workflows (`heavy`) a trimmed round keeps whatever they cost: the few jobs of a
production trace that decide between capping and not (`PortfolioScheduler._heavier`),
not a flood's hundreds."""


def trim(request: ReplayRequest, candidates: int, budget: float | None) -> ReplayRequest:
    """`request` with the workflows still running in its window trimmed until their
    `projected_seconds` under `candidates` candidates is within `budget` (None: as it
    is): first those that are not `heavy`, those waiting least first, then the heavy ones,
    the lightest first, but for the `HEAVIEST_KEPT` heaviest, and `MIN_WINDOW` workflows
    at least. The finished workflows all stay (their replays are the round's evidence);
    `trimmed` counts those left out."""
    window = list(request.window)
    finished = len(window) - request.running
    running = window[finished:]
    cost = projected_seconds(running, candidates)
    if budget is None or cost <= budget:
        return request
    plain = request.running - request.heavy
    heavy = sorted(range(plain, len(running)), key=lambda i: sum(running[i].dag.tasks))
    heavy = heavy[:-HEAVIEST_KEPT] if len(heavy) > HEAVIEST_KEPT else []
    keep = set(range(len(running)))
    for i in [*range(plain - 1, -1, -1), *heavy]:
        if cost <= budget or finished + len(keep) <= MIN_WINDOW:
            break
        keep.discard(i)
        cost -= projected_seconds([running[i]], candidates)
    return replace(
        request,
        window=(*window[:finished], *(running[i] for i in sorted(keep))),
        running=len(keep),
        heavy=sum(1 for i in keep if i >= plain),
        trimmed=len(running) - len(keep),
    )


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
    options: ReplayOptions | None = None,
) -> Scores:
    """Replay the finished workflows `window` under each scheduler (spec text → instance)
    on a pool of `num_executors` (and `options.resources`, the live pool's beyond pods),
    with the seeds seed, seed + 1, …: every candidate sees the same arrivals and the same
    seeds (common random numbers). The last `options.unfinished` of `window` are workflows
    not finished when the round began (`Scores.unfinished` marks them). With
    `options.queues` (the live pool's) the replay runs under the same admission, each
    workflow in the queue it was in (`sim.queues.queue_of`), so a candidate is judged on
    the pool it would run; none: one queue, no quotas. Rules that decide alike share one
    replay (`runs.Runs`; none is cut here: a round's cuts need the candidate it follows).
    `options.check` is called before each replay; it raises `RoundCut` to stop the round
    (its budget is spent), which no candidate's failure does. None: `ReplayOptions()`."""
    runs = Runs(
        window, schedulers.__getitem__, num_executors, seed, options, shared=list(schedulers)
    )
    return runs.scores(list(schedulers))


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
    stood: tuple[tuple[int, Mapping[str, float]], ...] = ()
    """The rounds remembered for the standings: (new workflows, each candidate's score
    over the round's best, minus 1) (`confirm`)."""
    new: int = 0
    """Of `window`, the workflows finished since the last round."""
    dropped: frozenset[str] = frozenset()
    """Candidates left out (`PortfolioScheduler.dropped`)."""
    prior: int = 0
    """Of `window`, the workflows that finished before the scheduler started."""
    source: str | None = None
    early: bool = False
    """An early round's: every workflow arrived before `min_window` had finished."""
    running: int = 0
    """Of `window`, the workflows still running (an early round's, or `heavy`)."""
    heavy: int = 0
    """Of `running`, those a round on finished workflows added for their work, heavier
    than every finished one of the window (`heavy`)."""
    trimmed: int = 0
    """Workflows left out of the window to fit the round's `budget`."""
    named: str | None = None
    """The shipped prior's candidate, if its lead needs no correction (`uncorrected`)."""
    untrained: frozenset[str] = frozenset()
    """Learned candidates the window is outside the training range of (`trained_range`):
    not replayed, not followed."""
    resources: ResourceVector | None = None
    """The live pool's resources beyond its pods (None: a pods-only pool)."""
    queues: tuple[QueueSpec, ...] = ()
    """The live pool's queues, that the replay runs under (empty: one queue, no quotas)."""
    present: Cluster | None = None
    """A fork of the pool when the round began (`sim.rollout.planning_fork`), for the
    present check (`present.from_present`; None: no check)."""
    safe: str | None = None
    """The shipped prior's safest candidate, the last lookup's (`guard`; None: no guard)."""
    remembered: tuple[tuple[int, Mapping[str, float]], ...] = ()
    """Every round remembered for the standings (the stream so far: `guard`)."""
    since: float | None = None
    """When the candidate followed began to be followed, if it is not `safe` (`guard`)."""
    exact: frozenset[str] = frozenset()
    """Candidates whose replays run to their end, however far behind: those the standings
    have not judged yet (`state.Standings.unjudged`; none in an early round, which
    counts for no standing)."""


def merged(a: Scores, b: Scores) -> Scores:
    """The scores of `a` and `b`, two replays of the same window."""
    return Scores(
        {**a.means, **b.means},
        a.workflows,
        a.events + b.events,
        {**a.decisions, **b.decisions},
        {**a.failed, **b.failed},
        {**a.jcts, **b.jcts},
        a.unfinished,
        a.times,
        a.queue_names,
        (*a.cut, *b.cut),
    )
