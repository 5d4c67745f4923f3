"""Shares of a resource pool: what the baselines weigh on a pool of CPU, memory and GPUs.

On a pool that counts resources beyond pods (`idlegate.sim.cluster`'s resource rule) a
task is not one K-th of the pool: a 4-CPU task of an 8-CPU pool takes half of it. These
functions give the baselines the pool's measure (issue 52, "the policies in resources"):

* A task's *share* is its demand's dominant share (DRF, Ghodsi et al., NSDI 2011): the
  largest fraction of the pool's capacity it takes of any resource, its pod (1/K)
  included.
* A job's *dominant share* is the largest fraction of any resource its running tasks
  hold (`fair` on a resource pool is DRF: jobs under their share of the pool first).
* A job's *weighted remaining work* is the sum over its unfinished tasks of duration x
  task share (`srpt` on a resource pool), and its *weighted remaining critical path* the
  longest chain of stage duration x task share over its incomplete stages (`sjf-cp`).
* A *cap for a share* turns a fraction of the pool into the executors a stage of the job
  may hold (Decision caps are counted in executors): rounded up for fair's shares
  (`cap_for_share`), down for the keyed rules' `cap` (`room_within_share`).

A pods-only pool (`--pool-size N`) is not measured here: `pool_capacity` is None for it,
and the baselines keep their executor counts, so its results are the same run for run.
"""

from __future__ import annotations

from collections.abc import Sequence
from math import ceil, floor, inf

from idlegate.errors import IdlegateError
from idlegate.sim.pool import effective_executors as effective_executors  # (re-exported)
from idlegate.sim.protocol import ClusterView, Job, Stage
from idlegate.sim.resources import ResourceVector
from idlegate.sim.shares import dominant_share as sim_dominant_share

_SLACK = 1e-9
"""Shares are floats: the slack keeps 2.0000000001 tasks from rounding up to 3."""


def pool_capacity(view: ClusterView) -> tuple[int, ...] | None:
    """The pool's capacity of each resource it counts beyond pods (milli-units, in the
    order of `Stage.need.amounts`), or None for a pods-only pool."""
    names: tuple[str, ...] = getattr(view, "resource_names", ())
    if not names:
        return None
    capacity = view.capacity  # type: ignore[attr-defined]
    return tuple(capacity[n] for n in names)


def pool_resources(view: ClusterView) -> ResourceVector | None:
    """The pool's resources beyond pods as a vector (a replay's pool is built of them),
    or None for a pods-only pool."""
    names: tuple[str, ...] = getattr(view, "resource_names", ())
    if not names:
        return None
    return view.capacity.restricted(names)  # type: ignore[attr-defined]


def task_share(stage: Stage, num_executors: int, capacity: tuple[int, ...]) -> float:
    """The dominant share of one task of `stage`: its pod (1/K) or its largest fraction
    of a resource of the pool, whichever is larger."""
    share = 1.0 / num_executors
    if stage.need is not None:
        for amount, cap in zip(stage.need.amounts, capacity, strict=True):
            if amount:
                share = max(share, amount / cap if cap > 0 else inf)
    return share


def held_amounts(job: Job, capacity: tuple[int, ...]) -> Sequence[int]:
    """Milli-units of each resource of the pool that the job's running tasks hold (the
    cluster keeps them as tasks start and end: `Job.holding`, which this returns to read)."""
    if len(job.holding) != len(capacity):
        raise IdlegateError(
            f"{job.name} holds {len(job.holding)} resources but the pool counts "
            f"{len(capacity)}; read a job's holding only from the pool that runs it"
        )
    return job.holding


def dominant_share(job: Job, num_executors: int, capacity: tuple[int, ...]) -> float:
    """The largest fraction of any resource of the pool (pods included) the job holds."""
    return sim_dominant_share(job.held, held_amounts(job, capacity), num_executors, capacity)


def reaches_share(job: Job, level: float, num_executors: int, capacity: tuple[int, ...]) -> bool:
    """``dominant_share(job, num_executors, capacity) >= level``, its resources read only
    when its pods alone do not reach `level` (a pass over every job asks this of each)."""
    return (
        job.held / num_executors >= level or dominant_share(job, num_executors, capacity) >= level
    )


def weighted_remaining_work(job: Job, num_executors: int, capacity: tuple[int, ...]) -> float:
    """Σ over the job's unfinished tasks of duration x task share: the pool-seconds it
    still needs (`remaining_work` / K on a pods-only pool)."""
    return sum(
        (s.tasks - s.finished) * s.duration * task_share(s, num_executors, capacity)
        for s in job.stages
        if s.finished < s.tasks
    )


def weighted_remaining_cp(job: Job, num_executors: int, capacity: tuple[int, ...]) -> float:
    """The longest chain of stage duration x task share over the job's incomplete stages
    (`remaining_cp` / K on a pods-only pool): the critical path in pool-seconds."""
    stages = job.stages
    level: dict[int, float] = {}
    best = 0.0
    for i in reversed(job.dag.topological_order):  # every child before its parents
        stage = stages[i]
        below = max((level[c] for c in stage.children), default=0.0)
        level[stage.index] = below + stage.duration * task_share(stage, num_executors, capacity)
        if stage.finished < stage.tasks:
            best = max(best, level[stage.index])
    return best


def cap_for_share(
    job: Job, stage: Stage, share: float, num_executors: int, capacity: tuple[int, ...]
) -> int:
    """The executors `job` may hold while it launches tasks of `stage` up to `share` (a
    fraction of the pool): the tasks of the stage's demand that bring the job's holding
    of every resource to `share` of the pool, rounded up as fair's ceil(K / n) is, and at
    least one more than it holds."""
    return job.held + max(1, _tasks_to_share(job, stage, share, num_executors, capacity, up=True))


def room_within_share(
    job: Job, stage: Stage, share: float, num_executors: int, capacity: tuple[int, ...]
) -> int:
    """How many more tasks of `stage` `job` may start with its holding of every resource
    of the pool, pods included, staying at most `share` of it (rounded down: a cap, where
    `cap_for_share` rounds up as fair's shares do); 0 or less when not one more fits."""
    return _tasks_to_share(job, stage, share, num_executors, capacity, up=False)


def _tasks_to_share(
    job: Job,
    stage: Stage,
    share: float,
    num_executors: int,
    capacity: tuple[int, ...],
    *,
    up: bool,
) -> int:
    """The tasks of `stage` that bring `job`'s holding of executors and of every resource
    to `share` of the pool, the smallest over them, rounded `up` or down (`_SLACK` keeps
    a float's last bit from crossing an integer)."""

    def count(x: float) -> int:
        return ceil(x - _SLACK) if up else floor(x + _SLACK)

    more = count(share * num_executors - job.held)
    if stage.need is not None:
        held = held_amounts(job, capacity)
        for amount, cap, have in zip(stage.need.amounts, capacity, held, strict=True):
            if amount:
                more = min(more, count((share * cap - have) / amount))
    return more
