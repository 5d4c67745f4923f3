"""The visibility API (Kueue's pending workloads, for idlegate): per pool and queue, the
waiting workflows in order, each with its position, priority, why it waits and its forecast.

One document, built from the operator's memory by :func:`pending` and served read-only by
the operator at ``/visibility/pendingworkflows`` on its metrics port (``?pool=P&queue=Q``
narrows it; :func:`narrow`), as JSON::

    {"apiVersion": "visibility.idlegate.io/v1alpha1", "kind": "PendingWorkflows",
     "pools": [{"name": "shared", "queues": [{"name": "a", "waiting": [
        {"position": 1, "namespace": "team-a", "name": "etl-7", "kind": "DagWorkflow",
         "priority": 100, "started": false, "waitingSeconds": 42.0,
         "reason": "queue a: pods 2/2 used, borrowing limit reached",
         "forecast": null}]}],
       "use": {"resources": ["pods", "cpu"], "capacity": {"pods": "330", "cpu": "24"},
               "used": {"pods": "15", "cpu": "9500m"},
               "queues": [{"name": "a", "nominal": {"cpu": "10"}, "used": {"pods": "9",
                           "cpu": "9500m"}, "borrowed": {"cpu": "0"}, "lent": {"cpu": "0"}}]}}],
     "unpooled": [{"namespace": ..., "name": ..., "kind": ..., "pool": "big",
                   "reason": "PoolNotFound"}]}

A workflow is listed while it has a runnable stage, whether it has started or not
(``started``), as ``status.queues[].waiting`` of its ExecutorPool counts them
(`idlegate.api.queueing.queue_status`). A pool without queues has one
queue, named ``""``, read through the same code (`Admission.alone`).

The order, positions and reasons are the admission's entries (:func:`waiting_in_order`:
written by the phases that decided, never worked out again): a position numbers the
workflows not started yet in the order the admission will start them (1 starts next,
docs/queues.md), and a started one, which waits for room for a next stage, has none
(null), as ``status.forecast.position``; :func:`forecast_of` reads the forecast of the
pool's last refresh. :func:`table` prints the document for a terminal (`WIDTH` columns).

Reads the operator's objects by their attributes only (a pool's ``bridges``, each bridge's
core and cluster and its forecasts' refresh): pure, no kopf import, no I/O, no clock
(`now` is given).
"""

from __future__ import annotations

import textwrap
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from idlegate.api.forecast_status import (
    Forecast,
    Unavailable,
    describe,
    dump_forecast,
    parse_forecast,
    relative,
)
from idlegate.errors import IdlegateError

if TYPE_CHECKING:  # (`idlegate visibility` prints the table without the simulator)
    from idlegate.sim.admission_result import Entry

API_VERSION = "visibility.idlegate.io/v1alpha1"
KIND = "PendingWorkflows"
PATH = "/visibility/pendingworkflows"
"""Where the operator serves the document, on its metrics port."""


WIDTH = 120
"""The columns `table` fits its lines in (a workflow's name longer than a row leaves aside)."""

OPERATOR_SERVICE = "idlegate-system/idlegate-operator-metrics:metrics"
"""The operator's metrics Service (deploy/base/service.yaml): the visibility API's home."""


def visibility_source(value: str | None) -> str:
    """An http(s) URL of the operator's metrics port (a port-forward, the Service's DNS
    name), or an API path: by default the API server's proxy to the operator's Service,
    so the user's RBAC (``services/proxy``) decides, as for ``kubectl get --raw``.
    IdlegateError for anything else (a URL without its scheme is not taken for a path)."""
    if value is None:
        namespace, service = OPERATOR_SERVICE.split("/")
        value = f"/api/v1/namespaces/{namespace}/services/{service}/proxy"
    if not value.startswith(("http://", "https://", "/")):
        raise IdlegateError(
            f"--url {value!r} is neither an http(s):// URL of the operator's metrics port "
            "(e.g. http://localhost:9090 after a port-forward) nor an API path starting with /"
        )
    if not value.startswith("/"):
        from idlegate.api.operator_http import check_url

        check_url(value)  # (the page's server asks it later, where an error is no sentence)
    return value.rstrip("/") + PATH


# -- the adapters ------------------------------------------------------------------------------


