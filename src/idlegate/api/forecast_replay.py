"""Where a forecast refresh's replays run: the snapshot a refresh takes, `compute` (the
one copy of the replays' work), and the operator's replay process.

`api.forecast_refresh` takes a `Snapshot` in the event loop (a fork of the pool, plain
data, and the scheduler to replay or its spec) and hands it to `compute`: in place (a
pool driven without a loop), in a worker thread of the pool (``--forecast-workers
thread``) or in the operator's `ReplayProcess` (``process``, the default: one ``spawn``ed
interpreter for all its pools, which builds the scheduler from its spec once per spec,
so that the replays' objects are not in the deciding interpreter's heap and hold none of
its lock). The same snapshot and seed give the same forecast in each
(tests/test_forecast_refresh_process.py). A process that dies or raises fails that
refresh (`ForecastRefresh` counts it); the next starts a new one. Pure but for the
process; no kopf, no API.
"""

from __future__ import annotations

import copy
import dataclasses
import multiprocessing
import os
import time
from collections.abc import Callable, Iterable
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar, get_args

import numpy as np

from idlegate.sim import forecast as sim_forecast
from idlegate.sim.cluster import Cluster
from idlegate.sim.forecast_arrivals import Recent, invent
from idlegate.sim.protocol import Job, Scheduler
from idlegate.sim.rollout import Future as RolloutFuture

T = TypeVar("T")

Workers = Literal["process", "thread"]
"""Where the operator's replays run, a forecast refresh's and a portfolio's round
(``--forecast-workers``; `api.forecast_refresh`'s docstring, "Where";
`operator.features.planning.ReplayWorker`)."""
WORKERS: tuple[str, ...] = get_args(Workers)


@dataclass
class Snapshot:
    """What a refresh takes in the event loop: a fork, a scheduler copy, and who is who."""

    fork: Cluster
    scheduler: Scheduler | None
    """The scheduler to replay; None: the one `spec` builds where the replays run."""
    seed: int
    owners: dict[int, Any] = field(default_factory=dict)
    """Job id → its workflow (the job's payload: a Workflow or an ExternalJob)."""
    jobs: dict[int, Job] = field(default_factory=dict)
    arrivals: str = "none"
    """What the replays invent (`sim.forecast_arrivals.invent`)."""
    recent: tuple[Recent, ...] = ()
    """The pool's recent arrivals the invented ones copy, frozen."""
    rate_log: list[tuple[float, float]] | None = None
    """The (time, work) arrivals the invented ones' rate is estimated from, when the fork's
    own log lacks those before a restart (`ForecastRefresh.resumed_log`); None: the fork's."""
    spec: str | None = None
    """The replayed scheduler's spec, when `scheduler` is None (a replay process's)."""

    def shipped(self) -> Snapshot:
        """What a replay process needs of it: all but `owners` and `jobs` (the operator's
        objects, which only `ForecastRefresh.take` reads)."""
        return dataclasses.replace(self, owners={}, jobs={})


def replayed_spec(spec: str | None, learns: Any = None) -> str | None:
    """The spec of the scheduler a refresh replays: the pool's `spec`, or a portfolio's
    (`learns`) candidate it follows now (replaying it would replay its replays); None:
    the pool's scheduler is an object given as it is (tests, embedding)."""
    return learns.following if learns is not None else spec


def scheduler_copy(
    scheduler: Scheduler | None,
    spec: str | None,
    learns: Any = None,
    cache: dict[str, Scheduler] | None = None,
) -> Scheduler:
    """The scheduler a refresh replays: built from its `replayed_spec`, once per spec in
    `cache` (a model file is loaded once; each replay resets it), else a deep copy of
    `scheduler`."""
    from idlegate.policy import make_scheduler

    wanted = replayed_spec(spec, learns)
    if wanted is None:
        assert scheduler is not None, "a scheduler without a spec is replayed as given"
        return copy.deepcopy(scheduler)
    if cache is None:
        return make_scheduler(wanted)
    if wanted not in cache:
        cache[wanted] = make_scheduler(wanted)
    return cache[wanted]


