"""kopf's retries of its failed requests while the API server is away, and their log lines
(`idlegate.operator.edge.watchdog`'s docstring has the operator's side of an outage):
:class:`RetryForever`, its backoffs, which never give up; :class:`KopfRetryLog`, the
first failed attempt of each object at WARNING. Pure: no API, no loop.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Iterator

FIRST_RETRY = 0.1
"""Seconds before kopf's first retry of a failed request (doubling up to the cap)."""


class RetryForever:
    """kopf's ``settings.networking.error_backoffs``: 0.1 s, doubling up to `cap`, for ever
    (kopf's default gives up after about 54 s, and the process stops).

    kopf iterates this once per request (so each iteration starts anew) and retries once
    per delay; without a length it never gives up. It takes the first delay before the
    first attempt, so every delay after it is a retry, counted by `on_retry`
    (`idlegate_watch_restarts_total`).
    """

    def __init__(self, cap: float, on_retry: Callable[[], None] | None = None) -> None:
        self.cap = cap
        self.on_retry = on_retry

    def __iter__(self) -> Iterator[float]:
        delay = min(FIRST_RETRY, self.cap)
        yield delay  # (taken before the first attempt)
        while True:
            delay = min(2 * delay, self.cap)
            if self.on_retry is not None:
                self.on_retry()
            yield delay


class KopfRetryLog(logging.Filter):
    """kopf logs each failed attempt of its requests at ERROR ("Request attempt #N failed;
    will retry: PATCH <url> -> <error>"): hundreds of lines for one outage. This filter,
    on kopf's loggers, lets the first such line of each object (its URL without the
    query) through at WARNING and drops its repetitions for `quiet` seconds. kopf's
    other lines pass unchanged."""

    def __init__(self, quiet: float = 60.0) -> None:
        super().__init__()
        self.quiet = quiet
        self._told: dict[str, float] = {}
        """Monotonic time each object's retry was last logged."""
        self._loggers: list[logging.Logger] = []

    def install(self) -> None:
        names = [n for n in logging.root.manager.loggerDict if n.split(".")[0] == "kopf"]
        self._loggers = [logging.getLogger(n) for n in {*names, "kopf.objects"}]
        for logger in self._loggers:
            logger.addFilter(self)

    def uninstall(self) -> None:
        for logger in self._loggers:
            logger.removeFilter(self)
        self._loggers = []

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        if not (message.startswith("Request attempt") and "will retry" in message):
            return True
        what = message.partition(": ")[2].partition(" -> ")[0].partition("?")[0]
        now = time.monotonic()
        if now - self._told.get(what, -math.inf) < self.quiet:
            return False
        if len(self._told) > 4096:  # (forget the objects of long ago)
            self._told = {k: t for k, t in self._told.items() if now - t < self.quiet}
        self._told[what] = now
        record.levelno, record.levelname = logging.WARNING, "WARNING"
        return True


__all__ = ["FIRST_RETRY", "KopfRetryLog", "RetryForever"]
