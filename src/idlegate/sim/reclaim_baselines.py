"""The Kueue-like baseline of the victims' choice, beside idlegate's
(`idlegate.sim.reclaim`), for the benchmark of issue 82 (item 6). Being built: pure and
tested, not yet called by the admission.

Pure and clock-free, like `idlegate.sim.cluster`.

Semantics (Kueue's classical preemption, ``pkg/scheduler/preemption``, restated over
the same candidates, rules and fit as idlegate's choice, so that the two differ only in
how they choose):

* A victim is a whole *workflow* (Kueue's Workload): all of its running tasks among the
  candidates are stopped together.
* The workflows are taken in Kueue's order: those of other queues before those of the
  waiting task's own queue, then the lowest priority first, then the most recently
  admitted first (`Running.admitted`, else the latest start of its tasks), then the
  candidates' order.
* A workflow of a queue bounded by `borrowed` is taken only while that queue still
  borrows before it is (what its taken workflows hold is below what it borrows on some
  resource); else it is skipped.
* Workflows are taken until the waiting task fits (`idlegate.sim.reclaim.fits`); then,
  from the one before the last back to the first, each without which it still fits is
  given back (Kueue's ``fillBackWorkloads``). None: all of them would not do.
* What it loses is counted as idlegate's is, over the running tasks it stops: generous
  to Kueue, whose stopped workflow may lose its finished tasks' work too.
* A pool of nodes is beyond it: Kueue's classical preemption counts quota, not nodes
  (`free` is the pool's).
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence

from idlegate.sim.reclaim import Bound, Running, Victims, fits


def kueue_victims(
    need: Mapping[str, int],
    candidates: Sequence[Running],
    now: float,
    queue: int,
    *,
    free: Mapping[str, int],
    limits: Sequence[Bound] = (),
    borrowed: Mapping[int, Mapping[str, int]] | None = None,
) -> Victims | None:
    """The workflows Kueue would stop for a task of `queue` needing `need` to fit `free`
    and every Bound (the module docstring), as their running tasks; None: none would do."""
    need = {n: a for n, a in need.items() if a > 0}
    if fits(need, free, (), limits):
        return Victims((), 0)
    borrowed = borrowed or {}
    units: dict[Hashable, list[Running]] = {}
    for c in candidates:
        units.setdefault(c.task if c.workflow is None else c.workflow, []).append(c)
    first = {w: i for i, w in enumerate(units)}

    def rank(w: Hashable) -> tuple[bool, int, float, int]:
        tasks = units[w]
        admitted = tasks[0].admitted
        when = max(t.start for t in tasks) if admitted is None else admitted
        return (tasks[0].queue == queue, tasks[0].priority, -when, first[w])

    taken: list[Hashable] = []
    held: dict[int, dict[str, int]] = {}
    chosen: list[Running] = []
    for w in sorted(units, key=rank):
        r = units[w][0].queue
        over = borrowed.get(r)
        if over is not None and not any(held.get(r, {}).get(x, 0) < b for x, b in over.items()):
            continue  # (its queue borrows no more: Kueue skips it)
        taken.append(w)
        for t in units[w]:
            chosen.append(t)
            mine = held.setdefault(r, {})
            for x in over or ():
                mine[x] = mine.get(x, 0) + t.demand.get(x, 0)
        if fits(need, free, chosen, limits):
            break
    else:
        return None
    for w in reversed(taken[:-1]):  # (fillBackWorkloads: the last stays)
        theirs = {id(t) for t in units[w]}
        rest = [t for t in chosen if id(t) not in theirs]
        if fits(need, free, rest, limits):
            chosen = rest
    return Victims(tuple(chosen), sum(t.loss(now) for t in chosen))
