"""Alibaba's 2018 batch trace in Decima's numpy layout: load a folder of jobs into DAGs.

The trace (cluster-trace-v2018, `batch_task`, as converted by spark-sched-sim; see
``../shared/data/README.md``) is data, never part of the repository: the user gives its
directory (`--alibaba-dir` or the `IDLEGATE_ALIBABA_DIR` environment variable). Job N is
two plain float arrays (read with ``allow_pickle=False``: a data file never runs code):

* ``adj_mat_N.npy``, S × S: ``adj[i, j] = 1`` means stage j depends on stage i;
* ``ins_durN.npy``, S × 2: per stage ``[instance_num, duration]``, the number of task
  instances and their duration in whole seconds (0 where the trace recorded under a
  second).

A loaded job becomes a `Dag` of stages ``s0``, ``s1``, … (the trace's stage order) whose
``taskDurationSeconds`` is the trace's duration, at least 1 s (a recorded 0 is read as
1 s, as spark-sched-sim reads it); how real tasks vary around it is the workload's
business (`sim.workloads.alibaba`). A folder is read once per process and cached
(`open_alibaba_trace`); its 1,832 jobs load in well under a second.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from idlegate.errors import IdlegateError, SpecError
from idlegate.sim.dag import Dag
from idlegate.sim.datadirs import default_data_dir, resolve_data_dir
from idlegate.sim.spec import (
    MAX_STAGES,
    MAX_TASK_SECONDS,
    MAX_TASKS_PER_STAGE,
    StageSpec,
    WorkflowSpec,
)

ENV_VAR = "IDLEGATE_ALIBABA_DIR"
"""Environment variable naming the trace directory (the one holding ``adj_mat_0.npy``, …)."""
MIN_TASK_SECONDS = 1.0
"""A stage's duration is at least this: the trace records durations under a second as 0."""

_HINT = "pass --alibaba-dir or set IDLEGATE_ALIBABA_DIR"
_ADJ_RE = re.compile(r"^adj_mat_(\d+)\.npy$")
_DUR_RE = re.compile(r"^ins_dur(\d+)\.npy$")


@dataclass(frozen=True, eq=False)
class AlibabaJob:
    """One job of the trace, ready for the simulator."""

    number: int
    """N of its files (``adj_mat_N.npy``)."""
    dag: Dag

    @property
    def name(self) -> str:
        """E.g. ``alibaba-17``."""
        return f"alibaba-{self.number}"

    @property
    def total_tasks(self) -> int:
        return sum(self.dag.tasks)


# ---------------------------------------------------------------------------------------
# locating the trace


def default_alibaba_dir() -> Path | None:
    """`$IDLEGATE_ALIBABA_DIR` if set, else the checkout's ``../shared/data/alibaba``,
    else None (`sim.datadirs.default_data_dir`)."""
    return default_data_dir(ENV_VAR, "alibaba")


def resolve_alibaba_dir(directory: str | Path | None = None) -> Path:
    """`directory`, else `default_alibaba_dir()`; raises IdlegateError if that is missing."""
    default = None if directory is not None else default_alibaba_dir()
    holding = "the directory holding adj_mat_0.npy, ins_dur0.npy, …"
    return resolve_data_dir(directory, default, "Alibaba", _HINT, holding)


# ---------------------------------------------------------------------------------------
# one job


def parse_alibaba_job(adj: np.ndarray, ins_dur: np.ndarray, number: int, source: str) -> AlibabaJob:
    """Validate one job's two arrays into an AlibabaJob; errors name `source`."""
    fix = "re-create the job's files from the trace"
    if adj.ndim != 2 or adj.shape[0] != adj.shape[1] or adj.shape[0] < 1:
        raise SpecError(
            f"{source}: adj_mat_{number}.npy has shape {adj.shape}; a stage graph is a "
            f"square S x S array with S >= 1; {fix}"
        )
    stages = adj.shape[0]
    if ins_dur.shape != (stages, 2):
        raise SpecError(
            f"{source}: ins_dur{number}.npy has shape {ins_dur.shape}, but adj_mat_{number}.npy "
            f"has {stages} stage(s): expected ({stages}, 2), one [instance_num, duration] row "
            f"per stage; {fix}"
        )
    if stages > MAX_STAGES:
        raise SpecError(f"{source}: {stages} stages; a job has at most {MAX_STAGES}")
    for array, what in ((adj, f"adj_mat_{number}.npy"), (ins_dur, f"ins_dur{number}.npy")):
        if array.dtype.kind not in "biuf" or not np.all(np.isfinite(array)):
            raise SpecError(
                f"{source}: {what} must hold finite numbers (it has {array.dtype}); {fix}"
            )
    if not np.all((adj == 0) | (adj == 1)) or np.any(np.diag(adj)):
        raise SpecError(
            f"{source}: adj_mat_{number}.npy must hold 0 or 1, with 0 on its diagonal "
            f"(adj[i, j] = 1: stage j depends on stage i); {fix}"
        )
    instances, durations = ins_dur[:, 0], ins_dur[:, 1]
    bad = np.flatnonzero((instances != np.round(instances)) | (instances < 1))
    bad = bad if bad.size else np.flatnonzero(instances > MAX_TASKS_PER_STAGE)
    if bad.size:
        raise SpecError(
            f"{source}: stage {bad[0]} has instance_num {instances[bad[0]]:g}; it must be a "
            f"whole number from 1 to {MAX_TASKS_PER_STAGE}; {fix}"
        )
    bad = np.flatnonzero((durations < 0) | (durations > MAX_TASK_SECONDS))
    if bad.size:
        raise SpecError(
            f"{source}: stage {bad[0]} has duration {durations[bad[0]]:g} s; durations are "
            f"seconds from 0 to {MAX_TASK_SECONDS}; {fix}"
        )
    parents = [np.flatnonzero(adj[:, j]).tolist() for j in range(stages)]
    specs = tuple(
        StageSpec(
            name=f"s{j}",
            tasks=int(instances[j]),
            task_duration_seconds=max(float(durations[j]), MIN_TASK_SECONDS),
            depends_on=tuple(f"s{p}" for p in parents[j]),
        )
        for j in range(stages)
    )
    try:
        spec = WorkflowSpec(stages=specs)
    except SpecError as exc:  # a cycle
        raise SpecError(f"{source}: adj_mat_{number}.npy: {exc}") from None
    return AlibabaJob(number, Dag.from_spec(spec))


