"""What the policy is shown at a question with queues: a view of the pool, made from the
admission's plan (`idlegate.sim.admission_plan`) and read-only.

A view shows the stages the plan lets start and no other: `runnable(job)` is a job's
runnable stages as the question shows them, worked out once a question for the jobs
that have a stage held back (`shown`) and read through for the others, so the jobs
themselves are never changed to hide a stage. Every policy reads a job's stages through
its view's `runnable` (the cluster's own is the job's list: `Cluster.runnable`).

* `QueueView`: one queue's part of the pool. Inside a queue, a rule's caps and shares are
  over what that queue may use and over its own workflows (`idlegate.sim.admission`,
  the policy's step): `fair` caps a workflow at ceil(K / n) with K the executors and n
  the workflows with tasks to launch, so over the whole pool a flood of 100 workflows in
  one queue would cap every other queue's workflows at 1 executor although their quotas
  are idle. Asked of a `QueueView`, K is the queue's entitlement now (its nominal quota,
  or in the borrowing phase its usage plus what it may borrow, at most the pool) and n
  counts its own workflows: the same caps as the queue alone on its entitlement, which
  is what finish-time fairness compares with.
* `PoolView`: the whole pool with the stages the plan holds back left out (the
  baselines, ``pooled``, a planner that forks the pool, and one queue with no quota).
  Its `fork` is the cluster's: a copy of the pool as it is, whose copy of the admission
  holds back what the pool's would (a planner's simulated futures are the pool's own).

Everything else a policy reads (the clock, free executors and resources, running tasks,
`check`) is the cluster's: a view only narrows the jobs, their stages and the pool's size.

`Views` is the admission's part that makes them (step 8 of its cycle, `views`): in order,
the view of each queue served with a stage that may start, made at the question asked.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from math import inf
from typing import TYPE_CHECKING, Any

from idlegate.sim.admission_plan import BORROW
from idlegate.sim.protocol import Job, Stage, launchable
from idlegate.sim.resources import MILLI, ResourceVector
from idlegate.sim.shares import Shares

if TYPE_CHECKING:
    from idlegate.sim.admission_plan import AdmissionPlan
    from idlegate.sim.admission_snapshot import QueueSnapshot
    from idlegate.sim.admission_types import PoolState
    from idlegate.sim.orders import Order
    from idlegate.sim.queues import QueueSpec


class _Shown:
    """The pool's attributes read through, and each job's stages as the question shows
    them (`runnable`)."""

    _cluster: PoolState
    _shown: Mapping[Job, list[Stage]]
    jobs: list[Job]
    now: float
    free_executors: int
    free_executors_from: Callable[[Job | None], int]
    resource_names: Sequence[str]

    def __getattr__(self, name: str) -> Any:
        return getattr(self._cluster, name)

    def _asked(self, shown: Mapping[Job, list[Stage]]) -> None:
        """At a new question: the stages `shown`, and what every policy reads of the pool
        at once (as it is for the question: the policy decides before anything changes),
        not through `__getattr__` at each read."""
        cluster = self._cluster
        self._shown = shown
        self.now = cluster.now
        self.free_executors = cluster.free_executors
        self.free_executors_from = cluster.free_executors_from
        self.resource_names = cluster.resource_names

    def runnable(self, job: Job) -> list[Stage]:
        """`job`'s runnable stages that the question lets start (the module docstring)."""
        return self._shown.get(job, job.runnable)

    def runnable_stages(self) -> list[Stage]:
        """The stages a decision may name now: shown, and fitting (the cluster's rule)."""
        free, shown = self._cluster.free_executors, self._shown
        return [s for j in self.jobs for s in shown.get(j, j.runnable) if launchable(s, free)]


