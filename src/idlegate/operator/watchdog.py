"""The operator through API-server outages and a missing CRD: it waits, never exits.

An outage of the API server, however long, must not end the process: in a Deployment,
every outage of a minute would become a restart. Three pieces keep the operator serving:

* kopf retries its failed requests (its watches and lists of DagWorkflows and pods) by
  :class:`RetryForever`: 0.1 s at first, doubling up to `Settings.watch_retry_cap`, for
  ever. kopf's default gives up after 1+1+2+3+5+8+13+21 s (about 54 s) and the process
  stops ("Resource observer has failed").
* :class:`KopfRequestLog` reads kopf's "Request attempt #N failed; will retry: GET <url>
  -> <error>" lines (kopf has no other hook on its requests): each counts in
  `idlegate_watch_restarts_total{resource}`, and one that got no answer (refused, timed
  out, 5xx) marks the API down in the shared :class:`~idlegate.operator.health.ApiHealth`.
  During an outage only the first such line of each resource is logged.
* :class:`Watchdog`, a task of the operator, makes the first rebuild of the state (after
  waiting for the DagWorkflow CRD, if it is not installed: a log line, then
  `idlegate_crd_missing` 1 until it appears), probes the API about once a second while it
  does not answer (:meth:`KubeApi.ping`), and after each outage rebuilds the state from
  the API, as at a start (:func:`idlegate.operator.intake.rebuild`), then posts a Warning
  Event ``ApiUnreachable`` saying how long the API did not answer.

The Event's involved object is the operator's own Pod (`POD_ID`, `POD_NAMESPACE` and
`POD_UID`, set by the Deployment through the downward API; ``kubectl describe pod``
shows it): an outage concerns the operator, not one workflow, and an Event on every
active workflow would be noise. Without those variables (a local run) the outage is
only logged.

:meth:`Watchdog.readiness` is what ``/readyz`` answers: not ready before the first
rebuild, while the CRD is missing and while the API does not answer; liveness (kopf's
``/healthz``) stays healthy throughout, since a restart would not bring the API back.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from idlegate.operator import intake
from idlegate.operator.admission import AdmitLaterError
from idlegate.operator.bridge import Bridge
from idlegate.operator.crd import GROUP, PLURAL
from idlegate.operator.health import ApiHealth
from idlegate.operator.kube import ApiError
from idlegate.operator.messages import Notice
from idlegate.operator.pods import Owner
from idlegate.operator.pools import Pools

log = logging.getLogger(__name__)

FIRST_RETRY = 0.1
"""Seconds before kopf's first retry of a failed request (doubling up to the cap)."""
INSTALL_CRD = "kubectl apply -k deploy/base (or kubectl apply -f deploy/base/crd.yaml)"


class RetryForever:
    """kopf's ``settings.networking.error_backoffs``: 0.1 s, doubling up to `cap`, for ever.

    kopf retries a request once per delay it gets from iterating this, and numbers the
    attempts "#N/total" only for a Sized iterable; an iterable without a length that never
    ends makes it retry for ever. Each iteration starts anew (a fresh generator), since
    kopf iterates once per request.
    """

    def __init__(self, cap: float) -> None:
        self.cap = cap

    def __iter__(self) -> Iterator[float]:
        delay = min(FIRST_RETRY, self.cap)
        while True:
            yield delay
            delay = min(2 * delay, self.cap)


_FAILED = re.compile(
    r"Request attempt #\d+(?:/\d+)? failed; (?:will retry|escalating): "
    r"(?P<method>[A-Z]+) (?P<url>\S+) -> (?P<error>\w+)"
)
_ANSWERS = frozenset(
    {"APIClientError", "APIUnauthorizedError", "APIForbiddenError", "APITooManyRequestsError"}
)
"""kopf's errors for a request the server did answer (a 4xx)."""


def resource_of(url: str) -> str | None:
    """The resource (plural) a list or watch URL is about; None for discovery URLs."""
    parts = [p for p in urlsplit(url).path.split("/") if p]
    if parts[:1] == ["api"]:
        rest = parts[2:]
    elif parts[:1] == ["apis"]:
        rest = parts[3:]
    else:
        return None
    if rest[:1] == ["namespaces"] and len(rest) >= 3:
        rest = rest[2:]
    return rest[0] if rest else None


class KopfRequestLog(logging.Filter):
    """Counts and reports kopf's failed requests from its log (see the module docstring).

    Attached to the loggers kopf's watchers log with; it acts only on records logged in
    the operator's own event loop (several operators may share a test process).
    """

    LOGGERS = ("kopf._cogs.clients.watching", "kopf._core.reactor.observation")

    def __init__(self, health: ApiHealth, loop: asyncio.AbstractEventLoop) -> None:
        super().__init__()
        self.health = health
        self.loop = loop
        self._told: set[str] = set()
        """Resources whose failure this outage has been logged (the rest are dropped)."""
        health.on_recovery(lambda _seconds: self._told.clear())

    def install(self) -> None:
        for name in self.LOGGERS:
            logging.getLogger(name).addFilter(self)

    def uninstall(self) -> None:
        for name in self.LOGGERS:
            logging.getLogger(name).removeFilter(self)

    def filter(self, record: logging.LogRecord) -> bool:
        found = _FAILED.match(record.getMessage())
        if found is None or not self._in_our_loop():
            return True
        resource = resource_of(found["url"])
        metrics = self.health.metrics
        if resource is not None:
            metrics.watch_restarts.labels(resource).inc()
        error = found["error"]
        if error == "APITooManyRequestsError":
            metrics.api_throttled.inc()
        if error in _ANSWERS:
            self.health.answered()  # (a 4xx: the server is there)
        else:
            self.health.unanswered(f"{found['method']} {urlsplit(found['url']).path}: {error}")
        if self.health.up:
            return True
        key = resource or ""
        if key in self._told:
            return False  # counted; the outage is logged once per resource
        self._told.add(key)
        return True

    def _in_our_loop(self) -> bool:
        try:
            return asyncio.get_running_loop() is self.loop
        except RuntimeError:
            return False


