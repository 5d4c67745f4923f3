"""Server-side printing: ``meta.k8s.io/v1`` Tables as ``kubectl get`` requests them.

``kubectl get`` sends ``Accept: application/json;as=Table;v=v1;g=meta.k8s.io``
and prints the rows it gets back. Columns follow the real API server:

* custom resources: ``Name`` + the CRD version's ``additionalPrinterColumns``
  (evaluated with a simple JSONPath), or ``Name`` + ``Age`` when none exist;
* pods, namespaces, nodes and events: the usual built-in printer columns;
* everything else: ``Name`` + ``Created At`` (the default table convertor).
"""

from __future__ import annotations

import datetime
import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

NAME_COLUMN: dict[str, Any] = {
    "name": "Name",
    "type": "string",
    "format": "name",
    "description": "Name must be unique within a namespace.",
    "priority": 0,
}
AGE_COLUMN: dict[str, Any] = {
    "name": "Age",
    "type": "date",
    "format": "",
    "description": "CreationTimestamp is a timestamp representing the server time "
    "when this object was created.",
    "priority": 0,
}

_TOKEN_RE = re.compile(
    r"""\.\.?(?P<field>[A-Za-z0-9_\-$]+)
      | \[\s*'(?P<quoted>[^']*)'\s*\]
      | \[\s*"(?P<dquoted>[^"]*)"\s*\]
      | \[\s*(?P<index>-?\d+)\s*\]
      | \[\s*(?P<star>\*)\s*\]
      | \[\s*\?\(\s*@(?P<fpath>[.A-Za-z0-9_\-]+)\s*(?P<fop>==|!=)\s*
            (?:"(?P<fdq>[^"]*)"|'(?P<fsq>[^']*)'|(?P<fnum>[-0-9.]+|true|false))\s*\)\s*\]
      | \.(?P<dotstar>\*)
    """,
    re.VERBOSE,
)


def jsonpath_find(obj: Any, path: str) -> list[Any]:
    """Evaluate a simple JSONPath (as in ``additionalPrinterColumns``); missing keys → []."""
    path = path.strip()
    if path.startswith("{") and path.endswith("}"):
        path = path[1:-1].strip()
    if path.startswith("$"):
        path = path[1:]
    current: list[Any] = [obj]
    pos = 0
    while pos < len(path):
        m = _TOKEN_RE.match(path, pos)
        if m is None:
            raise ValueError(f"unsupported JSONPath {path!r} at {pos}")
        pos = m.end()
        nxt: list[Any] = []
        for value in current:
            key = m["field"] or m["quoted"] or m["dquoted"]
            if key is not None:
                if isinstance(value, Mapping) and key in value:
                    nxt.append(value[key])
            elif m["index"] is not None:
                idx = int(m["index"])
                if isinstance(value, list) and -len(value) <= idx < len(value):
                    nxt.append(value[idx])
            elif m["star"] or m["dotstar"]:
                if isinstance(value, list):
                    nxt.extend(value)
                elif isinstance(value, Mapping):
                    nxt.extend(value.values())
            elif m["fpath"] is not None and isinstance(value, list):
                wanted: Any = m["fdq"] if m["fdq"] is not None else m["fsq"]
                if wanted is None:
                    wanted = json.loads(m["fnum"])
                for item in value:
                    found = jsonpath_find(item, m["fpath"])
                    hit = bool(found) and found[0] == wanted
                    if hit == (m["fop"] == "=="):
                        nxt.append(item)
        current = nxt
    return current


def parse_timestamp(value: str | None) -> datetime.datetime | None:
    """Parse an RFC 3339 timestamp as the API server writes it."""
    if not value:
        return None
    try:
        return datetime.datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None


