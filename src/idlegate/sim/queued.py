"""Which admission a pool's questions go through, and the one that numbers its waiting
(the part of `idlegate.sim.cluster.Cluster` that reads its queues, `Queued`).

A pool with queues asks its admission at every question. A pool without queues is one
queue with no quota (`Admission.alone`): its entries (positions, reasons) are read
through that queue, and so are its decisions whenever a workflow of a priority other
than 0 is in the pool, so that the order the positions show is the order workflows
start in (issue 93: a workflow of priority 1000 was shown at position 1 for 35 s and
started last, as the pool decided without the admission). With every workflow of
priority 0 the pool decides without it: phase 6 holds nothing back then, and the run is
the one of a queue with no quota, to the byte, without the admission's cost per question.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from idlegate.sim.admission import Admission
from idlegate.sim.protocol import Job, Stage

if TYPE_CHECKING:
    from idlegate.sim.admission_result import AdmissionResult
    from idlegate.sim.resources import ResourceVector


class Ranked:
    """The jobs in a pool of a priority other than 0, read from the jobs touched since
    the last asking (`any`): a driver sets a job's priority after `add_job`, and the
    index reads it at the next question, as the admission's snapshot does."""

    __slots__ = ("jobs", "stale")

    def __init__(self, jobs: Iterable[Job] = ()) -> None:
        self.stale: dict[Job, None] = dict.fromkeys(jobs)
        """The jobs touched since `any` last read them (`Cluster.touch` marks them)."""
        self.jobs: set[Job] = set()

    def left(self, job: Job) -> None:
        """`job` left the pool: forgotten at once (a pool with queues never asks `any`, so
        nothing would read it out of `stale`)."""
        self.stale.pop(job, None)
        self.jobs.discard(job)

    def any(self) -> bool:
        """Whether a job of a priority other than 0 is in the pool now."""
        if self.stale:
            jobs = self.jobs
            for job in self.stale:
                if job.finish is None and job.priority:
                    jobs.add(job)
                else:
                    jobs.discard(job)
            self.stale.clear()
        return bool(self.jobs)


class Queued:
    """A pool's admission, as the cluster reads it (the module docstring)."""

    admission: Admission | None
    capacity: ResourceVector
    resource_names: tuple[str, ...]
    ranked: Ranked
    now: float
    idle_expired: Callable[[Stage, float], None]
    _alone: Admission | None = None
    """Without queues: its one queue (`Admission.alone`), made at its first reading (a
    class default, so a fork, made without `__init__`, makes its own)."""

    def admission_deciding(self) -> Admission | None:
        """The admission the present question goes through: the pool's queues, else, while
        a workflow of a priority other than 0 is in the pool, its one queue (the module
        docstring); None: the pool decides alone."""
        admission = self.admission
        if admission is None and self.ranked.any():
            return self._entries()
        return admission

    def _entries(self) -> Admission:
        """The admission that numbers the waiting (a pool without queues: `Admission.alone`)."""
        admission = self.admission or self._alone
        if admission is None:
            admission = self._alone = Admission.alone(self.capacity, self.resource_names)
        return admission

    def capacity_changed(self) -> None:
        """`PoolResources.capacity_changed`: the pool's queues are told the new capacity,
        so the cohort they borrow from is the pool's as it is now (nodes added, removed)."""
        if (admission := self.admission or self._alone) is not None:
            admission.set_capacity(self.capacity)

    def admission_result(self) -> AdmissionResult:
        """The pool's queues at the present question (`Admission.result`): their entries
        (a pool without queues: its one, `Admission.alone`)."""
        admission = self._entries()
        self._end_idle_over(admission)
        return admission.result(self)  # type: ignore[arg-type]

    def ahead(self, n: int) -> list[Job]:
        """Per queue, the `n` workflows the admission will start next (`Entries.ahead`)."""
        return self._entries().ahead(self, n) if n > 0 else []  # type: ignore[arg-type]

    def _end_idle_over(self, admission: Admission) -> None:
        """End the idle slots the admission says passed their wait bound (`idle_over`)."""
        for stage in admission.idle_over(self):  # type: ignore[arg-type]
            self.idle_expired(stage, self.now)
