"""What a pool's queues use, and the ledger of it over time: the part of the admission
(`idlegate.sim.admission`) that counts, beside the part that decides.

`Usage` keeps each queue's usage U_q (the demand of its running tasks: a pod each, plus
what the pool counts beyond pods), its weighted dominant share over the cohort, and
integrates the figures of `idlegate.sim.queue_metrics` (`Ledger`) between changes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from math import inf

from idlegate.sim.admission_snapshot import demand_of
from idlegate.sim.protocol import Job, Stage
from idlegate.sim.queues import QueueSpec
from idlegate.sim.resources import MILLI


def jain_index(shares: Sequence[float]) -> float:
    """Jain's fairness index of `shares`: (sum x)^2 / (n sum x^2), 1 when all are equal
    (all zero too), 1/n when one holds everything."""
    squares = sum(s * s for s in shares)
    return 1.0 if squares == 0 else sum(shares) ** 2 / (len(shares) * squares)


@dataclass
class Ledger:
    """What the admission saw, per queue, for the figures (`idlegate.sim.queue_metrics`)."""

    waits: list[list[float]]
    """Seconds each started task of the queue waited (the module's wait), in start order."""
    overdue: list[tuple[int, float, float]] = field(default_factory=list)
    """(queue, bound time, start) of every task started past its bound."""
    borrowed: list[list[float]] = field(default_factory=list)
    """Per queue and resource, unit-seconds used beyond its nominal quota."""
    lent: list[list[float]] = field(default_factory=list)
    """Per queue and resource, unit-seconds of its idle nominal quota others used."""
    contended: float = 0.0
    """Seconds with two or more queues holding ready tasks that wait."""
    jain_area: float = 0.0
    """∫ Jain's index of the waiting queues' weighted dominant shares over `contended`."""


class Usage:
    """Each queue's usage and share, and the ledger (`Admission` derives from it); with
    the queues' limits and the Kueue baseline's reservations, what the baselines read
    (`idlegate.sim.admission_baselines`)."""

    queues: tuple[QueueSpec, ...]
    dims: tuple[str, ...]
    nominal: list[list[float]]
    borrow: list[list[float]]
    keep: list[list[float]]
    reserved: dict[Job, list[float]]
    widths: dict[Job, list[float]]
    cohort: list[float]
    weight: list[float]
    used: list[list[float]]
    ledger: Ledger
    last_tick: float
    _waiting: list[bool]
    _changed: set[int]
    over: list[bool]
    """Per queue, whether it uses beyond its nominal quota on some resource (`moved`)."""
    under: list[bool]
    """Per queue, whether it uses less than its nominal quota on some resource."""
    _shares: list[float | None]
    """Per queue, its `share` while its usage and the cohort stay (None: to work out)."""
    counts: bool = True
    """Whether the ledger counts: a round's replay reads its JCTs alone, and turns it off
    (`policy.portfolio.runs`), as the ledger's sums cost a replay 8 % of its CPU."""

    def settle(self, now: float) -> Ledger:
        """The ledger, integrated up to `now`."""
        self._tick(now)
        return self.ledger

    # -- what running tasks use ------------------------------------------------------

    def demand(self, stage: Stage) -> list[float]:
        """One task's demand, in `dims` order (a pod, then the pool's other resources)."""
        return demand_of(stage, len(self.dims))

    def start_usage(self, used: list[list[float]]) -> None:
        """Each queue uses `used` (a new admission's zeros, a fork's copy), and the ledger
        starts empty."""
        self.used = used
        n, dims = len(used), len(self.dims)
        self.over, self.under, self._shares = [False] * n, [True] * n, [None] * n
        self.moved()
        self.ledger = Ledger(
            waits=[[] for _ in used],
            borrowed=[[0.0] * dims for _ in used],
            lent=[[0.0] * dims for _ in used],
        )

    def use(self, stage: Stage, tasks: int, now: float) -> None:
        """`tasks` more (or, negative, fewer) of `stage`'s tasks run from `now` on."""
        self._tick(now)
        q = stage.job.queue
        self._changed.add(q)
        used = self.used[q]
        for i, a in enumerate(self.demand(stage)):
            used[i] += a * tasks
        self.moved(q)

    def moved(self, q: int | None = None) -> None:
        """Queue q's usage moved (None: every queue's, or the cohort): what is kept of it
        (`over`, `under`, `share`) follows. Kept, not worked out at each task's end:
        `may_go_on` runs at nearly every event of a replay."""
        for p in range(len(self.used)) if q is None else (q,):
            self._shares[p] = None
            over = under = False
            for u, n in zip(self.used[p], self.nominal[p], strict=True):
                over, under = over or u > n, under or u < n
            self.over[p], self.under[p] = over, under

    def _tick(self, now: float) -> None:
        """Integrate borrowing, lending and fairness over the time since the last change
        (the clock alone when the ledger does not count: `counts`)."""
        dt = now - self.last_tick
        if dt <= 0:
            return
        self.last_tick = now
        if not self.counts:
            return
        ledger = self.ledger
        over, idle = self.over_idle()
        total = [sum(col) for col in zip(*over, strict=True)]
        idle_total = [sum(col) for col in zip(*idle, strict=True)]
        for q in range(len(over)):
            for i in range(len(self.dims)):
                ledger.borrowed[q][i] += over[q][i] * dt / MILLI
                if idle_total[i] > 0:
                    ledger.lent[q][i] += total[i] * idle[q][i] / idle_total[i] * dt / MILLI
        waiting = [q for q, w in enumerate(self._waiting) if w]
        if len(waiting) >= 2:
            ledger.contended += dt
            ledger.jain_area += jain_index([self.share(q) for q in waiting]) * dt

    def over_idle(self) -> tuple[list[list[float]], list[list[float]]]:
        """Per queue and resource, its use beyond its nominal quota and its idle quota."""
        over, idle = [], []
        for used, nominal in zip(self.used, self.nominal, strict=True):
            pairs = list(zip(used, nominal, strict=True))
            over.append([max(0.0, u - n) if n != inf else 0.0 for u, n in pairs])
            idle.append([max(0.0, n - u) if n != inf else 0.0 for u, n in pairs])
        return over, idle

    def lent(self) -> list[list[float]]:
        """Per queue and resource, its idle nominal quota that others' borrowing uses now,
        in proportion to each queue's idle quota (as the ledger counts it)."""
        over, idle = self.over_idle()
        borrowed = [sum(col) for col in zip(*over, strict=True)]
        spare = [sum(col) for col in zip(*idle, strict=True)]
        return [
            [b * i / s if s > 0 else 0.0 for b, i, s in zip(borrowed, row, spare, strict=True)]
            for row in idle
        ]

    def share(self, q: int) -> float:
        """Queue q's weighted dominant share: max over resources of U_q / cohort, / weight
        (kept while its usage and the cohort stay: `moved`)."""
        got = self._shares[q]
        if got is None:
            used, cohort = self.used[q], self.cohort
            s = max((u / c for u, c in zip(used, cohort, strict=True) if c > 0), default=0)
            got = self._shares[q] = s / self.weight[q]
        return got
