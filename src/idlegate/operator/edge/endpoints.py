"""The operator's HTTP endpoints besides kopf's: ``/metrics`` (the Prometheus text of the
operator's registry) and ``/readyz`` (200 when the operator serves, 503 with the reason
as JSON ``{"ready": ..., "reason": ...}`` while it cannot) and the visibility API
(`idlegate.operator.edge.visibility_http`), on `Settings.metrics_port`.

One aiohttp server (aiohttp comes with kopf) in the operator's event loop, so ``/readyz``
reads the operator's state where it lives, without locks. The port is bound before kopf
starts (:meth:`Endpoints.reserve`), so a port in use is one error line naming it, not a
traceback of kopf's startup handler retried every minute.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Callable

import aiohttp.web
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from idlegate.errors import IdlegateError
from idlegate.operator.edge.visibility_http import add_visibility
from idlegate.operator.metrics import Metrics


def bind(host: str, port: int, flag: str = "--metrics-port") -> socket.socket:
    """A listening socket on `host`:`port` (0: any free port); IdlegateError naming the
    port and `flag` when it cannot be had (in use by another operator or program)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    try:
        return socket.create_server((host, port), family=family)
    except OSError as exc:
        why = os.strerror(exc.errno) if exc.errno else str(exc)
        raise IdlegateError(
            f"cannot listen on {host}:{port} ({why}): another operator or "
            f"program uses port {port}; stop it or pass another {flag}"
        ) from None


class Endpoints:
    """``/metrics`` and ``/readyz`` on one port (see the module docstring)."""

    def __init__(self, metrics: Metrics, readiness: Callable[[], tuple[bool, str]]) -> None:
        self.metrics = metrics
        self.pools: Callable[[], object] = lambda: None  # (the operator's, for the visibility API)
        self.readiness = readiness
        """(ready, why not) of the operator, now."""
        self._runner: aiohttp.web.AppRunner | None = None
        self._reserved: socket.socket | None = None
        self.port: int | None = None

    def reserve(self, port: int, host: str = "0.0.0.0") -> None:
        """Bind the port now, to be served by `start` (raises IdlegateError, as `bind`)."""
        self._reserved = bind(host, port)

    async def start(self, port: int, host: str = "0.0.0.0") -> int:
        """Listen on `port` (0: any free port), or on the socket `reserve` bound; returns
        the port."""
        sock, self._reserved = self._reserved or bind(host, port), None
        app = aiohttp.web.Application()
        app.router.add_get("/metrics", self._metrics)
        app.router.add_get("/readyz", self._readyz)
        add_visibility(app, lambda: self.pools())
        runner = aiohttp.web.AppRunner(app, handle_signals=False, access_log=None)
        await runner.setup()
        await aiohttp.web.SockSite(runner, sock).start()
        self._runner = runner
        self.port = int(sock.getsockname()[1])
        return self.port

    async def stop(self) -> None:
        if self._reserved is not None:
            self._reserved.close()
            self._reserved = None
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
