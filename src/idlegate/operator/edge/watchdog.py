"""The operator through API-server outages and a missing CRD: it waits, never exits (in a
Deployment, every outage of a minute would otherwise become a restart). deploy/README.md
("API-server outages and a missing CRD") tells it from the user's side. The pieces:

* `idlegate.operator.kopf_retries`: kopf retries its failed requests for ever, and logs the
  first failed attempt of each object at WARNING.
* :class:`ApiHealth` sees outages in what the operator's own API client reports.
* :class:`Watchdog` makes the first rebuild of the state (after waiting for the CRD),
  probes the API, and after each outage rebuilds the state as at a start
  (:func:`idlegate.operator.edge.intake.rebuild`) and posts a Warning ``ApiUnreachable``
  on the operator's own Pod (:func:`operator_pod`), or logs it outside a Pod.

:meth:`Watchdog.readiness` is what ``/readyz`` answers; liveness (kopf's ``/healthz``)
stays healthy throughout, since a restart would not bring the API back.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import threading
from collections.abc import Callable, Sequence

from idlegate.api.kinds import GROUP, PLURAL
from idlegate.api.task_pods import Owner
from idlegate.operator.core.intents import PostEvent
from idlegate.operator.edge import intake
from idlegate.operator.edge.kube import ApiError
from idlegate.operator.edge.pools import Pools
from idlegate.operator.kinds.workflow import AdmitLaterError
from idlegate.operator.metrics import Metrics

log = logging.getLogger(__name__)

INSTALL_CRD = "kubectl apply -k deploy/base (or kubectl apply -f deploy/base/crd.yaml)"
GRACE = 1.0
"""Seconds of unanswered requests, with no answer in between, that make an outage. One dropped
connection among answers is no outage, nor is one endpoint that keeps failing while the others
answer: either would otherwise flap the API up and down, rebuilding the state at each flap."""


class ApiHealth:
    """Whether the API answers, as the operator's own API client reports its requests
    (:mod:`idlegate.operator.edge.kube`). An HTTP answer that is not a 5xx is an answer (a
    404 still proves the server is there); no response, a timeout or a 5xx is none.
    During an outage `idlegate_api_up` is 0 (the other gauges are stale); after it, its
    length is added to `idlegate_api_unreachable_seconds`."""

    def __init__(self, metrics: Metrics) -> None:
        self.metrics = metrics
        self.down_since: float | None = None
        """The event loop's time (wall seconds) of the first unanswered request of the
        current outage; None while the API answers."""
        self._first_miss: float | None = None
        """Loop time of the first unanswered request since the last answer."""
        self.unsynced = 0.0
        """Seconds of the outages that ended since the state was last rebuilt (the
        watchdog rebuilds it, and resets this)."""
        self.recovered = asyncio.Event()
        """Set when an outage ends (the watchdog wakes on it, and clears it)."""
        self.ended = threading.Event()
        """Set at an outage's end, then replaced: the client's back-offs in progress end."""

    @property
    def up(self) -> bool:
        return self.down_since is None

    def report(self, what: str, status: int) -> None:
        """The client's report of a request's try (`kube.Report`; `status` 0 for no
        response): an error is counted by its status. Requests unanswered for :data:`GRACE`
        seconds with no answer in between are an outage, which began with the first of
        them; the next answer ends it."""
        if not 200 <= status < 300:
            self.metrics.api_errors.labels(str(status)).inc()
        if status == 429:
            self.metrics.api_throttled.inc()
        now = asyncio.get_running_loop().time()
        if not 0 < status < 500:  # no answer (connection refused or dropped, timeout, 5xx)
            if self._first_miss is None:
                self._first_miss = now
            if self.down_since is None and now - self._first_miss >= GRACE:
                self.down_since = self._first_miss
                self.metrics.api_up.set(0)
                log.warning("The API server does not answer (%s); retrying until it does.", what)
            return
        self._first_miss = None
        if self.down_since is None:
            return
        seconds = max(0.0, now - self.down_since)
        self.down_since = None
        self.metrics.api_up.set(1)
        self.metrics.api_unreachable.inc(seconds)
        log.warning("The API server answers again after %.1f s.", seconds)
        self.unsynced += seconds
        self.recovered.set()
        ended, self.ended = self.ended, threading.Event()
        ended.set()


def operator_pod() -> Owner | None:
    """The operator's own Pod, as the involved object of its outage Events: the one the
    downward API names (POD_ID, POD_NAMESPACE, POD_UID); None outside one."""
    name, namespace = os.environ.get("POD_ID"), os.environ.get("POD_NAMESPACE")
    if not name or not namespace:
        return None
    return Owner(namespace, name, os.environ.get("POD_UID", ""), kind="Pod", api_version="v1")


class Watchdog:
    """The rebuilds of the state (the first, and one after each outage) and the probes."""

    def __init__(
        self,
        pools: Pools,
        health: ApiHealth,
        *,
        reporter: Owner | None,
        cached: Callable[[], intake.Cached | None] = lambda: None,
        restorers: Sequence[intake.Restorer] = (),
    ) -> None:
        self.pools = pools
        self.health = health
        self.cached = cached
        """The indexes (None until filled and listed), for a first rebuild no outage preceded."""
        self.restorers = restorers
        """Read and admitted by each rebuild before its first decision (`intake.rebuild`)."""
        self.reporter = reporter
        """Where the outage Events go (the operator's Pod); None: logged only."""
        self.crd_missing = False
        self.rebuilt = asyncio.Event()
        """Set once the first rebuild is done: handlers that admit wait for it."""
        self.read_at = 0.0
        """The loop's time when the first rebuild began to read the API."""

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
        """Until cancelled: rebuild until the first rebuild is done and after each outage;
        between, probe the API (the client retries a probe until the API answers)."""
        s = self.pools.settings
        while True:
            if not self.rebuilt.is_set() or (self.health.up and self.health.unsynced):
                await self._sync()
            wait = s.crd_retry_interval if self.crd_missing else s.api_probe_interval
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.health.recovered.wait(), wait)
            self.health.recovered.clear()
            with contextlib.suppress(ApiError):  # (an answer ends an outage: `recovered`)
                await self.pools.kube.ping()

    async def _sync(self) -> None:
        """Rebuild the state from the API; after an outage, say so (an Event). A rebuild
        that fails is reported and tried again later."""
        seconds = self.health.unsynced
        indexed = not self.rebuilt.is_set() and not seconds
        began = asyncio.get_running_loop().time()
        try:
            cached = self.cached if indexed else lambda: None
            workflows, pods = await intake.rebuild(self.pools, cached, self.restorers)
        except ApiError as exc:
            if exc.status == 404 and not self.rebuilt.is_set():
                self._missing_crd()
            elif exc.answered:  # (no answer: the outage is logged already)
                log.warning("Cannot rebuild the state from the API (%s); trying again.", exc)
            return
        except AdmitLaterError as exc:
            if self.health.up:
                log.warning("Cannot rebuild the state from the API (%s); trying again.", exc)
            return
        if not self.health.up:
            return
        self.health.unsynced = 0.0
        if not self.rebuilt.is_set():  # (the outages before it are no news)
            if self.crd_missing:
                log.info("The DagWorkflow CRD is installed: serving.")
                self.crd_missing = False
                self.health.metrics.crd_missing.set(0)
            self.read_at = began
            self.rebuilt.set()
            return
        message = (
            f"The API server did not answer the operator for {seconds:.0f} s; the state was "
            f"rebuilt from it ({workflows} DagWorkflow(s), {pods} pod(s))."
        )
        if self.reporter is None:
            log.warning("%s", message)
        else:
            self.pools.carry([PostEvent(self.reporter, "Warning", "ApiUnreachable", message)])

    def _missing_crd(self) -> None:
        if not self.crd_missing:
            every = self.pools.settings.crd_retry_interval
            log.warning(
                f"The DagWorkflow CRD ({PLURAL}.{GROUP}) is not installed; install it with "
                f"{INSTALL_CRD}. Waiting for it (looking every {every:g} s)."
            )
        self.crd_missing = True
        self.health.metrics.crd_missing.set(1)
