"""Server-side printing: the ``meta.k8s.io/v1`` Table that ``kubectl get`` asks for.

``kubectl get`` sends ``Accept: application/json;as=Table;...`` and prints the cells it gets
back; for a custom resource they are the name and the CRD version's
``additionalPrinterColumns`` (dotted JSONPaths only, which is what the project's CRD
declares), for anything else the name and the age.
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping, Sequence
from typing import Any

AGE = {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}


def age(timestamp: str) -> str:
    """How long ago `timestamp` (RFC 3339) was, as kubectl prints it (``42s``, ``3m``)."""
    then = datetime.datetime.fromisoformat(timestamp.replace("Z", "+00:00"))
    seconds = max(0, int((datetime.datetime.now(datetime.UTC) - then).total_seconds()))
    return f"{seconds}s" if seconds < 120 else f"{seconds // 60}m"


def _cell(obj: Mapping[str, Any], column: Mapping[str, Any]) -> Any:
    value: Any = obj
    for part in column["jsonPath"].strip(".").split("."):
        value = value.get(part) if isinstance(value, Mapping) else None
    if value is None:
        return None
    return age(value) if column.get("type") == "date" else value


def table(objects: Sequence[Mapping[str, Any]], columns: Sequence[Mapping[str, Any]]) -> dict:
    """The Table of `objects` under `columns` (printer columns; none: the age only)."""
    columns = list(columns) or [AGE]
    definitions = [{"name": "Name", "type": "string", "format": "name"}]
    definitions += [{"name": c["name"], "type": c.get("type", "string")} for c in columns]
    rows = [
        {
            "cells": [obj["metadata"]["name"], *(_cell(obj, c) for c in columns)],
            "object": {
                "kind": "PartialObjectMetadata",
                "apiVersion": "meta.k8s.io/v1",
                "metadata": obj["metadata"],
            },
        }
        for obj in objects
    ]
    return {
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": {},
        "columnDefinitions": definitions,
        "rows": rows,
    }
