"""Alibaba's raw 2018 batch trace (``batch_task.csv``) read as history records.

The trace (cluster-trace-v2018) publishes one row per task of a batch job, without a
header line: ``task_name, instance_num, job_name, task_type, status, start_time,
end_time, plan_cpu, plan_mem`` (times in seconds from the trace's start). A task's name
encodes the job's DAG: ``M1``, ``R2_1``, ``J3_1_2`` are tasks 1, 2 and 3, task 2
depends on task 1 and task 3 on tasks 1 and 2; a name not of this form is a task that
depends on nothing and nothing depends on.

Each job whose every task is ``Terminated`` becomes one workflow (`HistoryWorkflow`):

* a stage per task, named after it, with ``instance_num`` tasks and the dependencies
  its name gives;
* its measured task duration ``end_time - start_time`` (a task's span, which the trace
  gives per task row, not per instance: each of its instances is taken to run that
  long), at least 1 s, as the numpy layout of the same trace reads it (`sim.alibaba`);
  it is also the stage's estimate;
* ``arrival``: the job's earliest task start (the trace has no submission time);
  ``jctSeconds``: its last task end minus that; ``outcome``: Succeeded.

``plan_cpu`` and ``plan_mem`` (what one instance asks for) become the stage's
``resources``:

* ``cpu`` from ``plan_cpu``, of which 100 is one core (50 is ``cpu: 500m``);
* ``memory`` from ``plan_mem``, which the trace normalises to a machine's memory ([0, 100]:
  100 is all of one machine's; its machines are alike, 96 cores each) without saying how
  much that is. It is written at `MACHINE_MEMORY_GIB` (100 GiB) a machine, so 1 is 1 GiB
  (``plan_mem`` 0.39 is ``memory: 399Mi``, in whole MiB). Any size would do: a pool sized
  in the trace's machines (``cpu=96`` and ``memory=100Gi`` each) schedules the same
  whatever a machine really holds, since demands and capacity scale together.

Either is left out when blank or 0. A job with a task whose ``plan_cpu`` or ``plan_mem``
no request can be (not a number, NaN, infinite, negative, or more than one machine has:
`MAX_PLAN_CPU`, `MAX_PLAN_MEM`) is skipped, counted as such.

Other jobs are skipped and counted by reason (`AlibabaImport.skipped`): one not every
task of which is Terminated, one a task of which depends on a task the file does not
hold (a file cut from the trace cuts jobs too), one that names a task number twice,
one whose dependencies form a cycle, one with an unusable row (a time or count that is
no number, a negative span, no instance), one with an unusable request (above), one too large for a workflow (more than
`MAX_STAGES` tasks, `MAX_TASKS_PER_STAGE` instances or `MAX_TASK_SECONDS`). The whole
file is read into memory: convert the full trace in parts (docs/workloads.md).
"""

from __future__ import annotations

import csv
import math
import re
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

import networkx as nx

from idlegate.errors import IdlegateError, SpecError
from idlegate.sim.history.records import HistoryWorkflow
from idlegate.sim.queues import check_queue_name
from idlegate.sim.spec import (
    MAX_STAGES,
    MAX_TASK_SECONDS,
    MAX_TASKS_PER_STAGE,
    StageSpec,
    WorkflowSpec,
    stage_label,
)
from idlegate.textfiles import not_utf8

COLUMNS = (
    "task_name",
    "instance_num",
    "job_name",
    "task_type",
    "status",
    "start_time",
    "end_time",
    "plan_cpu",
    "plan_mem",
)
"""The columns of ``batch_task.csv``, in order."""
TERMINATED = "Terminated"
"""The status of a task that finished."""
MACHINE_MEMORY_GIB = 100
"""The memory of one of the trace's machines that ``plan_mem`` 100 stands for (GiB; the
module docstring says why any size would do)."""
MAX_PLAN_CPU = 9600.0
"""The largest ``plan_cpu``: a whole machine's 96 cores (100 is one core)."""
MAX_PLAN_MEM = 100.0
"""The largest ``plan_mem``: a whole machine's memory (the trace's normalisation)."""
MIN_TASK_SECONDS = 1.0
"""A task's measured duration is at least this (the trace's times are whole seconds)."""

