"""Carrying out the bridge's decisions against the API: in lanes that never wait for each
other, retried until the API takes them.

The bridge decides synchronously (one event at a time, in the event loop) and hands the
API writes to the :class:`Actuator` as :class:`Op` objects, each for a workflow and a
*lane* of it. A lane is a FIFO worked by its own task; lanes, of one workflow or of
different ones, proceed in parallel. The writer (:mod:`idlegate.operator.edge.writes`) gives
each pod its own lane (its creation, gate removal and deletion happen in the order they
were decided: a pod is created before its gate is removed), and each workflow one lane for
its status and one for its Events. So a status write or an Event waiting out its back-off
never delays a pod creation or a gate release, which is what keeps the pool full; nor
does it take the API client's last free connection from one (:class:`Slots`). The one
order across lanes that matters is stated per op (:attr:`Op.after`: the release of a
stage waits for the status write that persists its idle slot).

A write that fails for a reason worth retrying (no response, 409 from a pod of an older
workflow with the same name, 429, 5xx) is retried after a back-off (`retry_delays`, or the
server's Retry-After, with jitter: :func:`idlegate.operator.edge.health.retry_delay`), slept in
:meth:`idlegate.operator.edge.health.ApiHealth.backoff`: the first answer after an outage wakes
every sleeping retry at once and starts its back-off over. Any other failure, an API error
or any other exception, is handed to the op's `on_error`, once (for pod writes: the
workflow fails and its executors return to the pool, so no error ever leaves an executor
held).
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import itertools
import logging
import random
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Hashable
from dataclasses import dataclass, field
from enum import IntEnum

from idlegate.operator.edge.health import ApiHealth, retry_delay
from idlegate.operator.edge.kube import ApiError, KubeApi

log = logging.getLogger(__name__)

STATUS = "status"
"""The lane of a workflow's status writes."""
EVENTS = "events"
"""The lane of a workflow's Events."""


class Priority(IntEnum):
    """Who goes first when more ops are ready than the API concurrency allows."""

    RUN = 0
    """A pod about to run: a gate removal, or a creation without gate."""
    POD = 1
    """Another pod write: a gated creation (ahead of its release), a deletion."""
    STATUS = 2
    EVENT = 3


class Slots:
    """At most `size` ops talking to the API at once (the client's concurrency, so that
    none queues in its thread pool, first come first served); the most urgent waiting op
    takes the next free slot. So a gate removal waits behind no status write or Event."""

    def __init__(self, size: int) -> None:
        self.free = size
        self._waiting: list[tuple[int, int, asyncio.Future[None]]] = []
        self._order = itertools.count()

    @contextlib.asynccontextmanager
    async def taken(self, priority: Priority) -> AsyncIterator[None]:
        """Hold a slot for the block (waiting for one, by `priority`, then arrival)."""
        if self.free > 0 and not self._waiting:
            self.free -= 1
        else:
            turn: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            heapq.heappush(self._waiting, (priority, next(self._order), turn))
            try:
                await turn
            except asyncio.CancelledError:
                if turn.done() and not turn.cancelled():
                    self._give()  # handed a slot as it was cancelled: pass it on
                raise
        try:
            yield
        finally:
            self._give()

    def _give(self) -> None:
        while self._waiting:
            _, _, turn = heapq.heappop(self._waiting)
            if not turn.done():
                turn.set_result(None)
                return
        self.free += 1


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
    priority: Priority = Priority.POD
    """Its turn for a slot of the API's concurrency (:class:`Slots`)."""
    after: asyncio.Event | None = None
    """Not started before this is set: another op's `ended` (of another lane), to keep an
    order across lanes; it is set however that op ends (done, given up or dropped)."""
    ended: asyncio.Event = field(default_factory=asyncio.Event, init=False, repr=False)
    """Set once the op is over: done, given up, or dropped."""


LaneKey = tuple[Hashable, Hashable]
"""(workflow key, lane)."""


