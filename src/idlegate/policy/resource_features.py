"""The resource columns of the learned policy's features: what a pool of CPU, memory and
GPUs adds to a pool of pods.

`policy.columns` documents the seven columns ("Resource features"); the `Featurizer`
appends them to `stage_x`, `job_x` and `global_x` when its config has
``resource_features``. Every one is exactly 0 on a pods-only pool (nothing is computed
there) and for stages whose tasks take no more of any resource than their pod's share
1/K: u = 1 then, log u = 0, Σ u·w = Σ w to the bit, and `policy.drf.dominant_share` is
held / K itself. The model reads them through a residual adapter whose output is 0 on 0
(`policy.model.ResourceAdapter`), so on a pods-only pool a model with the adapter
answers exactly as the model without it.

Shapes: N stage rows, J job rows (the observation's, in its row order).
"""

from __future__ import annotations

from collections.abc import Sequence
from math import log

import numpy as np

from idlegate.policy.columns import (
    RESOURCE_GLOBAL_FEATURES,
    RESOURCE_JOB_FEATURES,
    RESOURCE_STAGE_FEATURES,
)
from idlegate.policy.drf import dominant_share, pool_capacity, task_share
from idlegate.sim.protocol import ClusterView, Job, Stage

NUM_RS, NUM_RJ, NUM_RG = (
    len(RESOURCE_STAGE_FEATURES),
    len(RESOURCE_JOB_FEATURES),
    len(RESOURCE_GLOBAL_FEATURES),
)


def pod_units(stage: Stage, k: int, capacity: tuple[int, ...]) -> float:
    """u = max(1, K x the task's dominant share): exactly 1 for a task that takes no more
    than its pod's share of any resource (`task_share` gives 1.0 / K there, and
    (1.0 / K) x K need not be 1.0 in floats)."""
    if stage.need is None:
        return 1.0
    return max(1.0, task_share(stage, k, capacity) * k)


class _JobColumns:
    """One job's cached columns, valid while its `JobRows.sig` (and rows) are the same."""

    __slots__ = ("job", "job_r", "log_u", "pos", "sig")

    def __init__(self, job: Job, alive: np.ndarray, k: int, capacity: tuple[int, ...]) -> None:
        stages = job.stages
        rows = [stages[i] for i in alive.tolist()]
        units = [pod_units(s, k, capacity) for s in rows]
        self.job = job
        self.sig: object = None
        self.log_u = np.log(np.asarray(units, dtype=np.float64)).astype(np.float32)
        self.pos = {s.index: r for r, s in enumerate(rows)}
        """Stage index -> row."""
        plain = heavy = 0.0
        for s, u in zip(rows, units, strict=True):
            work = (s.tasks - s.finished) * s.duration
            plain += work
            heavy += u * work
        self.job_r = np.array(
            [
                dominant_share(job, k, capacity) - job.held / k,
                log(heavy / plain) if plain > 0 else 0.0,
            ],
            dtype=np.float32,
        )


class ResourceColumns:
    """The resource columns of a featurizer's calls, each job's kept while it is unchanged
    (its `JobRows.sig`: a launch, a finished task, an executor freed all move it); only
    short_of_room, which follows the free resources, is computed at every call."""

    def __init__(self) -> None:
        self._jobs: dict[int, _JobColumns] = {}
        self._capacity: tuple[int, ...] | None = None

    def reset(self) -> None:
        self._jobs.clear()

    def __call__(
        self,
        view: ClusterView,
        jobs: Sequence[Job],
        rows: Sequence[np.ndarray],
        sigs: Sequence[object],
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, bool]:
        """(stage_r [N, 2], job_r [J, 2], global_r [1, 3]) float32 of `jobs`, whose stage
        rows are the stage indices `rows[j]` of job j (the observation's row order) and
        whose state signatures are `sigs[j]`, and whether a runnable stage is held back:
        its next task (a gang's: all its tasks left) does not fit the free resources.

        All zeros (and nothing held back) on a pods-only pool (`policy.drf.pool_capacity`
        is None)."""
        n = sum(len(r) for r in rows)
        stage_r = np.zeros((n, NUM_RS), dtype=np.float32)
        job_r = np.zeros((len(jobs), NUM_RJ), dtype=np.float32)
        global_r = np.zeros((1, NUM_RG), dtype=np.float32)
        capacity = pool_capacity(view)
        if capacity is None:
            return stage_r, job_r, global_r, False
        if capacity != self._capacity:
            self._jobs.clear()
            self._capacity = capacity
        k = view.num_executors
        cache = self._jobs
        start = 0
        held_back = False
        for j, (job, alive, sig) in enumerate(zip(jobs, rows, sigs, strict=True)):
            entry = cache.get(job.id)
            if entry is None or entry.job is not job or entry.sig != sig or sig is None:
                entry = cache[job.id] = _JobColumns(job, alive, k, capacity)
                entry.sig = sig
            end = start + len(alive)
            stage_r[start:end, 0] = entry.log_u
            for s in view.runnable(job):  # (the room of a node pool's stage is its slow part)
                need, left = s.need, s.tasks - s.launched
                if need is None or left <= 0:
                    continue
                room = need.room()
                stage_r[start + entry.pos[s.index], 1] = 1.0 - min(room, left) / left
                held_back = held_back or room < (left if s.gang else 1)
            job_r[j] = entry.job_r
            start = end
        if len(cache) > 2 * len(jobs) + 16:
            keep = {job.id for job in jobs}
            self._jobs = {i: e for i, e in cache.items() if i in keep}
        global_r[0] = _free_gaps(view, capacity)
        return stage_r, job_r, global_r, held_back


def _free_gaps(view: ClusterView, capacity: tuple[int, ...]) -> list[float]:
    """The global columns: free fraction of CPU, of memory, and the least of the other
    resources', each less the free executors' fraction (0 for one the pool lacks)."""
    names: tuple[str, ...] = view.resource_names  # type: ignore[attr-defined]
    free = view.free_resources  # type: ignore[attr-defined]
    pods = view.free_executors / view.num_executors
    gaps = {n: free[n] / cap - pods for n, cap in zip(names, capacity, strict=True) if cap > 0}
    other = [g for n, g in gaps.items() if n not in ("cpu", "memory")]
    return [gaps.get("cpu", 0.0), gaps.get("memory", 0.0), min(other, default=0.0)]
