"""A forecast refresh's frozen request, and `compute`, the one copy of the replays' work.

The operator's pool (`operator.forecasting.refresh`) builds a `ForecastRequest` in the event
loop (a fork of the pool, plain data, and the scheduler to replay or its spec) and hands
it to `compute`: in place (a pool driven without a loop), in a worker thread of the pool
(``--forecast-workers thread``) or in the operator's replay process
(`operator.forecasting.process.ReplayProcess`, ``process``, the default), which builds the
scheduler from its spec once per spec. What comes back is pure: the replays' forecast
(`sim.forecast.PoolForecast`) and the CPU seconds it took. The same request gives the same
forecast in each (tests/test_forecast_refresh_process.py). Pure: no process, no thread,
no kopf, no API.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np

from idlegate.sim import forecast as sim_forecast
from idlegate.sim.cluster import Cluster
from idlegate.sim.forecast_arrivals import Recent, invent
from idlegate.sim.forecast_overtake import Overtake, widen
from idlegate.sim.protocol import Scheduler
from idlegate.sim.rollout import Future as RolloutFuture


@dataclass(frozen=True)
class ForecastRequest:
    """What a refresh sends to where its replays run, frozen in the event loop: a fork of
    the pool, the scheduler to replay (or its spec), and what the replays invent. The
    operator's objects (its workflows) stay behind (`ForecastBook.asked`)."""

    fork: Cluster
    scheduler: Scheduler | None
    """The scheduler to replay; None: the one `spec` builds where the replays run."""
    seed: int
    arrivals: str = "none"
    """What the replays invent (`sim.forecast_arrivals.invent`)."""
    recent: tuple[Recent, ...] = ()
    """The pool's recent arrivals the invented ones copy, frozen."""
    rate_log: list[tuple[float, float]] | None = None
    """The (time, work) arrivals the invented ones' rate is estimated from, when the fork's
    own log lacks those before a restart (`ForecastBook.resumed_log`); None: the fork's."""
    spec: str | None = None
    """The replayed scheduler's spec, when `scheduler` is None (a replay process's)."""
    overtake: Overtake | None = None
    """A live pool's arrivals as counted from its own past, which raise a waiting
    workflow's interval tops when the replays invent none (`sim.forecast_overtake`);
    None: nothing added (a pool that learns no task times, or has seen no gap yet)."""


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
    request: ForecastRequest,
    replays: int,
    budget: int,
    seconds: float | None = None,
    clock: Callable[[], float] = time.thread_time,
    **options: Any,
) -> tuple[sim_forecast.PoolForecast, float]:
    """Worker thread or replay process: the forecast of the request and the CPU seconds
    it took; its replays invent the request's `arrivals` (`futures`), within `budget`
    events and `seconds` of CPU (`sim.forecast.forecast`), and a waiting workflow's start
    is the replays' quantile for those arrivals (`sim.forecast.start_quantile`: later than
    their median where none are invented), as `idlegate forecast evaluate` measured it;
    where none are invented, the request's `overtake` raises the waiting workflows'
    interval tops by the chance of being overtaken (`sim.forecast_overtake.widen`).
    `clock` measures `seconds` (a what-if's: the wall's); `options` go to the forecast."""
    began = time.thread_time()
    scheduler = request.scheduler
    if scheduler is None:  # (a replay process's: built from its spec, once per spec)
        scheduler = scheduler_copy(None, request.spec, None, _BUILT)
    result = sim_forecast.forecast(
        request.fork,
        scheduler,
        seed=request.seed,
        replays=replays,
        budget=budget,
        seconds=seconds,
        clock=clock,
        futures=futures(request, replays),
        start_quantile=sim_forecast.start_quantile(request.arrivals != "none"),
        **options,
    )
    if request.overtake is not None and request.arrivals == "none":
        result = widen(
            result, request.fork, request.overtake, getattr(scheduler, "order_key", None)
        )
    return result, time.thread_time() - began


def futures(request: ForecastRequest, replays: int) -> Iterable[RolloutFuture] | None:
    """The futures a refresh's replays run (one per replay; None: no arrivals invented):
    `sim.forecast_arrivals.invent` on the request's fork and recent arrivals, drawn from
    a generator seeded by the request's seed (`ARRIVALS_STREAM`)."""
    if request.arrivals == "none":
        return None
    rng = np.random.default_rng(np.random.SeedSequence(request.seed, spawn_key=(ARRIVALS_STREAM,)))
    view = request.fork
    if request.rate_log is not None:
        # (a view for the rate alone: the replays' schedulers see the fork's own log, as
        # the deciding one sees the pool's)
        view = copy.copy(view)
        view.arrival_log = request.rate_log
    return invent(request.arrivals, view, request.recent, replays, rng)
