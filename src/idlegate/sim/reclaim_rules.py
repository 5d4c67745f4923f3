"""Which running tasks a waiting task may stop: the queues' preemption settings
(`idlegate.sim.queues.Preemption`) as a rule over the running tasks (issue 82, items 1
and 2). Being built: pure and tested, not yet called by the admission.

Pure and clock-free, like `idlegate.sim.cluster`: it reads what it is given (the pool's
queues, what each uses, the running tasks) and answers, in both clocks alike.

Semantics (queue q's waiting task of priority p needs a, milli-units of the resources
the pool counts, pods included; U_r is what queue r's running tasks hold, N_r its
nominal quota, B_r its borrowing limit; only the resources the task needs count):

* q is *within its nominal quota* with the task when U_q + a ≤ N_q on each of them that
  N_q names (a resource its quota does not name does not limit it).
* Another queue r *borrows* when U_r > N_r on one of them that N_r names; by
  U_r − N_r there (`Eligible.borrowed`, which bounds how much is taken back from it:
  `idlegate.sim.reclaim`, Kueue's rule, so a queue keeps its nominal quota but for
  less than one task).
* A running task of queue r and priority p' is a candidate, for a reason:
  - ``WithinQueue``: r = q, q's ``withinQueue`` is ``LowerPriority`` and p' < p;
  - ``Reclaim``: r ≠ q borrows, q is within its nominal quota with the task, and q's
    ``reclaim`` is ``Any``, or ``LowerPriority`` and p' < p (Kueue's
    ``reclaimWithinCohort``);
  - ``Borrowing``: r ≠ q borrows, q is not within its nominal quota with the task (it
    would borrow), q has a ``borrowBelow`` b, and p' < p and p' < b (Kueue's
    ``borrowWithinCohort`` with ``maxPriorityThreshold`` b − 1).
  No other task is one; with every setting at its default (``Never``) none is.
* When q is not within its nominal quota with the task, a `Bound` bounds it, which only
  q's own stopped tasks give back: where the cohort lends (``lends``, the admission's
  answer), its borrowing limit, N_q + B_q − U_q on each resource B_q names; where it does
  not, its nominal quota, N_q − U_q on each resource N_q names. How much the cohort lends
  is the admission's question, asked again after the victims are stopped (the wiring's).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from math import inf

from idlegate.sim.queues import QueueSpec
from idlegate.sim.reclaim import Bound, Running

WITHIN_QUEUE = "WithinQueue"
"""The reason of a victim of the waiting task's own queue, of lower priority."""
RECLAIM = "Reclaim"
"""The reason of a victim of a borrowing queue, for a task within its nominal quota."""
BORROWING = "Borrowing"
"""The reason of a victim of a borrowing queue, for a task that would borrow."""


@dataclass(frozen=True)
class Claimant:
    """The waiting task that does not fit: its queue's index, its workflow's
    priority, and what it needs (milli-units, pods included)."""

    queue: int
    priority: int
    need: Mapping[str, int] = field(hash=False)


@dataclass(frozen=True)
class Eligible:
    """What `eligible` answers: the candidates, each queue's reason, the borrowing
    queues' bounds and the waiting task's quota, as `idlegate.sim.reclaim.choose_victims`
    takes them."""

    candidates: tuple[Running, ...]
    reasons: Mapping[int, str]
    """By the candidates' queues: `WITHIN_QUEUE`, `RECLAIM` or `BORROWING`."""
    borrowed: Mapping[int, Mapping[str, int]]
    limits: tuple[Bound, ...] = ()

    def reason(self, task: Running) -> str:
        """Why `task` may be stopped (the module docstring's reasons)."""
        return self.reasons[task.queue]


def within_nominal(queue: QueueSpec, usage: Mapping[str, int], need: Mapping[str, int]) -> bool:
    """Whether `queue`, using `usage`, stays within its nominal quota with a task needing
    `need` (on each needed resource its quota names)."""
    return all(
        usage.get(x, 0) + a <= queue.nominal[x]
        for x, a in need.items()
        if a > 0 and x in queue.nominal
    )


def borrows(queue: QueueSpec, usage: Mapping[str, int], need: Mapping[str, int]) -> dict[str, int]:
    """By how much `queue`, using `usage`, is above its nominal quota on each resource a
    task needing `need` needs (and its quota names) where it is; empty: it borrows none."""
    return {
        x: usage.get(x, 0) - queue.nominal[x]
        for x, a in need.items()
        if a > 0 and x in queue.nominal and usage.get(x, 0) > queue.nominal[x]
    }


def eligible(
    claimant: Claimant,
    queues: Sequence[QueueSpec],
    usage: Sequence[Mapping[str, int]],
    running: Iterable[Running],
    *,
    lends: bool = True,
) -> Eligible:
    """The running tasks `claimant` may stop, by the settings of its queue (the module
    docstring), `usage` being what each queue's running tasks hold, by index, and
    `lends` whether the cohort lends the task what it needs beyond its nominal quota."""
    q, p, need = claimant.queue, claimant.priority, claimant.need
    settings = queues[q].preemption
    within = within_nominal(queues[q], usage[q], need)
    reasons: dict[int, str] = {}
    borrowed: dict[int, dict[str, int]] = {}
    if settings.within_queue == "LowerPriority":
        reasons[q] = WITHIN_QUEUE
    ceiling: dict[int, float] = {q: p}  # (a candidate's priority is below its queue's)
    for r, spec in enumerate(queues):
        over = borrows(spec, usage[r], need) if r != q else {}
        if not over:
            continue
        if within and settings.reclaim != "Never":
            reasons[r], borrowed[r] = RECLAIM, over
            ceiling[r] = inf if settings.reclaim == "Any" else p
        elif not within and settings.borrow_below is not None:
            reasons[r], borrowed[r] = BORROWING, over
            ceiling[r] = min(p, settings.borrow_below)
    chosen = tuple(t for t in running if t.queue in reasons and t.priority < ceiling[t.queue])
    limits: tuple[Bound, ...] = ()
    if not within:
        spec, used = queues[q], usage[q]
        top = (spec.borrowing_limit or {}) if lends else {x: 0 for x in spec.nominal}
        room = {
            x: spec.nominal.get(x, 0) + b - used.get(x, 0)
            for x, b in top.items()
            if need.get(x, 0) > 0
        }
        limits = (Bound(room, frozenset({q})),) if room else ()
    return Eligible(chosen, reasons, borrowed, limits)
