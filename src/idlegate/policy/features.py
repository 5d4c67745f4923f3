"""Features: the one function that turns a cluster view into the learned policy's input.

Training (torch) and inference (ONNX) both call `Featurizer(config)(view)`, so what is
trained is what runs. The result, an `Observation`, holds float32 feature matrices, the
graph structure, the action masks and the way back from a row to its `Stage`.

Rows: the incomplete stages of every job in the system (finished < tasks), jobs in
`view.jobs` order (arrival order), each job's stages in DAG index order. Complete
stages are left out: a complete stage's parents are complete too, so it would only
send messages to other complete stages and never change an incomplete stage's
embedding; dropping them shrinks the graph by about a third. Job rows follow
`view.jobs`.

Normalisation: counts and times span orders of magnitude (tasks 1–10⁵, seconds
0.1–10⁵), so they enter as ``log1p(x)``, times first divided by ``time_unit``; executor
counts enter as fractions of the cluster size K; flags are 0/1. Columns marked [CP]
are the idle-slot papers' critical-path/average-width features: with
``FeatureConfig(cp_features=False)`` they are zero (the ablation). Zeroing rather than
dropping keeps one input width for every model; a zero input column is exactly a
dropped one (its first-layer weights never affect the output nor get a gradient).

Stage features (`stage_x`, one row per stage):

=================  ======================================================================
remaining_tasks    log1p(tasks − launched): tasks not launched yet
executors          stage.executors / K: executors of its job working on it now
task_duration      log1p(duration / time_unit): the mean task duration (the estimate)
remaining_work     log1p((tasks − finished) · duration / time_unit)
bottom_level       log1p(bottom_level / time_unit): longest chain to an exit [CP]
runnable           1 if a decision may name it now (the stage mask)
delayed            1 if it already had its one idle slot
may_idle           1 if a decision may idle it now (the idle mask)
idling             1 while it is inside its idle slot
gang               1 for a gang stage (all tasks start together)
progress           finished / tasks
=================  ======================================================================

Job features (`job_x`, one row per job in the system):

=================  ======================================================================
remaining_cp       log1p(remaining_cp / time_unit): least time left on ∞ executors [CP]
average_width      log1p(total_work / critical_path) [CP]
remaining_width    log1p(remaining_work / remaining_cp), 0 when done [CP]
remaining_work     log1p(remaining_work / time_unit)
total_work         log1p(total_work / time_unit)
held               held / K: executors working for the job now
cap                cap / K: parallelism cap of the latest decision (0: none yet)
time_in_system     log1p((now − arrival) / time_unit)
unlaunched         log1p(tasks of the job not launched yet)
local_free         free_executors_from(job) / K: free executors local to the job
launchable         log1p(number of the job's stages in the stage mask)
idle_inserted      log1p(idle seconds inserted so far / time_unit)
=================  ======================================================================

Global features (`global_x`, shape [1, F]); the window is the last ``arrival_window``
entries of `view.arrival_log`, n of them, the oldest at t₁:

=================  ======================================================================
free_executors     free / K
jobs               log1p(jobs in system)
executors          log1p(K)
backlog            log1p(Σ remaining_work / K / time_unit): seconds of queued work
arrival_rate       log1p(λ · time_unit), λ = (n − 1) / max(now − t₁, time_unit)
offered_load       min(λ · mean work in window / K, load_clip): the recent offered load
size_mean          mean of log1p(work / time_unit) over the window
size_std           standard deviation of the same
size_max           maximum of the same
since_arrival      log1p((now − latest arrival) / time_unit)
=================  ======================================================================

Graph: `edge_src[e]` is a child's row and `edge_dst[e]` its parent's row (messages go
child → parent, as in Decima; edges into complete stages are left out with them);
`stage_job[i]` is the job row of stage row i and `stage_index[i]` its index in the
job's DAG, so `Observation.stage(i)` is `jobs[stage_job[i]].stages[stage_index[i]]`.

Masks: `stage_mask[i]` — stage i is in ``view.runnable_stages()`` (its job's runnable
list; a gang stage only if all its tasks fit the free executors). `idle_mask[i]` —
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
fair-imitating policy starve a workload unlike its training set (docs/results.md, "The
learned policies").

Schema history: 2 added `wait_mask` (the WAIT action); 1 was the first release.

Speed: a TPC-H episode asks 10–40k times, so the featurizer caches per job its stage
block (mask columns included) and its job row, recomputing them only when the job's
state changed (tasks launched or finished, executors held, runnable set, cap or idle
time), and the graph arrays only when a job arrived or left or a stage completed. Per
call the work is a short O(jobs) Python loop plus a dozen vectorised numpy operations;
nothing loops over tasks, and stages only of the jobs that changed. About 0.03 ms per
call with 20 jobs in the system when nothing changed, 0.04 ms when one job did
(`benchmarks/inference.py` reports it in context).
"""

