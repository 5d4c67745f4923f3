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
from idlegate.api.labels import ANNOTATION_STOP, LABEL_STAGE
from idlegate.api.visibility import only_namespaces
from idlegate.errors import IdlegateError
from idlegate.sim.resources import MILLI, binary_units, parse_quantity

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


def milli(value: Any) -> int:
    """A quantity (``"500m"``, ``2``, ``"4Gi"``) in milli-units; 0 if absent or unreadable."""
    if value is None:
        return 0
    try:
        return parse_quantity(value)
    except IdlegateError:
        return 0


def amount(resource: str, values: Sequence[int]) -> list[str]:
    """Amounts of `resource` (milli-units) in one unit for people: CPU and counts as
    decimals (``9.5``, not ``9500m``), memory in the largest binary unit of the largest
    (``39.1Gi``)."""
    if binary_units(resource):
        top = max(values, default=0) / MILLI
        suffix, size = next(
            (
                (s, 1024.0**p)
                for s, p in (("Ti", 4), ("Gi", 3), ("Mi", 2), ("Ki", 1))
                if top >= 1024**p
            ),
            ("", 1.0),
        )
        return [f"{v / MILLI / size:.1f}".removesuffix(".0") + suffix for v in values]
    return [f"{v / MILLI:.2f}".rstrip("0").rstrip(".") for v in values]


def forecast_text(
    status: Mapping[str, Any] | None, now: float, started: bool | None = None
) -> tuple[str, str]:
    """(the line shown, its state: ``none``, ``unavailable``, ``ok`` or ``bad``); `started`
    as `idlegate.api.forecast_status.describe` takes it (times past `now` said honestly)."""
    try:
        found = parse_forecast(status)
    except IdlegateError as exc:
        return f"forecast unreadable: {exc}", "bad"
    state = "none" if found is None else "ok" if hasattr(found, "start") else "unavailable"
    return describe(found, now, started), state


def started_of(phase: Any) -> bool | None:
    """Whether a workflow of `phase` has started (None: it ended)."""
    return {"Pending": False, None: False, "Running": True}.get(phase)


class Samples:
    """Each queue's use, sampled at every refresh for the last hour's chart (kept in memory
    while the dashboard runs): per resource charted, its share of the queue's bound."""

    def __init__(self, window: float = HOUR) -> None:
        self.window = window
        self.series: dict[tuple[str, str], deque[tuple[float, dict[str, float]]]] = {}

    def add(self, now: float, pools: Iterable[Mapping[str, Any]]) -> None:
        for pool in pools:
            for q in pool["queues"]:
                found = self.series.setdefault((pool["name"], q["name"]), deque())
                found.append((now, dict(q["shares"])))
                while found and now - found[0][0] > self.window:
                    found.popleft()

    def of(self, pool: str, queue: str) -> list[tuple[float, dict[str, float]]]:
        return list(self.series.get((pool, queue), ()))


# -- a pool's use, in its own resources ------------------------------------------------------

_AMOUNTS = ("nominal", "used", "borrowed", "lent")
"""What the visibility API's ``use`` says of each queue, in the pool's resources."""


def use_of_visibility(entry: Mapping[str, Any]) -> dict[str, Any] | None:
    """A pool's use as the visibility API gives it (``use``: `idlegate.api.queueing.pool_use`),
    in milli-units: ``resources``, ``capacity``, ``used`` and ``queues`` (each ``name``,
    ``nominal``, ``used``, ``borrowed``, ``lent``); None from an operator that lacks it."""
    use = entry.get("use")
    if not isinstance(use, Mapping):
        return None

    def of(m: Any) -> dict[str, int]:
        return {str(k): milli(v) for k, v in (m or {}).items()}

    queues = [
        {"name": str(q.get("name", "")), **{k: of(q.get(k)) for k in _AMOUNTS}}
        for q in use.get("queues") or ()
    ]
    resources = [str(r) for r in use.get("resources") or ()]
    return {
        "resources": resources,
        "capacity": of(use.get("capacity")),
        "used": of(use.get("used")),
        "queues": queues,
    }


def use_of_status(obj: Mapping[str, Any]) -> dict[str, Any] | None:
    """A pool's use as its ExecutorPool says it (`use_of_visibility`'s shape): its status's
    size, busy executors, capacity and use of its other resources, each queue's row of
    ``status.queues`` (one ``""`` of the whole pool without queues) and its nominal quota
    from the spec; None before the operator wrote a status."""
    spec, status = obj.get("spec") or {}, obj.get("status") or {}
    if status.get("size") is None:
        return None
    capacity = {"pods": int(status["size"]) * MILLI} | {
        str(k): milli(v) for k, v in (status.get("capacity") or {}).items()
    }
    used = {"pods": int(status.get("busy") or 0) * MILLI} | {
        str(k): milli(v) for k, v in (status.get("used") or {}).items()
    }
    quotas = {
        str(q.get("name")): {str(k): milli(v) for k, v in (q.get("nominal") or {}).items()}
        for q in spec.get("queues") or ()
    }
    queues = []
    for q in status.get("queues") or ():
        name = str(q.get("name", ""))
        nominal = quotas.get(name, {})
        row = {k: {str(r): milli(v) for r, v in (q.get(k) or {}).items()} for k in _AMOUNTS[1:]}
        row["borrowed"] = {r: row["borrowed"].get(r, 0) for r in nominal}
        row["lent"] = {r: row["lent"].get(r, 0) for r in nominal}
        queues.append({"name": name, "nominal": nominal, **row})
    if not queues:
        queues = [{"name": "", "nominal": {}, "used": used, "borrowed": {}, "lent": {}}]
    return {"resources": list(capacity), "capacity": capacity, "used": used, "queues": queues}


