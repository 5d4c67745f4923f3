"""A pool's nodes as placement reads them: each node's free amounts, kept in an index.

Pure. What `idlegate.sim.pool` asks of its nodes on both clocks (the simulator's
``--nodes`` and the nodes the operator's driver tells), answered in time that grows with
the number of distinct node *shapes*, not with the number of nodes or of tasks:

* A node's *shape* is its free amounts (the pool's resources in its order, then pods, in
  milli-units) and its allocatable of the scored resources (cpu, memory). Nodes of one
  shape fit the same tasks and score alike, so the index (`NodeSet`) keeps one bucket of
  node indices per shape, moved on the event that changed a node: a task placed or
  ended on it (`move`), the driver telling the nodes again (`reset`, which moves only
  the nodes whose figures changed).
* Where a task goes (`place`) is `idlegate.sim.pool.packed`'s answer, exactly: among the
  shapes that fit it, the least mean share of cpu and memory left free after it (the
  same float sum, in the same order), and of equal scores the lowest node index (the
  first of equals). A bucket gives its lowest index from a heap.
* How many tasks of a demand the nodes hold (`room`) is the sum over shapes of the
  node count times what one node of it holds (`tasks_on`). The first node a pod fits
  (`first_fit`, the pods-gate baseline's rule) is the lowest index of the shapes it fits.
* How many the nodes would hold were they empty (`empty_room`: their allocatable) is
  read once per demand until the nodes themselves change: 0 is a task no node can ever
  hold, whatever ends (`idlegate.sim.pool`'s `never_fits`), which waits for a node and
  holds nothing back meanwhile.
* A stage barred from some nodes (`idlegate.sim.pool.Allows`: the indices it may use)
  is answered from an index of those nodes alone, built on first use and then moved
  with the others.

A pool of N nodes that all hold different amounts has N shapes: the cost is then a
full scan's, as before the index. Typical pools have few: empty nodes of a kind share
one, and nodes with no pod free are kept apart and never read (they hold no task,
whatever else they have free). Building the index (a pool's first nodes, or nodes
added or removed) reads every node once.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Iterator, Sequence
from typing import overload

MILLI = 1000
"""Milli-units of one pod (`idlegate.sim.resources.MILLI`, which imports nothing here)."""

_SUBSETS = 64
"""Indexes of node subsets kept at most (one a distinct set of allowed nodes); past it
they are dropped and built again on use."""

Shape = tuple[tuple[int, ...], tuple[int, ...]]
"""A node's free amounts (pods last) and its allocatable at the scored positions."""


