"""Features: the one function that turns a cluster view into the learned policy's input.

Training (torch) and inference (ONNX) both call `Featurizer(config)(view)`, so what is
trained is what runs. The result, an `Observation`, holds the float32 feature matrices
whose columns `policy.columns` documents, the graph structure, the action masks and the
way back from a row to its `Stage`.

Rows: the incomplete stages of every job in the system (finished < tasks), jobs in
`view.jobs` order (arrival order), each job's stages in DAG index order. Complete
stages are left out: a complete stage's parents are complete too, so it would only
send messages to other complete stages and never change an incomplete stage's
embedding; dropping them shrinks the graph by about a third. Job rows follow
`view.jobs`.

Graph: `edge_src[e]` is a child's row and `edge_dst[e]` its parent's row (messages go
child → parent, as in Decima; edges into complete stages are left out with them);
`stage_job[i]` is the job row of stage row i and `stage_index[i]` its index in the
job's DAG, so `Observation.stage(i)` is `jobs[stage_job[i]].stages[stage_index[i]]`.

Masks: `stage_mask[i]` — stage i is in ``view.runnable_stages()`` (its job's runnable
list; a gang stage only if all its tasks fit the free executors, any stage only if its
demand fits the pool's free resources: `launchable`). `idle_mask[i]` —
additionally not started (launched == 0) and never delayed, so an idle slot is legal;
`idle_rows` lists those rows (the idle head scores only them).
`cap_mask[j, l]` — cap level `cap_levels[l]` is above the executors job j holds (a
launch must raise the cap above `held`). Cap levels are 1..K, or for a large cluster
at most ``max_cap_levels`` levels spaced geometrically, K always included (so every
row with held < K has a legal level). `cap_x` = cap_levels / K, the level's feature.
`wait_mask[0]` — the decision may be WAIT (launch nothing until the next event): only
when every job with a launchable stage already holds at least its fair share ⌈K / n⌉
(n: jobs with tasks not launched yet) — exactly when fair itself waits. WAIT may thus
decline to give a job more than fair would, never hold one below it (deliberate delays
below the share are idle slots: bounded, once per stage); some executor is then busy,
so an event is sure to come. A wider mask (WAIT whenever an executor is busy) let a
fair-imitating policy starve a workload unlike its training set (docs/research/results.md, "The
learned policies").

Resource columns: with ``FeatureConfig(resource_features=True)`` the columns of
`policy.resource_features` (what a pool of CPU, memory and GPUs adds; all 0 on a pods-only
pool) are appended to `stage_x`, `job_x` and `global_x`, computed at every call. WAIT is
then also allowed while a runnable stage's tasks do not fit the free resources and some
executor is busy: a reservation for that stage, as EASY backfilling gives its head
(`policy.backfill`), which the baselines on a resource pool make and a policy could not
learn without it. A task is running, so an event is sure to come; once nothing runs,
every stage fits (a demand larger than the pool is refused on arrival). No stage of a
pods-only pool has such a demand, so there the mask is the one above.

Stored form: training keeps observations after their cluster is gone. `as_arrays()` gives
an observation's arrays without the cluster's objects (`ARRAYS`); `Observation.from_arrays`
turns them back into an observation the model, `policy.actions.choose` and
`policy.model.evaluate_batch` accept (it cannot `decode`: it has no `Stage` to name).
`stored()` is the two in one: what rollouts and demonstrations record, and the arrays the
Gymnasium env pads to fixed sizes.

Speed: the featurizer keeps each job's rows between calls and recomputes them only when
the job changed (`policy.feature_rows`). Per call the work is a short O(jobs) Python loop
plus a dozen vectorised numpy operations; nothing loops over tasks, and over stages only
the frontier of the jobs that changed (`feature_rows.JobRows.frontier`; all of a job's
stages when one completed). About 0.03 ms per call with 20 jobs in the system when nothing
changed, 0.04 ms when one job did (`benchmarks/inference.py` reports it in context).
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass
from math import log1p
from typing import Any, Final

import numpy as np

from idlegate.errors import IdlegateError
from idlegate.policy.bounded import SystemTotals
from idlegate.policy.columns import (
    NUM_GLOBAL_FEATURES,
    NUM_JOB_FEATURES,
    NUM_STAGE_FEATURES,
    FeatureConfig,
    cap_levels,
    num_global_features,
)
from idlegate.policy.feature_rows import (
    JOB_COLUMN,
    LAUNCHABLE,
    MAY_IDLE,
    RUNNABLE,
    DagColumns,
    JobRows,
    RowLayout,
)
from idlegate.policy.heuristics import fair_share
from idlegate.policy.resource_features import ResourceColumns
from idlegate.sim.dag import Dag
from idlegate.sim.protocol import ClusterView, Job, Stage, launchable

MODEL_INPUTS: Final = (
    "stage_x",
    "job_x",
    "global_x",
    "edge_src",
    "edge_dst",
    "stage_job",
    "stage_mask",
    "idle_rows",
    "cap_x",
    "cap_mask",
    "wait_mask",
)
"""The model's inputs, in order (torch forward arguments and ONNX input names)."""

