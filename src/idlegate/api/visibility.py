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
         "forecast": null}]}]}],
     "unpooled": [{"namespace": ..., "name": ..., "kind": ..., "pool": "big",
                   "reason": "PoolNotFound"}]}

A workflow *waits* while it has a runnable stage (the same test as ``status.queues[].waiting``
of its ExecutorPool: `idlegate.api.queueing.queue_status`), whether it has started or not
(``started``). A pool without queues has one queue, named ``""``.

Positions and reasons are the admission's own result (:func:`waiting_in_order`: the
computation that decided, never worked out again); :func:`forecast_of` reads the forecast
of the pool's last refresh.

Reads the operator's objects by their attributes only (a pool's ``bridges``, each bridge's
core and cluster): pure, no kopf import, no I/O, no clock (`now` is given).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from idlegate.api import notices
from idlegate.api.forecast_status import (
    Forecast,
    Unavailable,
    describe,
    dump_forecast,
    parse_forecast,
)
from idlegate.errors import IdlegateError

API_VERSION = "visibility.idlegate.io/v1alpha1"
KIND = "PendingWorkflows"
PATH = "/visibility/pendingworkflows"
"""Where the operator serves the document, on its metrics port."""


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


def waiting_in_order(core: Any) -> list[tuple[str, list[tuple[Any, int, str]]]]:
    """Per queue of the pool of `core` (one named ``""`` without queues), its waiting
    workflows in order, each with its position and why it waits: with queues, the
    admission's own result (`idlegate.sim.admission_result`: the computation that
    decided); without, arrival order and what the Waiting Event says (`reason_of`)."""
    cluster = core.cluster
    result = cluster.admission_result()
    if result is not None:
        return [
            (q.name, [(w.job, w.position, w.message) for w in q.waiting]) for q in result.queues
        ]
    jobs = sorted(
        (j for j in cluster.jobs if j.finish is None and j.runnable),
        key=lambda j: (-j.priority, j.arrival, j.id),
    )
    return [("", [(job, i, reason_of(core, job)) for i, job in enumerate(jobs, start=1)])]


def reason_of(core: Any, job: Any) -> str:
    """Why `job` waits in a pool without queues: for a stage in a deliberate idle slot,
    that; else the message of the Waiting Event (`idlegate.api.notices.waiting`) with how
    the pool's last round ended (``core.waited``), the one text both are said from."""
    cluster = core.cluster
    stages = [s for s in job.runnable if s.launched < s.tasks] or list(job.runnable)
    now = cluster.now
    for stage in stages:
        if stage.idle_until is not None and stage.idle_until > now:
            return (
                f"Stage {stage.name!r} waits on purpose (deliberate idle slot) for "
                f"{stage.idle_until - now:.0f} s more."
            )
    free, size = cluster.free_executors, core.settings.pool_size
    waited = getattr(core, "waited", None)
    return notices.waiting(stages[0], job, free, size, waited, cluster.resource_names)[2]


def forecast_of(core: Any, job: Any) -> Forecast | Unavailable | None:
    """The forecast of `job` (in the pool of `core`): what the pool's last refresh kept for
    its workflow (`core.forecasts`, owner uid -> forecast: `api.forecast_refresh`), for
    every kind; else an attribute ``forecast`` of its workflow (a Forecast, an Unavailable
    or a ``status.forecast`` mapping); else None ("no forecast yet")."""
    owner = _owner(job)
    kept = getattr(core, "forecasts", None)
    if kept and owner is not None and (found := kept.get(owner.uid)) is not None:
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


def pool_entry(name: str, core: Any) -> dict[str, Any]:
    """One pool's entry of the document, from its core (``cluster``, ``at``)."""
    cluster, now = core.cluster, float(core.at)
    queues = []
    for queue, entries in waiting_in_order(core):
        waiting = []
        for job, position, reason in entries:
            owner = _owner(job)
            if owner is None:
                continue
            forecast = forecast_of(core, job)
            waiting.append(
                {
                    "position": position,
                    "namespace": owner.namespace,
                    "name": owner.name,
                    "kind": owner.kind,
                    "priority": int(job.priority),
                    "started": job.first_start is not None,
                    "waitingSeconds": round(max(0.0, now - _since(cluster.admission, job)), 3),
                    "reason": reason,
                    "forecast": dump_forecast(forecast) if forecast is not None else None,
                }
            )
        queues.append({"name": queue, "waiting": waiting})
    return {"name": name, "queues": queues}


def pending(pools: Any) -> dict[str, Any]:
    """The whole document from the operator's `pools` (`idlegate.operator.edge.pools.Pools`:
    its ``bridges`` by pool name, and ``waiting``: workflows held out of every pool)."""
    if pools is None:  # (before the operator started)
        return {"apiVersion": API_VERSION, "kind": KIND, "pools": [], "unpooled": []}
    out = [pool_entry(name, bridge.core) for name, bridge in sorted(pools.bridges.items())]
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
        pools.append({**p, "queues": queues})
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


def rows(doc: Mapping[str, Any], now: float) -> list[list[str]]:
    """The table `idlegate visibility` prints: a header, then one row per waiting workflow
    (`now`: the reader's clock, for the forecast's relative times)."""
    out = [["POOL", "QUEUE", "POS", "NAMESPACE", "NAME", "KIND", "PRIO", "WAITING", "REASON"]]
    out[0].append("FORECAST")
    for p in doc.get("pools", []):
        for q in p["queues"]:
            for w in q["waiting"]:
                try:
                    forecast = parse_forecast({"forecast": w.get("forecast")})
                    said = describe(forecast, now)
                except IdlegateError as exc:  # (a malformed one: say so, show the rest)
                    said = f"forecast unreadable: {exc}"
                out.append(
                    [
                        p["name"],
                        q["name"] or "-",
                        str(w["position"]),
                        w["namespace"],
                        w["name"],
                        w["kind"],
                        str(w["priority"]),
                        f"{w['waitingSeconds']:.0f}s",
                        w["reason"],
                        said,
                    ]
                )
    for u in doc.get("unpooled", []):
        row = ["-", "-", "-", u["namespace"], u["name"], u["kind"], "-", "-"]
        out.append([u["pool"], *row[1:], f"waits for its pool ({u['reason']})", "-"])
    return out


def table(doc: Mapping[str, Any], now: float) -> str:
    """`rows` aligned in columns (the last one, the forecast, left ragged)."""
    found = rows(doc, now)
    if len(found) == 1:
        return "No workflow waits."
    widths = [max(len(r[i]) for r in found) for i in range(len(found[0]))]
    return "\n".join(
        "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in found
    )
