"""The operator's Events (core/v1, shown by ``kubectl describe``), posted through its API
client in each workflow's lane of Events (:mod:`idlegate.operator.edge.lanes`), apart from
its pod writes, which they never delay; an Event that cannot be posted is logged and
dropped, it never fails a workflow.

Only a tiny dedup: an Event equal to one posted on the same object before (type, reason,
message) is not posted again, and an object gets at most `per_workflow` distinct Events,
after which only the first of each new type and reason is posted (a workflow's Failed or
Succeeded always is). The operator's messages are written so that repetitions are equal
(a release names the stage, how many tasks, the cap and the policy, not which task on
which executor), so a stage of 100,000 tasks leaves a handful of Events, not 100,000.

An Event is named after what makes it equal (its object, type, reason and message), so
the API server itself refuses an equal one (409) that a restarted operator posts again
with its books empty (an Argo Workflow's Accepted and Estimated as it is admitted again):
the dedup holds across restarts for as long as the API keeps the Event.
"""

from __future__ import annotations

import hashlib
import logging
import os
import socket
from collections import OrderedDict
from datetime import UTC, datetime
from typing import Any

from idlegate.api.status import clip
from idlegate.operator.core.pods import Owner
from idlegate.operator.edge.kube import ApiError, KubeApi
from idlegate.operator.edge.lanes import Lanes, Op, Priority
from idlegate.operator.settings import Settings

log = logging.getLogger(__name__)

MAX_BOOKS = 4096
"""Objects whose posted Events are remembered (the least recent are forgotten)."""


class EventRecorder:
    """Posts the Events of the operator (one instance per operator)."""

    def __init__(self, lanes: Lanes, settings: Settings) -> None:
        self.lanes = lanes
        self.component = settings.component
        self.instance = os.environ.get("POD_ID") or socket.gethostname()
        """The Events' reporting instance: this replica's Pod."""
        self.per_workflow = settings.max_events_per_workflow
        self._books: OrderedDict[str, set[tuple[str, str, str | None]]] = OrderedDict()

    def record(self, owner: Owner, type_: str, reason: str, message: str) -> None:
        """An Event on `owner`: posted, unless an equal one was (see the module docstring)."""
        message = clip(message)
        log.info("%s/%s %s: %s", owner.namespace, owner.name, reason, message)
        key = owner.uid or f"{owner.namespace}/{owner.name}"
        book = self._books.pop(key, set())
        self._books[key] = book
        while len(self._books) > MAX_BOOKS:
            self._books.popitem(last=False)
        posted = sum(m is not None for _, _, m in book)
        if (type_, reason, message) in book or (
            posted >= self.per_workflow and (type_, reason, None) in book
        ):
            return
        book |= {(type_, reason, message), (type_, reason, None)}
        self._submit(owner, self._body(owner, key, type_, reason, message))

    def _body(
        self, owner: Owner, key: str, type_: str, reason: str, message: str
    ) -> dict[str, Any]:
        # <object>.<16 hex digits>, as client-go's names; the digits are those of the book's
        # key (the module docstring), not the time: an equal Event gets the same name
        equal = "\0".join((key, type_, reason, message)).encode()
        name = f"{owner.name}.{hashlib.sha256(equal).hexdigest()[:16]}"
        stamp = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        return {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": name, "namespace": owner.namespace},
            "involvedObject": owner.object_reference(),
            "type": type_,
            "reason": reason,
            "message": message,
            "source": {"component": self.component},
            "reportingComponent": self.component,
            "reportingInstance": self.instance,
            "firstTimestamp": stamp,
            "lastTimestamp": stamp,
            "count": 1,
        }

    def _submit(self, owner: Owner, body: dict[str, Any]) -> None:
        async def run(kube: KubeApi) -> None:
            try:
                await kube.create_event(owner.namespace, body)
            except ApiError as exc:
                if exc.status != 409:  # (409: an equal one is there: posted before)
                    log.warning("Event %s on %s not posted: %s", body["reason"], owner.name, exc)

        op = Op(f"event {body['reason']} on {owner.name}", run, priority=Priority.EVENT)
        self.lanes.submit((owner.namespace, owner.name), op, lane="events")
