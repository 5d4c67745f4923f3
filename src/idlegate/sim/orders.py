"""The pool's jobs with a runnable stage by a key, smallest first, for srpt's question.

`srpt`, `sjf-cp` and `sjf` on a pods-only pool (`policy.heuristics._KeyedScheduler`) start
the job with the smallest key (remaining work, remaining critical path, total work; ties
to the lower job id) among the jobs that have a launchable stage and hold fewer executors
than the rule's cap. Answered by passing over every job, each question reads every job's
key, and a forecast's replay asks thousands of questions of a pool with 1,000 workflows
waiting: 0.49 s of CPU for one replay under `srpt`, three quarters of it in that pass
(`python benchmarks/forecast.py --schedulers srpt`, docs/research/forecasts.md, Cost).

`Order` keeps, per job with a runnable stage, the entry ``(key, id, job)`` in a binary
heap, so the first job in that order is at the top, and the first one that a predicate
accepts (the rule's: a launchable stage, under the cap) is a few pops away: the jobs
the predicate refuses are pushed back. As `sim.shapes` and `sim.shares` do, the cluster
says which jobs changed (`touch`) where it changes them, and the index reads only those
again at its next question; an entry whose job changed key or left stays in the heap
until it surfaces (its job's entry is another object then) or the heap is compacted.

A pool with queues asks a queue's view (`sim.admission_view.QueueView`), which holds
that queue's workflows alone: an order of one queue (`queue`) holds its jobs only, so a
flood of 500 workflows in one queue costs another queue's question nothing, and the
flooded queue's question a few pops, not a pass over its 500 (issue 96: a replay of a
burst under queues spent 40 % of its CPU in that pass).

The predicate is asked of each job as it is now, so a job whose runnable stages are
hidden for one question (the admission's `_ask` does that without a `touch`) is refused
there, as the pass would skip it; what the index must not miss is a job that gained a
runnable stage or changed key, and the cluster touches each of those.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable
from operator import attrgetter
from typing import TypeVar

from idlegate.sim.protocol import Job

T = TypeVar("T")

KEYS = ("remaining_work", "remaining_cp", "total_work")
"""The job attributes an order may be kept by (each rule's key: srpt, sjf-cp, sjf)."""

_Entry = tuple[float, int, Job]


class Order:
    """A pool's jobs with a runnable stage by ``(getattr(job, key), job.id)`` (the module
    docstring); a job's key is read when it was last touched."""

    __slots__ = ("_entry", "_heap", "_key", "_nan", "key", "queue", "stale")

    def __init__(self, key: str, jobs: Iterable[Job] = (), queue: int | None = None) -> None:
        if key not in KEYS:
            raise ValueError(f"an order is kept by one of {', '.join(KEYS)}, not {key!r}")
        self.key = key
        self.queue = queue
        """The queue whose jobs it holds (None: the pool's, every queue's)."""
        self._key = attrgetter(key)
        self._heap: list[_Entry] = []
        self._entry: dict[Job, _Entry] = {}
        """Each indexed job's live entry (the heap may hold older ones of it)."""
        self._nan: set[Job] = set()
        """Indexed jobs whose key is NaN: no order holds them, so `usable` is False."""
        self.stale: dict[Job, None] = dict.fromkeys(jobs)
        """The jobs touched since the order last read them (one dict for the order's life:
        `Cluster.touch` adds a job in the system to it directly)."""

    def touch(self, job: Job) -> None:
        """`job` changed (its key, its runnable stages), or came or left.

        A job that left is forgotten at once, not at the next question: an order no rule
        asks any more (a portfolio that follows another rule now) then holds the jobs in
        the system, not every job that ever was."""
        if job.finish is None:
            self.stale[job] = None
        else:
            self.stale.pop(job, None)
            self._entry.pop(job, None)
            self._nan.discard(job)

    @property
    def usable(self) -> bool:
        """False while some job's key is NaN: the pass's answer then depends on where the
        NaN stands among the jobs (every comparison with it is false), which no order
        reproduces; the rule passes over the jobs instead."""
        if self.stale:
            self._refresh()
        return not self._nan

    def first(self, pick: Callable[[Job], T | None]) -> T | None:
        """`pick(job)` of the first job in the order for which it is not None (None: none)."""
        if self.stale:
            self._refresh()
        heap, live = self._heap, self._entry
        refused: list[_Entry] | None = None  # (mostly none: the top is taken)
        found: T | None = None
        while heap:
            entry = heap[0]
            if live.get(entry[2]) is not entry:  # (an old entry of a job that changed or left)
                heapq.heappop(heap)
                continue
            found = pick(entry[2])
            if found is not None:
                break
            if refused is None:
                refused = []
            refused.append(heapq.heappop(heap))
        if refused is not None:
            for entry in refused:
                heapq.heappush(heap, entry)
        return found

    def __len__(self) -> int:
        if self.stale:
            self._refresh()
        return len(self._entry)

    # -- keeping the heap ----------------------------------------------------------------

    def _refresh(self) -> None:
        heap, live, nan, key, queue = self._heap, self._entry, self._nan, self._key, self.queue
        push = heapq.heappush
        for job in self.stale:
            old = live.get(job)
            if (
                job.finish is not None
                or not job.runnable
                or (queue is not None and job.queue != queue)
            ):
                if old is not None:
                    del live[job]
                if nan:
                    nan.discard(job)
                continue
            value = key(job)
            if value != value:  # NaN (kept out of the heap, whose order it would break)
                nan.add(job)
                live.pop(job, None)
                continue
            if nan:
                nan.discard(job)
            if old is not None and old[0] == value:
                continue  # (same key: the entry in the heap stands)
            entry = live[job] = (value, job.id, job)
            push(heap, entry)
        self.stale.clear()
        if len(heap) > 2 * len(live) + 64:  # (mostly old entries: compact)
            self._heap = list(live.values())
            heapq.heapify(self._heap)
