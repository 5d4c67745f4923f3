"""Baseline schedulers: the simple rules a learned policy has to beat.

Every class here implements the `Scheduler` protocol of `idlegate.sim.protocol` and never
inserts an idle slot. Shared conventions:

* **Which stage of a job.** Every heuristic that picks a job first then takes that job's
  runnable stage with the largest *bottom level* (the longest chain of stage lengths
  from the stage to an exit, itself included), ties to the lowest stage index: the stage
  on the job's remaining critical path, as in Decima's SJF-CP baseline.
* **Launchable.** A stage is launchable when it is one of the job's runnable stages the
  view shows (`view.runnable(job)`: with queues, those the admission lets start), for a
  gang stage all its tasks fit the free executors, and its next task (a gang's tasks)
  fits the pool's free resources (`launchable`: exactly `view.runnable_stages()`; the
  heuristics filter `view.runnable(job)` themselves so that one decision costs O(jobs),
  not O(jobs × stages)).
* **Ties** between jobs go to the lower job id (the earlier arrival), except LCFS.
* **Caps** are always legal: above `job.held`, and at least `job.held + stage.tasks`
  for a gang stage. With no free executor every heuristic answers WAIT.
* **Resource pools.** On a pool that counts resources beyond pods, `fair` and
  `weighted-fair` partition the pool by dominant shares (DRF) and `srpt` / `sjf-cp` weigh
  work by demand (`idlegate.policy.drf`), and the job-priority rules backfill around the
  first job that does not fit, with a reservation for it (EASY, `idlegate.policy.backfill`);
  on a pods-only pool every rule counts executors, as it always did.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable
from math import ceil, floor, isfinite
from typing import Any, ClassVar

import numpy as np

from idlegate.errors import IdlegateError, reject_unknown
from idlegate.policy.backfill import backfill_decision, head_stage
from idlegate.policy.drf import (
    cap_for_share,
    pool_capacity,
    reaches_share,
    room_within_share,
    weighted_remaining_cp,
    weighted_remaining_work,
)
from idlegate.sim.admission_view import PoolView, QueueView
from idlegate.sim.cluster import Cluster
from idlegate.sim.orders import Order
from idlegate.sim.protocol import (
    WAIT,
    Action,
    ClusterView,
    Decision,
    Job,
    Scheduler,
    Stage,
    launchable,
)
from idlegate.sim.shares import Shares

_ROUNDING_SLACK = 1e-9
"""Shares are ceil(K × fraction); the slack keeps 2.0000000001 from rounding up to 3."""

# ---------------------------------------------------------------------------------------
# Helpers over the cluster's state objects


def best_stage(stages: Iterable[Stage], free: int) -> Stage | None:
    """The launchable one of a job's runnable `stages` (`view.runnable(job)`) with the
    largest bottom level (ties: lowest index).

    A gang stage is launchable only when all its tasks fit the `free` executors, and any
    stage only when its demand fits the pool's free resources (`launchable`).
    """
    best: Stage | None = None
    for s in stages:
        if s.gang and s.tasks > free:
            continue
        if (
            best is None
            or s.bottom_level > best.bottom_level
            or (s.bottom_level == best.bottom_level and s.index < best.index)
        ) and (s.need is None or launchable(s, free)):
            best = s
    return best


def has_unlaunched_tasks(job: Job) -> bool:
    """True while some task of the job has not been launched (Decima's "unfinished job")."""
    return job.unlaunched > 0


def fair_share(num_executors: int, jobs: int) -> int:
    """Fair's per-job share: ceil(K / n) for n jobs with tasks to launch (n >= 1)."""
    return ceil(num_executors / jobs)


def launch_decision(stage: Stage, cap: int) -> Decision:
    """A launch of `stage` with cap `cap`, raised to `held + tasks` for a gang stage."""
    if stage.gang:
        cap = max(cap, stage.job.held + stage.tasks)
    return Decision(stage, cap)


def _first_launch(view: ClusterView, jobs: Iterable[Job]) -> Action:
    """Launch the best stage of the first of `jobs` with a launchable one (cap K), else WAIT."""
    free = view.free_executors
    if free <= 0:
        return WAIT
    if getattr(view, "resource_names", None):  # (a pods-only pool never backfills)
        backfilled = backfill_decision(view, jobs, best_stage, launch_decision)
        if backfilled is not None:
            return backfilled
    runnable = view.runnable
    for job in jobs:
        if stages := runnable(job):
            stage = best_stage(stages, free)
            if stage is not None:
                return launch_decision(stage, view.num_executors)
    return WAIT


class _Baseline:
    """Common plumbing: no randomness, no parameters, a readable repr."""

    name: str = "baseline"
    pure: ClassVar[bool] = True
    """Its answer is a function of the view alone: asked twice the same question, it
    answers alike (a shared replay asks it once: `policy.portfolio.runs`)."""

    def reset(self, rng: Any) -> None:
        """Nothing to reset: the rule is deterministic and keeps no state."""

    def __repr__(self) -> str:
        params = ", ".join(f"{k}={v!r}" for k, v in self._params().items())
        return f"{type(self).__name__}({params})"

    def _params(self) -> dict[str, Any]:
        return {}


# ---------------------------------------------------------------------------------------
# Job-priority rules: one job at a time gets every executor it can use (cap K)


class FifoScheduler(_Baseline):
    """First in, first out: the earliest-arrived job with a launchable stage, cap K.

    Decima's "Spark FIFO" baseline (Mao et al., SIGCOMM 2019, §7.2), i.e. Spark's default
    `spark.scheduler.mode=FIFO`: a job may take every executor it can use.
    """

    name = "fifo"

    def decide(self, view: ClusterView) -> Action:
        return _first_launch(view, view.jobs)


class LcfsScheduler(_Baseline):
    """Last come, first served: the latest-arrived job with a launchable stage, cap K.

    The textbook non-preemptive LCFS order (jobs arriving at the same time: higher job id
    first); a sanity baseline that favours new jobs, the opposite of FIFO.
    """

    name = "lcfs"

    def decide(self, view: ClusterView) -> Action:
        return _first_launch(view, reversed(view.jobs))


class _KeyedScheduler(_Baseline):
    """The job with the smallest `key(job)` among jobs with a launchable stage, cap K;
    on a resource pool `pool_key(job, K, capacity)` if the rule has one.

    `cap` = c < 1 keeps a reserve for arrivals: a job may hold at most max(1, ⌊c · K⌋)
    executors, a job already holding them is skipped, and that number is the decision's
    cap (a gang stage still gets `held + tasks`). Why: on a heavy-tailed trace a huge
    job alone takes every executor, and an executor stays on its stage while the stage
    has tasks left (`idlegate.sim.cluster`), so jobs arriving behind it wait for the
    whole stage; with a tenth kept back they start at once. On Alibaba's DAG jobs (100
    executors, load 0.85, 100 jobs a stream, 10 seeds) `srpt?cap=0.9` has a mean JCT of
    1,709 s against plain `srpt`'s 3,358 s (−34.4 % ± 20.7 paired per seed) and
    `fair?scale=0.5`'s 2,682 s (`idlegate compare -w alibaba -k 100 --load 0.85
    --jobs-count 100 --seeds 10 --first-seed 2000 --schedulers
    'srpt,srpt?cap=0.9,fair?scale=0.5'`). c = 1, the default, is the plain rule,
    decision for decision.

    On a resource pool a job's dominant share of the pool is at most c: a job is skipped
    when not one more task of its stage fits within c of every resource, pods included,
    and the cap is the tasks that do (`room_within_share`); a job holding nothing may
    always start one task, as on a pods-only pool.
    """

    pool_key: Callable[[Job, int, tuple[int, ...]], float] | None = None
    order_key: str | None = None
    """The job attribute `key` returns, when it is one (`sim.orders.KEYS`): asked of a
    cluster, a pods-only pool's question then reads the cluster's index of the jobs by it
    (`Cluster.order`) instead of passing over every job; the same answer."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        # (a subclass with a key of its own is not ordered by its parent's attribute)
        super().__init_subclass__(**kwargs)
        if "key" in cls.__dict__ and "order_key" not in cls.__dict__:
            cls.order_key = None

    def __init__(self, *, cap: float = 1.0) -> None:
        if isinstance(cap, bool) or not isinstance(cap, int | float) or not 0 < cap <= 1:
            raise IdlegateError(
                f"cap must be a fraction of the executors in (0, 1] (1, the default, is no "
                f"cap; 0.9 keeps a tenth for arrivals), got {cap!r}"
            )
        self.cap = float(cap)

    def _params(self) -> dict[str, Any]:
        return {} if self.cap == 1.0 else {"cap": self.cap}

    def key(self, job: Job) -> float:
        raise NotImplementedError

    def decide(self, view: ClusterView) -> Action:
        free = view.free_executors
        if free <= 0:
            return WAIT
        # (the attribute first: no call on a pods-only pool's hot path)
        capacity = pool_capacity(view) if getattr(view, "resource_names", None) else None
        if capacity is not None:
            return self._decide_pool(view, capacity)
        k = view.num_executors
        limit = k if self.cap == 1.0 else max(1, floor(self.cap * k + _ROUNDING_SLACK))
        if self.order_key is not None and isinstance(view, Cluster | PoolView | QueueView):
            order = view.order(self.order_key)
            if order.usable:
                return self._decide_indexed(order, view.runnable, free, limit)
        key, runnable = self.key, view.runnable
        chosen: Stage | None = None
        chosen_key = 0.0
        for job in view.jobs:  # arrival order = id order: strict < keeps the lower id
            if job.held >= limit or not (stages := runnable(job)):
                continue
            k_job = key(job)
            if chosen is not None and k_job >= chosen_key:
                continue
            stage = best_stage(stages, free)
            if stage is not None:
                chosen, chosen_key = stage, k_job
        return WAIT if chosen is None else launch_decision(chosen, limit)

    @staticmethod
    def _decide_indexed(
        order: Order, runnable: Callable[[Job], list[Stage]], free: int, limit: int
    ) -> Action:
        """`decide`'s pass answered from the cluster's `order` (the jobs with a runnable
        stage by key, then id): the first job under `limit` with a launchable stage of
        those `runnable` shows.

        The cluster's, a `PoolView`'s of it, or a `QueueView`'s: the order of that
        queue's jobs alone (`Cluster.order`'s `queue`), as the view holds them."""

        def pick(job: Job) -> Stage | None:
            if job.held >= limit or not (stages := runnable(job)):
                return None
            return best_stage(stages, free)

        chosen = order.first(pick)
        return WAIT if chosen is None else launch_decision(chosen, limit)

    def _decide_pool(self, view: ClusterView, capacity: tuple[int, ...]) -> Action:
        """`decide` on a resource pool: the order by `pool_key`, EASY backfilling, and
        with `cap` < 1 each job within its share of the pool."""
        key = self.key
        k = view.num_executors
        pool_key = type(self).pool_key
        if pool_key is not None:

            def key(job: Job) -> float:
                return pool_key(job, k, capacity)

        # (sorted: Python's sort is stable, so ties keep the lower job id)
        runnable = view.runnable
        order = sorted((j for j in view.jobs if runnable(j)), key=key)
        if self.cap == 1.0:
            return backfill_decision(view, order, best_stage, launch_decision) or WAIT
        share = self.cap

        def room(stage: Stage) -> int:
            return room_within_share(stage.job, stage, share, k, capacity)

        def within(stage: Stage, cap: int) -> Decision:
            return launch_decision(stage, min(cap, stage.job.held + max(1, room(stage))))

        order = [j for j in order if not j.held or room(head_stage(runnable(j))) >= 1]
        return backfill_decision(view, order, best_stage, within) or WAIT


class SjfScheduler(_KeyedScheduler):
    """Shortest job first: the job with the least *total* work (static), cap K.

    Together with this module's within-job rule (the stage on the critical path) this is
    Decima's "SJF-CP" baseline (Mao et al. 2019, §7.2: "prioritizes jobs based on their
    total work, and within each job runs tasks from the next stage on its critical path").
    """

    name = "sjf"
    order_key = "total_work"

    def key(self, job: Job) -> float:
        return job.dag.total_work


class SjfCpScheduler(_KeyedScheduler):
    """Shortest remaining critical path first: the job with the least `remaining_cp`, cap K.

    `remaining_cp` is the longest bottom level over the job's incomplete stages, i.e. the
    least time the job still needs with unlimited executors; the critical-path feature of
    the idle-slot papers (Duan & Wu 2021/2022) used as a priority. Note: Decima's baseline
    of the same name orders by total work (that is `sjf` here). On a resource pool each
    stage of the path counts its duration times its task's dominant share of the pool
    (`weighted_remaining_cp`).
    """

    name = "sjf-cp"
    pool_key = staticmethod(weighted_remaining_cp)
    order_key = "remaining_cp"

    def key(self, job: Job) -> float:
        return job.remaining_cp


class SrptScheduler(_KeyedScheduler):
    """Shortest remaining processing time first: the job with the least `remaining_work`, cap K.

    `remaining_work` is the estimated executor-seconds of the job's unfinished tasks, so
    this is SRPT (optimal for the mean completion time of preemptive jobs on one machine,
    Schrage 1968) applied non-preemptively at every decision. On DAG workloads it beats
    SJF-CP: 108.2 s against 119.0 s on TPC-H-like DAGs with 10 executors at load 0.85,
    and 26.3 s against 29.4 s in the demo's setting, 5 seeds each (`idlegate compare
    --workload tpch-like -k 10 --load 0.85 --jobs-count 61 --seeds 5 --schedulers
    sjf-cp,srpt`; the demo: `-k 50 --jobs-count 101`). On a resource pool each task's
    seconds count times its dominant share of the pool (`weighted_remaining_work`): a
    job of few 8-CPU tasks is not shorter than one of many 0.1-CPU tasks.
    """

    name = "srpt"
    pool_key = staticmethod(weighted_remaining_work)
    order_key = "remaining_work"

    def key(self, job: Job) -> float:
        return job.remaining_work


# ---------------------------------------------------------------------------------------
# Partition rules: each job capped at its share of the K executors


class FairScheduler(_Baseline):
    """Decima's "dynamic partition" fair scheduler: each job capped at ceil(K / n).

    n counts the jobs that still have a task to launch (Decima's `num_unfinished_jobs`;
    a job whose last tasks are all running needs no share). At a decision:

    1. jobs the free executors came from (`view.free_executors_from(job) > 0`) go first,
       so an executor stays with its job while the job has work (no moving delay);
    2. then jobs in arrival order;
    3. a job already holding its share is skipped; the chosen job gets its share as cap
       (a gang stage gets at least `held + tasks`, so a rigid stage wider than the share
       is not starved);
    4. if no job under its share has a launchable stage: WAIT (executors stay free).

    `keep_source=True` follows Decima's code exactly in step 1: the executors a job freed
    go back to it even when it is at or above its share (cap `held + free from it`).
    `scale` = s widens (s > 1) or narrows (s < 1) every share to ceil(s · K / n), at least
    1: the cap the `portfolio` scheduler tunes (s = 1, the default, is Decima's rule).

    On a resource pool this is dominant-resource fairness (DRF): a job's share is the
    fraction s / n of the pool (`fractions`), a job whose dominant share reaches it is
    skipped, and the chosen stage's cap is the executors whose demand brings the job to
    its share (`cap_for_share`); keep_source and the order are as above. Asked of a
    cluster, the jobs below their share come from its index (`sim.shares`), not a pass
    over every job: the same answer (the first job in arrival order, one with free
    executors of its own first), at a cost that does not grow with the jobs waiting.
    """

    name = "fair"
    even = True
    """Every job's share is the same fraction (`fractions`): what `sim.shares` answers."""

    def __init__(self, *, keep_source: bool = False, scale: float = 1.0) -> None:
        if not isinstance(keep_source, bool):
            raise IdlegateError(f"keep_source must be true or false, got {keep_source!r}")
        if isinstance(scale, bool) or not isinstance(scale, int | float) or not scale > 0:
            raise IdlegateError(f"scale must be a number > 0 (1 is fair's share), got {scale!r}")
        if not isfinite(scale):
            raise IdlegateError(f"scale must be a finite number > 0, got {scale!r}")
        self.keep_source = keep_source
        self.scale = float(scale)

    def _params(self) -> dict[str, Any]:
        return {"keep_source": self.keep_source, "scale": self.scale}

    def shares(self, num_executors: int, jobs: list[Job]) -> list[int]:
        """Per job of `jobs` (all with tasks to launch): how many executors it may hold."""
        return [self.even_share(num_executors, len(jobs))] * len(jobs)

    def even_share(self, num_executors: int, jobs: int) -> int:
        """Each job's share of `num_executors` when `jobs` (>= 1) have tasks to launch."""
        if self.scale == 1.0:
            return fair_share(num_executors, jobs)
        return max(1, ceil(self.scale * num_executors / jobs - _ROUNDING_SLACK))

    def fractions(self, jobs: list[Job]) -> list[float]:
        """Per job of `jobs` (all with tasks to launch): the fraction of a resource pool
        it may hold (DRF's share)."""
        return [self.scale / len(jobs)] * len(jobs)

    def decide(self, view: ClusterView) -> Action:
        free = view.free_executors
        if free <= 0:
            return WAIT
        capacity = pool_capacity(view) if getattr(view, "resource_names", None) else None
        index = getattr(view, "shares", None)
        if isinstance(index, Shares) and self.even and not self.keep_source:
            if capacity is not None:
                return self._decide_indexed(view, index, capacity)
            if isinstance(view, Cluster | PoolView):  # (a queue's view of pods: the pass)
                return self._decide_pods_indexed(view, index)
        active = [j for j in view.jobs if j.unlaunched > 0]  # (has_unlaunched_tasks, inline)
        if not active:
            return WAIT
        if capacity is not None:
            return self._decide_drf(view, active, capacity)
        shares = self.shares(view.num_executors, active)
        fallback: Decision | None = None
        runnable = view.runnable
        for job, share in zip(active, shares, strict=True):
            local = view.free_executors_from(job)
            limit = max(share, job.held + local) if self.keep_source and local else share
            if job.held >= limit or (fallback is not None and not local):
                continue
            if not (stages := runnable(job)):
                continue
            stage = best_stage(stages, free)
            if stage is None:
                continue
            if local:
                return launch_decision(stage, limit)
            fallback = launch_decision(stage, limit)
        return WAIT if fallback is None else fallback

    def _decide_drf(
        self, view: ClusterView, active: list[Job], capacity: tuple[int, ...]
    ) -> Action:
        """`decide` on a resource pool: shares are fractions of the pool (DRF)."""
        k, free = view.num_executors, view.free_executors
        local_of, keep_source = view.free_executors_from, self.keep_source
        fallback: Decision | None = None
        runnable = view.runnable
        # (the cheap tests first: this passes over every job, for weighted shares or keep_source)
        for job, share in zip(active, self.fractions(active), strict=True):
            if not (stages := runnable(job)):
                continue
            local = local_of(job)
            if fallback is not None and not local:
                continue
            keep = keep_source and local > 0
            if not keep and reaches_share(job, share - _ROUNDING_SLACK, k, capacity):
                continue
            stage = best_stage(stages, free)
            if stage is None:
                continue
            cap = cap_for_share(job, stage, share, k, capacity)
            decision = launch_decision(stage, max(cap, job.held + local) if keep else cap)
            if local:
                return decision
            fallback = decision
        return WAIT if fallback is None else fallback

    def _decide_indexed(
        self, view: ClusterView, index: Shares, capacity: tuple[int, ...]
    ) -> Action:
        """`_decide_drf`'s answer from the cluster's index: the first job below its share
        with a launchable stage, unless a later one has free executors of its own."""
        active = index.active(view, capacity)
        if not active:
            return WAIT
        share = self.scale / active  # (each job's of `fractions`)
        level = share - _ROUNDING_SLACK
        bound = view.fit_bound()  # type: ignore[attr-defined]  # (a cluster or a queue's view)
        found = self._first(view, index, capacity, level, own=False, after=None, bound=bound)
        if found is not None and not view.free_executors_from(found[0]):
            again = self._first(view, index, capacity, level, own=True, after=found[0], bound=bound)
            found = again or found
        if found is None:
            return WAIT
        job, stage = found
        return launch_decision(
            stage, cap_for_share(job, stage, share, view.num_executors, capacity)
        )

    def _decide_pods_indexed(self, view: Cluster | PoolView, index: Shares) -> Action:
        """The pods-only pass's answer from the cluster's index (`sim.shares` with no
        resource but pods: a job's share is held / K): the first job holding fewer than
        its share of executors with a launchable stage, unless a later one has free
        executors of its own; its cap is the share. A share s of executors is a level of
        (s - 0.5) / K: held < s exactly where held / K < (s - 0.5) / K, as held is whole."""
        active = index.active(view, ())
        if not active:
            return WAIT
        k = view.num_executors
        share = self.even_share(k, active)
        level = (share - 0.5) / k
        found = self._first(view, index, (), level, own=False, after=None)
        if found is not None and not view.free_executors_from(found[0]):
            found = self._first(view, index, (), level, own=True, after=found[0]) or found
        return WAIT if found is None else launch_decision(found[1], share)

    @staticmethod
    def _first(
        view: ClusterView,
        index: Shares,
        capacity: tuple[int, ...],
        level: float,
        *,
        own: bool,
        after: Job | None,
        bound: tuple[int, ...] | None = None,
    ) -> tuple[Job, Stage] | None:
        """The first job below `level` after `after` (with `own`: with free executors of
        its own) that has a launchable stage, and its best one; `bound` (the pool's
        `fit_bound`) skips the jobs whose every stage asks more than fits now."""
        free, runnable = view.free_executors, view.runnable
        ask = index.first_below
        while (job := ask(view, capacity, level, own=own, after=after, bound=bound)) is not None:
            stage = best_stage(runnable(job), free)
            if stage is not None:
                return job, stage
            after = job
        return None


class WeightedFairScheduler(FairScheduler):
    """Weighted dynamic partition: job i's share is ceil(K · w_i / Σ w), at least 1.

    w_i = W_i ** alpha, with W_i the job's remaining work (`work="remaining"`, the
    default) or its total work (`work="total"`, as in the paper). Decima's baselines
    (Mao et al. 2019, §7.2) are "naive weighted fair" (alpha = 1) and "tuned weighted
    fair", whose best value was alpha = -1 (smaller jobs get more executors); alpha = 0
    is plain fair. Shares are rounded up, so they may sum to more than K; everything
    else (locality first, arrival order, skip jobs at their share, WAIT) is as in
    `FairScheduler`.
    """

    name = "weighted-fair"
    even = False

    def __init__(
        self, *, alpha: float = -1.0, work: str = "remaining", keep_source: bool = False
    ) -> None:
        super().__init__(keep_source=keep_source)
        if isinstance(alpha, bool) or not isinstance(alpha, int | float) or not isfinite(alpha):
            raise IdlegateError(
                f"alpha must be a finite number (Decima's tuned value is -1), got {alpha!r}"
            )
        if work not in ("remaining", "total"):
            raise IdlegateError(f"work must be 'remaining' or 'total', got {work!r}")
        self.alpha = float(alpha)
        self.work = work

    def _params(self) -> dict[str, Any]:
        return {"alpha": self.alpha, "work": self.work, "keep_source": self.keep_source}

    def _weights(self, jobs: list[Job]) -> list[float]:
        alpha = self.alpha
        if self.work == "total":
            sizes = [j.total_work for j in jobs]
        else:
            sizes = [max(j.remaining_work, 1e-12) for j in jobs]
        # normalise so the heaviest weight is 1: no overflow, and the sum is >= 1
        ref = max(sizes) if alpha > 0 else min(sizes)
        return [(s / ref) ** alpha for s in sizes]

    def shares(self, num_executors: int, jobs: list[Job]) -> list[int]:
        weights = self._weights(jobs)
        total = sum(weights)
        return [max(1, ceil(num_executors * w / total - _ROUNDING_SLACK)) for w in weights]

    def fractions(self, jobs: list[Job]) -> list[float]:
        weights = self._weights(jobs)
        total = sum(weights)
        return [w / total for w in weights]


# ---------------------------------------------------------------------------------------


class RandomScheduler(_Baseline):
    """A uniformly random launchable stage with a uniformly random legal cap.

    The cap is drawn from [held + 1, K] (from [held + tasks, K] for a gang stage). All
    draws come from the Generator given to `reset()` (the run's), so a run is reproducible
    from its seed. A sanity floor: any sensible policy, learned or not, should beat it.
    """

    name = "random"
    pure = False

    def __init__(self) -> None:
        self._rng = np.random.default_rng(0)

    def reset(self, rng: Any) -> None:
        """Use `rng` (a numpy Generator owned by the run) for every later choice."""
        self._rng = rng

    def decide(self, view: ClusterView) -> Action:
        if view.free_executors <= 0:
            return WAIT
        stages = view.runnable_stages()
        if not stages:
            return WAIT
        stage = stages[int(self._rng.integers(len(stages)))]
        low = stage.job.held + (stage.tasks if stage.gang else 1)
        cap = int(self._rng.integers(low, view.num_executors + 1))
        return Decision(stage, cap)


# ---------------------------------------------------------------------------------------
# Registry

SCHEDULERS: dict[str, Callable[..., Scheduler]] = {
    cls.name: cls
    for cls in (
        FifoScheduler,
        SjfScheduler,
        SjfCpScheduler,
        SrptScheduler,
        LcfsScheduler,
        FairScheduler,
        WeightedFairScheduler,
        RandomScheduler,
    )
}
"""Baseline schedulers by name (the names `make_scheduler` and the CLI accept)."""


def make_scheduler(name: str, **params: Any) -> Scheduler:
    """Build the baseline called `name` ("fifo", "sjf", …) with its keyword parameters.

    Raises IdlegateError for an unknown name or parameter, or an invalid value.
    """
    key = str(name).strip().lower().replace("_", "-")
    cls = SCHEDULERS.get(key)
    if cls is None:
        raise IdlegateError(f"unknown scheduler {name!r}; valid names are {', '.join(SCHEDULERS)}")
    accepted = list(inspect.signature(cls).parameters)
    reject_unknown(params, accepted, f"scheduler {key!r}")
    return cls(**params)
