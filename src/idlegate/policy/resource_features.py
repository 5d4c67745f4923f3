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


def resource_columns(
    view: ClusterView, jobs: Sequence[Job], rows: Sequence[np.ndarray]
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(stage_r [N, 2], job_r [J, 2], global_r [1, 3]) float32 of `jobs`, whose stage rows
    are the stage indices `rows[j]` of job j (the observation's row order).

    All zeros on a pods-only pool (`policy.drf.pool_capacity` is None)."""
    n = sum(len(r) for r in rows)
    stage_r = np.zeros((n, NUM_RS), dtype=np.float32)
    job_r = np.zeros((len(jobs), NUM_RJ), dtype=np.float32)
    global_r = np.zeros((1, NUM_RG), dtype=np.float32)
    capacity = pool_capacity(view)
    if capacity is None:
        return stage_r, job_r, global_r
    k = view.num_executors
    row = 0
    for j, (job, alive) in enumerate(zip(jobs, rows, strict=True)):
        stages = job.stages
        plain = heavy = 0.0
        for i in alive.tolist():
            s = stages[i]
            u = pod_units(s, k, capacity)
            stage_r[row, 0] = log(u)
            left = s.tasks - s.launched
            if s.need is not None and left > 0:
                stage_r[row, 1] = 1.0 - min(s.need.room(), left) / left
            work = (s.tasks - s.finished) * s.duration
            plain += work
            heavy += u * work
            row += 1
        job_r[j, 0] = dominant_share(job, k, capacity) - job.held / k
        job_r[j, 1] = log(heavy / plain) if plain > 0 else 0.0
    global_r[0] = _free_gaps(view, capacity)
    return stage_r, job_r, global_r


def _free_gaps(view: ClusterView, capacity: tuple[int, ...]) -> list[float]:
    """The global columns: free fraction of CPU, of memory, and the least of the other
    resources', each less the free executors' fraction (0 for one the pool lacks)."""
    names: tuple[str, ...] = view.resource_names  # type: ignore[attr-defined]
    free = view.free_resources  # type: ignore[attr-defined]
    pods = view.free_executors / view.num_executors
    gaps = {n: free[n] / cap - pods for n, cap in zip(names, capacity, strict=True) if cap > 0}
    other = [g for n, g in gaps.items() if n not in ("cpu", "memory")]
    return [gaps.get("cpu", 0.0), gaps.get("memory", 0.0), min(other, default=0.0)]
