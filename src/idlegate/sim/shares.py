"""The pool's jobs by dominant share in arrival order, for fair's question on a resource pool.

`fair` on a pool of resources (DRF, `policy.heuristics.FairScheduler`) starts the first
job, in arrival order, with a launchable stage whose dominant share is below its share
of the pool, 1/n of it for n jobs with tasks to launch; a later one with free executors
of its own (no move) goes first. Answered by passing over the jobs, each question reads
the share of every job before the one chosen, and those are many when thousands wait
behind jobs holding their share already: 0.82 ms of CPU a question with 4,000 waiting,
0.016 ms with this index (`python -m benchmarks.scale --question 4000`, deploy/README.md).

`Shares` keeps, per job with a runnable stage, its dominant share (the largest fraction of
any resource of the pool, its pods included, its running tasks hold: `dominant_share`) in
two minimum trees over the jobs in arrival order, one of them only over the jobs with
free executors of their own. The first job below a level after a given one is then a walk
down a tree, O(log n). The cluster says which jobs changed (`touch`: tasks started or
ended, executors freed or taken, stages runnable or not, the job came or left) where it
changes them, and the index reads only those again at its next question. A change of the
pool's capacity or executors changes every share: the next question reads every job.

On a pool that counts resources, a full pool leaves most jobs below their share with no
stage that fits, and the question would walk every one of them to find so (about 93
tests a decision on a told pool of 200 waiting, docs/research/forecasts.md). So the index also
keeps, per job, the least its runnable stages ask of each resource (`floors`), in one
minimum tree per resource, and a question given the most a task may ask now
(`PoolResources.fit_bound`) skips every subtree some resource of which asks more. A
skipped job is one whose every stage `Need.fits` refuses: the same answer, fewer jobs read.
"""

from __future__ import annotations

from collections.abc import Sequence
from math import inf
from operator import attrgetter
from typing import Protocol

from idlegate.sim.protocol import Job

NONE_FITS = -2
"""A bound's value where no stage that asks the pool's resources fits now (no node has a
pod free, or a free amount is below 0), and a floor's for a stage that asks nothing of
them or is a gang (`Need.fits`' test of a gang is not the bound's): below every bound."""

ASKS_NONE = -1
"""A floor's value for a resource a stage asks none of (`NodeSet.may_hold` skips it)."""


def floors(job: Job, dims: int) -> tuple[float, ...]:
    """The least `job`'s runnable stages ask of each of `dims` resources (the pool's
    order): a stage asking more of some resource than a bound cannot fit; inf each for a
    job with no runnable stage."""
    low = [inf] * dims
    for stage in job.runnable:
        need = stage.need
        if need is None or stage.gang:
            return (NONE_FITS,) * dims
        for r, amount in enumerate(need.amounts):
            ask = amount if amount > 0 else ASKS_NONE
            if ask < low[r]:
                low[r] = ask
    return tuple(low)


def asks_beyond(amounts: Sequence[int], bound: Sequence[int]) -> bool:
    """A task asking `amounts` (the pool's order) asks more of some resource than `bound`
    (`PoolResources.fit_bound`) lets fit now: `Need.fits` refuses it."""
    for amount, most in zip(amounts, bound, strict=True):
        if (amount if amount > 0 else ASKS_NONE) > most:
            return True
    return False


def dominant_share(
    held: int, holding: Sequence[int], num_executors: int, capacity: Sequence[int]
) -> float:
    """The largest fraction of any resource of the pool a job holds: its `held` executors
    of `num_executors`, its `holding` of each resource of `capacity` (milli-units, in the
    same order); a resource of none, held, is an infinite share."""
    share = held / num_executors
    for amount, cap in zip(holding, capacity, strict=True):
        if amount:
            share = max(share, amount / cap if cap > 0 else inf)
    return share


class SharesCluster(Protocol):
    """What `Shares` reads of its cluster."""

    num_executors: int
    jobs: list[Job]

    def free_executors_from(self, job: Job | None) -> int: ...


