"""Per-queue figures of a run on a pool with queues (`idlegate.sim.admission`).

For each queue: its workflows' mean and p95 JCT; its *finish-time fairness* ρ (Themis's
measure: the queue's mean JCT sharing the pool over its mean JCT replayed alone on a pool of
its nominal quota, `alone`; ρ ≤ 1 means sharing cost it nothing); the worst and p99.9
wait of a ready task (the admission's wait: from when the task reached the head of its
stage); what it borrowed beyond its quota and lent of it (unit-seconds of each resource);
and the tasks started past its wait bound, with the *allowed overshoot* of each: the time
the tasks running at the bound took to end (without preemption no rule can start the task
before room frees, and all of them ending frees all of it), and the tasks of its queue
overdue before it took, which start first. Over the run: Jain's index of
the waiting queues' weighted dominant shares, averaged over the time two or more queues had
ready tasks waiting (1: equal shares).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from idlegate.sim.engine import SimResult, TaskRun, Workload, simulate
from idlegate.sim.protocol import Scheduler
from idlegate.sim.queues import QueueSpec, queue_index
from idlegate.sim.resources import MILLI, ResourceVector


@dataclass(frozen=True)
class QueueFigures:
    """One queue's figures over a run (module docstring)."""

    name: str
    workflows: int
    mean_jct: float
    p95_jct: float
    rho: float | None
    """Mean JCT shared over mean JCT alone on its quota; None: not replayed alone."""
    worst_wait: float
    p999_wait: float
    borrowed: dict[str, float]
    lent: dict[str, float]
    overdue: int
    """Tasks started past the queue's wait bound."""
    beyond_allowed: int
    """Of those, started later than the allowed overshoot (0 when the bound holds)."""
    worst_overshoot: float

    def to_dict(self) -> dict[str, Any]:
        return {
            "queue": self.name,
            "workflows": self.workflows,
            "mean_jct": self.mean_jct,
            "p95_jct": self.p95_jct,
            "rho": self.rho,
            "worst_wait": self.worst_wait,
            "p999_wait": self.p999_wait,
            "borrowed": self.borrowed,
            "lent": self.lent,
            "overdue": self.overdue,
            "beyond_allowed": self.beyond_allowed,
            "worst_overshoot": self.worst_overshoot,
        }


def queue_jcts(workload: Workload, result: SimResult) -> list[list[float]]:
    """Per queue of `workload` (in its order), the JCTs of `result`'s workflows that joined
    it; on a run on one queue too (`admission?mode=none`), by the queues they name."""
    wanted = {j.name: j.queue for j in workload.jobs}
    jcts: list[list[float]] = [[] for _ in workload.queues]
    for r in result.records:
        jcts[queue_index(workload.queues, wanted.get(r.name))].append(r.jct)
    return jcts


def rho(
    workload: Workload, result: SimResult, alone_results: dict[str, SimResult]
) -> dict[str, float]:
    """Each queue's finish-time fairness: its mean JCT in `result` over its mean JCT in
    `alone_results` (`replay_alone`); a queue with no workflows in either is left out."""
    out = {}
    for spec, mine in zip(workload.queues, queue_jcts(workload, result), strict=True):
        base = alone_results.get(spec.name)
        if mine and base is not None and base.records:
            out[spec.name] = float(np.mean(mine)) / float(np.mean([r.jct for r in base.records]))
    return out


def alone(workload: Workload, queue: QueueSpec) -> Workload:
    """The workflows of `queue` alone, on a pool of its nominal quota (its pods, and of the
    pool's other resources what its quota names, else the pool's), with no queues."""
    jobs = tuple(j for j in workload.jobs if _joins(j.queue, queue, workload.queues))
    pods = queue.nominal["pods"] // MILLI if "pods" in queue.nominal else workload.num_executors
    resources = None
    if workload.resources is not None:
        resources = ResourceVector(
            {n: queue.nominal.get(n, v) for n, v in workload.resources.items()}
        )
    return replace(
        workload,
        name=f"{workload.name}:{queue.name}-alone",
        jobs=jobs,
        num_executors=max(1, pods),
        resources=resources,
        nodes=(),
        queues=(),
    )


def replay_alone(
    workload: Workload, scheduler: Callable[[], Scheduler], seed: int
) -> dict[str, SimResult]:
    """Each queue's workflows replayed `alone` on its quota under a new `scheduler()`, for
    ρ (a queue with no workflows is left out)."""
    out = {}
    for q in workload.queues:
        if any(_joins(j.queue, q, workload.queues) for j in workload.jobs):
            out[q.name] = simulate(alone(workload, q), scheduler(), seed)
    return out


def _joins(wanted: str | None, queue: QueueSpec, queues: Sequence[QueueSpec]) -> bool:
    return queues[queue_index(queues, wanted)] is queue


def allowed_overshoot(
    bound_at: float, tasks: Sequence[TaskRun], before: Sequence[float] = ()
) -> float:
    """Seconds after `bound_at` until every task running at it had ended, and every task
    started at one of `before` (the starts of its queue's tasks overdue earlier, which go
    first) had ended too."""
    ends = [t.end for t in tasks if t.start <= bound_at < t.end]
    ends += [t.end for t in tasks if t.start in before]
    return max(ends, default=bound_at) - bound_at


def queue_figures(
    workload: Workload, result: SimResult, alone_results: dict[str, SimResult] | None = None
) -> list[QueueFigures]:
    """Each queue's figures of `result`, a run of `workload` (with `record_tasks` for the
    allowed overshoot; without, every overdue start counts as beyond it)."""
    ledger = result.queues
    if ledger is None:
        return []
    queues = workload.queues
    jcts = queue_jcts(workload, result)
    ratios = rho(workload, result, alone_results or {})
    dims = ("pods", *(n for n in (result.capacity or {}) if n != "pods"))
    out = []
    for q, spec in enumerate(queues):
        mine = jcts[q]
        waits = ledger.waits[q]
        overdue = [(t_b, t) for p, t_b, t in ledger.overdue if p == q]
        over = [t - t_b for t_b, t in overdue]
        beyond = 0
        for (t_b, _start), o in zip(overdue, over, strict=True):
            older = {s for b, s in overdue if b < t_b <= s}
            if (
                result.tasks is None
                or o > allowed_overshoot(t_b, result.tasks, tuple(older)) + 1e-6
            ):
                beyond += 1
        out.append(
            QueueFigures(
                name=spec.name,
                workflows=len(mine),
                mean_jct=float(np.mean(mine)) if mine else 0.0,
                p95_jct=float(np.percentile(mine, 95)) if mine else 0.0,
                rho=ratios.get(spec.name),
                worst_wait=max(waits, default=0.0),
                p999_wait=float(np.percentile(waits, 99.9)) if waits else 0.0,
                borrowed=_named(dims, ledger.borrowed[q] if ledger.borrowed else []),
                lent=_named(dims, ledger.lent[q] if ledger.lent else []),
                overdue=len(overdue),
                beyond_allowed=beyond,
                worst_overshoot=max(over, default=0.0),
            )
        )
    return out


def _named(dims: Sequence[str], values: Sequence[float]) -> dict[str, float]:
    return {d: round(v, 3) for d, v in zip(dims, values, strict=False) if v}


def jain(result: SimResult) -> float | None:
    """Jain's index of the waiting queues' weighted dominant shares, averaged over the time
    two or more queues had ready tasks waiting; None when that never happened."""
    ledger = result.queues
    if ledger is None or ledger.contended <= 0:
        return None
    return ledger.jain_area / ledger.contended
