"""The operator's Events (core/v1, shown by ``kubectl describe``; :class:`EventRecorder`).

Each goes in its workflow's lane of Events (:mod:`.lanes`), and takes the API's
connections right after the releases (`Priority`): a burst of gated creations (written
ahead of need) or status writes never holds back the Events saying what was decided. At
most `EVENTS_QUEUED` wait: one more is dropped, counted and logged, as client-go's
recorder drops Events past its queue, so a stalled API never grows the operator's memory.
One that cannot be posted is logged and dropped (:func:`~.writes.post_event`), it never
fails a workflow. An Event said again adds to its count, and an object's distinct Events
are bounded (:mod:`idlegate.operator.lag.pacing`).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterable
from functools import partial

from idlegate.api.settings import Settings
from idlegate.api.status import clip
from idlegate.operator.core.intents import Owner
from idlegate.operator.edge import writes
from idlegate.operator.edge.kube import ApiError, KubeApi, identity
from idlegate.operator.edge.lanes import Lanes, Op
from idlegate.operator.lag.pacing import SERIES_SECONDS, EventBook, Priority, Series

log = logging.getLogger(__name__)

EVENTS = "events"
"""The lane of a workflow's Events (`EventRecorder`)."""
EVENTS_QUEUED = 1000
"""Events that may wait to be written (client-go's recorder queues as many): past them an
Event is dropped (`idlegate_events_dropped_total`)."""


class EventRecorder:
    """Posts the Events of the operator (one instance per operator)."""

    def __init__(self, lanes: Lanes, settings: Settings) -> None:
        self.lanes = lanes
        self.component, self.instance = settings.component, identity()
        """The Events' component, and reporting instance: this replica (two under one Pod
        name differ)."""
        self._book = EventBook(
            settings.max_events_per_workflow, self.component, self.instance, join=True
        )
        self._there: set[str] = set()
        """Names of the component's Events the API server had when `recall` read them."""
        self._held: list[tuple[Owner, Series, bool]] | None = None
        """Events recorded while `recall` reads (None: it does not)."""
        self._reading: asyncio.Task[None] | None = None
        self.dropped: Callable[[], None] = lambda: None
        """Told of each Event dropped past `EVENTS_QUEUED` (the metric's)."""
        self._dropping = False
        """Events are being dropped (logged at the first, and when the queue has room)."""

    def recall(self, kube: KubeApi, namespaces: Iterable[str | None]) -> None:
        """Read the names of the Events this component posted before (an earlier leader,
        this replica before a restart), so that an equal one is not posted again: one list
        per namespace at a takeover, not a post refused (409) per Event. Events recorded
        meanwhile wait for the read."""
        if self._reading is not None:
            return
        self._held = []

        async def read() -> None:
            try:
                for namespace in namespaces:
                    found = await kube.list_events(
                        namespace, f"reportingComponent={self.component}"
                    )
                    self._there.update(e["metadata"]["name"] for e in found)
            except ApiError as exc:
                log.info(
                    "Cannot read the Events posted before (%s): equal ones are posted again.", exc
                )
            finally:  # (whatever the read met, the Events held go)
                held, self._held = self._held or [], None
                for item in held:
                    self._submit(*item)

        self._reading = asyncio.ensure_future(read())

    def record(self, owner: Owner, type_: str, reason: str, message: str) -> None:
        """An Event on `owner`: posted, or counted if an equal one was (`EventBook`)."""
        message = clip(message)
        log.info("%s/%s %s: %s", owner.namespace, owner.name, reason, message)
        if self._full():  # (before the book: an equal one said later is posted)
            return
        loop = asyncio.get_running_loop()
        series = self._book.record(owner, (type_, reason, message), time.time(), loop.time())
        if series is not None and series.count == 1:
            self._submit(owner, series, True)
        elif series is not None and not (series.pending or series.waits):  # (its count: 30 s)
            series.pending, at = True, series.patched + SERIES_SECONDS
            loop.call_at(at, self._submit, owner, series, False)

    def _full(self) -> bool:
        """Whether `EVENTS_QUEUED` Events wait to be written: the next one is dropped,
        counted, and the first of a run of them logged."""
        if self.lanes.queued[EVENTS] < EVENTS_QUEUED:
            if self._dropping:
                self._dropping = False
                log.info("The Events' queue has room again: Events are written again.")
            return False
        self.dropped()
        if not self._dropping:
            log.warning(
                "%d Events wait to be written: later ones are dropped until they go.",
                EVENTS_QUEUED,
            )
        self._dropping = True
        return True

    def _submit(self, owner: Owner, series: Series, post: bool) -> None:
        """Post `series`' Event in `owner`'s lane of Events (`post`), or write its count."""
        if self._held is not None:
            self._held.append((owner, series, post))
            return
        if post and series.name in self._there:  # (posted before: not again)
            series.posted()
            return
        if not post and self._full():  # (its count: written with the next one said)
            series.pending = False
            return
        run = partial(writes.post_event, owner=owner, series=series, post=post)
        what, write = f"event {series.name}", "event" if post else ""
        dropped = series.posted if post else (lambda: None)
        op = Op(what, run, priority=Priority.EVENT, write=write, dropped=dropped)
        self.lanes.submit((owner.namespace, owner.name), op, lane=EVENTS)
