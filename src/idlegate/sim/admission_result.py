"""What the admission decided at a question, as its phases wrote it: the verdicts
(`Verdict`: a reason and the limit that held a stage back), the entries (`Entry`: per
waiting workflow, its position and what it may start, or the verdict on each of its
stages), and one result per question (`AdmissionResult`).

Types only, imported by the admission (`idlegate.sim.admission`, whose phases write the
verdicts), by the cluster (which reads the result) and by everything
that shows a queue (the visibility API, `idlegate.api.queueing`, the operator's status,
conditions, Events, metrics and lint), so that none of them imports another to name
what they share. Nothing here works out a reason or a position: a `Verdict` is written by
the phase that decided it, an `Entry`'s position by the admission's order
(`idlegate.sim.admission_entries`); what is read here is said, not decided.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum
from typing import NamedTuple

from idlegate.sim.protocol import Job, Stage
from idlegate.sim.resources import format_quantities

MANY = 1 << 30
"""As many tasks as may be: the room of a resource no quota limits."""


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
    RECLAIMING = "Reclaiming"
    """Entitled, no room free, and tasks of queues above their quota are being stopped to
    give its queue the room (their evictions asked: `idlegate.sim.reclaim_plan`)."""
    PARALLELISM_CAP = "ParallelismCap"
    """The queues let it start, but its workflow holds the parallelism cap the policy's
    last decision gave it (the cap rule: `idlegate.sim.legality.cap_holds`)."""
    POLICY = "PolicyRound"
    """The queues let it start, and the policy's round ended without starting it: the
    policy chose to wait, every rule failed, or it started other work (the round's
    verdict, written as the round ends)."""


class Limit(NamedTuple):
    """The limit of a queue that held a shape back (phase 3, as it decided): the first
    resource whose room is short, what the queue used of it and its nominal quota then."""

    queue: str
    resource: str
    used: float
    nominal: float
    """inf: the queue has no quota of it (the cohort's claims took the rest)."""
    borrowing: float
    """Its borrowing limit of it (inf: none; 0: no borrowing allowed)."""
    capped: bool
    """Whether its own nominal quota plus borrowing limit is what is short (else the
    cohort has nothing idle to lend)."""

    def said(self) -> str:
        binary, d = self.resource == "memory", self.resource
        if self.nominal == float("inf"):
            (have,) = format_quantities((int(self.used),), binary=binary)
            return f"queue {self.queue}: {d} {have} used, nothing idle in the cohort"
        have, own = format_quantities((int(self.used), int(self.nominal)), binary=binary)
        if self.capped:
            limit = "borrowing limit reached" if self.borrowing else "no borrowing allowed"
            return f"queue {self.queue}: {d} {have}/{own} used, {limit}"
        return f"queue {self.queue}: {d} {have}/{own} used, nothing idle to borrow in the cohort"


class Verdict(NamedTuple):
    """A phase's verdict that a stage (or every stage of a shape, or of a queue) may not
    start now: its `Reason`, and either the `Limit` that held it or the sentence's words
    (`text` with `words` filled in when it is read)."""

    reason: Reason
    text: str = ""
    words: tuple[object, ...] = ()
    limit: Limit | None = None

    @property
    def message(self) -> str:
        """One sentence (never empty)."""
        if self.limit is not None:
            return self.limit.said()
        return self.text.format(*self.words) if self.words else self.text


@dataclass(frozen=True)
class Entry:
    """One workflow of a queue with a stage that waits, in the admission's order."""

    job: Job
    position: int | None
    """1 for the first of its queue to start; None for a workflow that started already
    (one of its stages waits, but it is not waiting to start)."""
    may_start: Mapping[Stage, int]
    """The stages the question lets start now, each with how many tasks at most."""
    holds: Mapping[Stage, Verdict]
    """Each other runnable stage: the hold its phase wrote."""

    @property
    def reason(self) -> Reason | None:
        """Why it may start nothing now (None: it may start `may_start`): its first
        stage's hold."""
        if self.may_start or not self.holds:
            return None
        return next(iter(self.holds.values())).reason

    @property
    def message(self) -> str:
        """One sentence: what may start, or why it waits (never empty)."""
        if self.may_start or not self.holds:
            said = ", ".join(
                f"{n if n < MANY else 'any'} task(s) of {s.name}" for s, n in self.may_start.items()
            )
            return f"may start {said} now"
        return next(iter(self.holds.values())).message


@dataclass(frozen=True)
class QueueResult:
    """One queue at a question."""

    name: str
    waiting: tuple[Entry, ...]
    """Its workflows not started yet with a stage that waits, in order (positions 1..n)."""
    started: tuple[Entry, ...]
    """Its started workflows with a stage that waits (no position: they are not waiting
    to start)."""
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

    @property
    def why(self) -> str | None:
        """Why its first waiting workflow waits when that is the queue's quota or wait
        bound (the message of a Quota, BorrowingLimit, CohortFull or WaitBoundReservation
        hold); None otherwise."""
        head = self.waiting[0] if self.waiting else None
        return head.message if head is not None and head.reason in QUEUE_LEVEL else None

    def entries(self) -> tuple[Entry, ...]:
        """Every entry: the waiting in order, then the started."""
        return self.waiting + self.started

    def startable(self) -> dict[Stage, int]:
        """Every stage of the queue the question lets start, with its tasks."""
        return {s: n for w in self.entries() for s, n in w.may_start.items()}


QUEUE_LEVEL = (Reason.QUOTA, Reason.BORROWING_LIMIT, Reason.COHORT_FULL, Reason.RESERVATION)
"""The reasons that are the queue's, not its workflow's (`QueueResult.why`)."""


@dataclass(frozen=True)
class AdmissionResult:
    """The admission at one question: per queue its entries (the module docstring)."""

    now: float
    dims: tuple[str, ...]
    """The resources of the vectors, pods first."""
    queues: tuple[QueueResult, ...]
    forced: Stage | None
    """A stage past its wait bound that starts before anything else (None: none)."""

    def of(self, job: Job) -> Entry | None:
        """`job`'s entry (None: no stage of it waits, or it is not in this pool)."""
        index = self.__dict__.get("_index")
        if index is None:  # (made at the first look-up: a frozen result keeps it)
            index = {w.job: w for q in self.queues for w in q.entries()}
            object.__setattr__(self, "_index", index)
        return index.get(job)

    def position(self, job: Job) -> int | None:
        """`job`'s position in its queue (None: it started, or no stage of it waits)."""
        entry = self.of(job)
        return None if entry is None else entry.position

    def startable(self) -> dict[Stage, int]:
        """Every stage the question lets start, with its tasks."""
        return {s: n for q in self.queues for s, n in q.startable().items()}
