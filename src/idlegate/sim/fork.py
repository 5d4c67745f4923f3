"""A copy of a cluster's present state, for planners to simulate futures on
(`idlegate.sim.cluster.Cluster.fork`, whose docstring says what is shared and copied)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from idlegate.sim.protocol import Job, Need, Stage
from idlegate.sim.queued import Ranked
from idlegate.sim.shapes import Shapes
from idlegate.sim.shares import Shares


def _copy_job(job: Job) -> Job:
    """A copy of `job` and its stages sharing only the immutable DAG and payload.

    Each slot is written out: a loop of getattr and setattr over `__slots__` costs a
    fork five times as much, and a fork copies every workflow of the pool (1,000 at a
    forecast's refresh of a long queue). tests/test_rollout.py checks that every slot is
    copied, so a slot added to `Job` or `Stage` must be added here too."""
    twin = _new(Job)
    twin.arrival = job.arrival
    twin.cap = job.cap
    twin.cp_rank = job.cp_rank
    twin.dag = job.dag
    twin.finish = job.finish
    twin.first_start = job.first_start
    twin.held = job.held
    twin.holding = list(job.holding)
    twin.id = job.id
    twin.idle_inserted = job.idle_inserted
    twin.name = job.name
    twin.payload = job.payload
    twin.priority = job.priority
    twin.queue = job.queue
    twin.remaining_cp = job.remaining_cp
    twin.remaining_work = job.remaining_work
    twin.stages_left = job.stages_left
    twin.unlaunched = job.unlaunched
    stages = []
    for stage in job.stages:
        copy = _new(Stage)
        copy.available = stage.available
        copy.bottom_level = stage.bottom_level
        copy.children = stage.children
        copy.delayed = stage.delayed
        copy.demand = stage.demand
        copy.duration = stage.duration
        copy.executors = stage.executors
        copy.finished = stage.finished
        copy.gang = stage.gang
        copy.idle_until = stage.idle_until
        copy.index = stage.index
        copy.job = twin
        copy.launched = stage.launched
        copy.name = stage.name
        copy.need = stage.need
        copy.parents_left = stage.parents_left
        copy.tasks = stage.tasks
        stages.append(copy)
    twin.stages = stages
    twin.runnable = [stages[s.index] for s in job.runnable]
    return twin


_new = object.__new__


def fork_cluster(cluster: Any, twin: Any, only: Iterable[Job] | None = None) -> Any:
    """`Cluster.fork`: `twin`, an uninitialised Cluster, made an independent copy of
    `cluster`'s present state (both typed by what they are, not by their class: the
    cluster's module imports this one, which reads every field of it)."""
    kept = cluster.jobs
    if only is not None:
        chosen = set(only)
        kept = [j for j in cluster.jobs if j in chosen or j.held]
    jobs = {job: _copy_job(job) for job in kept}
    twin.num_executors = cluster.num_executors
    cluster._fork_resources(twin)
    twin.moving_delay = cluster.moving_delay
    twin.now = cluster.now
    twin.jobs = list(jobs.values())
    if cluster.resource_names:  # (the needs read the twin's free resources)
        for copy in twin.jobs:
            for stage in copy.stages:
                if (need := stage.need) is not None:
                    stage.need = Need(need.amounts, twin._free_r, twin._nodes, need.allowed)
    twin.done = []
    twin.removed = []
    twin.arrival_log = list(cluster.arrival_log)
    twin.free_executors = cluster.free_executors
    # an executor may stay attached to a job that left (none here: _release_executors)
    twin._free = {None: []}
    for job, pool in cluster._free.items():
        twin._free.setdefault(None if job is None else jobs.get(job), []).extend(pool)
    twin._exec_stage = [
        None if s is None else jobs[s.job].stages[s.index] for s in cluster._exec_stage
    ]
    twin._exec_job = [None if j is None else jobs.get(j) for j in cluster._exec_job]
    twin._next_id = cluster._next_id
    twin._trace = None
    twin.needs_schedule = cluster.needs_schedule
    twin.new_timers = [jobs[s.job].stages[s.index] for s in cluster.new_timers if s.job in jobs]
    twin.decisions = cluster.decisions
    twin.beyond = [(jobs[s.job].stages[s.index], t) for s, t in cluster.beyond if s.job in jobs]
    twin._busy_since = list(cluster._busy_since)
    twin._task_start = list(cluster._task_start)
    twin._busy_done = cluster._busy_done
    twin._done_area = cluster._done_area
    twin.admission = None if cluster.admission is None else cluster.admission.fork(jobs)
    twin.order_key = cluster.order_key
    twin.shapes = Shapes(twin.jobs)
    twin.shares = Shares(twin.jobs)
    twin.ranked = Ranked(twin.jobs)
    twin._marks = None
    twin.changed = None
    return twin