def human_duration(seconds: float) -> str:
    """The same rounding as ``k8s.io/apimachinery/pkg/util/duration.HumanDuration``."""
    if seconds < -1:
        return "<invalid>"
    if seconds < 0:
        return "0s"
    s = int(seconds)
    if s < 60 * 2:
        return f"{s}s"
    minutes = s // 60
    if minutes < 10:
        return f"{minutes}m" if s % 60 == 0 else f"{minutes}m{s % 60}s"
    if minutes < 60 * 3:
        return f"{minutes}m"
    hours = minutes // 60
    if hours < 8:
        return f"{hours}h" if minutes % 60 == 0 else f"{hours}h{minutes % 60}m"
    if hours < 48:
        return f"{hours}h"
    if hours < 24 * 8:
        return f"{hours // 24}d" if hours % 24 == 0 else f"{hours // 24}d{hours % 24}h"
    if hours < 24 * 365 * 2:
        return f"{hours // 24}d"
    if hours < 24 * 365 * 8:
        days = hours // 24
        return f"{days // 365}y" if days % 365 == 0 else f"{days // 365}y{days % 365}d"
    return f"{hours // 24 // 365}y"


def age(timestamp: str | None, now: datetime.datetime | None = None) -> str:
    """A human-readable age of an RFC 3339 timestamp, or ``<unknown>``."""
    parsed = parse_timestamp(timestamp)
    if parsed is None:
        return "<unknown>"
    now = now or datetime.datetime.now(datetime.UTC)
    return human_duration((now - parsed).total_seconds())


def _cell(column_type: str, values: list[Any]) -> Any:
    if not values:
        return None
    value = values[0]
    if column_type == "string":
        if isinstance(value, str):
            return value
        if isinstance(value, dict | list):
            return json.dumps(value)
        return str(value).lower() if isinstance(value, bool) else str(value)
    if column_type == "integer":
        return (
            int(value) if isinstance(value, int | float) and not isinstance(value, bool) else None
        )
    if column_type == "number":
        return (
            float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None
        )
    if column_type == "boolean":
        return value if isinstance(value, bool) else None
    if column_type == "date":
        return age(value) if isinstance(value, str) else None
    return None