# Over 600 lines on purpose: about a third is the feature schema above, and it stays next
# to the one Featurizer that fills those columns, so that the documented schema, training
# and inference cannot drift apart (see the design's "features are computed once").

from __future__ import annotations

import weakref
from dataclasses import asdict, dataclass, fields
from math import log1p
from typing import Any, Final, NamedTuple

import numpy as np

from idlegate.errors import IdlegateError, reject_unknown
from idlegate.policy.heuristics import fair_share
from idlegate.sim.dag import Dag
from idlegate.sim.protocol import ClusterView, Job, Stage

FEATURE_SCHEMA_VERSION: Final = 2
"""Bump whenever a column, its order or its normalisation changes (models record it)."""

STAGE_FEATURES: Final = (
    "remaining_tasks",
    "executors",
    "task_duration",
    "remaining_work",
    "bottom_level",
    "runnable",
    "delayed",
    "may_idle",
    "idling",
    "gang",
    "progress",
)
JOB_FEATURES: Final = (
    "remaining_cp",
    "average_width",
    "remaining_width",
    "remaining_work",
    "total_work",
    "held",
    "cap",
    "time_in_system",
    "unlaunched",
    "local_free",
    "launchable",
    "idle_inserted",
)
GLOBAL_FEATURES: Final = (
    "free_executors",
    "jobs",
    "executors",
    "backlog",
    "arrival_rate",
    "offered_load",
    "size_mean",
    "size_std",
    "size_max",
    "since_arrival",
)
CP_STAGE_FEATURES: Final = ("bottom_level",)
CP_JOB_FEATURES: Final = ("remaining_cp", "average_width", "remaining_width")

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

_S = {name: i for i, name in enumerate(STAGE_FEATURES)}
_J = {name: i for i, name in enumerate(JOB_FEATURES)}
_RUNNABLE, _MAY_IDLE = _S["runnable"], _S["may_idle"]
_TIME_IN_SYSTEM, _LOCAL_FREE, _LAUNCHABLE, _HELD = (
    _J["time_in_system"],
    _J["local_free"],
    _J["launchable"],
    _J["held"],
)
_DYNAMIC_COLUMNS = [
    _S[name]
    for name in (
        "remaining_tasks",
        "executors",
        "remaining_work",
        "delayed",
        "idling",
        "progress",
    )
]
"""Stage columns that change with the state (the rest come from the DAG)."""
NUM_STAGE_FEATURES: Final = len(STAGE_FEATURES)
NUM_JOB_FEATURES: Final = len(JOB_FEATURES)
NUM_GLOBAL_FEATURES: Final = len(GLOBAL_FEATURES)


@dataclass(frozen=True)
class FeatureConfig:
    """How features are computed; stored with every model so inference matches training."""

    cp_features: bool = True
    """False: zero the [CP] columns (the papers' ablation without CP/width features)."""
    time_unit: float = 1.0
    """Seconds per unit before log1p: durations and works are log1p(seconds / time_unit)."""
    arrival_window: int = 20
    """How many recent arrivals the arrival-rate and job-size estimates use."""
    max_cap_levels: int = 64
    """Most cap levels offered; clusters with more executors get geometric levels."""
    load_clip: float = 4.0
    """Upper clip of the offered-load estimate (bursts at t=0 would give infinity)."""

    def __post_init__(self) -> None:
        if not isinstance(self.cp_features, bool):
            raise IdlegateError(f"cp_features must be true or false, got {self.cp_features!r}")
        if not self.time_unit > 0:
            raise IdlegateError(f"time_unit must be > 0 seconds, got {self.time_unit!r}")
        if not (isinstance(self.arrival_window, int) and self.arrival_window >= 2):
            raise IdlegateError(
                f"arrival_window must be a whole number >= 2, got {self.arrival_window!r}"
            )
        if not (isinstance(self.max_cap_levels, int) and self.max_cap_levels >= 2):
            raise IdlegateError(
                f"max_cap_levels must be a whole number >= 2, got {self.max_cap_levels!r}"
            )
        if not self.load_clip > 0:
            raise IdlegateError(f"load_clip must be > 0, got {self.load_clip!r}")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> FeatureConfig:
        reject_unknown(data, (f.name for f in fields(cls)), "the featurizer", noun="option")
        return cls(**data)