def waiting_in_order(core: Any) -> list[tuple[str, list[Entry]]]:
    """Per queue of the pool of `core` (one named ``""`` without queues), its entries in
    the admission's order (`Cluster.admission_result`, `idlegate.sim.admission_entries`:
    those not started with their positions, then the started with a stage that waits),
    each with what it may start or why it waits, as the phases that decided wrote it."""
    cluster = core.cluster
    result = cluster.admission_result()
    queued = cluster.admission is not None
    return [(q.name if queued else "", list(q.entries())) for q in result.queues]


def forecast_of(
    job: Any, shown: Mapping[str, Forecast | Unavailable]
) -> Forecast | Unavailable | None:
    """The forecast of `job`: what its pool's last refresh showed for its workflow (`shown`,
    owner uid -> forecast: `ForecastBook.shown`), for every kind; else an attribute
    ``forecast`` of its workflow (a Forecast, an Unavailable or a ``status.forecast``
    mapping); else None ("no forecast yet")."""
    owner = _owner(job)
    if owner is not None and (found := shown.get(owner.uid)) is not None:
        return found
    found = getattr(job.payload, "forecast", None)
    if found is None or isinstance(found, Forecast | Unavailable):
        return found
    return parse_forecast({"forecast": found})


# -- the document ------------------------------------------------------------------------------


def _owner(job: Any) -> Any:
    return getattr(job.payload, "owner", None)


def _since(admission: Any, job: Any) -> float:
    """When `job`'s oldest ready task began to wait (the admission's clock), else its arrival."""
    if admission is not None:
        since = admission.waits_since[job.queue]
        found = [since[s] for s in job.stages if s in since]
        if found:
            return min(found)
    return float(job.arrival)


def pool_entry(
    name: str, core: Any, shown: Mapping[str, Forecast | Unavailable] | None = None
) -> dict[str, Any]:
    """One pool's entry of the document, from its core (``cluster``, ``at``) and the
    forecasts its refresh shows (`shown`; None: it forecasts nothing): its queues' waiting
    workflows, and what it and each queue use of its resources beside its capacity
    and their quotas (``use``: `idlegate.api.queueing.pool_use`)."""
    cluster, now = core.cluster, float(core.at)
    queues = []
    for queue, entries in waiting_in_order(core):
        waiting = []
        for entry in entries:
            job = entry.job
            owner = _owner(job)
            if owner is None:
                continue
            forecast = forecast_of(job, shown or {})
            waiting.append(
                {
                    "position": entry.position,
                    "namespace": owner.namespace,
                    "name": owner.name,
                    "kind": owner.kind,
                    "priority": int(job.priority),
                    "started": entry.position is None,
                    "waitingSeconds": round(max(0.0, now - _since(cluster.admission, job)), 3),
                    "reason": entry.message,
                    "forecast": dump_forecast(forecast) if forecast is not None else None,
                }
            )
        queues.append({"name": queue, "waiting": waiting})
    from idlegate.api.queueing import pool_use  # (the operator's side: the simulator's)

    return {"name": name, "queues": queues, "use": pool_use(cluster)}


def pending(pools: Any) -> dict[str, Any]:
    """The whole document from the operator's `pools` (`idlegate.operator.edge.pools.Pools`:
    its ``bridges`` by pool name, each with its core and its forecasts' refresh or None,
    and ``waiting``: workflows held out of every pool)."""
    if pools is None:  # (before the operator started)
        return {"apiVersion": API_VERSION, "kind": KIND, "pools": [], "unpooled": []}
    out = [
        pool_entry(name, b.core, None if b.forecasts is None else b.forecasts.shown)
        for name, b in sorted(pools.bridges.items())
    ]
    unpooled = [
        {
            "namespace": w.owner.namespace,
            "name": w.owner.name,
            "kind": w.owner.kind,
            "pool": w.pool,
            "reason": w.reason,
        }
        for w in pools.waiting.values()
    ]
    return {"apiVersion": API_VERSION, "kind": KIND, "pools": out, "unpooled": unpooled}


def narrow(doc: Mapping[str, Any], pool: str | None, queue: str | None) -> dict[str, Any]:
    """`doc` with only pool `pool` and queue `queue` (None: every one)."""
    pools = []
    for p in doc.get("pools", []):
        if pool is not None and p["name"] != pool:
            continue
        queues = [q for q in p["queues"] if queue is None or q["name"] == queue]
        narrowed = {**p, "queues": queues}
        if "use" in p:
            use = p["use"]
            narrowed["use"] = {
                **use,
                "queues": [q for q in use["queues"] if q["name"] in {w["name"] for w in queues}],
            }
        pools.append(narrowed)
    unpooled = [u for u in doc.get("unpooled", []) if pool is None or u["pool"] == pool]
    return {**doc, "pools": pools, "unpooled": unpooled if queue is None else []}


