"""The admission's entries: per workflow with a stage that waits, its position and what it
may start, or the hold its phase wrote for each of its stages (`idlegate.sim.admission`,
whose `Admission` derives from `Entries`).

A phase writes its hold as it decides (`idlegate.sim.admission_result.Verdict`): phase 3 the
limit that keeps a shape from starting at all, phase 4 the task past its wait bound that
goes first (the one forced, the room reserved), phase 5 the quota a queue not served is
beyond, phase 6 the priority that goes first, all kept in the question's plan; phase 7
the pool's room, which the phase decides per stage as it is asked (`_fit`: whether a
stage fits is a question of that stage). A stage's entry reads them in the phases' order
of precedence (`hold_of`); nothing works a reason out again. The holds are written per queue and per
shape, the unit the phases decide over (every stage of one shape gets the same answer,
`idlegate.sim.admission_snapshot`), not per workflow: a question at 4,000 waiting costs
what the change costs, not what the waiting do.

A position is the order the admission will start a queue's workflows in: by priority
(phase 6 serves the highest first), then by the order the policy says it starts them in
when it says one (its ``order_key``: srpt's remaining work, sjf-cp's critical path, as
`Cluster.order` indexes them; the cluster keeps the one it was last asked with), else by
arrival. Only workflows that have not started are numbered: one that started and has
another stage waiting has an entry without a position. docs/queues.md says the same.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from math import inf
from typing import TYPE_CHECKING

from idlegate.sim.admission_result import (
    AdmissionResult,
    Entry,
    Limit,
    QueueResult,
    Reason,
    Verdict,
)
from idlegate.sim.admission_snapshot import Group, QueueSnapshot, group_of, need_of
from idlegate.sim.protocol import Job, Stage, launchable
from idlegate.sim.resources import binary_units, format_quantities

if TYPE_CHECKING:
    from idlegate.sim.admission_plan import AdmissionPlan
    from idlegate.sim.admission_types import PoolState
    from idlegate.sim.queues import QueueSpec
    from idlegate.sim.reclaim_plan import Reclaimer

NEVER = (
    "stage {} {}: it waits for a node that can hold it, and reserves no room nor holds any "
    "other workflow back meanwhile"
)
FORCED = "a task of queue {} past its wait bound starts first"
BLOCKED = "queue {}: its task of {}/{}, past the queue's wait bound, starts first"
RESERVED = "room is kept for {}/{} of queue {}, past its wait bound"
QUOTA = "queue {}: beyond its nominal quota, and {}"
PRIORITY = "queue {}: its workflows of priority {} go first (this one: {})"
RECLAIMING = (
    "{} task(s) of queues above their quota are being stopped to give queue {} its room "
    "back: it starts as they end"
)


class Entries:
    """What the phases wrote, read as entries (the module docstring)."""

    queues: tuple[QueueSpec, ...]
    dims: tuple[str, ...]
    used: list[list[float]]
    nominal: list[list[float]]
    waits_since: list[dict[Stage, float]]
    snapshot: QueueSnapshot
    cluster_asked: PoolState | None
    reclaimer: Reclaimer | None
    plan: AdmissionPlan
    """The open question's answer: phases 4 to 6's holds, and what may start."""
    limits: list[tuple[Verdict | None, dict[Group, Verdict]]]
    """Phase 3's holds per queue (kept while its verdict is): of the whole queue, with
    room for no pod, else of each shape it may not start at all."""
    quota: tuple[Verdict, ...]
    """Phase 5's hold of each queue's stages beyond its nominal quota while the queues
    start within theirs first (made with the queues: `quota_holds`)."""
    last_tick: float

    def over_idle(self) -> tuple[list[list[float]], list[list[float]]]:
        raise NotImplementedError

    def lent(self) -> list[list[float]]:
        raise NotImplementedError

    def demand(self, stage: Stage) -> list[float]:
        raise NotImplementedError

    def share(self, q: int) -> float:
        raise NotImplementedError

    def _free(self, cluster: PoolState) -> list[float]:
        free = cluster.free_resources
        return [float(free[d]) for d in self.dims]

    def hold_of(self, stage: Stage) -> Verdict | None:
        """The hold the phases wrote for `stage` at the open question (None: it may start
        now), in their order of precedence: a stage no node holds, a task forced past its
        wait bound, its queue's limits (phase 3), its queue's task past the bound (4),
        its quota (5), its priority (6), the reservation and the pool's room (7)."""
        cluster, q, plan = self.cluster_asked, stage.job.queue, self.plan
        if cluster is not None and (never := cluster.fits_no_node(stage)) is not None:
            return Verdict(Reason.NO_NODE_FITS, NEVER, (stage.name, never))
        live = cluster is not None and cluster.free_executors > 0 and not cluster.beyond
        forced = plan.forced if live else None  # (with no executor free, nothing is forced yet)
        if forced is not None and forced.stage is not stage:
            return plan.forced_hold
        key = group_of(stage)
        whole, shapes = self.limits[q]
        limit = whole or shapes.get(key)
        if limit is not None:
            return limit
        blocked = plan.blocked.get(q)
        if blocked is not None and blocked is not stage:
            return plan.holds[q]
        if blocked is stage or (forced is not None and forced.stage is stage):
            return self._fit(cluster, live, stage)  # (overdue, entitled: room)
        if q not in plan.served or key not in plan.allowed.get(q, ()):
            return (plan.quota or self.quota)[q]
        ranked = plan.ranked_out.get(q)
        if ranked is not None and key in ranked:
            return ranked[key]
        if plan.reserve is not None and not plan.room(stage):
            return plan.reserve_hold
        if (
            live
            and cluster is not None
            and plan.room(stage)
            and launchable(stage, cluster.free_executors)
        ):
            return None
        return self._fit(cluster, live, stage)

    def _fit(self, cluster: PoolState | None, live: bool, stage: Stage) -> Verdict:
        """Phase 7's verdict on an entitled stage: no executor free (not `live`), a gang
        wider than the free executors, no node with the room, or too little free, said
        in the pool's own terms (on nodes: never its executors, which are no room there;
        `why_unfit`). The Waiting Event says it as it is (`idlegate.api.notices.waiting`)."""
        if cluster is None:
            return Verdict(Reason.FREE_RESOURCES, "no executor of the pool is free")
        name = self.queues[stage.job.queue].name
        if self.reclaimer is not None and (n := self.reclaimer.stopping_for(name)):
            return Verdict(Reason.RECLAIMING, RECLAIMING, (n, name))
        size, free = cluster.num_executors, cluster.free_executors
        if not live:
            text = "all {} executors of the pool are busy"
            if cluster.follows_nodes:
                text = "the pool runs as many task pods as its size allows ({})"
            return Verdict(Reason.FREE_RESOURCES, text + self._unstopped(stage), (size,))
        need, tasks = stage.need, need_of(stage)
        if stage.gang and tasks > free:
            text = "it is a gang of {} tasks and only {} executors are free"
            return Verdict(Reason.FREE_RESOURCES, text, (stage.tasks, free))
        unfit = cluster.why_unfit(stage)
        if (
            need is not None
            and need.nodes
            and all(f >= a * tasks for f, a in zip(need.free, need.amounts, strict=True))
        ):
            return Verdict(Reason.NO_NODE_FITS, unfit or "no node has the room for its task")
        lent = self._lent(cluster, stage)
        if unfit:
            return Verdict(Reason.FREE_RESOURCES, unfit + lent)
        text = "the pool has {} free, too little for its task{}"
        return Verdict(Reason.FREE_RESOURCES, text, (cluster.free_resources.format(), lent))

    def _unstopped(self, stage: Stage) -> str:
        """Where the reclaim said why it stops nothing for `stage`'s queue (its patience, a
        declined verdict, the budget, a refused eviction: `Reclaimer.still_for`), the
        clause that says it (issue 93); "" where it said nothing."""
        q = stage.job.queue
        still = self.reclaimer.still_for(q) if self.reclaimer is not None else None
        return (
            ""
            if still is None
            else f"; none is stopped for queue {self.queues[q].name} now: {still}"
        )

    def _lent(self, cluster: PoolState, stage: Stage) -> str:
        """The clause a wait for room adds when the room short is its queue's own quota,
        lent to queues that borrow beyond theirs (issue 93: a queue within its quota was
        told only that the nodes were full, in a resource they had plenty of): whose
        borrowed tasks hold it, and how it comes back under the queue's preemption; ""
        where the queue is beyond its quota on a resource short, or none is lent."""
        q = stage.job.queue
        free, a, used, nominal = self._free(cluster), self.demand(stage), self.used, self.nominal
        over, _idle = self.over_idle()
        short = []
        for i in range(len(self.dims)):
            if free[i] >= a[i] or a[i] <= 0:
                continue
            if used[q][i] + a[i] > nominal[q][i] or nominal[q][i] == inf:
                return ""  # (the queue itself is at its quota there: not lent room)
            short.append(i)
        borrowers = [
            p for p in range(len(self.queues)) if p != q and any(over[p][i] for i in short)
        ]
        if not short or not borrowers:
            return ""
        spec = self.queues[q]
        parts = []
        for i in short:
            binary = binary_units(self.dims[i])
            have, own = format_quantities((int(used[q][i]), int(nominal[q][i])), binary=binary)
            parts.append(f"{self.dims[i]} {have}/{own}")
        names = ", ".join(self.queues[p].name for p in borrowers)
        comes = "it comes back as their borrowed tasks end"
        still = self.reclaimer.still_for(q) if self.reclaimer is not None else None
        if spec.preemption.reclaim == "Never":
            comes += " (its preemption's reclaim is Never)"
        elif still is not None:  # (why, as the reclaim decided it: issue 93)
            comes += f" or are stopped (reclaim: {spec.preemption.reclaim}; none is stopped now: {still})"
        else:
            comes += f" or are stopped (reclaim: {spec.preemption.reclaim}; none is stopping now)"
        return (
            f"; queue {spec.name} is within its nominal quota ({', '.join(parts)} used) and "
            f"lends the rest to queue(s) {names}, which borrow beyond theirs: {comes}"
        )

    def entry_of(self, job: Job, position: int | None) -> Entry:
        """`job`'s entry at the open question: each runnable stage's room or hold."""
        may: dict[Stage, int] = {}
        holds: dict[Stage, Verdict] = {}
        for stage in job.runnable:
            hold = self.hold_of(stage)
            if hold is None:
                may[stage] = self.plan.room(stage)
            else:
                holds[stage] = hold
        return Entry(job, position, may, holds)

    def in_order(self, q: int, key: str | None) -> list[Job]:
        """Queue q's workflows with a stage that waits, in the order the admission will
        start them (the module docstring): priority, the policy's `key`, arrival."""
        jobs = [j for j in self.snapshot.jobs[q] if j.runnable]  # (arrival order)
        if key is None:
            jobs.sort(key=lambda j: -j.priority)  # (stable: arrival within a priority)
        else:
            jobs.sort(key=lambda j: (-j.priority, getattr(j, key)))
        return jobs

    def numbered(self, q: int, key: str | None) -> Iterator[tuple[Job, int | None]]:
        """Queue q's workflows with a stage that waits, each with its position (None: it
        started), in the order of `in_order`: the one numbering of positions (the module
        docstring), read by the result and by `ahead`."""
        waiting = 0
        for job in self.in_order(q, key):
            if job.first_start is None:
                waiting += 1
                yield job, waiting
            else:
                yield job, None

    def _observe(self, pool: PoolState, now: float) -> None:
        raise NotImplementedError

    def ahead(self, pool: PoolState, n: int) -> list[Job]:
        """Per queue, its workflows at positions 1 to `n` (not started: the next the
        admission will start, in `numbered`'s order, the pool's present order key), of
        the jobs of `pool` as they are now. What the operator creates pods ahead for
        (its gated pods of a workflow within reach); none when `n` is 0."""
        if n <= 0:
            return []
        self._observe(pool, pool.now)  # (the snapshot reads the jobs that came or changed)
        found: list[Job] = []
        for q in range(len(self.queues)):
            for job, position in self.numbered(q, pool.order_key):
                if position is not None:
                    found.append(job)
                    if position >= n:
                        break
        return found

    def result_of(self, cluster: PoolState | None, key: str | None) -> AdmissionResult:
        """The result of the open question of `cluster` (None: of the queues' usage alone,
        no workflow waiting), its positions in the order of the policy's `key`."""
        over, _idle = self.over_idle()
        lent = self.lent()
        now = self.last_tick if cluster is None else cluster.now
        queues = []
        for q, spec in enumerate(self.queues):
            waiting: list[Entry] = []
            started: list[Entry] = []
            for job, position in () if cluster is None else self.numbered(q, key):
                if position is not None:
                    waiting.append(self.entry_of(job, position))
                else:
                    started.append(self.entry_of(job, None))
            queues.append(
                QueueResult(
                    name=spec.name,
                    waiting=tuple(waiting),
                    started=tuple(started),
                    used=tuple(self.used[q]),
                    borrowed=tuple(over[q]),
                    lent=tuple(lent[q]),
                    share=self.share(q),
                    oldest_wait=self._oldest(q, now),
                )
            )
        live = cluster is not None and cluster.free_executors > 0 and not cluster.beyond
        forced = None if self.plan.forced is None or not live else self.plan.forced.stage
        return AdmissionResult(now, self.dims, tuple(queues), forced)

    def _oldest(self, q: int, now: float) -> float:
        for stage, t in self.waits_since[q].items():
            if stage.waits:
                return max(0.0, now - t)
        return 0.0


