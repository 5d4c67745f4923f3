"""Lanes: the operator's API writes, each object's in order, different objects' side by side.

The applier (:mod:`idlegate.operator.edge.applier`) hands each write to :class:`Lanes` as an
:class:`Op` for a workflow key and a *lane* of it (a pod, the workflow's status, its
Events). Each lane is a FIFO worked by its own task, all lanes in parallel: a pod is
created before its gate is removed, and a status write or an Event that waits for the
API never delays a pod write, nor takes the API client's last free connection from one
(:class:`Slots`). The one order across lanes is stated per op (:attr:`Op.after`).

Retries of a failed request are the API client's (:mod:`idlegate.operator.edge.kube`).
An op may raise :class:`Retry` for a condition of its own that time resolves (a pod name
held by an older workflow's pod being deleted): it runs again after `Lanes.wait`. Any
other failure goes to the op's `on_error`, once (for pod writes: the workflow fails and
its executors return to the pool, so no error ever leaves an executor held).
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import itertools
import logging
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Hashable
from dataclasses import dataclass
from enum import IntEnum

from idlegate.operator.edge.gate import WriteGate
from idlegate.operator.edge.kube import ApiError, KubeApi

log = logging.getLogger(__name__)


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
        self._turns: dict[Hashable, tuple[Priority, asyncio.Future[None]]] = {}
        """Each lane's op waiting for a slot, and its priority."""

    @contextlib.asynccontextmanager
    async def taken(self, priority: Priority, lane: Hashable) -> AsyncIterator[None]:
        """Hold a slot for the block (waiting for one, by `priority`, then arrival)."""
        if self.free > 0 and not self._waiting:
            self.free -= 1
        else:
            turn: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            heapq.heappush(self._waiting, (priority, next(self._order), turn))
            self._turns[lane] = (priority, turn)
            try:
                await turn
            except asyncio.CancelledError:
                if turn.done() and not turn.cancelled():
                    self._give()  # handed a slot as it was cancelled: pass it on
                raise
            finally:
                del self._turns[lane]
        try:
            yield
        finally:
            self._give()

    def hurry(self, lane: Hashable, priority: Priority) -> None:
        """An op of `priority` queued behind `lane`'s waiting op lends it that priority: a
        gate removal never waits for its pod's creation to come up among hundreds."""
        waiting = self._turns.get(lane)
        if waiting is not None and priority < waiting[0]:
            self._turns[lane] = (priority, waiting[1])  # (its older entry is skipped)
            heapq.heappush(self._waiting, (priority, next(self._order), waiting[1]))

    def _give(self) -> None:
        while self._waiting:
            _, _, turn = heapq.heappop(self._waiting)
            if not turn.done():
                turn.set_result(None)
                return
        self.free += 1


class Retry(Exception):
    """Raised by an op to run again after `Lanes.wait` (e.g. a pod name still taken)."""


@dataclass(eq=False)
class Op:
    """One API write (or a short sequence of them) for a workflow."""

    what: str
    """For logs: what the op does, e.g. "CreatePod pod/ns/wf-a-0"."""
    run: Callable[[KubeApi], Awaitable[None]]
    on_error: Callable[[Exception], None] | None = None
    """Called once for a failure the op cannot get past (an ApiError such as 422 on pod
    creation, or any other exception: a bug, or input no check caught); the op ends."""
    priority: Priority = Priority.POD
    """Its turn for a slot of the API's concurrency (:class:`Slots`)."""
    after: tuple[asyncio.Event, ...] = ()
    """Not started before these are set: other lanes' writes, to keep an order across
    lanes; each is set however its write ends."""


LaneKey = tuple[Hashable, Hashable]
"""(workflow key, lane)."""


class Lanes:
    """Lanes of :class:`Op` (FIFO each), worked concurrently."""

    def __init__(
        self,
        kube: KubeApi,
        *,
        concurrency: int | None = None,
        wait: float = 1.0,
        gate: WriteGate | None = None,
    ) -> None:
        self.kube = kube
        self.slots = Slots(concurrency) if concurrency is not None else None
        """The API client's concurrency, handed out by priority; None: no limit."""
        self.wait = wait
        """Seconds before an op that raised :class:`Retry` runs again."""
        self._lanes: dict[LaneKey, deque[Op]] = {}
        """The lanes that have ops queued or running."""
        self._workers: dict[LaneKey, asyncio.Task[None]] = {}
        self._idle = asyncio.Event()
        self._idle.set()
        self.closed = False
        """Closed (the operator stops): ops submitted now are dropped."""
        self.gate = gate if gate is not None else WriteGate()
        """Whether this replica may write now (leader election): an op that comes to its
        turn when it may not is dropped, unsent."""

    def submit(self, key: Hashable, op: Op, *, lane: Hashable) -> None:
        """Queue `op` behind the other ops of lane `lane` of workflow `key`."""
        if self.closed:
            log.info("Not written, the operator is stopping: %s.", op.what)
            return
        lane_key = (key, lane)
        self._lanes.setdefault(lane_key, deque()).append(op)
        if self.slots is not None:
            self.slots.hurry(lane_key, op.priority)
        if lane_key not in self._workers:
            self._idle.clear()
            self._workers[lane_key] = asyncio.get_running_loop().create_task(
                self._work(lane_key), name=f"idlegate-lane-{key}-{lane}"
            )

    def clear(self, key: Hashable) -> int:
        """Drop the ops of `key` (every lane) not started yet; returns how many."""
        dropped = 0
        for (of, _), queue in self._lanes.items():
            if of == key:
                dropped += len(queue)
                queue.clear()
        return dropped

    def pending(self) -> int:
        """Ops not started yet."""
        return sum(len(q) for q in self._lanes.values())

    def settled(self, key: Hashable) -> bool:
        """No op of workflow `key` is queued or running: every write decided for it so far
        has ended (what a rebuild needs to tell a deleted pod from one not created yet)."""
        return all(of != key for of, _ in self._lanes)

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
        self._workers.clear()
        self._lanes.clear()
        self._idle.set()

    async def _work(self, lane_key: LaneKey) -> None:
        queue = self._lanes[lane_key]
        try:
            while queue:
                op = queue.popleft()
                for event in op.after:
                    await event.wait()
                await self._attempt(op, min([op.priority, *(o.priority for o in queue)]), lane_key)
        finally:
            self._workers.pop(lane_key, None)
            if not queue and self._lanes.get(lane_key) is queue:
                del self._lanes[lane_key]
            if not self._workers:
                self._idle.set()

    async def _attempt(self, op: Op, priority: Priority, lane_key: LaneKey) -> None:
        while not self.closed:
            try:
                slot = (
                    self.slots.taken(priority, lane_key) if self.slots else contextlib.nullcontext()
                )
                async with slot:
                    if not self.gate.open():  # (checked once its turn has come)
                        log.info("Not written, this replica is not the leader: %s.", op.what)
                        return
                    await op.run(self.kube)
                return
            except Retry as exc:
                log.info("Again in %.1f s: %s: %s", self.wait, op.what, exc)
                await asyncio.sleep(self.wait)
            except Exception as exc:
                if isinstance(exc, ApiError):
                    log.warning("Not done: %s: %s", op.what, exc)
                else:
                    log.exception("Unexpected error in %s; the operation is dropped.", op.what)
                if op.on_error is not None:
                    op.on_error(exc)
                return