_DAG_NAME = re.compile(r"^[A-Za-z]+(\d+)((?:_\d+)*)$")

SKIP_REASONS = {
    "unfinished": "not every task Terminated",
    "incomplete": "a task depends on one the file does not hold",
    "repeated": "a task number named twice",
    "cyclic": "dependencies in a cycle",
    "unusable": "a row with an unusable time or count",
    "unrequestable": "a plan_cpu or plan_mem no request can be",
    "too-large": "too large for a workflow",
}
"""Why a job is skipped → how the summary says it."""
FIXES = {
    "unfinished": "a part cut from the trace needs whole jobs, all of whose tasks Terminated",
    "incomplete": "a part cut from the trace needs whole jobs, with every task they depend on",
    "unrequestable": f"plan_cpu is 0 to {MAX_PLAN_CPU:g} (100 a core) and plan_mem 0 to "
    f"{MAX_PLAN_MEM:g} (a machine's share), or blank: correct the row or leave its job out",
}
"""Reason → what a user whose file had only such jobs should fix."""


@dataclass(frozen=True)
class _Row:
    name: str
    instances: float | None
    status: str
    start: float | None
    end: float | None
    cpu: float | None
    """plan_cpu: 100 is one core."""
    memory: float | None
    """plan_mem: 100 is one machine's memory."""
    line: int = 0
    """Its line in the file."""
    unrequestable: str | None = None
    """The plan_cpu or plan_mem no request can be, as ``plan_cpu 'nan'`` (the module
    docstring); None when both can be."""


@dataclass(frozen=True)
class AlibabaImport:
    """What `read_batch_tasks` found: the workflows, and the jobs skipped by reason."""

    workflows: list[HistoryWorkflow]
    jobs: int
    """Jobs in the file."""
    skipped: Counter[str] = field(default_factory=Counter)
    """Reason (a key of `SKIP_REASONS`) → jobs skipped for it."""
    first: dict[str, str] = field(default_factory=dict)
    """Reason → where the first job skipped for it shows it, when a row does: ``line 3,
    plan_cpu 'nan'`` (a user looks there first)."""

    def summary(self) -> str:
        """One sentence: the jobs kept, and each reason jobs were skipped for (with the
        first row that shows it)."""
        kept = f"{len(self.workflows)} of {self.jobs} job(s) converted"
        return f"{kept}; skipped: {self._reasons()}" if self.skipped else kept

    def _reasons(self) -> str:
        return ", ".join(
            f"{n} {SKIP_REASONS[r]}" + (f" ({self.first[r]})" if r in self.first else "")
            for r, n in sorted(self.skipped.items(), key=lambda x: -x[1])
        )

    def none_converted(self, source: str) -> str:
        """Why no job of `source` could be converted, and what to fix: the fix of the
        reason most jobs were skipped for (a bad request is no cut of the trace)."""
        reason = max(self.skipped, key=lambda r: self.skipped[r]) if self.skipped else ""
        fix = FIXES.get(reason)
        text = f"{source}: none of its {self.jobs} job(s) could be converted, skipped: "
        return text + self._reasons() + (f"; {fix}" if fix else "")


Progress = Callable[[int, int, str], None]
"""Called as ``progress(done, total, what)`` while a file is read (characters of it) and
its jobs converted."""
_EVERY = 20_000
"""Rows read, or jobs converted, between two calls of a `Progress`."""


