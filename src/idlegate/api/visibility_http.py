"""The visibility API over HTTP: :func:`add_visibility` serves `idlegate.api.visibility`'s
document read-only on an aiohttp application (the operator's metrics port, so the same
Service, NetworkPolicy and ``kubectl port-forward`` reach it as ``/metrics``)."""

from __future__ import annotations

from collections.abc import Callable

import aiohttp.web

from idlegate.api.visibility import PATH, narrow, pending


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
