"""The visibility API over HTTP: :func:`add_visibility` serves `idlegate.api.visibility`'s
document read-only on an aiohttp application (the operator's metrics port, so the same
Service, NetworkPolicy and ``kubectl port-forward`` reach it as ``/metrics``)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import aiohttp.web

from idlegate.api.crd import KIND
from idlegate.api.forecast_ask import WHAT_IF_PATH, read_what_if
from idlegate.api.forecast_status import dump_forecast
from idlegate.api.routing import NoPlaceError
from idlegate.api.visibility import PATH, narrow, pending
from idlegate.errors import IdlegateError
from idlegate.operator.forecasting.whatif import answer


def add_visibility(app: aiohttp.web.Application, pools: Callable[[], object]) -> None:
    """``GET /visibility/pendingworkflows[?pool=P][&queue=Q]`` on `app`, from the operator's
    `pools` (read in the operator's event loop: no lock, a consistent snapshot); 404 with
    a sentence when the pool or queue asked for does not exist; 503 while `pools` is None
    (the operator starts, or is a standby replica, whose memory holds no workflow: asked
    again through the Service, another replica may answer)."""

    async def serve(request: aiohttp.web.Request) -> aiohttp.web.Response:
        pool, queue = request.query.get("pool"), request.query.get("queue")
        found_pools = pools()
        if found_pools is None:
            why = "this operator replica does not lead (or starts): it holds no workflow; ask again"
            return aiohttp.web.json_response({"error": why}, status=503)
        doc = pending(found_pools)
        found = narrow(doc, pool, queue)
        missing = None
        if pool is not None and not found["pools"]:
            known = ", ".join(p["name"] for p in doc["pools"]) or "none"
            missing = f"pool {pool!r} is not one of the operator's (its pools: {known})"
        elif queue is not None and not any(p["queues"] for p in found["pools"]):
            missing = f"no pool has a queue {queue!r}; list them without ?queue="
        if missing is not None:
            return aiohttp.web.json_response({"error": missing}, status=404)
        return aiohttp.web.json_response(found)

    app.router.add_get(PATH, serve)
    app.router.add_post(WHAT_IF_PATH, what_if_route(pools))


def what_if_route(pools: Callable[[], Any]) -> Any:
    """``POST /visibility/forecast`` with a DagWorkflow (YAML or JSON): placed by the one
    door (`Pools.place`: its pool, queue and priority by its namespace and labels), added
    to a fork of its pool's state now, replayed under a copy of the pool's scheduler in a
    worker thread (inventing the arrivals the pool's refresh invents, within
    `operator.forecasting.whatif.SECONDS`); answers ``{"pool", "queue", "forecast", "replays",
    "held"}`` (``status.forecast``'s shape; the replays it took; per kind, how many of the
    pool's resolved forecasts held inside their interval, of how many:
    `ForecastBook.coverage`) or 400/404/503 with ``{"error": sentence}``. Nothing is
    created."""

    async def serve(request: aiohttp.web.Request) -> aiohttp.web.Response:
        def error(status: int, why: str) -> aiohttp.web.Response:
            return aiohttp.web.json_response({"error": why}, status=status)

        found = pools()
        if found is None:
            return error(503, "this operator replica does not lead (or starts); ask again")
        try:
            body = read_what_if(await request.text())
        except IdlegateError as exc:
            return error(400, f"the body: {exc}")
        try:
            placed = found.place(KIND, body)
            bridge = found.bridges[placed.pool]
            snap, job_id = bridge.what_if(body, placed.queue, placed.priority)
            refresh = getattr(bridge, "forecasts", None)
            # (as the pool's refresh: its arrivals, its calibration, resumed if read)
            calibration = None
            if refresh is not None:
                snap, calibration = refresh.for_what_if(snap)
            held = {} if refresh is None else refresh.coverage()
            forecast, replays = await asyncio.to_thread(
                answer, snap, job_id, calibration=calibration
            )
        except NoPlaceError as exc:  # (its pool or queue is missing: it would wait for it)
            return error(404, str(exc))
        except IdlegateError as exc:
            return error(400, str(exc))
        queue = bridge.queues[placed.queue].name if bridge.queues else ""
        doc = {
            "pool": placed.pool,
            "queue": queue,
            "forecast": dump_forecast(forecast),
            "replays": replays,
            "held": held,
        }
        return aiohttp.web.json_response(doc)

    return serve
