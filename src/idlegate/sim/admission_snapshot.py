"""The admission's snapshot: per queue, what a question reads, kept from the jobs that changed.

`idlegate.sim.admission` asks, at every question, per queue: its jobs in arrival order
(the scoped view's), its runnable stages by shape (which may start is the same answer for
every stage of one shape: its demand, the nodes it may use, a gang's tasks left, and its
workflow's priority), the demand of its ready tasks not started (what it claims back of
its idle quota), and how many of its workflows wait. Reading every job at every question
made it linear in the workflows waiting (5.2 ms of CPU at 4,000); as `sim/shapes` and
`sim/shares` do, the cluster says which jobs changed (`Cluster.touch`) and the snapshot
reads only those again at the next question (`refresh`), so its cost is the change's.

Each queue also keeps a `Shares` index over its own jobs (fair's question on a resource
pool, asked of the queue's scoped view: `idlegate.sim.admission_view`).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable
from typing import NamedTuple

from idlegate.sim.protocol import Job, Stage
from idlegate.sim.resources import MILLI
from idlegate.sim.shapes import PLAIN, shape
from idlegate.sim.shares import Shares

Demand = Callable[[Stage], list[float]]


class Group(NamedTuple):
    """The key of a shape group: its workflows' priority, its demand (None: a pod only),
    and `sim.shapes.shape`."""

    priority: int
    amounts: tuple[int, ...] | None
    shape: Hashable


def need_of(stage: Stage) -> int:
    """The tasks a stage starts at once: a gang's left, else one."""
    return stage.available - stage.launched if stage.gang else 1


def demand_of(stage: Stage, dims: int) -> list[float]:
    """One task's demand on `dims` resources, in the admission's order: a pod, then the
    pool's other resources (none asked: zeros)."""
    need = stage.need
    if need is None:
        return [MILLI, *([0.0] * (dims - 1))]
    return [MILLI, *need.amounts]


def group_of(stage: Stage) -> Group:
    need = stage.need
    return Group(stage.job.priority, None if need is None else need.amounts, shape(stage))


class _Read(NamedTuple):
    """What the snapshot counted of a job when it last read it (taken out when it changes)."""

    queue: int
    stages: list[tuple[Stage, Group]]
    pending: list[float]


class QueueSnapshot:
    """Per queue: jobs, runnable stages by `Group`, pending demand, waiting workflows."""

    __slots__ = (
        "_demand",
        "_dims",
        "_lists",
        "_read",
        "_stale",
        "changed",
        "groups",
        "jobs",
        "pending",
        "shares",
        "waiting",
    )

    def __init__(self, queues: int, dims: int, demand: Demand, jobs: Iterable[Job] = ()) -> None:
        self._demand = demand
        self._dims = dims
        self.jobs: list[dict[Job, None]] = [{} for _ in range(queues)]
        """Each queue's jobs in the system, in arrival order."""
        self.groups: list[dict[Group, dict[Stage, None]]] = [{} for _ in range(queues)]
        """Each queue's runnable stages by group (ordered sets)."""
        self.pending: list[list[float]] = [[0.0] * dims for _ in range(queues)]
        """Each queue's demand of ready tasks not started, per resource."""
        self.waiting: list[int] = [0] * queues
        """How many of each queue's workflows have a runnable stage."""
        self.shares: list[Shares] = [Shares() for _ in range(queues)]
        """Each queue's jobs by dominant share (its scoped view's `shares`)."""
        self._read: dict[Job, _Read] = {}
        self._stale: dict[Job, None] = dict.fromkeys(jobs)
        self.changed: set[int] = set()
        """The queues whose counts changed since the admission last took this."""
        self._lists: list[list[Job] | None] = [None] * queues
        """Each queue's `jobs` as a list (None: its jobs changed since it was made)."""

    def members(self, q: int) -> list[Job]:
        """Queue q's jobs in arrival order, as a list (made again only when they change)."""
        got = self._lists[q]
        if got is None:
            got = self._lists[q] = list(self.jobs[q])
        return got

    def touch(self, job: Job) -> None:
        """`job` changed (`Cluster.touch`): read it again at the next `refresh`."""
        self._stale[job] = None

    def refresh(self) -> list[Job]:
        """Read the jobs that changed again; returns them (the admission notes their
        stages that began to wait)."""
        stale = self._stale
        if not stale:
            return []
        # (new jobs join their queue in arrival order; one job, most often: no sort)
        jobs = list(stale) if len(stale) == 1 else sorted(stale, key=_id)
        stale.clear()
        for job in jobs:
            self._forget(job)
        for job in jobs:
            self._count(job)
        return jobs

    def _forget(self, job: Job) -> None:
        read = self._read.pop(job, None)
        if read is None:
            return
        q = read.queue
        self.changed.add(q)
        if job.finish is not None or job.queue != q:
            self.jobs[q].pop(job, None)
            self._lists[q] = None
            if job.finish is None:  # (moved to another queue: an index without it)
                self.shares[q] = Shares(list(self.jobs[q]))
            else:
                self.shares[q].touch(job)
        groups = self.groups[q]
        for stage, key in read.stages:
            group = groups[key]
            del group[stage]
            if not group:
                del groups[key]
        if read.stages:
            self.waiting[q] -= 1
        pending = self.pending[q]
        for i, a in enumerate(read.pending):
            pending[i] -= a

    def _count(self, job: Job) -> None:
        if job.finish is not None:
            return
        q = job.queue
        self.changed.add(q)
        members = self.jobs[q]
        if job not in members:
            last = next(reversed(members), None) if members else None
            members[job] = None
            self._lists[q] = None
            if last is not None and last.id > job.id:  # (a job moved here: arrival order)
                self.jobs[q] = dict.fromkeys(sorted(members, key=_id))
        self.shares[q].touch(job)
        # (a stage with no demand beyond its pod and no gang, most of them: its group and
        # its pod's demand without building them per stage; the same keys and sums)
        plain = Group(job.priority, None, PLAIN)
        stages = [
            (s, plain if s.need is None and not s.gang else group_of(s)) for s in job.runnable
        ]
        pending = [0.0] * self._dims
        groups = self.groups[q]
        for stage, key in stages:
            groups.setdefault(key, {})[stage] = None
            tasks = stage.available - stage.launched
            if stage.need is None:
                pending[0] += MILLI * tasks
                continue
            for i, a in enumerate(self._demand(stage)):
                pending[i] += a * tasks
        if stages:
            self.waiting[q] += 1
        total = self.pending[q]
        for i, a in enumerate(pending):
            total[i] += a
        self._read[job] = _Read(q, stages, pending)


def _id(job: Job) -> int:
    return job.id
