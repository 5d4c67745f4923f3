"""One-shot timers (idle slots, deadlines, TTLs, a cron's next run) on the event loop.

A timer is armed for a time of the operator's clock, usually one persisted in the status
(an idle slot's release, a deadline), so a restart arms the same timers again (past ones
fire at once). It is the loop's own ``call_later``, after the clock's `wall_delay`; the
coroutine it fires runs as a task of the loop, and a newer timer of the same key
replaces it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from idlegate.api.settings import Clock

log = logging.getLogger(__name__)


class Timers:
    """Timers keyed by a string, firing a coroutine at a time of the operator's clock (unit
    tests use a fake with `arm` and `cancel` that they fire by hand)."""

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self._loop: asyncio.AbstractEventLoop | None = None
        self._armed: dict[str, asyncio.TimerHandle] = {}
        self._firing: set[asyncio.Task[None]] = set()

    def start(self) -> None:
        """Arm in the running loop from now on (call from a coroutine, e.g. kopf's startup)."""
        self._loop = asyncio.get_running_loop()

    def shutdown(self) -> None:
        """Drop every timer (they live on in the status, for the next start)."""
        for handle in self._armed.values():
            handle.cancel()
        self._armed.clear()
        for task in self._firing:
            task.cancel()
        self._loop = None

    def arm(self, key: str, at: float, fire: Callable[[], Awaitable[None]]) -> None:
        """Fire `fire()` at clock time `at` (replacing a timer with the same key)."""
        if self._loop is None:
            raise RuntimeError("the idle timers are not started")
        self.cancel(key)
        delay = self.clock.wall_delay(at - self.clock.now())
        self._armed[key] = self._loop.call_later(delay, self._fire, key, fire)

    def cancel(self, key: str) -> None:
        handle = self._armed.pop(key, None)
        if handle is not None:
            handle.cancel()

    def _fire(self, key: str, fire: Callable[[], Awaitable[None]]) -> None:
        self._armed.pop(key, None)
        task = asyncio.get_running_loop().create_task(self._run(key, fire), name=key)
        self._firing.add(task)
        task.add_done_callback(self._firing.discard)

    @staticmethod
    async def _run(key: str, fire: Callable[[], Awaitable[None]]) -> None:
        try:
            await fire()
        except Exception:  # one failing timer must not stop the others
            log.exception("Timer %s failed.", key)
