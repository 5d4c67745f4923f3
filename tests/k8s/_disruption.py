"""PodDisruptionBudgets as the Eviction API reads them (the test API server's eviction
subresource, :meth:`tests.k8s.apiserver.Emulator.evict`).

A budget selects the pods of its namespace by ``spec.selector.matchLabels`` (and
``matchExpressions`` of the ``In``, ``NotIn``, ``Exists`` and ``DoesNotExist`` kinds) and
allows a disruption while the pods it selects that are healthy (Running, not being
deleted) stay at least ``minAvailable`` after it, or those unhealthy stay at most
``maxUnavailable`` (an integer, or a percentage of the pods it selects, rounded up as
the disruption controller does). The real server reads ``status.disruptionsAllowed``,
which its disruption controller keeps; this one works it out at each eviction, from the
pods as they are.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any


def selects(budget: Mapping[str, Any], pod: Mapping[str, Any]) -> bool:
    """The budget's selector picks `pod` (an empty selector picks every pod)."""
    selector = (budget.get("spec") or {}).get("selector") or {}
    labels = (pod.get("metadata") or {}).get("labels") or {}
    if any(labels.get(k) != v for k, v in (selector.get("matchLabels") or {}).items()):
        return False
    for term in selector.get("matchExpressions") or []:
        key, op, values = term["key"], term["operator"], term.get("values") or []
        found = {
            "In": labels.get(key) in values,
            "NotIn": labels.get(key) not in values,
            "Exists": key in labels,
            "DoesNotExist": key not in labels,
        }.get(op)
        if found is None:
            raise ValueError(f"the test API server knows no selector operator {op!r}")
        if not found:
            return False
    return True


def healthy(pod: Mapping[str, Any]) -> bool:
    """Running and not being deleted: a pod a disruption would take away."""
    running = (pod.get("status") or {}).get("phase") == "Running"
    return running and not (pod.get("metadata") or {}).get("deletionTimestamp")


def _count(value: int | str, total: int) -> int:
    """An IntOrString of a budget: the integer, or the percentage of `total` rounded up."""
    if isinstance(value, str) and value.endswith("%"):
        return math.ceil(int(value[:-1]) * total / 100)
    return int(value)


def disruptions_allowed(budget: Mapping[str, Any], pods: Sequence[Mapping[str, Any]]) -> int:
    """How many of the pods `budget` selects among `pods` may be disrupted now."""
    spec = budget.get("spec") or {}
    chosen = [p for p in pods if selects(budget, p)]
    live = [
        p for p in chosen if (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed")
    ]
    up = sum(healthy(p) for p in live)
    if spec.get("maxUnavailable") is not None:
        return _count(spec["maxUnavailable"], len(live)) - (len(live) - up)
    return up - _count(spec.get("minAvailable", 1), len(live))
