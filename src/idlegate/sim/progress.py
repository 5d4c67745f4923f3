"""A job's counts kept from its stages' progress, for the cluster state machine
(`idlegate.sim.cluster`, whose semantics header defines them)."""

from __future__ import annotations

from idlegate.sim.protocol import Job, Stage


def remaining_cp(job: Job) -> float:
    """The longest bottom level over the job's incomplete stages: the first incomplete one
    in the DAG's order of bottom levels. A stage never becomes incomplete again, so each
    look-up goes on from where the last stopped: all of a job's cost its stages once."""
    order, stages, rank = job.dag.by_bottom_level, job.stages, job.cp_rank
    while rank < len(order) and stages[order[rank]].finished >= stages[order[rank]].tasks:
        rank += 1
    job.cp_rank = rank
    return job.dag.bottom_levels[order[rank]] if rank < len(order) else 0.0


def can_run(stage: Stage) -> bool:
    """The stage may take an executor now: its parents are done, it has an available task
    not launched yet, and it is not in an idle slot (the job's `runnable` holds these)."""
    return stage.parents_left == 0 and stage.launched < stage.available and stage.idle_until is None


def hold(job: Job, amounts: tuple[int, ...], tasks: int) -> None:
    """`tasks` more tasks of demand `amounts` run for `job` (negative: fewer): its `holding`."""
    holding = job.holding
    for i, amount in enumerate(amounts):
        holding[i] += amount * tasks


def recount(job: Job) -> None:
    """Derive a job's counts and runnable list from its stages' progress (a restore)."""
    complete = [s.finished == s.tasks for s in job.stages]
    for stage in job.stages:
        stage.parents_left = sum(not complete[p] for p in job.dag.parents[stage.index])
    job.stages_left = complete.count(False)
    job.unlaunched = sum(s.tasks - s.launched for s in job.stages)
    job.remaining_work = sum(s.remaining_work for s in job.stages)
    job.remaining_cp = remaining_cp(job)
    job.runnable = [s for s in job.stages if can_run(s)]
