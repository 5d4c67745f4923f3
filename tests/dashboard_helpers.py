"""The dashboard's browser tests' pieces: the dashboard served from a thread, an RBAC stand-in
before the test API server, and Debian's chromium for Playwright.

* :class:`DashboardThread`: ``idlegate dashboard``'s server (`idlegate.dashboard.server`)
  on 127.0.0.1 in a thread with its own event loop, reading the API through a kubeconfig;
* :class:`RbacProxy`: the fault proxy (tests/k8s/faults.py) answering 403, as RBAC would, to
  every cluster-wide listing and to everything in the `forbidden` namespaces (the test API
  server does no RBAC);
* :func:`chromium`: the browser's path, or None (the tests skip, saying so): ``make test``
  installs Debian's ``chromium`` when it is missing (the Makefile's ``chromium`` target).
"""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path
from typing import Any

import aiohttp.web

from idlegate.dashboard.kube import Reader
from idlegate.dashboard.server import Dashboard
from idlegate.operator.edge.kube import load_configuration
from tests.k8s.faults import FaultProxy, _status
from tests.k8s.harness import ApiServer, LoopThread

CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def chromium() -> str | None:
    """Debian's chromium (never one Playwright downloads: no `playwright install`)."""
    for path in ("/usr/bin/chromium", shutil.which("chromium"), shutil.which("chromium-browser")):
        if path and Path(path).exists():
            return path
    return None


class DashboardThread(LoopThread):
    """The dashboard reading the API through `kubeconfig` (see the module docstring)."""

    what = "the dashboard"

    def __init__(self, kubeconfig: Path, **options: Any) -> None:
        super().__init__("dashboard")
        self.kubeconfig, self.options = kubeconfig, options
        self.url = ""
        self.board: Dashboard | None = None

    async def _serve(self) -> None:
        self._loop, self._stop = asyncio.get_running_loop(), asyncio.Event()
        reader = Reader(load_configuration(self.kubeconfig), timeout=2.0)
        self.board = Dashboard(reader, **{"interval": 0.2, "poll_ms": 300, **self.options})
        runner = aiohttp.web.AppRunner(self.board.app(), handle_signals=False)
        await runner.setup()
        site = aiohttp.web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        host, port = runner.addresses[0][:2]
        self.url = f"http://{host}:{port}"
        self._ready.set()
        await self._stop.wait()
        await runner.cleanup()


class RbacProxy(FaultProxy):
    """403 to cluster-wide listings and to the `forbidden` namespaces (module docstring)."""

    what = "the RBAC proxy"

    def __init__(self, upstream: ApiServer, directory: Path, forbidden: set[str]) -> None:
        super().__init__(upstream, directory)
        self.kubeconfig = Path(directory) / "kubeconfig-rbac"
        self.forbidden = forbidden

    async def _handle(self, request: aiohttp.web.BaseRequest) -> aiohttp.web.StreamResponse:
        path = request.path.rstrip("/")
        wide = "/namespaces/" not in path and path.endswith(("/namespaces", "/dagworkflows"))
        hidden = any(
            f"/namespaces/{ns}/" in path or path.endswith(f"/namespaces/{ns}")
            for ns in self.forbidden
        )
        if wide or hidden:
            return _status(403, "Forbidden", f"RBAC stand-in: {path} is forbidden")
        return await super()._handle(request)
