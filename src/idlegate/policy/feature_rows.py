"""The featurizer's per-job cache: each job's stage rows and job row, and the graph layout.

A TPC-H episode asks for features 10–40k times, so `policy.features.Featurizer` keeps
per job its stage block (mask columns included) and its job row (`JobRows`),
recomputing them only when the job's state changed (tasks launched or finished,
executors held, runnable set, cap or idle time), per DAG the columns that never change
(`DagColumns`), and the graph arrays of the observed jobs (`RowLayout`), rebuilt only
when a job arrived or left or a stage completed. The columns are `policy.columns`'.
"""

from __future__ import annotations

from math import log1p
from typing import Any, Final

import numpy as np

from idlegate.policy.columns import (
    JOB_FEATURES,
    NUM_JOB_FEATURES,
    NUM_STAGE_FEATURES,
    STAGE_FEATURES,
    FeatureConfig,
)
from idlegate.sim.dag import Dag
from idlegate.sim.protocol import Job, Stage

STAGE_COLUMN: Final = {name: i for i, name in enumerate(STAGE_FEATURES)}
"""Index of each stage feature in `stage_x`."""
JOB_COLUMN: Final = {name: i for i, name in enumerate(JOB_FEATURES)}
"""Index of each job feature in `job_x`."""
RUNNABLE, MAY_IDLE = STAGE_COLUMN["runnable"], STAGE_COLUMN["may_idle"]
LAUNCHABLE = JOB_COLUMN["launchable"]
DYNAMIC_COLUMNS: Final = [
    STAGE_COLUMN[name]
    for name in ("remaining_tasks", "executors", "remaining_work", "delayed", "idling", "progress")
]
"""Stage columns that change with the state (the rest come from the DAG)."""


class DagColumns:
    """What never changes for a DAG: its static stage columns and its edges."""

    __slots__ = ("edge_dst", "edge_src", "n", "template")

    def __init__(self, dag: Dag, config: FeatureConfig) -> None:
        n = dag.num_stages
        unit = config.time_unit
        self.n = n
        template = np.zeros((n, NUM_STAGE_FEATURES), dtype=np.float32)
        template[:, STAGE_COLUMN["task_duration"]] = np.log1p(np.asarray(dag.durations) / unit)
        if config.cp_features:
            template[:, STAGE_COLUMN["bottom_level"]] = np.log1p(
                np.asarray(dag.bottom_levels) / unit
            )
        template[:, STAGE_COLUMN["gang"]] = np.asarray(dag.gang, dtype=np.float32)
        # a stage not started yet (every stage whose parents are not all done): the values
        # `JobRows.refresh` would compute, by the same arithmetic, so it skips such stages
        template[:, DYNAMIC_COLUMNS] = [
            (log1p(n), 0.0, log1p(n * d * (1.0 / unit)), 0.0, 0.0, 0.0)
            for n, d in zip(dag.tasks, dag.durations, strict=True)
        ]
        self.template = template
        # child -> parent: the direction Decima's messages flow
        self.edge_src = np.array([i for i, ps in enumerate(dag.parents) for _ in ps], np.int64)
        self.edge_dst = np.array([p for ps in dag.parents for p in ps], np.int64)


