"""Pods: every pod's event (the operator's index of pods, the nodes' room, a task pod to its
pool), Argo's and Airflow's pods to their sides, and the webhook that gates theirs at
creation."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import kopf

from idlegate.operator.features.airflow import AirflowSide
from idlegate.operator.features.argo import ArgoSide
from idlegate.operator.runtime import Operator


async def pod_event(
    operator: Operator, event: kopf.RawEvent, labels: kopf.Labels, **_: Any
) -> None:
    operator.pod_seen(event, labels)


async def argo_pod_event(side: ArgoSide, type: str | None, event: kopf.RawEvent, **_: Any) -> None:
    await side.pod_seen(type == "DELETED", event["object"])


async def airflow_pod_event(
    side: AirflowSide, type: str | None, event: kopf.RawEvent, **_: Any
) -> None:
    await side.pod_seen(type == "DELETED", event["object"])


def gate(
    gates: Callable[[Mapping[str, Any]], list[dict[str, Any]] | None],
    body: kopf.Body,
    patch: kopf.Patch,
    **_: Any,
) -> None:
    """A pod of another controller's at its creation: the scheduling gates `gates` gives it
    (None: not a pod of ours, left as it is). Stateless, so it answers before the
    rebuild."""
    with_ours = gates(body)
    if with_ours is not None:
        patch.spec["schedulingGates"] = with_ours