def _charted(use: Mapping[str, Any], queue: Mapping[str, Any]) -> dict[str, int]:
    """What a queue's chart draws, each with its bound: the resources its quota names
    (above 0), else the pool's capacity of those it counts beyond pods, else pods."""
    named = {r: n for r, n in queue["nominal"].items() if n > 0}
    if named:
        return named
    capacity = use["capacity"]
    beyond = {r: capacity.get(r, 0) for r in use["resources"] if r != "pods"}
    return beyond or {"pods": capacity.get("pods", 0)}


def queue_row(use: Mapping[str, Any], queue: Mapping[str, Any], waiting: int) -> dict[str, Any]:
    """A queue's row: its use of each resource the pool counts beside its quota (the
    pool's capacity for the one queue of a pool without queues), what it borrows and
    lends, its waiting workflows and each charted resource's share of its bound."""
    whole = queue["name"] == "" and not queue["nominal"]
    bounds = use["capacity"] if whole else queue["nominal"]
    parts = []
    for r in use["resources"]:
        got, bound = queue["used"].get(r, 0), bounds.get(r)
        if bound is None:
            parts.append(f"{r} {amount(r, [got])[0]}")
        else:
            parts.append(f"{r} {' / '.join(amount(r, [got, bound]))}")

    def said(m: Mapping[str, int]) -> str:
        if whole:
            return "no other queue"
        if not queue["nominal"]:
            return "no quota"
        return ", ".join(f"{r} {amount(r, [v])[0]}" for r, v in m.items())

    shares = {
        r: queue["used"].get(r, 0) / bound for r, bound in _charted(use, queue).items() if bound > 0
    }
    return {
        "name": queue["name"],
        "used": ", ".join(parts),
        "borrowed": said(queue["borrowed"]),
        "lent": said(queue["lent"]),
        "waiting": waiting,
        "shares": shares,
    }


def use_line(use: Mapping[str, Any]) -> str:
    """A pool's use of each resource it counts beside its capacity, CPU and the others
    first: ``cpu 9.5 / 24, memory 39.1Gi / 96Gi, pods 15 / 330 in use``."""
    order = [r for r in use["resources"] if r != "pods"] + ["pods"]
    parts = [
        f"{r} {' / '.join(amount(r, [use['used'].get(r, 0), use['capacity'].get(r, 0)]))}"
        for r in order
        if r in use["capacity"]
    ]
    return ", ".join(parts) + " in use"


def pool_views(
    objects: Sequence[Mapping[str, Any]], visibility: Mapping[str, Any] | None
) -> list[dict[str, Any]]:
    """Each ExecutorPool, and each pool the visibility API names without one (the
    operator's default pool, its queues those of ``--queues``): its use of its own
    resources beside its capacity, its policy, what it follows, and each queue's use
    beside its quota. The use is the visibility API's (the operator's memory, every pool)
    when it can be read, else the ExecutorPool's status."""
    seen = {p["name"]: p for p in (visibility or {}).get("pools", ())}
    out = []
    named: list[tuple[str, Mapping[str, Any] | None]] = [
        (str((o.get("metadata") or {}).get("name", "")), o) for o in objects
    ]
    named += [(name, None) for name in seen if name not in {n for n, _ in named}]
    for name, obj in named:
        entry = seen.get(name)
        status = (obj or {}).get("status") or {}
        use = use_of_visibility(entry) if entry is not None else None
        use = use or (use_of_status(obj) if obj is not None else None)
        counts = {str(q.get("name", "")): q.get("waiting", 0) for q in status.get("queues") or ()}
        if entry is not None:
            counts = {q["name"]: len(q["waiting"]) for q in entry["queues"]}
        if use is not None:
            queues = [queue_row(use, q, counts.get(q["name"], 0)) for q in use["queues"]]
        else:  # (an operator older than the visibility API's use: the waiting, no use)
            unknown = {"used": "not reported", "borrowed": "", "lent": "", "shares": {}}
            queues = [{"name": q, **unknown, "waiting": n} for q, n in counts.items()]
        pending = status.get("pending")
        pending = f"{pending} workflow{'s' if pending != 1 else ''}" if pending else None
        line = use_line(use) if use is not None else "use not reported yet"
        out.append(
            {
                "name": name,
                "use": line + (f", {pending} not finished" if pending else ""),
                "policy": status.get("policy", ""),
                "following": status.get("following") or "",
                "queues": queues,
            }
        )
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
                    text, state = forecast_text(status, now, bool(w["started"]))
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
        text, state = forecast_text(status, now, started=False)
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