def read_batch_tasks(path: str | Path, progress: Progress | None = None) -> AlibabaImport:
    """The Terminated jobs of a ``batch_task.csv`` file as workflows (the module's doc);
    `progress` hears how far the reading and the conversion are (the full trace's 14
    million rows take minutes)."""
    p = Path(path)
    # (read as a stream, not by `textfiles.read_text`: its failures said as it says them)
    try:
        with p.open(newline="") as handle:
            lines: Iterable[str] = handle
            if progress is not None:
                lines = _reported(handle, p.stat().st_size, progress)
            return batch_task_history(csv.reader(lines), str(p), progress)
    except FileNotFoundError:
        raise IdlegateError(
            f"cannot read the batch task file {p}: it does not exist; {_FIX}"
        ) from None
    except IsADirectoryError:
        raise IdlegateError(
            f"cannot read the batch task file {p}: it is a directory; {_FIX} (e.g. "
            f"{p / 'batch_task.csv'})"
        ) from None
    except UnicodeDecodeError as exc:
        raise SpecError(f"the batch task file {p} {not_utf8(exc)}, or {_FIX}") from None
    except OSError as exc:
        raise IdlegateError(
            f"cannot read the batch task file {p} ({exc.strerror}); {_FIX}"
        ) from None


_FIX = "give the trace's batch_task.csv"
"""How a sentence on a batch task file that cannot be read ends."""


def _reported(lines: Iterable[str], size: int, progress: Progress) -> Iterator[str]:
    """`lines`, telling `progress` every `_EVERY` lines how many characters were read."""
    read = 0
    for i, line in enumerate(lines):
        read += len(line)
        if i % _EVERY == 0:
            progress(min(read, size), size, "reading")
        yield line


def batch_task_history(
    rows: Iterable[Sequence[str]], source: str, progress: Progress | None = None
) -> AlibabaImport:
    """`rows` of ``batch_task.csv`` (a header line of `COLUMNS` may come first) as
    workflows; `progress` hears of the jobs converted."""
    jobs: dict[str, list[_Row]] = defaultdict(list)
    for line, row in enumerate(rows, start=1):
        if not row:
            continue
        if len(row) != len(COLUMNS):
            raise SpecError(
                f"{source}: line {line} has {len(row)} field(s), but a row of batch_task.csv "
                f"has {len(COLUMNS)}: {','.join(COLUMNS)}; is this the trace's batch_task.csv?"
            )
        if line == 1 and [c.strip().lower() for c in row] == list(COLUMNS):
            continue
        name, instances, job, _, status, start, end, cpu, memory = (c.strip() for c in row)
        numbers = (_number(v) for v in (instances, start, end, cpu, memory))
        count, begin, finish, plan_cpu, plan_mem = numbers
        bad = _unrequestable("plan_cpu", cpu, MAX_PLAN_CPU) or _unrequestable(
            "plan_mem", memory, MAX_PLAN_MEM
        )
        row_ = _Row(name, count, status, begin, finish, plan_cpu, plan_mem, line, bad)
        jobs[job].append(row_)
    if not jobs:
        raise SpecError(f"{source} holds no task rows ({','.join(COLUMNS)})")
    skipped: Counter[str] = Counter()
    first: dict[str, str] = {}
    workflows = []
    for i, (job, tasks) in enumerate(jobs.items()):
        if progress is not None and i % _EVERY == 0:
            progress(i, len(jobs), "converting")
        made = _workflow(job, tasks, source)
        if isinstance(made, str):
            skipped[made] += 1
            shown = next((r for r in tasks if r.unrequestable), None)
            if made == "unrequestable" and shown is not None:
                first.setdefault(made, f"first on line {shown.line}: {shown.unrequestable}")
        else:
            workflows.append(made)
    if progress is not None:
        progress(len(jobs), len(jobs), "converted")
    workflows.sort(key=lambda w: (w.arrival, w.name))
    return AlibabaImport(workflows, len(jobs), skipped, first)


def _number(text: str) -> float | None:
    """The field's number; None for a blank, a text or a non-finite one (``nan``, ``inf``
    parse as floats, and a NaN count or span would pass every comparison)."""
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def _unrequestable(column: str, text: str, most: float) -> str | None:
    """None when a plan_cpu or plan_mem field is blank or a number in [0, `most`], else
    the column and its value (1e300 would be a quantity of 300 digits, and a negative or
    NaN one no request)."""
    if not text:
        return None
    try:
        if 0 <= float(text) <= most:
            return None
    except ValueError:
        pass
    return f"{column} {text!r}"


