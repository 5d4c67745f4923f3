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
them; the index reads those jobs again at the next question, so its cost is the
change's, not the pool's. Keys hold ``id(need.allowed)``: an ``allowed`` that changes
without a `touch` of its job would leave a stale key, so every assignment of one is
followed by one (`PoolResources.set_capacity`).
"""

from __future__ import annotations

from collections.abc import Hashable

from idlegate.sim.protocol import Job, Stage, launchable


def shape(stage: Stage) -> Hashable:
    """What decides whether `stage` is `launchable` besides the pool's free amounts: its
    need's amounts and nodes, and for a gang its tasks left."""
    need = stage.need
    return (
        None if need is None else (need.amounts, id(need.allowed)),
        (stage.tasks, stage.launched) if stage.gang else None,
    )


class Shapes:
    """The runnable stages of a pool's jobs by `shape`; the jobs `touch`ed are read again
    at the next `any_launchable`."""

    __slots__ = ("_groups", "_indexed", "_keys", "_stale")

    def __init__(self, jobs: list[Job] | None = None) -> None:
        self._groups: dict[Hashable, dict[Stage, None]] = {}
        """Each shape's runnable stages (an ordered set: its first stands for them)."""
        self._keys: dict[Stage, Hashable] = {}
        """Each indexed stage's shape when it was indexed (removed by it)."""
        self._indexed: dict[Job, list[Stage]] = {}
        """Each job's stages in the index."""
        self._stale: dict[Job, None] = dict.fromkeys(jobs or ())
        """Jobs whose runnable stages changed since the index last read them."""

    def touch(self, job: Job) -> None:
        """`job`'s runnable stages changed (or their needs' nodes did, or it came or left)."""
        self._stale[job] = None

    def any_launchable(self, free: int) -> bool:
        """Whether a runnable stage of the pool's jobs is `launchable` with `free` executors
        free: the answer of asking each, one stage of each shape asked."""
        if self._stale:
            self._refresh()
        return any(launchable(next(iter(group)), free) for group in self._groups.values())

    def _refresh(self) -> None:
        stale, groups, keys = self._stale, self._groups, self._keys
        # (every stale entry out before any goes in: a key's id may be reused meanwhile)
        for job in stale:
            for stage in self._indexed.pop(job, ()):
                key = keys.pop(stage)
                group = groups[key]
                del group[stage]
                if not group:
                    del groups[key]
        for job in stale:
            if job.finish is not None or not job.runnable:
                continue  # (gone from the pool, or nothing to run)
            self._indexed[job] = list(job.runnable)
            for stage in job.runnable:
                key = keys[stage] = shape(stage)
                groups.setdefault(key, {})[stage] = None
        stale.clear()