def only_namespaces(doc: Mapping[str, Any], visible: Iterable[str] | None) -> dict[str, Any]:
    """`doc` with only the workflows of the `visible` namespaces (None: all): what a user
    whose RBAC lets them list workflows there may see of it."""
    if visible is None:
        return dict(doc)
    seen = set(visible)
    pools = [
        {
            **p,
            "queues": [
                {**q, "waiting": [w for w in q["waiting"] if w["namespace"] in seen]}
                for q in p["queues"]
            ],
        }
        for p in doc.get("pools", [])
    ]
    unpooled = [u for u in doc.get("unpooled", []) if u["namespace"] in seen]
    return {**doc, "pools": pools, "unpooled": unpooled}


Row = tuple[tuple[str, ...], tuple[str, ...]]
"""A workflow of `table`: its cells, and its details (each a line, wrapped)."""


HEADER = ("POOL", "QUEUE", "POS", "WORKFLOW", "KIND", "PRIO", "WAITING", "START", "FINISH")


def entries(doc: Mapping[str, Any], now: float) -> tuple[list[Row], list[Row]]:
    """What `table` prints of `doc`: the workflows not started yet, in their queues' order
    with their positions (and those waiting for a missing pool, last), then the started
    ones that wait for room for a next stage, unnumbered; each its cells (`HEADER`) and its
    details (why it waits, and the forecast's intervals or why there is none). `now`: the
    reader's clock, for the relative times."""
    waiting: list[Row] = []
    started: list[Row] = []
    for p in doc.get("pools", []):
        for q in p["queues"]:
            for w in q["waiting"]:
                start, finish, said = _forecast_cells(w.get("forecast"), now, w.get("started"))
                position = w.get("position")
                cells = (
                    p["name"],
                    q["name"] or "-",
                    "-" if position is None else str(position),
                    f"{w['namespace']}/{w['name']}",
                    w["kind"],
                    str(w["priority"]),
                    f"{w['waitingSeconds']:.0f}s",
                    start,
                    finish,
                )
                (started if w.get("started") else waiting).append((cells, (w["reason"], said)))
    for u in doc.get("unpooled", []):
        who = f"{u['namespace']}/{u['name']}"
        lost = (str(u["pool"]), "-", "-", who, str(u["kind"]), "-", "-", "-", "-")
        waiting.append((lost, (f"waits for its pool ({u['reason']})",)))
    return waiting, started


def _forecast_cells(found: Any, now: float, started: bool = False) -> tuple[str, str, str]:
    """START, FINISH and the detail line of a document's forecast (of a `started`
    workflow: its finish's interval alone; its start is past)."""
    try:
        forecast = parse_forecast({"forecast": found})
    except IdlegateError as exc:  # (a malformed one: say so, show the rest)
        return "?", "?", f"forecast unreadable: {exc}"
    if forecast is None:
        return "-", "-", "no forecast yet"
    if isinstance(forecast, Unavailable):
        return "unavailable", "unavailable", f"no forecast: {forecast.reason}"

    # (`describe` says an old forecast's past times as due, never as past of what waits)
    start = "due" if not started and forecast.start < now else relative(forecast.start, now)
    finish = "due" if forecast.finish < now else relative(forecast.finish, now)
    return start, finish, describe(forecast, now, started=bool(started))


def table(doc: Mapping[str, Any], now: float, width: int = WIDTH) -> str:
    """`idlegate visibility`'s text: `entries` in aligned columns, each workflow's details
    on lines of their own below it, indented and wrapped at `width`; the started ones
    apart, after the others."""
    waiting, started = entries(doc, now)
    if not waiting and not started:
        return "No workflow waits."
    rows = [HEADER, *(cells for cells, _ in waiting), *(cells for cells, _ in started)]
    widths = [max(len(r[i]) for r in rows) for i in range(len(HEADER))]

    def line(cells: tuple[str, ...]) -> str:
        return "  ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)).rstrip()

    def block(found: list[Row]) -> list[str]:
        out = []
        for cells, details in found:
            out.append(line(cells))
            for detail in details:
                out += textwrap.wrap(
                    detail, width, initial_indent=" " * 4, subsequent_indent=" " * 6
                )
        return out

    out = [line(HEADER), *block(waiting)]
    if started:
        out += ["", "Started, waiting for room for a next stage:", *block(started)]
    return "\n".join(out)
