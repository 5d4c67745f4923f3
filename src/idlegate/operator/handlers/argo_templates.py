"""Argo's WorkflowTemplates and ClusterWorkflowTemplates (``--argo``): what a Workflow that
references one is mapped from."""

from __future__ import annotations

from typing import Any

import kopf

from idlegate.operator.features.argo import ArgoSide


async def template_event(side: ArgoSide, type: str | None, event: kopf.RawEvent, **_: Any) -> None:
    side.template_seen(type == "DELETED", event["object"])
