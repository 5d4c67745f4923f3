"""The present check: a switch must not cost the workflows in the pool now (`from_present`).

**Why.** A round replays the window's workflows from their arrivals under each candidate,
from an empty pool: it measures which candidate would have done best had it been followed
all along. Where the pool empties often, following a candidate from now on is much the
same thing, and the replay answers what a switch asks. Where it does not (an overloaded
heavy-tailed trace, whose pool holds jobs of millions of task-seconds for days), a switch
starts the challenger on a present that the candidate followed made, and no replay saw
that present. On Alibaba's trace (300 jobs, 100 executors, load 0.85, held-out seed 1000)
a round left ``srpt?cap=0.9`` for ``fair?scale=0.5``, 35 % better on the last 47
workflows. Each of the two followed alone gives a mean JCT of 13,623 s and 12,401 s; the
switch, at that time, 65,943 s.

**The check.** When a round would switch from A to B, both are rolled out from a fork of
the pool taken when the round began (`ReplayRequest.present`; `sim.rollout.rollout`: the
running tasks end at their estimates, the others take durations drawn from their jobs'
models) over the same `samples` futures of H seconds, H the span of the window's
arrivals. A future's arrivals are a Poisson process at the window's rate, each a copy of
a workflow drawn from the window (its DAG and duration model), with a duration seed of
its own; both candidates get the same futures (common random numbers). A candidate's cost
is the mean over the futures of the rollout's cost: the area under the jobs-in-system
curve over [now, now + H], plus the flow the jobs still in the pool at the end are
estimated to add (`sim.rollout.remaining_flow_estimate`).

The switch stands unless B's cost is above A's by more than the round's `margin` of A's
(the measure of a difference that counts, as for the replay's scores); then A is kept
(reason ``present``). A tie lets it stand, and a round that began on an empty pool has
no check: the replay's evidence is then all there is. A candidate whose rollout raises
costs infinity, as in a replay, and the round says so ("… but failed when rolled out
from …"). The check costs two rollouts per future, and only in the rounds that would
switch.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from idlegate.sim.cluster import Cluster
from idlegate.sim.dag import Dag
from idlegate.sim.durations import DurationModel
from idlegate.sim.engine import JobArrival
from idlegate.sim.forecast_arrivals import poisson_copies
from idlegate.sim.protocol import Scheduler
from idlegate.sim.rollout import Future, rollout

__all__ = ["Present", "from_present", "futures_like"]


@dataclass(frozen=True)
class Present:
    """What the present check found: each candidate's mean cost from the present."""

    costs: Mapping[str, float]
    """Candidate spec text → mean rollout cost over the futures (seconds of flow)."""
    jobs: int
    """Workflows in the pool when the round began."""
    events: int
    """Events the rollouts simulated (the check's cost)."""


def futures_like(
    window: Sequence[JobArrival], now: float, samples: int, seed: int
) -> tuple[float, list[Future]]:
    """(H, `samples` futures over (now, now + H]) like `window`: H the span of its arrival
    times, arrivals a Poisson process at its rate ((n − 1) / H), each a copy of a
    workflow of `window` drawn uniformly (`sim.forecast_arrivals.poisson_copies`, as the
    planner's Poisson futures); (0, []) for a window of fewer than two workflows or no
    span."""
    times = sorted(a.time for a in window)
    horizon = times[-1] - times[0] if len(times) >= 2 else 0.0
    if horizon <= 0:
        return 0.0, []
    rate = (len(times) - 1) / horizon

    def copy(i: int) -> tuple[Dag, DurationModel | None]:
        return window[i].dag, window[i].durations

    rng = np.random.default_rng(seed)
    futures = list(poisson_copies(len(window), copy, rate, now, horizon, samples, rng, "present"))
    return horizon, futures


def from_present(
    present: Cluster,
    window: Sequence[JobArrival],
    schedulers: Mapping[str, Scheduler],
    samples: int,
    seed: int,
) -> Present | None:
    """Each of `schedulers` (spec text → instance) rolled out from `present` over the same
    `samples` futures like `window` (`futures_like`); None when the window gives no
    future."""
    horizon, futures = futures_like(window, present.now, samples, seed)
    if not futures:
        return None
    costs: dict[str, float] = {}
    events = 0
    for text, scheduler in schedulers.items():
        total = 0.0
        try:
            for m, future in enumerate(futures):
                out = rollout(present, scheduler, future, horizon, rng_seed=seed + m)
                total += out.cost
                events += out.events
        except Exception:  # (as in a replay: a candidate that fails costs the most)
            total = math.inf
        costs[text] = total / len(futures)
    return Present(costs, len(present.jobs), events)
