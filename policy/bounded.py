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
whatever the queue; selecting them reads four attributes of every job (through `map`,
no Python loop body per job) and sorts the launchable jobs' remaining work (numpy).

    make_scheduler("learned:policy/default.onnx?window=32")          # threshold 32
    make_scheduler("learned:policy/default.onnx", window=WindowConfig(smallest=16))

The defaults (threshold 32; 8 + 8 + 8 + 8 jobs) are the best of the sizes compared in
docs/policy.md ("Bounded observation"): on a burst of 150 workflows they beat both the
full view and a 64-job window, and they keep the model's part of a decision at its cost
for about 30 jobs.

Below the threshold nothing changes: the decisions are those without a window.
"""

from __future__ import annotations

from math import ceil
from operator import attrgetter
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from idlegate.errors import IdlegateError
from idlegate.policy.features import SystemTotals
from idlegate.sim.cluster import ClusterView, Job, Stage


class WindowConfig(BaseModel):
    """Which jobs the learned policy sees when many are in the system (module docstring)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    threshold: int = Field(
        default=32,
        ge=0,
        description="The window applies only while more than this many jobs are in the "
        "system; at or below it the policy sees every job (decisions identical to no window).",
    )
    head: int = Field(
        default=8, ge=0, description="The oldest jobs with a launchable stage that stay visible."
    )
    tail: int = Field(
        default=8, ge=0, description="The newest jobs with a launchable stage that stay visible."
    )
    smallest: int = Field(
        default=8,
        ge=0,
        description="Jobs with a launchable stage and the least remaining work that stay visible.",
    )
    holders: int = Field(
        default=8,
        ge=0,
        description="At most this many jobs that hold executors and have a launchable stage "
        "stay visible (least remaining work first).",
    )
    summary: bool = Field(
        default=True,
        description="Global jobs/backlog features and the WAIT mask describe the whole system "
        "(true) or only the visible jobs (false).",
    )

    @field_validator("threshold", "head", "tail", "smallest", "holders", mode="before")
    @classmethod
    def _no_bool(cls, value: Any) -> Any:
        # pydantic reads True as 1; a flag given for a count is a mistake, not a count
        if isinstance(value, bool):
            raise ValueError("must be a whole number, not true/false")
        return value

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
    unknown = sorted(set(values) - set(WINDOW_FIELDS))
    if unknown:
        raise IdlegateError(
            f"the observation window has no setting {unknown[0]!r}; it takes "
            + ", ".join(WINDOW_FIELDS)
        )
    try:
        return WindowConfig(**values)
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
        for i, runnable in enumerate(map(_RUNNABLE, jobs))
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
_RUNNABLE = attrgetter("runnable")


def _fits(runnable: list[Stage], free: int) -> bool:
    """Some runnable stage is launchable now: not a gang, or a gang whose tasks all fit."""
    return any(not s.gang or s.tasks <= free for s in runnable)
