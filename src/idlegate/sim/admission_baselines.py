"""The admission's baselines for `compare` (`idlegate.sim.admission`'s docstring says what
each does): ``kueue`` (whole workflows admitted against quota) and ``drf`` (plain
dominant-resource fairness across queues). They read every job at each question, as
baselines may: only idlegate's own mode keeps a snapshot. `Admitted` is a scheduler spec's
choice of mode (``admission?mode=MODE:BASE``)."""

from __future__ import annotations

from math import inf
from typing import TYPE_CHECKING, Any

from idlegate.errors import IdlegateError
from idlegate.sim.protocol import Action, Job, Scheduler, Stage, launchable
from idlegate.sim.reclaim_ledger import Calm

if TYPE_CHECKING:
    from idlegate.sim.admission_ledger import Usage
    from idlegate.sim.admission_types import PoolState

MODES = ("queues", "kueue", "drf", "pooled")
"""The admission's modes: idlegate's (``queues``), the baselines, and ``pooled``."""


def kueue(adm: Usage, cluster: PoolState) -> dict[Stage, int]:
    """Kueue mode: the stages the admitted workflows' reservations let start."""
    reserved = adm.reserved
    for job in list(reserved):
        if job.finish is not None:
            del reserved[job]
            adm.widths.pop(job, None)
    dims = len(adm.dims)
    held = [[0.0] * dims for _ in adm.queues]
    for job, r in reserved.items():
        held[job.queue] = [h + x for h, x in zip(held[job.queue], r, strict=True)]
    pending = [j for j in cluster.jobs if j not in reserved]
    hungry = {j.queue for j in pending}
    widths = adm.widths
    for borrowing in (False, True):
        others: dict[int, list[float]] = {}
        for job in pending:
            if job in reserved:
                continue
            q = job.queue
            got = widths.get(job)
            r = got if got is not None else widths.setdefault(job, width(adm, job))
            top = [
                n + (b if borrowing else 0)
                for n, b in zip(adm.nominal[q], adm.borrow[q], strict=True)
            ]
            if any(h + x > t for h, x, t in zip(held[q], r, top, strict=True)):
                continue
            if borrowing:
                if q not in others:
                    others[q] = _others(adm, q, held, hungry)
                if any(
                    c != inf and o + h + x > c
                    for o, h, x, c in zip(others[q], held[q], r, adm.cohort, strict=True)
                ):
                    continue
                others.clear()  # (what is held changed)
            reserved[job] = r
            held[q] = [h + x for h, x in zip(held[q], r, strict=True)]
    free = cluster.free_executors
    visible = {}
    for job, r in reserved.items():
        use = [0.0] * dims
        for s in job.stages:
            if s.executors:
                use = [u + x * s.executors for u, x in zip(use, adm.demand(s), strict=True)]
        for stage in job.runnable:
            a = adm.demand(stage)
            n = min(int((x - u) // d) for x, u, d in zip(r, use, a, strict=True) if d > 0)
            need = stage.available - stage.launched if stage.gang else 1
            if n >= need and launchable(stage, free):
                visible[stage] = n
    return visible


def _others(adm: Usage, q: int, held: list[list[float]], hungry: set[int]) -> list[float]:
    """Kueue mode: the cohort's claims of the queues but q, per resource."""
    return [
        sum(
            max(held[p][i], adm.nominal[p][i] if p in hungry else adm.keep[p][i])
            for p in range(len(adm.queues))
            if p != q and adm.nominal[p][i] != inf
        )
        for i in range(len(adm.dims))
    ]


def width(adm: Usage, job: Job) -> list[float]:
    """Kueue mode: a workflow's reservation, its widest stage's demand (all its tasks),
    at most its queue's nominal quota (as a user sizes a workflow's parallelism to fit
    it: a larger request would wait for the whole cohort to be idle)."""
    q = job.queue
    top = [min(n, c) for n, c in zip(adm.nominal[q], adm.cohort, strict=True)]
    widest = [0.0] * len(adm.dims)
    for s in job.stages:
        widest = [max(w, a * s.tasks) for w, a in zip(widest, adm.demand(s), strict=True)]
    return [min(w, t) for w, t in zip(widest, top, strict=True)]


def drf(adm: Usage, cluster: PoolState) -> dict[Stage, int]:
    """DRF mode: one task, for the queue with a startable stage of the lowest share."""
    free = cluster.free_executors
    by_queue: dict[int, dict[Stage, int]] = {}
    for job in cluster.jobs:
        for stage in job.runnable:
            if launchable(stage, free):
                need = stage.available - stage.launched if stage.gang else 1
                by_queue.setdefault(job.queue, {})[stage] = need
    if not by_queue:
        return {}
    q = min(by_queue, key=lambda q: (adm.share(q), q))
    return top_priority(by_queue[q])


def top_priority(visible: dict[Stage, int]) -> dict[Stage, int]:
    """Of each queue's visible stages, those of its workflows of the highest priority."""
    if all(s.job.priority == 0 for s in visible):
        return visible
    top: dict[int, int] = {}
    for s in visible:
        q = s.job.queue
        top[q] = max(top.get(q, s.job.priority), s.job.priority)
    return {s: n for s, n in visible.items() if s.job.priority == top[s.job.queue]}


class Admitted:
    """BASE behind an admission mode (``admission?mode=kueue:fifo``): the simulator's
    engine unwraps it as it unwraps a `PodsGate` and admits the workload's queues by
    `mode` (``none``: one queue, today's pool, whatever queues the workload has), a
    reclaim's victims chosen by `victims` (``admission?victims=kueue:srpt``: Kueue's), a
    lent task spared for `grace` seconds (``admission?grace=0:srpt``; None: `Calm`'s), a
    claimant's `patience` and the `ending` ratio likewise (`idlegate.sim.reclaim_patience`:
    ``admission?patience=0&ending=0:srpt``, the rules without them)."""

    def __init__(
        self,
        scheduler: Scheduler,
        mode: str,
        victims: str = "least",
        grace: float | None = None,
        patience: float | None = None,
        ending: float | None = None,
    ) -> None:
        if mode not in (*MODES, "none"):
            raise IdlegateError(
                f"admission mode {mode!r} is unknown; use {', '.join((*MODES, 'none'))}"
            )
        if victims not in ("least", "kueue"):
            raise IdlegateError(
                f"admission victims {victims!r} is unknown; use least (the least work lost, "
                "the default) or kueue (whole workflows, Kueue's order)"
            )
        self.scheduler = scheduler
        self.mode = mode
        self.victims = victims
        """How a reclaim chooses its victims (`idlegate.sim.reclaim_plan.VICTIMS`)."""
        named = {"grace": grace, "patience": patience, "ending": ending}
        given = {k: v for k, v in named.items() if v is not None}
        base = Calm()
        self.calm = (
            Calm(
                grace=base.grace if grace is None else grace,
                patience=base.patience if patience is None else patience,
                ending=base.ending if ending is None else ending,
            )
            if given
            else None
        )
        """A reclaim's no-thrash settings with those given (None: the defaults)."""
        inner = getattr(scheduler, "name", type(scheduler).__name__)
        also = "" if victims == "least" else f"&victims={victims}"
        also += "".join(f"&{k}={v:g}" for k, v in given.items())
        self.name = f"admission?mode={mode}{also}:{inner}"

    def reset(self, rng: Any) -> None:
        self.scheduler.reset(rng)

    def decide(self, view: Any) -> Action:
        return self.scheduler.decide(view)