ENDED = ("Succeeded", "Failed")


def workflow_rows(
    workflows: Sequence[Mapping[str, Any]],
    waiting: Sequence[Mapping[str, Any]],
    now: float,
) -> list[dict[str, Any]]:
    """Every workflow the user may list, in the order of what happens next: those that
    wait to start in the order of `waiting` (the waiting list: by pool, queue and
    position), then the others not started, oldest first; then those that run, the
    longest running first; then those that ended, the last to end first. Each with its
    phase, stages done, JCT and age."""
    order = {(w["namespace"], w["name"]): i for i, w in enumerate(waiting)}
    rows = []
    for w in workflows:
        meta, status = w.get("metadata") or {}, w.get("status") or {}
        created = timestamp(meta.get("creationTimestamp"))
        phase = status.get("phase") or "Pending"
        key = (meta.get("namespace", ""), meta.get("name", ""))
        began = timestamp(status.get("startTime")) or created or 0.0
        if phase in ENDED:
            ended = timestamp(status.get("completionTime")) or began
            rank: tuple[float, ...] = (3, -ended)
        elif phase == "Running":
            rank = (2, began)
        elif key in order:
            rank = (0, order[key])
        else:
            rank = (1, created or 0.0)
        row = {"namespace": key[0], "name": key[1], "phase": phase}
        row |= {"stages": status.get("stagesSummary") or "", "jct": status.get("jctSeconds")}
        rows.append((rank, key, row | {"age": now - created if created is not None else None}))
    return [row for _, _, row in sorted(rows, key=lambda r: (r[0], r[1]))]


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


def pod_bars(
    pods: Sequence[Mapping[str, Any]], now: float, stopped: Iterable[Mapping[str, Any]] = ()
) -> list[dict[str, Any]]:
    """One bar per attempt that started: its pod's stage, start and end (None while it
    runs), and state; a pod stopped to give quota back (its stop's mark, being deleted or
    ended) is ``evicted``, and so is each attempt of the workflow's ``status.stopped`` whose
    pod is gone (issue 93: the page dropped it, and said no pod had started)."""
    bars, named = [], set()
    for pod in pods:
        meta, status = pod.get("metadata") or {}, pod.get("status") or {}
        named.add(meta.get("name", ""))
        start, end = _started(status), None
        for c in status.get("containerStatuses") or ():
            done = (c.get("state") or {}).get("terminated") or {}
            end = max(end or 0.0, timestamp(done.get("finishedAt")) or 0.0) or end
        if start is None:
            continue
        phase = status.get("phase")
        state = {"Succeeded": "done", "Failed": "failed"}.get(str(phase), "running")
        marked = ANNOTATION_STOP in (meta.get("annotations") or {})
        deleting = meta.get("deletionTimestamp")
        if marked and phase != "Succeeded" and (deleting or phase == "Failed"):
            state, end = "evicted", end or timestamp(deleting)
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
    for gone in stopped:
        end = timestamp(gone.get("stopTime"))
        if end is None or gone.get("pod") in named:
            continue
        start = timestamp(gone.get("startTime"))
        if start is None:  # (not known: as long as the work it lost)
            start = end - float(gone.get("lostSeconds") or 0.0)
        bar = {"pod": gone.get("pod", ""), "stage": gone.get("stage", ""), "start": start}
        bars.append(bar | {"end": end, "state": "evicted"})
    return sorted(bars, key=lambda b: (b["start"], b["pod"]))


def _started(status: Mapping[str, Any]) -> float | None:
    """When a pod started to run: its ``startTime``, else its containers' start, else when
    it became ready (a kubelet that reports no times: it ran all the same)."""
    start = timestamp(status.get("startTime"))
    for c in status.get("containerStatuses") or ():
        state = c.get("state") or {}
        for key in ("running", "terminated"):
            start = start or timestamp((state.get(key) or {}).get("startedAt"))
    for condition in status.get("conditions") or ():
        ready = condition.get("type") in ("Ready", "ContainersReady")
        if ready and condition.get("status") == "True" and start is None:
            start = timestamp(condition.get("lastTransitionTime"))
    return start


def event_rows(events: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """A workflow's (or pool's) Events, newest first."""
    rows = []
    for e in events:
        when = e.get("lastTimestamp") or e.get("eventTime") or e.get("firstTimestamp")
        row = {"time": when or "", "type": e.get("type", ""), "reason": e.get("reason", "")}
        rows.append({**row, "message": e.get("message", "")})
    return sorted(rows, key=lambda r: r["time"], reverse=True)
