"""The bounded observation of the learned DAG policy: a window over a long queue.

The learned policy's cost grows with the jobs it sees (one graph row per incomplete
stage, one job row per job), and so does its decision time: with a thousand workflows
queued it would featurize and embed them all at every decision. Deep Back-Filling
(Wang et al., HPCC 2022) shows a fixed-size agent only the head and the tail of a long
queue; `WindowConfig` applies that split window to the DAG policy. When more than
`threshold` jobs are in the system, the policy sees only the union of

* **head**: the `head` oldest jobs with a launchable stage (they have waited longest;
  the starvation guard watches them too);
* **tail**: the `tail` newest jobs with a launchable stage (every arriving job is seen
  at least once, the split window's guarantee);
* **smallest**: the `smallest` jobs with a launchable stage and the least remaining
  work. The trained policies learned from SRPT-like teachers (the lookahead planner,
  `srpt`, `sjf-cp`), so these are the jobs they most often pick; keeping them keeps
  the decisions close to those of the full view;
* **holders**: jobs with a launchable stage that hold executors already, at most
  `holders` of them (the least remaining work first): a policy that grows a running
  job's cap must see it. Holders with nothing launchable are left out: no action can
  name them, and the global features count their executors as busy.

Jobs are "launchable" as in the stage mask: a runnable stage, a gang stage only if all
its tasks fit the free executors. Ties in remaining work go to the older job. The
visible jobs keep arrival order, so the observation is the one the model would build
for a system of just those jobs, except for the summary of the rest (`summary`): the
global ``jobs`` and ``backlog`` columns count the whole system and the WAIT mask is the
whole system's (fair's share counts every job; a hidden launchable job below it rules
WAIT out). The model's inputs do not change, so the same ONNX file runs with and
without a window. Actions can only name visible jobs; hidden ones are reached by the
head, the tail, by becoming small, and by the starvation guard (`policy.guard`), which
sees the whole system.

At most head + tail + smallest + holders jobs are visible (32 with the defaults),
whatever the queue. `select_window` picks them from scratch (it reads every job:
O(jobs)); `WindowSelector`, which `OnnxPolicy` uses, gives the same answer from
records it keeps between decisions, re-reading only the jobs that can have changed
(O(K + changes) per decision), so a decision with 1,000 queued workflows costs about
what one with 30 does.

    make_scheduler("learned:default?window=32")          # threshold 32
    make_scheduler("learned:default", window=WindowConfig(smallest=16))

The defaults (threshold 32; 8 + 8 + 8 + 8 jobs) are the best of the sizes compared in
docs/policy.md ("Bounded observation"): on a burst of 150 workflows they beat both the
full view and a 64-job window, and they keep the model's part of a decision at its cost
for about 30 jobs.

Below the threshold nothing changes: the decisions are those without a window.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from math import ceil
from operator import attrgetter
from typing import Any, NamedTuple

import numpy as np
from pydantic import Field, StrictInt, ValidationError, field_validator

from idlegate.config import Config
from idlegate.errors import IdlegateError, reject_unknown
from idlegate.sim.protocol import ClusterView, Decision, Job, Stage


class SystemTotals(NamedTuple):
    """What a bounded observation keeps of the whole system (`Featurizer(view, visible, rest)`)."""

    jobs: int
    """Jobs in the system (the global ``jobs`` column)."""
    backlog: float
    """Σ remaining work of every job, executor-seconds (the global ``backlog`` column)."""
    active: int
    """Jobs with a task not launched yet (n of fair's share ⌈K / n⌉ in the WAIT mask)."""
    hidden_below_share: bool
    """Some job outside the visible subset has a launchable stage and holds fewer
    executors than fair's share ⌈K / active⌉ (so WAIT is ruled out, as if it were seen)."""


class WindowConfig(Config):
    """Which jobs the learned policy sees when many are in the system (module docstring)."""

    threshold: StrictInt = Field(32, ge=0)
    """The window applies only while more than this many jobs are in the system; at or
    below it the policy sees every job (decisions identical to no window)."""
    head: StrictInt = 8
    """The oldest jobs with a launchable stage that stay visible."""
    tail: StrictInt = Field(8, ge=0)
    """The newest jobs with a launchable stage that stay visible."""
    smallest: StrictInt = Field(8, ge=0)
    """Jobs with a launchable stage and the least remaining work that stay visible."""
    holders: StrictInt = Field(8, ge=0)
    """At most this many jobs that hold executors and have a launchable stage stay
    visible (least remaining work first)."""
    summary: bool = True
    """Global jobs/backlog features and the WAIT mask describe the whole system (true) or
    only the visible jobs (false)."""

    @field_validator("head")
    @classmethod
    def _sees_something(cls, value: int) -> int:
        # with no head the oldest waiting job could stay out of sight for ever
        if value < 1:
            raise ValueError("must be at least 1 (the oldest waiting job must stay visible)")
        return value

    @property
    def size(self) -> int:
        """The most jobs visible at once: head + tail + smallest + holders."""
        return self.head + self.tail + self.smallest + self.holders


WINDOW_FIELDS: tuple[str, ...] = tuple(WindowConfig.model_fields)


def window_config(threshold: Any = None, *, prefix: str = "", **fields: Any) -> WindowConfig:
    """A `WindowConfig` from keyword values (strings from a spec are fine).

    Raises IdlegateError naming the field and what is wrong with it; with `prefix` (a
    spec's ``window_``) the field is named as the spec names it.
    """
    values = dict(fields)
    if threshold is not None:
        values["threshold"] = threshold
    reject_unknown(values, WINDOW_FIELDS, "the observation window", noun="setting")
    try:
        return WindowConfig.model_validate(values)
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err["loc"])
        if prefix:
            where = prefix.rstrip("_") if where == "threshold" else prefix + where
        msg = err["msg"].removeprefix("Value error, ")
        raise IdlegateError(
            f"{where}={err['input']!r} (observation window) is invalid: {msg}; e.g. "
            "learned:policy.onnx?window=32&window_smallest=8"
        ) from None


