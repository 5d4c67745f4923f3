"""A pool's forecast refresh at run time: when it runs, where its replays run, and the one
apply step that writes what comes back.

The state and pure steps are `operator.forecasting.book.ForecastBook`'s (the module docstring there
says When, How, Where and How right); :class:`ForecastRefresh` adds the runtime: timers on
the operator's clock (`changed`, the scheduled tick, the duty cap's wait: `after_duty`),
the worker thread or the operator's `ReplayProcess` the frozen request goes to, and
`take`, which writes the moved statuses, the metrics and (by `score`) the calibration.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import math
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from idlegate.operator.forecasting.book import DEBOUNCE, INTERVAL, REPLAYS, ForecastBook, after_duty
from idlegate.operator.forecasting.process import ReplayProcess
from idlegate.operator.forecasting.request import ForecastRequest, compute, replayed_spec
from idlegate.sim import forecast as sim_forecast
from idlegate.sim.cluster import Cluster
from idlegate.sim.forecast import PoolForecast
from idlegate.sim.protocol import Scheduler
from idlegate.sim.task_times import TaskTimes

log = logging.getLogger(__name__)


class ForecastRefresh(ForecastBook):
    """One pool's forecasts at run time. `later` arms a timer on the operator's clock
    (`Bridge.later`); `write` takes the DagWorkflows whose status must be written again;
    `metrics` the pool's (`operator.metrics.Metrics`); `process` the operator's replay
    process (None: a worker thread of the pool's own); the rest: `ForecastBook`'s."""

    def __init__(
        self,
        cluster: Cluster,
        scheduler: Callable[[], tuple[Scheduler, str | None, Any]],
        *,
        now: Callable[[], float],
        later: Callable[[str, float, Callable[[], Any]], None],
        write: Callable[[list[Any]], None],
        metrics: Any = None,
        interval: float = INTERVAL,
        debounce: float = DEBOUNCE,
        replays: int = REPLAYS,
        budget: int = sim_forecast.BUDGET,
        seconds: float | None = sim_forecast.SECONDS,
        arrivals: str = "none",
        key: str = "forecast",
        process: ReplayProcess | None = None,
        times: TaskTimes | None = None,
    ) -> None:
        super().__init__(
            cluster, scheduler, now=now, replays=replays, budget=budget, seconds=seconds,
            arrivals=arrivals, times=times,
        )  # fmt: skip
        self.later, self.write, self.metrics = later, write, metrics
        self.interval, self.debounce, self.key = interval, debounce, key
        self.running: asyncio.Future[Any] | None = None
        self.again = False
        """A change came while a refresh ran: refresh again when it ends."""
        self.not_before = -math.inf
        """No refresh starts before this (operator clock; `DUTY`)."""
        self.cpu_clock = time.thread_time
        """The event loop's CPU clock, which charges the fork and the result to `DUTY`."""
        self._charged = 0.0
        """CPU seconds of the running refresh so far (its fork, in the event loop)."""
        self._seen: tuple[int, int, bool] = (0, -1, True)
        self._armed_change = self._ticking = False
        self._first_change = self._last_change = self._change_at = -math.inf
        """When the armed change began, the latest workflow arrived, and the change's
        timer is due (`_on_change`)."""
        self._tick_at = -math.inf
        """When the scheduled refresh is due (one long overdue was lost: a timers restart)."""
        self.process = process
        self.ships = process is not None
        self._executor = (
            None
            if process is not None
            else ThreadPoolExecutor(1, thread_name_prefix="idlegate-forecast")
        )
        self._closed = False

    # -- when ------------------------------------------------------------------------------

    def changed(self) -> None:
        """Event loop, after each event of the pool (cheap: two reads): if its workflows
        changed (one arrived or ended), refresh once for all the changes meanwhile, when
        no workflow has arrived for `debounce` seconds (`_on_change`). The first call also
        arms the scheduled refresh."""
        jobs = self.cluster.jobs
        # (ids grow: an arrival moves the last; the pool's task times becoming ready too)
        seen = (len(jobs), jobs[-1].id if jobs else -1, self.unknown() is None)
        if seen == self._seen or self._closed:
            return
        now = self.now()
        if seen[1] != self._seen[1]:  # (one arrived: a burst may not be over yet)
            self._last_change = now
        self._seen = seen
        self.note_arrivals()
        if not self._ticking or now > self._tick_at + self.interval:  # (none, or lost)
            self._ticking = True
            self._tick_at = now + self.interval
            self._arm(self.key, self._tick_at, self._tick)
        if not self._armed_change:
            self._first_change = now
            self._arm_change(now + self.debounce)

    def _arm(self, key: str, at: float, fire: Callable[[], None]) -> None:
        async def fired() -> None:
            fire()

        try:
            self.later(key, at, fired)
        except RuntimeError:  # (timers not started: a pool driven by hand refreshes by `poke`)
            self._armed_change = self._ticking = False

    def _tick(self) -> None:
        """The scheduled refresh; within a burst (a workflow arrived less than `debounce`
        ago, the change's refresh armed) it leaves the refresh to the change's, which
        comes once the burst is over (`_on_change`)."""
        if self._closed:
            return
        now = self.now()
        self._tick_at = now + self.interval
        if not (self._armed_change and now < self._last_change + self.debounce):
            self.poke()
        self._arm(self.key, self._tick_at, self._tick)

    def _on_change(self) -> None:
        """The change's refresh, once no workflow has arrived for `debounce` seconds (at
        most `interval` after the change): a burst that the operator admits over
        seconds is forecast whole, not its first part, which the rest then overtakes
        (issue 80: the warm pool's first forecasts, made 1 s into a burst, 85 s early)."""
        self._armed_change = False
        due = min(self._last_change + self.debounce, self._first_change + self.interval)
        if due > self._change_at:  # (one arrived since this timer was armed)
            self._arm_change(due)
            return
        self.poke()

    def _arm_change(self, at: float) -> None:
        self._armed_change = True
        self._change_at = at
        self._arm(f"{self.key}-change", at, self._on_change)

    def poke(self) -> None:
        """Event loop: start a refresh now, unless one runs (then one follows it)."""
        if self._closed:
            return
        if self.running is not None:
            self.again = True
            return
        now = self.now()
        if now < self.not_before:  # (the duty cap: once, when it allows)
            if not self._armed_change:
                self._arm_change(self.not_before)
            return
        began = self.cpu_clock()
        unknown = self.unknown()
        if unknown is not None:  # (nothing to replay: said at once, in the loop)
            request = self.request()
            self._charged = self.cpu_clock() - began
            self.take(request, sim_forecast.unavailable(request.fork, unknown), 0.0)
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # (a pool driven without a loop: refresh in place)
            request = self.request()
            self._charged = self.cpu_clock() - began
            self.take(request, *compute(request, self.replays, self.budget, self.seconds))
            return
        try:
            request = self.request()
            self._charged = self.cpu_clock() - began
            if self.process is not None:
                work = self.process.submit(request, self.replays, self.budget, self.seconds)
                self.running = asyncio.wrap_future(work, loop=loop)
            else:
                call = functools.partial(compute, request, self.replays, self.budget, self.seconds)
                self.running = loop.run_in_executor(self._executor, call)
        except Exception as exc:  # a refresh never stops the pool
            self._failed(exc)
            return
        self.running.add_done_callback(functools.partial(self._ended, request))

    def _ended(self, request: ForecastRequest, running: asyncio.Future[Any]) -> None:
        self.running = None
        if self._closed or running.cancelled():
            return
        try:
            self.take(request, *running.result())
        except Exception as exc:
            self._failed(exc)
        if self.again:
            self.again = False
            self.poke()

    def _failed(self, exc: Exception) -> None:
        log.warning(
            "A forecast refresh failed (%s: %s); the pool decides on.", type(exc).__name__, exc
        )
        if self.metrics is not None:
            self.metrics.forecast_refresh_errors.inc()

    async def idle(self) -> None:
        """Until no refresh runs (tests)."""
        while self.running is not None:
            await asyncio.wait([self.running])
            await asyncio.sleep(0)

    def warm(self) -> None:
        """Start the replay process now (the operator's start), not with the first refresh:
        a replay of an empty pool there builds the scheduler the refreshes replay and
        imports what they need, so the first refresh comes as soon as the later ones do.
        A warm-up that fails is logged; the first refresh then starts the process again."""
        if self.process is None or self._closed:
            return
        _, spec, learns = self.scheduler()
        wanted = replayed_spec(spec, learns) or "fifo"  # (an object given: the interpreter)
        warm = ForecastRequest(Cluster(1), None, 0, spec=wanted)
        try:
            warming = self.process.submit(warm, 1, 1, None)
        except Exception as exc:
            log.info(
                "The forecasts' replay process did not start (%s); its first refresh will.", exc
            )
            return
        warming.add_done_callback(_warmed)

    def close(self) -> None:
        self._closed = True
        if self.running is not None:
            self.running.cancel()
            self.running = None
        if self._executor is not None:  # (a replay process is the operator's to close)
            self._executor.shutdown(wait=False, cancel_futures=True)

    # -- the apply step ----------------------------------------------------------------------

    def take(self, request: ForecastRequest, result: PoolForecast, cpu: float) -> list[Any]:
        """Event loop: the refresh's `result` taken back (`ForecastBook.take`), the
        DagWorkflows whose forecast moved written, its CPU observed; the refresh's CPU (its
        fork, `cpu`, and this) is charged to `DUTY`."""
        began = self.cpu_clock()
        now = self.now()
        if self.metrics is not None:
            self.metrics.forecast_refresh_seconds.observe(cpu)
        dirty = super().take(request, result, cpu)
        if dirty:
            self.write(dirty)
        charged = self._charged + cpu + max(0.0, self.cpu_clock() - began)
        self.not_before = after_duty(now, charged)
        return dirty

    def score(self, now: float) -> list[tuple[str, str, float]]:
        """`ForecastBook.score`, each error observed by the pool's metric."""
        out = super().score(now)
        if self.metrics is not None:
            for queue, which, error in out:
                self.metrics.forecast_error.labels(queue, which).observe(error)
        return out

    def _not_resumed(self, what: str, exc: Exception) -> None:
        super()._not_resumed(what, exc)
        if self.metrics is not None:
            self.metrics.forecast_calibration_errors.inc()


def _warmed(warming: Future[Any]) -> None:
    if not warming.cancelled() and (exc := warming.exception()) is not None:
        log.info("The forecasts' replay process did not warm up (%s); its first refresh will.", exc)


# -- in the history, and advise's line --------------------------------------------------------
