"""What kube-apiserver does to a custom resource with its CRD's structural schema, on every
write: fields the schema does not declare are pruned, silently, and a missing field with a
``default`` is given it. The test API server applies it (tests/k8s/apiserver.py), so that a
status field the operator writes but the CRD does not declare is lost here as on a real
cluster (tests/real runs the same scenarios there). Validation is not emulated: the real
control plane's tests cover it.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

TOP = ("apiVersion", "kind", "metadata")
"""Top-level fields the API server keeps whatever the schema says."""


def structural(schema: Mapping[str, Any], obj: Mapping[str, Any]) -> dict[str, Any]:
    """`obj` (a whole custom resource) pruned and defaulted by its version's `schema`."""
    kept = {k: v for k, v in obj.items() if k in TOP}
    rest = prune({k: v for k, v in obj.items() if k not in TOP}, schema)
    return {**kept, **rest}


def prune(value: Any, schema: Mapping[str, Any]) -> Any:
    """`value` with what `schema` does not declare removed and its defaults filled in."""
    if isinstance(value, list):
        items = schema.get("items")
        return [prune(item, items) for item in value] if isinstance(items, Mapping) else value
    if not isinstance(value, Mapping):
        return value
    properties: Mapping[str, Any] = schema.get("properties") or {}
    extra = schema.get("additionalProperties")
    keep_unknown = bool(schema.get("x-kubernetes-preserve-unknown-fields")) or extra is True
    result: dict[str, Any] = {}
    for key, item in value.items():
        if key in properties:
            result[key] = prune(item, properties[key])
        elif isinstance(extra, Mapping):
            result[key] = prune(item, extra)
        elif keep_unknown:
            result[key] = item
    for key, sub in properties.items():
        if key not in result and "default" in sub:
            result[key] = prune(copy.deepcopy(sub["default"]), sub)
    return result
