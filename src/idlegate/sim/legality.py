"""Which decisions the cluster takes (`Cluster.check`, which `Cluster.apply` runs first):
the one rule of legality every driver and policy meets, an IllegalDecisionError that says
what was wrong and what to do instead otherwise; and the cap rule's verdict on a workflow
its cap leaves no room (`cap_holds`), the same rule that refuses a launch past it."""

from __future__ import annotations

from math import inf
from typing import TYPE_CHECKING

from idlegate.errors import IllegalDecisionError
from idlegate.sim.admission_result import Reason, Verdict
from idlegate.sim.protocol import Decision, Job, Stage

if TYPE_CHECKING:
    from idlegate.sim.admission_types import PoolState


def _where(stage: Stage) -> str:
    """How an error names `stage` (built only for an error: `check_decision` runs at every
    launch)."""
    return f"stage {stage.job.name}/{stage.name}"


def check_decision(cluster: PoolState, decision: Decision) -> None:
    """Raise IllegalDecisionError unless `decision` is legal now (`apply` runs this too)."""
    stage, cap, delay = decision.stage, decision.parallelism_cap, decision.idle_delay
    job = stage.job
    if job.finish is not None:
        raise IllegalDecisionError(f"{_where(stage)} belongs to a job that is not in the system")
    if stage.idle_until is not None:
        raise IllegalDecisionError(
            f"{_where(stage)} is inside an idle slot until t={stage.idle_until:g}; "
            "it becomes runnable again when the slot ends"
        )
    if stage not in job.runnable:
        raise IllegalDecisionError(
            f"{_where(stage)} is not runnable (parents unfinished or no task left to launch "
            "or available); "
            "choose one of view.runnable_stages()"
        )
    if type(cap) is not int and (isinstance(cap, bool) or not isinstance(cap, int)):
        raise IllegalDecisionError(f"the parallelism cap must be an int, got {cap!r}")
    if cap < job.held:
        raise IllegalDecisionError(
            f"cap {cap} for {job.name} is below the {job.held} executors it holds; tasks are "
            f"not preempted, so the cap must be at least {job.held}"
        )
    if not delay >= 0 or delay == inf:  # also rejects NaN
        raise IllegalDecisionError(f"idle delay must be a finite number >= 0, got {delay!r}")
    if delay > 0:
        if stage.delayed:
            raise IllegalDecisionError(
                f"{_where(stage)} was already delayed once; a stage idles at most once"
            )
        if stage.launched:
            raise IllegalDecisionError(
                f"{_where(stage)} has already started; an idle slot goes before a stage's "
                "first task"
            )
        return
    if cluster.free_executors == 0:
        raise IllegalDecisionError(
            f"no executor is free to launch {_where(stage)}; return WAIT until one is"
        )
    if not room_under(cap, job):
        raise IllegalDecisionError(
            f"cap {cap} leaves {job.name} no room for another executor (it holds {job.held}); "
            "raise the cap above what the job holds, or return WAIT"
        )
    if stage.need is None and not stage.gang:
        return  # (what follows is about what a launch fits: a need's, a gang's)
    n = min(cluster.free_executors, cap - job.held, stage.available - stage.launched)
    fits = ""
    if stage.need is not None:
        room = stage.need.room()
        if room == 0:
            raise IllegalDecisionError(
                f"{_where(stage)} needs {stage.demand.restricted(cluster.resource_names).format()} "
                f"per task, but the pool has {cluster.free_resources.format()} free; choose "
                "one of view.runnable_stages() or return WAIT"
            )
        if room < n:
            n, fits = room, f" and the free resources ({cluster.free_resources.format()})"
    # (a restored gang, some of whose tasks ran before, starts the rest together)
    if stage.gang and n < stage.tasks - stage.launched:
        raise IllegalDecisionError(
            f"gang stage {job.name}/{stage.name} needs {stage.tasks - stage.launched} "
            "executors at once, "
            f"but the cap {cap} and {cluster.free_executors} free executors{fits} allow {n}"
        )


CAPPED = "the workflow holds its parallelism cap of {} executors"


def room_under(cap: int, job: Job) -> bool:
    """The cap rule: `job` may take another executor under the parallelism cap `cap`."""
    return cap > job.held


def cap_holds(job: Job) -> Verdict | None:
    """The cap rule's verdict on `job`: the cap its last decision gave it leaves it no room
    for another executor (a launch of it is refused: `check_decision`); None while it has
    room, or before its first decision."""
    if job.cap and not room_under(job.cap, job):
        return Verdict(Reason.PARALLELISM_CAP, CAPPED, (job.cap,))
    return None