ARRAYS: Final = tuple("idle_mask" if name == "idle_rows" else name for name in MODEL_INPUTS)
"""An observation's arrays, without the cluster's objects: its stored form (module
docstring). `idle_rows`, which varies in length, follows from `idle_mask`."""

_TIME_IN_SYSTEM, _LOCAL_FREE, _HELD = (
    JOB_COLUMN["time_in_system"],
    JOB_COLUMN["local_free"],
    JOB_COLUMN["held"],
)


class Observation:
    """The features of one decision point. Arrays are float32 (features), int64, bool (masks).

    Shapes: N stages, J jobs, E edges, L cap levels, M stages that may idle. The last
    three attributes lead back to the cluster's objects; a stored observation
    (`from_arrays`) has them as None.
    """

    __slots__ = (*ARRAYS, "cap_levels", "idle_rows", "jobs", "offsets", "stage_index")

    stage_x: np.ndarray
    """[N, num_stage_features(config)] float32 (`policy.columns`)."""
    job_x: np.ndarray
    """[J, num_job_features(config)] float32 (`policy.columns`)."""
    global_x: np.ndarray
    """[1, num_global_features(config)] float32 (`policy.columns`)."""
    edge_src: np.ndarray
    """[E] int64: child rows."""
    edge_dst: np.ndarray
    """[E] int64: parent rows."""
    stage_job: np.ndarray
    """[N] int64: job row of each stage row."""
    stage_mask: np.ndarray
    """[N] bool: stages a decision may name."""
    idle_mask: np.ndarray
    """[N] bool: stages that may idle."""
    idle_rows: np.ndarray
    """[M] int64: the rows where `idle_mask` is true, ascending (the idle head's rows)."""
    cap_x: np.ndarray
    """[L] float32: cap_levels / K."""
    cap_mask: np.ndarray
    """[J, L] bool: cap level above the executors the job holds."""
    wait_mask: np.ndarray
    """[1] bool: the decision may be WAIT (every launchable job holds its fair share)."""
    cap_levels: np.ndarray | None
    """[L] int64: the caps the levels stand for."""
    jobs: list[Job] | None
    """Job of each job row (the view's jobs at the time of the call)."""
    offsets: list[int] | None
    """First stage row of each job, plus N at the end."""
    stage_index: np.ndarray | None
    """[N] int64: stage index (within its job's DAG) of each stage row."""

    def __init__(self, **values: Any) -> None:
        for k, v in values.items():
            setattr(self, k, v)

    @classmethod
    def from_arrays(cls, arrays: dict[str, np.ndarray]) -> Observation:
        """The stored observation of `as_arrays()`'s arrays (no way back to the cluster)."""
        live = dict.fromkeys(("cap_levels", "jobs", "offsets", "stage_index"))
        idle_rows = np.flatnonzero(arrays["idle_mask"])
        return cls(**{name: arrays[name] for name in ARRAYS}, idle_rows=idle_rows, **live)

    def as_arrays(self) -> dict[str, np.ndarray]:
        """The arrays by name (`ARRAYS`): the observation without the cluster's objects."""
        return {name: getattr(self, name) for name in ARRAYS}

    def stored(self) -> Observation:
        """What training keeps of this observation (module docstring, "Stored form")."""
        return Observation.from_arrays(self.as_arrays())

    def inputs(self) -> dict[str, np.ndarray]:
        """The model inputs by name (`MODEL_INPUTS`), ready for onnxruntime."""
        return {name: getattr(self, name) for name in MODEL_INPUTS}

    @property
    def num_stages(self) -> int:
        return int(self.stage_x.shape[0])

    @property
    def num_jobs(self) -> int:
        return int(self.job_x.shape[0])

    def stage(self, row: int) -> Stage:
        """The `Stage` object of stage row `row`."""
        jobs, _, index = self._live()
        return jobs[self.stage_job[row]].stages[index[row]]

    def row_of(self, stage: Stage) -> int:
        """The stage row of `stage` (an incomplete stage of one of the observation's jobs)."""
        jobs, offsets, index = self._live()
        for j, job in enumerate(jobs):
            if job is stage.job:
                lo, hi = offsets[j], offsets[j + 1]
                found = np.flatnonzero(index[lo:hi] == stage.index)
                if found.size:
                    return lo + int(found[0])
        raise IdlegateError(f"stage {stage!r} is not a row of this observation")

    def _live(self) -> tuple[list[Job], list[int], np.ndarray]:
        """The cluster's objects: jobs, offsets, stage indexes (a stored observation has none)."""
        if self.jobs is None or self.offsets is None or self.stage_index is None:
            raise IdlegateError(
                "a stored observation has no cluster objects; decode a choice on the "
                "observation the featurizer returned"
            )
        return self.jobs, self.offsets, self.stage_index


