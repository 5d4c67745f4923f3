"""The one write path: carries out the core's intents (:mod:`idlegate.operator.core.intents`)
against the API and hands back outcomes, going down one way.

:meth:`Applier.apply` turns each intent into an :class:`~.lanes.Op` on a *lane* of its
workflow (:class:`~.lanes.Lanes`: a pod, the workflow's status, its Events), each a FIFO
worked by its own task, all in parallel: a pod is created before its gate is removed, and
a status write or an Event waiting for the API never delays a pod write (nor takes its
connection, but for a share: `Slots`). The one order across lanes is stated per op
(`Op.after`). An op's run is the intent's write (:func:`~.writes.write`: the requests of
:mod:`.writes`, down to the API client, :mod:`.kube`), which hands the write's outcome to
`on_outcome` (the pools, which route it to the core that decided it): the path's end.
Events go through the recorder (:mod:`.recorder`), an object's status through its status
lane (:class:`~.lanes.StatusLane`: coalesced and paced).

Retries of a failed request are the API client's; a write raises
:class:`~.writes.Retry` for a condition of its own that time resolves. Any other failure
is handed back as ``Refused``, once (for pod writes: the workflow fails and its executors
return to the pool, so no error ever leaves an executor held). How late each write lands
after its decision is ``idlegate_write_lag_seconds`` (:mod:`idlegate.operator.lag.lag`).

The write gate (:class:`~.kube.WriteGate`) is given to the API client, the lanes and the
applier as they are built, so none needs rewiring when
:func:`idlegate.operator.edge.leader.elect` binds it: intents given to a replica that may
not write are dropped, and so is every queued write whose turn comes once it may not.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterable
from functools import partial

from idlegate.operator.core.intents import (
    CreatePod,
    CreateWorkflow,
    DeletePod,
    DeleteWorkflow,
    EvictPod,
    Intent,
    Outcome,
    Owner,
    PatchStatus,
    PostEvent,
    ReleaseStop,
    RemoveGate,
)
from idlegate.operator.edge import writes
from idlegate.operator.edge.lanes import Lanes, Op, StatusLane, lane_of
from idlegate.operator.edge.recorder import EventRecorder
from idlegate.operator.lag.pacing import Priority
from idlegate.operator.metrics import Metrics
from idlegate.operator.nodes.ledger import Releasing

log = logging.getLogger(__name__)

Queued = (
    CreatePod | RemoveGate | EvictPod | ReleaseStop | DeletePod | DeleteWorkflow | CreateWorkflow
)
"""The intents written in their workflow's lanes (a status and an Event: their own lanes)."""