ARRIVALS_STREAM = 1
"""The invented arrivals' generator is the refresh's seed's child of this key (the
replays' own is seeded by the seed itself: the two draw independently)."""


_BUILT: dict[str, Scheduler] = {}
"""A replay process's schedulers by spec (it runs one refresh at a time)."""


def compute(
    snapshot: Snapshot,
    replays: int,
    budget: int,
    seconds: float | None = None,
    clock: Callable[[], float] = time.thread_time,
    **options: Any,
) -> tuple[sim_forecast.Forecast, float]:
    """Worker thread or replay process: the forecast of the snapshot and the CPU seconds
    it took; its replays invent the snapshot's `arrivals` (`futures`), within `budget`
    events and `seconds` of CPU (`sim.forecast.forecast`), and a waiting workflow's start
    is the replays' quantile for those arrivals (`sim.forecast.start_quantile`: later than
    their median where none are invented), as `idlegate forecast evaluate` measured it.
    `clock` measures `seconds` (a what-if's: the wall's); `options` go to the forecast."""
    began = time.thread_time()
    scheduler = snapshot.scheduler
    if scheduler is None:  # (a replay process's: built from its spec, once per spec)
        scheduler = scheduler_copy(None, snapshot.spec, None, _BUILT)
    result = sim_forecast.forecast(
        snapshot.fork,
        scheduler,
        seed=snapshot.seed,
        replays=replays,
        budget=budget,
        seconds=seconds,
        clock=clock,
        futures=futures(snapshot, replays),
        start_quantile=sim_forecast.start_quantile(snapshot.arrivals != "none"),
        **options,
    )
    return result, time.thread_time() - began


NICENESS = 10
"""How much lower the replay process's CPU priority is than the operator's (`os.nice`):
where the two share a core (a pod's CPU limit, a small node), a decision waits behind
the replays less (docs/research/forecasts.md, "In pairs, off and on in turn")."""


def behind() -> None:
    """In the replay process as it starts: `NICENESS` below the operator's priority. A
    platform without `os.nice` runs the replays at the operator's."""
    nice = getattr(os, "nice", None)
    if nice is not None:
        nice(NICENESS)


def replay_executor(context: str = "spawn") -> ProcessPoolExecutor:
    """The replay process's executor: one process, started as `context` says, `behind`."""
    return ProcessPoolExecutor(
        1, mp_context=multiprocessing.get_context(context), initializer=behind
    )


class ReplayProcess:
    """The operator's replay process (`api.forecast_refresh`'s docstring, "Where"): one for
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
        self, snapshot: Snapshot, replays: int, budget: int, seconds: float | None
    ) -> Future[tuple[sim_forecast.Forecast, float]]:
        """`compute` of `snapshot` in the process (a new one if the last died). RuntimeError:
        closed."""
        return self.call(compute, snapshot.shipped(), replays, budget, seconds)

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
        """Stop the process (a refresh it runs is dropped); no refresh starts after."""
        self._closed = True
        if self._executor is not None:
            self._executor.shutdown(wait=False, cancel_futures=True)
            self._executor = None


def futures(snapshot: Snapshot, replays: int) -> Iterable[RolloutFuture] | None:
    """The futures a refresh's replays run (one per replay; None: no arrivals invented):
    `sim.forecast_arrivals.invent` on the snapshot's fork and recent arrivals, drawn from
    a generator seeded by the snapshot's seed (`ARRIVALS_STREAM`)."""
    if snapshot.arrivals == "none":
        return None
    rng = np.random.default_rng(np.random.SeedSequence(snapshot.seed, spawn_key=(ARRIVALS_STREAM,)))
    view = snapshot.fork
    if snapshot.rate_log is not None:
        # (a view for the rate alone: the replays' schedulers see the fork's own log, as
        # the deciding one sees the pool's)
        view = copy.copy(view)
        view.arrival_log = snapshot.rate_log
    return invent(snapshot.arrivals, view, snapshot.recent, replays, rng)
