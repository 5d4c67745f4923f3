"""What the dashboard shows, from what the API holds: plain dicts the page renders.

Pure: API objects (plain dicts) and the time in, views out. Positions and reasons come
from the operator's visibility API (`idlegate.api.visibility`) when it can be read; the
forecast from each workflow's ``status.forecast`` (`idlegate.api.forecast_status`), else
the visibility API's; nothing is worked out again here.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from idlegate.api.forecast_status import describe, parse_forecast
from idlegate.api.labels import LABEL_STAGE
from idlegate.api.visibility import only_namespaces
from idlegate.errors import IdlegateError
from idlegate.sim.resources import parse_quantity

HOUR = 3600.0


def timestamp(value: Any) -> float | None:
    """An RFC 3339 time as epoch seconds; None if absent or unreadable."""
    if not isinstance(value, str):
        return None
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return (parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)).timestamp()


def pods_of(amounts: Mapping[str, Any] | None) -> float:
    """The pods of a quota or use mapping (``{"pods": "2", "cpu": "500m"}``), 0 if none."""
    value = (amounts or {}).get("pods")
    if value is None:
        return 0.0
    try:
        return parse_quantity(value) / 1000
    except IdlegateError:
        return 0.0


def forecast_text(status: Mapping[str, Any] | None, now: float) -> tuple[str, str]:
    """(the line shown, its state: ``none``, ``unavailable``, ``ok`` or ``bad``)."""
    try:
        found = parse_forecast(status)
    except IdlegateError as exc:
        return f"forecast unreadable: {exc}", "bad"
    state = "none" if found is None else "ok" if hasattr(found, "start") else "unavailable"
    return describe(found, now), state


class Samples:
    """Each queue's pods used, sampled at every refresh, for the last hour's chart (kept in
    memory while the dashboard runs)."""

    def __init__(self, window: float = HOUR) -> None:
        self.window = window
        self.series: dict[tuple[str, str], deque[tuple[float, float]]] = {}

    def add(self, now: float, pools: Iterable[Mapping[str, Any]]) -> None:
        for pool in pools:
            for q in pool["queues"]:
                found = self.series.setdefault((pool["name"], q["name"]), deque())
                found.append((now, q["usedPods"]))
                while found and now - found[0][0] > self.window:
                    found.popleft()

    def of(self, pool: str, queue: str) -> list[tuple[float, float]]:
        return list(self.series.get((pool, queue), ()))


def pool_views(
    objects: Sequence[Mapping[str, Any]], visibility: Mapping[str, Any] | None
) -> list[dict[str, Any]]:
    """Each ExecutorPool (and each pool the visibility API names without one: the operator's
    default pool): its size, use, policy, what it follows and its queues (quota vs use)."""
    out = []
    for obj in objects:
        spec, status = obj.get("spec") or {}, obj.get("status") or {}
        nominal = {q.get("name"): q.get("nominal") or {} for q in spec.get("queues") or ()}
        queues = []
        for q in status.get("queues") or ():
            name = str(q.get("name", ""))
            queues.append(
                {
                    "name": name,
                    "nominal": nominal.get(name, {}),
                    "nominalPods": pods_of(nominal.get(name)) or None,
                    "used": q.get("used") or {},
                    "usedPods": pods_of(q.get("used")),
                    "borrowed": q.get("borrowed") or {},
                    "lent": q.get("lent") or {},
                    "waiting": q.get("waiting", 0),
                    "oldestWait": q.get("oldestWait", 0),
                }
            )
        out.append(
            {
                "name": str((obj.get("metadata") or {}).get("name", "")),
                "size": status.get("size", spec.get("size")),
                "busy": status.get("busy", 0),
                "pending": status.get("pending", 0),
                "policy": status.get("policy", ""),
                "following": status.get("following") or "",
                "queues": queues,
            }
        )
    known = {p["name"] for p in out}
    for p in (visibility or {}).get("pools", ()):
        if p["name"] not in known:
            queues = [
                {  # (no ExecutorPool, no status: its use is not known, None)
                    "name": q["name"],
                    "nominal": None,
                    "nominalPods": None,
                    "used": None,
                    "usedPods": 0.0,
                    "borrowed": None,
                    "lent": None,
                    "waiting": len(q["waiting"]),
                    "oldestWait": 0,
                }
                for q in p["queues"]
            ]
            row = {"name": p["name"], "size": None, "busy": None, "pending": None}
            out.append({**row, "policy": "", "following": "", "queues": queues})
    return out


def waiting_views(
    workflows: Sequence[Mapping[str, Any]],
    visibility: Mapping[str, Any] | None,
    allowed: Iterable[str] | None,
    now: float,
) -> list[dict[str, Any]]:
    """The waiting workflows the user may see (`allowed`: the namespaces whose workflows
    they may list; None: all), in their queues' order, with position, reason and forecast.
    Without the visibility API: the Pending DagWorkflows, with what their status says."""
    by_key = {
        ((w.get("metadata") or {}).get("namespace"), (w.get("metadata") or {}).get("name")): w
        for w in workflows
    }
    out = []
    if visibility is not None:
        doc = only_namespaces(visibility, allowed)
        for p in doc["pools"]:
            for q in p["queues"]:
                for w in q["waiting"]:
                    body = by_key.get((w["namespace"], w["name"]))
                    status = (body or {}).get("status") or {}
                    if "forecast" not in status and w.get("forecast") is not None:
                        status = {"forecast": w["forecast"]}
                    text, state = forecast_text(status, now)
                    out.append(
                        {
                            **{k: w[k] for k in ("namespace", "name", "kind", "priority")},
                            **{k: w[k] for k in ("position", "reason", "started")},
                            "pool": p["name"],
                            "queue": q["name"],
                            "forecast": text,
                            "forecastState": state,
                        }
                    )
        for u in doc["unpooled"]:
            reason = f"waits for ExecutorPool {u['pool']!r} ({u['reason']})"
            row = {"namespace": u["namespace"], "name": u["name"], "kind": u["kind"]}
            out.append(
                {
                    **row,
                    **{"priority": 0, "position": None, "reason": reason, "started": False},
                    **{"pool": u["pool"], "queue": "", "forecast": "no forecast yet"},
                    "forecastState": "none",
                }
            )
        return out
    for (namespace, name), body in sorted(by_key.items()):
        status = body.get("status") or {}
        if status.get("phase") not in (None, "Pending"):
            continue
        said = [
            c.get("message", "")
            for c in status.get("conditions") or ()
            if c.get("status") == "False" and c.get("message")
        ]
        text, state = forecast_text(status, now)
        out.append(
            {
                **{"namespace": namespace, "name": name, "kind": "DagWorkflow", "priority": 0},
                "position": None,
                "reason": said[0]
                if said
                else "pending (the operator's visibility API "
                "cannot be read: no position or reason)",
                "started": False,
                **{"pool": (body.get("spec") or {}).get("pool") or "", "queue": ""},
                **{"forecast": text, "forecastState": state},
            }
        )
    return out


def workflow_rows(workflows: Sequence[Mapping[str, Any]], now: float) -> list[dict[str, Any]]:
    """Every workflow the user may list, newest first: phase, stages done, JCT, age."""
    out = []
    for w in workflows:
        meta, status = w.get("metadata") or {}, w.get("status") or {}
        created = timestamp(meta.get("creationTimestamp"))
        out.append(
            {
                "namespace": meta.get("namespace", ""),
                "name": meta.get("name", ""),
                "phase": status.get("phase") or "Pending",
                "stages": status.get("stagesSummary") or "",
                "jct": status.get("jctSeconds"),
                "age": now - created if created is not None else None,
            }
        )
    return sorted(out, key=lambda r: (r["age"] is None, r["age"] or 0.0))


def stage_views(body: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Each stage of a DagWorkflow with its state (``done``, ``running``, ``failed``,
    ``idle``: in a deliberate idle slot, ``ready`` or ``blocked``) and a short label."""
    spec, status = body.get("spec") or {}, body.get("status") or {}
    counts = {s.get("name"): s for s in status.get("stages") or ()}
    idle = {s.get("stage") for s in status.get("idleSlots") or () if not s.get("released")}
    stages = list(spec.get("stages") or ())
    done = {
        s.get("name")
        for s in stages
        if (c := counts.get(s.get("name"))) and c.get("succeeded", 0) >= s.get("tasks", 1)
    }
    out = []
    for s in stages:
        name, c = s.get("name"), counts.get(s.get("name")) or {}
        tasks = int(s.get("tasks", 1))
        if name in done:
            state = "done"
        elif status.get("phase") == "Failed" and c.get("failed"):
            state = "failed"
        elif c.get("running"):
            state = "running"
        elif name in idle:
            state = "idle"
        elif all(d in done for d in s.get("dependsOn") or ()):
            state = "ready"
        else:
            state = "blocked"
        label = f"{c.get('succeeded', 0)}/{tasks} done, {c.get('running', 0)} running"
        out.append(
            {"name": name, "dependsOn": s.get("dependsOn") or [], "state": state, "label": label}
        )
    return out