def cap_levels(num_executors: int, max_levels: int) -> np.ndarray:
    """The parallelism caps a decision may choose from: 1..K, or geometric levels ending at K."""
    if num_executors <= max_levels:
        return np.arange(1, num_executors + 1, dtype=np.int64)
    levels = np.unique(np.rint(np.geomspace(1, num_executors, max_levels)).astype(np.int64))
    levels[-1] = num_executors
    return levels


class Observation:
    """The features of one decision point. Arrays are float32 (features), int64, bool (masks).

    Shapes: N stages, J jobs, E edges, L cap levels.
    """

    __slots__ = (
        "cap_levels",
        "cap_mask",
        "cap_x",
        "edge_dst",
        "edge_src",
        "global_x",
        "idle_mask",
        "idle_rows",
        "job_x",
        "jobs",
        "num_executors",
        "offsets",
        "stage_index",
        "stage_job",
        "stage_mask",
        "stage_x",
        "wait_mask",
    )

    def __init__(self, **values: Any) -> None:
        for k, v in values.items():
            setattr(self, k, v)

    stage_x: np.ndarray
    """[N, NUM_STAGE_FEATURES] float32."""
    job_x: np.ndarray
    """[J, NUM_JOB_FEATURES] float32."""
    global_x: np.ndarray
    """[1, NUM_GLOBAL_FEATURES] float32."""
    edge_src: np.ndarray
    """[E] int64: child rows."""
    edge_dst: np.ndarray
    """[E] int64: parent rows."""
    stage_job: np.ndarray
    """[N] int64: job row of each stage row."""
    stage_index: np.ndarray
    """[N] int64: stage index (within its job's DAG) of each stage row."""
    stage_mask: np.ndarray
    """[N] bool: stages a decision may name."""
    idle_mask: np.ndarray
    """[N] bool: stages that may idle."""
    idle_rows: np.ndarray
    """[M] int64: the rows where `idle_mask` is true, ascending (the idle head's rows)."""
    cap_levels: np.ndarray
    """[L] int64: the caps the levels stand for."""
    cap_x: np.ndarray
    """[L] float32: cap_levels / K."""
    cap_mask: np.ndarray
    """[J, L] bool: cap level above the executors the job holds."""
    wait_mask: np.ndarray
    """[1] bool: the decision may be WAIT (every launchable job holds its fair share)."""
    jobs: list[Job]
    """Job of each job row (the view's jobs at the time of the call)."""
    offsets: list[int]
    """First stage row of each job, plus N at the end."""
    num_executors: int

    @property
    def num_stages(self) -> int:
        return int(self.stage_x.shape[0])

    @property
    def num_jobs(self) -> int:
        return len(self.jobs)

    def stage(self, row: int) -> Stage:
        """The `Stage` object of stage row `row`."""
        return self.jobs[self.stage_job[row]].stages[self.stage_index[row]]

    @property
    def stages(self) -> list[Stage]:
        """Every stage row's `Stage` (built on demand; decisions use `stage(row)`)."""
        return [self.stage(row) for row in range(self.num_stages)]

    def row_of(self, stage: Stage) -> int:
        """The stage row of `stage` (an incomplete stage of one of the observation's jobs)."""
        for j, job in enumerate(self.jobs):
            if job is stage.job:
                lo, hi = self.offsets[j], self.offsets[j + 1]
                found = np.flatnonzero(self.stage_index[lo:hi] == stage.index)
                if found.size:
                    return lo + int(found[0])
        raise IdlegateError(f"stage {stage!r} is not a row of this observation")

    def inputs(self) -> dict[str, np.ndarray]:
        """The model inputs by name (`MODEL_INPUTS`), ready for onnxruntime."""
        return {name: getattr(self, name) for name in MODEL_INPUTS}


