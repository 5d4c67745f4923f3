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
  workflows (the claimant queue's, present now) have finished, or to its horizon
  (`HORIZON`), or to where its share of the budget ends it (below): an owner still in
  the pool then finishes, at the soonest, its remaining critical path after that time
  (the horizon's, not its last event's: with no task ending within the horizon, the
  replay's clock never moved). A decision runs up to `PAIRS` pairs, a third only where
  the first two disagree: two pairs on one side of the work lost's worth decide the
  median of three, two late replays decide `BOUND` (`_decided`).
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
  - `CUT`: the budget was spent before one pair of replays looked `SHORTEST` seconds
    ahead: the rules' answer, the stops go ahead (said so in the verdict).
* *Budget.* A decision's replays together take at most `events` events (deterministic:
  the simulator's figures repeat), or with `seconds` that much of the caller's `clock`
  (a live pool's CPU time), and a replay at most a share of the events, 1 / (2 ×
  `FIRST_PAIRS`) of them (the second of a pair may take what the first left of the
  pair's). A replay past its share, or the decision's, ends there rather than being
  cut: the pair's other replay runs to the same time, and the pair is compared there,
  if it looked at least `SHORTEST` seconds ahead (else it is left out).
  `benchmarks/queues.py` measures each decision's CPU time beside it.

The verdict rides on the plan's stops (`idlegate.sim.reclaim_plan.Reclaim.verdict`) and
says which case held with both figures (`ReclaimVerdict.sentence`: the ``Preempted`` Event's
clause, `idlegate.api.notices.preempted`); the reclaim keeps every verdict, declined
ones included (`Reclaimer.verdicts`), for the benchmark to count.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from math import inf, isfinite
from typing import TYPE_CHECKING

import numpy as np

from idlegate.sim.forecast import replay
from idlegate.sim.reclaim_verdict import BOUND, CUT, DECLINED, PAYS, RATE, ReclaimVerdict
from idlegate.sim.rollout import Future

if TYPE_CHECKING:
    from idlegate.sim.cluster import Cluster
    from idlegate.sim.protocol import Scheduler
    from idlegate.sim.reclaim_ledger import Calm
    from idlegate.sim.reclaim_plan import Reclaim

PAIRS = 3
"""Pairs of replays a decision runs at most (within its budget): a third only where the
first two disagree (`_decided`)."""
FIRST_PAIRS = 1
"""Pairs a decision's budget is shared out for: a replay takes at most `EVENTS` / (2 ×
`FIRST_PAIRS`) events, so the first pair always fits and looks as far ahead as it can;
another runs only with what it left (a busy pool's decision is one pair, a quiet one's
up to `PAIRS`). Tuned with `EVENTS` and `SHORTEST` (docs/queues.md, "The judge's
budget, tuning seeds")."""
SHORTEST = 10.0
"""Seconds a pair of replays must look ahead (or end on their own first) to count: one
whose budget ended it sooner says too little, and is cut."""
HORIZON = 100.0
"""Seconds a replay looks ahead (its cost grows with how far it runs): an owner's
workflow not finished by then finishes, at the soonest, its remaining critical path
later, and is counted so."""
EVENTS = 1_500
"""Events a decision's replays may take in all: an event cost up to about 130 µs of CPU
on `-w teams`' 30 executors with a bound of 120 s under a loaded machine (20-30 µs
alone), so at most about 0.2 s a decision (`benchmarks/queues.py` measures each
decision's)."""


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
        first_pairs: int = FIRST_PAIRS,
        shortest: float = SHORTEST,
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
        self.first_pairs = first_pairs
        self.shortest = shortest
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
        worth = self.rate * plan.lost
        share = None if self.events is None else max(1, self.events // (2 * self.first_pairs))
        for _ in range(self.pairs):
            if _decided(gains, late, worth, self.pairs) or self._spent(spent, began):
                break
            future = Future((), int(self.rng.integers(2**63)))
            runs = (_Run(owners, queue, self.grace), _Run(owners, queue, self.grace))
            n0 = self._replay(without, future, now + self.horizon, runs[0], spent, began, share)
            spent += n0
            until = runs[0].reached(now + self.horizon)  # (the pair looks as far ahead)
            # (the pair's second replay may take what its first left of the pair's share)
            rest = None if share is None else max(share, 2 * share - n0)
            spent += self._replay(with_, future, until, runs[1], spent, began, rest)
            if min(runs[0].ahead(now), runs[1].ahead(now)) < self.shortest:
                break  # (the budget spent before the pair looked far enough ahead)
            gains.append(sum(_saved(runs[0], runs[1], o) for o in owners))
            late.append(runs[0].overshoot)
        used = None if clock is None else clock() - began
        if not gains:
            return ReclaimVerdict(CUT, float("nan"), plan.lost, 0.0, 0, spent, used, self.rate)
        gain = float(np.median(gains))
        overshoot = float(np.median(late))
        if 2 * sum(1 for x in late if x > 0) > len(late):
            case = BOUND
        else:
            case = PAYS if gain > worth else DECLINED
        return ReclaimVerdict(case, gain, plan.lost, overshoot, len(gains), spent, used, self.rate)

    def _replay(
        self,
        fork: Cluster,
        future: Future,
        until: float,
        run: _Run,
        before: int,
        began: float,
        most: int | None,
    ) -> int:
        """One replay of `fork` into `run`, ended at `until`, once the owners finished, or
        where the budget (`most` events of its own, and the decision's) is spent; the
        events it took."""
        stop = self._stop(before, began, most, run)
        run.until = until
        seen, events = replay(
            fork, self.scheduler, future, until, self.waves, run.owners, stop, after=run.read,
            truncate=True,
        )  # fmt: skip
        run.seen = seen
        return events

    def _stop(self, before: int, began: float, most: int | None, run: _Run) -> Callable[[], bool]:
        """A replay's `stop`: True once the budget is spent (`before` events of the
        replays that ended counted with this one's; at most `most` of its own), which
        marks `run` as cut short."""
        events, seconds, clock = self.events, self.seconds, self.clock
        running = [before, 0]

        def stop() -> bool:
            running[0] += 1
            running[1] += 1
            if (
                (events is not None and running[0] >= events)
                or (most is not None and running[1] >= most)
                or (seconds is not None and clock is not None and clock() - began > seconds)
            ):
                run.cut = True
            return run.cut

        return stop

    def _spent(self, events: int, began: float) -> bool:
        """Whether no further pair may start (the budget spent)."""
        if self.events is not None and events >= self.events:
            return True
        clock = self.clock
        return self.seconds is not None and clock is not None and clock() - began >= self.seconds


class _Run:
    """What a judge reads of one replay: each owner's finish (inf: not by its end), the
    soonest finish of those still in the pool at its end, how far it looked ahead and
    the owners' queue's latest start past its bound plus the grace."""

    def __init__(self, owners: set[int], queue: int, grace: float) -> None:
        self.owners, self.queue, self.grace = owners, queue, grace
        self.seen: dict[int, tuple[float, float]] = {}
        self.left: dict[int, float] = {}
        self.end = -inf
        self.until = inf
        """The replay's horizon (`_replay` sets it)."""
        self.cut = False
        self.overshoot = 0.0

    def read(self, sim: Cluster) -> None:
        """The replay's `after`: read the fork where it ended (cut short, or at its
        horizon, whatever its last event's time: nothing happened in between). One
        whose owners all finished was not cut short, the budget spent or not."""
        if self.cut and not any(j.id in self.owners for j in sim.jobs):
            self.cut = False
        self.end = sim.now if self.cut else max(sim.now, self.until)
        self.left = _left(sim, self.owners, self.end)
        self.overshoot = _overshoot(sim, self.queue, self.grace)

    def reached(self, horizon: float) -> float:
        """Until when the other replay of the pair runs: where this one was cut, else the
        horizon (it ended once the owners finished, or at the horizon)."""
        return self.end if self.cut else horizon

    def ahead(self, now: float) -> float:
        """How far it looked ahead: inf where it ended on its own (the owners finished, or
        the horizon)."""
        return self.end - now if self.cut else inf


def _decided(gains: list[float], late: list[float], worth: float, pairs: int) -> bool:
    """Whether the pairs so far decide the verdict whatever the `pairs` − len(`gains`) left
    give: a majority of them already late (`BOUND`), or none possible and a majority of
    the gains on one side of `worth` (the median stays there)."""
    if not gains:
        return False
    rest = pairs - len(gains)
    overdue = sum(1 for x in late if x > 0)
    if 2 * overdue > pairs:
        return True
    if 2 * (overdue + rest) > pairs:
        return False
    above = sum(1 for g in gains if g > worth)
    return 2 * above > pairs or 2 * (len(gains) - above) > pairs


def forecast_judge(
    scheduler: Scheduler,
    seed: int,
    waves: bool,
    calm: Calm,
    clock: Callable[[], float] | None = None,
    rate: float = RATE,
    events: int = EVENTS,
    first_pairs: int = FIRST_PAIRS,
    shortest: float = SHORTEST,
) -> ForecastJudge:
    """A run's judge (`idlegate.sim.reclaim_plan.JudgeMaker`): `EVENTS` a decision, the
    grace of `calm`; `clock` measures each decision (`ReclaimVerdict.spent`), cutting
    nothing; `rate`, the exchange rate (`RATE`), and `events`, `first_pairs` and
    `shortest` the budget's (others for the benchmark's tuning)."""
    return ForecastJudge(
        scheduler,
        seed=seed,
        waves=waves,
        grace=calm.grace,
        clock=clock,
        rate=rate,
        events=events,
        first_pairs=first_pairs,
        shortest=shortest,
    )


def _fork(pool: Cluster) -> Cluster:
    """A fork of `pool` that makes no stop of its own and asks its question again now."""
    fork = pool.fork()
    if fork.admission is not None:
        fork.admission.reclaimer = None
        fork.admission.reopen()
    fork.needs_schedule = True
    return fork


def _saved(without: _Run, with_: _Run, job: int) -> float:
    """What a workflow's finish moves by the stops in a pair of replays; one still in the
    pool where a replay ended finishes, at the soonest, its remaining critical path
    after it (0 where it never finishes in one of them)."""
    a = without.seen.get(job, (inf, inf))[1]
    b = with_.seen.get(job, (inf, inf))[1]
    a = a if isfinite(a) else without.left.get(job, inf)
    b = b if isfinite(b) else with_.left.get(job, inf)
    return a - b if isfinite(a) and isfinite(b) else 0.0


def _left(sim: Cluster, owners: set[int], end: float) -> dict[int, float]:
    """The soonest finish of each owner's workflow still in a replayed fork at its `end`:
    its remaining critical path after then."""
    return {j.id: end + j.remaining_cp for j in sim.jobs if j.id in owners}


def _overshoot(sim: Cluster, queue: int, grace: float) -> float:
    """The latest start of `queue`'s tasks past their bound plus `grace` in a replayed
    fork (0: none), read from its admission's record of the starts past a bound."""
    admission = sim.admission
    if admission is None:
        return 0.0
    late = [start - due - grace for q, due, start in admission.ledger.overdue if q == queue]
    return max([x for x in late if x > 0], default=0.0)


__all__ = ["EVENTS", "PAIRS", "ForecastJudge", "forecast_judge"]