def pod_bars(pods: Sequence[Mapping[str, Any]], now: float) -> list[dict[str, Any]]:
    """One bar per pod that started: its stage, start and end (None while it runs)."""
    bars = []
    for pod in pods:
        meta, status = pod.get("metadata") or {}, pod.get("status") or {}
        start, end = timestamp(status.get("startTime")), None
        for c in status.get("containerStatuses") or ():
            state = c.get("state") or {}
            done = state.get("terminated") or {}
            start = start or timestamp((state.get("running") or {}).get("startedAt"))
            start = start or timestamp(done.get("startedAt"))
            end = max(end or 0.0, timestamp(done.get("finishedAt")) or 0.0) or end
        if start is None:
            continue
        phase = status.get("phase")
        state = {"Succeeded": "done", "Failed": "failed"}.get(str(phase), "running")
        stage = (meta.get("labels") or {}).get(LABEL_STAGE, "")
        bars.append(
            {
                "pod": meta.get("name", ""),
                "stage": stage,
                "start": start,
                "end": end,
                "state": state,
            }
        )
    return sorted(bars, key=lambda b: (b["start"], b["pod"]))


def event_rows(events: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """A workflow's (or pool's) Events, newest first."""
    rows = []
    for e in events:
        when = e.get("lastTimestamp") or e.get("eventTime") or e.get("firstTimestamp")
        row = {"time": when or "", "type": e.get("type", ""), "reason": e.get("reason", "")}
        rows.append({**row, "message": e.get("message", "")})
    return sorted(rows, key=lambda r: r["time"], reverse=True)
