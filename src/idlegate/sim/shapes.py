"""The runnable stages of a pool grouped by shape of need, kept as they change.

`Cluster.can_schedule` asks, before every question of a decision round, whether any
runnable stage is `launchable`. Stages of one *shape* answer alike: the same amounts of
the pool's resources and the same nodes they may use (one `Need.allowed` object: the
stages whose pods place alike share it), and for a gang the same tasks left. So the
question needs one stage of each shape, and the shapes are few (in the scale benchmark:
one, for 4,000 workflows). Passing over every runnable stage to find them made each
question linear in the workflows waiting.

The cluster says which jobs' runnable stages changed (`touch`: a job arrived or left, a
stage became runnable or stopped being, a stage's nodes changed) at the point it changes
them; the index reads those jobs again at the next question, and regroups only those
whose runnable stages or their shapes differ from what it holds (a job is touched far
more often for its tasks), so its cost is the change's, not the pool's. Keys hold ``id(need.allowed)``: an ``allowed`` that changes
without a `touch` of its job would leave a stale key, so every assignment of one is
followed by one (`PoolResources.set_capacity`).

On a full pool of nodes the shapes are many (about forty on k8s-batch's requests) and
nearly all ask more than any node has free, so the question, given the pool's
`fit_bound`, reads the shapes sorted by their first resource's amount, skips those
asking more of another, and stops at the first asking more of the first: the same
answer (`Need.fits` refuses what the bound refuses), without asking them.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import Any, cast

from idlegate.sim.protocol import Job, Stage, launchable
from idlegate.sim.shares import ASKS_NONE, asks_beyond

PLAIN: Hashable = (None, None)
"""The shape of a stage that is not a gang and needs nothing the pool counts beyond its
pod (every stage of a pods-only pool without gangs): launchable whenever it is runnable."""


def shape(stage: Stage) -> Hashable:
    """What decides whether `stage` is `launchable` besides the pool's free amounts: its
    need's amounts and nodes, and for a gang its tasks left."""
    need = stage.need
    if need is None and not stage.gang:
        return PLAIN  # (the common shape, asked several times an event: no tuple built)
    return (
        None if need is None else (need.amounts, id(need.allowed)),
        (stage.tasks, stage.launched) if stage.gang else None,
    )


def _first_amount(entry: tuple[tuple[int, ...], Hashable]) -> int:
    return entry[0][0] if entry[0] else 0


class Shapes:
    """The runnable stages of a pool's jobs by `shape`; the jobs `touch`ed are read again
    at the next `any_launchable`."""

    __slots__ = ("_asking", "_groups", "_indexed", "_keys", "stale")

    def __init__(self, jobs: list[Job] | None = None) -> None:
        self._groups: dict[Hashable, dict[Stage, None]] = {}
        """Each shape's runnable stages (an ordered set: its first stands for them)."""
        self._keys: dict[Stage, Hashable] = {}
        """Each indexed stage's shape when it was indexed (removed by it)."""
        self._indexed: dict[Job, list[Stage]] = {}
        """Each job's stages in the index."""
        self.stale: dict[Job, None] = dict.fromkeys(jobs or ())
        """Jobs whose runnable stages changed since the index last read them (one dict for
        the index's life: `Cluster.touch` adds to it directly)."""
        self._asking: tuple[list[Hashable], list[tuple[tuple[int, ...], Hashable]]] | None
        self._asking = None
        """The shapes as `any_launchable` with a bound reads them: those the bound cannot
        judge (gangs, no need), then the others by their amounts (None: the groups changed
        since they were sorted)."""

    def touch(self, job: Job) -> None:
        """`job`'s runnable stages changed (or their needs' nodes did, or it came or left)."""
        self.stale[job] = None

    def any_launchable(self, free: int, bound: Sequence[int] | None = None) -> bool:
        """Whether a runnable stage of the pool's jobs is `launchable` with `free` executors
        free: the answer of asking each, one stage of each shape asked; with `bound` (the
        pool's `fit_bound`), a shape that asks more than it is refused without asking."""
        if self.stale:
            self._refresh()
        groups = self._groups
        if PLAIN in groups:  # (its stages are launchable whatever is free)
            return True
        if bound is None:
            return any(launchable(next(iter(group)), free) for group in groups.values())
        others, asking = self._asking or self._sorted()
        if others and any(launchable(next(iter(groups[key])), free) for key in others):
            return True
        first = bound[0]
        for amounts, key in asking:
            # (by their first resource's amount: once one asks more than the bound, so do
            # the rest, and on a full pool nearly every shape does)
            if (amounts[0] if amounts[0] > 0 else ASKS_NONE) > first:
                break
            if not asks_beyond(amounts, bound) and launchable(next(iter(groups[key])), free):
                return True
        return False

    def _sorted(self) -> tuple[list[Hashable], list[tuple[tuple[int, ...], Hashable]]]:
        asking = self._asking
        if asking is None:
            others: list[Hashable] = []
            needs: list[tuple[tuple[int, ...], Hashable]] = []
            for key in self._groups:
                need, gang = cast(tuple[Any, Any], key)  # (`shape`'s pair)
                if need is None or gang is not None:
                    others.append(key)
                else:
                    needs.append((need[0], key))
            needs.sort(key=_first_amount)
            asking = self._asking = (others, needs)
        return asking

    def _refresh(self) -> None:
        stale, groups, keys, indexed = self.stale, self._groups, self._keys, self._indexed
        # (every changed entry out before any goes in: a key's id may be reused meanwhile)
        changed: list[Job] = []
        for job in stale:
            runnable = job.runnable if job.finish is None else []
            old = indexed.get(job)
            if old is None:
                if runnable:
                    changed.append(job)
                continue
            if old == runnable:  # (mostly: a job is touched for its tasks, not its stages)
                for stage in old:
                    if keys[stage] != shape(stage):
                        break
                else:
                    continue  # (the same stages of the same shapes, indexed as they are)
            del indexed[job]
            for stage in old:
                key = keys.pop(stage)
                group = groups[key]
                del group[stage]
                if not group:
                    del groups[key]
                    self._asking = None
            changed.append(job)
        for job in changed:
            runnable = job.runnable
            if job.finish is not None or not runnable:
                continue  # (gone from the pool, or nothing to run)
            indexed[job] = runnable.copy()
            for stage in runnable:
                key = keys[stage] = shape(stage)
                found = groups.get(key)
                if found is None:
                    found = groups[key] = {}
                    self._asking = None
                found[stage] = None
        stale.clear()