# ---------------------------------------------------------------------------------------
# per-DAG constants and per-job cached blocks


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


class _DagStatic:
    """What never changes for a DAG: its static stage columns and its edges."""

    __slots__ = ("edge_dst", "edge_src", "n", "template")

    def __init__(self, dag: Dag, config: FeatureConfig) -> None:
        n = dag.num_stages
        unit = config.time_unit
        self.n = n
        template = np.zeros((n, NUM_STAGE_FEATURES), dtype=np.float32)
        template[:, _S["task_duration"]] = np.log1p(np.asarray(dag.durations) / unit)
        if config.cp_features:
            template[:, _S["bottom_level"]] = np.log1p(np.asarray(dag.bottom_levels) / unit)
        template[:, _S["gang"]] = np.asarray(dag.gang, dtype=np.float32)
        self.template = template
        # child -> parent: the direction Decima's messages flow
        self.edge_src = np.array([i for i, ps in enumerate(dag.parents) for _ in ps], np.int64)
        self.edge_dst = np.array([p for ps in dag.parents for p in ps], np.int64)


class _JobEntry:
    """A job's cached rows (its incomplete stages), valid while `sig` matches its state."""

    __slots__ = (
        "alive",
        "block",
        "edge_dst",
        "edge_src",
        "gangs",
        "job",
        "launchable",
        "pos",
        "row",
        "sig",
        "stages_left",
        "static",
    )

    def __init__(self, job: Job, static: _DagStatic) -> None:
        self.job = job
        self.static = static
        self.sig: tuple[Any, ...] | None = None
        self.stages_left = -1
        self.alive = np.zeros(0, dtype=np.int64)
        """Stage indices of the incomplete stages, in index order (the job's rows)."""
        self.pos: list[int] = []
        """Stage index -> local row (-1 for a complete stage)."""
        self.edge_src = self.edge_dst = self.alive
        self.block = static.template[:0]
        self.row = np.zeros(NUM_JOB_FEATURES, dtype=np.float32)
        self.launchable = 0
        """Runnable non-gang stages (launchable whatever the free executors)."""
        self.gangs: list[tuple[int, int, bool]] = []
        """Runnable gang stages as (local row, tasks, may idle): launchable if tasks fit."""


class _Structure:
    """Graph arrays for one ordered set of jobs and their incomplete stages."""

    __slots__ = (
        "arrivals",
        "edge_dst",
        "edge_src",
        "entries",
        "offsets",
        "stage_index",
        "stage_job",
    )

    def __init__(self, entries: list[_JobEntry]) -> None:
        self.entries = entries
        sizes = [len(e.alive) for e in entries]
        offsets = [0]
        for n in sizes:
            offsets.append(offsets[-1] + n)
        self.offsets = offsets
        if entries:
            # local edge indices plus each edge's job offset, in a few array operations
            shift = np.repeat(offsets[:-1], [len(e.edge_src) for e in entries])
            self.edge_src = np.concatenate([e.edge_src for e in entries]) + shift
            self.edge_dst = np.concatenate([e.edge_dst for e in entries]) + shift
            self.stage_index = np.concatenate([e.alive for e in entries])
        else:
            self.edge_src = self.edge_dst = self.stage_index = np.zeros(0, dtype=np.int64)
        self.stage_job = np.repeat(np.arange(len(entries), dtype=np.int64), sizes)
        self.arrivals = np.array([e.job.arrival for e in entries], dtype=np.float64)

    def matches(self, entries: list[_JobEntry]) -> bool:
        mine = self.entries
        return len(mine) == len(entries) and all(a is b for a, b in zip(mine, entries, strict=True))


# ---------------------------------------------------------------------------------------