class Actuator:
    """Lanes of :class:`Op` (FIFO each), worked concurrently."""

    def __init__(
        self,
        kube: KubeApi,
        *,
        retry_delays: tuple[float, ...],
        retry_after_cap: float,
        health: ApiHealth,
        concurrency: int | None = None,
        rng: random.Random | None = None,
    ) -> None:
        self.kube = kube
        """The API, reporting every request's outcome to `health`
        (:class:`idlegate.operator.edge.health.ObservedApi`)."""
        self.retry_delays = retry_delays
        self.retry_after_cap = retry_after_cap
        self.health = health
        self.slots = Slots(concurrency) if concurrency is not None else None
        """The API client's concurrency, handed out by priority; None: no limit."""
        self.rng = rng or random.Random()
        """The jitter's source (tests pass a seeded one)."""
        self._lanes: dict[LaneKey, deque[Op]] = {}
        self._of_key: dict[Hashable, set[Hashable]] = {}
        """The lanes of each workflow key that have ops queued or running."""
        self._workers: dict[LaneKey, asyncio.Task[None]] = {}
        self._idle = asyncio.Event()
        self._idle.set()
        self.done = 0
        """Ops completed (successfully or given up)."""
        self.closed = False
        """Closed (the operator stops): ops submitted now are dropped."""

    def submit(self, key: Hashable, op: Op, *, lane: Hashable) -> None:
        """Queue `op` behind the other ops of lane `lane` of workflow `key`."""
        if self.closed:
            log.info("Not written, the operator is stopping: %s.", op.what)
            op.ended.set()
            return
        lane_key = (key, lane)
        self._lanes.setdefault(lane_key, deque()).append(op)
        self._of_key.setdefault(key, set()).add(lane)
        if lane_key not in self._workers:
            self._idle.clear()
            self._workers[lane_key] = asyncio.get_running_loop().create_task(
                self._work(lane_key), name=f"idlegate-actuator-{key}-{lane}"
            )

    def clear(self, key: Hashable) -> int:
        """Drop the ops of `key` (every lane) not started yet; returns how many."""
        dropped = 0
        for lane in self._of_key.get(key, ()):
            queue = self._lanes.get((key, lane))
            while queue:
                queue.popleft().ended.set()
                dropped += 1
        return dropped

    def pending(self, key: Hashable | None = None) -> int:
        """Ops not started yet, for one workflow or all."""
        if key is not None:
            return sum(len(self._lanes.get((key, lane), ())) for lane in self._of_key.get(key, ()))
        return sum(len(q) for q in self._lanes.values())

    def settled(self, key: Hashable) -> bool:
        """No op of workflow `key` is queued or running: every write decided for it so far
        has ended (what a rebuild needs to tell a deleted pod from one not created yet)."""
        return key not in self._of_key

    async def wait_idle(self, timeout: float | None = None) -> None:
        """Until every lane is empty and no op runs (tests, shutdown)."""
        await asyncio.wait_for(self._idle.wait(), timeout)

    async def close(self) -> None:
        """Stop all workers; ops not done are dropped (what matters is in the API's state)."""
        self.closed = True
        workers = list(self._workers.values())
        for task in workers:
            task.cancel()
        await asyncio.gather(*workers, return_exceptions=True)
        for queue in self._lanes.values():
            for op in queue:
                op.ended.set()
        self._workers.clear()
        self._lanes.clear()
        self._of_key.clear()
        self._idle.set()

    async def _work(self, lane_key: LaneKey) -> None:
        queue = self._lanes[lane_key]
        try:
            while queue:
                op = queue.popleft()
                try:
                    if op.after is not None:
                        await op.after.wait()
                    await self._attempt(op)
                finally:
                    op.ended.set()
                self.done += 1
        finally:
            self._workers.pop(lane_key, None)
            if not queue and self._lanes.get(lane_key) is queue:
                del self._lanes[lane_key]
                key, lane = lane_key
                lanes = self._of_key.get(key)
                if lanes is not None:
                    lanes.discard(lane)
                    if not lanes:
                        del self._of_key[key]
            if not self._workers:
                self._idle.set()

    async def _attempt(self, op: Op) -> None:
        failures = 0
        while op.wanted():
            try:
                if self.slots is None:
                    await op.run(self.kube)
                else:
                    async with self.slots.taken(op.priority):
                        await op.run(self.kube)
                return
            except (ApiError, Retry) as exc:
                wait = None
                if isinstance(exc, ApiError):
                    if not exc.retryable:
                        log.warning("Giving up: %s: %s", op.what, exc)
                        if op.on_error is not None:
                            op.on_error(exc)
                        return
                    wait = exc.retry_after
                backoff = self.retry_delays[min(failures, len(self.retry_delays) - 1)]
                delay = retry_delay(backoff, wait, self.rng, cap=self.retry_after_cap)
                failures += 1
                log.info("Retrying in %.1f s: %s: %s", delay, op.what, exc)
                if await self.health.backoff(delay):
                    failures = 0  # the API is back: a new failure starts the back-off over
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.exception("Unexpected error in %s; the operation is dropped.", op.what)
                if op.on_error is not None:
                    op.on_error(exc)
                return