def select_window(view: ClusterView, config: WindowConfig) -> tuple[list[Job], SystemTotals]:
    """The visible jobs (a subset of `view.jobs`, arrival order) and the whole system's totals.

    Applies the window whatever the number of jobs; the caller compares with `threshold`.
    """
    jobs = view.jobs
    free = view.free_executors
    # whole-list attribute reads through map(): ~4x faster than one Python loop over the
    # jobs, which would be the window's only O(jobs) Python work
    work = list(map(_REMAINING_WORK, jobs))
    unlaunched = list(map(_UNLAUNCHED, jobs))
    held = list(map(_HELD, jobs))
    position = [
        i
        for i, runnable in enumerate(map(view.runnable, jobs))
        if runnable and (not runnable[0].gang or _fits(runnable, free))
    ]
    # left to right in arrival order, as the featurizer adds it up (the same float on
    # CPython 3.11, whose sum() of floats is plain addition), 5x faster than reduce(add)
    backlog = float(sum(work))
    active = len(jobs) - unlaunched.count(0)
    n = len(position)
    seen = np.zeros(n, dtype=bool)
    seen[: config.head] = True
    if config.tail:
        seen[max(n - config.tail, 0) :] = True
    pos = np.asarray(position, dtype=np.int64)
    work_a = np.asarray(work, dtype=np.float64)[pos]
    held_a = np.asarray(held, dtype=np.int64)[pos]
    if config.smallest and n:
        seen[np.argsort(work_a, kind="stable")[: config.smallest]] = True
    if config.holders:
        holding = np.flatnonzero(held_a > 0)
        if holding.size > config.holders:
            holding = holding[np.argsort(work_a[holding], kind="stable")[: config.holders]]
        seen[holding] = True
    share = ceil(view.num_executors / active) if active else 0
    below = bool((~seen & (held_a < share)).any())
    visible = [jobs[i] for i in pos[seen].tolist()]
    return visible, SystemTotals(len(jobs), backlog, active, below)


_REMAINING_WORK = attrgetter("remaining_work")
_UNLAUNCHED = attrgetter("unlaunched")
_HELD = attrgetter("held")


def _fits(runnable: list[Stage], free: int) -> bool:
    """Some runnable stage is launchable now: not a gang, or a gang whose tasks all fit."""
    return any(not s.gang or s.tasks <= free for s in runnable)


