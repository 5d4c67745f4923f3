"""Victims by least work lost, per task: which running tasks to stop so that a waiting
task fits (issue 82, item 2). Being built: pure and tested, not yet called by the
admission, whose plan will stop what this answers in both clocks.

Pure and clock-free, like `idlegate.sim.cluster`: every input carries `now`, and it
changes nothing; it only answers.

Semantics:

* A *candidate* (`Running`) is a running task that may be stopped: its queue, its
  workflow's priority, when it started, what it holds (`demand`: milli-units of the
  resources the pool counts, ``pods`` included), its executors, whether its stage is
  checkpointed (``checkpointed: true``, a stopped task resumes where it was) and its node.
  DAG-aware: a victim is a task, not a whole workflow. Which running tasks are candidates
  for a waiting task is the rule of `idlegate.sim.reclaim_rules` (the queues' preemption
  settings); this module only chooses among them.
* Its *loss*, stopped at `now`, is the executor-seconds it has run, (now − start) ×
  executors, counted in whole milli-executor-seconds so that sums are exact and ties are
  ties; 0 for a checkpointed one, which loses nothing.
* The waiting task *fits* when its `need` is at most the room on every resource it
  needs, the victims' demand added: the pool's free amounts (`free`; a resource it does
  not name has none free), or on a pool of nodes one node's (`nodes`: every victim on
  that one node, where the waiting pod then fits); and each `Bound` (what a queue's
  quota still lets the task use of the resources it names), to which only the tasks of
  the queues it names give room back.
* From a queue r that uses more than its nominal quota (`borrowed[r]`: by how much, of
  each resource the waiting task needs), tasks are stopped only while r still borrows
  before each is stopped (Kueue's rule): r's victims S are allowed iff for some resource
  x, Σ_S x − max_S x < borrowed[r][x]. So a queue is taken below its nominal quota by
  less than one task, on a pods-only pool never.
* The *choice* (`choose_victims`) is the least of the sets of candidates whose stopping
  makes the task fit (at most `most` of them) by: the total loss, then the number of
  tasks stopped, then the victims' (priority, −start) sorted highest first and compared
  in turn. That is: the fewest executor-seconds lost (checkpointed tasks first, they lose
  none), then the fewest stopped, then the set whose highest-priority victim is of the
  lowest priority, then the most recently started. On nodes, the least of the nodes'
  choices, then the lowest node. None: no set fits.
* *Never more than needed*: the choice is minimal, no victim can be dropped and the task
  still fit (dropping one loses no more and stops fewer: a lesser set by that order).

The algorithm, exact (why it is, point by point):

1. *Deficit and shapes.* Only what the task lacks matters: its *deficit*, need − room
   where positive, per room (the pool or node, each Bound) and resource. A candidate's
   *shape* is what it gives to each deficit (with its queue and demand, when its queue
   is bounded by `borrowed`). Candidates of a shape are interchangeable but for their
   keys (loss, priority, −start, index in the input): the victims an optimal set takes
   of a shape are its cheapest by key (were a cheaper one left out, swapping it in
   loses no more and ranks lower by the order's later terms, the set still fitting and
   allowed). So a choice is a count k_s per shape, of its first k_s by key.
2. *Bounds.* A minimal set takes of shape s at most ⌈r_d / g_d⌉ for the largest over
   the deficits d it gives g_d > 0 to (r_d: what is left of it): with more, one fewer
   still covers every deficit s gives to, alone, and leaves the others as they were.
3. *Greedy first.* The candidates in key order are taken while one gives to a deficit
   not yet covered (within `most` and `borrowed`), until all are covered; then, from
   the most expensive back, each that is not needed is dropped. That set bounds the
   search.
4. *Search.* Depth first over the shapes (the cheapest first), each count from 0 up to
   its bound, a branch cut when its loss already passes the best found, when the shapes
   left cannot cover what is left of the deficit, or when it breaks `most` or a
   `borrowed` rule (which hold of every subset of a set they hold of). A branch that
   covers the deficit is compared by the whole order. It stops after `BUDGET` steps with
   the best found, never worse than the greedy one: exact unless the budget ends it
   (tests/test_reclaim.py compares it with every subset of small cases). One shape, a
   pods-only pool's or one task size's, is a few steps. The choice is then passed once more
   from the most expensive back, dropping what is not needed: minimal whatever ended it.

Cost: the candidates are read once (a shape's `gives` once per demand object and queue:
a stage's tasks may share theirs), and of each shape only its cheapest `bound` are kept.
The search is at most `BUDGET` steps for all nodes together. Nodes are searched in the
order of their cheapest candidate's loss, and no further once that passes the best
choice's loss (a node's choice loses at least as much). So the cost grows with the
candidates, read once each: a driver passes only those `reclaim_rules.eligible` gives.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from contextlib import suppress
from dataclasses import dataclass, field
from heapq import nsmallest
from math import ceil

from idlegate.errors import IdlegateError

MILLI = 1000
"""Milli-units of a second (a loss's unit is a milli-executor-second)."""
BUDGET = 4000
"""Steps of the search per choice, all nodes together (the module docstring, point 4)."""


@dataclass(frozen=True, slots=True)
class Running:
    """A running task that may be stopped: a candidate victim (the module docstring)."""

    task: Hashable
    """Which task (the driver's name for it: the simulator's, a pod's)."""
    queue: int
    """Its queue's index in the pool's queues."""
    priority: int
    """Its workflow's priority."""
    start: float
    """When it started."""
    demand: Mapping[str, int] = field(hash=False)
    """What it holds, in milli-units of each resource the pool counts, pods included."""
    executors: int = 1
    checkpointed: bool = False
    """A stopped task resumes where it was: it loses nothing."""
    node: int | None = None
    """Its node's index in `nodes` (a pool of nodes), else None."""
    workflow: Hashable = None
    """Its workflow (the Kueue-like baseline stops whole ones)."""
    admitted: float | None = None
    """When its workflow was admitted (the Kueue-like baseline's order); None: `start`."""

    def loss(self, now: float) -> int:
        """Milli-executor-seconds lost were it stopped at `now` (0 if checkpointed)."""
        if self.checkpointed:
            return 0
        return max(0, round((now - self.start) * MILLI)) * self.executors


@dataclass(frozen=True)
class Bound:
    """A bound the waiting task must fit besides the pool's room: what a queue's quota
    still lets it use of each resource `room` names (a resource it does not name is not
    bounded; 0: none left). Only tasks of `queues` give room back to it."""

    room: Mapping[str, int]
    queues: frozenset[int]


@dataclass(frozen=True)
class Victims:
    """A choice: the tasks to stop, cheapest by key first, what they lose in all
    (milli-executor-seconds), and on a pool of nodes the node the task then fits on."""

    tasks: tuple[Running, ...]
    lost: int
    node: int | None = None

    @property
    def seconds(self) -> float:
        """The executor-seconds lost."""
        return self.lost / MILLI


def fits(
    need: Mapping[str, int],
    room: Mapping[str, int],
    victims: Sequence[Running],
    limits: Sequence[Bound] = (),
) -> bool:
    """Whether a task needing `need` fits `room` (a resource it does not name: none) and
    every Bound once `victims` are stopped (the module docstring's *fits*)."""
    for name, amount in need.items():
        if amount > room.get(name, 0) + sum(v.demand.get(name, 0) for v in victims):
            return False
        for limit in limits:
            if name in limit.room:
                back = sum(v.demand.get(name, 0) for v in victims if v.queue in limit.queues)
                if amount > limit.room[name] + back:
                    return False
    return True


def allowed(victims: Sequence[Running], borrowed: Mapping[int, Mapping[str, int]]) -> bool:
    """Whether each queue of `borrowed` still borrows before each of its `victims` is
    stopped (the module docstring's rule; a queue not in `borrowed` is not bounded)."""
    for queue, over in borrowed.items():
        mine = [v for v in victims if v.queue == queue]
        if mine and not any(
            sum(v.demand.get(x, 0) for v in mine) - max(v.demand.get(x, 0) for v in mine) < b
            for x, b in over.items()
        ):
            return False
    return True


def choose_victims(
    need: Mapping[str, int],
    candidates: Sequence[Running],
    now: float,
    *,
    free: Mapping[str, int] | None = None,
    nodes: Sequence[Mapping[str, int]] | None = None,
    limits: Sequence[Bound] = (),
    borrowed: Mapping[int, Mapping[str, int]] | None = None,
    most: int | None = None,
) -> Victims | None:
    """The least set of `candidates` to stop at `now` for a task needing `need` (milli-
    units; only the resources it needs count) to fit the pool's `free` amounts, or one of
    `nodes` (each its free amounts), and every Bound: the module docstring's choice
    (empty: it fits already; None: no set of at most `most` fits)."""
    if (free is None) == (nodes is None):
        raise IdlegateError("give the pool's free amounts or its nodes', not both or neither")
    need = {n: a for n, a in need.items() if a > 0}
    steps = [BUDGET]
    order = {id(c): i for i, c in enumerate(candidates)}
    bounds = borrowed or {}
    if free is not None:
        return _choose(need, free, list(candidates), limits, bounds, most, now, order, steps)
    assert nodes is not None
    on: dict[int, list[Running]] = {}
    for c in candidates:
        if c.node is not None:
            on.setdefault(c.node, []).append(c)
    for n, room in enumerate(nodes):
        if fits(need, room, (), limits):
            return Victims((), 0, n)
    best: tuple[tuple[object, ...], Victims] | None = None
    # a node's choice loses at least its cheapest candidate's loss: nodes in that order,
    # until one's is past the best choice's (the rest cannot be less)
    for least, n in sorted((min(c.loss(now) for c in on[n]), n) for n in on):
        if best is not None and least > best[1].lost:
            break
        got = _choose(need, nodes[n], on[n], limits, bounds, most, now, order, steps)
        if got is not None:
            rank = (*_rank(got.tasks, now, order), n)
            if best is None or rank < best[0]:
                best = (rank, Victims(got.tasks, got.lost, n))
    return None if best is None else best[1]


def _rank(tasks: Sequence[Running], now: float, order: Mapping[int, int]) -> tuple[object, ...]:
    """A set's place in the choice's order (the module docstring): lower is better."""
    lost = sum(t.loss(now) for t in tasks)
    ties = sorted(((t.priority, -t.start, order[id(t)]) for t in tasks), reverse=True)
    return (lost, len(tasks), tuple(ties))


@dataclass
class _Shape:
    """Candidates that give the same to each deficit (and, for a bounded queue, are of
    it and hold the same of the bounded resources), cheapest by key first."""

    gives: tuple[int, ...]
    queue: int | None
    held: tuple[int, ...]
    members: list[Running]
    keys: list[tuple[int, int, float, int]] = field(default_factory=list)
    prefix: list[int] = field(default_factory=list)
    bound: int = 0


def _choose(
    need: Mapping[str, int],
    room: Mapping[str, int],
    candidates: list[Running],
    limits: Sequence[Bound],
    bounds: Mapping[int, Mapping[str, int]],
    most: int | None,
    now: float,
    order: Mapping[int, int],
    steps: list[int],
) -> Victims | None:
    """The choice within one room (the pool, or one node): points 1 to 4."""
    # the deficit: (which limit, or -1 for the room; resource; how much is lacking)
    deficit = [(-1, x, a - room.get(x, 0)) for x, a in need.items() if a > room.get(x, 0)]
    for i, limit in enumerate(limits):
        deficit += [(i, x, a - limit.room[x]) for x, a in need.items() if a > limit.room.get(x, a)]
    if not deficit:
        return Victims((), 0)
    shapes = _shapes(deficit, candidates, limits, bounds, now, order)
    search = _Search(shapes, [d for _, _, d in deficit], bounds, most, steps)
    if any(d > a for d, a in zip(search.lacking, search.left[0], strict=True)):
        return None  # (all of them would not do)
    search.run(search.greedy())
    if search.best is None:
        return None
    chosen = [m for s, k in zip(shapes, search.best, strict=True) for m in s.members[:k]]
    chosen.sort(key=lambda t: (t.loss(now), t.priority, -t.start, order[id(t)]))
    chosen = _trim(need, room, chosen, limits)  # (minimal, whatever ended the search)
    return Victims(tuple(chosen), sum(t.loss(now) for t in chosen))


def _shapes(
    deficit: list[tuple[int, str, int]],
    candidates: list[Running],
    limits: Sequence[Bound],
    bounds: Mapping[int, Mapping[str, int]],
    now: float,
    order: Mapping[int, int],
) -> list[_Shape]:
    """The candidates that give to the deficit, by shape (point 1), each with its bound
    (point 2); cheapest shape first."""
    by: dict[tuple[object, ...], _Shape] = {}
    seen: dict[tuple[int, int], _Shape | None] = {}  # (a stage's tasks share their demand)
    for c in candidates:
        known = (id(c.demand), c.queue)
        if known in seen:
            shape = seen[known]
        else:
            gives = tuple(
                c.demand.get(x, 0) if i < 0 or c.queue in limits[i].queues else 0
                for i, x, _ in deficit
            )
            over = bounds.get(c.queue)
            if not any(gives) or (over is not None and not any(b > 0 for b in over.values())):
                shape = None  # (it gives nothing lacking, or its queue borrows nothing needed)
            else:
                queue, held = (
                    (c.queue, tuple(c.demand.get(x, 0) for x in over)) if over else (None, ())
                )
                key = (gives, queue, held)
                shape = by.get(key)
                if shape is None:
                    shape = by[key] = _Shape(gives, queue, held, [])
            seen[known] = shape
        if shape is not None:
            shape.members.append(c)
    shapes = list(by.values())
    for s in shapes:
        s.bound = min(
            len(s.members),
            max(ceil(d / g) for (_, _, d), g in zip(deficit, s.gives, strict=True) if g > 0),
        )
        # (only its cheapest `bound` can be taken: point 2)
        keyed = nsmallest(
            s.bound, ((c.loss(now), c.priority, -c.start, order[id(c)], c) for c in s.members)
        )
        s.members = [k[-1] for k in keyed]
        s.keys = [k[:4] for k in keyed]
        s.prefix = [0]
        for k in s.keys:
            s.prefix.append(s.prefix[-1] + k[0])
    shapes.sort(key=lambda s: s.keys[0])
    return shapes


def _trim(
    need: Mapping[str, int], room: Mapping[str, int], chosen: list[Running], limits: Sequence[Bound]
) -> list[Running]:
    """`chosen` (in key order) less each victim, from the most expensive back, without
    which the task still fits: a minimal set."""
    kept = list(chosen)
    for victim in reversed(chosen):
        rest = [v for v in kept if v is not victim]
        if fits(need, room, rest, limits):
            kept = rest
    return kept


class _Stop(Exception):
    """The search's budget is spent."""


class _Search:
    """Points 3 and 4 of the module docstring over the shapes: `best`, a count per shape
    (None: no set fits)."""

    def __init__(
        self,
        shapes: list[_Shape],
        lacking: list[int],
        bounds: Mapping[int, Mapping[str, int]],
        most: int | None,
        steps: list[int],
    ) -> None:
        self.shapes, self.lacking, self.bounds, self.steps = shapes, lacking, bounds, steps
        self.most = most if most is not None else 1 << 60
        self.best: list[int] | None = None
        self.best_rank: tuple[int, int] = (1 << 62, 0)
        # what the shapes from i on can give at most, per deficit (to cut a branch)
        self.left = [[0] * len(lacking) for _ in range(len(shapes) + 1)]
        for i in range(len(shapes) - 1, -1, -1):
            s = shapes[i]
            self.left[i] = [a + s.bound * g for a, g in zip(self.left[i + 1], s.gives, strict=True)]

    def _allowed(self, counts: Sequence[int]) -> bool:
        """The `borrowed` rule of the victims `counts` takes (point 4)."""
        sums: dict[int, list[int]] = {}
        tops: dict[int, list[int]] = {}
        for s, k in zip(self.shapes, counts, strict=False):
            if k and s.queue is not None:
                total = sums.setdefault(s.queue, [0] * len(s.held))
                top = tops.setdefault(s.queue, [0] * len(s.held))
                for j, h in enumerate(s.held):
                    total[j] += k * h
                    top[j] = max(top[j], h)
        for q, total in sums.items():
            over = list(self.bounds[q].values())
            if not any(t - m < b for t, m, b in zip(total, tops[q], over, strict=True)):
                return False
        return True

    def greedy(self) -> list[int] | None:
        """Point 3: the counts of the greedy set, pruned (None: it found none)."""
        rest = list(self.lacking)
        counts = [0] * len(self.shapes)
        queue = sorted(
            (s.keys[j], i) for i, s in enumerate(self.shapes) for j in range(len(s.members))
        )
        taken: list[int] = []
        for _, i in queue:
            if all(r <= 0 for r in rest):
                break
            s = self.shapes[i]
            if len(taken) >= self.most or not any(
                g > 0 and r > 0 for g, r in zip(s.gives, rest, strict=True)
            ):
                continue
            counts[i] += 1
            if not self._allowed(counts):
                counts[i] -= 1
                continue
            taken.append(i)
            rest = [r - g for r, g in zip(rest, s.gives, strict=True)]
        if any(r > 0 for r in rest):
            return None
        for i in reversed(taken):  # (the most expensive first: a shape's last taken)
            back = [r + g for r, g in zip(rest, self.shapes[i].gives, strict=True)]
            if all(r <= 0 for r in back):
                counts[i] -= 1
                rest = back
        return counts

    def run(self, start: list[int] | None) -> None:
        """Point 4 from the greedy set `start`, until done or the budget is spent."""
        if start is not None:
            self._offer(start)
        with suppress(_Stop):
            self._walk(0, list(self.lacking), 0, 0, [0] * len(self.shapes))

    def _offer(self, counts: list[int]) -> None:
        """Keep `counts` if it ranks before the best so far."""
        lost = sum(s.prefix[k] for s, k in zip(self.shapes, counts, strict=True))
        rank = (lost, sum(counts))
        if self.best is None or rank < self.best_rank:
            self.best, self.best_rank = list(counts), rank
        elif rank == self.best_rank and self._ties(counts) < self._ties(self.best):
            self.best = list(counts)

    def _ties(self, counts: Sequence[int]) -> list[tuple[int, float, int]]:
        """The order's last terms of a set: (priority, −start, index), highest first."""
        keys = [k[1:] for s, n in zip(self.shapes, counts, strict=True) for k in s.keys[:n]]
        return sorted(keys, reverse=True)

    def _walk(self, i: int, rest: list[int], lost: int, count: int, counts: list[int]) -> None:
        self.steps[0] -= 1
        if self.steps[0] < 0:
            raise _Stop
        if all(r <= 0 for r in rest):
            self._offer(counts)
            return
        if i == len(self.shapes) or any(r > a for r, a in zip(rest, self.left[i], strict=True)):
            return
        s = self.shapes[i]
        useful = [ceil(r / g) for r, g in zip(rest, s.gives, strict=True) if g > 0 and r > 0]
        top = min(s.bound, max(useful)) if useful else 0
        for k in range(top + 1):
            if k:
                if lost + s.prefix[k] > self.best_rank[0] or count + k > self.most:
                    break
                counts[i] = k
                if s.queue is not None and not self._allowed(counts):
                    break
            self._walk(
                i + 1,
                [r - k * g for r, g in zip(rest, s.gives, strict=True)],
                lost + s.prefix[k],
                count + k,
                counts,
            )
        counts[i] = 0