@dataclass(slots=True)
class _Scan:
    """What `Featurizer._scan` found, besides the jobs' cached rows."""

    entries: list[JobRows]
    """The jobs' cache entries, in row order."""
    gangs: list[tuple[int, int, JobRows]]
    """(job row, first stage row, entry) of the jobs with a runnable gang stage."""
    local: list[tuple[int, int]]
    """(job row, free executors local to the job)."""
    changed: bool
    """Some job's rows (its incomplete stages) changed."""
    backlog: float
    """Σ remaining work of the jobs."""
    active: int
    """Jobs with a task to launch: fair's n in the WAIT mask."""


def _matrices(scan: _Scan, free: int) -> tuple[np.ndarray, np.ndarray]:
    """(stage_x, job_x) of the scanned jobs, with the gang stages that fit `free` runnable."""
    entries = scan.entries
    if entries:
        stage_x = np.concatenate([e.block for e in entries])
        job_x = np.concatenate([e.row for e in entries]).reshape(len(entries), -1)
    else:
        stage_x = np.zeros((0, NUM_STAGE_FEATURES), dtype=np.float32)
        job_x = np.zeros((0, NUM_JOB_FEATURES), dtype=np.float32)
    for j, start, entry in scan.gangs:  # gang stages are launchable only if all tasks fit
        fits = [(row, fresh) for row, stage, fresh in entry.gangs if launchable(stage, free)]
        for row, fresh in fits:
            stage_x[start + row, RUNNABLE] = 1
            stage_x[start + row, MAY_IDLE] = fresh
        job_x[j, LAUNCHABLE] = log1p(entry.launchable + len(fits))
    return stage_x, job_x