class Shares:
    """A pool's jobs with a runnable stage by dominant share (the module docstring)."""

    __slots__ = (
        "_active",
        "_all",
        "_basis",
        "_floors",
        "_jobs",
        "_own",
        "_size",
        "_slot",
        "stale",
    )

    def __init__(self, jobs: Sequence[Job] = ()) -> None:
        self._slot: dict[Job, int] = {}
        """Each job's place in the trees' leaves (in arrival order)."""
        self._jobs: list[Job | None] = []
        """The job at each place (None: it left)."""
        self._size = 1
        self._all = [inf, inf]
        """A minimum tree (root at 1, leaves from `_size`) of the jobs' dominant shares,
        inf for a job with no runnable stage."""
        self._own = [inf, inf]
        """The same over the jobs with free executors of their own (inf for the others)."""
        self._floors: list[list[float]] = []
        """Per resource the pool counts beyond pods, a minimum tree of the jobs' `floors`."""
        self._active: set[Job] = set()
        """The jobs with tasks not launched yet (fair's n)."""
        self._basis: tuple[int, tuple[int, ...]] | None = None
        """The pool's executors and capacity the shares were read with."""
        self.stale: dict[Job, None] = dict.fromkeys(jobs)
        """The jobs touched since the index last read them (one dict for the index's life:
        `Cluster.touch` adds a job in the system to it directly)."""

    def touch(self, job: Job) -> None:
        """`job` changed (what it holds, its own free executors, its runnable stages), or
        came or left. A job that left before any question placed it is forgotten at once:
        on a pool whose rule never asks (any but `fair`), the stale set would otherwise
        keep every job that ever came."""
        if job.finish is not None and job not in self._slot:
            self.stale.pop(job, None)
        else:
            self.stale[job] = None

    def active(self, pool: SharesCluster, capacity: tuple[int, ...]) -> int:
        """How many jobs of `pool` have tasks not launched yet."""
        self._refresh(pool, capacity)
        return len(self._active)

    def first_below(
        self,
        pool: SharesCluster,
        capacity: tuple[int, ...],
        level: float,
        *,
        own: bool = False,
        after: Job | None = None,
        bound: Sequence[int] | None = None,
    ) -> Job | None:
        """The first job in arrival order (after `after`, if given) with a runnable stage
        and a dominant share of `capacity` (the pool's, beyond pods) below `level`; with
        `own`, only among those with free executors of their own; with `bound` (the most
        of each resource a task may ask now), only among those some stage of which asks
        no more (a job it keeps may still have none that fits)."""
        self._refresh(pool, capacity)
        tree, size = (self._own if own else self._all), self._size
        i = size + (0 if after is None else self._slot[after] + 1)
        if i >= 2 * size:
            return None
        found = _first_below(tree, size, i, level)
        if found is None or bound is None or not self._floors:
            return None if found is None else self._jobs[found - size]
        # (the first below the level asks within the bound: it is the answer, found at the
        # plain walk's cost, as on a pool with room; else on among the floors, after it)
        if all(low[found] <= most for low, most in zip(self._floors, bound, strict=True)):
            return self._jobs[found - size]
        return None if found + 1 >= 2 * size else self._first_asking(tree, found + 1, level, bound)

    def _first_asking(
        self, tree: list[float], i: int, level: float, bound: Sequence[int]
    ) -> Job | None:
        """`first_below` from leaf `i` among subtrees whose floors are within `bound`: a
        subtree passes if its least share is below `level` and its least ask of each
        resource within the bound, which its jobs need but one job need not meet alone,
        so a descent may end in a subtree whose children both fail and go on after it."""
        size = self._size
        trees = list(zip(self._floors, bound, strict=True))

        def passes(k: int) -> bool:
            if tree[k] >= level:
                return False
            for low, most in trees:  # noqa: SIM110 (not `all`: ~100 calls a question)
                if low[k] > most:
                    return False
            return True

        while True:
            if passes(i):
                while i < size:
                    if passes(2 * i):
                        i = 2 * i
                    elif passes(2 * i + 1):
                        i = 2 * i + 1
                    else:
                        break  # (neither child passes: on after this subtree)
                else:
                    return self._jobs[i - size]
            while i & 1:  # (up to the first subtree on the right)
                i >>= 1
                if i <= 1:
                    return None
            i += 1

    # -- keeping the trees ---------------------------------------------------------------

    def _refresh(self, pool: SharesCluster, capacity: tuple[int, ...]) -> None:
        basis = (pool.num_executors, capacity)
        if basis != self._basis:
            self._basis = basis
            self.stale.update(dict.fromkeys(pool.jobs))
            if len(self._floors) != len(capacity):  # (every job is read again just now)
                self._floors = [[inf] * (2 * self._size) for _ in capacity]
        if not self.stale:
            return
        if len(self._jobs) > 2 * len(self._slot) + 64:  # (mostly places of jobs gone)
            self._rebuild()
        stale = sorted(self.stale, key=_ID)  # (new jobs' places in arrival order)
        self.stale.clear()
        for job in stale:
            self._read(pool, job, basis)

    def _read(self, pool: SharesCluster, job: Job, basis: tuple[int, tuple[int, ...]]) -> None:
        if job.finish is not None:
            self._leave(job)
            return
        if job.unlaunched > 0:
            self._active.add(job)
        else:
            self._active.discard(job)
        share = dominant_share(job.held, job.holding, *basis) if job.runnable else inf
        mine = share if pool.free_executors_from(job) else inf
        slot = self._place(job)
        self._set(slot, share, mine)
        if self._floors:  # (a pool that counts resources)
            self._set_floors(slot, floors(job, len(self._floors)))

    def _place(self, job: Job) -> int:
        slot = self._slot.get(job)
        if slot is None:
            slot = self._slot[job] = len(self._jobs)
            self._jobs.append(job)
            if slot >= self._size:
                self._rebuild()
                slot = self._slot[job]
        return slot

    def _leave(self, job: Job) -> None:
        self._active.discard(job)
        slot = self._slot.pop(job, None)
        if slot is not None:
            self._jobs[slot] = None
            self._set(slot, inf, inf)
            self._set_floors(slot, [inf] * len(self._floors))

    def _set(self, slot: int, share: float, mine: float) -> None:
        """Leaf `slot`'s share, and its share among the jobs with executors of their own."""
        size = self._size
        for tree, value in ((self._all, share), (self._own, mine)):
            i = size + slot
            if tree[i] == value:
                continue
            tree[i] = value
            i >>= 1
            while i:  # (as `_climb`, inline: this runs several times an event)
                left, right = tree[2 * i], tree[2 * i + 1]
                least = right if right < left else left
                if tree[i] == least:
                    break
                tree[i] = least
                i >>= 1

    def _set_floors(self, slot: int, low: Sequence[float]) -> None:
        """Leaf `slot`'s floors (`floors`)."""
        for tree, value in zip(self._floors, low, strict=True):
            _climb(tree, self._size + slot, value)

    def _rebuild(self) -> None:
        """Places again for the jobs still here, in their order, in trees with room for
        twice as many, their shares as they were."""
        size, old = self._size, self._jobs
        kept = [i for i, job in enumerate(old) if job is not None]
        self._jobs = [old[i] for i in kept]
        self._slot = {job: i for i, job in enumerate(self._jobs) if job is not None}
        new = 1
        while new < 2 * len(kept) + 2:
            new *= 2
        self._size = new
        self._all, self._own = (
            _grown(self._all, size, kept, new),
            _grown(self._own, size, kept, new),
        )
        self._floors = [_grown(tree, size, kept, new) for tree in self._floors]


