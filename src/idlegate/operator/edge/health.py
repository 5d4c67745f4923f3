"""Whether the API server answers the operator: one shared view, fed by every request.

Every outcome of the operator's own requests is reported here (by :class:`ObservedApi`,
through which they all go): :meth:`ApiHealth.answered` for any HTTP answer that is not a
5xx (a 404 or a 409 still proves the server is there), :meth:`ApiHealth.unanswered` for no
response, a timeout or a 5xx. The first unanswered request starts an *outage* if none is
answered for the next second (:data:`GRACE`); the next answered one ends it. Three things
follow:

1. A write waiting out its back-off sleeps in :meth:`ApiHealth.backoff`: the first answer
   after an outage wakes every such sleep at once, so a 30 s back-off that began just
   before the API came back does not keep the pool idle for 30 s.
2. While the API is down, `idlegate_api_up` is 0 (the other gauges are stale), and the
   readiness probe says not ready; liveness stays healthy, since restarting the process
   would not bring the API back.
3. When an outage ends, its length is added to `idlegate_api_unreachable_seconds` and each
   callback given to :meth:`ApiHealth.on_recovery` runs (a Warning Event, a resync of the
   state from the API).

A 429 is an answer (the server is up, only busy); it is counted as throttled and the
write waits for the server's Retry-After (:func:`retry_delay`).
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import random
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from idlegate.operator.edge.kube import ApiError, KubeApi
from idlegate.operator.edge.metrics import Metrics

log = logging.getLogger(__name__)
T = TypeVar("T")

GRACE = 1.0
"""Seconds of unanswered requests, with no answer in between, that make an outage. One
dropped connection among answers is no outage (its write retries after its back-off), nor
is one endpoint that keeps failing while the others answer: either would otherwise flap
the API up and down, waking every retry and rebuilding the state at each flap."""
JITTER = 0.2
"""Relative jitter added to every retry delay, so that writes that failed together do
not all come back at the API in the same instant."""


def retry_delay(
    backoff: float, retry_after: float | None, rng: random.Random, *, cap: float | None = None
) -> float:
    """Seconds to wait before retrying: the server's Retry-After when it gave one (it knows
    best when it can take the request), else our back-off; plus up to `JITTER` of it. A
    Retry-After above `cap` is taken as `cap` (a server asking for an hour must not stop
    the operator's writes for an hour)."""
    base = retry_after if retry_after is not None else backoff
    if cap is not None:
        base = min(base, cap)
    return base * (1.0 + JITTER * rng.random())


class ApiHealth:
    """Outage bookkeeping shared by the operator's writes, probes and watches."""

    def __init__(self, metrics: Metrics, *, grace: float = GRACE) -> None:
        self.metrics = metrics
        self.grace = grace
        self.down_since: float | None = None
        """The event loop's time (wall seconds) of the first unanswered request of the
        current outage; None while the API answers."""
        self._first_miss: float | None = None
        """Loop time of the first unanswered request since the last answer."""
        self._answered = asyncio.Event()
        self._answered.set()
        self._on_recovery: list[Callable[[float], None]] = []

    @property
    def up(self) -> bool:
        return self.down_since is None

    def on_recovery(self, callback: Callable[[float], None]) -> None:
        """Call `callback(outage_seconds)` each time an outage ends."""
        self._on_recovery.append(callback)

    def unanswered(self, what: str) -> None:
        """A request got no answer (connection refused or dropped, timeout, 5xx). It is an
        outage once requests have gone unanswered for `grace` seconds with no answer in
        between (it began with the first of them)."""
        if self.down_since is not None:
            return
        now = asyncio.get_running_loop().time()
        if self._first_miss is None:
            self._first_miss = now
        if now - self._first_miss < self.grace:
            return
        self.down_since = self._first_miss
        self._answered.clear()
        self.metrics.api_up.set(0)
        log.warning("The API server does not answer (%s); retrying until it does.", what)

    def answered(self) -> None:
        """A request got an answer: the API server is there (ends an outage)."""
        self._first_miss = None
        if self.down_since is None:
            return
        seconds = max(0.0, asyncio.get_running_loop().time() - self.down_since)
        self.down_since = None
        self._answered.set()
        self.metrics.api_up.set(1)
        self.metrics.api_unreachable.inc(seconds)
        log.warning("The API server answers again after %.1f s.", seconds)
        for callback in list(self._on_recovery):
            try:
                callback(seconds)
            except Exception:  # one failing reaction must not stop the others
                log.exception("A reaction to the API's recovery failed.")

    async def backoff(self, seconds: float) -> bool:
        """Sleep `seconds`, or less: during an outage, until the API answers again. True if
        the API's return cut the sleep short (a retry may start its back-off over)."""
        if self.up:
            await asyncio.sleep(seconds)
            return False
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._answered.wait(), seconds)
            return True
        return False


class ObservedApi:
    """A :class:`~idlegate.operator.edge.kube.KubeApi` whose every request reports its outcome:
    to :class:`ApiHealth` (answered or not) and to the metrics (`idlegate_api_errors_total`
    by status, `idlegate_api_throttled_requests_total` for a 429). The operator's own reads
    and writes all go through one of these: each coroutine method of `kube` is observed."""

    def __init__(self, kube: KubeApi, health: ApiHealth) -> None:
        self.inner = kube
        self.health = health

    def __getattr__(self, name: str) -> Any:
        method = getattr(self.inner, name)
        if not inspect.iscoroutinefunction(method):
            return method

        async def observed(*args: Any, **kwargs: Any) -> Any:
            return await self._observe(name, method(*args, **kwargs))

        return observed

    async def _observe(self, what: str, call: Awaitable[T]) -> T:
        try:
            result = await call
        except ApiError as exc:
            metrics = self.health.metrics
            metrics.api_errors.labels(str(exc.status)).inc()
            if exc.status == 429:
                metrics.api_throttled.inc()
            if exc.answered:
                self.health.answered()
            else:
                self.health.unanswered(f"{what}: {exc}")
            raise
        self.health.answered()
        return result
