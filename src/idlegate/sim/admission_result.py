"""What the admission decided at a question, and why each other workflow waits: its one
result (`AdmissionResult`), read by everything that shows a queue (the visibility API,
`idlegate.api.queueing`, the operator's status, conditions, Events, metrics and lint).

A result is made by `idlegate.sim.admission.Admission.result` from the computation that
decided (its phases' own verdicts), never worked out again: a stage the result marks
startable is one the question lets the policy start, and a reason is the phase that held
the workflow back. Per queue (`QueueResult`), its waiting workflows (those with a ready
task not started) in the admission's order, each with its position (1 first) and either
the stages it may start now with how many tasks, or a `Reason` and a sentence (never an
empty one).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum
from math import inf
from typing import TYPE_CHECKING

from idlegate.sim.admission_snapshot import group_of, need_of
from idlegate.sim.protocol import Job, Stage, launchable
from idlegate.sim.resources import MILLI, format_quantities

if TYPE_CHECKING:
    from idlegate.sim.admission import Admission
    from idlegate.sim.cluster import Cluster

_MANY = 1 << 30
"""As many tasks as may be (`idlegate.sim.admission`'s)."""


class Reason(Enum):
    """Why a waiting workflow may start nothing now: the phase of the admission that held
    it back (`idlegate.sim.admission`'s docstring numbers them)."""

    QUOTA = "Quota"
    """Its next task is beyond its queue's nominal quota and may not borrow now: other
    queues start within their quotas first, or another queue borrows first."""
    BORROWING_LIMIT = "BorrowingLimit"
    """Its queue is at its nominal quota plus its borrowing limit (or may not borrow)."""
    COHORT_FULL = "CohortFull"
    """Nothing idle to borrow in the cohort: the other queues' claims take the rest."""
    PRIORITY = "Priority"
    """A workflow of higher priority in its queue goes first."""
    RESERVATION = "WaitBoundReservation"
    """Room is kept for a task past its queue's wait bound."""
    NO_NODE_FITS = "NoNodeFits"
    """The pool's free totals would hold its task, but no node has the room in one piece;
    or no node could hold it even empty (it then reserves nothing past its wait bound)."""
    FREE_RESOURCES = "WaitingForExecutors"
    """Entitled, but the pool has no free executor (or free resources) for its task now."""


@dataclass(frozen=True)
class Waiting:
    """One waiting workflow of a queue in the admission's order."""

    job: Job
    position: int
    """1 for the first of its queue."""
    may_start: Mapping[Stage, int]
    """The stages the question lets start now, each with how many tasks at most (empty:
    it waits, for `reason`)."""
    reason: Reason | None
    """Why it may start nothing now (None: it may start `may_start`)."""
    message: str
    """One sentence: what may start, or why it waits (never empty)."""


@dataclass(frozen=True)
class QueueResult:
    """One queue at a question."""

    name: str
    waiting: tuple[Waiting, ...]
    """Its waiting workflows in order (positions 1..n)."""
    used: tuple[float, ...]
    """What its running tasks use, per resource of `AdmissionResult.dims` (milli-units)."""
    borrowed: tuple[float, ...]
    """Of `used`, what is beyond its nominal quota."""
    lent: tuple[float, ...]
    """Its idle nominal quota the cohort's borrowing uses, in proportion to each queue's
    idle quota (as the ledger counts it)."""
    share: float
    """Its weighted dominant share."""
    oldest_wait: float
    """Seconds its oldest ready task has waited (0: none waits)."""
    why: str | None
    """Why its first waiting workflow waits when that is the queue's quota or wait bound
    (the message of a Quota, BorrowingLimit, CohortFull or WaitBoundReservation reason);
    None otherwise."""

    def startable(self) -> dict[Stage, int]:
        """Every stage of the queue the question lets start, with its tasks."""
        return {s: n for w in self.waiting for s, n in w.may_start.items()}


@dataclass(frozen=True)
class AdmissionResult:
    """The admission at one question (the module docstring)."""

    now: float
    dims: tuple[str, ...]
    """The resources of the vectors, pods first."""
    queues: tuple[QueueResult, ...]
    forced: Stage | None
    """A stage past its wait bound that starts before anything else (None: none)."""

    def of(self, job: Job) -> Waiting | None:
        """`job`'s entry (None: it does not wait, or is not in this pool)."""
        index = self.__dict__.get("_index")
        if index is None:  # (made at the first look-up: a frozen result keeps it)
            index = {w.job: w for q in self.queues for w in q.waiting}
            object.__setattr__(self, "_index", index)
        return index.get(job)

    def startable(self) -> dict[Stage, int]:
        """Every stage the question lets start, with its tasks."""
        return {s: n for q in self.queues for s, n in q.startable().items()}


_QUEUE_LEVEL = (Reason.QUOTA, Reason.BORROWING_LIMIT, Reason.COHORT_FULL, Reason.RESERVATION)
"""The reasons that are the queue's, not its workflow's (`QueueResult.why`)."""


# -- made from the admission's phases --------------------------------------------------------


def result_of(adm: Admission, cluster: Cluster | None) -> AdmissionResult:
    """`Admission.result`: the result of the open question of `cluster` (None: a result
    of the queues' usage alone, no workflow waiting)."""
    over, _idle = adm.over_idle()
    lent = adm.lent()
    now = adm.last_tick if cluster is None else cluster.now
    queues = []
    for q, spec in enumerate(adm.queues):
        jobs = [] if cluster is None else [j for j in adm.snapshot.jobs[q] if j.runnable]
        jobs.sort(key=lambda j: (-j.priority, j.id))
        entries = [_entry(adm, cluster, job, i + 1) for i, job in enumerate(jobs)]
        why = queue_why(entries[0] if entries else None)
        queues.append(
            QueueResult(
                name=spec.name,
                waiting=tuple(entries),
                used=tuple(adm.used[q]),
                borrowed=tuple(over[q]),
                lent=tuple(lent[q]),
                share=adm.share(q),
                oldest_wait=_oldest(adm, q, now),
                why=why,
            )
        )
    live = cluster is not None and cluster.free_executors > 0 and not cluster.beyond
    forced = None if adm.forced is None or not live else adm.forced.stage
    return AdmissionResult(now, adm.dims, tuple(queues), forced)


def queue_why(head: Waiting | None) -> str | None:
    """`QueueResult.why` of a queue whose first waiting workflow's entry is `head`."""
    return head.message if head is not None and head.reason in _QUEUE_LEVEL else None


def head_of(adm: Admission, cluster: Cluster, q: int) -> Waiting | None:
    """Queue q's first waiting workflow's entry, as `result_of` makes it (the first in
    arrival order of its top priority), without the entries of the others: what
    `idlegate.api.queueing.why_waiting` reads once per stage that waits."""
    groups = adm.snapshot.groups[q]
    if not groups:
        return None
    top = max(key.priority for key in groups)
    for job in adm.snapshot.jobs[q]:  # (arrival order)
        if job.runnable and job.priority == top:
            return _entry(adm, cluster, job, 1)
    return None


def _oldest(adm: Admission, q: int, now: float) -> float:
    for stage, t in adm.waits_since[q].items():
        if stage.job.finish is None and stage.launched < stage.available:
            return max(0.0, now - t)
    return 0.0


def _entry(adm: Admission, cluster: Cluster | None, job: Job, position: int) -> Waiting:
    idle = cluster is not None and cluster.free_executors > 0 and not cluster.beyond
    may = {}
    for stage in job.runnable:
        n = adm.room(stage) if idle and cluster is not None else 0
        if n and cluster is not None and launchable(stage, cluster.free_executors):
            may[stage] = n
    if may:
        said = ", ".join(f"{n if n < _MANY else 'any'} task(s) of {s.name}" for s, n in may.items())
        return Waiting(job, position, may, None, f"may start {said} now")
    reason, message = reason_of(adm, job.runnable[0])
    return Waiting(job, position, {}, reason, message)


def reason_of(adm: Admission, stage: Stage) -> tuple[Reason, str]:
    """Why `stage` may not start at the open question: the phase that held it back."""
    cluster, q = adm.cluster_asked, stage.job.queue
    name = adm.queues[q].name
    never = None if cluster is None else cluster.fits_no_node(stage)
    if never is not None:  # (first: nothing else would let it start)
        return Reason.NO_NODE_FITS, (
            f"stage {stage.name} {never}: it waits for a node that can hold it, and reserves "
            "no room nor holds any other workflow back meanwhile"
        )
    live = cluster is not None and cluster.free_executors > 0 and not cluster.beyond
    forced = adm.forced if live else None  # (with no executor free, nothing is forced yet)
    if forced is not None and forced.stage is not stage:
        other = adm.queues[forced.stage.job.queue].name
        return Reason.RESERVATION, (f"a task of queue {other} past its wait bound starts first")
    key, need = group_of(stage), need_of(stage)
    total = adm.entitled_for(q, key.amounts)[1]
    if total < need:
        return _limit(adm, q, key.amounts, need)
    held = adm.blocked.get(q)
    if held is not None and held is not stage:
        return Reason.RESERVATION, (
            f"queue {name}: its task of {held.job.name}/{held.name}, past the queue's "
            "wait bound, starts first"
        )
    if held is stage or (forced is not None and forced.stage is stage):
        return _fit(cluster, live, stage, need)  # (overdue, entitled: room)
    if q not in adm.served or key not in adm.allowed.get(q, ()):
        if adm.served and adm.phase.get(adm.served[0]) == "borrow":
            first = adm.queues[adm.served[0]].name
            return Reason.QUOTA, (
                f"queue {name}: beyond its nominal quota, and queue {first} borrows first"
            )
        return Reason.QUOTA, (
            f"queue {name}: beyond its nominal quota, and queues start within theirs first"
        )
    top = adm.top[q]
    if key.priority != top:
        return Reason.PRIORITY, (
            f"queue {name}: its workflows of priority {top} go first (this one: {key.priority})"
        )
    if adm.reserve is not None and not adm.room(stage):
        held = adm.reserve[0]
        return Reason.RESERVATION, (
            f"room is kept for {held.job.name}/{held.name} of queue "
            f"{adm.queues[held.job.queue].name}, past its wait bound"
        )
    return _fit(cluster, live, stage, need)


def _fit(cluster: Cluster | None, live: bool, stage: Stage, need: int) -> tuple[Reason, str]:
    """Phase 7's verdict on an entitled stage: no executor free (not `live`), no node with
    the room, or too little free, said in the pool's own terms (`Cluster.why_unfit`)."""
    if cluster is None or not live:
        if cluster is not None and cluster.follows_nodes:  # (its executors are no room)
            return Reason.FREE_RESOURCES, "the pool runs as many task pods as its size allows"
        return Reason.FREE_RESOURCES, "no executor of the pool is free"
    need_, unfit = stage.need, cluster.why_unfit(stage)
    if (
        need_ is not None
        and need_.nodes
        and all(f >= a * need for f, a in zip(need_.free, need_.amounts, strict=True))
    ):
        return Reason.NO_NODE_FITS, unfit or "no node has the room for its task"
    return Reason.FREE_RESOURCES, unfit or (
        f"the pool has {cluster.free_resources.format()} free, too little for its task"
    )


def _limit(
    adm: Admission, q: int, amounts: tuple[int, ...] | None, need: int
) -> tuple[Reason, str]:
    """Which of queue q's limits keeps `need` tasks of a demand of `amounts` from
    starting (phase 3's verdict, said)."""
    name, used, nominal = adm.queues[q].name, adm.used[q], adm.nominal[q]
    a = [MILLI, *(amounts or [0.0] * (len(adm.dims) - 1))]
    for i, (x, (_own, top)) in enumerate(zip(a, adm.tops(q, a), strict=True)):
        if x <= 0 or top >= x * need:
            continue
        d = adm.dims[i]
        capped = nominal[i] + adm.borrow[q][i] - used[i] < x * need
        if nominal[i] == inf:
            (have,) = format_quantities((int(used[i]),), binary=d == "memory")
            return Reason.COHORT_FULL, (
                f"queue {name}: {d} {have} used, nothing idle in the cohort"
            )
        have, own = format_quantities((int(used[i]), int(nominal[i])), binary=d == "memory")
        if capped:
            limit = "borrowing limit reached" if adm.borrow[q][i] else "no borrowing allowed"
            return Reason.BORROWING_LIMIT, f"queue {name}: {d} {have}/{own} used, {limit}"
        return Reason.COHORT_FULL, (
            f"queue {name}: {d} {have}/{own} used, nothing idle to borrow in the cohort"
        )
    return Reason.COHORT_FULL, f"queue {name}: nothing idle to borrow in the cohort"