class Featurizer:
    """Computes `Observation`s from cluster views; keeps per-job caches between calls.

    One instance per simulation (or per operator); `reset()` drops the caches. Calling
    it on views of different clusters alternately is correct but slower.
    """

    def __init__(self, config: FeatureConfig | None = None) -> None:
        self.config = config or FeatureConfig()
        self._statics: weakref.WeakKeyDictionary[Dag, _DagStatic] = weakref.WeakKeyDictionary()
        self._entries: dict[int, _JobEntry] = {}
        self._structure: _Structure | None = None
        self._levels: tuple[int, np.ndarray, np.ndarray] | None = None
        self._window: tuple[int, float, float, float, float, float, float] | None = None

    def reset(self) -> None:
        """Forget every cached job (start of a run)."""
        self._entries.clear()
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
        free_from = view.free_executors_from
        cache = self._entries
        entries: list[_JobEntry] = []
        gangs: list[tuple[int, int, _JobEntry]] = []
        local: list[tuple[int, int]] = []
        # free executors local to some job: once they are all found, stop asking
        unfound = free - free_from(None)
        changed = False
        backlog = 0.0
        active = 0  # jobs with a task to launch: fair's n in the WAIT mask
        off = 0
        for j, job in enumerate(jobs):
            entry = cache.get(job.id)
            if entry is None or entry.job is not job:
                entry = cache[job.id] = _JobEntry(job, self._static(job.dag))
            # The job's signature (inlined: this loop runs for every job at every decision).
            # Every state change of a job moves at least one of these: a launch lowers
            # `unlaunched`, a finished task lowers `remaining_work` (durations are > 0), a
            # freed executor lowers `held`, an idle slot raises `idle_inserted` and shrinks
            # the runnable list, its end grows the list again. Masks never come from the
            # cache.
            sig = (
                job.unlaunched,
                job.held,
                job.remaining_work,
                len(job.runnable),
                job.stages_left,
                job.cap,
                job.idle_inserted,
            )
            if sig[0] > 0:  # job.unlaunched: has_unlaunched_tasks(job)
                active += 1
            if sig != entry.sig:
                if job.stages_left != entry.stages_left:
                    self._rows(entry)
                    changed = True
                self._refresh(entry, k)
                entry.sig = sig
            entries.append(entry)
            if unfound > 0:
                n = free_from(job)
                if n:
                    local.append((j, n))
                    unfound -= n
            if entry.gangs:
                gangs.append((j, off, entry))
            backlog += job.remaining_work
            off += len(entry.alive)
        if len(cache) > 2 * len(jobs) + 16:
            keep = {job.id for job in jobs}
            self._entries = {i: e for i, e in cache.items() if i in keep}
        struct = self._structure
        if changed or struct is None or not struct.matches(entries):
            struct = self._structure = _Structure(entries)

        if entries:
            stage_x = np.concatenate([e.block for e in entries])
            job_x = np.concatenate([e.row for e in entries]).reshape(len(entries), -1)
        else:
            stage_x = np.zeros((0, NUM_STAGE_FEATURES), dtype=np.float32)
            job_x = np.zeros((0, NUM_JOB_FEATURES), dtype=np.float32)
        for j, start, entry in gangs:  # gang stages are launchable only if all tasks fit
            fits = [(row, fresh) for row, tasks, fresh in entry.gangs if tasks <= free]
            for row, fresh in fits:
                stage_x[start + row, _RUNNABLE] = 1
                stage_x[start + row, _MAY_IDLE] = fresh
            job_x[j, _LAUNCHABLE] = log1p(entry.launchable + len(fits))
        stage_mask = stage_x[:, _RUNNABLE] != 0
        idle_mask = stage_x[:, _MAY_IDLE] != 0
        job_x[:, _TIME_IN_SYSTEM] = np.log1p((view.now - struct.arrivals) / self.config.time_unit)
        job_x[:, _LOCAL_FREE] = 0.0
        for j, n in local:
            job_x[j, _LOCAL_FREE] = n / k
        held = np.rint(job_x[:, _HELD] * k)  # exact: held / k in float32, k <= 10^5
        levels, level_x = self._cap_levels(k)
        if rest is None:
            wait_mask = _wait_mask(active, job_x[:, _LAUNCHABLE] > 0, held, k)
        else:
            backlog = rest.backlog
            wait_mask = _wait_mask(active, job_x[:, _LAUNCHABLE] > 0, held, k, rest)
        return Observation(
            stage_x=stage_x,
            job_x=job_x,
            global_x=self._global(view, k, free, len(jobs) if rest is None else rest.jobs, backlog),
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
            num_executors=k,
        )

    # -- pieces ------------------------------------------------------------------------

    def _static(self, dag: Dag) -> _DagStatic:
        static = self._statics.get(dag)
        if static is None:
            static = self._statics[dag] = _DagStatic(dag, self.config)
        return static

    @staticmethod
    def _rows(entry: _JobEntry) -> None:
        """Recompute which stages are rows (the incomplete ones) and the edges among them.

        A complete stage is dropped: its parents are complete too (a stage starts only
        after its parents finish), so no incomplete stage ever receives its messages;
        the incomplete stages are closed under "child of", and their embeddings do not
        change. Edges are kept when the parent (the receiver) is incomplete.
        """
        job, static = entry.job, entry.static
        alive = [s.index for s in job.stages if s.finished < s.tasks]
        pos = [-1] * static.n
        for row, i in enumerate(alive):
            pos[i] = row
        pos_a = np.asarray(pos, dtype=np.int64)
        keep = pos_a[static.edge_dst] >= 0
        entry.alive = np.asarray(alive, dtype=np.int64)
        entry.pos = pos
        entry.edge_src = pos_a[static.edge_src[keep]]
        entry.edge_dst = pos_a[static.edge_dst[keep]]
        entry.block = static.template[entry.alive]  # a copy: fancy indexing
        entry.stages_left = job.stages_left

    def _refresh(self, entry: _JobEntry, k: int) -> None:
        """Recompute a job's stage block and job row from its current state."""
        job, cfg = entry.job, self.config
        unit = cfg.time_unit
        inv_k = 1.0 / k
        inv_unit = 1.0 / unit
        stages = job.stages
        # plain Python per stage: for the ~10 stages of a job this beats a dozen numpy calls
        dynamic = []
        for i in entry.alive.tolist():
            s = stages[i]
            tasks, launched, finished = s.tasks, s.launched, s.finished
            dynamic.append(
                (
                    log1p(tasks - launched),
                    s.executors * inv_k,
                    log1p((tasks - finished) * s.duration * inv_unit),
                    s.delayed,
                    s.idle_until is not None,
                    finished / tasks,
                )
            )
        block = entry.block
        if dynamic:
            block[:, _DYNAMIC_COLUMNS] = dynamic
        # The runnable list is part of the signature, so the mask columns can be cached
        # too; only gang stages depend on the free executors, and they are set per call.
        block[:, _RUNNABLE] = 0
        block[:, _MAY_IDLE] = 0
        pos = entry.pos
        gangs = []
        launchable = 0
        for s in job.runnable:
            row = pos[s.index]
            fresh = not s.launched and not s.delayed
            if s.gang:
                gangs.append((row, s.tasks, fresh))
            else:
                block[row, _RUNNABLE] = 1
                block[row, _MAY_IDLE] = fresh
                launchable += 1
        entry.gangs = gangs
        entry.launchable = launchable

        row = entry.row
        dag = job.dag
        if cfg.cp_features:
            rcp = job.remaining_cp
            row[_J["remaining_cp"]] = log1p(rcp / unit)
            row[_J["average_width"]] = log1p(dag.average_width)
            row[_J["remaining_width"]] = log1p(job.remaining_work / rcp) if rcp > 0 else 0.0
        row[_J["remaining_work"]] = log1p(max(job.remaining_work, 0.0) / unit)
        row[_J["total_work"]] = log1p(dag.total_work / unit)
        row[_J["held"]] = job.held / k
        row[_J["cap"]] = job.cap / k
        row[_J["unlaunched"]] = log1p(job.unlaunched)
        row[_J["idle_inserted"]] = log1p(job.idle_inserted / unit)
        row[_LAUNCHABLE] = log1p(launchable)

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
        g = np.zeros((1, NUM_GLOBAL_FEATURES), dtype=np.float32)
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
        return g

    def _window_stats(
        self, log: list[tuple[float, float]]
    ) -> tuple[int, float, float, float, float, float, float]:
        # the window only changes when a job arrives: cache it by the log's length
        cached = self._window
        if cached is not None and cached[0] == len(log):
            return cached[1:]  # type: ignore[return-value]
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
