"""The operator's replay process: where its pools' forecast replays and portfolio rounds run.

One ``spawn``ed interpreter for all the pools (`ReplayProcess`), which builds each
scheduler from its spec once per spec (`operator.forecasting.request.compute`), so that the
replays' objects are not in the deciding interpreter's heap and hold none of its lock.
What crosses is plain data: a frozen `ForecastRequest` there, a pure result back. A process
that dies or raises fails that refresh (`ForecastRefresh` counts it); the next starts a
new one.
"""

from __future__ import annotations

import gc
import multiprocessing
import os
import threading
from collections.abc import Callable
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import Any, TypeVar

from idlegate.operator.forecasting.request import ForecastRequest, compute
from idlegate.sim.forecast import PoolForecast

T = TypeVar("T")


NICENESS = 10
"""How much lower the replay process's CPU priority is than the operator's (`os.nice`):
where the two share a core (a pod's CPU limit, a small node), a decision waits behind
the replays less (docs/research/forecasts.md, "In pairs, off and on in turn")."""


def behind() -> None:
    """In the replay process as it starts: `NICENESS` below the operator's priority (a
    platform without `os.nice` runs the replays at the operator's), and ended with the
    operator however it ends (`ended_with`)."""
    nice = getattr(os, "nice", None)
    if nice is not None:
        nice(NICENESS)
    ended_with(multiprocessing.parent_process())


def ended_with(parent: Any, leave: Callable[[int], object] = os._exit) -> None:
    """End this process (`leave`) as soon as `parent` has ended: a thread waits on its
    sentinel. An operator killed (SIGKILL, OOM) runs no `ReplayProcess.close`, and its
    replay process, blocked on a queue whose write end it holds itself, lived on for ever
    (issue 93, item 5). None: not a child of the operator."""
    if parent is None:
        return

    def watch() -> None:
        parent.join()
        leave(0)

    threading.Thread(target=watch, name="idlegate-operator-watch", daemon=True).start()


def replay_executor(context: str = "spawn") -> ProcessPoolExecutor:
    """The replay process's executor: one process, started as `context` says, `behind`."""
    return ProcessPoolExecutor(
        1, mp_context=multiprocessing.get_context(context), initializer=behind
    )


class ReplayProcess:
    """The operator's replay process (`operator.forecasting.book`'s docstring, "Where"): one for
    all its pools, for their forecasts' replays and their portfolios' rounds,
    started by the first refresh and again by the next one after it died, stopped by
    `close`. Its pools run at most one refresh each, queued to it in turn. `context` is
    how it starts (``spawn``: a fresh interpreter, never a fork of the operator, whose
    threads may hold locks a forked child would inherit held)."""

    def __init__(self, context: str = "spawn") -> None:
        self.context = context
        self._executor: ProcessPoolExecutor | None = None
        self._closed = False

    def submit(
        self, request: ForecastRequest, replays: int, budget: int, seconds: float | None
    ) -> Future[tuple[PoolForecast, float]]:
        """`compute` of `request` in the process (a new one if the last died). RuntimeError:
        closed."""
        return self.call(compute, request, replays, budget, seconds)

    def call(self, work: Callable[..., T], *args: Any) -> Future[T]:
        """`work(*args)` in the process, after the work queued before it (a new process if
        the last died): a forecast's replays (`submit`) or a portfolio's round
        (`policy.portfolio.apart.play_apart`). `work` and `args` cross by pickling.
        RuntimeError: closed."""
        if self._closed:
            raise RuntimeError("the replay process is closed")
        if self._executor is None:
            self._executor = replay_executor(self.context)
        try:
            return self._executor.submit(work, *args)
        except BrokenProcessPool:  # (it died since the last call, which failed: a new one)
            self._executor.shutdown(wait=False, cancel_futures=True)
            self._executor = None
            return self.call(work, *args)

    def close(self) -> None:
        """Stop the process (a refresh it runs is dropped); no refresh starts after. The
        process is ended and reaped, and the executor's queues released, before this
        returns: the operator leaves by ``os._exit``, which runs no finalizer, so a process
        left running outlived it (with the resource tracker it holds open), and the
        queues' semaphores were reported leaked (issue 93, item 5)."""
        self._closed = True
        executor, self._executor = self._executor, None
        if executor is not None:
            end(executor)


def end(executor: ProcessPoolExecutor) -> None:
    """Shut `executor` down now: its work dropped, its processes ended (a replay is
    disposable: nothing of it is kept) and reaped, its queues' semaphores unlinked."""
    workers = list((getattr(executor, "_processes", None) or {}).values())  # (no public way)
    for worker in workers:
        if worker.is_alive():
            worker.terminate()
    executor.shutdown(wait=True, cancel_futures=True)
    del executor  # (its queues' last reference: their semaphores' finalizers run on collection)
    gc.collect()