@dataclass(frozen=True, slots=True)
class OperatorPod(Owner):
    """The operator's own Pod, as the involved object of its outage Events."""

    @classmethod
    def from_env(cls) -> OperatorPod | None:
        """The Pod the downward API names (POD_ID, POD_NAMESPACE, POD_UID); None outside one."""
        name, namespace = os.environ.get("POD_ID"), os.environ.get("POD_NAMESPACE")
        if not name or not namespace:
            return None
        return cls(namespace, name, os.environ.get("POD_UID", ""))

    def object_reference(self) -> dict[str, Any]:
        reference = {"apiVersion": "v1", "kind": "Pod", "namespace": self.namespace}
        return {**reference, "name": self.name, **({"uid": self.uid} if self.uid else {})}


def api_unreachable(seconds: float, workflows: int, pods: int) -> Notice:
    """The Event after an outage (on the operator's Pod)."""
    return (
        "Warning",
        "ApiUnreachable",
        f"The API server did not answer the operator for {seconds:.0f} s; the state was "
        f"rebuilt from it ({workflows} DagWorkflow(s), {pods} pod(s)).",
    )


class Watchdog:
    """The first rebuild, the probes during outages and the rebuild after each one."""

    def __init__(
        self, bridge: Pools | Bridge, health: ApiHealth, *, reporter: Owner | None
    ) -> None:
        self.bridge = Pools.of(bridge)
        self.health = health
        self.reporter = reporter
        """Where the outage Events go (the operator's Pod); None: logged only."""
        self.settings = bridge.settings
        self.crd_missing = False
        self.rebuilt = asyncio.Event()
        """Set once the first rebuild is done: handlers that admit wait for it."""
        self._unsynced = 0.0
        """Seconds of the outages that ended since the state was last rebuilt."""
        self._wake = asyncio.Event()
        health.on_recovery(self._recovered)

    def readiness(self) -> tuple[bool, str]:
        """(ready, why not): what ``/readyz`` answers."""
        if self.crd_missing:
            return False, f"the DagWorkflow CRD is not installed: {INSTALL_CRD}"
        if self.health.down_since is not None:
            seconds = asyncio.get_running_loop().time() - self.health.down_since
            return False, f"the API server has not answered for {seconds:.0f} s"
        if not self.rebuilt.is_set():
            return False, "rebuilding the state from the API"
        return True, "ok"

    async def run(self) -> None:
        """Until cancelled: the first rebuild, then probes and rebuilds after outages."""
        await self._first_rebuild()
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), self.settings.api_probe_interval)
            self._wake.clear()
            if not self.health.up:
                await self._probe()
            if self.health.up and self._unsynced:
                await self._resync()

    def _recovered(self, seconds: float) -> None:
        self._unsynced += seconds
        self._wake.set()

    async def _probe(self) -> None:
        # (the bridge's API reports every outcome to the health: an answer ends the outage)
        with contextlib.suppress(ApiError):
            await self.bridge.kube.ping()

    async def _rebuild(self) -> tuple[int, int] | None:
        """Rebuild from the API; None if it failed (reported, to be tried again)."""
        try:
            return await intake.rebuild(self.bridge)
        except ApiError as exc:
            if exc.status == 404 and not self.rebuilt.is_set():
                self._missing_crd()
            elif exc.answered:  # (no answer: the outage is logged already)
                log.warning("Cannot rebuild the state from the API (%s); trying again.", exc)
        except AdmitLaterError as exc:
            if self.health.up:
                log.warning("Cannot rebuild the state from the API (%s); trying again.", exc)
        return None

    async def _first_rebuild(self) -> None:
        s = self.settings
        while (await self._rebuild()) is None:
            wait = s.crd_retry_interval if self.crd_missing else s.api_probe_interval
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), wait)
            self._wake.clear()
        if self.crd_missing:
            log.info("The DagWorkflow CRD is installed: serving.")
            self.crd_missing = False
            self.health.metrics.crd_missing.set(0)
        self._unsynced = 0.0
        self.rebuilt.set()

    def _missing_crd(self) -> None:
        if not self.crd_missing:
            log.warning(
                "The DagWorkflow CRD (%s.%s) is not installed; install it with %s. Waiting "
                "for it (looking every %g s).",
                PLURAL,
                GROUP,
                INSTALL_CRD,
                self.settings.crd_retry_interval,
            )
        self.crd_missing = True
        self.health.metrics.crd_missing.set(1)

    async def _resync(self) -> None:
        seconds = self._unsynced
        counts = await self._rebuild()
        if counts is None or not self.health.up:
            return
        self._unsynced = 0.0
        workflows, pods = counts
        notice = api_unreachable(seconds, workflows, pods)
        if self.reporter is None:
            log.warning("%s", notice[2])
        else:
            self.bridge.writes.event(self.reporter, *notice)