def _load_array(path: Path) -> np.ndarray:
    try:
        return np.load(path, allow_pickle=False)
    except FileNotFoundError:
        raise IdlegateError(f"Alibaba trace file {path} does not exist; {_HINT}") from None
    except ValueError as exc:  # an object array (needs pickle), or not a .npy file
        raise SpecError(
            f"{path} is not a plain numeric .npy array ({exc}); re-create it from the trace"
        ) from None
    except (OSError, EOFError) as exc:
        raise SpecError(f"cannot read {path} as a .npy array ({exc})") from None


def load_alibaba_job(directory: str | Path, number: int) -> AlibabaJob:
    """Read and parse job `number` of the trace in `directory`."""
    d = Path(directory)
    adj = _load_array(d / f"adj_mat_{number}.npy")
    ins_dur = _load_array(d / f"ins_dur{number}.npy")
    return parse_alibaba_job(adj, ins_dur, number, str(d))


# ---------------------------------------------------------------------------------------
# a folder


class AlibabaTrace:
    """The jobs of one trace directory, parsed once (`jobs`, by file number)."""

    def __init__(self, directory: str | Path | None = None) -> None:
        """`directory` holds ``adj_mat_N.npy`` and ``ins_durN.npy``; None uses
        `default_alibaba_dir()`."""
        self.directory = resolve_alibaba_dir(directory)
        self.jobs: tuple[AlibabaJob, ...] = tuple(
            load_alibaba_job(self.directory, n) for n in self._numbers()
        )

    def __repr__(self) -> str:
        return f"AlibabaTrace({str(self.directory)!r})"

    def _numbers(self) -> list[int]:
        """The job numbers with both files, sorted; a file without its twin is an error."""
        names = [p.name for p in self.directory.iterdir()]
        adj = {int(m.group(1)) for n in names if (m := _ADJ_RE.match(n))}
        dur = {int(m.group(1)) for n in names if (m := _DUR_RE.match(n))}
        if not adj and not dur:
            raise IdlegateError(
                f"{self.directory} holds no Alibaba trace jobs (expected pairs of files "
                f"adj_mat_N.npy and ins_durN.npy, such as adj_mat_0.npy and ins_dur0.npy); "
                f"{_HINT}"
            )
        for n in sorted(adj ^ dur):
            have, missing = (
                (f"adj_mat_{n}.npy", f"ins_dur{n}.npy")
                if n in adj
                else (f"ins_dur{n}.npy", f"adj_mat_{n}.npy")
            )
            raise IdlegateError(
                f"{self.directory} has {have} but no {missing}: each job needs both files; "
                "copy the missing one, or remove its twin"
            )
        return sorted(adj)

    def select(self, min_stages: int = 1) -> tuple[AlibabaJob, ...]:
        """The jobs with at least `min_stages` stages (an IdlegateError if none has)."""
        chosen = tuple(j for j in self.jobs if j.dag.num_stages >= min_stages)
        if not chosen:
            most = max(j.dag.num_stages for j in self.jobs)
            raise IdlegateError(
                f"no job of {self.directory} has {min_stages} or more stages (the most is "
                f"{most}); lower min_stages"
            )
        return chosen


_TRACES: dict[Path, AlibabaTrace] = {}


def open_alibaba_trace(directory: str | Path | None = None) -> AlibabaTrace:
    """A process-wide shared AlibabaTrace per directory, so its files are read once."""
    path = resolve_alibaba_dir(directory).resolve()
    trace = _TRACES.get(path)
    if trace is None:
        trace = _TRACES[path] = AlibabaTrace(path)
    return trace
