"""Whether the API server answers the operator: one shared view, fed by every request.

Every outcome of the operator's own requests is reported here: :meth:`ApiHealth.answered`
for any HTTP answer that is not a 5xx (a 404 or a 409 still proves the server is there),
:meth:`ApiHealth.unanswered` for no response, a timeout or a 5xx. The first unanswered
request starts an *outage*; the next answered one ends it. Three things follow:

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
import logging
import random
from collections.abc import Callable

from idlegate.operator.metrics import Metrics

log = logging.getLogger(__name__)

JITTER = 0.2
"""Relative jitter added to every retry delay, so that writes that failed together do
not all come back at the API in the same instant."""


def retry_delay(backoff: float, retry_after: float | None, rng: random.Random) -> float:
    """Seconds to wait before retrying: the server's Retry-After when it gave one (it knows
    best when it can take the request), else our back-off; plus up to `JITTER` of it."""
    base = retry_after if retry_after is not None else backoff
    return base * (1.0 + JITTER * rng.random())


class ApiHealth:
    """Outage bookkeeping shared by the operator's writes, probes and watches."""

    def __init__(self, metrics: Metrics) -> None:
        self.metrics = metrics
        self.down_since: float | None = None
        """The event loop's time (wall seconds) of the first unanswered request of the
        current outage; None while the API answers."""
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
        """A request got no answer (connection refused or dropped, timeout, 5xx)."""
        if self.down_since is not None:
            return
        self.down_since = asyncio.get_running_loop().time()
        self._answered.clear()
        self.metrics.api_up.set(0)
        log.warning("The API server does not answer (%s); retrying until it does.", what)

    def answered(self) -> None:
        """A request got an answer: the API server is there (ends an outage)."""
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

    async def backoff(self, seconds: float) -> None:
        """Sleep `seconds`, or less: during an outage, until the API answers again."""
        if self.up:
            await asyncio.sleep(seconds)
            return
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._answered.wait(), seconds)