class WindowSelector:
    """`select_window` with its per-job reads kept between calls: the same answer, cheaper.

    A job's window-relevant state (remaining work, unlaunched tasks, executors held,
    launchable) changes only when it runs tasks (it holds executors), when a decision
    names it, when its idle slot ends, or for a gang stage when the free executors
    change. So a call re-reads only those jobs and the arrivals: O(K + changes) Python
    work instead of O(jobs). `decided(decision)` tells it each decision applied
    (`OnnxPolicy.decide` tells its own).

    Whatever the selector cannot vouch for, it reads again in full: a different view
    (a fork, another cluster), time going back, a view without a decision count
    (`Cluster.decisions`) or one where decisions were applied that it was not told of
    (an outer scheduler decided instead, as the starvation guard or the lookahead
    planner do), a job count that does not add up after arrivals and departures, the
    busy executors not equal to the executors its known holders hold, and a job list
    whose ends are not the ones it knows (jobs inserted or removed out of order).
    """

    def __init__(self, config: WindowConfig) -> None:
        self.config = config
        self.full_reads = 0
        """Calls that read every job (the first of a run, and every check that failed)."""
        self._runnable: Callable[[Job], list[Stage]] = attrgetter("runnable")
        """The jobs' stages as the present call's view shows them (`ClusterView.runnable`)."""
        self.reset()

    def reset(self) -> None:
        """Forget every job (start of a run)."""
        self._view: ClusterView | None = None
        self._now = -np.inf
        self._rec: dict[int, _Record] = {}
        self._work: dict[int, float] = {}
        """Remaining work by job id, in arrival order (the backlog is their sum)."""
        self._holders: set[int] = set()
        self._watch: set[int] = set()
        """Jobs with a gang stage runnable or a stage inside its idle slot."""
        self._dirty: set[int] = set()
        self._told: list[tuple[Stage, int, bool]] = []
        """Decisions it was told of since its last call (`decided`): (stage, tasks it had
        launched then, idle slot), to check at the next call that they were applied."""
        self._decisions = -1
        """The view's decision count at its last call."""
        self._heap: list[tuple[float, int, int, int]] = []
        """(remaining work, arrival seq, version, id) of launchable jobs; stale entries
        (another version) are dropped when they surface."""
        self._seq = 0
        self._active = 0
        self._free_launchable = 0
        """Launchable jobs holding no executor."""

    @property
    def following(self) -> bool:
        """True while it keeps records (a window was applied since the last reset)."""
        return bool(self._rec)

    def decided(self, decision: Decision) -> None:
        """`decision` is applied now: re-read its job at the next call.

        Every applied decision must be told, whoever made it. The next call counts them
        against the view's decision count and checks that each took effect (a launch
        raised its stage's launched tasks, an idle slot marked it delayed); if not, some
        decision it was not told of replaced one it was, and it reads every job.
        """
        stage = decision.stage
        self._dirty.add(stage.job.id)
        self._told.append((stage, stage.launched, decision.idle_delay > 0))

    def __call__(self, view: ClusterView) -> tuple[list[Job], SystemTotals]:
        """The same as ``select_window(view, config)``."""
        self._runnable = view.runnable  # (a job's stages as this call's view shows them)
        if not self._update(view):
            self._read_all(view)
        self._told = []
        self._decisions = getattr(view, "decisions", -1)
        return self._select(view)

    # -- keeping the records -------------------------------------------------------------

    def _update(self, view: ClusterView) -> bool:
        """Re-read the jobs that may have changed; False when a full read is needed."""
        jobs = view.jobs
        rec = self._rec
        if view is not self._view or view.now < self._now or not jobs or not rec:
            return False
        decisions = getattr(view, "decisions", None)
        if decisions is None or decisions != self._decisions + len(self._told):
            return False
        for stage, launched, idle in self._told:
            if not (stage.delayed if idle else stage.launched > launched):
                return False
        self._now = view.now
        free = view.free_executors
        arrivals = []
        for job in reversed(jobs):
            if job.id in rec:
                break
            arrivals.append(job)
        for job in reversed(arrivals):
            self._add(job, free)
        for job_id in self._holders | self._dirty | self._watch:
            record = rec.get(job_id)
            if record is None:
                continue
            job = record.job
            if job.finish is not None:
                self._drop(record)
            else:
                self._refresh(record, free)
        self._dirty = set()
        if len(rec) != len(jobs) or rec.get(jobs[0].id) is None:
            return False
        if next(iter(rec)) != jobs[0].id or next(reversed(rec)) != jobs[-1].id:
            return False
        held = sum(rec[i].held for i in self._holders)
        return held == view.num_executors - free

    def _read_all(self, view: ClusterView) -> None:
        self.full_reads += 1
        self.reset()
        self._view = view
        self._now = view.now
        free = view.free_executors
        for job in view.jobs:
            self._add(job, free)

    def _add(self, job: Job, free: int) -> None:
        record = _Record(job, self._seq)
        self._seq += 1
        self._rec[job.id] = record
        self._store(record, free)

    def _drop(self, record: _Record) -> None:
        self._forget(record)
        job_id = record.job.id
        del self._rec[job_id]
        del self._work[job_id]
        self._holders.discard(job_id)
        self._watch.discard(job_id)

    def _refresh(self, record: _Record, free: int) -> None:
        job = record.job
        launchable = _launchable(self._runnable(job), free)
        if (
            job.remaining_work == record.work
            and job.unlaunched == record.unlaunched
            and job.held == record.held
            and launchable == record.launchable
            and record.job.id not in self._watch
        ):
            return
        self._forget(record)
        self._store(record, free, launchable)

    def _forget(self, record: _Record) -> None:
        """Take the record out of the counts (before it changes or leaves)."""
        if record.unlaunched > 0:
            self._active -= 1
        if record.launchable and record.held == 0:
            self._free_launchable -= 1
        record.version += 1  # its heap entries are stale now

    def _store(self, record: _Record, free: int, launchable: bool | None = None) -> None:
        """Read the job into its record and into the counts."""
        job = record.job
        job_id = job.id
        record.work = work = job.remaining_work
        record.unlaunched = job.unlaunched
        record.held = job.held
        runnable = self._runnable(job)
        record.launchable = _launchable(runnable, free) if launchable is None else launchable
        self._work[job_id] = work
        if record.unlaunched > 0:
            self._active += 1
        if record.held > 0:
            self._holders.add(job_id)
        else:
            self._holders.discard(job_id)
        if record.launchable:
            if record.held == 0:
                self._free_launchable += 1
            heapq.heappush(self._heap, (work, record.seq, record.version, job_id))
        if any(s.gang for s in runnable) or (
            job.idle_inserted > 0 and any(s.idle_until is not None for s in job.stages)
        ):
            self._watch.add(job_id)
        else:
            self._watch.discard(job_id)

    # -- choosing ------------------------------------------------------------------------

    def _select(self, view: ClusterView) -> tuple[list[Job], SystemTotals]:
        cfg = self.config
        rec = self._rec
        chosen: dict[int, _Record] = {}
        for ids, want in ((iter(rec), cfg.head), (reversed(rec), cfg.tail)):
            found = 0
            for job_id in ids:
                if found >= want:
                    break
                record = rec[job_id]
                if record.launchable:
                    chosen[job_id] = record
                    found += 1
        for record in self._smallest(cfg.smallest):
            chosen[record.job.id] = record
        holding = sorted(
            (r for r in (rec[i] for i in self._holders) if r.launchable),
            key=lambda r: (r.work, r.seq),
        )
        for record in holding[: cfg.holders]:
            chosen[record.job.id] = record
        active = self._active
        below = False
        if active:
            share = ceil(view.num_executors / active)
            seen_free = sum(1 for r in chosen.values() if r.held == 0)
            below = self._free_launchable > seen_free or any(
                r.held < share for r in holding if r.job.id not in chosen
            )
        visible = [r.job for r in sorted(chosen.values(), key=_SEQ)]
        backlog = float(sum(self._work.values()))
        return visible, SystemTotals(len(rec), backlog, active, below)

    def _smallest(self, m: int) -> list[_Record]:
        """The m launchable records with the least remaining work (ties: older first)."""
        heap = self._heap
        rec = self._rec
        if len(heap) > 2 * len(rec) + 64:  # mostly stale entries: rebuild
            heap[:] = [(r.work, r.seq, r.version, i) for i, r in rec.items() if r.launchable]
            heapq.heapify(heap)
        out: list[_Record] = []
        kept = []
        while heap and len(out) < m:
            entry = heapq.heappop(heap)
            record = rec.get(entry[3])
            if record is not None and record.version == entry[2] and record.launchable:
                out.append(record)
                kept.append(entry)
        for entry in kept:
            heapq.heappush(heap, entry)
        return out


class _Record:
    """What the selector knows of one job (`WindowSelector`)."""

    __slots__ = ("held", "job", "launchable", "seq", "unlaunched", "version", "work")

    def __init__(self, job: Job, seq: int) -> None:
        self.job = job
        self.seq = seq
        """Arrival order among the records (ties in remaining work go to the lower)."""
        self.version = 0
        self.work = 0.0
        self.unlaunched = 0
        self.held = 0
        self.launchable = False


_SEQ = attrgetter("seq")


def _launchable(runnable: list[Stage], free: int) -> bool:
    """A job whose stages shown are `runnable` has a launchable one now."""
    return bool(runnable) and (not runnable[0].gang or _fits(runnable, free))
