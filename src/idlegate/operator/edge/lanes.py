"""The lanes the writes go in (:class:`Lanes`): one FIFO per lane of a workflow (a pod, the
workflow's status, its Events), each worked by its own task, all in parallel, so that one
object's writes keep their order and one workflow's blocked write never blocks another's;
the one order across lanes is stated per op (:attr:`Op.after`). The API client's
concurrency goes to the most urgent op waiting (:class:`~idlegate.operator.lag.pacing.Slots`).
An object's status writes are one lane of their own (:class:`StatusLane`): one at a time,
coalesced and paced.

A lane runs each op's write (a function of :mod:`.writes`, bound to what it writes): a
:class:`~.writes.Retry` runs it again after `Lanes.wait`, any other failure goes to the
op's `on_error`, once. The write gate (:class:`~.kube.WriteGate`) is checked as each op's
turn comes: one queued while this replica may write and run once it may not is dropped.
Lanes know nothing of intents: the applier (:mod:`.applier`) turns those into ops.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import Counter, deque
from collections.abc import Awaitable, Callable, Hashable, MutableMapping
from dataclasses import dataclass, field

from idlegate.api.kinds import KIND
from idlegate.operator.core.intents import Owner, PatchStatus
from idlegate.operator.edge import writes
from idlegate.operator.edge.kube import ApiError, KubeApi, WriteGate
from idlegate.operator.edge.writes import Retry
from idlegate.operator.lag.pacing import Pace, Priority, Slots

log = logging.getLogger(__name__)

STATUS = "status"
"""The lane of an object's status writes (`StatusLane`)."""


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
    write: str = ""
    """Its success's label in `Lanes.written`, its lag read from `since` (made, by default)."""
    since: float = field(default_factory=lambda: asyncio.get_running_loop().time())
    dropped: Callable[[], object] = lambda: None
    """Told if it is dropped unsent (its workflow left, this replica may not write)."""


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
        self.queued: Counter[Hashable] = Counter()
        """Ops not started yet, by lane name (e.g. `EVENTS`)."""
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
        self.written: Callable[[str, float], None] = lambda write, since: None
        """Told of each op that succeeded (`Lag.written`: ``idlegate_write_lag_seconds``)."""

    def submit(self, key: Hashable, op: Op, *, lane: Hashable) -> None:
        """Queue `op` behind the other ops of lane `lane` of workflow `key`."""
        if self.closed:
            log.info("Not written, the operator is stopping: %s.", op.what)
            return
        lane_key = (key, lane)
        self._lanes.setdefault(lane_key, deque()).append(op)
        self.queued[lane] += 1
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
        for (of, lane), queue in self._lanes.items():
            if of == key:
                dropped += len(queue)
                self.queued[lane] -= len(queue)
                while queue:
                    queue.popleft().dropped()
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
                self.queued[lane_key[1]] -= 1
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
                        op.dropped()
                        return
                    await op.run(self.kube)
                self.written(op.write, op.since)
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


class StatusLane:
    """One object's status writes: one at a time, coalesced (a PatchStatus not sent yet is
    replaced by the next one) and paced (`Pace`: one per status interval at most, a change
    that is not urgent batched); `landed` is set once the latest has ended. It forgets
    itself (from `lanes_by_owner`, where the applier keeps it) once idle and past its pace;
    each write's outcome goes to `hand_back`, its status read at `now()` as it is sent."""

    def __init__(
        self,
        lanes: Lanes,
        owner: Owner,
        *,
        interval: float,
        now: Callable[[], float],
        hand_back: writes.HandBack,
        kept: MutableMapping[tuple[str, str], StatusLane],
    ) -> None:
        self.lanes, self.owner, self.now, self.hand_back = lanes, owner, now, hand_back
        self.kept = kept
        self.waiting: PatchStatus | None = None
        self.queued: Op | None = None
        self.timer: asyncio.TimerHandle | None = None
        self.pace = Pace(interval)
        self.landed = asyncio.Event()
        self.landed.set()

    def give(self, intent: PatchStatus) -> None:
        self.waiting = intent
        self.landed.clear()
        if intent.urgent and self.queued is not None:  # (not counts only: hurried)
            self.queued.priority = Priority.STATUS
            if (slots := self.lanes.slots) is not None:
                slots.hurry((lane_of(self.owner), STATUS), Priority.STATUS)
        self.pace.change(asyncio.get_running_loop().time(), intent.urgent)
        self._wake()

    def _wake(self) -> None:
        """Send what waits once the pace allows, else wake then; idle and past its pace,
        the lane is forgotten (a sent one's end wakes it)."""
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        if self.queued is not None:
            return
        loop = asyncio.get_running_loop()
        at = self.pace.due() if self.waiting is not None else self.pace.idle_until()
        if at is not None and at > loop.time():
            self.timer = loop.call_at(at, self._wake)
        elif self.waiting is not None:
            self.flush()
        elif self.kept.get(lane_of(self.owner)) is self:
            del self.kept[lane_of(self.owner)]

    def flush(self) -> None:
        """Send what waits now, whatever the pace (a drain; a release waits for it)."""
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        if self.queued is not None or self.waiting is None:
            return
        since = self.pace.sent(asyncio.get_running_loop().time())  # (its lag's start)
        priority = Priority.STATUS if self.waiting.urgent else Priority.COUNTS
        what = f"status of {self.owner.name}"
        self.queued = Op(what, self._send, priority=priority, write="status", since=since)
        self.lanes.submit(lane_of(self.owner), self.queued, lane=STATUS)

    def dropped(self) -> None:
        """The workflow left and the lanes dropped its writes not started: the one held
        or queued here goes too (the next PatchStatus carries the whole state anyway)."""
        self.queued, self.waiting = None, None
        self._ended()

    async def _send(self, kube: KubeApi) -> None:
        intent, self.queued, self.waiting = self.waiting, None, None
        if intent is None:
            return
        outcome = await writes.send_status(kube, intent, self.now())
        self._ended()
        self.hand_back(outcome)

    def _ended(self) -> None:
        if self.waiting is None:  # (else one given meanwhile goes as the pace allows)
            self.landed.set()
        self._wake()


def lane_of(owner: Owner) -> tuple[str, str]:
    """The lanes' key of a workflow's writes (another kind's apart from a DagWorkflow of
    the same name)."""
    return (owner.namespace, owner.name if owner.kind == KIND else f"{owner.kind}/{owner.name}")
