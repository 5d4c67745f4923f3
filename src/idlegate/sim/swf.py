"""Standard Workload Format (SWF) traces: the reader and the `swf` workload.

SWF (Feitelson's Parallel Workloads Archive) is one job per line, 18 whitespace-separated
fields, header lines starting with ``;``. idlegate reads:

* header ``MaxProcs`` (else ``MaxNodes``): the machine's size, the default executor count
  (the number a value starts with: ``; MaxNodes: 338 (batch partition; 512 total)`` is 338);
* field 1 job number, 2 submit time, 4 run time, 5 allocated processors (else field 8,
  requested processors, when field 5 is missing or -1), 9 requested time (missing or -1:
  the run time).

A record is *skipped*, and counted by reason in :attr:`SwfTrace.skipped`, when it has
fewer than 9 fields or a field that is not a number (``malformed``), a missing or
non-positive run time (``run_time``), no positive processor count (``processors``), a
negative submit time (``submit``), or more processors than the header's machine size
(``wider_than_machine``). A bad line never stops the reader.

The `swf` workload (:func:`swf_workload`) takes a window of `num_jobs` consecutive jobs,
starting at a seeded random job as SchedInspector samples its 256-job sequences (or at
`start`), with arrival times relative to the window's first job.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal

import numpy as np
from pydantic import ConfigDict, Field, field_validator, model_validator

from idlegate.config import Config
from idlegate.errors import IdlegateError
from idlegate.sim.engine import Workload
from idlegate.sim.rigid import RequestedTime, RigidJob, rigid_workload
from idlegate.sim.spec import MAX_TASK_SECONDS

MAX_SWF_JOBS = 10_000_000
_LEADING_NUMBER = re.compile(r"\s*[+-]?\d+(\.\d*)?([eE][+-]?\d+)?")


@dataclass(frozen=True)
class SwfTrace:
    """The usable jobs of an SWF file, in submit order, and what was skipped."""

    path: str
    jobs: tuple[RigidJob, ...]
    max_procs: int | None
    """Header MaxProcs, else MaxNodes (None: neither given)."""
    skipped: dict[str, int] = field(default_factory=dict)
    """Skipped records by reason (see the module docstring)."""
    clipped: int = 0
    """Jobs whose requested time exceeded 7 days (the spec's limit) and was clipped."""

    @property
    def machine_size(self) -> int:
        """The header's size, else the widest job's processors."""
        if self.max_procs is not None:
            return self.max_procs
        return max((j.processors for j in self.jobs), default=1)


def parse_swf(lines: Any, path: str = "<swf>") -> SwfTrace:
    """Parse SWF text lines (any iterable of str) into a :class:`SwfTrace`."""
    max_nodes: int | None = None
    max_procs: int | None = None
    skipped: Counter[str] = Counter()
    rows: list[RigidJob] = []
    for raw in lines:
        line = raw.strip()
        if not line:
            continue
        if line.startswith(";"):
            key, sep, value = line[1:].partition(":")
            if sep and key.strip() in ("MaxNodes", "MaxProcs"):
                number = _header_int(value)
                if key.strip() == "MaxNodes":
                    max_nodes = number
                else:
                    max_procs = number
            continue
        reason, job = _record(line.split())
        if job is None:
            skipped[reason] += 1
        else:
            rows.append(job)
    size = max_procs or max_nodes
    if size is not None:
        kept = [j for j in rows if j.processors <= size]
        if len(kept) < len(rows):
            skipped["wider_than_machine"] += len(rows) - len(kept)
        rows = kept
    rows.sort(key=lambda j: (j.submit, j.id))  # stable for equal submits: file order by id
    clipped = sum(j.requested_time > MAX_TASK_SECONDS for j in rows)
    return SwfTrace(path, tuple(rows), size, dict(skipped), clipped)


def _header_int(value: str) -> int | None:
    """The number a header value starts with: real traces comment after it, e.g.
    ``338 (batch partition; 512 total)``; None when it starts with none or is not > 0."""
    match = _LEADING_NUMBER.match(value)
    if match is None:
        return None
    number = int(float(match.group()))
    return number if number > 0 else None


def _record(fields: list[str]) -> tuple[str, RigidJob | None]:
    """(skip reason, None) or ("", the job) for one record's fields."""
    if len(fields) < 9:
        return "malformed", None
    try:
        number, submit, run, alloc, req_procs, req_time = (
            float(fields[i]) for i in (0, 1, 3, 4, 7, 8)
        )
    except ValueError:
        return "malformed", None
    if not all(math.isfinite(v) for v in (number, submit, run, alloc, req_procs, req_time)):
        return "malformed", None
    if run <= 0:
        return "run_time", None
    procs = alloc if alloc > 0 else req_procs
    if procs < 1:
        return "processors", None
    if submit < 0:
        return "submit", None
    requested = req_time if req_time > 0 else run
    return "", RigidJob(int(number), submit, run, int(procs), requested)


@lru_cache(maxsize=8)
def _read_cached(path: str, mtime_ns: int, size: int) -> SwfTrace:
    with open(path, encoding="utf-8", errors="replace") as fh:
        return parse_swf(fh, path)


def read_swf(path: str | Path) -> SwfTrace:
    """Read an SWF file (cached per path and modification time)."""
    p = Path(path).expanduser()
    try:
        st = p.stat()
    except OSError as exc:
        raise IdlegateError(
            f"cannot read the SWF trace {str(p)!r} ({exc.strerror}); give the path of an "
            "existing .swf file"
        ) from None
    if not p.is_file():
        raise IdlegateError(f"the SWF trace {str(p)!r} is not a file; give a .swf file")
    trace = _read_cached(str(p.resolve()), st.st_mtime_ns, st.st_size)
    if not trace.jobs:
        raise IdlegateError(
            f"{p} has no usable SWF job records (skipped: {_describe_skips(trace.skipped)}); "
            "is it an SWF file?"
        )
    return trace


def _describe_skips(skipped: dict[str, int]) -> str:
    return ", ".join(f"{n} {reason}" for reason, n in sorted(skipped.items())) or "none"


# ---------------------------------------------------------------------------------------
# the `swf` workload


class SwfConfig(Config):
    """A window of an SWF trace as a workload of rigid jobs."""

    model_config = ConfigDict(allow_inf_nan=False)  # as every workload's options

    path: str = Field()
    """The SWF trace file (--file)."""
    num_jobs: int | None = Field(None, ge=1, le=MAX_SWF_JOBS)
    """Jobs in the window (--jobs-count); default: the whole trace (or part)."""
    start: int | None = Field(None, ge=0)
    """Index of the window's first job in the part; default: drawn from the seed, uniform
    over the windows that fit."""
    num_executors: int | None = Field(None, ge=1, le=100_000)
    """Executors (default: the header's MaxProcs, else MaxNodes)."""
    requested_time: RequestedTime = "trace"
    """trace: the trace's requested time (field 9; the run time where -1); run: the run
    time (perfect estimates, as in SchedInspector's calibration)."""
    part: Literal["all", "train", "test"] = "all"
    """all: the whole trace; train: its first train_fraction of jobs; test: the rest
    (SchedInspector's protocol trains on the first 20 %)."""
    train_fraction: float = Field(0.2, gt=0, lt=1)
    """Share of the trace's jobs in the train part."""

    @field_validator("path", mode="before")
    @classmethod
    def _path_text(cls, value: Any) -> Any:
        return str(value) if isinstance(value, Path) else value

    @model_validator(mode="after")
    def _start_needs_count(self) -> SwfConfig:
        if self.start is not None and self.num_jobs is None:
            raise ValueError("start selects a window; give num_jobs (--jobs-count) too")
        return self


def trace_part(trace: SwfTrace, part: str, train_fraction: float) -> tuple[RigidJob, ...]:
    """The jobs of `part`: all, the first `train_fraction` (train), or the rest (test)."""
    if part == "all":
        return trace.jobs
    cut = int(len(trace.jobs) * train_fraction)
    return trace.jobs[:cut] if part == "train" else trace.jobs[cut:]


def window(
    jobs: tuple[RigidJob, ...], num_jobs: int | None, start: int | None, rng: np.random.Generator
) -> tuple[RigidJob, ...]:
    """`num_jobs` consecutive jobs from `start`, or from a uniformly drawn start."""
    if num_jobs is None:
        return jobs
    if num_jobs > len(jobs):
        raise IdlegateError(
            f"a window of {num_jobs} jobs does not fit the {len(jobs)} usable jobs; "
            "lower --jobs-count"
        )
    last = len(jobs) - num_jobs
    if start is None:
        start = int(rng.integers(last + 1))
    elif start > last:
        raise IdlegateError(f"start {start} leaves fewer than {num_jobs} jobs; use 0..{last}")
    return jobs[start : start + num_jobs]


def swf_workload(config: SwfConfig, seed: int | np.random.Generator = 0) -> Workload:
    """A window of the trace `config.path` (see the module docstring)."""
    rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
    trace = read_swf(config.path)
    jobs = trace_part(trace, config.part, config.train_fraction)
    chosen = window(jobs, config.num_jobs, config.start, rng)
    k = config.num_executors or trace.machine_size
    return rigid_workload(f"swf:{Path(config.path).stem}", chosen, k, config.requested_time)