class QueueView(_Shown):
    """The scoped view of queue `queue` (the module docstring): `jobs`, `num_executors`,
    `capacity`, `shares` and the stages shown are the queue's; the rest is the pool's."""

    def __init__(
        self,
        cluster: PoolState,
        queue: int,
        jobs: list[Job],
        entitled: Sequence[float],
        dims: Sequence[str],
        shares: Shares,
    ) -> None:
        self._cluster = cluster
        self._shown = {}
        self.whole = cluster
        """The cluster the view narrows (the pool: every queue's jobs, its whole size)."""
        self.queue = queue
        self.jobs = jobs
        """The queue's jobs in the system, in arrival order."""
        pods = entitled[0]
        self.num_executors = max(1, min(cluster.num_executors, int(pods // MILLI)))
        """The executors the queue may hold (its entitlement's pods, at most the pool's)."""
        capacity = dict(cluster.capacity)
        for name, amount in zip(dims[1:], entitled[1:], strict=True):
            capacity[name] = max(1, min(capacity.get(name, 0), int(amount)))
        capacity["pods"] = self.num_executors * MILLI
        self.capacity = ResourceVector(capacity)
        """The queue's entitlement of each resource the pool counts."""
        self.shares = shares
        """The queue's own jobs by dominant share (`sim.shares`, read against this view)."""

    def runnable(self, job: Job) -> list[Stage]:
        """`job`'s runnable stages that the question lets start: none of another queue's
        workflow (a rule that keeps a workflow from an earlier question, as the rigid
        ones keep their head, is shown none of its stages in another queue's view)."""
        if job.queue != self.queue:
            return []
        return self._shown.get(job, job.runnable)

    def order(self, key: str) -> Order:
        """The queue's jobs with a runnable stage by `key` (`Cluster.order` of this queue):
        a keyed rule's index, as the pool's is for the pool."""
        return self._cluster.order(key, self.queue)

    def at(self, jobs: list[Job], shown: Mapping[Job, list[Stage]]) -> QueueView:
        """The view at a new question of the same entitlement: the queue's `jobs` now and
        the stages `shown` of those with one held back. (Kept from one question to the
        next while the pool and the entitlement are the same: the learned policy's window
        reads only what changed in a view it saw before, `policy.bounded`.)"""
        self.jobs = jobs
        self._asked(shown)
        return self


class PoolView(_Shown):
    """The whole pool with the stages `shown` (the module docstring)."""

    def __init__(self, cluster: PoolState, shown: Mapping[Job, list[Stage]]) -> None:
        self._cluster = cluster
        self._shown = shown
        self.whole = cluster
        self.jobs = cluster.jobs

    def at(self, shown: Mapping[Job, list[Stage]]) -> PoolView:
        """The view at a new question of the same pool: the stages `shown` of the jobs
        with one held back (kept, as a queue's is: `QueueView.at`)."""
        self._asked(shown)
        return self


class Views:
    """The admission's step 8 (`idlegate.sim.admission`'s cycle): the views of its plan a
    policy is shown, in order (`Admission` derives from it)."""

    mode: str
    queues: tuple[QueueSpec, ...]
    dims: tuple[str, ...]
    capacity: list[float]
    used: list[list[float]]
    snapshot: QueueSnapshot
    plan: AdmissionPlan
    _first: int
    _views: dict[int, tuple[tuple[Any, tuple[float, ...]], QueueView]]
    _pool_view: PoolView | None

    def tops(self, q: int) -> list[tuple[float, float]]:
        raise NotImplementedError

    def _startable(self, pool: PoolState, q: int) -> bool:
        """Whether a stage of served queue q may start now (phase 7 on each shape)."""
        plan = self.plan
        free, groups = pool.free_executors, self.snapshot.groups[q]
        for key in plan.rooms.get(q, ()):
            stages = groups.get(key)
            if not stages:
                continue
            first = next(iter(stages))
            if not launchable(first, free):
                continue
            if plan.reserve is None or any(plan.room(s) for s in stages):
                return True
        return False

    def views(self, pool: PoolState, whole: bool = False) -> Iterator[Any]:
        """What the policy is shown at the open question, in the order it is asked until
        it answers (`Cluster.decide_once`): each queue served with a stage that may start
        now, its `QueueView`; for the baselines, ``pooled`` and a policy that forks the
        pool (`whole`: its ``needs_cluster``), the pool's `PoolView` once. A view shows
        the stages the plan lets start and no other (the module docstring)."""
        if self.mode != "queues" or whole:
            yield self._whole(pool, self._shown(pool.jobs, None))
            return
        served, first = self.plan.served, self._first  # (those before `first` may not start)
        for i in range(first, len(served)):
            q = served[i]
            if i == first or self._startable(pool, q):
                yield self._view(pool, q, self.snapshot.members(q))

    def _shown(self, jobs: list[Job], q: int | None) -> dict[Job, list[Stage]]:
        """Of `jobs` (queue q's; None: the pool's), those with a runnable stage the plan
        does not let start, with the stages it does (read from the snapshot's shapes, not
        from every job, when no room is reserved)."""
        plan = self.plan
        if q is None or plan.reserve is not None:
            maybe: Iterable[Job] = jobs
        else:
            rooms = plan.rooms.get(q, {})
            held: dict[Job, None] = {}
            for key, stages in self.snapshot.groups[q].items():
                if key not in rooms:
                    held.update((s.job, None) for s in stages)
            maybe = held
        room, shown = plan.room, {}
        for job in maybe:
            runnable = job.runnable
            if runnable and not all(map(room, runnable)):
                shown[job] = [s for s in runnable if room(s)]
        return shown

    def _whole(self, pool: PoolState, shown: dict[Job, list[Stage]]) -> PoolView:
        view = self._pool_view
        if view is None or view.whole is not pool:
            view = self._pool_view = PoolView(pool, shown)
        return view.at(shown)

    def _view(self, pool: PoolState, q: int, jobs: list[Job]) -> Any:
        """Queue q's view (the pool's for one queue with no quota: bit for bit as no
        queues, its stages held back by priority or a reservation left out)."""
        entitled = self.entitlement(q)
        shown = self._shown(jobs, q)
        if len(self.queues) == 1 and all(
            e >= c for e, c in zip(entitled, self.capacity, strict=True)
        ):
            return self._whole(pool, shown)
        kept = self._views.get(q)
        key = (pool, tuple(entitled))
        if kept is not None and kept[0] == key:  # (the same pool: its view kept)
            return kept[1].at(jobs, shown)
        view = QueueView(pool, q, jobs, entitled, self.dims, self.snapshot.shares[q])
        self._views[q] = (key, view)
        return view.at(jobs, shown)

    def entitlement(self, q: int) -> list[float]:
        """What queue q may use now, per resource (at most the pool's capacity): its
        nominal quota, or in the borrowing phase its usage plus what it may borrow."""
        tops = self.tops(q)
        borrowing = self.plan.phase.get(q) == BORROW
        out = []
        for u, (own, top), cap in zip(self.used[q], tops, self.capacity, strict=True):
            room = top if borrowing else own
            out.append(cap if room == inf else min(cap, u + max(0.0, room)))
        return out
