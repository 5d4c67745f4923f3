"""The mutating webhook that gates, at their creation, the pods another controller creates
(Argo's, Airflow's): one kopf handler per kind, each told which pods are its kind's and
how to gate them (``api.argo_pods.with_our_gate`` behind each kind's own test). The
server they share is deploy/components/webhook's.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import kopf


def gate_pods(
    registry: kopf.OperatorRegistry,
    webhook_id: str,
    labels: Mapping[str, Any],
    gates: Callable[[Mapping[str, Any]], list[dict[str, Any]] | None],
) -> None:
    """Serve the mutating webhook `webhook_id` (its URL path), which sets the scheduling
    gates `gates` gives a pod with `labels` at its creation (None: not a pod of ours, left
    as it is). Stateless, so it answers before the rebuild; Argo's and Airflow's pods."""

    @kopf.on.mutate(
        "v1",
        "pods",
        registry=registry,
        id=webhook_id,
        operations=["CREATE"],
        labels=labels,
        side_effects=False,
    )
    def gate(body: kopf.Body, patch: kopf.Patch, **_: Any) -> None:
        with_ours = gates(body)
        if with_ours is not None:
            patch.spec["schedulingGates"] = with_ours
