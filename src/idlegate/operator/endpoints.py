"""The operator's HTTP endpoints besides kopf's: ``/metrics`` and ``/readyz``, one server.

Both are served on `Settings.metrics_port` by one aiohttp server (aiohttp comes with kopf)
in the operator's event loop, so that ``/readyz`` reads the operator's state where it
lives, without locks:

* ``/metrics``: the Prometheus text format of the operator's registry;
* ``/readyz``: 200 when the operator serves, 503 while it cannot (before the first rebuild
  of its state, while the DagWorkflow CRD is missing, while the API server does not
  answer); the body says why, as JSON ``{"ready": ..., "reason": ...}``.

Liveness is kopf's ``/healthz`` on `Settings.health_port`: it stays healthy during an
outage (a restart would not bring the API server back).
"""

from __future__ import annotations

from collections.abc import Callable

import aiohttp.web
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from idlegate.operator.metrics import Metrics

Readiness = Callable[[], tuple[bool, str]]
"""(ready, why not) of the operator, now."""


class Endpoints:
    """``/metrics`` and ``/readyz`` on one port (see the module docstring)."""

    def __init__(self, metrics: Metrics, readiness: Readiness) -> None:
        self.metrics = metrics
        self.readiness = readiness
        self._runner: aiohttp.web.AppRunner | None = None
        self.port: int | None = None

    async def start(self, port: int, host: str = "0.0.0.0") -> int:
        """Listen on `port` (0: any free port); returns the port."""
        app = aiohttp.web.Application()
        app.router.add_get("/metrics", self._metrics)
        app.router.add_get("/readyz", self._readyz)
        runner = aiohttp.web.AppRunner(app, handle_signals=False, access_log=None)
        await runner.setup()
        site = aiohttp.web.TCPSite(runner, host, port)
        await site.start()
        self._runner = runner
        self.port = int(runner.addresses[0][1])
        return self.port

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
            self.port = None

    async def _metrics(self, _: aiohttp.web.Request) -> aiohttp.web.Response:
        body = generate_latest(self.metrics.registry)
        return aiohttp.web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})

    async def _readyz(self, _: aiohttp.web.Request) -> aiohttp.web.Response:
        ready, reason = self.readiness()
        return aiohttp.web.json_response(
            {"ready": ready, "reason": reason}, status=200 if ready else 503
        )
