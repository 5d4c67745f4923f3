"""The pool as one queue's policy sees it: the queue's own workflows on what it may use.

Inside a queue, a rule's caps and shares are over what that queue may use and over its own
workflows (`idlegate.sim.admission`, phase 6): `fair` caps a workflow at ceil(K / n) with
K the executors and n the workflows with tasks to launch, so over the whole pool a flood
of 100 workflows in one queue would cap every other queue's workflows at 1 executor
although their quotas are idle. Asked of a `QueueView`, K is the queue's entitlement now
(its nominal quota, or in the borrowing phase its usage plus what it may borrow, at most
the pool) and n counts its own workflows: the same caps as the queue alone on its
entitlement, which is what finish-time fairness compares with.

Everything else a policy reads (the clock, free executors and resources, running tasks,
`check`) is the cluster's: the view only narrows the jobs and the pool's size.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from idlegate.sim.protocol import Job, Stage, launchable
from idlegate.sim.resources import MILLI, ResourceVector
from idlegate.sim.shares import Shares

if TYPE_CHECKING:
    from idlegate.sim.admission_types import PoolState


class QueueView:
    """The scoped view of queue `queue` (the module docstring): `jobs`, `num_executors`,
    `capacity` and `shares` are the queue's; every other attribute is the cluster's."""

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

    def __getattr__(self, name: str) -> Any:
        return getattr(self._cluster, name)

    def runnable_stages(self) -> list[Stage]:
        """The queue's stages a decision may name now (the cluster's rule)."""
        free = self._cluster.free_executors
        return [s for j in self.jobs for s in j.runnable if launchable(s, free)]
