"""Events on DagWorkflows, aggregated the way Kubernetes' own event recorder does it.

An Event that repeats (same involved object, type, reason and message) is not posted
again: the one already posted gets its ``count`` raised and its ``lastTimestamp`` moved
(client-go's ``EventCorrelator`` does the same). The operator's messages are written so
that repetitions are equal (a release says stage, how many tasks, cap and policy, not which
task on which executor), so a 100,000-task stage leaves a handful of Events, not 100,000.

Each workflow gets at most `Settings.max_events_per_workflow` distinct Events; after that,
new messages are folded into one Event per type and reason whose message is the latest one,
prefixed ``(combined from similar events):`` (again as client-go does). Updates of one
Event are at most one per `Settings.event_interval` seconds: repetitions in between only
raise the count that the next update writes. The books are kept for the most recent
:data:`MAX_BOOKS` workflows (an LRU, as client-go's cache of 4096 entries).

Events are posted in the workflow's lane of Events (:mod:`idlegate.operator.actuator`), apart
from its pod writes, which they never delay, and never fail a workflow: an Event that cannot
be posted is logged and dropped.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from idlegate.operator.actuator import EVENTS, Actuator, Op, Priority
from idlegate.operator.kube import ApiError, KubeApi
from idlegate.operator.pods import Owner
from idlegate.operator.status import clip

log = logging.getLogger(__name__)

MAX_BOOKS = 4096
"""Workflows whose posted Events are remembered for aggregation."""
COMBINED = "(combined from similar events): "

EventKey = tuple[str, str, str | None]
"""(type, reason, message); message None is the folded Event of a type and reason."""


@dataclass(slots=True)
class Posted:
    """One Event object the operator posted (or is about to) and its aggregation state."""

    name: str
    type: str
    reason: str
    message: str
    first: str
    last: str
    count: int = 1
    created: bool = False
    """The create has succeeded (updates are patches from then on)."""
    queued: bool = True
    """A write of this Event (its create, or an update) is queued or scheduled."""
    sent_at: float = field(default=float("-inf"))
    """Loop time of its last write."""


def _stamp() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class EventRecorder:
    """Posts and aggregates the Events of the operator (one instance per operator)."""

    def __init__(
        self,
        actuator: Actuator,
        *,
        component: str,
        instance: str,
        per_workflow: int,
        interval: float,
    ) -> None:
        self.actuator = actuator
        self.component = component
        self.instance = instance
        self.per_workflow = per_workflow
        self.interval = interval
        self._books: OrderedDict[str, dict[EventKey, Posted]] = OrderedDict()
        self._last_ns = 0

    def book(self, owner: Owner) -> dict[EventKey, Posted]:
        """The Events posted on `owner` so far (for tests and introspection)."""
        key = owner.uid or f"{owner.namespace}/{owner.name}"
        book = self._books.get(key)
        if book is None:
            book = self._books[key] = {}
            while len(self._books) > MAX_BOOKS:
                self._books.popitem(last=False)
        else:
            self._books.move_to_end(key)
        return book

    def record(self, owner: Owner, type_: str, reason: str, message: str) -> None:
        """An Event on `owner`: posted, or aggregated into an equal one posted before."""
        message = clip(message)
        log.info("%s/%s %s: %s", owner.namespace, owner.name, reason, message)
        book = self.book(owner)
        key: EventKey = (type_, reason, message)
        posted = book.get(key)
        if posted is None and len(book) >= self.per_workflow:
            key, message = (type_, reason, None), clip(COMBINED + message)
            posted = book.get(key)
        stamp = _stamp()
        if posted is None:
            posted = book[key] = Posted(self._name(owner), type_, reason, message, stamp, stamp)
            self._submit(owner, posted)
            return
        posted.count += 1
        posted.last = stamp
        posted.message = message
        if posted.queued:
            return  # the queued write will carry this repetition too
        posted.queued = True
        wait = posted.sent_at + self.interval - asyncio.get_running_loop().time()
        if wait > 0:
            asyncio.get_running_loop().call_later(wait, self._submit, owner, posted)
        else:
            self._submit(owner, posted)

    def _name(self, owner: Owner) -> str:
        # client-go names Events <object>.<unix nanoseconds in hex>; kept strictly
        # increasing here, so that two Events of one instant never share a name
        self._last_ns = max(time.time_ns(), self._last_ns + 1)
        return f"{owner.name}.{self._last_ns:x}"

    def _body(self, owner: Owner, posted: Posted) -> dict[str, Any]:
        return {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": posted.name, "namespace": owner.namespace},
            "involvedObject": owner.object_reference(),
            "type": posted.type,
            "reason": posted.reason,
            "message": posted.message,
            "source": {"component": self.component},
            "reportingComponent": self.component,
            "reportingInstance": self.instance,
            "firstTimestamp": posted.first,
            "lastTimestamp": posted.last,
            "count": posted.count,
        }

    @staticmethod
    def _update(posted: Posted) -> dict[str, Any]:
        return {"count": posted.count, "lastTimestamp": posted.last, "message": posted.message}

    def _submit(self, owner: Owner, posted: Posted) -> None:
        async def run(kube: KubeApi) -> None:
            # what is written is the Event as it is now (repetitions since are included)
            posted.queued = False
            posted.sent_at = asyncio.get_running_loop().time()
            try:
                if posted.created:
                    try:
                        await kube.patch_event(owner.namespace, posted.name, self._update(posted))
                        return
                    except ApiError as exc:
                        if exc.status != 404:  # 404: expired (Events live an hour); post anew
                            raise
                try:
                    await kube.create_event(owner.namespace, self._body(owner, posted))
                except ApiError as exc:
                    if exc.status != 409:
                        raise
                    # an earlier attempt did create it (its response was lost): update it
                    await kube.patch_event(owner.namespace, posted.name, self._update(posted))
                posted.created = True
            except ApiError as exc:
                if exc.retryable:
                    raise
                log.warning("Event %s on %s not posted: %s", posted.reason, owner.name, exc)

        what = f"event {posted.reason} on {owner.name}"
        op = Op(what, run, priority=Priority.EVENT)
        self.actuator.submit((owner.namespace, owner.name), op, lane=EVENTS)