def custom_columns(printer_columns: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Column definitions for a CRD version (with the default Age when none are declared)."""
    columns = [dict(NAME_COLUMN)]
    if not printer_columns:
        return [*columns, dict(AGE_COLUMN)]
    for col in printer_columns:
        columns.append(
            {
                "name": col["name"],
                "type": col.get("type", "string"),
                "format": col.get("format", ""),
                "description": col.get("description")
                or f"Custom resource definition column (in JSONPath format): {col['jsonPath']}",
                "priority": col.get("priority", 0),
            }
        )
    return columns


def custom_cells(obj: Mapping[str, Any], printer_columns: Sequence[Mapping[str, Any]]) -> list[Any]:
    """Row cells of a custom resource for its CRD version's printer columns."""
    name = obj.get("metadata", {}).get("name", "")
    if not printer_columns:
        return [name, age(obj.get("metadata", {}).get("creationTimestamp"))]
    cells: list[Any] = [name]
    for col in printer_columns:
        try:
            found = jsonpath_find(obj, col["jsonPath"])
        except ValueError:
            found = []
        cells.append(_cell(col.get("type", "string"), found))
    return cells


def _pod_status(pod: Mapping[str, Any]) -> str:
    status = pod.get("status", {})
    reason = status.get("reason") or status.get("phase") or "Unknown"
    for cond in status.get("conditions", []):
        if cond.get("type") == "PodScheduled" and cond.get("reason") == "SchedulingGated":
            reason = "SchedulingGated"
    for cs in status.get("containerStatuses", []):
        state = cs.get("state", {})
        if state.get("waiting", {}).get("reason"):
            reason = state["waiting"]["reason"]
        elif state.get("terminated", {}).get("reason"):
            reason = state["terminated"]["reason"]
    if pod.get("metadata", {}).get("deletionTimestamp"):
        reason = "Terminating"
    return str(reason)


def _pod_row(pod: Mapping[str, Any]) -> list[Any]:
    statuses = pod.get("status", {}).get("containerStatuses", [])
    containers = pod.get("spec", {}).get("containers", [])
    ready = sum(1 for cs in statuses if cs.get("ready"))
    restarts = sum(int(cs.get("restartCount", 0)) for cs in statuses)
    return [
        pod.get("metadata", {}).get("name", ""),
        f"{ready}/{len(containers)}",
        _pod_status(pod),
        str(restarts),
        age(pod.get("metadata", {}).get("creationTimestamp")),
        pod.get("status", {}).get("podIP") or "<none>",
        pod.get("spec", {}).get("nodeName") or "<none>",
        "<none>",
        "<none>",
    ]


def _column(name: str, type_: str = "string", priority: int = 0) -> dict[str, Any]:
    return {"name": name, "type": type_, "format": "", "description": name, "priority": priority}


_BUILTIN_COLUMNS: dict[str, list[dict[str, Any]]] = {
    "pods": [
        dict(NAME_COLUMN),
        _column("Ready"),
        _column("Status"),
        _column("Restarts", "string"),
        dict(AGE_COLUMN),
        _column("IP", priority=1),
        _column("Node", priority=1),
        _column("Nominated Node", priority=1),
        _column("Readiness Gates", priority=1),
    ],
    "namespaces": [dict(NAME_COLUMN), _column("Status"), dict(AGE_COLUMN)],
    "nodes": [
        dict(NAME_COLUMN),
        _column("Status"),
        _column("Roles"),
        dict(AGE_COLUMN),
        _column("Version"),
    ],
    "events": [
        _column("Last Seen"),
        _column("Type"),
        _column("Reason"),
        _column("Object"),
        _column("Message"),
    ],
}


def _event_row(ev: Mapping[str, Any]) -> list[Any]:
    involved = ev.get("involvedObject") or ev.get("regarding") or {}
    seen = (
        ev.get("lastTimestamp")
        or ev.get("eventTime")
        or ev.get("metadata", {}).get("creationTimestamp")
    )
    return [
        age(seen),
        ev.get("type", ""),
        ev.get("reason", ""),
        f"{str(involved.get('kind', '')).lower()}/{involved.get('name', '')}",
        ev.get("message") or ev.get("note") or "",
    ]


def _builtin_row(plural: str, obj: Mapping[str, Any]) -> list[Any]:
    meta = obj.get("metadata", {})
    if plural == "pods":
        return _pod_row(obj)
    if plural == "namespaces":
        phase = (
            "Terminating"
            if meta.get("deletionTimestamp")
            else obj.get("status", {}).get("phase", "Active")
        )
        return [meta.get("name", ""), phase, age(meta.get("creationTimestamp"))]
    if plural == "nodes":
        ready = any(
            c.get("type") == "Ready" and c.get("status") == "True"
            for c in obj.get("status", {}).get("conditions", [])
        )
        version = obj.get("status", {}).get("nodeInfo", {}).get("kubeletVersion", "")
        return [
            meta.get("name", ""),
            "Ready" if ready else "NotReady",
            "<none>",
            age(meta.get("creationTimestamp")),
            version,
        ]
    if plural == "events":
        return _event_row(obj)
    return [meta.get("name", ""), meta.get("creationTimestamp", "")]


def build_table(
    *,
    plural: str,
    objects: Sequence[Mapping[str, Any]],
    printer_columns: Sequence[Mapping[str, Any]] | None,
    resource_version: str,
    include_object: str = "PartialObjectMetadata",
    continue_token: str = "",
) -> dict[str, Any]:
    """Render a ``meta.k8s.io/v1`` Table for the objects of one resource."""
    if printer_columns is not None:
        columns = custom_columns(printer_columns)
    else:
        columns = _BUILTIN_COLUMNS.get(plural) or [
            dict(NAME_COLUMN),
            {**_column("Created At", "date"), "description": AGE_COLUMN["description"]},
        ]
    rows: list[dict[str, Any]] = []
    for obj in objects:
        if printer_columns is not None:
            cells = custom_cells(obj, printer_columns)
        else:
            cells = _builtin_row(plural, obj)
        row: dict[str, Any] = {"cells": cells}
        if include_object == "Object":
            row["object"] = obj
        elif include_object != "None":
            row["object"] = {
                "kind": "PartialObjectMetadata",
                "apiVersion": "meta.k8s.io/v1",
                "metadata": obj.get("metadata", {}),
            }
        rows.append(row)
    metadata: dict[str, Any] = {"resourceVersion": resource_version}
    if continue_token:
        metadata["continue"] = continue_token
    return {
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": metadata,
        "columnDefinitions": columns,
        "rows": rows,
    }