class Featurizer:
    """Computes `Observation`s from cluster views; keeps per-job caches between calls.

    One instance per simulation (or per operator); `reset()` drops the caches. Calling
    it on views of different clusters alternately is correct but slower.
    """

    def __init__(self, config: FeatureConfig | None = None) -> None:
        self.config = config or FeatureConfig()
        self._statics: weakref.WeakKeyDictionary[Dag, DagColumns] = weakref.WeakKeyDictionary()
        self._entries: dict[int, JobRows] = {}
        self._kept = 0
        """The jobs `_entries` kept when last pruned (`_scan`)."""
        self._structure: RowLayout | None = None
        self._levels: tuple[int, np.ndarray, np.ndarray] | None = None
        self._resources = ResourceColumns()
        self._window: tuple[int, int, float, float, float, float, float, float] | None = None
        """The log's length the window was computed at, then `_window_stats`' answer."""

    def reset(self) -> None:
        """Forget every cached job (start of a run)."""
        self._entries.clear()
        self._kept = 0
        self._resources.reset()
        self._structure = None
        self._window = None

    # -- the one function --------------------------------------------------------------

    def __call__(
        self,
        view: ClusterView,
        visible: list[Job] | None = None,
        rest: SystemTotals | None = None,
    ) -> Observation:
        """The features, graph and masks of `view` (see the module docstring).

        `visible` (a subset of `view.jobs` in arrival order) limits the rows to those
        jobs: the bounded observation (`idlegate.policy.bounded`). `rest` then gives
        the whole system's totals, so the global ``jobs`` and ``backlog`` columns and
        the WAIT mask keep describing the system rather than the subset. Both None (the
        default): every job, exactly as before.
        """
        jobs = list(view.jobs) if visible is None else visible
        k = view.num_executors
        free = view.free_executors
        scan = self._scan(view, jobs)
        struct = self._structure
        if scan.changed or struct is None or not struct.matches(scan.entries):
            struct = self._structure = RowLayout(scan.entries)
        stage_x, job_x = _matrices(scan, free)
        stage_mask = stage_x[:, RUNNABLE] != 0
        idle_mask = stage_x[:, MAY_IDLE] != 0
        job_x[:, _TIME_IN_SYSTEM] = np.log1p((view.now - struct.arrivals) / self.config.time_unit)
        job_x[:, _LOCAL_FREE] = 0.0
        for j, n in scan.local:
            job_x[j, _LOCAL_FREE] = n / k
        held = np.rint(job_x[:, _HELD] * k)  # exact: held / k in float32, k <= 10^5
        levels, level_x = self._cap_levels(k)
        wait_mask = _wait_mask(scan.active, job_x[:, LAUNCHABLE] > 0, held, k, rest)
        num_jobs, backlog = (len(jobs), scan.backlog) if rest is None else (rest.jobs, rest.backlog)
        global_x = self._global(view, k, free, num_jobs, backlog)
        if self.config.resource_features:  # appended after every other column
            entries = scan.entries
            stage_r, job_r, global_r, held_back = self._resources(
                view, jobs, [e.alive for e in entries], [(e.sig, e.stages_left) for e in entries]
            )
            stage_x = np.concatenate([stage_x, stage_r], axis=1)
            job_x = np.concatenate([job_x, job_r], axis=1)
            global_x[:, -global_r.shape[1] :] = global_r
            if free < k and held_back:
                wait_mask = np.array([True])
        return Observation(
            stage_x=stage_x,
            job_x=job_x,
            global_x=global_x,
            edge_src=struct.edge_src,
            edge_dst=struct.edge_dst,
            stage_job=struct.stage_job,
            stage_index=struct.stage_index,
            stage_mask=stage_mask,
            idle_mask=idle_mask,
            idle_rows=idle_mask.nonzero()[0],  # np.flatnonzero without its ravel
            cap_levels=levels,
            cap_x=level_x,
            cap_mask=held[:, None] < levels[None, :],
            wait_mask=wait_mask,
            jobs=jobs,
            offsets=struct.offsets,
        )

    def _scan(self, view: ClusterView, jobs: list[Job]) -> _Scan:
        """Bring every job's cached rows up to date; what the call needs besides them."""
        k = view.num_executors
        free_from, runnable = view.free_executors_from, view.runnable
        cache = self._entries
        scan = _Scan([], [], [], False, 0.0, 0)
        # free executors local to some job: once they are all found, stop asking
        unfound = view.free_executors - free_from(None)
        off = 0
        for j, job in enumerate(jobs):
            entry = cache.get(job.id)
            if entry is None or entry.job is not job:
                entry = cache[job.id] = JobRows(job, self._static(job.dag))
            # The job's signature (inlined: this loop runs for every job at every decision).
            # Every state change of a job moves at least one of these: a launch lowers
            # `unlaunched`, a finished task lowers `remaining_work` (durations are > 0), a
            # freed executor lowers `held`, an idle slot raises `idle_inserted` and shrinks
            # the runnable list (the view's: with queues, the stages the admission lets
            # start), its end grows the list again. The list is keyed by its stages, not
            # its length: a queue's view may show another stage of the same count when
            # nothing of the job moved (the admission's answer changed). The pool's size
            # is in it too: a queue's view sizes the pool to the
            # queue's entitlement, which moves as the other queues borrow and lend, and the
            # rows are figures over it (held / k).
            sig = (
                k,
                job.unlaunched,
                job.held,
                job.remaining_work,
                tuple(map(id, shown := runnable(job))),
                job.stages_left,
                job.cap,
                job.idle_inserted,
            )
            if sig[1] > 0:  # job.unlaunched: has_unlaunched_tasks(job)
                scan.active += 1
            if sig != entry.sig:
                if job.stages_left != entry.stages_left:
                    entry.rows()
                    scan.changed = True
                entry.refresh(k, self.config, shown)
                entry.sig = sig
            scan.entries.append(entry)
            if unfound > 0:
                n = free_from(job)
                if n:
                    scan.local.append((j, n))
                    unfound -= n
            if entry.gangs:
                scan.gangs.append((j, off, entry))
            scan.backlog += job.remaining_work
            off += len(entry.alive)
        if len(cache) > 2 * self._kept + 16:
            # (the jobs that left the system, not those this view leaves out: a queue's
            # view shows its own jobs, and the other queues' rows serve their next view;
            # dropped with the view's jobs, a flood's were built again at every question)
            self._entries = {i: e for i, e in cache.items() if e.job.finish is None}
            self._kept = len(self._entries)
        return scan

    # -- pieces ------------------------------------------------------------------------

    def _static(self, dag: Dag) -> DagColumns:
        static = self._statics.get(dag)
        if static is None:
            static = self._statics[dag] = DagColumns(dag, self.config)
        return static

    def _cap_levels(self, k: int) -> tuple[np.ndarray, np.ndarray]:
        cached = self._levels
        if cached is None or cached[0] != k:
            levels = cap_levels(k, self.config.max_cap_levels)
            cached = self._levels = (k, levels, (levels / k).astype(np.float32))
        return cached[1], cached[2]

    def _global(
        self, view: ClusterView, k: int, free: int, num_jobs: int, backlog: float
    ) -> np.ndarray:
        cfg = self.config
        unit = cfg.time_unit
        now = view.now
        log = view.arrival_log
        g = np.zeros((1, num_global_features(cfg)), dtype=np.float32)
        out = g[0]
        out[0] = free / k
        out[1] = log1p(num_jobs)
        out[2] = log1p(k)
        out[3] = log1p(max(backlog, 0.0) / k / unit)
        if log:
            count, first, last, mean_work, size_mean, size_std, size_max = self._window_stats(log)
            rate = (count - 1) / max(now - first, unit)
            out[4] = log1p(rate * unit)
            out[5] = min(rate * mean_work / k, cfg.load_clip)
            out[6] = size_mean
            out[7] = size_std
            out[8] = size_max
            out[9] = log1p(max(now - last, 0.0) / unit)
            if cfg.arrival_features:
                end = num_global_features(cfg, resources=False)
                out[NUM_GLOBAL_FEATURES:end] = arrival_history(log[-cfg.arrival_window :], now, cfg)
        return g

    def _window_stats(
        self, log: list[tuple[float, float]]
    ) -> tuple[int, float, float, float, float, float, float]:
        # the window only changes when a job arrives: cache it by the log's length
        cached = self._window
        if cached is not None and cached[0] == len(log):
            return cached[1:]
        window = np.asarray(log[-self.config.arrival_window :], dtype=np.float64)
        sizes = np.log1p(window[:, 1] / self.config.time_unit)
        stats = (
            len(window),
            float(window[0, 0]),
            float(window[-1, 0]),
            float(window[:, 1].mean()),
            float(sizes.mean()),
            float(sizes.std()),
            float(sizes.max()),
        )
        self._window = (len(log), *stats)
        return stats