def _first_below(tree: list[float], size: int, i: int, level: float) -> int | None:
    """The first leaf from leaf `i` on of minimum tree `tree` (leaves from `size`) below
    `level`, None if none is."""
    if tree[i] >= level:  # (climb to the first subtree on the right with one below)
        while True:
            while i & 1:
                i >>= 1
                if i <= 1:
                    return None
            i += 1
            if tree[i] < level:
                break
        while i < size:
            i = 2 * i if tree[2 * i] < level else 2 * i + 1
    return i


def _climb(tree: list[float], i: int, value: float) -> None:
    """Leaf `i` of minimum tree `tree` is now `value`."""
    # (up from the leaf only while a minimum changes: above a node that keeps its value
    # nothing changes, and most reads of a touched job change nothing or little)
    if tree[i] == value:
        return
    tree[i] = value
    i >>= 1
    while i:
        left, right = tree[2 * i], tree[2 * i + 1]
        low = right if right < left else left
        if tree[i] == low:
            return
        tree[i] = low
        i >>= 1


def _grown(tree: list[float], size: int, kept: list[int], new: int) -> list[float]:
    """A minimum tree of `new` leaves holding the leaves `kept` of `tree` (of `size`
    leaves), in their order (a place beyond the old leaves: a new job, none yet)."""
    leaves = [tree[size + i] if i < size else inf for i in kept]
    grown = [inf] * (2 * new)
    grown[new : new + len(leaves)] = leaves
    for i in range(new - 1, 0, -1):
        grown[i] = min(grown[2 * i], grown[2 * i + 1])
    return grown


_ID = attrgetter("id")