class Applier:
    """Queues intents on the lanes; reports each write's end to `on_outcome`."""

    def __init__(
        self,
        lanes: Lanes,
        events: EventRecorder,
        metrics: Metrics,
        on_outcome: Callable[[Outcome], None],
        *,
        status_interval: float = 0.0,
        now: Callable[[], float] = time.time,
    ) -> None:
        self.lanes, self.events, self.metrics = lanes, events, metrics
        lanes.written = metrics.families.lag.written
        events.dropped = metrics.events_dropped.inc
        self.now = now
        """The operator's clock (a status's condition times)."""
        self.on_outcome = on_outcome
        """Where each write's outcome goes (the core, or the pools that route them to
        theirs): the write path's end."""
        self.status_interval = status_interval
        """Least seconds between two status writes of one object, and how long a PatchStatus
        that is not urgent waits to be sent with later ones (`Pace`)."""
        self._status: dict[tuple[str, str], StatusLane] = {}
        """Each object's status lane, while it has one (it forgets itself once idle)."""
        self._freeing: dict[tuple[str, str], set[asyncio.Event]] = {}
        """Per workflow, the deletions of pods whose executors were given back (each set
        once ended: dropped from here as the next release reads them)."""
        self.releasing: dict[tuple[str, str], Releasing] = {}
        """(namespace, name) of the pods released that a read of the pods may show gated
        still, or not at all, with what they request if known and the node they are pinned
        to (`edge.nodes`: they take room)."""

    def apply(self, intents: Iterable[Intent]) -> None:
        """Queue `intents`, in order (each behind the earlier writes of its lane); none while this
        replica may not write (its lanes' gate: checked again as each queued write's turn comes)."""
        if not self.lanes.gate.open():
            return
        for intent in intents:
            if isinstance(intent, PatchStatus):
                self._patch_status(intent)
            elif isinstance(intent, PostEvent):
                self.events.record(intent.owner, intent.type, intent.reason, intent.message)
            else:
                self._submit(intent)

    def cancel(self, owner: Owner) -> None:
        """The workflow left: its writes not started yet are dropped (a status write held
        for its batch is sent with the next PatchStatus instead)."""
        self.lanes.clear(lane_of(owner))
        for ended in self._freeing.pop(lane_of(owner), ()):
            ended.set()  # (dropped, or running on: the release need not wait for it)
        lane = self._status.get(lane_of(owner))
        if lane is not None:
            lane.dropped()

    async def drain(self, timeout: float) -> None:
        """At shutdown: send the statuses held for batching, wait up to `timeout` s for
        every write to end, then stop the lanes (later intents are dropped, logged)."""
        for lane in list(self._status.values()):
            lane.flush()
        try:
            await self.lanes.wait_idle(timeout)
        except TimeoutError:
            log.warning("Stopping with %d write(s) not done.", self.lanes.pending())
        await self.lanes.close()

    # -- pods, deletions ---------------------------------------------------------------

    def _submit(self, intent: Queued) -> None:
        """Queue the write of `intent` in its lane, behind what it waits for (`_order`)."""
        priority, after, ended = self._order(intent)
        what = f"{type(intent).__name__} {'/'.join(intent.lane)}"
        write = {Priority.RUN: "release", Priority.POD: "pod"}.get(priority, "workflow")
        hand_back = self.on_outcome
        op = Op(
            what,
            partial(
                writes.write, intent=intent, metrics=self.metrics, hand_back=hand_back, ended=ended
            ),
            on_error=partial(
                writes.not_written,
                intent=intent,
                hand_back=hand_back,
                ended=ended,
                releasing=self.releasing,
            ),
            priority=priority,
            after=after,
            write=write,
        )
        self.lanes.submit(lane_of(intent.owner), op, lane=intent.lane)

    def _order(
        self, intent: Queued
    ) -> tuple[Priority, tuple[asyncio.Event, ...], asyncio.Event | None]:
        """The priority of `intent`'s write, what it waits for (a status write it needs,
        the deletions of pods whose executors it hands out), and the event its end sets
        (a deletion that gives an executor back); a release is counted as taking room
        from now on (`releasing`)."""
        if isinstance(intent, CreatePod):
            if not intent.gated:  # (it takes room before a read of the pods shows it)
                self.releasing[(intent.owner.namespace, intent.name)] = (
                    intent.spec.demand,
                    intent.host,
                )
            priority = Priority.POD if intent.gated else Priority.RUN
            return priority, self._after(intent.owner, intent.after_status), None
        if isinstance(intent, RemoveGate):
            demand = intent.spec.demand if intent.spec is not None else None
            self.releasing[(intent.owner.namespace, intent.name)] = demand, intent.host
            # (the executor it hands out may be one of a pod whose deletion was asked before)
            return (
                Priority.RUN,
                (*self._after(intent.owner, intent.after_status), *self._freed()),
                None,
            )
        if isinstance(intent, ReleaseStop):
            return Priority.POD, self._after(intent.owner, intent.after_status), None
        if isinstance(intent, DeletePod):
            ended = asyncio.Event() if intent.frees else None
            if ended is not None:
                self._freeing.setdefault(lane_of(intent.owner), set()).add(ended)
            return Priority.POD, (), ended
        if isinstance(intent, EvictPod):
            return Priority.POD, (), None
        if isinstance(intent, DeleteWorkflow | CreateWorkflow):
            return Priority.STATUS, (), None
        raise TypeError(f"not an intent the applier knows: {intent!r}")

    def _freed(self) -> list[asyncio.Event]:
        """The deletions not ended yet of pods whose executors were given back (those
        ended are dropped)."""
        waiting: list[asyncio.Event] = []
        for key, events in list(self._freeing.items()):
            events.difference_update([e for e in events if e.is_set()])
            if events:
                waiting += events
            else:
                del self._freeing[key]
        return waiting

    # -- status ------------------------------------------------------------------------

    def _patch_status(self, intent: PatchStatus) -> None:
        key = lane_of(intent.owner)
        lane = self._status.get(key)
        if lane is None or lane.owner.uid != intent.owner.uid:
            lane = self._status[key] = StatusLane(
                self.lanes,
                intent.owner,
                interval=self.status_interval,
                now=self.now,
                hand_back=self.on_outcome,
                kept=self._status,
            )
        lane.give(intent)

    def _after(self, owner: Owner, wanted: bool) -> tuple[asyncio.Event, ...]:
        lane = self._status.get(lane_of(owner)) if wanted else None
        if lane is not None:  # (a release waits for it: not held by the pace)
            lane.flush()
        return (lane.landed,) if lane is not None else ()