def tasks_on(node: Sequence[int], amounts: Sequence[int]) -> int:
    """How many tasks of `amounts` (the pool's order, without pods) a node of free
    amounts `node` (the pool's order, then pods) holds: `idlegate.sim.protocol.Need.on`."""
    pods = node[-1] // MILLI  # (zip stops at amounts' end, before pods)
    held = [f // n if f > 0 else 0 for f, n in zip(node, amounts, strict=False) if n]
    return min(pods, *held) if held else pods  # (a need of nothing: its pods alone)


class _Bucket:
    """The nodes of one shape: their indices, and a heap of them (lazily cleaned) whose
    top is the lowest."""

    __slots__ = ("heap", "members")

    def __init__(self, members: set[int], heap: list[int]) -> None:
        self.members, self.heap = members, heap

    def add(self, i: int) -> None:
        self.members.add(i)
        heapq.heappush(self.heap, i)
        if len(self.heap) > 2 * len(self.members) + 8:  # (stale entries: bound the heap)
            self.heap = sorted(self.members)

    def first(self) -> int:
        heap, members = self.heap, self.members
        while heap[0] not in members:
            heapq.heappop(heap)
        return heap[0]


class _Index:
    """Buckets of the nodes of one set (all, or those a stage may use) by shape: those
    with a pod free (`buckets`, what placement and room read) and those without (`full`,
    which hold no task whatever else they have free)."""

    __slots__ = ("buckets", "full")

    def __init__(self) -> None:
        self.buckets: dict[Shape, _Bucket] = {}
        self.full: dict[Shape, _Bucket] = {}

    def add(self, i: int, shape: Shape) -> None:
        into = self.buckets if shape[0][-1] >= MILLI else self.full
        bucket = into.get(shape)
        if bucket is None:
            into[shape] = _Bucket({i}, [i])
        else:
            bucket.add(i)

    def remove(self, i: int, shape: Shape) -> None:
        into = self.buckets if shape[0][-1] >= MILLI else self.full
        bucket = into[shape]
        bucket.members.discard(i)
        if not bucket.members:
            del into[shape]

    def copy(self) -> _Index:
        twin = _Index()
        twin.buckets, twin.full = _copied(self.buckets), _copied(self.full)
        return twin


def _copied(buckets: dict[Shape, _Bucket]) -> dict[Shape, _Bucket]:
    return {s: _Bucket(set(b.members), list(b.heap)) for s, b in buckets.items()}


class NodeSet(Sequence[list[int]]):
    """Each node's free amounts (the pool's resources, then pods; read, never written but
    through `move` and `reset`) with the index of the module header."""

    __slots__ = (
        "_alloc",
        "_empty",
        "_free",
        "_index",
        "_member",
        "_most",
        "_rooms",
        "_shape",
        "_subsets",
        "scored",
    )

    def __init__(
        self,
        free: Iterable[Sequence[int]] = (),
        alloc: Sequence[Sequence[int]] = (),
        scored: tuple[int, ...] = (),
    ) -> None:
        self._free: list[list[int]] = []
        self._alloc: list[tuple[int, ...]] = []
        self.scored = scored
        """The positions of cpu and memory in a node's amounts (`packed`'s `scored`)."""
        self._shape: list[Shape] = []
        self._index = _Index()
        self._subsets: dict[tuple[int, ...], _Index] = {}
        self._member: list[list[_Index]] = []
        """For each node, the subset indexes it is in."""
        self._rooms: dict[tuple[tuple[int, ...], tuple[int, ...] | None], int] = {}
        """`room`'s answers since a node last changed shape: a policy asks it of every
        waiting stage at each decision, and a pool's stages ask a few distinct demands."""
        self._most: tuple[int, ...] | None = None
        """`may_hold`'s bound since a node last changed shape (None: not read yet)."""
        self._empty: dict[tuple[tuple[int, ...], tuple[int, ...] | None], int] = {}
        """`empty_room`'s answers while the nodes and their allocatable are the same."""
        self.reset(free, alloc, scored)

    # -- reading -------------------------------------------------------------------------

    @overload
    def __getitem__(self, i: int) -> list[int]: ...

    @overload
    def __getitem__(self, i: slice) -> list[list[int]]: ...

    def __getitem__(self, i: int | slice) -> list[int] | list[list[int]]:
        return self._free[i]

    def __len__(self) -> int:
        return len(self._free)

    def __iter__(self) -> Iterator[list[int]]:
        return iter(self._free)

    @property
    def allocatable(self) -> list[tuple[int, ...]]:
        """Each node's allocatable (as its free amounts)."""
        return self._alloc

    def shapes(self) -> int:
        """How many shapes the nodes have now (what `place` and `room` cost)."""
        return len(self._index.buckets) + len(self._index.full)

    def place(self, need: Sequence[int], allowed: tuple[int, ...] | None = None) -> int | None:
        """The node a task asking `need` (the pool's order, then one pod) goes to, among
        those `allowed` (None: any): `idlegate.sim.pool.packed`'s; None if it fits none."""
        best: tuple[float, int] | None = None
        for (free, total), bucket in self._of(allowed).buckets.items():
            if not all(f >= n for f, n in zip(free, need, strict=True)):
                continue
            # (packed's sum, term by term in its order: equal scores stay equal)
            score = sum(
                (free[k] - need[k]) / t for k, t in zip(self.scored, total, strict=True) if t > 0
            )
            if best is None or score < best[0] or (score == best[0] and bucket.first() < best[1]):
                best = score, bucket.first()
        return None if best is None else best[1]

    def first_fit(self, need: Sequence[int]) -> int | None:
        """The lowest index of a node that fits `need` (the pool's order, then one pod),
        None if none does: where `idlegate.sim.gate`'s released pod starts."""
        fits = (
            b.first()
            for (free, _), b in self._index.buckets.items()
            if all(f >= n for f, n in zip(free, need, strict=True))
        )
        return min(fits, default=None)

    def room(self, amounts: Sequence[int], allowed: tuple[int, ...] | None = None) -> int:
        """How many tasks of `amounts` (the pool's order, without pods) the nodes `allowed`
        (None: all) hold now, each node as `tasks_on` counts it; kept until a node changes
        shape (`_reshape`, `reset`), since only a shape's change can change it."""
        return self._count(amounts, allowed, None)

    def empty_room(self, amounts: Sequence[int], allowed: tuple[int, ...] | None = None) -> int:
        """How many tasks of `amounts` (the pool's order, without pods) the nodes `allowed`
        (None: all) would hold were they empty: `room` over their allocatable. 0: no task of
        it can ever start on them, whatever ends; kept until the nodes change (`reset`)."""
        key = (tuple(amounts), allowed)
        found = self._empty.get(key)
        if found is None:
            alloc = self._alloc
            nodes = alloc if allowed is None else [alloc[i] for i in allowed]
            found = self._empty[key] = sum(tasks_on(node, amounts) for node in nodes)
        return found

    def holds(self, amounts: Sequence[int], tasks: int, allowed: tuple[int, ...] | None) -> bool:
        """`room(amounts, allowed) >= tasks`, read only as far as it takes: a policy asks
        it of stage after stage until one fits, and one bucket that holds them says so."""
        return tasks <= 0 or self._count(amounts, allowed, tasks) >= tasks

    def may_hold(self, amounts: Sequence[int]) -> bool:
        """False where no node can hold a task of `amounts` (the pool's order, without
        pods): some resource's need is more than any node with a pod free has free. True
        does not say one does (the most of each resource may be on different nodes): a
        policy tests stage after stage, nearly all of them in vain on a full pool
        (docs/research/forecasts.md, "On a pool that follows its nodes"), and this answers those
        before `room`'s count, which a node's every change clears."""
        most = self.most_free()
        if not most:  # (no node has a pod free)
            return False
        return all(n <= m for n, m in zip(amounts, most, strict=False) if n)  # (as `tasks_on`)

    def most_free(self) -> tuple[int, ...]:
        """Each resource's most free on a node with a pod free (the pool's order, pods
        last; () if no node has a pod free): `may_hold`'s bound, kept until a node changes
        shape."""
        most = self._most
        if most is None:
            most = self._most = self._most_free()
        return most

    def _most_free(self) -> tuple[int, ...]:
        """Each resource's most free on a node with a pod free (pods last); () if none."""
        shapes = [free for free, _ in self._index.buckets]
        return tuple(map(max, zip(*shapes, strict=True))) if shapes else ()

    def _count(
        self, amounts: Sequence[int], allowed: tuple[int, ...] | None, enough: int | None
    ) -> int:
        """`room`, or (with `enough`) a count that stops once it reaches `enough`; a count
        read whole is kept."""
        key = (amounts if isinstance(amounts, tuple) else tuple(amounts), allowed)
        found = self._rooms.get(key)
        if found is not None:
            return found
        total = 0
        for shape, bucket in self._of(allowed).buckets.items():
            total += len(bucket.members) * tasks_on(shape[0], amounts)
            if enough is not None and total >= enough:
                return total
        self._rooms[key] = total
        return total

    def _of(self, allowed: tuple[int, ...] | None) -> _Index:
        if allowed is None:
            return self._index
        found = self._subsets.get(allowed)
        if found is None:
            if len(self._subsets) >= _SUBSETS:
                self.drop_subsets()
            found = self._subsets[allowed] = _Index()
            for i in allowed:
                found.add(i, self._shape[i])
                self._member[i].append(found)
        return found

    def drop_subsets(self) -> None:
        self._subsets.clear()
        self._member = [[] for _ in self._free]

    # -- changing ------------------------------------------------------------------------

    def move(self, i: int, amounts: Sequence[int], sign: int, pods: int = MILLI) -> None:
        """Give node `i` one task of `amounts` (the pool's order, without pods) and its
        `pods` back (sign 1) or take them from it (sign -1)."""
        node = self._free[i]
        for k, n in enumerate(amounts):
            node[k] += sign * n
        node[-1] += sign * pods
        self._reshape(i)

    def reset(
        self,
        free: Iterable[Sequence[int]],
        alloc: Sequence[Sequence[int]],
        scored: tuple[int, ...] | None = None,
    ) -> bool:
        """The nodes' free amounts are now `free`, of `alloc` (same length), in the order
        told before: only the nodes whose figures changed move in the index (all, if the
        nodes or `scored` changed). True if any node has more of anything free than it had."""
        new = [list(f) for f in free]
        totals = [tuple(a) for a in alloc]
        scored = self.scored if scored is None else scored
        if len(new) != len(self._free) or totals != self._alloc or scored != self.scored:
            grew = len(new) > len(self._free) or any(
                x > y
                for a, b in zip(new, self._free, strict=False)
                for x, y in zip(a, b, strict=True)
            )
            self._free, self._alloc, self.scored = new, totals, scored
            self._rooms.clear()
            self._empty.clear()
            self._most = None
            self._shape = [self._shape_of(i) for i in range(len(new))]
            self._index = _Index()
            for i, shape in enumerate(self._shape):
                self._index.add(i, shape)
            self.drop_subsets()
            return grew
        grew = False
        for i, (now, before) in enumerate(zip(new, self._free, strict=True)):
            if now != before:
                grew = grew or any(x > y for x, y in zip(now, before, strict=True))
                before[:] = now
                self._reshape(i)
        return grew

    def copy(self) -> NodeSet:
        """An independent copy (a fork's)."""
        twin = NodeSet.__new__(NodeSet)
        twin._free = [list(n) for n in self._free]
        twin._alloc, twin.scored, twin._shape = self._alloc, self.scored, list(self._shape)
        twin._index = self._index.copy()
        twin._subsets, twin._member = {}, [[] for _ in self._free]
        twin._rooms, twin._most, twin._empty = dict(self._rooms), self._most, dict(self._empty)
        return twin

    def _shape_of(self, i: int) -> Shape:
        alloc = self._alloc[i]
        return tuple(self._free[i]), tuple(alloc[k] for k in self.scored)

    def _reshape(self, i: int) -> None:
        old, new = self._shape[i], self._shape_of(i)
        if old == new:
            return
        self._shape[i] = new
        self._rooms.clear()
        self._most = None
        for index in (self._index, *self._member[i]):
            index.remove(i, old)
            index.add(i, new)
