"""Carrying out the bridge's decisions against the API: ordered per workflow, retried.

The bridge decides synchronously (one event at a time, in the event loop) and hands the
API writes to the :class:`Actuator` as :class:`Op` objects. Each workflow has its own
FIFO queue worked by one task, so the writes for one workflow happen in the order they
were decided (a pod is created before its gate is removed; an idle slot is in the status
before the slot's release is), while different workflows proceed in parallel. A write
that fails for a reason worth retrying (no response, 409 from a pod of an older workflow
with the same name, 429, 5xx) is retried with back-off; any other failure, an API error or
any other exception, is handed to the op's `on_error`, once (for pod writes: the workflow
fails and its executors return to the pool, so no error ever leaves an executor held).
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Awaitable, Callable, Hashable
from dataclasses import dataclass, field

from idlegate.operator.kube import ApiError, KubeApi
from idlegate.operator.metrics import Metrics

log = logging.getLogger(__name__)


class Retry(Exception):
    """Raised by an op to be retried after the usual back-off (e.g. a name still taken)."""


@dataclass(eq=False)
class Op:
    """One API write (or a short sequence of them) for a workflow."""

    what: str
    """For logs: what the op does, e.g. "create pod wf-a-0"."""
    run: Callable[[KubeApi], Awaitable[None]]
    on_error: Callable[[Exception], None] | None = None
    """Called once for a failure that retrying cannot fix: an ApiError such as 422 on pod
    creation, or any other exception (a bug, or input no check caught); the op is dropped."""
    wanted: Callable[[], bool] = field(default=lambda: True)
    """Checked before each attempt: an op no longer wanted is dropped silently."""


class Actuator:
    """Per-workflow ordered queues of :class:`Op`, worked concurrently across workflows."""

    def __init__(
        self, kube: KubeApi, *, retry_delays: tuple[float, ...], metrics: Metrics | None = None
    ) -> None:
        self.kube = kube
        self.retry_delays = retry_delays
        self.metrics = metrics
        self._queues: dict[Hashable, deque[Op]] = {}
        self._workers: dict[Hashable, asyncio.Task[None]] = {}
        self._idle = asyncio.Event()
        self._idle.set()
        self.done = 0
        """Ops completed (successfully or given up)."""

    def submit(self, key: Hashable, op: Op) -> None:
        """Queue `op` behind the other ops of workflow `key`."""
        self._queues.setdefault(key, deque()).append(op)
        if key not in self._workers:
            self._idle.clear()
            self._workers[key] = asyncio.get_running_loop().create_task(
                self._work(key), name=f"idlegate-actuator-{key}"
            )

    def clear(self, key: Hashable) -> int:
        """Drop the ops of `key` not started yet; returns how many were dropped."""
        queue = self._queues.get(key)
        if not queue:
            return 0
        dropped = len(queue)
        queue.clear()
        return dropped

    def pending(self, key: Hashable | None = None) -> int:
        """Ops not started yet, for one workflow or all."""
        if key is not None:
            return len(self._queues.get(key, ()))
        return sum(len(q) for q in self._queues.values())

    async def wait_idle(self, timeout: float | None = None) -> None:
        """Until every queue is empty and no op runs (tests, shutdown)."""
        await asyncio.wait_for(self._idle.wait(), timeout)

    async def close(self) -> None:
        """Stop all workers; ops not done are dropped (what matters is in the API's state)."""
        workers = list(self._workers.values())
        for task in workers:
            task.cancel()
        await asyncio.gather(*workers, return_exceptions=True)
        self._workers.clear()
        self._queues.clear()
        self._idle.set()

    async def _work(self, key: Hashable) -> None:
        queue = self._queues[key]
        try:
            while queue:
                op = queue.popleft()
                await self._attempt(op)
                self.done += 1
        finally:
            self._workers.pop(key, None)
            if not queue:
                self._queues.pop(key, None)
            if not self._workers:
                self._idle.set()

    async def _attempt(self, op: Op) -> None:
        failures = 0
        while op.wanted():
            try:
                await op.run(self.kube)
                return
            except (ApiError, Retry) as exc:
                status = exc.status if isinstance(exc, ApiError) else -1
                if self.metrics is not None and isinstance(exc, ApiError):
                    self.metrics.api_errors.labels(str(status)).inc()
                if isinstance(exc, ApiError) and not exc.retryable:
                    log.warning("Giving up: %s: %s", op.what, exc)
                    if op.on_error is not None:
                        op.on_error(exc)
                    return
                delay = self.retry_delays[min(failures, len(self.retry_delays) - 1)]
                failures += 1
                log.info("Retrying in %.1f s: %s: %s", delay, op.what, exc)
                await asyncio.sleep(delay)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.exception("Unexpected error in %s; the operation is dropped.", op.what)
                if op.on_error is not None:
                    op.on_error(exc)
                return