def arrival_history(
    window: list[tuple[float, float]], now: float, cfg: FeatureConfig
) -> list[float]:
    """The arrival-history columns (`columns.ARRIVAL_FEATURES`) of a window of
    (time, work) arrivals, oldest first."""
    times, works = np.asarray(window, dtype=np.float64).T
    large = works >= cfg.large_ratio * works.min()
    recent = now - times <= cfg.recent_seconds
    big = np.flatnonzero(large)
    small = np.flatnonzero(~large)

    def since(rows: np.ndarray) -> float:
        last = times[rows[-1]] if rows.size else times[0]
        return log1p(max(now - last, 0.0) / cfg.time_unit)

    after = int((~large[big[-1] :]).sum()) if big.size else 0
    return [
        since(big),
        since(small),
        log1p(int((large & recent).sum())),
        log1p(int((~large & recent).sum())),
        log1p(after),
    ]


def _wait_mask(
    active: int,
    launchable: np.ndarray,
    held: np.ndarray,
    k: int,
    rest: SystemTotals | None = None,
) -> np.ndarray:
    """[1] bool: WAIT only when every job with a launchable stage holds fair's share.

    WAIT may then decline to give a job more than fair would, never hold one below it:
    deliberate waiting below the share is the idle head's (bounded) business. This keeps
    a policy from starving jobs on workloads unlike its training set. `active` counts
    the observed jobs with a task to launch (fair's n). With `rest` (a bounded
    observation of a subset of the jobs) the share counts the whole system's jobs, and
    a launchable job outside the subset (it holds no executor, so it is below any
    share) rules WAIT out, as it would if it were seen.
    """
    if rest is not None:
        if rest.hidden_below_share:
            return np.array([False])
        active = rest.active
    if not active or not launchable.any():
        return np.array([False])
    return np.array([bool((held[launchable] >= fair_share(k, active)).all())])


def compute_features(view: ClusterView, config: FeatureConfig | None = None) -> Observation:
    """One-off features of `view` (no cache); policies keep a `Featurizer` instead."""
    return Featurizer(config)(view)
