"""The edge of one pool: the core (:class:`idlegate.operator.core.core.Core`) wired to the
API, the operator's clock and its timers.

The core says what to write (intents, :mod:`idlegate.operator.core.intents`);
:meth:`Bridge.carry_out` hands each, as it is made, to the applier (which writes it in its
lane and hands the core its outcome) or to the timers. What is read from the API is
handed in by :mod:`idlegate.operator.edge.intake`. Everything runs in the operator's event
loop, one event at a time, synchronously.
"""

from __future__ import annotations

from idlegate.operator.core.core import Core
from idlegate.operator.core.intents import CancelTimer, CancelWrites, Intent, SetTimer, Timing
from idlegate.operator.edge.applier import Applier
from idlegate.operator.edge.events import EventRecorder
from idlegate.operator.edge.kube import KubeApi
from idlegate.operator.edge.lanes import Lanes
from idlegate.operator.edge.timers import Timers
from idlegate.operator.features.cleanup import Cleanup
from idlegate.operator.features.history import HistoryRecorder
from idlegate.operator.features.lifecycle import Lifecycle
from idlegate.operator.features.planning import planning_worker
from idlegate.operator.metrics import Metrics
from idlegate.operator.settings import Settings
from idlegate.sim.protocol import Scheduler


class Bridge(Core):
    """A pool's core, its intents carried out by the applier and the timers."""

    def __init__(
        self,
        settings: Settings,
        kube: KubeApi,
        scheduler: Scheduler,
        *,
        metrics: Metrics,
        timers: Timers,
        beside: Bridge | None = None,
    ) -> None:
        super().__init__(settings, scheduler, metrics=metrics)
        self.intents.add = self.carry_out
        self.kube = kube
        """The API (the applier writes; :mod:`idlegate.operator.edge.intake` reads)."""
        self.timers = timers
        self._last = float("-inf")
        if beside is not None:  # another pool's: one applier, history sink and cleanup for all
            self.applier, self.cleanup = beside.applier, beside.cleanup
            self.history = HistoryRecorder(settings, metrics, self.intents, beside.history)
        else:
            lanes = Lanes(self.kube, concurrency=settings.api_concurrency)
            self.applier = Applier(
                lanes,
                EventRecorder(lanes, settings),
                metrics,
                self.outcome,
                status_interval=settings.status_interval,
                now=self.now,
            )
            self.history = HistoryRecorder(settings, metrics, self.intents)
            self.cleanup = Cleanup(settings, self.intents, self.kube, timers)
        self.lifecycle = Lifecycle(self, self.kube, timers)
        self.planning = planning_worker(self)

    @property
    def lanes(self) -> Lanes:
        return self.applier.lanes

    def now(self) -> float:
        """The operator's clock, never going back (the state machine refuses to): one
        reading shared by the core and its writes."""
        self._last = max(self._last, self.settings.clock.now())
        return self._last

    def carry_out(self, intent: Intent | Timing) -> None:
        """Queue the write (or set the timer) `intent` asks for."""
        match intent:
            case SetTimer(key, at, owner, stage):
                where, uid = (owner.namespace, owner.name), owner.uid

                async def fire() -> None:
                    self.idle_expired(where, uid, stage)

                self.timers.arm(key, at, fire)
            case CancelTimer(key):
                self.timers.cancel(key)
            case CancelWrites(owner):
                self.applier.cancel(owner)
            case _:
                self.applier.apply((intent,))