class JobRows:
    """A job's cached rows (its incomplete stages), valid while `sig` matches its state."""

    __slots__ = (
        "alive",
        "block",
        "edge_dst",
        "edge_src",
        "frontier",
        "gangs",
        "job",
        "launchable",
        "pos",
        "row",
        "sig",
        "stages_left",
        "static",
    )

    def __init__(self, job: Job, static: DagColumns) -> None:
        self.job = job
        self.static = static
        self.sig: tuple[Any, ...] | None = None
        self.stages_left = -1
        self.alive = np.zeros(0, dtype=np.int64)
        """Stage indices of the incomplete stages, in index order (the job's rows)."""
        self.pos: list[int] = []
        """Stage index -> local row (-1 for a complete stage)."""
        self.frontier: list[tuple[int, Stage]] = []
        """(local row, stage) of the incomplete stages whose parents are all done: the only
        rows whose state columns may differ from the template's (a stage starts only after
        its parents finish), so `refresh` costs what the frontier holds, not the DAG."""
        self.edge_src = self.edge_dst = self.alive
        self.block = static.template[:0]
        self.row = np.zeros(NUM_JOB_FEATURES, dtype=np.float32)
        self.launchable = 0
        """Runnable non-gang stages (launchable whatever the free executors)."""
        self.gangs: list[tuple[int, Stage, bool]] = []
        """Runnable stages whose launchability depends on what is free at the decision,
        gang stages and stages with a demand on the pool's resources, as (local row,
        stage, may idle): launchable if they fit (`launchable`)."""

    def rows(self) -> None:
        """Recompute which stages are rows (the incomplete ones) and the edges among them.

        A complete stage is dropped: its parents are complete too (a stage starts only
        after its parents finish), so no incomplete stage ever receives its messages;
        the incomplete stages are closed under "child of", and their embeddings do not
        change. Edges are kept when the parent (the receiver) is incomplete.
        """
        job, static = self.job, self.static
        alive = [s.index for s in job.stages if s.finished < s.tasks]
        pos = [-1] * static.n
        for row, i in enumerate(alive):
            pos[i] = row
        pos_a = np.asarray(pos, dtype=np.int64)
        keep = pos_a[static.edge_dst] >= 0
        self.alive = np.asarray(alive, dtype=np.int64)
        self.pos = pos
        self.edge_src = pos_a[static.edge_src[keep]]
        self.edge_dst = pos_a[static.edge_dst[keep]]
        self.block = static.template[self.alive]  # a copy: fancy indexing
        self.stages_left = job.stages_left
        # parents_left changes only when a stage completes, which also calls rows()
        stages = job.stages
        self.frontier = [(r, stages[i]) for r, i in enumerate(alive) if not stages[i].parents_left]

    def refresh(self, k: int, cfg: FeatureConfig, runnable: list[Stage]) -> None:
        """Recompute a job's stage block and job row from its current state, its runnable
        stages those its view shows (`runnable`)."""
        job = self.job
        unit = cfg.time_unit
        inv_k = 1.0 / k
        inv_unit = 1.0 / unit
        # plain Python per stage: for the ~10 stages of a job this beats a dozen numpy calls,
        # and a cell at a time beats one fancy-indexed assignment of the rows (at each
        # decision of a learned candidate's replay: 1 µs a row against 6): the same cells
        block = self.block
        a, b, c, d, e, f = DYNAMIC_COLUMNS
        for row, s in self.frontier:
            tasks, launched, finished = s.tasks, s.launched, s.finished
            cells = block[row]
            cells[a] = log1p(tasks - launched)
            cells[b] = s.executors * inv_k
            cells[c] = log1p((tasks - finished) * s.duration * inv_unit)
            cells[d] = s.delayed
            cells[e] = s.idle_until is not None
            cells[f] = finished / tasks
        # The runnable list is part of the signature, so the mask columns can be cached
        # too; only gang stages and stages with a demand on the pool's resources depend
        # on what is free, and they are set per call.
        block[:, RUNNABLE] = 0
        block[:, MAY_IDLE] = 0
        pos = self.pos
        gangs = []
        launchable = 0
        for s in runnable:
            row = pos[s.index]
            fresh = not s.launched and not s.delayed
            if s.gang or s.need is not None:
                gangs.append((row, s, fresh))
            else:
                block[row, RUNNABLE] = 1
                block[row, MAY_IDLE] = fresh
                launchable += 1
        self.gangs = gangs
        self.launchable = launchable

        out = self.row
        dag = job.dag
        if cfg.cp_features:
            rcp = job.remaining_cp
            out[JOB_COLUMN["remaining_cp"]] = log1p(rcp / unit)
            out[JOB_COLUMN["average_width"]] = log1p(dag.average_width)
            out[JOB_COLUMN["remaining_width"]] = log1p(job.remaining_work / rcp) if rcp > 0 else 0.0
        out[JOB_COLUMN["remaining_work"]] = log1p(max(job.remaining_work, 0.0) / unit)
        out[JOB_COLUMN["total_work"]] = log1p(dag.total_work / unit)
        out[JOB_COLUMN["held"]] = job.held / k
        out[JOB_COLUMN["cap"]] = job.cap / k
        out[JOB_COLUMN["unlaunched"]] = log1p(job.unlaunched)
        out[JOB_COLUMN["idle_inserted"]] = log1p(job.idle_inserted / unit)
        out[LAUNCHABLE] = log1p(launchable)


class RowLayout:
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

    def __init__(self, entries: list[JobRows]) -> None:
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

    def matches(self, entries: list[JobRows]) -> bool:
        mine = self.entries
        return len(mine) == len(entries) and all(a is b for a, b in zip(mine, entries, strict=True))
