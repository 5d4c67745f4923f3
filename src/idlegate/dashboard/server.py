"""The dashboard's web server (aiohttp): the pages, their JSON, and the refresh loop.

Every `interval` seconds a refresh reads the pools, the workflows the user may list and the
operator's visibility API, keeps the result (and each queue's use, for the last hour's
chart), or keeps the last one and says the API is out. The pages poll the JSON
(``/api/overview``, ``/api/workflow/NS/NAME``) and redraw; a workflow's page is read when
asked. Nothing is written to the cluster.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from typing import Any

import aiohttp
import aiohttp.web

from idlegate.api.labels import LABEL_WORKFLOW
from idlegate.api.visibility import visibility_source
from idlegate.dashboard import model, pages, svg
from idlegate.dashboard.kube import Forbidden, Outage, Reader

log = logging.getLogger(__name__)


class Dashboard:
    """The state the pages show, refreshed from the API (see the module docstring)."""

    def __init__(
        self,
        reader: Reader,
        *,
        namespaces: list[str],
        visibility: str | None = None,
        interval: float = 5.0,
        poll_ms: int = 2000,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.reader, self.namespaces, self.interval = reader, namespaces, interval
        self.visibility = visibility_source(visibility)
        self.clock, self.poll_ms = clock, poll_ms
        self.samples = model.Samples()
        self.state: dict[str, Any] = {"pools": [], "waiting": [], "workflows": []}
        self.state.update(outage=None, refreshedAt=None, notes=[])
        self.refreshed = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    async def _visibility(self) -> tuple[dict[str, Any] | None, str | None]:
        """The operator's document, or None and why it cannot be read now. Asked up to three
        times: behind the Service, a standby replica answers 503 and another may lead."""
        for _ in range(2):
            doc, why = await self._visibility_once()
            if doc is not None or "503" not in (why or ""):
                return doc, why
        return await self._visibility_once()

    async def _visibility_once(self) -> tuple[dict[str, Any] | None, str | None]:
        source = self.visibility
        try:
            if source.startswith(("http://", "https://")):
                timeout = aiohttp.ClientTimeout(total=self.reader.timeout)
                async with (
                    aiohttp.ClientSession(timeout=timeout) as session,
                    session.get(source) as response,
                ):
                    if response.status != 200:
                        return None, f"{source} answers {response.status}"
                    return dict(await response.json()), None
            return dict(await self.reader.get(source)), None
        except (aiohttp.ClientError, TimeoutError, ValueError, Outage, Forbidden) as exc:
            return None, f"the operator's visibility API ({source}) cannot be read: {exc}"

    async def refresh(self) -> None:
        """Read everything once (keeping the last state, with the outage, if the API is out)."""
        now = self.clock()
        try:
            namespaces = await self.reader.namespaces(self.namespaces)
            workflows = await self.reader.workflows(namespaces)
            pools = await self.reader.pools()
            followed = {}
            for p in pools:
                name = str((p.get("metadata") or {}).get("name", ""))
                events = await self.reader.events("default", name)
                said = [e for e in events if e.get("reason") == "PolicyFollowed"]
                followed[name] = model.event_rows(said)[:5]
        except Outage as exc:  # (the page says since when what it shows was read)
            self.state["outage"] = str(exc)
            self.refreshed.set()
            return
        doc, note = await self._visibility()
        allowed = None if self.reader.listed_all else self.reader.allowed
        views = model.pool_views(pools, doc)
        self.samples.add(now, views)
        for view in views:
            view["sentences"] = followed.get(view["name"], [])
            for q in view["queues"]:
                series = self.samples.of(view["name"], q["name"])
                q["chart"] = svg.spark_svg(series, now)
        waiting = model.waiting_views(workflows, doc, allowed, now)
        self.state = {
            "pools": views,
            "waiting": waiting,
            "workflows": model.workflow_rows(workflows, waiting, now)[:200],
            "outage": None,
            "refreshedAt": now,
            "notes": [note] if note else [],
        }
        self.refreshed.set()

    async def run(self) -> None:
        while True:
            try:
                await self.refresh()
            except Exception:  # (a bug must not end the page's refreshes: logged, retried)
                log.exception("The dashboard's refresh failed; retrying.")
            await asyncio.sleep(self.interval)

    async def workflow(self, namespace: str, name: str) -> dict[str, Any]:
        """A workflow's page: its DAG, the Gantt of its pods, its Events and forecast."""
        now = self.clock()
        try:
            body = await self.reader.workflow(namespace, name)
            if body is None:
                return {"found": False, "outage": None}
            pods = await self.reader.pods(namespace, f"{LABEL_WORKFLOW}={name}")
            events = await self.reader.events(namespace, name)
        except Outage as exc:
            return {"found": None, "outage": str(exc)}
        stages = model.stage_views(body)
        status = body.get("status") or {}
        bars = model.pod_bars(pods, now, status.get("stopped") or ())
        started = model.started_of(status.get("phase") or "Pending")
        forecast, state = model.forecast_text(status, now, started)
        return {
            "found": True,
            "outage": None,
            "phase": status.get("phase") or "Pending",
            "stages": stages,
            "dag": svg.dag_svg(stages),
            "gantt": svg.gantt_svg(bars, now),
            "pods": len(bars),
            "forecast": forecast,
            "forecastState": state,
            "policy": status.get("policy") or "",
            "events": model.event_rows(events)[:50],
        }

    def app(self) -> aiohttp.web.Application:
        app = aiohttp.web.Application()
        app.router.add_get("/", self._index)
        app.router.add_get("/workflow/{namespace}/{name}", self._workflow_page)
        app.router.add_get("/api/overview", self._overview)
        app.router.add_get("/api/workflow/{namespace}/{name}", self._workflow_json)
        app.router.add_get("/app.js", self._js)
        app.router.add_get("/healthz", self._healthz)
        app.on_startup.append(self._start)
        app.on_cleanup.append(self._stop)
        return app

    async def _start(self, _: aiohttp.web.Application) -> None:
        self._task = asyncio.get_running_loop().create_task(self.run())

    async def _stop(self, _: aiohttp.web.Application) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        self.reader.close()

    async def _index(self, _: aiohttp.web.Request) -> aiohttp.web.Response:
        return aiohttp.web.Response(text=pages.overview(self.poll_ms), content_type="text/html")

    async def _workflow_page(self, request: aiohttp.web.Request) -> aiohttp.web.Response:
        ns, name = request.match_info["namespace"], request.match_info["name"]
        page = pages.workflow(ns, name, self.poll_ms)
        return aiohttp.web.Response(text=page, content_type="text/html")

    async def _overview(self, _: aiohttp.web.Request) -> aiohttp.web.Response:
        return aiohttp.web.json_response(self.state)

    async def _workflow_json(self, request: aiohttp.web.Request) -> aiohttp.web.Response:
        found = await self.workflow(request.match_info["namespace"], request.match_info["name"])
        return aiohttp.web.json_response(found)

    async def _js(self, _: aiohttp.web.Request) -> aiohttp.web.Response:
        return aiohttp.web.Response(text=pages.SCRIPT, content_type="application/javascript")

    async def _healthz(self, _: aiohttp.web.Request) -> aiohttp.web.Response:
        return aiohttp.web.Response(text="ok")