def _workflow(job: str, rows: list[_Row], source: str) -> HistoryWorkflow | str:
    """The job's workflow, or the key of `SKIP_REASONS` it is skipped for."""
    if any(r.status != TERMINATED for r in rows):
        return "unfinished"
    counts, starts, ends = [], [], []
    for r in rows:
        if r.instances is None or r.start is None or r.end is None:
            return "unusable"
        if r.instances < 1 or r.instances != int(r.instances) or r.end < r.start:
            return "unusable"
        if r.unrequestable is not None:
            return "unrequestable"
        counts.append(int(r.instances))
        starts.append(r.start)
        ends.append(r.end)
    spans = [max(e - s, MIN_TASK_SECONDS) for s, e in zip(starts, ends, strict=True)]
    if len(rows) > MAX_STAGES or max(spans) > MAX_TASK_SECONDS or max(counts) > MAX_TASKS_PER_STAGE:
        return "too-large"
    numbers: dict[int, int] = {}
    parents: list[list[int]] = []
    for i, r in enumerate(rows):
        m = _DAG_NAME.match(r.name)
        if m is None:  # an independent task
            parents.append([])
            continue
        number = int(m.group(1))
        if number in numbers:
            return "repeated"
        numbers[number] = i
        parents.append([int(d) for d in m.group(2).split("_") if d])
    try:
        parents = [[numbers[d] for d in ds] for ds in parents]
    except KeyError:
        return "incomplete"
    order = _topological(parents)
    if order is None:
        return "cyclic"
    taken: set[str] = set()
    labels = [stage_label(r.name, taken) for r in rows]
    stages = tuple(
        StageSpec(
            name=labels[i],
            tasks=counts[i],
            task_duration_seconds=spans[i],
            depends_on=tuple(labels[p] for p in dict.fromkeys(parents[i])),
            resources=_requests(rows[i]),
        )
        for i in order
    )
    arrival = min(starts)
    return HistoryWorkflow(
        spec=WorkflowSpec(stages=stages),
        name=job,
        arrival=arrival,
        measured=tuple((spans[i],) for i in order),
        source=f"{source} (job {job!r})",
        jct=max(ends) - arrival,
        outcome="Succeeded",
    )


def _requests(row: _Row) -> dict[str, str] | None:
    """A task's ``plan_cpu`` and ``plan_mem`` as a ResourceList (the module docstring)."""
    out = {}
    if row.cpu is not None and row.cpu > 0:
        out["cpu"] = f"{max(round(row.cpu * 10), 1)}m"
    if row.memory is not None and row.memory > 0:
        mib = row.memory / 100 * MACHINE_MEMORY_GIB * 1024
        out["memory"] = f"{max(round(mib), 1)}Mi"
    return out or None


def _topological(parents: list[list[int]]) -> list[int] | None:
    """The task indices, each after its parents, ties by index (as `Dag.topological_order`);
    None if there is a cycle."""
    graph = nx.DiGraph()
    graph.add_nodes_from(range(len(parents)))
    graph.add_edges_from((p, i) for i, ps in enumerate(parents) for p in ps)
    try:
        return list(nx.lexicographical_topological_sort(graph))
    except nx.NetworkXUnfeasible:
        return None


def in_queue(workflows: Sequence[HistoryWorkflow], queue: str) -> list[HistoryWorkflow]:
    """`workflows`, each naming `queue` as its ``queueName`` (the trace names no team: a
    replay with ``--queues`` puts them all in one queue of the file's)."""
    check_queue_name(queue)  # (one sentence now, not at the replay)
    return [replace(w, spec=w.spec.model_copy(update={"queue_name": queue})) for w in workflows]
