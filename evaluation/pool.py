"""Independent runs over a process pool; results in task order, whatever the pool size.

Every run of `idlegate compare` and `idlegate evaluate` is a pure function of
(workload, scheduler, seed), so spreading runs over processes changes only the wall time.
"""

from __future__ import annotations

import multiprocessing
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from typing import Any

__all__ = ["ProgressFn", "mp_context", "run_tasks"]


ProgressFn = Callable[[int, int, str], None]
"""Called as ``progress(done, total, what)`` after each finished run."""


def mp_context() -> multiprocessing.context.BaseContext:
    # forkserver: no fork of a process that has threads (a progress bar refreshes in one);
    # preloading the package makes each worker start in milliseconds.
    methods = multiprocessing.get_all_start_methods()
    if "forkserver" in methods:
        ctx = multiprocessing.get_context("forkserver")
        ctx.set_forkserver_preload(["idlegate.evaluation"])
        return ctx
    return multiprocessing.get_context("spawn")


def run_tasks(
    fn: Callable[[Any], Any],
    tasks: Sequence[Any],
    jobs: int,
    progress: ProgressFn | None,
    describe: Callable[[Any], str],
) -> list[Any]:
    """`fn` over `tasks` (in order of the result list), in `jobs` processes if > 1."""
    results: list[Any] = [None] * len(tasks)
    done = 0

    def finished(i: int, value: Any) -> None:
        nonlocal done
        results[i] = value
        done += 1
        if progress is not None:
            progress(done, len(tasks), describe(tasks[i]))

    workers = min(jobs, len(tasks))
    if workers <= 1:
        for i, t in enumerate(tasks):
            finished(i, fn(t))
        return results
    with ProcessPoolExecutor(workers, mp_context=mp_context()) as pool:
        futures = {pool.submit(fn, t): i for i, t in enumerate(tasks)}
        for fut in as_completed(futures):
            finished(futures[fut], fut.result())
    return results
