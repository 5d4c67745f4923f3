"""A history replayed: its time split, its arrivals on the simulator's clock, and a
history made by the simulator.

`split_history` cuts a history at a fraction of its recorded span (train before, test
after); `recorded_order` is the one rule of a replay's clock; `history_arrivals` and
`replay_workload` turn records into the simulator's arrivals and workload;
`simulate_history` records a simulated workload as the operator would have.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace

from idlegate.errors import IdlegateError
from idlegate.sim.dag import Dag
from idlegate.sim.engine import Fidelity, JobArrival, Workload, simulate
from idlegate.sim.history.records import HistoryWorkflow
from idlegate.sim.protocol import Scheduler
from idlegate.sim.resources import ResourceVector

PARTS = ("all", "train", "test")
"""Parts of a history a replay may take: all of it, or one side of the time split."""


def split_history(
    workflows: Sequence[HistoryWorkflow], train_fraction: float
) -> tuple[list[HistoryWorkflow], list[HistoryWorkflow]]:
    """(train part, test part) of a history cut at `train_fraction` of its recorded span.

    The train part holds the workflows that arrived before first arrival +
    train_fraction × span, the test part the rest, each in file order. IdlegateError if a
    workflow records no arrival or if either part is empty.
    """
    if not 0 < train_fraction < 1:
        raise IdlegateError(
            f"the train fraction must be between 0 and 1 (e.g. 0.7), got {train_fraction}"
        )
    require_arrivals(workflows)
    times = [w.arrival or 0.0 for w in workflows]
    cut = min(times) + train_fraction * (max(times) - min(times))
    train = [w for w, t in zip(workflows, times, strict=True) if t < cut]
    test = [w for w, t in zip(workflows, times, strict=True) if t >= cut]
    for name, part in (("train", train), ("test", test)):
        if not part:
            raise IdlegateError(
                f"the {name} part of the history is empty: {len(workflows)} workflow(s) "
                f"recorded, cut at {train_fraction:g} of their arrival span; record more "
                "workflows or choose another train fraction"
            )
    return train, test


def history_part(
    workflows: Sequence[HistoryWorkflow], part: str, train_fraction: float
) -> list[HistoryWorkflow]:
    """The workflows of `part` (`PARTS`): all of them, or one side of `split_history`."""
    if part == "all":
        return list(workflows)
    if part not in PARTS:
        raise IdlegateError(f"unknown history part {part!r}; choose one of: {', '.join(PARTS)}")
    train, test = split_history(workflows, train_fraction)
    return train if part == "train" else test


def require_arrivals(workflows: Sequence[HistoryWorkflow]) -> None:
    """IdlegateError unless there are workflows and every one records its arrival."""
    if not workflows:
        raise IdlegateError("the history holds no workflow; record or export some first")
    missing = [w for w in workflows if w.arrival is None]
    if missing:
        raise IdlegateError(
            f"{missing[0].source} has no arrival (or submitTime), and {len(missing)} of "
            f"{len(workflows)} workflow(s) lack one; a replay of the history needs each "
            "workflow's arrival in seconds"
        )


def recorded_order(workflows: Sequence[HistoryWorkflow]) -> tuple[list[int], list[float]]:
    """The workflows' indices in the order they arrived (ties: file order), and each one's
    arrival in seconds after the first: the one rule of a replay's clock. IdlegateError
    if a workflow records no arrival."""
    require_arrivals(workflows)
    times = [w.arrival or 0.0 for w in workflows]
    order = sorted(range(len(workflows)), key=times.__getitem__)
    start = times[order[0]]
    return order, [times[i] - start for i in order]


def history_arrivals(workflows: Sequence[HistoryWorkflow]) -> list[JobArrival]:
    """Recorded workflows as the simulator's arrivals, in arrival order from t = 0
    (`recorded_order`): each with its DAG and its measured durations (`durations`).

    What a replay of finished workflows takes, whether they come from a history file
    (`idlegate advise`, the `file` workload) or from an operator's records (the
    `portfolio` scheduler's window, `policy.portfolio`).
    """
    order, times = recorded_order(workflows)
    out = []
    for i, t in zip(order, times, strict=True):
        w = workflows[i]
        label = w.name or f"workflow-{i}"
        arrival = JobArrival(
            t,
            label,
            Dag.from_spec(w.spec),
            w.durations(),
            queue=w.spec.queue_name,
            namespace=w.namespace,
            labels=w.labels,
        )
        out.append(arrival)
    return out


def replay_workload(
    arrivals: Sequence[JobArrival],
    num_executors: int,
    *,
    moving_delay: float = 0.0,
    resources: ResourceVector | None = None,
) -> Workload:
    """`arrivals` (finished workflows, any order, any clock) as a workload on a pool of
    `num_executors` (and `resources`, a resource pool's beyond its pods), shifted to
    start at t = 0, each job keeping its duration model.

    A job with a duration model runs for its draws (`Fidelity.wave_durations`), one
    without for its estimates; `moving_delay` is the live cluster's.
    """
    if not arrivals:
        raise IdlegateError("a replay needs at least one finished workflow")
    ordered = sorted(arrivals, key=lambda a: a.time)
    start = ordered[0].time
    jobs = tuple(replace(a, time=a.time - start) for a in ordered)
    fidelity = Fidelity(moving_delay, wave_durations=True)
    return Workload("replay", jobs, num_executors, fidelity, resources)


def simulate_history(
    workload: Workload,
    scheduler: Scheduler,
    seed: int = 0,
    policy: str | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> list[HistoryWorkflow]:
    """A history of `workload` run in the simulator under `scheduler` (seed `seed`).

    Each job becomes what the operator records of a finished workflow: its name, arrival,
    DAG and estimates, each stage's measured task durations as the simulator ran them
    (a moved executor's delay included, as a pod's start is), its JCT, outcome Succeeded,
    `policy` (the scheduler's spec text, if given) and the workload's pool size. Every
    job of the workload must have a workflow spec (the DAG's), as generated ones do.
    `progress(arrived, total)` at each arrival time (`sim.engine.simulate`).
    """
    result = simulate(workload, scheduler, seed=seed, record_tasks=True, progress=progress)
    ran: dict[tuple[int, int], list[float]] = {}
    for task in result.tasks or ():
        ran.setdefault((task.job, task.stage), []).append(task.end - task.start)
    out = []
    for record in result.records:
        job = workload.jobs[record.id]
        spec = job.dag.spec
        if spec is None:
            raise IdlegateError(
                f"job {job.name!r} of workload {workload.name!r} has no workflow spec, so it "
                "cannot be written as a history; use a workload whose jobs are workflows"
            )
        measured = tuple(
            tuple(ran.get((record.id, i), ())) or None for i in range(len(spec.stages))
        )
        out.append(
            HistoryWorkflow(
                spec,
                job.name,
                record.arrival,
                measured,
                f"simulated job {job.name!r}",
                jct=record.jct,
                outcome="Succeeded",
                policy=policy,
                pool_size=workload.num_executors,
            )
        )
    return out
