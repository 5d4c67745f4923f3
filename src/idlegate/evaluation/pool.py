"""Independent runs over a task pool; results in task order, whatever the pool.

Every run of `idlegate compare` and `idlegate evaluate` is a pure function of
(workload, scheduler, seed), so spreading runs over local processes or a Ray cluster
(`idlegate.parallel`) changes only the wall time.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from idlegate.parallel import TaskPool, open_pool

__all__ = ["ProgressFn", "open_runs_pool", "run_tasks"]


ProgressFn = Callable[[int, int, str], None]
"""Called as ``progress(done, total, what)`` after each finished run."""

PRELOAD = ("idlegate.evaluation",)
"""What the forkserver imports once, so that each local worker starts in milliseconds."""


def open_runs_pool(jobs: int, ray: str | None = None) -> TaskPool:
    """The pool for a command's runs: Ray at `ray` (``auto`` or an address), else `jobs`
    local processes (in this process for 1). Close it, or use it as a context manager."""
    return open_pool(ray, max(1, jobs), preload=PRELOAD)


def run_tasks(
    fn: Callable[[Any], Any],
    tasks: Sequence[Any],
    jobs: int,
    progress: Callable[[int, int, Any], None] | None,
    describe: Callable[[Any], Any],
    pool: TaskPool | None = None,
) -> list[Any]:
    """`fn` over `tasks` (in order of the result list), calling
    ``progress(done, total, describe(task))`` after each; in `pool`, or else in `jobs`
    local processes if > 1."""

    def report(done: int, total: int, index: int) -> None:
        if progress is not None:
            progress(done, total, describe(tasks[index]))

    if pool is not None:
        return pool.map(fn, tasks, progress=report)
    with open_runs_pool(min(jobs, len(tasks))) as local:
        return local.map(fn, tasks, progress=report)
