"""Preemption decided on forecasts (issue 82, item 3): a reclaim's stops are carried out
only where a replay of the pool's future says they pay.

A queue whose ``preemption.decide`` is ``Forecast`` (`idlegate.sim.queues.Preemption`)
has its stops chosen by the rules as any queue's (`idlegate.sim.reclaim_plan`: the
claimant, its candidates, the least work lost); then, before they are carried out, the
judge (`ForecastJudge`) replays the pool with them and without them, and they go ahead
only if one of two cases holds. Pure, like the rest of `sim`: it forks the pool it is
given and reads no clock of its own (the caller's `clock`).

* *The replays* are the forecaster's own (`idlegate.sim.forecast.replay`: the fork's
  running tasks end at a draw conditioned on what they ran, new tasks draw from their
  workflow's duration model, the pool's scheduler decides), in pairs: a fork with the
  stops carried out now and a fork without, each pair on the same future (the same
  duration stream), so that what differs between the two is the stops. In both forks
  no later stop is made (their admission's reclaim is off): the pair compares these
  stops now against none, not against a later reclaim. A replay runs until the owners'
  workflows (the claimant queue's, present now) have finished.
* *The owners' forecast wait saved* (``gain``, seconds) is the median over the pairs of
  Σ over the owners' workflows of (finish without − finish with): a workflow's run
  time is the same in both, so what its finish moves is what it waited.
* *The exchange rate* (`RATE`): one executor-second of work lost costs a quarter of a
  second of the owners' wait. A task stopped after running L seconds runs again from its
  start, so its own workflow ends at most L seconds later, and less where the task was
  off its critical path or its queue was borrowing beyond its share: 1:1 is the most a
  stop can cost its victims, and at 1:1 the judge declined too often (`-w teams`, large
  scenario, tuning seeds 100-104: the steady teams' mean ρ 1.17 at 1, 1.13 at 0.5, 1.07
  at 0.25, against 0.85 by the rules; docs/queues.md has the table). So 0.25, chosen on
  those seeds and measured on held-out ones.
* *The cases* (`ReclaimVerdict.case`), tried in this order:
  - `BOUND`: in more than half of the replays without the stops, a task of the owners'
    queue starts later than its wait bound plus the grace a lent task has
    (`idlegate.sim.reclaim_ledger.Calm.grace`): the stops go ahead whatever they lose;
  - `PAYS`: gain > `RATE` × lost: they go ahead;
  - `DECLINED`: neither: nothing is stopped, and the claimant's queue is not judged
    again for `RECHECK` seconds (its waiting task starts as borrowed ones end, as with
    ``reclaim: Never``);
  - `CUT`: the budget was spent before one pair of replays ended: the rules' answer,
    the stops go ahead (said so in the verdict).
* *Budget.* A decision's replays together take at most `events` events (deterministic:
  the simulator's figures repeat), or with `seconds` that much of the caller's `clock`
  (a live pool's CPU time); a replay still running when it is spent is cut and its
  pair left out. `benchmarks/queues.py` measures each decision's CPU time beside it.

The verdict rides on the plan's stops (`idlegate.sim.reclaim_plan.Reclaim.verdict`) and
says which case held with both figures (`ReclaimVerdict.sentence`: the ``Preempted`` Event's
clause, `idlegate.api.notices.preempted`); the reclaim keeps every verdict, declined
ones included (`Reclaimer.verdicts`), for the benchmark to count.
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Callable
from math import inf, isfinite
from typing import TYPE_CHECKING

import numpy as np

from idlegate.sim.forecast import ReplayCut, replay
from idlegate.sim.reclaim_verdict import BOUND, CUT, DECLINED, PAYS, RATE, ReclaimVerdict
from idlegate.sim.rollout import Future

if TYPE_CHECKING:
    from idlegate.sim.cluster import Cluster
    from idlegate.sim.protocol import Scheduler
    from idlegate.sim.reclaim_ledger import Calm
    from idlegate.sim.reclaim_plan import Reclaim

PAIRS = 2
"""Pairs of replays a decision runs (within its budget)."""
HORIZON = 100.0
"""Seconds a replay looks ahead (its cost grows with how far it runs): an owner's
workflow not finished by then finishes, at the soonest, its remaining critical path
later, and is counted so."""
EVENTS = 5_000
"""Events a decision's replays may take in all: at 20-30 µs an event on `-w teams`' 30
executors, at most about 0.2 s of CPU (`benchmarks/queues.py` measures each decision's)."""


class ForecastJudge:
    """The judge of a pool's reclaims (the module docstring): called with the pool, the
    rules' stops, the claimant's queue and the time; its scheduler is a copy of the
    pool's, reset for every replay."""

    def __init__(
        self,
        scheduler: Scheduler,
        *,
        seed: int = 0,
        waves: bool = True,
        grace: float = 0.0,
        pairs: int = PAIRS,
        rate: float = RATE,
        horizon: float = HORIZON,
        events: int | None = EVENTS,
        seconds: float | None = None,
        clock: Callable[[], float] | None = None,
    ) -> None:
        if seconds is not None and clock is None:
            raise ValueError("a budget of seconds needs the clock that measures them (`clock`)")
        self.scheduler = copy.deepcopy(scheduler)
        self.rng = np.random.default_rng(seed)
        self.waves = waves
        self.grace = grace
        self.pairs = pairs
        self.rate = rate
        self.horizon = horizon
        self.events = events
        self.seconds = seconds
        self.clock = clock

    def __call__(self, pool: Cluster, plan: Reclaim, queue: int, now: float) -> ReclaimVerdict:
        """The verdict on `plan`'s stops for `queue`'s waiting task at `now`."""
        owners = {j.id for j in pool.jobs if j.queue == queue and j.finish is None}
        without = _fork(pool)
        with_ = _fork(pool)
        with_.stop(plan.executors, now, plan.starts)
        clock = self.clock
        began = clock() if clock is not None else 0.0
        spent = 0
        gains: list[float] = []
        late: list[float] = []
        until = now + self.horizon

        def read(sim: Cluster, into: dict[int, float], without: bool) -> None:
            into.update(_left(sim, owners))
            if without:
                late.append(_overshoot(sim, queue, self.grace))

        for _ in range(self.pairs):
            future = Future((), int(self.rng.integers(2**63)))
            left: tuple[dict[int, float], dict[int, float]] = ({}, {})
            read0 = functools.partial(read, into=left[0], without=True)
            read1 = functools.partial(read, into=left[1], without=False)
            try:
                seen0, n0 = replay(
                    without, self.scheduler, future, until, self.waves, owners,
                    self._stop(spent, began), after=read0,
                )  # fmt: skip
                spent += n0
                seen1, n1 = replay(
                    with_, self.scheduler, future, until, self.waves, owners,
                    self._stop(spent, began), after=read1,
                )  # fmt: skip
                spent += n1
            except ReplayCut:
                break
            gains.append(sum(_saved(seen0, seen1, left, o) for o in owners))
            if self._spent(spent, began):
                break
        del late[len(gains) :]  # (a pair cut after its replay without the stops)
        used = None if clock is None else clock() - began
        if not gains:
            return ReclaimVerdict(CUT, float("nan"), plan.lost, 0.0, 0, spent, used, self.rate)
        gain = float(np.median(gains))
        overshoot = float(np.median(late))
        if 2 * sum(1 for x in late if x > 0) > len(late):
            case = BOUND
        else:
            case = PAYS if gain > self.rate * plan.lost else DECLINED
        return ReclaimVerdict(case, gain, plan.lost, overshoot, len(gains), spent, used, self.rate)

    def _stop(self, before: int, began: float) -> Callable[[], bool]:
        """A replay's `stop`: True once the budget is spent, `before` events of the
        replays that ended counted with this one's."""
        events, seconds, clock = self.events, self.seconds, self.clock
        running = [before]

        def stop() -> bool:
            running[0] += 1
            if events is not None and running[0] > events:
                return True
            return seconds is not None and clock is not None and clock() - began > seconds

        return stop

    def _spent(self, events: int, began: float) -> bool:
        """Whether no further pair may start (the budget spent)."""
        if self.events is not None and events >= self.events:
            return True
        clock = self.clock
        return self.seconds is not None and clock is not None and clock() - began >= self.seconds


def forecast_judge(
    scheduler: Scheduler,
    seed: int,
    waves: bool,
    calm: Calm,
    clock: Callable[[], float] | None = None,
    rate: float = RATE,
) -> ForecastJudge:
    """A run's judge (`idlegate.sim.reclaim_plan.JudgeMaker`): `EVENTS` a decision, the
    grace of `calm`; `clock` measures each decision (`ReclaimVerdict.spent`), cutting
    nothing; `rate`, the exchange rate (`RATE`; another for the benchmark's tuning)."""
    return ForecastJudge(
        scheduler, seed=seed, waves=waves, grace=calm.grace, clock=clock, rate=rate
    )


def _fork(pool: Cluster) -> Cluster:
    """A fork of `pool` that makes no stop of its own and asks its question again now."""
    fork = pool.fork()
    if fork.admission is not None:
        fork.admission.reclaimer = None
        fork.admission.reopen()
    fork.needs_schedule = True
    return fork


def _saved(
    without: dict[int, tuple[float, float]],
    with_: dict[int, tuple[float, float]],
    left: tuple[dict[int, float], dict[int, float]],
    job: int,
) -> float:
    """What a workflow's finish moves by the stops in a pair of replays; one still in the
    pool at a replay's horizon finishes, at the soonest, its remaining critical path
    after it (`left`; 0 where it never finishes in one of them)."""
    a = without.get(job, (inf, inf))[1]
    b = with_.get(job, (inf, inf))[1]
    a = a if isfinite(a) else left[0].get(job, inf)
    b = b if isfinite(b) else left[1].get(job, inf)
    return a - b if isfinite(a) and isfinite(b) else 0.0


def _left(sim: Cluster, owners: set[int]) -> dict[int, float]:
    """The soonest finish of each owner's workflow still in a replayed fork at its end:
    its remaining critical path after then."""
    return {j.id: sim.now + j.remaining_cp for j in sim.jobs if j.id in owners}


def _overshoot(sim: Cluster, queue: int, grace: float) -> float:
    """The latest start of `queue`'s tasks past their bound plus `grace` in a replayed
    fork (0: none), read from its admission's record of the starts past a bound."""
    admission = sim.admission
    if admission is None:
        return 0.0
    late = [start - due - grace for q, due, start in admission.ledger.overdue if q == queue]
    return max([x for x in late if x > 0], default=0.0)


__all__ = ["EVENTS", "PAIRS", "ForecastJudge", "forecast_judge"]