WITHIN_FIRST = "queues start within theirs first"
"""Why a queue's stages beyond its nominal quota wait while no queue borrows (phase 5)."""


def quota_holds(queues: Sequence[QueueSpec], note: str = WITHIN_FIRST) -> tuple[Verdict, ...]:
    """Phase 5's hold of each queue's stages beyond its nominal quota, with why they wait
    (`note`: the queues start within theirs first, or one borrows first)."""
    return tuple(Verdict(Reason.QUOTA, QUOTA, (spec.name, note)) for spec in queues)


def forced_hold(queue: str) -> Verdict:
    """Phase 4's hold of every other stage while a task of `queue` past its wait bound is
    forced to start first."""
    return Verdict(Reason.RESERVATION, FORCED, (queue,))


def reserved_hold(stage: Stage, queues: Sequence[QueueSpec]) -> Verdict:
    """Phase 4's hold of a stage the room kept for `stage` (past its wait bound) leaves
    none."""
    return Verdict(
        Reason.RESERVATION, RESERVED, (stage.job.name, stage.name, queues[stage.job.queue].name)
    )


def first_limit(
    name: str,
    dims: Sequence[str],
    used: Sequence[float],
    nominal: Sequence[float],
    borrow: Sequence[float],
    a: Sequence[float],
    tops: Sequence[tuple[float, float]],
    need: int,
) -> Verdict:
    """Phase 3's hold of a shape of demand `a` whose `need` tasks its queue may not start:
    the first resource whose room (`tops`, the phase's own) is short. (Made at every
    question a queue's room changes: its verdict made whole, `_make`, not by keyword.)"""
    for i in range(len(a)):
        x = a[i] * need
        if x <= 0 or tops[i][1] >= x:
            continue
        u, n, b = used[i], nominal[i], borrow[i]
        capped = n + b - u < x
        limit = Limit(name, dims[i], u, n, b, capped)
        reason = Reason.BORROWING_LIMIT if capped and n != inf else Reason.COHORT_FULL
        return Verdict._make((reason, "", (), limit))
    return Verdict(Reason.COHORT_FULL, "queue {}: nothing idle to borrow in the cohort", (name,))
