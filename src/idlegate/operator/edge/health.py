"""Whether the API server answers the operator: one shared view, fed by every request.

Every outcome of the operator's own requests is reported here: each failed try as it
happens, from the API client's retries (:meth:`ApiHealth.report`,
:mod:`idlegate.operator.edge.kube`), and each request's end (:class:`ObservedApi`, through
which they all go). An HTTP answer that is not a 5xx is an answer (a 404 or a 409 still
proves the server is there; a 429 is an answer too, counted as throttled); no response,
a timeout or a 5xx is none. The first unanswered try starts an *outage* if none is
answered for the next second (:data:`GRACE`); the next answered one ends it. Then:

1. While the API is down, `idlegate_api_up` is 0 (the other gauges are stale), and the
   readiness probe says not ready; liveness stays healthy, since restarting the process
   would not bring the API back.
2. When an outage ends, its length is added to `idlegate_api_unreachable_seconds` and each
   callback given to :meth:`ApiHealth.on_recovery` runs (a Warning Event, a resync of the
   state from the API).
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from idlegate.operator.edge.kube import ApiError, KubeApi
from idlegate.operator.edge.metrics import Metrics

log = logging.getLogger(__name__)
T = TypeVar("T")

GRACE = 1.0
"""Seconds of unanswered requests, with no answer in between, that make an outage. One
dropped connection among answers is no outage, nor is one endpoint that keeps failing
while the others answer: either would otherwise flap the API up and down, rebuilding the
state at each flap."""


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
        self.metrics.api_up.set(0)
        log.warning("The API server does not answer (%s); retrying until it does.", what)

    def answered(self) -> None:
        """A request got an answer: the API server is there (ends an outage)."""
        self._first_miss = None
        if self.down_since is None:
            return
        seconds = max(0.0, asyncio.get_running_loop().time() - self.down_since)
        self.down_since = None
        self.metrics.api_up.set(1)
        self.metrics.api_unreachable.inc(seconds)
        log.warning("The API server answers again after %.1f s.", seconds)
        for callback in list(self._on_recovery):
            try:
                callback(seconds)
            except Exception:  # one failing reaction must not stop the others
                log.exception("A reaction to the API's recovery failed.")

    def report(self, what: str, status: int) -> None:
        """A try of a request failed with `status` (0: no response); the client retries it."""
        self.metrics.api_errors.labels(str(status)).inc()
        if status == 429:
            self.metrics.api_throttled.inc()
        if 0 < status < 500:
            self.answered()
        else:
            self.unanswered(what)


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
            self.health.report(f"{what}: {exc}", exc.status)
            raise
        self.health.answered()
        return result
