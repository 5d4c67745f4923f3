"""Idle-slot timers on APScheduler's AsyncIOScheduler, in the operator's event loop.

A timer is armed for the release time persisted in the workflow's status, so after a
restart the same timers are armed again from the status (past ones fire at once). Jobs are
coroutines, so they run in the loop itself (a plain function would run in a thread).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from typing import Protocol

from apscheduler.schedulers.asyncio import AsyncIOScheduler
from apscheduler.triggers.date import DateTrigger

from idlegate.operator.clock import Clock

log = logging.getLogger(__name__)


class Timers(Protocol):
    """What the bridge needs of idle-slot timers (:class:`IdleTimers`, a fake in unit tests)."""

    def arm(self, key: str, at: float, fire: Callable[[], Awaitable[None]]) -> None: ...
    def cancel(self, key: str) -> None: ...


class IdleTimers:
    """Timers keyed by a string, firing a coroutine at a time of the operator's clock."""

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self._scheduler: AsyncIOScheduler | None = None

    def start(self, loop: asyncio.AbstractEventLoop | None = None) -> None:
        """Start in the running loop (call from a coroutine, e.g. kopf's startup handler)."""
        if self._scheduler is not None:
            return
        self._scheduler = AsyncIOScheduler(
            event_loop=loop or asyncio.get_running_loop(), timezone=UTC
        )
        self._scheduler.start()

    def shutdown(self) -> None:
        """Drop every timer (they live on in the status, for the next start)."""
        if self._scheduler is not None:
            self._scheduler.shutdown(wait=False)
            self._scheduler = None

    @property
    def running(self) -> bool:
        return self._scheduler is not None

    def arm(self, key: str, at: float, fire: Callable[[], Awaitable[None]]) -> None:
        """Fire `fire()` at clock time `at` (replacing a timer with the same key)."""
        if self._scheduler is None:
            raise RuntimeError("the idle timers are not started")
        wall = datetime.now(UTC) + timedelta(seconds=self.clock.wall_delay(at - self.clock.now()))
        self._scheduler.add_job(
            fire,
            trigger=DateTrigger(run_date=wall, timezone=UTC),
            id=key,
            name=key,
            replace_existing=True,
            misfire_grace_time=None,
            coalesce=True,
        )

    def cancel(self, key: str) -> None:
        if self._scheduler is None:
            return
        job = self._scheduler.get_job(key)
        if job is not None:
            job.remove()
